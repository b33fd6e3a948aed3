"""The install journal (saved wheels repacked from installed files, pip's stash folders) and the disk-space
check, with real pip, real venvs and a loopback index; the file system's free space is injected."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import zipfile
from pathlib import Path

import pytest
from support.localindex import LocalIndex, build_wheel, copy_venv, pip_env

from cudamatrix.errors import InstallFailed, UsageError
from cudamatrix.install import journal as journals
from cudamatrix.install import resources
from cudamatrix.install.apply import snapshot
from cudamatrix.install.plan import make_plan
from cudamatrix.models import Environment, Pin, Plan, PythonInfo, Solution, Step


def _site(py: Path) -> Path:
    return Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())


@pytest.fixture()
def installed(template_venv, tmp_path):
    """A venv holding one stand-in wheel (a module, a data file, a console script) installed by pip."""
    py = copy_venv(template_venv, tmp_path / "venv")
    w = tmp_path / "w"
    path = build_wheel(w, "nvidia-cudnn-cu13", "9.12.0.46", files={"nvidia/cudnn/lib/libcudnn.so.9": "cudnn 13"})
    env = pip_env("http://127.0.0.1:9/simple", tmp_path / "cache")
    subprocess.run([str(py), "-m", "pip", "install", "--no-index", str(path)], env=env, check=True,
                   capture_output=True, timeout=300)
    return py, env


def test_a_repacked_py2_py3_wheel_is_named_for_every_tag_it_had(tmp_path):
    """A wheel built for both Pythons (shellingham, six: WHEEL lists ``Tag: py2-none-any`` and ``Tag: py3-none-any``)
    is saved under the compressed tag set; named for its first tag alone, no Python 3 pip would take it back."""
    info = tmp_path / "site" / "shellingham-1.5.4.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: shellingham\nVersion: 1.5.4\n")
    (info / "WHEEL").write_text("Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py2-none-any\nTag: py3-none-any\n")
    (info / "RECORD").write_text("shellingham-1.5.4.dist-info/METADATA,,\nshellingham-1.5.4.dist-info/WHEEL,,\n")
    assert journals.repack(info, tmp_path / "saved").name == "shellingham-1.5.4-py2.py3-none-any.whl"
    assert journals._tag_set(["cp311-cp311-manylinux_2_17_x86_64", "cp311-cp311-manylinux2014_x86_64"]) == \
        "cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64"


@pytest.mark.installs
def test_repacked_wheel_puts_back_the_same_files(installed, tmp_path):
    py, env = installed
    site = _site(py)
    dist = next(d for d in snapshot(str(py)) if d.name == "nvidia-cudnn-cu13")
    assert dist.path and dist.path.endswith(".dist-info")
    (site / "nvidia/cudnn/lib/libcudnn.so.9").write_text("clobbered by another wheel")  # what the env holds now
    wheel = journals.repack(Path(dist.path), tmp_path / "saved")
    assert wheel.name == "nvidia_cudnn_cu13-9.12.0.46-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        assert "nvidia_cudnn_cu13-9.12.0.46.dist-info/INSTALLER" not in names  # install-time files left out
        # the .dist-info last (PEP 427: "place the .dist-info files physically at the end of the archive"), so a
        # payload file that fails to extract leaves no half .dist-info behind (test_fix_e2e's failing undo)
        first_info = min(i for i, n in enumerate(names) if ".dist-info/" in n)
        assert all(".dist-info/" in n for n in names[first_info:]) and first_info > 0, names
    subprocess.run([str(py), "-m", "pip", "uninstall", "-y", "nvidia-cudnn-cu13"], env=env, check=True,
                   capture_output=True, timeout=300)
    assert not (site / "nvidia/cudnn/lib/libcudnn.so.9").exists()
    r = subprocess.run([str(py), "-m", "pip", "install", "--no-deps", "--no-index", "--find-links",
                        str(wheel.parent), "nvidia-cudnn-cu13==9.12.0.46"], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert (site / "nvidia/cudnn/lib/libcudnn.so.9").read_text() == "clobbered by another wheel"
    freeze = subprocess.run([str(py), "-m", "pip", "freeze"], env=env, capture_output=True, text=True).stdout
    assert "nvidia-cudnn-cu13==9.12.0.46" in freeze  # an index-style install: no "@ file://" in freeze


@pytest.mark.installs
def test_pip_stash_folders_are_not_distributions(installed):
    py, _ = installed
    site = _site(py)
    real = next(site.glob("nvidia_cudnn_cu13-*.dist-info"))
    stash = site / ("~" + real.name[1:])  # how pip names the stash of a half-done uninstall
    shutil.copytree(real, stash)
    (stash / "METADATA").write_text((stash / "METADATA").read_text().replace("9.12.0.46", "1.0"))
    got = {d.name: d.version for d in snapshot(str(py))}
    assert got["nvidia-cudnn-cu13"] == "9.12.0.46"
    assert journals.stash_dirs([str(site)]) == [str(stash)]
    j = journals.Journal(site.parent / "j", {"stash": []})
    assert journals.clean_stash(j, [str(site)]) == [str(stash)] and not stash.exists()


def test_journal_load_owner_and_corrupt_file(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert journals.load("/venv/bin/python") is None
    plan = Plan(python="/venv/bin/python", steps=[Step(kind="install", reason="r", argv=["x"])])
    j = journals.begin("/venv/bin/python", plan, [], set(), [])
    assert journals.folder_for("/venv/bin/python") == j.folder and j.folder.is_relative_to(tmp_path)
    got = journals.load("/venv/bin/python")
    assert got.data["pid"] == os.getpid() and not journals.owner_alive(got)  # this process: not another owner
    assert got.plan().steps[0].argv == ["x"] and "0 of 1 step(s) done" in got.describe()
    got.record(pid=2 ** 22 + 12345, owner=None)  # a process that does not exist
    assert not journals.owner_alive(journals.load("/venv/bin/python"))
    (j.folder / journals.JOURNAL_FILE).write_text("{not json")
    with pytest.raises(UsageError, match="cannot be used: not JSON"):  # there, but not usable: said, left in place
        journals.load("/venv/bin/python")
    assert journals.peek("/venv/bin/python") is None  # a dry run's look: nothing to note
    j.close()
    assert not j.folder.exists()


# --- disk space ------------------------------------------------------------------------------------------

class _Vfs:
    def __init__(self, free: int) -> None:
        self.f_bavail, self.f_frsize = free // 4096, 4096


def _plan(index_url: str, tmp_path: Path) -> tuple[Plan, Environment]:
    env = Environment(python=PythonInfo(site_packages=[str(tmp_path)], tags=["py3-none-any"]))
    sol = Solution(request=["torch"], targets=["t"], to_install=[Pin("torch", "2.5.1+cu121")],
                   packages=[Pin("torch", "2.5.1+cu121")], index_url=index_url,
                   pip_args=["--index-url", index_url, "torch==2.5.1+cu121"])
    return make_plan(env, sol, python="/p", installer="pip", allow_http=True, verify=False), env


@pytest.mark.slow
def test_space_check_reads_sizes_from_the_index_and_refuses_with_numbers(tmp_path, monkeypatch):
    w = tmp_path / "w"
    wheel = build_wheel(w, "torch", "2.5.1+cu121", files={"torch/big.bin": "x" * 200_000})
    size = wheel.stat().st_size
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    with LocalIndex(w) as index:
        plan, env = _plan(index.url + "/simple", tmp_path)
        assert resources.file_size(index.url + "/simple", "torch", "2.5.1+cu121", ["py3-none-any"]) == size
        monkeypatch.setattr(resources, "STATVFS", lambda path: _Vfs(10 ** 12))
        assert resources.check_space(plan, env) is None  # fits
        monkeypatch.setattr(resources, "STATVFS", lambda path: _Vfs(size))  # less than unpacked + cache + temp
        with pytest.raises(InstallFailed, match="not enough free disk space") as err:
            resources.check_space(plan, env)
    need = int(size * resources.UNPACK_FACTOR * resources.MARGIN)
    assert resources.gb(need) in err.value.message and "site-packages" in err.value.message
    assert "nothing was changed" in err.value.hint


def test_space_check_says_what_it_could_not_size(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    plan, env = _plan("http://127.0.0.1:9/simple", tmp_path)
    monkeypatch.setattr(resources, "find", lambda *a, **k: resources.Found(listed=True))  # listed, no size
    note = resources.check_space(plan, env)
    assert note and "torch==2.5.1+cu121" in note and "not compared" in note


def test_space_check_refuses_an_index_that_does_not_answer(tmp_path, monkeypatch):
    """Nothing listens on the plan's index: the files cannot be fetched, refused before any change (exit 4)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    plan, env = _plan("http://127.0.0.1:9/simple", tmp_path)
    with pytest.raises(InstallFailed) as err:
        resources.check_space(plan, env)
    assert err.value.message == ("the plan's files cannot all be fetched: the index http://127.0.0.1:9/simple gave "
                                 f"no usable answer (none, none within {resources.HTTP_TIMEOUT_S:g} s, or one over 64 MiB)")
    assert err.value.exit_code == 4 and "nothing was changed" in err.value.hint


def test_space_check_real_statvfs(tmp_path, monkeypatch):
    """The real free space of this machine's temp folder against a plan that needs more than any disk has."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    plan, env = _plan("http://127.0.0.1:9/simple", tmp_path)
    monkeypatch.setattr(resources, "find", lambda *a, **k: resources.Found(listed=True, size=10 ** 16))  # 10 PB
    with pytest.raises(InstallFailed) as err:
        resources.check_space(plan, env)
    free = os.statvfs(tmp_path)
    assert resources.gb(free.f_bavail * free.f_frsize)[:3] in err.value.message


def _places(tmp_path: Path, monkeypatch, cache: Path, temp: Path) -> tuple[Plan, Environment, int]:
    """A plan whose one wheel the index sizes at 1 MB; its cache and temp folders where given."""
    import tempfile

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("PIP_CACHE_DIR", str(cache))
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    monkeypatch.setattr(resources, "find", lambda *a, **k: resources.Found(listed=True, size=1_000_000))
    plan, env = _plan("http://127.0.0.1:9/simple", tmp_path)
    return plan, env, 1_000_000


def test_space_needs_on_one_file_system_are_summed(tmp_path, monkeypatch):
    """site-packages, the installer cache and temp on one disk: each fits the free space alone, together they
    do not, and the plan is refused with the sum."""
    plan, env, size = _places(tmp_path, monkeypatch, tmp_path / "cache", tmp_path / "tmp")
    needs = {n.where: n.nbytes for n in resources.measure(plan, env).needs}
    assert needs["site-packages"] == int(size * resources.UNPACK_FACTOR * resources.MARGIN)
    assert needs["installer cache"] == needs["temp"] == int(size * resources.MARGIN) and needs["journal"] == 0
    total = sum(needs.values())
    monkeypatch.setattr(resources, "STATVFS", lambda path: _Vfs(total + 4095))
    assert resources.check_space(plan, env) is None  # enough for all of them
    free = total - 4096  # less than the sum, more than any one of them
    assert free > max(needs.values())
    monkeypatch.setattr(resources, "STATVFS", lambda path: _Vfs(free))
    with pytest.raises(InstallFailed, match="needed on one file system") as err:
        resources.check_space(plan, env)
    assert err.value.message.count("needed on one file system") == 1
    assert f"{resources.gb(total)} needed on one file system, {resources.gb(free // 4096 * 4096)} free" \
        in err.value.message
    for where in ("site-packages", "installer cache", "temp"):
        assert where in err.value.message


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="needs a second file system (/dev/shm)")
def test_space_needs_on_two_file_systems_are_compared_apart(tmp_path, monkeypatch):
    """The cache and temp on another file system (/dev/shm, a tmpfs): site-packages alone must fit here."""
    shm = Path("/dev/shm")
    if os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("/dev/shm is on the same file system as the temporary folder")
    plan, env, size = _places(tmp_path, monkeypatch, shm / "cudamatrix-test-absent" / "cache",
                              shm / "cudamatrix-test-absent" / "tmp")
    needs = {n.where: n.nbytes for n in resources.measure(plan, env).needs}
    free = needs["site-packages"]  # enough for each file system's own sum, not for all of them together
    assert needs["installer cache"] + needs["temp"] <= free < sum(needs.values())
    monkeypatch.setattr(resources, "STATVFS", lambda path: _Vfs(free + 4095))
    assert resources.check_space(plan, env) is None
    assert not (shm / "cudamatrix-test-absent").exists()  # measuring creates nothing


def test_owner_is_a_live_process_with_the_same_start_time(tmp_path, monkeypatch):
    from cudamatrix.install.owner import Identity

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    j = journals.begin("/venv/bin/python", Plan(python="/venv/bin/python"), [], set(), [])
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        j.record(pid=sleeper.pid, owner=Identity.of(sleeper.pid).to_dict())
        assert journals.owner_alive(journals.load("/venv/bin/python"))
        j.record(owner=dict(j.data["owner"], start="1"))  # the pid now belongs to a process started at another time
        assert not journals.owner_alive(journals.load("/venv/bin/python"))
        j.record(owner=dict(j.data["owner"], start=journals._start_time(sleeper.pid), boot="another-boot"))
        assert not journals.owner_alive(journals.load("/venv/bin/python"))  # before a reboot: not running now
    finally:
        sleeper.kill()
        sleeper.wait()
    j.record(owner=dict(j.data["owner"], boot=Identity.of(os.getpid()).boot))
    assert not journals.owner_alive(journals.load("/venv/bin/python"))


@pytest.mark.installs
def test_detect_does_not_take_a_stash_for_the_distribution(installed):
    """A killed uninstall can leave only the stash: detect must then report the distribution as missing."""
    from cudamatrix.detect import detect

    py, _ = installed
    site = _site(py)
    real = next(site.glob("nvidia_cudnn_cu13-*.dist-info"))
    real.rename(site / ("~" + real.name[1:]))
    env = detect(python=str(py))
    assert "nvidia-cudnn-cu13" not in env.packages
    assert "nvidia-cudnn-cu13" not in {d.name for d in snapshot(str(py))}



# --- attacks: a journal left behind (stale, planted, tampered) is data, and proves nothing it does not hold ------

def _sleeper() -> subprocess.Popen:
    """A bystander: a real process leading its own process group (a training job, a tmux session)."""
    return subprocess.Popen(["sleep", "120"], start_new_session=True)


def _stale_journal(py: str, **fields) -> journals.Journal:
    """A journal for ``py`` as a killed ``fix`` leaves it (the starting set is what is installed now, so a
    rollback that got through would change nothing), then changed by ``fields``."""
    plan = Plan(python=py, steps=[Step(kind="uninstall", reason="drop x", argv=[py, "-m", "pip", "uninstall", "-y",
                                                                                    "x"])])
    j = journals.begin(py, plan, snapshot(py), set(), [])
    j.record(pid=2 ** 22 + 4242, owner=None, pid_start=None, **fields)  # its owner is long gone
    return j


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    import sys

    return subprocess.run([sys.executable, "-m", "cudamatrix", *args], capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ))


@pytest.mark.installs
def test_rollback_never_kills_a_bystander_that_got_the_installers_group_number(template_venv, tmp_path):
    """After a SIGKILL the installer's group number is handed to another process: the rollback must leave it
    alone, say why, and change nothing (before: it was sent SIGKILL, and the rollback said "rolled back", 0)."""
    py = str(copy_venv(template_venv, tmp_path / "venv"))
    bystander = _sleeper()
    try:
        j = _stale_journal(py, child_pgid=bystander.pid)
        out = _cli("fix", "--rollback", "--python", py, "--yes", "--json")
        time.sleep(0.5)
        assert bystander.poll() is None, "the bystander was killed"
        doc = json.loads(out.stdout)
        assert out.returncode == 2 and doc["status"] == "usage_error", out.stdout + out.stderr
        message = doc["errors"][0]["message"]
        assert f"process group {bystander.pid}" in message and "nothing was signalled" in message
        assert (j.folder / journals.JOURNAL_FILE).is_file()  # kept: nothing was done
        # the same with a recorded identity that no longer matches (the pid was reused)
        from cudamatrix.install.owner import Identity

        j.record(installer=dict(Identity.of(bystander.pid).to_dict(), start="1"))
        out = _cli("fix", "--rollback", "--python", py, "--yes")
        assert out.returncode == 2 and "started at tick" in out.stderr and bystander.poll() is None, out.stderr
    finally:
        bystander.kill()
        bystander.wait()


@pytest.mark.slow
@pytest.mark.parametrize("group", ["0", "1", "own", "negative"])
def test_rollback_never_signals_group_0_1_or_its_own(tmp_path, monkeypatch, group):
    """A tampered journal naming group 0 (killpg(0) is the caller's own group), 1 (init's) or the tool's own group:
    nothing is signalled (os.killpg is recorded, not delivered), the rollback refuses, nothing changes."""
    import sys

    import cudamatrix

    py = os.path.abspath(sys.executable)
    pgid = {"0": 0, "1": 1, "own": os.getpgrp(), "negative": -os.getpgrp()}[group]
    _stale_journal(py, child_pgid=pgid)
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(os, "killpg", lambda g, sig: sent.append((g, sig)))
    ran: list[list[str]] = []
    monkeypatch.setattr("cudamatrix.install.apply.restore",
                        lambda *a, **k: ran.append(list(a)) or ([], {"added": [], "removed": [], "changed": []}))
    try:
        cudamatrix.fix(python=py, rollback=True, verify=False)
    except UsageError as exc:
        err = exc
    assert [s for s in sent if s[1] != 0] == [] and ran == []
    assert f"process group {pgid}" in err.message
    assert "never signalled" in err.message or "own group" in err.message


def test_a_left_over_installer_proven_to_be_the_journals_is_stopped(tmp_path):
    j = journals.begin("/venv/bin/python", Plan(python="/venv/bin/python"), [], set(), [])
    installer, bystander = _sleeper(), _sleeper()
    try:
        j.record_installer(installer.pid, ["sleep", "120"], 1)
        j.record(child_pgid=bystander.pid)  # the group number was changed: the identity is the installer's
        with pytest.raises(UsageError, match="not proven"):
            journals.stop_installer(journals.load("/venv/bin/python"))
        assert installer.poll() is None and bystander.poll() is None
        j.record_installer(installer.pid, ["sleep", "99"], 1)  # the recorded command is not the one it runs
        with pytest.raises(UsageError, match="another command"):
            journals.stop_installer(journals.load("/venv/bin/python"))
        j.record_installer(installer.pid, ["sleep", "120"], 1)
        assert "stopped" in journals.stop_installer(journals.load("/venv/bin/python"))
        assert installer.wait(timeout=10) == -9 and bystander.poll() is None
        assert journals.stop_installer(journals.load("/venv/bin/python")) is None  # gone: nothing to do
    finally:
        for p in (installer, bystander):
            if p.poll() is None:
                p.kill()
            p.wait()


def _planted(tmp_path: Path) -> tuple[Path, Path]:
    """An executable script that leaves a marker file each time it runs, and the marker's path."""
    marker = tmp_path / "planted-ran"
    script = tmp_path / "planted-python"
    script.write_text(f"#!/bin/sh\necho ran >> {marker}\necho '[]'\n")
    script.chmod(0o755)
    return script, marker


@pytest.mark.installs
def test_rollback_never_runs_the_interpreter_a_journal_names(template_venv, tmp_path):
    """A journal kept for the venv's interpreter that names another one (a planted script): the rollback
    refuses it and runs nothing it names (before: the script ran 20 times and the command exited 0)."""
    py = str(copy_venv(template_venv, tmp_path / "venv"))
    script, marker = _planted(tmp_path)
    _stale_journal(py, python=str(script))
    out = _cli("fix", "--rollback", "--python", py)
    assert out.returncode == 2 and "names the interpreter" in out.stderr, out.stdout + out.stderr
    out = _cli("fix", "--resume", "--python", py, "--no-verify")
    assert out.returncode == 2 and "names the interpreter" in out.stderr, out.stdout + out.stderr
    assert not marker.exists()


@pytest.mark.installs
def test_resume_runs_no_program_a_journal_names(template_venv, tmp_path):
    """The journal is the venv's own, but its plan's step runs a planted program: resume refuses before
    anything runs."""
    py = str(copy_venv(template_venv, tmp_path / "venv"))
    script, marker = _planted(tmp_path)
    j = _stale_journal(py)
    for argv, env in (([str(script), "-m", "pip", "install", "x==1"], {}),  # another program
                      ([py, "-m", "pip", "install", "-r", str(script)], {}),  # an argument the plan never writes
                      ([py, "-m", "pip", "install", "x==1"], {"LD_PRELOAD": str(script)}),  # code via the loader
                      ([py, "-m", "pip", "install", "--index-url", "https://i.example/s\n--trusted-host", "x==1"], {})):
        plan = Plan(python=py, steps=[Step(kind="install", reason="tampered", argv=argv, env=env)])
        j.record(plan=plan.to_dict(), steps_done=0)
        out = _cli("fix", "--resume", "--python", py, "--no-verify")
        assert out.returncode == 2 and "not one this tool writes" in out.stderr, (argv, out.stdout + out.stderr)
    assert not marker.exists()


def test_resume_rebuilds_each_step_for_the_interpreter_given():
    from cudamatrix.install.replay import rebuilt

    plan = Plan(python="/v/python", steps=[
        Step(kind="uninstall", reason="u", argv=["/v/python", "-m", "pip", "uninstall", "-y", "jax-cuda12-plugin"]),
        Step(kind="install", reason="i", argv=["uv", "pip", "install", "--python", "/v/python", "--index-url",
                                               "https://download.pytorch.org/whl/cu121", "torch==2.5.1+cu121",
                                               "tensorflow[and-cuda]==2.15.1"], env={"UV_INDEX_URL": "https://m/s"}),
        Step(kind="reinstall", reason="r", argv=["/v/python", "-m", "pip", "install", "--extra-index-url=https://e/s",
                                                 "--force-reinstall", "--no-deps", "nvidia-cudnn-cu12==9.1.0.70"]),
        Step(kind="verify", reason="v", argv=["/v/python", "-m", "cudamatrix", "verify"])])
    got = rebuilt(plan, "/v/python")
    assert [s.argv for s in got.steps] == [s.argv for s in plan.steps]
    assert got.steps[1].env == {"UV_INDEX_URL": "https://m/s"}
    with pytest.raises(UsageError, match="runs the interpreter '/v/python', not '/other/python'"):
        rebuilt(plan, "/other/python")
    http = Plan(python="/p", steps=[Step(kind="install", reason="i", argv=["/p", "-m", "pip", "install", "--index-url",
                                                                          "http://m/s", "a==1"])])
    with pytest.raises(UsageError, match="not https"):
        rebuilt(http, "/p")
    assert rebuilt(http, "/p", allow_http=True).steps[0].argv[-3:] == ["--index-url", "http://m/s", "a==1"]


@pytest.mark.parametrize("url, mirror, back", [
    ("https://m.example/whl/cu121", "https://u:TOKEN@m.example/whl", "https://u:TOKEN@m.example/whl/cu121"),
    ("https://m.example/whl", "https://u:TOKEN@m.example/whl/", "https://u:TOKEN@m.example/whl"),
    ("https://m.example/whlx", "https://u:TOKEN@m.example/whl", "https://m.example/whlx"),  # another path: not it
    ("https://other.example/whl", "https://u:TOKEN@m.example/whl", "https://other.example/whl"),
    ("https://m.example/whl", None, "https://m.example/whl"),
])
def test_resume_puts_the_mirrors_credentials_back(url, mirror, back):
    from cudamatrix.install.replay import with_credentials

    assert with_credentials(url, mirror) == back


def test_the_journal_is_private_and_never_follows_a_planted_link(tmp_path):
    """Folders 0700 from cudamatrix/ down, files 0600; a symlink planted at the old temporary name
    (journal.json.tmp) is never followed; no credentials are written."""
    victim = tmp_path / "victim"
    victim.write_text("precious")
    mirror = "https://user:TOKEN@mirror.example/whl/cu121"
    plan = Plan(python="/venv/bin/python", steps=[Step(kind="install", reason="i", argv=[
        "/venv/bin/python", "-m", "pip", "install", "--index-url", mirror, "torch==2.5.1"])])
    j = journals.begin("/venv/bin/python", plan, [], set(), [])
    (j.folder / (journals.JOURNAL_FILE + ".tmp")).symlink_to(victim)
    j.record(steps_done=1)
    assert victim.read_text() == "precious"
    root = journals.state_root().parent
    for folder in (root, root / "journal", j.folder, j.wheels):
        assert oct(folder.stat().st_mode & 0o777) == "0o700", folder
    text = (j.folder / journals.JOURNAL_FILE).read_text()
    assert oct((j.folder / journals.JOURNAL_FILE).stat().st_mode & 0o777) == "0o600"
    assert "TOKEN" not in text and "https://mirror.example/whl/cu121" in text
    assert journals.load("/venv/bin/python").data["steps_done"] == 1


@pytest.mark.parametrize("attack", ["world-writable", "symlink", "nested", "huge", "not-a-journal", "bad-before"])
def test_a_journal_that_cannot_be_trusted_is_refused_not_used(tmp_path, attack):
    j = journals.begin("/venv/bin/python", Plan(python="/venv/bin/python"), [], set(), [])
    path = j.folder / journals.JOURNAL_FILE
    if attack == "world-writable":
        path.chmod(0o666)
    elif attack == "symlink":
        real = tmp_path / "elsewhere.json"
        real.write_text(path.read_text())
        path.unlink()
        path.symlink_to(real)
    elif attack == "nested":
        path.write_text("[" * 100_000 + "]" * 100_000)
    elif attack == "huge":
        with open(path, "wb") as fh:
            fh.truncate(3 * 1024 ** 3)  # sparse: 3 GB that take no room
    elif attack == "not-a-journal":
        path.write_text(json.dumps({"python": "/venv/bin/python", "before": "x", "plan": {}}))
    else:
        path.write_text(json.dumps({"python": "/venv/bin/python", "before": [{"name": 5}], "plan": {}}))
    if attack == "bad-before":
        with pytest.raises(UsageError, match="before"):
            assert journals.load("/venv/bin/python").before is None  # validated when read: raises
        return
    with pytest.raises(UsageError, match="cannot be used"):
        journals.load("/venv/bin/python")


def test_an_installer_that_died_unreaped_does_not_block_the_rollback(tmp_path):
    """After SIGKILL the installer dies with its parent, but until init reaps it, it is a zombie that still
    answers kill(0) and has no command line: it runs nothing, so it is no reason to refuse."""
    import signal

    j = journals.begin("/venv/bin/python", Plan(python="/venv/bin/python"), [], set(), [])
    installer = _sleeper()
    try:
        j.record_installer(installer.pid, ["sleep", "120"], 1)
        os.kill(installer.pid, signal.SIGKILL)
        for _ in range(50):
            if Path(f"/proc/{installer.pid}/stat").read_text().split(") ")[1][0] == "Z":
                break
            time.sleep(0.05)
        assert journals.stop_installer(journals.load("/venv/bin/python")) is None
    finally:
        installer.wait()
