"""The lock file round-trips: `cudamatrix lock` writes it, real pip (and uv) install it into a throwaway venv
from a local index on loopback (stand-in wheels with the real names and local versions), and `cudamatrix
check` then finds the installed environment fitting the target."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from localindex import LocalIndex, build_wheel, copy_venv, pip_env, pip_list
from uvtool import needs_uv, with_uv

ROOT = Path(__file__).resolve().parents[1]
TARGET = ["--driver", "550.54.14", "--gpu", "Tesla T4", "--python", "3.11"]


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cudamatrix", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=600, stdin=subprocess.DEVNULL)


@pytest.fixture()
def locked(tmp_path: Path):
    """A lock file for the target, written against a loopback mirror that serves its stand-in wheels."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    with LocalIndex(wheels) as index:
        lock = tmp_path / "requirements.txt"
        out = _cli("lock", "torch", "torchvision", *TARGET, "--mirror", f"{index.url}/whl", "-o", str(lock), "--json")
        assert out.returncode == 0, out.stdout + out.stderr
        solution = json.loads(out.stdout)["data"]["solution"]
        for pin in solution["packages"]:
            build_wheel(wheels, pin["name"], pin["version"],
                        requires=[f"torch=={solution['packages'][0]['version']}"] if pin["name"] == "torchvision" else [])
        yield index, lock, solution


def _pins(lock: Path) -> dict[str, str]:
    lines = [line for line in lock.read_text().splitlines() if line and not line.startswith(("#", "-"))]
    return dict(line.split("==", 1) for line in lines)


@pytest.mark.slow
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


@pytest.mark.slow
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
