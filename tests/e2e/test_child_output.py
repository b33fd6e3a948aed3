"""What child processes print is bounded and kept: an interpreter that prints without end (issue 42), the
framework child's stderr in doctor and fix, and the exact bytes of a path in `env`'s shell lines."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.fakes import REPO, child_env, interpreter, run_cli

from cudamatrix import proc
from cudamatrix.models import Report
from cudamatrix.render import report_lines
from cudamatrix.safe.shells import NotExact, export_line
from cudamatrix.verify.run import check

# a "python" that prints without end, on stdout or on stderr
ENDLESS = {"stdout": "#!/bin/sh\nexec yes CUDAMATRIX\n", "stderr": "#!/bin/sh\nexec yes CUDAMATRIX >&2\n"}
# the CLI in a child whose address space is bounded: reading everything the fake prints would fail there
_BOUNDED = ("import resource, runpy, sys; resource.setrlimit(resource.RLIMIT_AS, ({0}, {0})); "
            "sys.argv[0] = 'cudamatrix'; runpy.run_module('cudamatrix', run_name='__main__')")
MEMORY_LIMIT = 1536 * 2**20


def _fake(tmp_path: Path, where: str) -> Path:
    fake = tmp_path / "bin" / "python"
    fake.parent.mkdir(exist_ok=True)
    fake.write_text(ENDLESS[where])
    fake.chmod(0o755)
    return fake


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["detect"], ["doctor"], ["solve", "torch"], ["lock", "torch", "--pins-only"],
                                  ["check"], ["env"], ["fix", "--dry-run"], ["verify"]])
def test_a_python_that_prints_without_end_is_stopped_in_every_command(tmp_path, argv):
    fake = _fake(tmp_path, "stdout")
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-c", _BOUNDED.format(MEMORY_LIMIT), *argv, "--python", str(fake)],
                         cwd=REPO, env=child_env(), capture_output=True, text=True, timeout=120)
    assert "Traceback" not in out.stderr, out.stderr[-2000:]
    # verify's failures are its own exit status (5), as for an interpreter that hangs: each framework's cause
    code, said = (5, out.stdout) if argv == ["verify"] else (2, out.stderr)
    assert out.returncode == code, (out.returncode, out.stdout[-500:], out.stderr[-500:])
    assert "printed more than 64 MiB on stdout, and was stopped" in said
    assert time.monotonic() - start < 60


@pytest.mark.slow
@pytest.mark.parametrize("where", ["stdout", "stderr"])
def test_the_subprocess_helper_bounds_each_pipe_and_kills_the_child(tmp_path, where):
    fake = _fake(tmp_path, where)
    lines: list[str] = []
    for on_output in (None, lines.append):
        pids: list[int] = []
        r = proc.run([str(fake)], timeout=60, on_output=on_output, max_output=2**20, on_start=pids.append)
        assert r.overflow == where and r.returncode is None and not r.timed_out
        assert r.error == f"printed more than 1 MiB on {where}, and was stopped"
        assert len(getattr(r, where)) == 2**20  # what was read, no more
        assert r.seconds < 30 and not proc.group_alive(pids[0])  # killed, and reaped
    assert lines and set(lines) == {"CUDAMATRIX"}  # whole lines only; the cut one is not a line


def test_the_subprocess_helper_keeps_text_mode_output():
    r = proc.run(["sh", "-c", "printf 'a\\r\\nb\\rc\\377'; printf 'e' >&2; exit 3"], timeout=10)
    assert (r.returncode, r.stdout, r.stderr, r.overflow) == (3, "a\nb\nc\ufffd", "e", None)
    lines: list[str] = []
    r = proc.run(["sh", "-c", "printf 'x\\ny'"], timeout=10, on_output=lines.append)
    assert (r.stdout, lines) == ("x\ny", ["x", "y"])
    assert proc.run(["cat"], timeout=10, input="in\n").stdout == "in\n"


# --- env: the exact bytes of a folder name that is not UTF-8 ----------------------------------------------

NOT_UTF8 = b"/srv/b\xff\xfe'$(touch X)\x80\xc3/lib"  # bytes no UTF-8 decoder takes, a quote, a command
_SAVED = {"origin": "file", "driver": {"version": "535.104.05", "status": "ok"},
          "gpus": [{"index": 0, "name": "Tesla T4", "compute_capability": "7.5"}],
          "python": {"version": "3.10.12", "platform": "linux_x86_64"},
          "libraries": [
              {"name": "cudnn", "soname": "libcudnn.so.9", "path": "/srv/cudnn8/lib/libcudnn.so.9", "version": "9.0.0",
               "origin": "LD_LIBRARY_PATH", "loaded_first": True},
              {"name": "cudnn", "soname": "libcudnn.so.9", "path": "/v/site-packages/nvidia/cudnn/lib/libcudnn.so.9",
               "version": "9.1.0", "origin": "wheel:nvidia-cudnn-cu12", "loaded_first": False}],
          # the loader model's prediction: torch maps the LD_LIBRARY_PATH copy instead of its wheel's
          "library_loads": [{"framework": "torch", "soname": "libcudnn.so.9", "path": "/srv/cudnn8/lib/libcudnn.so.9",
                             "rule": "LD_LIBRARY_PATH", "found_as": "/srv/cudnn8/lib/libcudnn.so.9",
                             "expected": "/v/site-packages/nvidia/cudnn/lib/libcudnn.so.9",
                             "expected_rule": "DT_RUNPATH of libtorch_cuda.so"}],
          "packages": {"torch": "2.5.1+cu121", "nvidia-cudnn-cu12": "9.1.0.70"},
          "frameworks": [{"name": "torch", "version": "2.5.1+cu121", "variant": "cu121", "cuda": "12.1"}]}
# the variable's bytes, as the process the shell starts sees them
_ENVIRONB = "import os, sys; sys.stdout.buffer.write(os.environb[b'LD_LIBRARY_PATH'])"


def _sourced(shell: str, script: Path, cwd: Path) -> bytes | None:
    """``script`` sourced by ``shell``, then the bytes of LD_LIBRARY_PATH in a child; None without that shell."""
    exe = shutil.which(shell)
    if exe is None:
        return None
    run_python = f"{sys.executable} -c \"{_ENVIRONB}\""
    argv = ([exe, "--no-config", "-c", f"source {script}; {run_python}"] if shell == "fish" else
            [exe, "-c", f'. "{script}"; {run_python}'])
    done = subprocess.run(argv, capture_output=True, cwd=cwd, timeout=60, env={**os.environ, "LC_ALL": "C.UTF-8"})
    assert done.returncode == 0, (shell, done.stderr)
    return done.stdout


def _saved_with(tmp_path: Path, folder: bytes) -> Path:
    doc = dict(_SAVED, context={"env": {"LD_LIBRARY_PATH": "/srv/cudnn8/lib:" + os.fsdecode(folder)}})
    path = tmp_path / "env.json"
    path.write_text(json.dumps(doc))  # a lone surrogate is written as \udcff, as detect --json writes it
    return path


@pytest.mark.slow
@pytest.mark.parametrize("shell", ["bash", "dash", "sh", "zsh", "fish"])
def test_env_lines_set_the_exact_bytes_of_a_folder_that_is_not_utf8(tmp_path, shell):
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed here")
    out = run_cli(["env", "--env", str(_saved_with(tmp_path, NOT_UTF8)), "--shell",
                   {"dash": "sh"}.get(shell, shell)], env=dict(os.environ), text=True)
    assert out.returncode == 0, out.stderr
    assert "\\udc" not in out.stdout and out.stdout.isascii(), out.stdout
    script = tmp_path / "out.sh"
    script.write_text(out.stdout)
    assert _sourced(shell, script, tmp_path) == NOT_UTF8
    assert not (tmp_path / "X").exists()


@pytest.mark.slow
@pytest.mark.parametrize("shell", ["bash", "dash", "zsh", "fish"])
def test_every_byte_sources_back_exactly(tmp_path, shell):
    script = tmp_path / "x.sh"
    value = b"/srv/" + bytes(range(0x80, 0x100)) + b"\x1b\x7f:/lib"
    script.write_text(export_line({"dash": "sh"}.get(shell, shell), "LD_LIBRARY_PATH", os.fsdecode(value)) + "\n")
    got = _sourced(shell, script, tmp_path)
    if got is None:
        pytest.skip(f"{shell} is not installed here")
    assert got == value


def test_a_line_that_cannot_be_exact_is_refused(tmp_path):
    with pytest.raises(NotExact):
        export_line("powershell", "LD_LIBRARY_PATH", os.fsdecode(b"/srv/\xff/lib"))
    for shell in ("bash", "sh", "fish"):  # a lone surrogate that no byte stands for
        with pytest.raises(NotExact):
            export_line(shell, "K", "/srv/\ud800/lib")
    out = run_cli(["env", "--env", str(_saved_with(tmp_path, NOT_UTF8)), "--shell", "powershell"],
                  env=dict(os.environ), text=True)
    assert (out.returncode, out.stdout) == (2, "") and "Traceback" not in out.stderr
    assert "cannot write an exact powershell line" in out.stderr
    # a saved environment edited by hand: a lone surrogate no byte stands for
    doc = json.loads((tmp_path / "env.json").read_text())
    doc["context"]["env"]["LD_LIBRARY_PATH"] = "/srv/cudnn8/lib:/srv/\ud800/lib"
    (tmp_path / "env.json").write_text(json.dumps(doc))
    out = run_cli(["env", "--env", str(tmp_path / "env.json")], env=dict(os.environ), text=True)
    assert (out.returncode, out.stdout) == (2, "") and "cannot write an exact bash line" in out.stderr
    out = run_cli(["solve", "torch", "--env", str(tmp_path / "env.json")], env=dict(os.environ), text=True)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert "# LD_LIBRARY_PATH not shown: '/srv/\\ud800/lib' holds bytes" in out.stdout


# --- a child's stderr is kept and said, never passed to the terminal --------------------------------------

CHATTY_CUDNN = r"""
#include <stdio.h>
#include <stddef.h>
__attribute__((constructor)) static void chatter(void) {
    fprintf(stderr, "Unable to load any of {libcudnn_graph.so.9.1.0, libcudnn_graph.so.9}\n");
}
size_t cudnnGetVersion(void) { return 90100; }
"""
CHATTER = "Unable to load any of {libcudnn_graph.so.9.1.0, libcudnn_graph.so.9}"


@pytest.fixture(scope="module")
def chatty_venv(tmp_path_factory) -> Path:
    """A venv whose nvidia-cudnn-cu12 wheel's libcudnn.so.9 writes on stderr when it is loaded (as cuDNN 9's shim
    does when its sub-libraries are not on the search path)."""
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc to build the library")
    root = tmp_path_factory.mktemp("chatty")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "v")], check=True, timeout=120)
    site = next((root / "v" / "lib").glob("python3*/site-packages"))
    lib = site / "nvidia" / "cudnn" / "lib"
    lib.mkdir(parents=True)
    (root / "c.c").write_text(CHATTY_CUDNN)
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libcudnn.so.9", "-o", str(lib / "libcudnn.so.9"),
                    str(root / "c.c")], check=True, timeout=120)
    info = site / "nvidia_cudnn_cu12-9.1.0.70.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: nvidia-cudnn-cu12\nVersion: 9.1.0.70\n\n")
    (info / "RECORD").write_text("nvidia/cudnn/lib/libcudnn.so.9,,\n")
    return root / "v" / "bin" / "python"


@pytest.mark.slow
@pytest.mark.parametrize("forked", [True, False])
@pytest.mark.parametrize("cmd", ["doctor", "detect"])
def test_a_library_probe_childs_stderr_is_kept_not_passed_on(chatty_venv, tmp_path, cmd, forked):
    env = child_env()
    if not forked:  # an LD_LIBRARY_PATH entry a started child is denied: the libraries' child is started, not forked
        env["LD_LIBRARY_PATH"] = "relative/entry"
    human = subprocess.run([sys.executable, "-m", "cudamatrix", cmd, "--python", str(chatty_venv)], cwd=REPO,
                           env=env, capture_output=True, text=True, timeout=120)
    assert human.returncode in (0, 1) and "Traceback" not in human.stderr, human.stderr
    assert CHATTER not in human.stderr.replace("last: " + CHATTER, "")  # only in detect's one-line note
    if cmd == "detect":
        assert "the libraries probe's child wrote 1 line(s) on stderr" in human.stdout + human.stderr
    out = subprocess.run([sys.executable, "-m", "cudamatrix", cmd, "--python", str(chatty_venv), "--json"], cwd=REPO,
                         env=env, capture_output=True, text=True, timeout=120)
    assert CHATTER not in out.stderr
    environment = json.loads(out.stdout)["data"]["environment"]
    assert environment["child_stderr"]["libraries"].strip() == CHATTER
    assert any(lib["path"].endswith("nvidia/cudnn/lib/libcudnn.so.9") for lib in environment["libraries"])


def test_a_verified_childs_stderr_is_counted_kept_and_said_in_one_line(tmp_path):
    warnings = "\n".join(f"UserWarning: numpy warning {i}" for i in range(30))
    py = interpreter(tmp_path, [{"stage": "imported", "version": "2.5.1"},
                                {"stage": "result", "status": "verified", "mapped_libraries": []}], stderr=warnings)
    report = check(py, "torch", gpu_expected=True, timeout=60, env=dict(os.environ))
    assert report.status == "verified"
    assert report.stderr_lines == 30 and report.stderr_tail.splitlines()[-1] == "UserWarning: numpy warning 29"
    assert report.to_dict()["stderr_lines"] == 30
    lines = report_lines(Report(status="verified", frameworks=[report]))
    assert "  the check's child wrote 30 line(s) on stderr (not shown; --json: stderr_tail)" in lines
    assert not any("numpy warning" in line for line in lines)
