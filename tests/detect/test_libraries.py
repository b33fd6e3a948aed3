"""Real components where they exist here: the CUDA toolkit's libcudart, an nvidia-* wheel installed with pip
into a throwaway venv, and whatever torch build is installed."""
from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from support.fakes import spawn_cli

from cudamatrix.detect import libraries, loader


def real_cudart() -> str | None:
    """A libcudart.so.N of an installed CUDA toolkit, found at run time."""
    bases = [os.environ[v] for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)] + sorted(glob.glob("/usr/local/cuda*"))
    for base in bases:
        for pattern in ("lib64/libcudart.so.*", "lib/libcudart.so.*", "targets/*/lib/libcudart.so.*"):
            for path in sorted(glob.glob(os.path.join(base, pattern))):
                if libraries.elf_soname(path) == os.path.basename(path):
                    return path
    return None


CUDART = real_cudart()
needs_cudart = pytest.mark.skipif(CUDART is None, reason="no CUDA toolkit libcudart on this machine")


@pytest.mark.slow
@needs_cudart
def test_real_libcudart_answers_its_version_without_a_gpu():
    soname = libraries.elf_soname(CUDART)
    major = soname.rsplit(".", 1)[1]
    answers = loader.run_loader([(CUDART, "cudart")], nvml=False, libcuda=False, timeout=10)
    answer = answers.libs[CUDART]
    assert answer["rc"] == 0 and answer["version"] // 1000 == int(major)  # e.g. 13000 for libcudart.so.13


@pytest.mark.slow
@needs_cudart
def test_live_detect_lists_the_toolkit_copy():
    done = spawn_cli(["detect", "--json"])
    env = json.loads(done.stdout)["data"]["environment"]
    real = os.path.realpath(CUDART)
    copy = next(x for x in env["libraries"] if os.path.realpath(x["path"]) == real)
    assert copy["name"] == "cudart" and copy["version"].split(".")[0] == copy["soname"].rsplit(".", 1)[1]


@pytest.mark.slow
def test_installed_torch_build_is_reported_without_importing_it():
    try:
        version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        pytest.skip("torch is not installed here")
    done = spawn_cli(["detect", "--json"])
    torch = next(f for f in json.loads(done.stdout)["data"]["environment"]["frameworks"] if f["name"] == "torch")
    assert torch["version"] == version
    local = version.partition("+")[2]
    if local:
        assert torch["variant"] == local


@pytest.mark.installs
def test_wheel_in_a_throwaway_venv_through_python_path(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=300)
    python = venv / "bin" / "python"
    install = subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "nvidia-cuda-runtime-cu12"],
                             capture_output=True, text=True, timeout=600)
    if install.returncode != 0:
        pytest.skip("could not install nvidia-cuda-runtime-cu12: " + install.stderr.strip()[-300:])
    wheel_version = subprocess.run([str(python), "-c", "from importlib.metadata import version; "
                                    "print(version('nvidia-cuda-runtime-cu12'))"],
                                   capture_output=True, text=True, check=True).stdout.strip()
    done = spawn_cli(["detect", "--json", "--python", str(python)])
    assert done.returncode == 0, done.stderr.decode()
    env = json.loads(done.stdout)["data"]["environment"]
    assert env["python"]["executable"].startswith(str(venv)) and env["python"]["in_virtualenv"] is True
    assert env["packages"]["nvidia-cuda-runtime-cu12"] == wheel_version
    copy = next(x for x in env["libraries"] if x["origin"] == "wheel:nvidia-cuda-runtime-cu12")
    assert Path(copy["path"]).name == "libcudart.so.12" and copy["path"].startswith(str(venv))
    assert copy["version"] == wheel_version
    # the library's own answer (cudaRuntimeGetVersion) agrees with the wheel's version: 12.9.79 -> 12090
    own = loader.run_loader([(copy["path"], "cudart")], nvml=False, libcuda=False, timeout=10).libs[copy["path"]]
    major, minor = wheel_version.split(".")[:2]
    assert own["version"] == int(major) * 1000 + int(minor) * 10
