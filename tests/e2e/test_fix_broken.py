"""Issue 15's broken venv, repaired by the real command: real pip (and uv), a loopback index of stand-in wheels,
torch 2.14.1 with a drifted nvidia-cudnn-cu13, and a JAX cuda12 plugin whose nvidia-cudnn-cu12 clobbers the
cu13 library file. The machine is described by target flags (driver 580, an sm_90 GPU); this host has no
driver, so NO_DRIVER is the one finding a fix cannot touch and must name."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support import brokenvenv
from support.fakes import run_cli
from support.localindex import LocalIndex, copy_venv, make_venv

ROOT = Path(__file__).parent.resolve().parents[1]
pytestmark = pytest.mark.installs


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> Path:
    return brokenvenv.build_wheels(tmp_path_factory.mktemp("wheels"))


@pytest.fixture(scope="module")
def broken(wheels, tmp_path_factory) -> Path:
    """A template of the broken venv (copied per test), of a Python the issue's jax 0.10.2 installs on."""
    path = tmp_path_factory.mktemp("broken") / "venv"
    py = make_venv(path, brokenvenv.interpreter())
    brokenvenv.break_venv(py, _env(tmp_path_factory.mktemp("env")), wheels)
    return path


def _env(tmp: Path, index: str = "http://127.0.0.1:9/simple") -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    env.update({"PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": index, "PIP_CACHE_DIR": str(tmp / "pipcache"),
                "UV_CACHE_DIR": str(tmp / "uvcache"), "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                "PIP_DEFAULT_TIMEOUT": "5", "PIP_RETRIES": "0", "XDG_CACHE_HOME": str(tmp / "xdg"),
                "XDG_STATE_HOME": str(tmp / "state"), "PYTHONPATH": str(ROOT)})
    env.pop("LD_LIBRARY_PATH", None)
    return env


def _cli(*args: str, env: dict, timeout: float = 600) -> subprocess.CompletedProcess:
    """The CLI in this process (stdin empty, never a terminal); ``env`` replaces the environment for the call."""
    return run_cli(list(args), env=env, input="", timeout=timeout, text=True, cwd=ROOT)


def _freeze(py: Path, env: dict) -> str:
    return subprocess.run([str(py), "-m", "pip", "freeze", "--all"], env=env, capture_output=True, text=True,
                          check=True, timeout=120).stdout


def _errors(py: Path, env: dict) -> list[dict]:
    r = _cli("doctor", "--python", str(py), "--json", env=env)
    return [f for f in json.loads(r.stdout)["data"]["findings"] if f["severity"] == "error"]


@pytest.fixture()
def venv(broken, tmp_path) -> Path:
    return copy_venv(broken, tmp_path / "venv")


def test_broken_venv_is_what_the_issue_saw(venv, tmp_path):
    codes = {f["code"] for f in _errors(venv, _env(tmp_path))}
    assert {"NVIDIA_WHEEL_DRIFT", "FRAMEWORK_CONFLICT", "FILE_CLOBBER"} <= codes


def test_solve_dry_run_and_fix_agree(venv, wheels, tmp_path):
    with LocalIndex(wheels) as index:
        env = _env(tmp_path, index.url + "/simple")
        solved = json.loads(_cli("solve", "--python", str(venv), *brokenvenv.TARGET, "--json", env=env).stdout)
        dry = json.loads(_cli("fix", "--allow-http", "--python", str(venv), *brokenvenv.TARGET, "--dry-run", "--installer", "pip",
                              "--json", env=env).stdout)
        done = json.loads(_cli("fix", "--allow-http", "--python", str(venv), *brokenvenv.TARGET, "--yes", "--installer", "pip",
                               "--no-verify", "--json", env=env).stdout)
    pins = sorted(f"{p['name']}=={p['version']}" for p in solved["data"]["solution"]["to_install"])
    for plan in (dry["data"]["plan"], done["data"]["plan"]):
        install = next(s for s in plan["steps"] if s["kind"] == "install")
        assert sorted(a for a in install["argv"] if "==" in a) == pins
        assert [(f["name"], f["variant"]) for f in plan["solution"]["frameworks"]] == \
            [(f["name"], f["variant"]) for f in solved["data"]["solution"]["frameworks"]]
    jax = next(f for f in solved["data"]["solution"]["frameworks"] if f["name"] == "jax")
    removed = {r["name"] for r in dry["data"]["plan"]["to_remove"]}
    assert removed == {r["name"] for r in solved["data"]["to_remove"]}  # solve names the same uninstalls
    # the variant is cuda13, so no cuda12 plugin may stay: the plan uninstalls it with the cuDNN it brought
    assert jax["variant"] == "cuda13" and {"jax-cuda12-plugin", "jax-cuda12-pjrt", "nvidia-cudnn-cu12"} <= removed


@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_one_fix_yes_leaves_only_what_it_names(venv, wheels, tmp_path, installer):
    with LocalIndex(wheels) as index:
        env = _env(tmp_path, index.url + "/simple")
        r = _cli("fix", "--allow-http", "--python", str(venv), *brokenvenv.TARGET, "--yes", "--no-verify", "--installer", installer,
                 env=env)
        out = json.loads(_cli("fix", "--allow-http", "--python", str(venv), *brokenvenv.TARGET, "--dry-run", "--json",
                              env=env).stdout)
    assert r.returncode == 1, r.stdout + r.stderr  # 1: an error finding is left (this host has no driver)
    left = _errors(venv, env)
    assert [f["code"] for f in left] == ["NO_DRIVER"]
    assert "left: 1 error finding(s)" in r.stdout and "NO_DRIVER" in r.stdout and "not fixable here" in r.stdout
    assert "fixed: FILE_CLOBBER, FRAMEWORK_CONFLICT, NVIDIA_WHEEL_DRIFT" in r.stdout
    freeze = _freeze(venv, env)
    assert "nvidia-cudnn-cu13==9.24.0.43" in freeze and "jax-cuda13-plugin==0.10.2" in freeze
    assert "cu12" not in freeze
    site = Path(json.loads(_cli("detect", "--python", str(venv), "--json", env=env).stdout)
                ["data"]["environment"]["python"]["site_packages"][-1])
    assert (site / brokenvenv.CUDNN_FILE).read_text() == "cudnn 13 9.24.0.43"  # the clash's damage repaired
    assert out["data"]["plan"]["nothing_to_do"]  # a second run has nothing left to do


def test_without_a_terminal_and_without_yes_nothing_changes(venv, wheels, tmp_path):
    with LocalIndex(wheels) as index:
        env = _env(tmp_path, index.url + "/simple")
        before = _freeze(venv, env)
        r = _cli("fix", "--allow-http", "--python", str(venv), *brokenvenv.TARGET, env=env)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--yes" in r.stderr and "no terminal" in r.stderr
    assert _freeze(venv, env) == before


def test_python_api_call_is_consent(venv, wheels, tmp_path, monkeypatch):
    import cudamatrix

    with LocalIndex(wheels) as index:
        for k, v in _env(tmp_path, index.url + "/simple").items():
            monkeypatch.setenv(k, v)
        result = cudamatrix.fix(python=str(venv), driver="580.65.06", gpus=["sm_90"], verify=False, installer="pip",
                                allow_http=True)  # the loopback index is plain http
    assert result.status == "applied" and [f.code for f in result.left] == ["NO_DRIVER"]
    text = repr(result)
    assert len(text) < 300 and "applied" in text and "NO_DRIVER" in text
    assert "left: 1 error finding(s)" in str(result)


class _SlowLog(list):
    """Stands in for LocalIndex.served: once ``armed()`` (the run is past its first step), each wheel download
    (GET) is held until the test releases it (``release``, set once the run was stopped), so the run can be
    stopped mid-install however slow the machine. HEAD requests (the disk-space check) and the installer's dry
    run before the journal pass at once."""

    hold_s = 600.0  # at most; the installers' read timeouts are set above it for these runs (HELD_ENV)

    def __init__(self, armed) -> None:
        super().__init__()
        self.armed = armed
        self.release = threading.Event()
        self.late: list[str] = []  # wheel downloads asked for while armed

    def append(self, item):
        handler = sys._getframe(1).f_locals.get("self")  # the request handler that logs this path
        if getattr(handler, "_head_only", False):
            return
        super().append(item)
        if item.startswith("/files/") and not self.release.is_set() and self.armed():
            self.late.append(item)
            self.release.wait(self.hold_s)


# a held download must end by the signal the test sends, never by the installer's own read timeout (5 s in _env)
HELD_ENV = {"PIP_DEFAULT_TIMEOUT": "900", "UV_HTTP_TIMEOUT": "900"}


def _journal(env: dict) -> dict | None:
    # an interrupted change's journal (a completed one is kept as <folder>.last for fix --undo)
    found = [p for p in Path(env["XDG_STATE_HOME"]).glob("cudamatrix/journal/*/journal.json")
             if not p.parent.name.endswith(".last")]
    return json.loads(found[0].read_text()) if found else None


def _start_and_stop(venv: Path, wheels: Path, tmp_path: Path, sig: int, record: Path,
                    installer: str = "pip") -> tuple[str, dict, dict]:
    """Run fix --yes, stop it with ``sig`` while the install step downloads; return (start freeze, env, the
    journal as the stop left it)."""
    with LocalIndex(wheels) as index:
        env = {**_env(tmp_path, index.url + "/simple"), **HELD_ENV}
        slow = _SlowLog(lambda: (_journal(env) or {}).get("steps_done", 0) >= 1)
        index.served = slow
        start = _freeze(venv, env)
        run = subprocess.Popen([sys.executable, "-m", "cudamatrix", "fix", "--allow-http", "--python", str(venv), *brokenvenv.TARGET,
                                "--yes", "--no-verify", "--installer", installer], cwd=ROOT, env=env,
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 240
        journal = None
        while time.monotonic() < deadline:
            journal = _journal(env)
            if journal and journal.get("steps_done") == 1 and journal.get("child_pgid") and slow.late:
                break
            time.sleep(0.2)
        assert journal and journal["steps_done"] == 1, "the run never reached its install step"
        run.send_signal(sig)
        try:
            out, err = run.communicate(timeout=300)
        finally:
            slow.release.set()
    env = _env(tmp_path, env["PIP_INDEX_URL"])  # the next runs use the usual timeouts
    record.write_text(f"$ cudamatrix fix --yes ... (stopped by {signal.Signals(sig).name} during step 2)\n"
                      f"exit {run.returncode}\n{out}{err}")
    return start, env, journal


def test_ctrl_c_mid_install_restores_the_start(venv, wheels, tmp_path):
    record = tmp_path / "sigint.txt"
    start, env, _ = _start_and_stop(venv, wheels, tmp_path, signal.SIGINT, record)
    text = record.read_text()
    assert "exit 4" in text and "interrupted" in text, text
    assert _freeze(venv, env) == start
    assert _journal(env) is None  # restored: nothing left to resume
    _keep(record)


@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_sigkill_mid_install_then_rollback_restores_the_start(venv, wheels, tmp_path, installer):
    record = tmp_path / f"sigkill-{installer}.txt"
    start, env, journal = _start_and_stop(venv, wheels, tmp_path, signal.SIGKILL, record, installer)
    pgid = journal["child_pgid"]
    for _ in range(50):  # the installer dies with its parent (PR_SET_PDEATHSIG), not minutes later
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the installer (process group {pgid}) kept running after its parent was killed")
    assert _freeze(venv, env) != start  # step 1 (the uninstall) had run
    again = _cli("fix", "--allow-http", "--python", str(venv), *brokenvenv.TARGET, "--yes", "--no-verify", env=env)
    assert again.returncode == 2 and "--resume" in again.stderr and "--rollback" in again.stderr, again.stderr
    dry = _cli("fix", "--allow-http", "--python", str(venv), *brokenvenv.TARGET, "--dry-run", env=env)  # changes nothing: allowed
    assert dry.returncode == 0 and "interrupted change" in dry.stdout and "is recorded" in dry.stdout
    env_offline = dict(env, PIP_INDEX_URL="http://127.0.0.1:9/simple")  # the rollback needs no index
    back = _cli("fix", "--allow-http", "--python", str(venv), "--rollback", "--yes", env=env_offline)
    with record.open("a") as fh:
        fh.write(f"\n$ cudamatrix fix --yes ... (next run)\nexit {again.returncode}\n{again.stdout}{again.stderr}"
                 f"\n$ cudamatrix fix --rollback (index unreachable)\nexit {back.returncode}\n{back.stdout}{back.stderr}")
    assert back.returncode == 0, back.stdout + back.stderr
    assert _freeze(venv, env) == start
    assert _journal(env) is None
    _keep(record)


def test_sigkill_then_resume_finishes_the_plan(venv, wheels, tmp_path):
    record = tmp_path / "resume.txt"
    _, env, _ = _start_and_stop(venv, wheels, tmp_path, signal.SIGKILL, record)
    with LocalIndex(wheels) as index:
        env = dict(env, PIP_INDEX_URL=index.url + "/simple")
        r = _cli("fix", "--allow-http", "--python", str(venv), "--resume", "--no-verify", "--yes", env=env)
    assert r.returncode == 1, r.stdout + r.stderr  # done; NO_DRIVER left, named
    assert [f["code"] for f in _errors(venv, env)] == ["NO_DRIVER"]
    assert _journal(env) is None


def _keep(record: Path) -> None:
    """Copy a run's output where the closing note can quote it (CUDAMATRIX_TEST_RECORDS, when set)."""
    folder = os.environ.get("CUDAMATRIX_TEST_RECORDS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / record.name).write_text(record.read_text())


@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_the_installers_dry_run_names_what_a_step_replaces(venv, wheels, tmp_path, monkeypatch, installer):
    import shutil

    from cudamatrix.install.apply import predicted_changes
    from cudamatrix.models import Step

    if installer == "uv" and shutil.which("uv") is None:
        pytest.skip("uv is not on PATH")
    with LocalIndex(wheels) as index:
        for k, v in _env(tmp_path, index.url + "/simple").items():
            monkeypatch.setenv(k, v)
        monkeypatch.setenv("UV_INDEX_URL", index.url + "/simple")
        head = ["uv", "pip", "install", "--python", str(venv)] if installer == "uv" else \
            [str(venv), "-m", "pip", "install"]
        step = Step(kind="install", reason="r", argv=head + ["nvidia-cudnn-cu13==9.24.0.43", "jax-cuda13-plugin==0.10.2"])
        before = _freeze(venv, dict(os.environ))
        got = predicted_changes([step], {"nvidia-cudnn-cu13", "torch", "jax"})
        assert _freeze(venv, dict(os.environ)) == before  # a dry run
    assert got == {"nvidia-cudnn-cu13"}
