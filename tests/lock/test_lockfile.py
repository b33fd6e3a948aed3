"""The lock file round-trips: `cudamatrix lock` resolves the complete set against a local index on loopback and
writes it with every file's hash, real pip (`--require-hashes`) and uv (`uv pip sync`) install it into throwaway
venvs, and `cudamatrix check` then finds the installed environment fitting the target."""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import lockwheels
from support.fakes import run_cli
from support.localindex import LocalIndex, build_wheel, canonical, copy_venv, pip_env, pip_list
from support.uvtool import needs_uv, with_uv

ROOT = Path(__file__).parent.resolve().parents[1]
TARGET = ["--driver", "550.54.14", "--gpu", "Tesla T4", "--python", "3.11"]


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """The CLI in this process; ``env`` replaces the environment for the call."""
    return run_cli(list(args), env=dict(os.environ) if env is None else env, input="", timeout=600, text=True,
                   cwd=ROOT)


@pytest.fixture()
def locked(tmp_path: Path):
    """A complete lock for the target, resolved against a loopback mirror that serves its stand-in wheels (built
    for the pins `solve` gives first: a lock asks the index for every file)."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    with LocalIndex(wheels) as index:
        mirror = ["--mirror", f"{index.url}/whl"]
        solved = _cli("solve", "torch", "torchvision", *TARGET, *mirror, "--json")
        solution = json.loads(solved.stdout)["data"]["solution"]
        for pin in solution["packages"]:
            build_wheel(wheels, pin["name"], pin["version"],
                        requires=[f"torch=={solution['packages'][0]['version']}"] if pin["name"] == "torchvision" else [])
        lock = tmp_path / "requirements.txt"
        out = _cli("lock", "torch", "torchvision", *TARGET, *mirror, "-o", str(lock), "--json",
                   env=pip_env(f"{index.url}/simple", tmp_path / "lockcache"))
        assert out.returncode == 0, out.stdout + out.stderr
        assert json.loads(out.stdout)["data"]["solution"] == solution
        yield index, lock, solution


def _pins(lock: Path) -> dict[str, str]:
    """name -> version of every pin of a requirements file (hash continuation lines skipped)."""
    lines = [line for line in lock.read_text().splitlines() if line and not line.startswith(("#", "-", " "))]
    return dict(line.split(" ")[0].split("==", 1) for line in lines)


@pytest.mark.installs
def test_pip_installs_the_lock_and_check_passes(template_venv, locked, tmp_path):
    index, lock, solution = locked
    text = lock.read_text()
    assert f"{index.url}/whl/" in text  # the mirror replaced the framework index
    pins = _pins(lock)
    assert pins["torch"].split("+")[0] == solution["frameworks"][0]["version"]
    py = copy_venv(template_venv, tmp_path / "venv")
    env = pip_env(f"{index.url}/simple", tmp_path / "cache")
    done = subprocess.run([str(py), "-m", "pip", "install", "-r", str(lock)], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    installed = {d["name"]: d["version"] for d in pip_list(py, env)}
    for name, version in pins.items():
        assert installed[name] == version
    check = _cli("check", "--python", str(py), "--driver", "550.54.14", "--gpu", "Tesla T4", "--json")
    assert check.returncode == 0, check.stdout + check.stderr
    doc = json.loads(check.stdout)["data"]
    assert doc["fits"] is True and f"torch=={pins['torch']}" in doc["checked"]
    # the lock file itself passes the pre-install gate for the same target, and fails for an RTX 5090 on a
    # driver too old for it
    gate = _cli("check", "-r", str(lock), *TARGET, "--mirror", f"{index.url}/whl")
    assert gate.returncode == 0, gate.stdout + gate.stderr
    assert "base image: nvidia/cuda:" in gate.stdout and "NVIDIA_REQUIRE_CUDA" in gate.stdout


@pytest.mark.installs
@needs_uv
def test_uv_installs_the_same_lock(template_venv, locked, tmp_path):
    index, lock, _ = locked
    py = copy_venv(template_venv, tmp_path / "venv")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    env.update({"UV_INDEX_URL": f"{index.url}/simple", "UV_NO_CONFIG": "1", "UV_CACHE_DIR": str(tmp_path / "uvc"),
                "UV_HTTP_TIMEOUT": "10", "UV_OFFLINE": "0"})
    env = with_uv(env)
    done = subprocess.run([os.path.join(env["PATH"].split(os.pathsep)[0], "uv"), "pip", "install", "--python", str(py), "-r", str(lock)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    installed = {d["name"]: d["version"] for d in pip_list(py, pip_env(f"{index.url}/simple", tmp_path / "c"))}
    for name, version in _pins(lock).items():
        assert installed[name] == version


# --- the complete set: every dependency, every file hashed, installable with --require-hashes and uv pip sync --

PY = f"{sys.version_info[0]}.{sys.version_info[1]}"  # locks below are installed into venvs of this Python
H100 = ["--driver", "580.65.06", "--gpu", "H100", "--python", PY]


@pytest.fixture(scope="module")
def closure(tmp_path_factory):
    """torch 2.14.1's complete set on a loopback index (tests/support/lockwheels.py: real small distributions, stand-ins
    for the large ones), and a requirements lock of it for an H100 target."""
    tmp = tmp_path_factory.mktemp("closure")
    wheels = lockwheels.build(tmp / "wheels")
    with LocalIndex(wheels) as index:
        env = pip_env(f"{index.url}/simple", tmp / "cache")
        lock = tmp / "requirements.txt"
        out = _cli("lock", "torch==2.14.1", *H100, "-o", str(lock), env=env)
        yield out, lock, wheels, env, index


def _files(wheels: Path) -> dict[str, str]:
    """name -> sha256 of each served wheel."""
    return {canonical(w.name.split("-")[0]): hashlib.sha256(w.read_bytes()).hexdigest() for w in wheels.glob("*.whl")}


@pytest.mark.installs
def test_lock_pins_the_whole_closure_with_hashes(closure):
    out, lock, wheels, _, _ = closure
    assert out.returncode == 0, out.stderr
    text = lock.read_text()
    served = _files(wheels)
    pins = _pins(lock)
    # every distribution torch pulls in, not only the frameworks and nvidia-* wheels
    assert set(pins) == set(served) and {"filelock", "sympy", "mpmath", "jinja2", "markupsafe", "triton"} <= set(pins)
    assert {k: v for k, v in pins.items() if k in lockwheels.REAL} == lockwheels.installed_versions()
    hashes = dict(re.findall(r"^([a-z0-9-]+)==\S+ \\\n    --hash=sha256:([0-9a-f]{64})$", text, re.M))
    assert hashes == served  # each pin carries the sha256 of the file the index serves
    assert "# complete: 17 distributions, every file hashed" in text
    assert f"for Python {PY} on linux_" in text and "pip install --require-hashes -r requirements.txt" in text


@pytest.mark.installs
def test_pip_require_hashes_installs_exactly_the_lock(closure, template_venv, tmp_path):
    _, lock, _, env, _ = closure
    py = copy_venv(template_venv, tmp_path / "venv")
    # --no-compile: what is asserted is the set installed; pip's byte-compiling of sympy and networkx is half the time
    done = subprocess.run([str(py), "-m", "pip", "install", "--no-compile", "--require-hashes", "-r", str(lock)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    installed = {canonical(d["name"]): d["version"] for d in pip_list(py, env)}
    assert {k: installed.get(k) for k in _pins(lock)} == _pins(lock)
    assert set(installed) - set(_pins(lock)) <= {"pip"}  # nothing else came in


@pytest.mark.installs
@needs_uv
def test_uv_pip_sync_installs_exactly_the_lock(closure, template_venv, tmp_path):
    _, lock, _, env, index = closure
    py = copy_venv(template_venv, tmp_path / "venv")
    uv_env = with_uv({**{k: v for k, v in env.items() if not k.startswith("PIP_")}, "UV_NO_CONFIG": "1",
                      "UV_INDEX_URL": f"{index.url}/simple", "UV_CACHE_DIR": str(tmp_path / "uvc")})
    uv = os.path.join(uv_env["PATH"].split(os.pathsep)[0], "uv")
    done = subprocess.run([uv, "pip", "sync", "--python", str(py), str(lock)], env=uv_env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    freeze = subprocess.run([uv, "pip", "freeze", "--python", str(py)], env=uv_env, capture_output=True, text=True,
                            timeout=120).stdout
    installed = {canonical(k): v for k, v in (line.split("==", 1) for line in freeze.split() if "==" in line)}
    installed.pop("pip", None)  # uv keeps the venv's seed package
    assert installed == _pins(lock)  # sync: exactly the lock, setuptools of the lock's version included


@pytest.mark.installs
def test_a_file_that_changed_on_the_index_is_refused(closure, template_venv, tmp_path):
    """The point of the hashes: the same name and version with other bytes does not install."""
    _, lock, wheels, env, _ = closure
    changed = tmp_path / "wheels"
    shutil.copytree(wheels, changed)
    (old,) = changed.glob("filelock-*.whl")
    version = old.name.split("-")[1]
    old.unlink()
    build_wheel(changed, "filelock", version)  # a stand-in in place of the real file
    py = copy_venv(template_venv, tmp_path / "venv")
    with LocalIndex(changed) as index:
        done = subprocess.run([str(py), "-m", "pip", "install", "--require-hashes", "-r", str(lock)],
                              env={**env, "PIP_INDEX_URL": f"{index.url}/simple",
                                   "PIP_CACHE_DIR": str(tmp_path / "cache")},
                              capture_output=True, text=True, timeout=600)
    assert done.returncode != 0 and "DO NOT MATCH THE HASHES" in done.stderr and "filelock" in done.stderr
    assert "torch" not in {canonical(d["name"]) for d in pip_list(py, env)}


@pytest.mark.installs
def test_the_targets_glibc_decides_which_wheels_count(closure, tmp_path):
    """torch 2.14.1's wheels are manylinux_2_28: a glibc 2.17 target gets no lock (exit 2, the installer's
    cause), never a lock of something else; glibc 2.28 is enough, and nccl's manylinux_2_18 file is taken."""
    _, _, _, env, _ = closure
    old = tmp_path / "old.txt"
    out = _cli("lock", "torch==2.14.1", *H100, "--glibc", "2.17", "-o", str(old), env=env)
    assert out.returncode == 2 and "cannot lock the solved set to files for" in out.stderr, out.stderr
    assert "glibc 2.17" in out.stderr and "torch" in out.stderr and not old.exists()
    new = tmp_path / "new.txt"
    out = _cli("lock", "torch==2.14.1", *H100, "--glibc", "2.28", "-o", str(new), env=env)
    assert out.returncode == 0, out.stderr
    assert "nvidia-nccl-cu13==2.30.7" in new.read_text() and "assumed" not in new.read_text()


@pytest.mark.installs
def test_an_unreachable_index_writes_no_lock(tmp_path):
    lock = tmp_path / "requirements.txt"
    env = pip_env("http://127.0.0.1:9/simple", tmp_path / "cache")
    out = _cli("lock", "torch==2.14.1", *H100, "-o", str(lock), env=env)
    assert out.returncode == 2 and "cannot lock the solved set to files" in out.stderr, out.stderr
    assert "--pins-only" in out.stderr and "Traceback" not in out.stderr and not lock.exists()
    pins = _cli("lock", "torch==2.14.1", *H100, "--pins-only", "-o", str(lock), env=env)
    assert pins.returncode == 0, pins.stderr
    assert "# pins only (--pins-only)" in lock.read_text() and "--hash" not in lock.read_text()


@pytest.mark.installs
def test_a_marker_pip_answers_for_this_interpreter_only_is_refused(tmp_path):
    """pip evaluates `; python_version == "X"` against the Python it runs under whatever --python-version says:
    locking for another Python when the answer differs there is refused, naming the requirement."""
    other = "3.12" if PY != "3.12" else "3.11"
    wheels = tmp_path / "wheels"
    build_wheel(wheels, "alpha", "1.0", requires=[f'beta; python_version == "{PY}"'])
    build_wheel(wheels, "beta", "1.0")
    with LocalIndex(wheels) as index:
        env = pip_env(f"{index.url}/simple", tmp_path / "cache")
        here = _cli("lock", "alpha", "--python", PY, "--glibc", "2.28", env=env)
        there = _cli("lock", "alpha", "--python", other, "--glibc", "2.28", env=env)
    assert here.returncode == 0 and "beta==1.0" in here.stdout, here.stderr
    assert there.returncode == 2 and f'alpha 1.0: beta; python_version == "{PY}"' in there.stderr, there.stderr
    assert there.stdout == ""


@pytest.mark.installs
def test_per_class_locks_are_complete_for_the_saved_machines(closure, tmp_path):
    """Two saved H100 nodes (tests/data/environments/h100_driver580.json, on this Python, a glibc 2.28 wheel tag):
    one set fits both, and fleet.txt is the complete hashed set, for the glibc the nodes' environments carry."""
    _, lock, _, env, _ = closure
    node = json.loads((ROOT / "tests/data/environments/h100_driver580.json").read_text())
    node["python"] = {"version": f"{PY}.0", "platform": "linux_x86_64",
                      "tags": [f"cp{PY.replace('.', '')}-cp{PY.replace('.', '')}-manylinux_2_28_x86_64"]}
    node["packages"] = {}
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    for name in ("node-a", "node-b"):
        (fleet / f"{name}.json").write_text(json.dumps(node))
    locks = tmp_path / "locks"
    out = _cli("lock", "torch==2.14.1", "--per-class", "--env", str(fleet), "-o", str(locks), env=env)
    assert out.returncode == 0, out.stderr
    text = (locks / "fleet.txt").read_text()
    assert _pins(locks / "fleet.txt") == _pins(lock) and text.count("--hash=sha256:") == len(_pins(lock))
    assert f"for Python {PY} on linux_x86_64, glibc 2.28" in text and "assumed" not in text


def test_a_complete_locks_header_names_each_interpreter_what_was_assumed_and_how_to_install():
    from cudamatrix.lock.closure import Closure, LockSpec
    from cudamatrix.lock.lockfile import closure_header

    closure = Closure(specs=[LockSpec("linux_x86_64", "3.11", "2.35", assumed=("glibc: 2.35 assumed",)),
                             LockSpec("win_amd64", "3.12")], packages=[], resolver="pip 25.2")
    head = ("complete: 0 distributions, every file hashed, resolved by pip 25.2 for Python 3.11 on linux_x86_64, "
            "glibc 2.35; Python 3.12 on win_amd64")
    assert closure_header(closure, "requirements.txt") == [
        head, "glibc: 2.35 assumed",
        "install: pip install --require-hashes -r requirements.txt (or: uv pip sync requirements.txt)"]
    assert closure_header(closure, "pylock.toml") == [
        head, "glibc: 2.35 assumed", "install: uv pip sync pylock.toml (or: uv pip install -r pylock.toml)"]
