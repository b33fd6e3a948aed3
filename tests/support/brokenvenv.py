"""The broken environment of issue 15, built from stand-in wheels served on loopback: torch 2.14.1 (the
default-index CUDA 13 build, whose metadata pins the cu13 nvidia-* wheels), a drifted nvidia-cudnn-cu13,
and a JAX cuda12 plugin that brought nvidia-cudnn-cu12, whose library file clashes with the cu13 one.

The torch pins are the ones the matrix records for torch 2.14.1 cu130 (data/torch.json, read from the
wheel's metadata); the drifted cuDNN version only has to differ from the pin."""
from __future__ import annotations

import json
import platform
import subprocess
from pathlib import Path

from packaging.requirements import Requirement

from support.localindex import build_wheel

ROOT = Path(__file__).resolve().parents[2]
CUDNN_FILE = "nvidia/cudnn/lib/libcudnn.so.9"
DRIFTED_CUDNN13 = "9.12.0.46"  # jax's cuda13 floor (data/jax.json): installable, yet not torch's pin
TARGET = ["--driver", "580.65.06", "--gpu", "sm_90"]
ARCH = "aarch64" if platform.machine().lower() in ("aarch64", "arm64") else "x86_64"


def _matrix_pins(family: str, version: str, variant: str) -> list[str]:
    rows = json.loads((ROOT / "data" / f"{family}.json").read_text())["releases"]
    row = next(r for r in rows if r["version"] == version)
    return next(v for v in row["variants"] if v["name"] == variant)["nvidia_pins"]


def build_wheels(folder: Path) -> Path:
    """Every wheel the broken venv and its repair need, stand-ins with the real names and versions."""
    torch_pins = _matrix_pins("torch", "2.14.1", "cu130")
    build_wheel(folder, "torch", "2.14.1", requires=torch_pins,
                files={"torch/version.py": "cuda = '13.0'\nhip = None\n"})
    for pin in torch_pins:  # "name[extras]==X; marker" or "name<14,>=13.0.3; marker": the version pip picks
        req = Requirement(pin)
        exact = [sp.version for sp in req.specifier if sp.operator == "=="]
        lower = [sp.version for sp in req.specifier if sp.operator == ">="]
        version = (exact or lower)[0]
        files = {CUDNN_FILE: "cudnn 13 " + version} if req.name == "nvidia-cudnn-cu13" else None
        # nvidia-nccl-cu13 2.30.7 is published only as py3-none-manylinux_2_18_<arch> (its index listing)
        tag = f"py3-none-manylinux_2_18_{ARCH}" if req.name == "nvidia-nccl-cu13" else "py3-none-any"
        build_wheel(folder, req.name, version, files=files, tag=tag)
    build_wheel(folder, "nvidia-cudnn-cu13", DRIFTED_CUDNN13, files={CUDNN_FILE: "cudnn 13 drifted"})
    build_wheel(folder, "nvidia-cudnn-cu12", "9.8.0.87", files={CUDNN_FILE: "cudnn 12"})
    # jax 0.10.2 requires Python >= 3.11 (Requires-Python of its files on the default index)
    build_wheel(folder, "jax", "0.10.2", requires_python=">=3.11", requires=["jaxlib==0.10.2",
                                                   'jax-cuda12-plugin==0.10.2; extra == "cuda12"',
                                                   'jax-cuda13-plugin==0.10.2; extra == "cuda13"'])
    build_wheel(folder, "jaxlib", "0.10.2", requires_python=">=3.11")
    for major, cudnn in (("12", "nvidia-cudnn-cu12<10.0,>=9.8"), ("13", "nvidia-cudnn-cu13<10.0,>=9.12.0.46")):
        build_wheel(folder, f"jax-cuda{major}-pjrt", "0.10.2")
        build_wheel(folder, f"jax-cuda{major}-plugin", "0.10.2",
                    requires=[f"jax-cuda{major}-pjrt==0.10.2", cudnn])
    return folder


def interpreter() -> str:
    """A Python the broken set installs into: issue 15's jax 0.10.2 requires Python >= 3.11, so a suite run on
    3.10 builds the venv with the newest python3.1x >= 3.11 on PATH (skips without one)."""
    import shutil
    import sys

    import pytest

    if sys.version_info >= (3, 11):
        return sys.executable
    for minor in range(14, 10, -1):
        found = shutil.which(f"python3.{minor}")
        if found and subprocess.run([found, "-c", "pass"], capture_output=True, timeout=60).returncode == 0:
            return found
    pytest.skip("issue 15's set (jax 0.10.2) needs Python >= 3.11 and none is on PATH")


def break_venv(python: Path, env: dict, wheels: Path) -> None:
    """Install the broken set into ``python``: torch with its pins, then the drifted cuDNN over it, then the
    jax cuda12 plugin with its cuDNN (its library file overwrites the cu13 wheel's)."""
    def pip(*args: str) -> None:
        subprocess.run([str(python), "-m", "pip", "install", "--no-index", "--find-links", str(wheels), *args],
                       env=env, check=True, capture_output=True, timeout=300)

    pip("torch==2.14.1")
    pip("--no-deps", f"nvidia-cudnn-cu13=={DRIFTED_CUDNN13}")
    pip("jax==0.10.2", "jaxlib==0.10.2", "jax-cuda12-plugin==0.10.2")
