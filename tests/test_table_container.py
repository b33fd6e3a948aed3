"""The container facts and the GPU probe, as tables.

Expectations: NVIDIA's published ``nvidia/cuda`` image tags (``12.5.0-base-ubuntu24.04``, ``12.4.1-base-ubuntu22.04``,
``11.7.1-base-ubuntu22.04``, ``11.6.2-base-ubuntu20.04``: Ubuntu 24.04 from CUDA 12.5, 22.04 from 11.7, 20.04
before); the ``base`` flavour holds only what the driver needs, ``runtime`` adds the CUDA libraries, which a
framework that brings no nvidia-* wheels (TensorFlow before 2.14) loads from the system. PEP 508 markers: a
requirement behind ``extra == "X"`` applies when X was asked for.
"""
from __future__ import annotations

import pytest
from packaging.version import Version

from cudamatrix.diagnose.findings import diagnose
from cudamatrix.models import Driver, Environment, FrameworkChoice, GpuInfo, Pin, PythonInfo, Solution
from cudamatrix.solve.checks import base_image, nvidia_require_cuda
from cudamatrix.verify.run import gpu_present
from smallmatrix import NOTES, build, release, replace, target, variant
from cudamatrix.matrix.data import CudaRelease


def _rel(version: str) -> CudaRelease:
    return CudaRelease(version=Version(version), source=NOTES)


M = build()
M = replace(M, cuda=replace(M.cuda, releases=M.cuda.releases + [_rel("11.6.2"), _rel("11.7.1"), _rel("12.4.1"),
                                                                 _rel("12.5")]))

IMAGES = [
    ("12.5", [Pin(name="nvidia-cudnn-cu12", version="9.1.0.70")], "nvidia/cuda:12.5.0-base-ubuntu24.04"),
    ("12.4", [Pin(name="nvidia-cudnn-cu12", version="9.1.0.70")], "nvidia/cuda:12.4.1-base-ubuntu22.04"),
    ("11.8", [Pin(name="nvidia-cudnn-cu11", version="9.1.0.70")], "nvidia/cuda:11.8.0-base-ubuntu22.04"),
    ("11.7", [Pin(name="nvidia-cudnn-cu11", version="8.5.0.96")], "nvidia/cuda:11.7.1-base-ubuntu22.04"),
    ("11.6", [Pin(name="nvidia-cudnn-cu11", version="8.5.0.96")], "nvidia/cuda:11.6.2-base-ubuntu20.04"),
    ("11.8", [Pin(name="tensorflow", version="2.13.1")], "nvidia/cuda:11.8.0-runtime-ubuntu22.04"),
    ("12.9", [Pin(name="nvidia-cudnn-cu12", version="9.1.0.70")], None),   # no 12.9 row in this matrix
]


@pytest.mark.parametrize("cuda, packages, image", IMAGES)
def test_base_image_tag(cuda, packages, image):
    fw = [FrameworkChoice(name="tensorflow" if packages[0].name == "tensorflow" else "jax", version="1",
                          variant="v", cuda=cuda)]
    sol = Solution(request=["x"], targets=["t"], frameworks=fw, packages=packages, cuda=cuda)
    assert base_image(sol, M, [target("570.86.10", "8.0")])[0] == image


def test_a_torch_set_needs_only_the_base_flavour():
    sol = Solution(request=["torch"], targets=["t"], frameworks=[FrameworkChoice(name="torch", version="2.5.1",
                                                                                  variant="cu124", cuda="12.4")],
                   packages=[Pin(name="torch", version="2.5.1")], cuda="12.4")
    assert base_image(sol, M, [])[0] == "nvidia/cuda:12.4.1-base-ubuntu22.04"
    assert base_image(Solution(request=["torch"], targets=["t"]), M, []) == (None, None)


def test_python_notes_name_both_pythons():
    sol = Solution(request=["x"], targets=["t"], packages=[Pin(name="nvidia-cudnn-cu12", version="1")], cuda="12.4")
    _, note = base_image(sol, M, [target("570.86.10", "8.0", python="3.11"), target("570.86.10", "8.0",
                                                                                     python="3.12")])
    assert note == ("the image has no Python, and Ubuntu 22.04's python3 is 3.10, not the targets' 3.11, 3.12: "
                    "install Python 3.11, 3.12 into it (for example uv python install 3.11, 3.12)")


# NVIDIA_REQUIRE_CUDA for a chosen set (jax and tensorflow rows count as torch's do); a major without a
# minor-version compatibility row needs the build's own CUDA
JAX = variant("cuda12", "12.4", archs=["8.0", "9.0"], pip_extra="cuda12")
TF = variant("and-cuda", "12.1", archs=["8.0"], ptx=["8.0"], pip_extra="and-cuda")
REQUIRE = [
    ("jax", JAX, "8.0", True, "cuda>=12.0"),
    ("jax", JAX, "8.0", False, "cuda>=12.4"),
    ("tensorflow", TF, "9.0", True, "cuda>=12.1"),
    ("tensorflow", TF, "8.0", True, "cuda>=12.0"),
]


@pytest.mark.parametrize("family, v, cc, minor_compat, require", REQUIRE)
def test_nvidia_require_cuda_for_each_framework(family, v, cc, minor_compat, require):
    m = replace(build(), **{family: replace(build().torch, releases=[release("1.0", v, name=family)])})
    if not minor_compat:
        m = replace(m, cuda=replace(m.cuda, minor_compat=[r for r in m.cuda.minor_compat if r.cuda_major != 12]))
    sol = Solution(request=[family], targets=["t"], frameworks=[FrameworkChoice(name=family, version="1.0",
                                                                                variant=v.name, cuda=str(v.cuda))])
    assert nvidia_require_cuda(sol, m, [target("570.86.10", cc)]) == require
    other = Solution(request=["x"], targets=["t"], frameworks=[FrameworkChoice(name="mxnet", version="1.0",
                                                                               variant="v", cuda="12.4")])
    assert nvidia_require_cuda(other, m, [target("570.86.10", cc)]) is None


# the GPU probe, from a detected environment: a driver that answers with a GPU or a version is a GPU machine
PRESENT = [
    ("ok", [GpuInfo(name="H100")], None, True),
    ("ok", [], "550.54.15", True),
    ("ok", [], None, False),
    ("absent", [], None, False),
    ("error", [GpuInfo(name="H100")], "550.54.15", False),
    ("no_device", [], "550.54.15", False),
]


@pytest.mark.parametrize("status, gpus, version, present", PRESENT)
def test_gpu_present_from_the_environment(status, gpus, version, present):
    assert gpu_present(Environment(driver=Driver(status=status, version=version), gpus=gpus)) is present


# declared requirements behind markers (PEP 508): the interpreter's version and platform decide, and a
# requirement behind an extra applies when its distribution is installed (that extra was asked for)
MARKERS = [
    ('nvidia-cudnn-cu12==9.1.0.70; python_version < "3.12"', "3.11.9", "linux_x86_64", True),
    ('nvidia-cudnn-cu12==9.1.0.70; python_version < "3.12"', "3.12.1", "linux_x86_64", False),
    ('nvidia-cudnn-cu12==9.1.0.70; python_version >= "3.12"', None, "linux_x86_64", False),   # 3.11 assumed
    ('nvidia-cudnn-cu12==9.1.0.70; platform_system == "Linux"', "3.11.9", "win_amd64", False),
    ('nvidia-cudnn-cu12==9.1.0.70; platform_system == "Linux"', "3.11.9", None, True),         # Linux assumed
    ('nvidia-cudnn-cu12==9.1.0.70; extra == "with-cuda"', "3.11.9", "linux_x86_64", True),
    ('nvidia-cudnn-cu12==9.1.0.70; extra == "cuda"', "3.11.9", "linux_x86_64", True),
    ('nvidia-cudnn-cu12==9.1.0.70; extra == "cuda12"', "3.11.9", "linux_x86_64", True),
    ('nvidia-cudnn-cu12==9.1.0.70; extra == "cuda13"', "3.11.9", "linux_x86_64", True),
    ('nvidia-cudnn-cu12==9.1.0.70; extra == "docs"', "3.11.9", "linux_x86_64", False),
]


@pytest.mark.parametrize("requirement, python, platform, applies", MARKERS)
def test_declared_requirement_markers(requirement, python, platform, applies):
    e = Environment(origin="file", python=PythonInfo(version=python, platform=platform),
                    packages={"jax-cuda12-plugin": "0.4.30", "nvidia-cudnn-cu12": "9.0.0"},
                    requirements={"jax-cuda12-plugin": [requirement]})
    drift = [f for f in diagnose(e, build()) if f.code == "NVIDIA_WHEEL_DRIFT"]
    assert bool(drift) is applies
    if drift:
        assert drift[0].evidence == [f"jax-cuda12-plugin 0.4.30 requires {requirement}"]


def test_one_family_never_conflicts_with_itself():
    # jax and its CUDA plugin, torch and torchvision: one family each; jax against torch: two
    e = Environment(origin="file", python=PythonInfo(version="3.11.9", platform="linux_x86_64"),
                    packages={"nvidia-cudnn-cu12": "9.1.0.70"},
                    requirements={"jax": ["nvidia-cudnn-cu12>=9.8"], "jax-cuda12-plugin": ["nvidia-cudnn-cu12==9.1.0.70"],
                                  "torch": ["nvidia-cudnn-cu12==9.1.0.70"]})
    conflicts = [f.title for f in diagnose(e, build()) if f.code == "FRAMEWORK_CONFLICT"]
    assert conflicts == ["jax and torch need different nvidia-* wheels"]
    assert [f.evidence for f in diagnose(e, build()) if f.code == "NVIDIA_WHEEL_DRIFT"] == [
        ["jax requires nvidia-cudnn-cu12>=9.8"]]
