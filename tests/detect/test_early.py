"""cudamatrix.detect.early: the loader children forked at a command's start.

Each case runs in a fresh interpreter (a script below): a fork is made only in a process with one thread, and
this test process has more under pytest-xdist. The libraries are gcc-built stand-ins (tests/support/fakes.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
needs_gcc = pytest.mark.skipif(not any(os.access(os.path.join(d, "gcc"), os.X_OK)
                                       for d in os.environ.get("PATH", "").split(os.pathsep)), reason="no gcc")


@pytest.mark.parametrize("argv,live", [
    (["detect"], True), (["detect", "--json", "--python", "/x/python"], True), (["doctor", "--json"], True),
    (["fix", "--dry-run"], True), (["env", "--shell", "bash"], True), (["solve", "torch"], True),
    (["check", "-r", "req.txt"], True),
    (["solve", "torch", "--driver", "550.54.15", "--gpu", "8.9"], False), (["solve", "torch", "--gpu=8.9"], False),
    (["check", "-r", "req.txt", "--platform", "linux_x86_64"], False), (["solve", "jax", "--python", "3.11"], False),
    (["fix", "--driver", "550.54.15"], True),  # fix installs into this machine: it detects it whatever the flags
    (["detect", "--from", "smi.txt"], False), (["detect", "--from=smi.txt"], False), (["doctor", "--env", "e.json"], False),
    (["fix", "--undo"], False), (["fix", "--rollback"], False), (["fix", "--resume"], False), (["detect", "--help"], False),
    (["doctor", "-h"], False), (["lock", "torch"], False), (["matrix", "show"], False), ([], False), (["--version"], False),
    (["solve", "torch", "--", "--from"], False),  # after "--" it would be an argument: not forking is the safe side
])
def test_which_invocations_fork(argv, live):
    from cudamatrix.cli import detects_this_machine

    assert detects_this_machine(argv) is live


def test_no_fork_in_a_process_with_threads():
    """A second thread (pytest-xdist's, or one started here): start() forks nothing."""
    from cudamatrix.detect import early

    stop = threading.Event()
    extra = threading.Thread(target=stop.wait, daemon=True)
    extra.start()
    try:
        early.start()
        assert early._children == {}
    finally:
        stop.set()
        extra.join()


RUN = """
import json, os, sys, time
from cudamatrix.detect import early, loader
from cudamatrix.cli import detects_this_machine
words = sys.argv[1].split()  # the command words, one argument
if detects_this_machine(words):  # as cudamatrix.cli.run decides
    early.start(python_probe="--python" not in words)
forked = dict(early._children)
out = {"forked": sorted(forked), "pids": {k: c.pid for k, c in forked.items()}}
"""


def _script(body: str, tmp_path: Path, *argv: str, env: dict | None = None) -> dict:
    """Run RUN + ``body`` in a fresh interpreter (cwd tmp_path); the JSON it prints last."""
    code = RUN + textwrap.dedent(body) + "\nprint(json.dumps(out))\n"
    run_env = dict(os.environ if env is None else env, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env=run_env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture(scope="module")
def libs(tmp_path_factory) -> dict[str, str]:
    from support.fakes import CRASH_C, CUDART_C, HANG_C, build_lib, fake_nvml

    t = tmp_path_factory.mktemp("early")
    return {"nvml_dir": str(fake_nvml(t / "nvml").parent),
            "cudart": str(build_lib(t / "ok", "libcudart.so.12", CUDART_C, VERSION=12040)),
            "crash": str(build_lib(t / "crash", "libcudnn.so.9", CRASH_C)),
            "hang": str(build_lib(t / "hang", "libcudart.so.12", HANG_C))}


@pytest.mark.slow
@needs_gcc
def test_the_forked_children_answer_as_started_ones_do(libs, tmp_path):
    """detect's questions answered by the forked NVML child and the waiting libraries' child: the same answers
    as started children give, each child reaped; a crash in the forked libraries' child is named, and the copies
    after it are asked of a started child."""
    env = dict(os.environ, LD_LIBRARY_PATH=libs["nvml_dir"])
    out = _script("""
        environ = dict(os.environ)
        q = {"nvml": loader.findable("libnvidia-ml.so.1", environ), "libcuda": loader.findable("libcuda.so.1", environ)}
        a = loader.run_loader([], q["nvml"], q["libcuda"], 30, None, early.take("nvml", environ, q))
        libs = [(sys.argv[2], "cudart"), (sys.argv[3], "cudnn"), (sys.argv[4], "cudart")]
        b = loader.run_loader(libs, False, False, 30, None, early.take("libs", environ))
        c = loader.run_loader([], q["nvml"], q["libcuda"], 30)  # a started child, for comparison
        strip = lambda d: {k: v for k, v in d.items() if k not in ("ms", "phases_ms")}
        out.update(nvml=strip(a.nvml), started_nvml=strip(c.nvml), failed=b.failed, libs={p: v.get("version") for p, v in b.libs.items()},
                   left=sorted(early._children), start=[a.start_ms, b.start_ms], how=[a.forked, b.forked, c.forked])
        """, tmp_path, "detect", libs["cudart"], libs["crash"], libs["cudart"] + "-same", env=env)
    assert out["forked"] == ["libs", "nvml", "python"]
    assert out["nvml"] == out["started_nvml"] and out["nvml"]["gpus"][0]["name"] == "NVIDIA A100-SXM4-80GB"
    assert out["failed"] == {libs["crash"]: "crashed the process (signal 11)"}
    # the copy after the crash (a path with no file) was asked of a started child: it answered with its error
    assert out["libs"] == {libs["cudart"]: 12040, libs["cudart"] + "-same": None}
    assert out["left"] == ["python"] and all(t is not None and t >= 0 for t in out["start"])  # not asked here
    assert out["how"] == [True, True, False]
    assert all(_gone(pid) for pid in out["pids"].values())


@pytest.mark.slow
@needs_gcc
def test_a_forked_child_that_hangs_is_killed_at_the_timeout(libs, tmp_path):
    out = _script("""
        t = time.monotonic()
        b = loader.run_loader([(sys.argv[2], "cudart"), (sys.argv[3], "cudart")], False, False, 1.5, None,
                              early.take("libs", dict(os.environ)))
        out.update(failed=b.failed, libs={p: v["version"] for p, v in b.libs.items()}, seconds=time.monotonic() - t,
                   used_fork=b.forked)
        """, tmp_path, "detect", libs["hang"], libs["cudart"])
    assert out["failed"] == {libs["hang"]: "hung (no answer within 1.5s)"}
    assert out["libs"] == {libs["cudart"]: 12040} and out["seconds"] < 10 and out["used_fork"]
    assert all(_gone(pid) for pid in out["pids"].values())


@pytest.mark.slow
def test_children_nobody_asks_are_stopped(tmp_path):
    """Another environment, another question, or a command that never asks: the child is killed and reaped
    (by take(), and at exit)."""
    out = _script("""
        other = dict(os.environ, LD_LIBRARY_PATH="/elsewhere")
        out["other_env"] = early.take("libs", other) is None
        out["after"] = sorted(early._children)
        """, tmp_path, "detect")
    assert out["forked"] and out["other_env"] and "libs" not in out["after"]
    assert all(_gone(pid) for pid in out["pids"].values())  # the NVML child too: stopped at exit


@pytest.mark.slow
@pytest.mark.parametrize("ld_library_path", ["lib", "", "/usr/lib::/lib"])
def test_no_fork_with_an_unsafe_library_path(tmp_path, ld_library_path):
    """A relative or empty LD_LIBRARY_PATH entry (the current folder): a forked child would search it, since its
    search path is the one this process started with; the started child is given a cleaned one instead."""
    out = _script("", tmp_path, "detect", env=dict(os.environ, LD_LIBRARY_PATH=ld_library_path))
    assert out["forked"] == []


@pytest.mark.slow
def test_no_fork_for_a_saved_environment(tmp_path):
    out = _script("", tmp_path, "detect", env=dict(os.environ, CUDAMATRIX_DETECT_ENV=str(tmp_path / "env.json")))
    assert out["forked"] == []


@pytest.mark.slow
@needs_gcc
def test_the_command_uses_the_forked_children(libs, tmp_path):
    """``python -m cudamatrix detect --json`` forks its children, and its answers are those of a detect that
    started them (the library API's way)."""
    env = dict(os.environ, LD_LIBRARY_PATH=libs["nvml_dir"], PYTHONPATH=str(ROOT))
    cli = subprocess.run([sys.executable, "-m", "cudamatrix", "detect", "--json"], capture_output=True, text=True,
                         timeout=120, env=env, cwd=tmp_path)
    api = subprocess.run([sys.executable, "-c", "import json, cudamatrix.detect as d; print(json.dumps("
                          "d.detect().to_dict()))"], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    live = json.loads(cli.stdout)["data"]["environment"]
    started = json.loads(api.stdout)
    for key in ("driver", "gpus", "python", "packages", "frameworks", "file_conflicts"):
        assert live[key] == started[key], key
    assert [(lib["path"], lib["version"]) for lib in live["libraries"]] == \
        [(lib["path"], lib["version"]) for lib in started["libraries"]]


@pytest.mark.slow
def test_the_forked_python_probe_answers_as_the_probe_in_this_process_does(tmp_path):
    """This interpreter's distributions read by the forked child (beside the parent's work) and in process: the
    same; with --python (another interpreter) no such child is forked; a child forked for another sys.path is
    not used."""
    out = _script("""
        from cudamatrix.detect import python_env
        child = early.take("python", dict(os.environ), {"path": list(sys.path)})
        out["used"] = child is not None
        a, _ = python_env.probe(None, 30, child)
        b, _ = python_env.probe(None, 30)
        view = lambda side: (side.python.to_dict(), side.packages, side.requirements, side.wheel_owner,
                             [f.to_dict() for f in side.frameworks], [c.to_dict() for c in side.file_conflicts])
        out["same"] = view(a) == view(b)
        out["n"] = len(a.packages)
        out["times"], out["times_here"] = a.timings_ms, b.timings_ms
        """, tmp_path, "doctor")
    assert "python" in out["forked"] and out["used"] and out["same"] and out["n"] > 0
    # the child's own times (from the fork to its start, its reading), from the clock it shares with us; none in process
    assert sorted(out["times"]) == ["collect", "start"] and all(ms >= 0 for ms in out["times"].values())
    assert out["times_here"] == {}
    assert all(_gone(pid) for pid in out["pids"].values())
    other = _script("""
        out["other_path"] = early.take("python", dict(os.environ), {"path": ["/elsewhere"]}) is None
        """, tmp_path, "doctor")
    assert other["other_path"]
    assert "python" not in _script("", tmp_path, "detect --python /usr/bin/python3")["forked"]


@pytest.mark.slow
@needs_gcc
def test_the_library_api_starts_its_libraries_child_ahead(libs, tmp_path):
    """detect() in a process that forked nothing (a notebook kernel's): the libraries' child is started at detect's
    start and answers when asked; one that never begins its first step (here a program that exits at once) is
    replaced by a started child, which answers; nothing is left running."""
    import subprocess as sp

    from cudamatrix.detect import early
    from cudamatrix.detect.loader import run_loader

    environ = dict(os.environ)
    ahead = early.started_libs(environ)
    a = run_loader([(libs["cudart"], "cudart"), (libs["crash"], "cudnn")], False, False, 30, None, ahead)
    assert a.forked and a.libs[libs["cudart"]]["version"] == 12040
    assert a.failed == {libs["crash"]: "crashed the process (signal 11)"} and a.start_ms is not None
    (out_r, out_w), (in_r, in_w) = os.pipe(), os.pipe()
    dud = early.Started(sp.Popen(["false"], stdin=in_r, stdout=out_w, start_new_session=True), out_r, in_w, environ,
                        0.0)
    os.close(in_r)
    os.close(out_w)
    b = run_loader([(libs["cudart"], "cudart")], False, False, 30, None, dud)
    assert b.forked is False and b.error is None and b.libs[libs["cudart"]]["version"] == 12040
    assert b.start_ms is not None  # the started child's own start-up, measured from its spawn
    assert _gone(ahead.pid) and _gone(dud.pid)
    idle = early.started_libs(environ)  # nothing to ask: it ends on the empty question
    assert run_loader([], False, False, 30, None, idle) == type(a)() and _gone(idle.pid)


@pytest.mark.slow
@needs_gcc
def test_ctrl_c_while_waiting_on_a_forked_child_kills_it(libs, tmp_path):
    """The child is in a session of its own (the terminal's Ctrl-C reaches only us): interrupted while reading
    its answer, we kill it before the KeyboardInterrupt goes on."""
    out = _script("""
        import signal
        child = early.take("libs", dict(os.environ))
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        signal.signal(signal.SIGALRM, lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
        try:
            loader.run_loader([(sys.argv[2], "cudart")], False, False, 30, None, child)
            out["interrupted"] = False
        except KeyboardInterrupt:
            out["interrupted"] = True
        out["child"] = child.pid
        """, tmp_path, "detect", libs["hang"])
    assert out["interrupted"] and _gone(out["child"])
