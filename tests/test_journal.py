"""The install journal (saved wheels repacked from installed files, pip's stash folders) and the disk-space
check, with real pip, real venvs and a loopback index; the file system's free space is injected."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from cudamatrix.errors import InstallFailed
from cudamatrix.install import journal as journals
from cudamatrix.install import resources
from cudamatrix.install.apply import snapshot
from cudamatrix.install.plan import make_plan
from cudamatrix.models import Environment, Pin, Plan, PythonInfo, Solution, Step

from localindex import LocalIndex, build_wheel, copy_venv, pip_env


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


@pytest.mark.slow
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
    subprocess.run([str(py), "-m", "pip", "uninstall", "-y", "nvidia-cudnn-cu13"], env=env, check=True,
                   capture_output=True, timeout=300)
    assert not (site / "nvidia/cudnn/lib/libcudnn.so.9").exists()
    r = subprocess.run([str(py), "-m", "pip", "install", "--no-deps", "--no-index", "--find-links",
                        str(wheel.parent), "nvidia-cudnn-cu13==9.12.0.46"], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert (site / "nvidia/cudnn/lib/libcudnn.so.9").read_text() == "clobbered by another wheel"
    freeze = subprocess.run([str(py), "-m", "pip", "freeze"], env=env, capture_output=True, text=True).stdout
    assert "nvidia-cudnn-cu13==9.12.0.46" in freeze  # an index-style install: no "@ file://" in freeze


@pytest.mark.slow
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
    got.record(pid=2 ** 22 + 12345)  # a process that does not exist
    assert not journals.owner_alive(journals.load("/venv/bin/python"))
    (j.folder / journals.JOURNAL_FILE).write_text("{not json")
    assert journals.load("/venv/bin/python") is None
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
    plan, env = _plan("http://127.0.0.1:9/simple", tmp_path)  # nothing listens: no size
    note = resources.check_space(plan, env)
    assert note and "torch==2.5.1+cu121" in note and "not compared" in note


def test_space_check_real_statvfs(tmp_path, monkeypatch):
    """The real free space of this machine's temp folder against a plan that needs more than any disk has."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    plan, env = _plan("http://127.0.0.1:9/simple", tmp_path)
    monkeypatch.setattr(resources, "file_size", lambda *a, **k: 10 ** 16)  # 10 PB: a size the index could report
    with pytest.raises(InstallFailed) as err:
        resources.check_space(plan, env)
    free = os.statvfs(tmp_path)
    assert resources.gb(free.f_bavail * free.f_frsize)[:3] in err.value.message


def test_owner_is_a_live_process_with_the_same_start_time(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    j = journals.begin("/venv/bin/python", Plan(python="/venv/bin/python"), [], set(), [])
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        j.record(pid=sleeper.pid, pid_start=journals._start_time(sleeper.pid))
        assert journals.owner_alive(journals.load("/venv/bin/python"))
        j.record(pid_start="1")  # the pid now belongs to a process started at another time
        assert not journals.owner_alive(journals.load("/venv/bin/python"))
    finally:
        sleeper.kill()
        sleeper.wait()
    j.record(pid_start=journals._start_time(sleeper.pid))
    assert not journals.owner_alive(journals.load("/venv/bin/python"))


@pytest.mark.slow
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
