"""``lock --format pylock``: a PEP 751 pylock.toml, its files resolved on a loopback index by real pip, then
installed by uv into a fresh venv (and by pip where the installed pip reads pylock.toml)."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: tomllib's predecessor (the test extra installs it there)
    import tomli as tomllib

import pytest
from support import brokenvenv
from support.fakes import run_cli
from support.localindex import LocalIndex, build_wheel, copy_venv

ROOT = Path(__file__).parent.resolve().parents[1]
PY = f"{sys.version_info[0]}.{sys.version_info[1]}"  # the lock is installed into a venv of this Python
TARGET = ["--driver", "580.65.06", "--gpu", "sm_90", "--python", PY]
pytestmark = pytest.mark.installs


@pytest.fixture(scope="module")
def locked(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pylock")
    wheels = brokenvenv.build_wheels(tmp / "wheels")
    build_wheel(wheels, "tiny", "1.0+cpu")  # a local version: its URL segment is tiny-1.0%2Bcpu-...
    # file URLs with a query string, as a signed URL of some indexes: the wheel's name is the file name alone
    index = LocalIndex(wheels, query="?sig=a%20b&x=1").__enter__()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    env.update({"PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": index.url + "/simple",
                "PIP_CACHE_DIR": str(tmp / "pc"), "UV_CACHE_DIR": str(tmp / "uc"), "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                "PYTHONPATH": str(ROOT)})
    out = tmp / "pylock.toml"
    r = run_cli(["lock", "torch==2.14.1", "tiny==1.0+cpu", *TARGET, "--format", "pylock", "-o", str(out)], env=env,
                text=True, cwd=ROOT, timeout=600)
    yield r, out, wheels, env, index
    index.__exit__(None, None, None)


def test_pylock_is_pep751_with_every_file_hashed(locked):
    r, out, wheels, _, index = locked
    assert r.returncode == 0, r.stderr
    doc = tomllib.loads(out.read_text())
    assert doc["lock-version"] == "1.0" and doc["created-by"] == "cudamatrix"
    assert doc["requires-python"] == f"=={PY}.*" and 'platform_machine == "x86_64"' in doc["environments"][0]
    names = {p["name"]: p for p in doc["packages"]}
    assert names["torch"]["version"] == "2.14.1" and "nvidia-cudnn-cu13" in names
    for p in doc["packages"]:
        (wheel,) = p["wheels"]
        local = wheels / wheel["name"]  # PEP 751: the file name, percent-decoded, without query or fragment
        assert hashlib.sha256(local.read_bytes()).hexdigest() == wheel["hashes"]["sha256"]
        assert wheel["url"].startswith(index.url) and p["index"] == index.url + "/simple"
        assert wheel["url"].endswith(".whl?sig=a%20b&x=1")  # the URL keeps its query: it is what is fetched
    assert names["tiny"]["wheels"][0]["name"] == "tiny-1.0+cpu-py3-none-any.whl"
    text = out.read_text()
    assert "# target target" not in text and text.startswith("# written by cudamatrix lock from matrix")
    assert "# complete: " in text and "glibc" in text
    # published only as manylinux_2_18 (its index listing): the platform list of a glibc 2.28+ target holds it
    (nccl,) = names["nvidia-nccl-cu13"]["wheels"]
    assert nccl["name"].endswith("-py3-none-manylinux_2_18_x86_64.whl") or nccl["name"].endswith("_aarch64.whl")


def test_pylock_names_follow_pep751(tmp_path):
    """The specification's File Name: pylock.toml or pylock.<name>.toml; anything else is refused before the
    index is asked, with the name to use."""
    for name, hint in (("pylock-jax.toml", "pylock.jax.toml"), ("jax.toml", "pylock.jax.toml"),
                       ("pylock.a.b.toml", "pylock.a-b.toml")):
        r = run_cli(["lock", "torch==2.14.1", *TARGET, "--format", "pylock", "-o", str(tmp_path / name)],
                    env=dict(os.environ), text=True, cwd=ROOT)
        assert r.returncode == 2 and "pylock.toml or pylock.<name>.toml" in r.stderr and hint in r.stderr, r.stderr
        assert not (tmp_path / name).exists()


@pytest.mark.parametrize("verb", [["install", "-r"], ["sync"]])
def test_uv_installs_the_pylock(locked, template_venv, tmp_path, verb):
    _, out, _, env, _ = locked
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH (the test extra installs it)")
    py = copy_venv(template_venv, tmp_path / "venv")
    lock = tmp_path / "pylock.toml"  # uv wants the standard file name
    lock.write_text(out.read_text())
    r = subprocess.run([uv, "pip", verb[0], "--python", str(py), *verb[1:], str(lock)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    freeze = subprocess.run([str(py), "-m", "pip", "freeze"], capture_output=True, text=True, env=env).stdout
    assert "torch==2.14.1" in freeze and "nvidia-cudnn-cu13==9.24.0.43" in freeze and "tiny==1.0+cpu" in freeze


def test_pip_installs_the_pylock_where_it_can(locked, template_venv, tmp_path):
    _, out, _, env, _ = locked
    py = copy_venv(template_venv, tmp_path / "venv")
    lock = tmp_path / "pylock.toml"
    lock.write_text(out.read_text())
    version = subprocess.run([str(py), "-m", "pip", "--version"], capture_output=True, text=True).stdout.split()[1]
    r = subprocess.run([str(py), "-m", "pip", "install", "-r", str(lock)], env=env, capture_output=True, text=True,
                       timeout=300)
    if r.returncode != 0:
        reason = (r.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"pip {version} does not install from pylock.toml: {reason}")
    freeze = subprocess.run([str(py), "-m", "pip", "freeze"], capture_output=True, text=True, env=env).stdout
    assert "torch==2.14.1" in freeze


def test_pylock_without_an_index_says_why(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    env.update({"PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_RETRIES": "0",
                "PYTHONPATH": str(ROOT)})
    out = tmp_path / "pylock.toml"
    r = run_cli(["lock", "torch==2.14.1", *TARGET, "--format", "pylock", "-o", str(out)], env=env, text=True, cwd=ROOT,
                timeout=600)
    assert r.returncode == 2 and "cannot lock the solved set to files" in r.stderr and "Traceback" not in r.stderr
    assert not out.exists()
