"""One table of framework families and one PEP 503 normaliser, used by every stage."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from cudamatrix.names import FAMILIES, FRAMEWORK_DISTS, canonical, family_of

PACKAGE = Path(__file__).resolve().parent.parent / "cudamatrix"


@pytest.mark.parametrize("name", [
    "torch", "Torch", "torch_vision", "nvidia-cudnn-cu12", "nvidia_cudnn_cu12", "Nvidia.CuDNN.CU12",
    "jax-cuda12-plugin", "jax__cuda12--plugin", "tensorflow-GPU", "a.-_b", "zope.interface",
])
def test_canonical_is_pep_503(name: str):
    # PEP 503: runs of "-", "_" and "." become one "-", lower case (packaging's canonicalize_name)
    assert canonical(name) == canonicalize_name(name)


@pytest.mark.parametrize(("dist", "family"), [
    ("torch", "torch"), ("torchvision", "torch"), ("TorchAudio", "torch"),
    ("tensorflow", "tensorflow"), ("tensorflow-gpu", "tensorflow"), ("tensorflow_cpu", "tensorflow"),
    ("jax", "jax"), ("jaxlib", "jax"), ("jax-cuda12-plugin", "jax"), ("jax_cuda13_pjrt", "jax"),
    ("nvidia-cudnn-cu12", None), ("einops", None), ("torchmetrics", None),
])
def test_family_of(dist: str, family: str | None):
    assert family_of(dist) == family


def test_the_table():
    assert list(FAMILIES) == ["torch", "tensorflow", "jax"]
    assert FRAMEWORK_DISTS == ("torch", "torchvision", "torchaudio", "tensorflow", "jax", "jaxlib")


@pytest.mark.slow
def test_no_other_pep503_normaliser_in_the_package():
    # the stand-alone probes run in other interpreters (standard library only) and spell the rule themselves
    allowed = {"names.py", "_pyprobe.py", "apply.py"}
    for path in PACKAGE.rglob("*.py"):
        if path.name in allowed:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value == "[-_.]+":
                raise AssertionError(f"{path}: a name normaliser of its own; use cudamatrix.names.canonical")


def test_the_version_is_stated_alike_in_the_package_its_records_and_pyproject():
    """cudamatrix.__version__ (the API, kept light), models.TOOL_VERSION (what the stages stamp and hash, below
    the API) and pyproject.toml's version are one version."""
    from support.tomlread import loads

    import cudamatrix
    from cudamatrix.models import TOOL_VERSION

    project = loads((Path(cudamatrix.__file__).parents[1] / "pyproject.toml").read_text())["project"]
    assert cudamatrix.__version__ == TOOL_VERSION == project["version"]
