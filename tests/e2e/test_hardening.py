"""Hostile input, one attack per test: nothing runs from the cache, nothing is clobbered, nothing is injected,
nothing hangs, and bad input is a clear message with exit 2 (never a traceback). Every test runs the real
CLI (in this process, or in a process of its own where the attack needs one: a library path or a locale read at
process start, a planted library constructor), or the real module against real files, FIFOs, devices and
gcc-built libraries."""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import tomlread
from support.fakes import run_cli, spawn_cli

ENVELOPE = {"schema_version", "command", "status", "exit_code", "data", "errors"}
HAVE_GCC = shutil.which("gcc") is not None


def cli(*args: str, env: dict | None = None, cwd: str | Path | None = None, stdin: str = "",
        timeout: float = 120) -> subprocess.CompletedProcess:
    """The CLI in this process, ``env`` over this process's environment."""
    return run_cli(list(args), env={**os.environ, **(env or {})}, input=stdin, timeout=timeout, text=True, cwd=cwd)


def cli_process(*args: str, env: dict | None = None, cwd: str | Path | None = None,
                timeout: float = 120) -> subprocess.CompletedProcess:
    """The CLI in a process of its own, ``env`` over this process's environment."""
    return spawn_cli(list(args), env={**os.environ, **(env or {})}, timeout=timeout, text=True, cwd=cwd)


def clean_error(out: subprocess.CompletedProcess, code: int = 2) -> None:
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode == code, (out.returncode, out.stdout[-500:], out.stderr[-500:])


def envelope(out: subprocess.CompletedProcess) -> dict:
    doc = json.loads(out.stdout)
    assert set(doc) == ENVELOPE
    assert doc["exit_code"] == out.returncode
    return doc


def saved_env(tmp_path: Path, doc: dict, name: str = "env.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return p


BASE_ENV = {"origin": "file", "driver": {"version": "535.104.05", "status": "ok"},
            "gpus": [{"index": 0, "name": "Tesla T4", "compute_capability": "7.5"}],
            "python": {"version": "3.10.12", "platform": "linux_x86_64"}}


# --- every read bounded; FIFOs and devices refused up front -------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("argv", [["detect", "--from"], ["detect", "--env"], ["doctor", "--from"],
                                  ["doctor", "--env"], ["check", "--driver", "535.104.05", "-r"],
                                  ["solve", "torch", "--env"]])
def test_a_fifo_as_input_is_refused_without_waiting(tmp_path, argv):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    start = time.monotonic()
    out = cli(*argv, str(fifo), timeout=60)
    clean_error(out)
    assert "FIFO" in out.stderr
    assert time.monotonic() - start < 30


@pytest.mark.slow
def test_check_r_dev_zero_exits_2_fast():
    start = time.monotonic()
    out = cli("check", "-r", "/dev/zero", "--driver", "535.104.05", "--gpu", "7.5", timeout=60)
    clean_error(out)
    assert "character device" in out.stderr
    assert time.monotonic() - start < 30


@pytest.mark.slow
def test_a_matrix_folder_with_a_fifo_is_refused(tmp_path):
    import cudamatrix.matrix.data as data

    folder = tmp_path / "data"
    shutil.copytree(data.default_data_dir(), folder)
    (folder / "gpus.json").unlink()
    os.mkfifo(folder / "gpus.json")
    out = cli("matrix", "validate", str(folder), timeout=60)
    clean_error(out)
    out = cli("doctor", "--data", str(folder), timeout=60)
    clean_error(out)


def test_read_bytes_refuses_non_regular_files_and_bounds_size(tmp_path):
    from cudamatrix.errors import UsageError
    from cudamatrix.safe.files import read_bytes

    for path in ("/dev/zero", str(tmp_path)):
        with pytest.raises(UsageError):
            read_bytes(path)
    big = tmp_path / "big"
    big.write_bytes(b"x" * 2000)
    with pytest.raises(UsageError, match="larger"):
        read_bytes(big, limit=1000)
    assert read_bytes(big, limit=1000, truncate=True) == b"x" * 1000
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    with pytest.raises(UsageError):
        read_bytes(loop)


# --- output files: atomic, exclusive, never a device, FIFO or folder ----------------------------------

LOCK = ["lock", "torch", "--driver", "535.104.05", "--gpu", "7.5", "--pins-only"]  # no index here


@pytest.mark.slow
def test_lock_output_never_follows_a_planted_tmp_symlink_and_keeps_the_mode(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    out_file = tmp_path / "req.txt"
    out_file.write_text("old\n")
    out_file.chmod(0o640)
    (tmp_path / "req.txt.tmp").symlink_to(victim)
    out = cli(*LOCK, "-o", str(out_file))
    assert out.returncode == 0, out.stderr
    assert victim.read_text() == "precious\n"
    assert "torch==" in out_file.read_text()
    assert stat.S_IMODE(out_file.stat().st_mode) == 0o640
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp") and p.name != "req.txt.tmp"]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["fifo", "directory", "dev_full", "empty"])
def test_lock_output_refuses_special_files(tmp_path, kind):
    if kind == "fifo":
        target = tmp_path / "fifo"
        os.mkfifo(target)
    elif kind == "directory":
        target = tmp_path / "dir"
        target.mkdir()
    elif kind == "dev_full":
        if not os.path.exists("/dev/full"):
            pytest.skip("no /dev/full here")
        target = Path("/dev/full")
    else:
        target = ""
    before = os.stat(target).st_mode if target else None
    out = cli(*LOCK, "-o", str(target), timeout=60)
    clean_error(out)
    if before is not None:
        assert stat.S_IFMT(os.stat(target).st_mode) == stat.S_IFMT(before)
    out = cli(*LOCK, "-o", str(target), "--json", timeout=60)
    assert envelope(out)["status"] == "usage_error"


def test_write_atomic_leaves_no_temporary_on_failure(tmp_path):
    from cudamatrix.errors import UsageError
    from cudamatrix.safe.files import write_atomic

    ro = tmp_path / "ro"
    ro.mkdir()
    target = ro / "out.txt"
    write_atomic(target, "one\n")
    assert target.read_text() == "one\n"
    write_atomic(target, "two\n")
    assert target.read_text() == "two\n"
    assert sorted(p.name for p in ro.iterdir()) == ["out.txt"]
    with pytest.raises(UsageError):
        write_atomic(tmp_path / "missing-dir" / "x", "x")


# --- injection: one quoting function per shell, proved by sourcing the output -------------------------

HOSTILE_DIRS = ["a\\'\"; touch X; #", "$(touch X)", "`touch X`", "new\nline; touch X", "ünïcödé ☃", "sp ace",
                "back\\slash\\", "dollar$HOME", "brace{a,b}*?[x]", "’typographic‘ quotes",
                # control characters: written with each shell's escapes, never raw (the printed line stays inert)
                "esc\x1b[2J\x1b]8;;https://evil/\x07x", "cr\rline", "bidi\u202egnp.exe", "c1\x85\x9b'$(touch X)",
                "\x01'\x7f\\"]


def _shell_cmd(shell: str, script: Path) -> list[str] | None:
    exe = shutil.which({"powershell": "pwsh"}.get(shell, shell))
    if exe is None:
        return None
    if shell == "fish":
        return [exe, "--no-config", "-c", f"source {script}; printf '%s' \"$LD_LIBRARY_PATH\""]
    if shell == "powershell":
        return [exe, "-NoProfile", "-NonInteractive", "-Command",
                f". '{script}'; [Console]::Out.Write($env:LD_LIBRARY_PATH)"]
    return [exe, "-c", f'. "{script}"; printf "%s" "$LD_LIBRARY_PATH"']


@pytest.mark.slow
@pytest.mark.parametrize("shell", ["bash", "sh", "zsh", "fish", "powershell"])
def test_export_lines_source_back_to_the_same_value_in_each_shell(tmp_path, shell):
    from cudamatrix.safe.shells import export_line
    from cudamatrix.safe.text import CONTROLS

    script = tmp_path / "x.sh"
    if _shell_cmd(shell, script) is None:
        pytest.skip(f"{shell} is not installed here (.ci/run installs fish and zsh; pwsh only where the "
                    "system packages provide it)")
    for value in HOSTILE_DIRS:
        value = "/srv/" + value + "/lib"
        line = export_line(shell, "LD_LIBRARY_PATH", value)
        assert not CONTROLS.search(line), (shell, line)
        script.write_text(line + "\n", encoding="utf-8")
        run = subprocess.run(_shell_cmd(shell, script), capture_output=True, cwd=tmp_path, timeout=60,
                             env={**os.environ, "LC_ALL": "C.UTF-8"})
        assert not (tmp_path / "X").exists(), (shell, value)
        assert run.returncode == 0, (shell, value, run.stderr)
        assert run.stdout.decode("utf-8") == value, (shell, value, run.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("shell", ["bash", "fish", "powershell"])
def test_env_command_output_is_safe_to_source(tmp_path, shell):
    hostile = "/srv/a\\'\"; touch X; #/$(touch X)/lib"
    doc = dict(BASE_ENV, context={"env": {"LD_LIBRARY_PATH": f"/srv/cudnn8/lib:{hostile}"}}, libraries=[
        {"name": "cudnn", "soname": "libcudnn.so.9", "path": "/srv/cudnn8/lib/libcudnn.so.9", "version": "9.0.0",
         "origin": "LD_LIBRARY_PATH", "loaded_first": True},
        {"name": "cudnn", "soname": "libcudnn.so.9", "path": "/v/site-packages/nvidia/cudnn/lib/libcudnn.so.9",
         "version": "9.1.0", "origin": "wheel:nvidia-cudnn-cu12", "loaded_first": False}],
        # the loader model's prediction: torch maps the LD_LIBRARY_PATH copy instead of its wheel's
        library_loads=[{"framework": "torch", "soname": "libcudnn.so.9", "path": "/srv/cudnn8/lib/libcudnn.so.9",
                        "rule": "LD_LIBRARY_PATH", "found_as": "/srv/cudnn8/lib/libcudnn.so.9",
                        "expected": "/v/site-packages/nvidia/cudnn/lib/libcudnn.so.9",
                        "expected_rule": "DT_RUNPATH of libtorch_cuda.so"}],
        packages={"torch": "2.5.1+cu121", "nvidia-cudnn-cu12": "9.1.0.70"},
        frameworks=[{"name": "torch", "version": "2.5.1+cu121", "variant": "cu121", "cuda": "12.1"}])
    out = cli("env", "--env", str(saved_env(tmp_path, doc)), "--shell", shell)
    assert out.returncode == 0, out.stderr
    script = tmp_path / "out.sh"
    script.write_text(out.stdout)
    cmd = _shell_cmd(shell, script)
    if cmd is None:
        pytest.skip(f"{shell} is not installed here")
    run = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert not (tmp_path / "X").exists()
    assert run.stdout == hostile, run.stderr


def test_solve_human_export_line_is_quoted(tmp_path):
    from cudamatrix.safe.shells import export_line

    assert export_line("bash", "LD_LIBRARY_PATH", "/a b/$(x)") == "export LD_LIBRARY_PATH='/a b/$(x)'"
    assert export_line("fish", "K", "a\\'b") == "set -gx K 'a\\\\\\'b'"
    assert export_line("powershell", "K", "it's") == "$env:K = 'it''s'"
    with pytest.raises(ValueError):
        export_line("bash", "BAD NAME", "x")


# --- probes never load from unsafe folders ------------------------------------------------------------

CTOR_C = r"""
#include <stdio.h>
#include <stdlib.h>
__attribute__((constructor)) static void planted(void) {
    const char *mark = getenv("PLANTED_MARK");
    FILE *f = mark ? fopen(mark, "w") : NULL;
    if (f) { fputs("ran", f); fclose(f); }
}
int cudaRuntimeGetVersion(int *v) { *v = 12040; return 0; }
"""


def _planted_lib(folder: Path) -> Path:
    src = folder / "planted.c"
    src.write_text(CTOR_C)
    lib = folder / "libcudart.so.12"
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libcudart.so.12", "-o", str(lib), str(src)], check=True)
    return lib


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_GCC, reason="needs gcc to build the planted library")
@pytest.mark.parametrize("entry", [".", "", "ww"])
def test_doctor_never_runs_a_planted_library_constructor(tmp_path, entry):
    mark = tmp_path / "mark"
    work = tmp_path / "cwd"
    work.mkdir()
    if entry == "ww":  # a world-writable folder without the sticky bit
        folder = tmp_path / "ww"
        folder.mkdir()
        folder.chmod(0o777)
        ld = str(folder)
    else:
        folder = work
        ld = f"{entry}:/nonexistent" if entry == "." else ":/nonexistent"
    _planted_lib(folder)
    out = cli_process("doctor", "--json", env={"LD_LIBRARY_PATH": ld, "PLANTED_MARK": str(mark)}, cwd=work)
    assert not mark.exists(), "the planted constructor ran"
    doc = envelope(out)
    codes = {f["code"] for f in doc["data"]["findings"]}
    assert "UNSAFE_LIBRARY_PATH" in codes


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_GCC, reason="needs gcc to build the planted library")
def test_the_same_library_in_a_safe_folder_is_still_asked_its_version(tmp_path):
    folder = tmp_path / "safe"
    folder.mkdir()
    _planted_lib(folder)
    mark = tmp_path / "mark"
    out = cli_process("detect", "--json", env={"LD_LIBRARY_PATH": str(folder), "PLANTED_MARK": str(mark)})
    libs = envelope(out)["data"]["environment"]["libraries"]
    assert any(lib["path"].startswith(str(folder)) and lib["version"] == "12.4" for lib in libs)
    assert mark.exists()  # proves the test's library does run when loaded: the refusal above is what stops it


# --- every wait bounded; the process group killed ------------------------------------------------------

@pytest.mark.slow
def test_a_timed_out_tool_that_leaves_a_setsid_child_does_not_hold_us(tmp_path):
    from cudamatrix import proc

    tool = tmp_path / "tool"
    tool.write_text("#!/bin/sh\nsetsid sleep 30 &\necho started\nsleep 60\n")
    tool.chmod(0o755)
    for kwargs in ({}, {"on_output": lambda line: None}):
        start = time.monotonic()
        result = proc.run([str(tool)], timeout=1, **kwargs)
        assert result.timed_out
        assert time.monotonic() - start < 8


@pytest.mark.slow
def test_detect_with_a_hanging_fake_nvidia_smi_finishes(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\nsetsid sleep 30 &\nsleep 60\n")
    smi.chmod(0o755)
    start = time.monotonic()
    out = cli_process("detect", "--json", "--timeout", "1", env={"PATH": f"{bin_dir}:{os.environ['PATH']}"},
                      timeout=60)
    assert out.returncode == 0, out.stderr
    assert time.monotonic() - start < 30


# --- tracebacks become clear errors --------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("argv", [
    ["solve", "torch[/]"], ["solve", "torch", "--gpu", "[/]"], ["env", "--shell", "[/]"],
    ["lock", "torch", "--driver", "535.104.05", "-o", "/nonexistent/[/]/x"], ["solve", "torch", "--driver", "[/]"],
    ["detect", "--timeout", "nan"], ["detect", "--timeout", "inf"], ["detect", "--timeout", "-1"],
    ["fix", "--dry-run", "--timeout", "nan"], ["verify", "--timeout", "inf"], ["solve", "torch", "--driver", ""],
    ["fix", "--dry-run", "--driver", ""], ["verify", "--python", "/nonexistent"], ["solve", "torch==" + "9" * 5000],
])
def test_bad_values_are_clear_errors(argv):
    out = cli(*argv, timeout=60)
    clean_error(out)
    assert out.stderr.startswith("error:")


@pytest.mark.slow
def test_markup_in_pasted_gpu_names_and_library_paths_is_shown_literally(tmp_path):
    report = tmp_path / "smi.txt"
    report.write_text("GPU 0: [/]Odd[bold] GPU (UUID: GPU-[/])\n")
    out = cli("detect", "--from", str(report))
    assert out.returncode == 0 and "Traceback" not in out.stderr
    out = cli_process("detect", env={"LD_LIBRARY_PATH": "/tmp/[/]/lib:/x/[bold]"})
    assert out.returncode == 0 and "Traceback" not in out.stderr


@pytest.mark.slow
@pytest.mark.parametrize("content,words", [
    ("[" * 1500 + "]" * 1500, "nested too deeply"),
    ('{"schema_version": ' + "9" * 5000 + "}", "not JSON"),
    ('{"schema_version": 999}', "schema_version 999"),
    ('{"schema_version": -1}', "schema_version -1"),
    ('{"schema_version": "1"}', "not an integer"),
    ('{"schema_version": {}}', "not an integer"),
    ("{}", "environment object"),
    ('{"schema_version": 1, "gpus": [{"compute_capability": "abc"}]}', "gpus[0].compute_capability"),
    ('{"schema_version": 1, "driver": {"version": "abc"}}', "driver.version"),
])
def test_saved_environments_are_validated(tmp_path, content, words):
    p = tmp_path / "env.json"
    p.write_text(content)
    for argv in (["doctor", "--env", str(p)], ["solve", "torch", "--env", str(p)], ["detect", "--env", str(p)]):
        out = cli(*argv)
        clean_error(out)
        assert words in out.stderr.replace("\n", " ") or words in out.stderr, out.stderr
    doc = envelope(cli("doctor", "--env", str(p), "--json"))
    assert doc["status"] == "usage_error"


@pytest.mark.slow
def test_an_index_url_fragment_in_a_requirements_file(tmp_path):
    req = tmp_path / "req.txt"
    req.write_text("--index-url https://download.pytorch.org/whl/cu121#frag\ntorch==2.3.0\n")
    out = cli("check", "-r", str(req), "--driver", "535.104.05", "--gpu", "7.5")
    assert out.returncode in (0, 1) and "Traceback" not in out.stderr


@pytest.mark.slow
def test_a_python_that_prints_unexpected_json(tmp_path):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho '{\"dists\": [{\"name\": 5}], \"site_packages\": 7}'\n")
    fake.chmod(0o755)
    for argv in (["detect", "--python", str(fake)], ["doctor", "--python", str(fake), "--json"]):
        out = cli(*argv)
        clean_error(out)


@pytest.mark.slow
def test_non_ascii_under_the_c_locale(tmp_path):
    ascii_env = {"LC_ALL": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}  # a strict ASCII terminal
    report = tmp_path / "smi.txt"
    report.write_text("GPU 0: Tésla ☃ (UUID: GPU-1)\n", encoding="utf-8")
    out = cli_process("detect", "--from", str(report), env=ascii_env)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr[-400:]
    out = cli_process("solve", "törch☃", env=ascii_env)
    clean_error(out)
    out = cli_process("solve", "torch", "--gpu", "Tésla ☃", env={**ascii_env, "PYTHONIOENCODING": "ascii"})
    clean_error(out)


# --- with --json every outcome is one envelope ---------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("argv", [["solve", "--json", "--bogus"], ["detect", "--json", "--timeout", "abc"],
                                  ["--json"], ["matrix", "show", "--json", "--x"], ["fix", "--json", "--framework"],
                                  ["nosuch", "--json"]])
def test_usage_errors_are_envelopes_with_json(argv):
    out = cli(*argv)
    doc = envelope(out)
    assert out.returncode == 2 and doc["status"] == "usage_error" and doc["errors"][0]["message"]


@pytest.mark.slow
def test_verify_exit_codes(tmp_path):
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    # no framework installed: a finding (NOT_INSTALLED, exit 1), not "no usable GPU" (6)
    out = cli("verify", "--python", str(venv / "bin" / "python"), "--json")
    assert out.returncode == 1, out.stdout[-400:]
    out = cli("verify", "--python", str(venv / "bin" / "python"), "--framework", "torch", "--json")
    assert out.returncode == 1
    clean_error(cli("verify", "--python", str(tmp_path / "nonexistent")))


@pytest.mark.slow
def test_plain_http_index_variables_are_refused_without_allow_http(tmp_path):
    for var in ("PIP_INDEX_URL", "UV_INDEX_URL", "PIP_EXTRA_INDEX_URL"):
        out = cli("fix", "--dry-run", "--json", env={var: "http://example.invalid/simple"})
        doc = envelope(out)
        assert out.returncode == 2 and var in doc["errors"][0]["message"]


# --- the verification memory is data, bound to its machine, keyed by the question ----------------------

@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "cudamatrix"


def _env(gpus=True):
    from cudamatrix.models import Environment, GpuInfo

    env = Environment(origin="file")
    env.packages = {"torch": "2.5.1+cu124"}
    if gpus:
        env.gpus = [GpuInfo(index=0, name="Tesla T4", compute_capability="7.5", uuid="GPU-1")]
    return env


def _verified():
    from cudamatrix.models import FrameworkReport, Report

    return Report(status="verified", frameworks=[FrameworkReport(framework="torch", status="verified",
                                                                 version="2.5.1+cu124", device_name="Tesla T4")])


def test_memory_round_trip_is_private_json(cache):
    from cudamatrix.verify import memory

    env = _env()
    key = memory.fingerprint(env)
    assert memory.store(key, _verified())
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    for name in ("verify.json", "verify.key"):
        assert stat.S_IMODE((cache / name).stat().st_mode) == 0o600
    json.loads((cache / "verify.json").read_text())
    assert memory.load(key, env).status == "verified"


@pytest.mark.parametrize("attack", ["old_format", "no_mac", "wrong_mac", "mode_0644", "malformed", "nested",
                                    "symlink", "fifo"])
def test_a_planted_memory_never_proves_anything(cache, tmp_path, attack):
    from cudamatrix.verify import memory

    env = _env()
    key = memory.fingerprint(env)
    memory.store("other", _verified())  # the folder and this user's secret exist
    path = cache / "verify.json"
    planted = {"at": "2024-01-01", "report": _verified().to_dict(), "env": {}}
    path.unlink()
    if attack == "old_format":
        path.write_text(json.dumps({key: planted}))
    elif attack in ("no_mac", "wrong_mac", "mode_0644"):
        if attack == "wrong_mac":
            planted["mac"] = "0" * 64
        if attack == "mode_0644":
            memory.store(key, _verified())
            path.chmod(0o644)
        else:
            path.write_text(json.dumps({"format": memory.FORMAT, "entries": {key: planted}}))
    elif attack == "malformed":
        path.write_text("{not json")
    elif attack == "nested":
        path.write_text("[" * 5000 + "]" * 5000)
    elif attack == "symlink":
        real = tmp_path / "elsewhere.json"
        memory.store(key, _verified())
        os.replace(path, real)
        path.symlink_to(real)
    elif attack == "fifo":
        os.mkfifo(path)
    if attack != "mode_0644" and path.exists() and not path.is_symlink() and attack != "fifo":
        path.chmod(0o600)
    notes: list[str] = []
    assert memory.load(key, env, notes) is None
    assert notes, "the ignored memory is noted"
    if attack not in ("symlink", "fifo"):
        assert memory.store(key, _verified())  # rebuilt
        assert memory.load(key, env).status == "verified"


def test_a_gpu_result_is_not_recalled_without_that_gpu(cache):
    from cudamatrix.models import GpuInfo
    from cudamatrix.verify import memory

    env = _env()
    memory.store("k", _verified())
    assert memory.load("k", env) is not None
    assert memory.load("k", _env(gpus=False)) is None
    other = _env()
    other.gpus = [GpuInfo(index=0, name="NVIDIA H100", compute_capability="9.0", uuid="GPU-2")]
    assert memory.load("k", other) is None
    moved = _env()
    moved.packages = {"torch": "2.6.0+cu124"}
    assert memory.load("k", moved) is None


def test_the_fingerprint_covers_gpu_uuids_and_library_files(tmp_path):
    from cudamatrix.models import Library
    from cudamatrix.verify import memory

    a, b = _env(), _env()
    b.gpus[0].uuid = "GPU-other"
    assert memory.fingerprint(a) != memory.fingerprint(b)
    lib = tmp_path / "libcudart.so.12"
    lib.write_bytes(b"one")
    a.libraries = [Library(name="cudart", soname="libcudart.so.12", path=str(lib), origin="LD_LIBRARY_PATH")]
    before = memory.fingerprint(a)
    lib.write_bytes(b"changed in place")
    assert memory.fingerprint(a) != before


def test_fix_key_depends_on_the_target_flags_and_request():
    from cudamatrix.verify import memory

    base = memory.fix_key("fp", [])
    assert memory.fix_key("fp", [], driver="535.104.05") != base
    assert memory.fix_key("fp", [], gpus=["Tesla T4"]) != base
    assert memory.fix_key("fp", ["torch"]) != base
    assert memory.fix_key("fp", [], driver="535.104.05", gpus=["Tesla T4"]) == \
        memory.fix_key("fp", [], driver="535.104.05", gpus=["Tesla T4"])


@pytest.mark.slow
def test_a_planted_verify_json_does_not_make_fix_say_verified(tmp_path, monkeypatch):
    """The landed attack: a verify.json planted for this environment made fix print "verified" and a
    planted device. Here it is planted in both layouts (the old unsigned one, and the new one without
    this user's MAC) for the exact key fix computes."""
    from cudamatrix.detect import detect
    from cudamatrix.verify import memory

    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = str(venv / "bin" / "python")
    xdg = tmp_path / "xdg"
    env = {"XDG_CACHE_HOME": str(xdg)}
    # when the planted answer is refused, fix goes on to install torch: with pip absent from this venv and
    # every index on a closed local port, that fails at once (exit 4) and nothing is downloaded
    no_net = ["--installer", "pip", "--mirror", "https://127.0.0.1:9/whl"]
    env.update({"PIP_INDEX_URL": "https://127.0.0.1:9/simple", "UV_INDEX_URL": "https://127.0.0.1:9/simple"})
    from cudamatrix.models import Report
    from cudamatrix.verify.memory import store

    # this process uses the same cache folder as the CLI it runs; monkeypatch puts the test's own one back
    # afterwards (deleting the variable would send later code to the real ~/.cache)
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))
    assert store("seed", Report(status="not_possible"))  # this user's folder and secret exist
    environment = detect(python=py)
    # torch asked for by name: a venv without a framework and no request has nothing to fix (issue 42)
    key = memory.fix_key(memory.fingerprint(environment, "torch"), ["torch"], None, installer="pip",
                         mirror="https://127.0.0.1:9/whl")
    planted = {"at": "2024-01-01", "env": {}, "report": {"status": "verified", "frameworks": [
        {"framework": "torch", "status": "verified", "version": "9.9.9", "device_name": "Planted GPU"}]}}
    for layout in ({key: planted}, {"format": memory.FORMAT, "entries": {key: planted}}):
        path = xdg / "cudamatrix" / "verify.json"
        path.write_text(json.dumps(layout))
        path.chmod(0o600)
        out = cli("fix", "torch", "--python", py, "--framework", "torch", *no_net, env=env)
        assert out.returncode != 0 and "Traceback" not in out.stderr, out.stderr[-400:]
        assert "verified" not in out.stdout.replace("verification", "")
        assert "Planted GPU" not in out.stdout


# --- round two: data values are what they are; a lock gets no line the user did not ask for ----------------

INJECTION = "\n--trusted-host evil.example\n--extra-index-url http://evil.example/simple"
TARGET = ["--driver", "550.54.15", "--gpu", "7.5", "--python", "3.11"]


def _data_with_index_url(tmp_path: Path, url: str) -> Path:
    """A copy of the shipped matrix whose torch rows all name ``url`` as their index."""
    return _hostile().data_folder(tmp_path, "data", url)


def _hostile():
    sys.path.insert(0, str(Path(__file__).parent.resolve().parent.parent / "scripts"))
    import hostile_inputs

    return hostile_inputs


def _no_injected_line(text: str) -> None:
    lines = text.splitlines()
    assert not any(line.startswith(("--trusted-host", "--extra-index-url http://evil")) for line in lines), text


@pytest.mark.slow
@pytest.mark.parametrize("brk", ["\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x85", "\u2028"])
def test_a_line_break_in_an_index_url_from_the_data_never_reaches_a_lock(tmp_path, brk):
    """pip and uv read requirements files with str.splitlines: each of these characters starts a new line."""
    folder = _data_with_index_url(tmp_path, "https://download.pytorch.org/whl/cu121" + INJECTION.replace("\n", brk))
    out = cli("matrix", "validate", str(folder), "--json")
    doc = envelope(out)
    assert out.returncode == 2 and "torch.json" in doc["errors"][0]["message"], doc
    lock = tmp_path / "requirements.txt"
    out = cli("lock", "torch==2.5.1", "--pins-only", *TARGET, "--data", str(folder), "-o", str(lock))
    clean_error(out)
    assert not lock.exists()
    out = cli("lock", "torch==2.5.1", "--pins-only", *TARGET, "--data", str(folder))
    clean_error(out)
    _no_injected_line(out.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("value, words", [
    ("http://evil.example/simple", "not https"),
    ("https://user:pw@mirror.example/simple", "credentials"),
    ("https://download.pytorch.org/whl/cu121 --trusted-host evil.example", "space"),
    ("download.pytorch.org/whl/cu121", "https://HOST"),
    ('https://x/"a', "quote"),
])
def test_matrix_validate_refuses_index_urls_that_are_not_one_line_https(tmp_path, value, words):
    folder = _data_with_index_url(tmp_path, value)
    out = cli("matrix", "validate", str(folder))
    clean_error(out)
    assert words in out.stderr.replace("\n", " ") and "index_url" in out.stderr, out.stderr
    if value.startswith("http://"):  # a trusted network: --allow-http accepts it
        assert cli("matrix", "validate", str(folder), "--allow-http").returncode == 0


@pytest.mark.slow
@pytest.mark.parametrize("file, path, value, words", [
    ("torch.json", ("releases", 0, "variants", 0, "name"), "cu121\n--index-url x", "control character"),
    ("torch.json", ("releases", 0, "variants", 0, "local_version"), "+cu121 x", "local version"),
    ("torch.json", ("releases", 0, "companions"), {"torchvision\n-e .": "0.20.1"}, "control character"),
    ("torch.json", ("releases", 0, "companions"), {"torch vision": "0.20.1"}, "PEP 508 name"),
    ("torch.json", ("releases", 0, "companions"), {"torchvision": "latest"}, "not a version"),
    ("torch.json", ("releases", 0, "python"), ["3.x"], "not a version"),
    ("cuda.json", ("releases", 0, "linux_min_driver"), "410.48; rm -rf", "driver version"),
    ("meta.json", ("data_version",), "2026\n--index-url x", "control character"),
    ("meta.json", ("data_version",), "2026 11 26", "not a label"),
    ("tensorflow.json", ("releases", 0, "variants", 0, "pip_extra"), "and cuda", "PEP 508 name"),
])
def test_matrix_validate_refuses_names_and_versions_that_are_not(tmp_path, file, path, value, words):
    import cudamatrix.matrix.data as data

    folder = tmp_path / "data"
    shutil.copytree(data.default_data_dir(), folder)
    doc = json.loads((folder / file).read_text())
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    (folder / file).write_text(json.dumps(doc))
    out = cli("matrix", "validate", str(folder))
    clean_error(out)
    assert words in out.stderr.replace("\n", " "), out.stderr


def _overlay_doc(index_url: str) -> dict:
    """What `matrix update` writes for one new torch release (the newest shipped row as version 2.99.0)."""
    return _hostile().overlay_doc(index_url)


def _plant_overlay(home_cache: Path, doc: dict) -> Path:
    folder = home_cache / "cudamatrix" / "overlay"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    folder.chmod(0o700)
    path = folder / "overlay.json"
    path.write_text(json.dumps(doc))
    path.chmod(0o600)
    return path


@pytest.mark.slow
def test_an_overlay_edited_without_the_users_key_is_ignored(tmp_path):
    """The overlay's sha256 sits in the file it protects: whoever can edit the file recomputes it. Planted here
    with a recomputed sha256 and an evil index (the folder and file have the right owner and modes)."""
    cache = Path(os.environ["XDG_CACHE_HOME"])
    _plant_overlay(cache, _overlay_doc("https://evil.example/simple"))
    shown = envelope(cli("matrix", "show", "torch", "2.99.0", "--json"))["data"]
    assert shown["rows"] == [] and "not signed with this user's key" in shown["overlay"]["ignored"], shown["overlay"]
    out = cli("lock", "torch", "--pins-only", *TARGET)
    assert out.returncode == 0 and "evil.example" not in out.stdout and "2.99.0" not in out.stdout, out.stderr


@pytest.mark.slow
def test_an_overlay_with_a_line_break_in_an_index_url_is_ignored_even_when_signed(tmp_path):
    from cudamatrix.safe.keys import sign, user_key

    cache = Path(os.environ["XDG_CACHE_HOME"])
    doc = _overlay_doc("https://download.pytorch.org/whl/cu121" + INJECTION)
    key, _ = user_key(create=True)
    doc["mac"] = sign(key, doc)
    _plant_overlay(cache, doc)
    shown = envelope(cli("matrix", "show", "torch", "2.99.0", "--json"))["data"]
    assert shown["rows"] == [] and "control character" in shown["overlay"]["ignored"], shown["overlay"]
    out = cli("lock", "torch", "--pins-only", *TARGET)
    assert out.returncode == 0, out.stderr
    _no_injected_line(out.stdout)


@pytest.mark.slow
def test_a_signed_overlay_of_good_rows_is_used(tmp_path):
    from cudamatrix.safe.keys import sign, user_key

    doc = _overlay_doc("https://download.pytorch.org/whl/cu128")
    key, _ = user_key(create=True)
    doc["mac"] = sign(key, doc)
    _plant_overlay(Path(os.environ["XDG_CACHE_HOME"]), doc)
    shown = envelope(cli("matrix", "show", "torch", "2.99.0", "--json"))["data"]
    assert [r["version"] for r in shown["rows"]] == ["2.99.0"] and shown["overlay"]["ignored"] is None


# --- round two: output is inert ---------------------------------------------------------------------------

CLEAR_AND_LINK = "\x1b[2J\x1b]8;;https://evil.example/\x07docs\x1b]8;;\x07\r\u202e"


def _inert(out: subprocess.CompletedProcess) -> None:
    for stream in (out.stdout, out.stderr):
        assert not any(c in stream for c in ("\x1b", "\x07", "\r", "\u202e", "\x9b")), stream[-600:]


@pytest.mark.slow
def test_escape_sequences_in_a_pasted_nvidia_smi_list_are_shown_escaped(tmp_path):
    paste = tmp_path / "smi.txt"
    paste.write_text(f"GPU 0: Tesla T4{CLEAR_AND_LINK.replace(chr(13), '')} (UUID: GPU-1234)\n", encoding="utf-8")
    for argv in (["detect", "--from", str(paste)], ["doctor", "--from", str(paste)],
                 ["solve", "torch", "--from", str(paste)], ["fix", "--dry-run", "--from", str(paste)]):
        out = cli(*argv)
        assert "Traceback" not in out.stderr and out.returncode in (0, 1, 3), (argv, out.stderr[-400:])
        _inert(out)
    out = cli("detect", "--from", str(paste))
    assert "\\x1b[2J" in out.stdout, out.stdout


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["solve", f"torch{CLEAR_AND_LINK}"], ["solve", "torch", "--gpu", CLEAR_AND_LINK],
                                  ["env", "--shell", CLEAR_AND_LINK], ["check", "-r", f"/nonexistent/{CLEAR_AND_LINK}"]])
def test_escape_sequences_in_arguments_are_shown_escaped(argv):
    out = cli(*argv)
    clean_error(out)
    _inert(out)


# --- round two: credentials stay secret ---------------------------------------------------------------------

MIRROR = "https://user:TOKEN@mirror.example/whl"


@pytest.mark.slow
def test_mirror_credentials_are_never_written_to_a_lock_nor_printed(tmp_path):
    lock = tmp_path / "requirements.txt"
    out = cli("lock", "torch==2.5.1+cu121", "--pins-only", *TARGET, "--mirror", MIRROR, "-o", str(lock))
    assert out.returncode == 0, out.stderr
    text = lock.read_text()
    assert "TOKEN" not in text and "--index-url https://mirror.example/whl/cu121" in text, text
    assert "TOKEN" not in out.stdout + out.stderr and "left out of the lock" in out.stderr
    for extra in (["--pins-only"], ["--pins-only", "--json"], ["--format", "uv"]):  # the uv format holds pins only
        out = cli("lock", "torch==2.5.1+cu121", *TARGET, "--mirror", MIRROR, *extra)
        assert out.returncode == 0 and "TOKEN" not in out.stdout + out.stderr, out.stdout
        if "uv" in extra:
            assert tomlread.loads(out.stdout)["tool"]["uv"]["index"][0]["url"] == "https://mirror.example/whl/cu121"
    out = cli("solve", "torch==2.5.1+cu121", *TARGET, "--mirror", MIRROR)
    assert out.returncode == 0 and "TOKEN" not in out.stdout + out.stderr and "user:****@" in out.stdout


@pytest.mark.slow
def test_fix_dry_run_masks_the_mirrors_credentials():
    for extra in ([], ["--json"]):
        out = cli("fix", "--dry-run", "--driver", "550.54.15", "--gpu", "7.5", "--mirror", MIRROR,
                  "torch==2.5.1+cu121", *extra)
        assert "Traceback" not in out.stderr and "TOKEN" not in out.stdout + out.stderr, out.stdout[-800:]
        assert "user:****@mirror.example" in out.stdout, out.stdout[-800:]


@pytest.mark.slow
def test_an_index_variable_with_credentials_is_masked_in_detect():
    out = cli("detect", "--json", env={"PIP_INDEX_URL": "https://user:TOKEN@pypi.example/simple"})
    assert out.returncode == 0 and "TOKEN" not in out.stdout
    assert envelope(out)["data"]["environment"]["context"]["env"]["PIP_INDEX_URL"] == \
        "https://user:****@pypi.example/simple"


# --- round two: every wait bounded, every --json failure an envelope, --python read the same everywhere -------

@pytest.mark.slow
def test_verify_on_an_interpreter_that_hangs_ends_within_its_timeout(tmp_path):
    hang = tmp_path / "python"
    hang.write_text("#!/bin/sh\nexec sleep 600\n")
    hang.chmod(0o755)
    start = time.monotonic()
    out = cli("verify", "--python", str(hang), "--timeout", "3", "--json", timeout=120)
    took = time.monotonic() - start
    doc = envelope(out)
    assert out.returncode == 5 and took < 20, (took, out.stdout[-400:])
    assert {f["finding_code"] for f in doc["data"]["frameworks"]} == {"VERIFY_TIMEOUT"}


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["detect", "--from", "--json"], ["detect", "--env", "--json"],
                                  ["detect", "--python", "--json"], ["doctor", "--from", "--json"],
                                  ["solve", "torch", "--gpu", "--json"], ["verify", "--python", "--json"],
                                  ["lock", "torch", "-o", "--json"], ["matrix", "show", "--data", "--json"],
                                  ["fleet", "gather", "-o", "--json"]])
def test_an_option_missing_its_value_before_json_is_an_envelope(argv):
    out = cli(*argv)
    doc = envelope(out)
    assert out.returncode == 2 and doc["status"] == "usage_error", out.stdout + out.stderr
    assert "needs a value" in doc["errors"][0]["message"] or "requires an argument" in doc["errors"][0]["message"]


@pytest.mark.slow
def test_python_relative_paths_are_read_alike_by_every_command(tmp_path):
    venv = tmp_path / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    rel = os.path.join("v", "bin", "python")
    codes = {}
    for argv in (["verify", "--python", rel], ["detect", "--python", rel], ["doctor", "--python", rel],
                 ["fix", "--dry-run", "--python", rel, "--no-verify"], ["env", "--python", rel]):
        out = cli(*argv, "--json", cwd=tmp_path)
        doc = envelope(out)
        codes[argv[0]] = out.returncode
        assert "PYTHON_NOT_FOUND" not in out.stdout and "no Python interpreter" not in out.stdout, (argv, out.stdout)
    assert codes["verify"] == 1 and codes["detect"] == 0, codes  # the bare venv has no framework: a finding, not "no GPU"
    for argv in (["verify"], ["detect"], ["doctor"], ["fix", "--dry-run"], ["env"]):
        out = cli(*argv, "--python", "nowhere/python", "--json", cwd=tmp_path)
        doc = envelope(out)
        assert out.returncode == 2 and "no Python interpreter at" in doc["errors"][0]["message"], (argv, doc)
