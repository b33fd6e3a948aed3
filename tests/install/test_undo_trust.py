"""What ``fix --undo`` installs is what the fix saved: the saved wheels are checked (owner, mode, links, the
signed SHA-256) before they become code; the repack keeps only the distribution's own files; a journal that is
damaged or names something that is not a package is refused; and one change of an interpreter runs at a time.
Real pip into copied venvs, real files with real modes and owners, real processes holding the lock."""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from support.localindex import build_wheel, copy_venv

import cudamatrix
from cudamatrix.errors import UsageError
from cudamatrix.install import journal as journals
from cudamatrix.install.apply import apply, snapshot
from cudamatrix.models import Plan, Step

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    env.update({"PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                "PIP_NO_CACHE_DIR": "1", "PYTHONPATH": str(ROOT)})
    return env


@pytest.fixture()
def started(template_venv, tmp_path, monkeypatch):
    """A venv with mut-a 1.0, pip told to use no index; (python, the pip install command with a wheel folder
    holding mut-a 1.0 and 2.0)."""
    for k, v in _env().items():
        monkeypatch.setenv(k, v)
    wheels = tmp_path / "wheels"
    build_wheel(wheels, "mut-a", "1.0")
    build_wheel(wheels, "mut-a", "2.0")
    py = str(copy_venv(template_venv, tmp_path / "venv"))
    pip = [py, "-m", "pip", "install", "--no-deps", "--find-links", str(wheels)]
    subprocess.run(pip + ["mut-a==1.0"], check=True, capture_output=True, timeout=300)
    return py, pip


@pytest.fixture()
def fixed(started, tmp_path):
    """A venv where a completed change (apply: journal, saved wheel, completion) took mut-a from 1.0 to 2.0:
    ``fix --undo`` would put 1.0 back from the kept wheel. Returns (python, the kept wheel, a marker path)."""
    py, pip = started
    assert apply(Plan(python=py, steps=[Step(kind="install", reason="up", argv=pip + ["mut-a==2.0"])])).ok
    kept = next((journals.last_for(py) / "wheels").glob("mut_a-1.0-*.whl"))
    return py, kept, tmp_path / "planted-pth-ran"


def _version(py: str) -> str:
    return next(d.version for d in snapshot(py) if d.name == "mut-a")


def _evil_wheel(folder: Path, marker: Path, tag: str = "py3-none-any") -> Path:
    """A mut-a 1.0 wheel with a .pth that writes ``marker`` at every start of the interpreter it lands in."""
    pth = f"import os; open({str(marker)!r}, 'w').write('ran')\n"
    return build_wheel(folder, "mut-a", "1.0", files={"zz_planted.pth": pth}, tag=tag)


def _swap(kept: Path, marker: Path, tmp_path: Path) -> None:
    """This user replaces the kept wheel's bytes (same name, same 0600 mode, same folder)."""
    evil = _evil_wheel(tmp_path / "evil", marker)
    kept.write_bytes(evil.read_bytes())


def _attack(name: str, kept: Path, marker: Path, tmp_path: Path) -> None:
    folder = kept.parent
    if name == "0666-in-0777":
        _swap(kept, marker, tmp_path)  # what another user could have done through those modes
        kept.chmod(0o666)
        folder.chmod(0o777)
    elif name == "another-owner":
        _swap(kept, marker, tmp_path)
        os.chown(kept, 4242, 4242)
    elif name == "symlinked-folder":
        elsewhere = tmp_path / "elsewhere"
        shutil.copytree(folder, elsewhere)
        _swap(elsewhere / kept.name, marker, tmp_path)
        shutil.rmtree(folder)
        folder.symlink_to(elsewhere)
    elif name == "symlinked-file":
        evil = _evil_wheel(tmp_path / "evil", marker)
        kept.unlink()
        kept.symlink_to(evil)
    elif name == "swapped":
        _swap(kept, marker, tmp_path)
    elif name == "planted-beside":  # a better-tagged wheel of the same version: pip would prefer it
        tag = f"cp{sys.version_info[0]}{sys.version_info[1]}-none-any"
        evil = _evil_wheel(tmp_path / "evil", marker, tag=tag)
        shutil.copy(evil, folder / evil.name)
        (folder / evil.name).chmod(0o600)
    elif name == "hash-edited":  # the journal's hash is changed to the swapped wheel's: the signature no longer holds
        _swap(kept, marker, tmp_path)
        path = folder.parent / journals.JOURNAL_FILE
        doc = json.loads(path.read_text())
        doc["sha256"][kept.name] = journals.sha256_of(kept)
        path.write_text(json.dumps(doc))


ATTACKS = ["0666-in-0777", "another-owner", "symlinked-folder", "symlinked-file", "swapped", "planted-beside",
           "hash-edited"]


@pytest.mark.slow
@pytest.mark.installs
@pytest.mark.parametrize("attack", ATTACKS)
def test_undo_installs_no_saved_wheel_that_someone_could_have_changed(fixed, tmp_path, attack):
    """Before: every one of these was installed, and the planted .pth ran at the next interpreter start."""
    if attack == "another-owner" and os.getuid() != 0:
        pytest.skip("giving a file to another uid needs root")
    py, kept, marker = fixed
    _attack(attack, kept, marker, tmp_path)
    with pytest.raises(UsageError) as err:
        cudamatrix.fix(python=py, undo=True, verify=False, yes=True)
    e = err.value
    assert e.exit_code == 2 and "cannot be trusted" in e.message and "nothing was changed" in e.message
    named = e.detail["path"]
    assert named.startswith(str(journals.last_for(py))), e.message
    assert named in e.message
    subprocess.run([py, "-c", "pass"], check=True, timeout=60)  # an interpreter start: a .pth in site-packages runs
    assert not marker.exists(), "the planted .pth ran"
    assert _version(py) == "2.0"  # nothing changed


@pytest.mark.slow
@pytest.mark.installs
def test_undo_from_the_wheels_it_saved_and_signed_still_works(fixed):
    py, kept, marker = fixed
    doc = json.loads((kept.parent.parent / journals.JOURNAL_FILE).read_text())
    assert doc["sha256"] == {kept.name: journals.sha256_of(kept)} and len(doc[journals.MAC]) == 64
    result = cudamatrix.fix(python=py, undo=True, verify=False, yes=True)
    assert result.status == "undone" and _version(py) == "1.0"


@pytest.mark.slow
@pytest.mark.installs
def test_undo_from_the_cli_refuses_a_swapped_wheel_with_exit_2(fixed, tmp_path):
    py, kept, marker = fixed
    _swap(kept, marker, tmp_path)
    r = subprocess.run([sys.executable, "-m", "cudamatrix", "fix", "--undo", "--python", py, "--yes", "--json"],
                       capture_output=True, text=True, timeout=300, env=dict(os.environ), stdin=subprocess.DEVNULL)
    doc = json.loads(r.stdout)
    assert r.returncode == 2 and doc["status"] == "usage_error", r.stdout + r.stderr
    assert str(kept) in doc["errors"][0]["message"] and "SHA-256" in doc["errors"][0]["message"]
    assert not marker.exists() and _version(py) == "2.0"


@pytest.mark.slow
@pytest.mark.installs
def test_rollback_of_a_killed_fix_installs_no_swapped_saved_wheel(started, tmp_path):
    """``fix --rollback`` reinstalls from the same kind of saved wheels: a swapped one is refused the same way.
    Before: the rollback installed it and the planted .pth ran at the next interpreter start."""
    py, pip = started
    marker = tmp_path / "planted-pth-ran"
    plan = Plan(python=py, steps=[Step(kind="install", reason="up", argv=pip + ["mut-a==2.0"])])
    j = journals.begin(py, plan, snapshot(py), {"mut-a"}, [])  # what apply writes before the first change
    subprocess.run(pip + ["mut-a==2.0"], check=True, capture_output=True, timeout=300)  # the step ran; then: SIGKILL
    j.record(pid=2 ** 22 + 4242, owner=None, pid_start=None, steps_done=1)
    kept = next(j.wheels.glob("mut_a-1.0-*.whl"))
    _swap(kept, marker, tmp_path)
    r = subprocess.run([sys.executable, "-m", "cudamatrix", "fix", "--rollback", "--python", py, "--yes", "--json"],
                       capture_output=True, text=True, timeout=300, env=dict(os.environ), stdin=subprocess.DEVNULL)
    assert r.returncode == 2, r.stdout + r.stderr
    assert str(kept) in json.loads(r.stdout)["errors"][0]["message"]
    subprocess.run([py, "-c", "pass"], check=True, timeout=60)
    assert not marker.exists() and _version(py) == "2.0"


# --- the repack keeps only the distribution's files --------------------------------------------------------

def test_repack_follows_no_dotdot_entry_and_no_link_out_of_site_packages(tmp_path):
    """Before: ``pkg/../../secret`` and links to files and folders outside site-packages were copied into the
    saved wheel (and an undo would have installed them into site-packages)."""
    outside = tmp_path / "outside"
    (outside / "dir").mkdir(parents=True)
    (outside / "secret").write_text("not the distribution's")
    (outside / "dir" / "secret2").write_text("not the distribution's either")
    site = tmp_path / "venv" / "site-packages"
    info = site / "mut_a-1.0.dist-info"
    (site / "mut_a").mkdir(parents=True)
    info.mkdir()
    (site / "mut_a" / "__init__.py").write_text("x = 1\n")
    (site / "mut_a" / "same.py").symlink_to(site / "mut_a" / "__init__.py")  # a link that stays inside: kept
    (site / "mut_a" / "out.py").symlink_to(outside / "secret")
    (site / "linked").symlink_to(outside / "dir")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mut-a\nVersion: 1.0\n")
    (info / "WHEEL").write_text("Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    rows = ["mut_a/__init__.py", "mut_a/same.py", "mut_a/../../outside/secret", "mut_a/../../../outside/secret",
            "../outside/secret", "mut_a/out.py", "linked/secret2", str(outside / "secret"),
            "mut_a/./__init__.py", "mut_a-1.0.dist-info/METADATA", "mut_a-1.0.dist-info/WHEEL",
            "mut_a-1.0.dist-info/RECORD"]
    (info / "RECORD").write_text("".join(f"{r},,\n" for r in rows))
    wheel = journals.repack(info, tmp_path / "saved")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        assert names == ["mut_a/__init__.py", "mut_a/same.py", "mut_a-1.0.dist-info/METADATA",
                         "mut_a-1.0.dist-info/WHEEL", "mut_a-1.0.dist-info/RECORD"]
        assert all(b"not the distribution" not in zf.read(n) for n in names)


# --- the journal's shape and names ---------------------------------------------------------------------------

def _kept_journal(py: str, **changes) -> Path:
    """A completed change's journal for ``py`` as this tool writes it (signed), then changed by ``changes``."""
    plan = Plan(python=py, steps=[Step(kind="install", reason="i", argv=[py, "-m", "pip", "install", "x==1"])])
    j = journals.begin(py, plan, [], set(), [])
    journals.complete(j, [])
    last = journals.load_last(py)
    last.record(**changes)
    return last.folder / journals.JOURNAL_FILE


DAMAGED = [
    {"after": "x"}, {"after": [1]}, {"after": [{"name": "a"}]}, {"after": [{"version": "1"}]},
    {"after": [{"name": 5, "version": "1"}]}, {"after": [{"name": "a", "version": "1", "extra": 1}]},
    {"after": {"a": "1"}}, {"sha256": {"a.whl": "zz"}}, {"sha256": ["a"]}, {"wheels": {"a": 5}},
    {"unsaved": [None]}, {"finished_at": 5}, {"dropped": []}, {"owner": "me"},
]
NOT_NAMES = [
    {"before": [{"name": "-r", "version": "1.0"}]}, {"before": [{"name": "--pre", "version": "1.0"}]},
    {"after": [{"name": "a b", "version": "1.0"}]}, {"before": [{"name": "a", "version": "--pre"}]},
    {"before": [{"name": "a", "version": "1.0 --index-url=http://evil.example/s"}]},
    {"before": [{"name": "a", "version": " 1.0"}]}, {"before": [{"name": "a;b", "version": "1.0"}]},
]


@pytest.mark.parametrize("changes", DAMAGED + NOT_NAMES, ids=lambda c: json.dumps(c)[:60])
def test_a_damaged_journal_or_one_naming_no_package_is_refused_with_its_path(changes):
    """Before: ``after`` of a wrong shape crashed ``fix --undo --dry-run`` (TypeError, KeyError in
    _check_unchanged), and ``-r``/``--pre`` as names or versions went into pip's command line."""
    path = _kept_journal(sys.executable, **changes)
    with pytest.raises(UsageError) as err:
        journals.load_last(sys.executable)
    assert err.value.exit_code == 2 and str(path) in err.value.message and "cannot be used" in err.value.message


@pytest.mark.slow
@pytest.mark.parametrize("changes", [{"after": [{"name": "a"}]}, {"before": [{"name": "-r", "version": "1"}]}])
def test_fix_undo_dry_run_on_a_damaged_journal_exits_2_naming_it(changes):
    path = _kept_journal(sys.executable, **changes)
    r = subprocess.run([sys.executable, "-m", "cudamatrix", "fix", "--undo", "--dry-run", "--json"],
                       capture_output=True, text=True, timeout=300, env=dict(os.environ), stdin=subprocess.DEVNULL)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert str(path) in json.loads(r.stdout)["errors"][0]["message"]


# --- one change of an interpreter at a time ------------------------------------------------------------------

def test_the_lock_refuses_a_second_holder_naming_the_first_and_is_free_again_after(tmp_path):
    first = journals.hold("/venv/bin/python")
    try:
        with pytest.raises(UsageError) as err:
            journals.hold("/venv/bin/python")
        e = err.value
        assert e.exit_code == 2 and f"process {os.getpid()}" in e.message and "nothing was changed" in e.message
        # the holder's own command line, as /proc shows it (pytest's, or an xdist worker's)
        own = shlex.join(Path(f"/proc/{os.getpid()}/cmdline").read_bytes().decode().rstrip("\0").split("\0"))
        assert e.detail["pid"] == os.getpid() and e.detail["command"] == own[:1000]
        assert journals.hold("/other/bin/python").release() is None  # another interpreter: its own lock
    finally:
        first.release()
    journals.hold("/venv/bin/python").release()
    lock = journals.lock_path("/venv/bin/python")
    assert oct(lock.stat().st_mode & 0o777) == "0o600"
    lock.unlink()
    lock.symlink_to(tmp_path / "victim")  # a planted link is never followed
    with pytest.raises(UsageError, match="cannot be taken"):
        journals.hold("/venv/bin/python")
    assert not (tmp_path / "victim").exists()


_HOLDER = """
import sys, time, pathlib
import cudamatrix
flag, go = pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
def confirm(plan):
    flag.write_text("asking")
    while not go.exists():
        time.sleep(0.05)
    return True
r = cudamatrix.fix(python=sys.argv[1], undo=True, verify=False, confirm=confirm)
print(r.status)
"""


@pytest.mark.slow
@pytest.mark.installs
def test_a_second_fix_of_the_same_interpreter_exits_2_naming_the_first(fixed, tmp_path):
    """A first ``fix --undo`` is at work (stopped at its question); a second one on the same interpreter exits 2
    naming the first's process and command, and changes nothing. Before: the second ran, reported success, and
    the first then replaced its journal: the kept wheels of the change were gone and the next undo refused."""
    py, kept, marker = fixed
    flag, go = tmp_path / "asking", tmp_path / "go"
    first = subprocess.Popen([sys.executable, "-c", _HOLDER, py, str(flag), str(go)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        deadline = time.monotonic() + 120
        while not flag.exists() and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert flag.exists(), first.communicate()
        second = subprocess.run([sys.executable, "-m", "cudamatrix", "fix", "--undo", "--python", py, "--yes",
                                 "--json"], capture_output=True, text=True, timeout=300, env=dict(os.environ),
                                stdin=subprocess.DEVNULL)
        doc = json.loads(second.stdout)
        assert second.returncode == 2, second.stdout + second.stderr
        error = doc["errors"][0]
        assert f"process {first.pid}" in error["message"] and error["detail"]["pid"] == first.pid
        assert "-c" in error["detail"]["command"] and _version(py) == "2.0"
    finally:
        go.touch()
        out, err = first.communicate(timeout=300)
    assert first.returncode == 0 and out.strip().endswith("undone"), out + err
    assert _version(py) == "1.0"
    # the first's undo is the last completed change, with its saved wheels: undo goes forward again
    again = cudamatrix.fix(python=py, undo=True, verify=False, yes=True)
    assert again.status == "undone" and _version(py) == "2.0"
