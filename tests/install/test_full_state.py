"""A state folder that fills up after the install step (a real full file system: a 1 MiB tmpfs mounted in a
mount namespace of its own, `unshare -m`, where this user may), and settings that are no number (issue 42).

Before: the journal could not be completed, and the change that was applied was reported as "nothing was
changed" (exit 2), leaving a journal that asked for --resume or --rollback with no word of why; a
CUDAMATRIX_UNDO_KEEP_GB of nan, inf or 1e309 crashed after the change with a traceback."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import venv as venv_inproc
from pathlib import Path

import pytest
from support.localindex import build_wheel
from support.uvtool import UV_DIR, with_uv

from cudamatrix.errors import UsageError
from cudamatrix.install import journal as journals
from cudamatrix.install.apply import apply, snapshot
from cudamatrix.models import Applied, Plan, Step

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent('''
    import json, os, sys
    from cudamatrix.install import journal as journals
    from cudamatrix.install.apply import apply, snapshot
    from cudamatrix.models import Plan, Step

    py, wheels, state = sys.argv[1:4]
    plan = Plan(python=py, steps=[Step(kind="install", reason="upgrade a", argv=[
        "uv", "pip", "install", "--python", py, "--no-deps", "--find-links", wheels, "a==2.0"])])

    def fill(event, text):  # after the last step: something else fills the state folder's file system
        if event == "done":
            with open(os.path.join(state, "filler"), "wb", buffering=0) as f:
                try:
                    while True:
                        f.write(b"\\0" * 4096)
                except OSError:
                    pass

    applied = apply(plan, on_progress=fill)
    out = {"journal_error": applied.journal_error, "journal": applied.journal,
           "versions": {d.name: d.version for d in snapshot(py)},
           "left": journals.load(py) is not None, "last": journals.load_last(py) is not None}
    os.unlink(os.path.join(state, "filler"))  # space again: fix --resume completes the journal
    pending = journals.load(py)
    pending.record(resumed=True)
    again = apply(plan, journal=pending)
    out.update(resumed_error=again.journal_error, left_after=journals.load(py) is not None,
               last_after=journals.load_last(py) is not None)
    print(json.dumps(out))
''')


def _bare_venv(tmp_path: Path) -> tuple[str, Path, dict]:
    """A venv without pip holding a 1.0 (uv installs it), the wheels of a 1.0 and 2.0, uv's environment."""
    if UV_DIR is None:
        pytest.skip("uv is not installed (the test extra installs it)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    env = with_uv({**env, "UV_NO_CONFIG": "1", "UV_OFFLINE": "1", "UV_CACHE_DIR": str(tmp_path / "uvc")})
    venv_inproc.EnvBuilder(with_pip=False, symlinks=True).create(tmp_path / "venv")
    py = str(tmp_path / "venv" / "bin" / "python")
    wheels = tmp_path / "w"
    for version in ("1.0", "2.0"):
        build_wheel(wheels, "a", version)
    subprocess.run(["uv", "pip", "install", "--python", py, "--no-deps", "--find-links", str(wheels), "a==1.0"],
                   env=env, check=True, capture_output=True, timeout=120)
    return py, wheels, env


@pytest.mark.slow
@pytest.mark.installs
@pytest.mark.skipif(not shutil.which("unshare") or os.geteuid() != 0, reason="needs unshare -m and mount (root)")
def test_a_state_folder_that_fills_after_the_install_step(tmp_path):
    """The change is applied and said so (Applied.journal_error, the journal's folder), the journal is left as an
    interrupted one, and once there is space fix --resume's path completes it (fix --undo can then go back)."""
    py, wheels, env = _bare_venv(tmp_path)
    state = tmp_path / "state"
    state.mkdir()
    (tmp_path / "script.py").write_text(SCRIPT)
    env.update({"XDG_STATE_HOME": str(state), "PYTHONPATH": str(ROOT)})
    mount = f"mount -t tmpfs -o size=1m,mode=0700 tmpfs {state} && exec {sys.executable} {tmp_path / 'script.py'} " \
            f"{py} {wheels} {state}"
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", mount], env=env,
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0 and "mount" in r.stderr and "permission" in r.stderr.lower():
        pytest.skip(f"no mount namespace here: {r.stderr.strip()}")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert "No space left on device" in out["journal_error"]
    assert out["journal"] == str(state / "cudamatrix" / "journal" / journals.folder_for(py).name)
    assert out["versions"]["a"] == "2.0"  # applied, and said so
    assert out["left"] and not out["last"]  # the journal waits for --resume / --rollback
    assert out["resumed_error"] is None and not out["left_after"] and out["last_after"]


def _fix_text(applied: Applied) -> str:
    from cudamatrix.fix import _journal_left

    return _journal_left(applied, "/v env/bin/python")


def test_the_words_say_the_change_was_applied_and_the_ways_on():
    text = _fix_text(Applied(ok=True, journal_error="x: cannot be written (No space left on device)",
                             journal="/s/j"))
    assert text.startswith("the change was applied, but its journal could not be completed (x: cannot be written "
                           "(No space left on device)): fix --undo cannot go back to it yet")
    assert "cudamatrix fix --resume --python '/v env/bin/python' completes it" in text
    assert "cudamatrix fix --rollback --python '/v env/bin/python' puts the starting set back" in text
    assert "/s/j" in text


@pytest.mark.parametrize("value", ["nan", "inf", "1e309", "-1", "-0.5", "ten", "1e7", "0x10"])
def test_a_keep_setting_that_is_no_number_is_refused_before_any_change(value, tmp_path, monkeypatch):
    """apply() reads CUDAMATRIX_UNDO_KEEP_GB before its first change: exit 2 naming it, nothing run, no journal."""
    monkeypatch.setenv("CUDAMATRIX_UNDO_KEEP_GB", value)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    ran: list = []
    plan = Plan(python="/absent/python", steps=[Step(kind="install", reason="r", argv=["/bin/false"])])
    monkeypatch.setattr("cudamatrix.proc.run", lambda argv, **kw: ran.append(argv))
    with pytest.raises(UsageError) as err:
        apply(plan)
    assert err.value.exit_code == 2 and err.value.message.startswith(f"CUDAMATRIX_UNDO_KEEP_GB={value!r} is not")
    assert "nothing was changed" in err.value.message
    assert ran == [] and not (tmp_path / "state").exists()


@pytest.mark.parametrize("value,gb", [("", 10), (" 2.5 ", 2.5), ("0", 0), ("1e3", 1000)])
def test_a_keep_setting_that_is_a_number(value, gb, monkeypatch):
    monkeypatch.setenv("CUDAMATRIX_UNDO_KEEP_GB", value)
    assert journals.keep_limit() == int(gb * 1024 ** 3)


@pytest.mark.slow
@pytest.mark.installs
def test_a_bad_keep_setting_leaves_the_environment_and_the_state_as_they_were(tmp_path, monkeypatch):
    """A real venv and uv: CUDAMATRIX_UNDO_KEEP_GB=nan used to crash after the change (ValueError from int(nan)),
    with the change applied and an "interrupted" journal left; now nothing runs."""
    py, wheels, env = _bare_venv(tmp_path)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("CUDAMATRIX_UNDO_KEEP_GB", "nan")
    plan = Plan(python=py, steps=[Step(kind="install", reason="upgrade a", argv=[
        "uv", "pip", "install", "--python", py, "--no-deps", "--find-links", str(wheels), "a==2.0"])])
    with pytest.raises(UsageError):
        apply(plan)
    assert {d.name: d.version for d in snapshot(py)}["a"] == "1.0"
    assert journals.load(py) is None and journals.load_last(py) is None
