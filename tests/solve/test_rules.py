"""Tests of cudamatrix/solve/rules.py.

Table tests of the hard rules, in the parametrised style of pypa/packaging's tests.

Every expected value is read from the NVIDIA (or PEP) document cited above its table, not from the code:
- CUDA C++ Programming Guide, "Binary Compatibility": a cubin for compute capability X.y runs on devices of
  compute capability X.z with z >= y only (same major).
- Same guide, "PTX Compatibility": PTX for a compute capability can be compiled (JIT by the driver) for any
  equal or higher compute capability.
- Same guide and the CUDA 12.9 release notes, architecture- and family-specific targets: code for ``sm_90a``
  runs on compute capability 9.0 only; ``sm_100f`` on the devices of its family with an equal or higher minor
  (10.0 and 10.3); arch-specific PTX is not forward compatible.
- CUDA Toolkit Release Notes, table "CUDA Toolkit and Corresponding Driver Versions" (minimum drivers per
  toolkit) and its minor-version compatibility table (11.x >= 450.80.02, 12.x >= 525.60.13, 13.x >= 580);
  the CUDA Compatibility guide: under minor-version compatibility the GPU needs SASS, PTX JIT is not covered.
- cuDNN 9.1.0 Support Matrix: compute capability 5.0 and higher.
- PEP 440 (version specifiers) for pin conflicts; nvcc's ``sm_XY`` naming (X major, Y minor; ``sm_120`` is 12.0).

The driver floors come from the frozen matrix snapshot, whose cuda.json rows copy that NVIDIA table.

The solver's rule registry (``cudamatrix.solve.rules``): one table per rule function, each rule asked on its own.

A case is (the build, the target) -> the Reasons the rule gives, as (rule id, sentence). The matrix is the small one
of ``smallmatrix`` (its CUDA, cuDNN and architecture rows copied from the NVIDIA documents named there); the
expected answer of each table comes from the document cited above it. ``check`` itself is the loop over the
registries: the last tests pin their order and the decisive Jetson rule.

Rule tables: inputs and the answer the cited NVIDIA document gives, side by side (pypa/packaging's style).

The matrix is the small one of ``smallmatrix`` (facts copied from the documents), so the tables do not move when
the shipped data changes. Each expectation comes from the document cited above its table, not from the code.

Every answer of the hard rules, whole: the rule, the sentence, the matrix row it cites and the driver to install.

Tables in pypa/packaging's style, on the small matrix of ``smallmatrix`` (its CUDA, cuDNN and architecture rows
are copied from the NVIDIA documents named there). The framework rows are constructed inputs; each carries its own
source string (``VARIANT_ROW``, ``RELEASE_ROW``) so a reason that cites the wrong row is seen. The expected verdict
of each case comes from the document cited above its table; the sentence is the product's promised wording (every
message a whole sentence with no empty slot).

Jetson boards get no default-index or PyTorch-index build: the candidate is rejected by the ``jetson`` rule,
and the ways out name NVIDIA's JetPack wheels.

Sources (the advisory CM-2026-002 in data/advisories.json cites both):
- PyTorch's own CUDA builds leave Tegra out: its aarch64 CUDA wheels are built with TORCH_CUDA_ARCH_LIST
  "8.0;9.0;10.0;11.0;12.0;12.1" (pytorch/pytorch .ci/aarch64_linux/aarch64_ci_build.sh, CUDA 12.9), and the
  aarch64 wheel of torch 2.15.0 is compiled for sm_80 sm_90 sm_100 sm_110 sm_120 (its arch flags string,
  recorded in torch.json): no sm_87/sm_72/sm_62/sm_53.
- NVIDIA's "PyTorch for Jetson" forum page publishes the wheels built per JetPack release for Nano, TX2, Xavier
  and Orin.
Run on the shipped data (the snapshot predates the advisory).
"""
from __future__ import annotations

import dataclasses

import pytest
from packaging.requirements import Requirement
from packaging.version import Version
from support import tomlread
from support.smallmatrix import CUDNN_910, CUDNN_917, NOTES, build, release, replace, target, variant
from support.snapshot import snapshot_matrix

from cudamatrix.errors import NoSolution
from cudamatrix.matrix.data import (
    Advisory,
    AdvisoryFile,
    CudaRelease,
    DriverBranch,
    FrameworkRelease,
    Variant,
)
from cudamatrix.matrix.load import load_matrix
from cudamatrix.schema import cc_key, normalize_cc
from cudamatrix.solve import rules
from cudamatrix.solve.indexes import PYTORCH_INDEX_PREFIX
from cudamatrix.solve.rules import Reason
from cudamatrix.solve.solver import parse_request, solve
from cudamatrix.solve.target import Target, TargetGpu, from_flags

# --- rules ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("7.5", "7.5"),
    ("sm_75", "7.5"),
    ("SM_86", "8.6"),
    ("75", "7.5"),
    ("compute_90", "9.0"),
    ("compute_90a", "9.0a"),
    ("sm_90a", "9.0a"),
    ("sm_100f", "10.0f"),
    ("sm_120", "12.0"),
    ("120", "12.0"),
    ("12.1", "12.1"),
    (" 8.9 ", "8.9"),
])
def test_normalize_cc(text: str, expected: str):
    assert normalize_cc(text) == expected


@pytest.mark.parametrize("text", ["", "7", "sm_", "abc", "7.x", "sm_7a.5", "compute_"])
def test_normalize_cc_refuses(text: str):
    with pytest.raises(ValueError):
        normalize_cc(text)


def test_normalize_cc_refuses_numbers():
    with pytest.raises(ValueError):
        normalize_cc(7.5)  # a float loses "8.10" vs "8.1": compute capabilities are strings


@pytest.mark.parametrize(("cc", "key"), [("8.6", (8, 6)), ("9.0a", (9, 0)), ("10.0f", (10, 0)), ("12.1", (12, 1))])
def test_cc_key(cc: str, key: tuple[int, int]):
    assert cc_key(cc) == key


def test_cc_key_orders_numerically():
    assert sorted(["10.0", "9.0", "12.0", "8.6", "7.5"], key=cc_key) == ["7.5", "8.6", "9.0", "10.0", "12.0"]


@pytest.mark.parametrize(("archs", "cc", "expected"), [
    (["7.5"], "7.5", True),  # the GPU's own architecture
    (["8.0"], "8.6", True),  # same major, lower minor: runs (Binary Compatibility)
    (["8.0"], "8.9", True),
    (["8.6"], "8.0", False),  # a higher minor does not run on a lower one
    (["7.5"], "8.0", False),  # never across majors
    (["9.0"], "12.0", False),
    (["5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0"], "12.0", False),  # RTX 50 on a cu124 build
    (["7.5", "8.0", "8.6", "9.0", "10.0", "12.0"], "12.0", True),
    (["12.0"], "12.1", True),
    (["9.0a"], "9.0", True),  # arch-specific: that very GPU
    (["8.0a"], "8.6", False),  # arch-specific code is not portable within the major
    (["10.0a"], "10.3", False),
    (["10.0f"], "10.3", True),  # family-specific: the family's later members
    (["10.0f"], "10.0", True),
    (["10.3f"], "10.0", False),  # not backwards
    (["10.0f"], "12.0", False),  # nor across families
    ([], "8.0", False),
])
def test_sass_covers(archs: list[str], cc: str, expected: bool):
    assert rules.sass_covers(archs, cc) is expected


@pytest.mark.parametrize(("ptx", "cc", "expected"), [
    (["9.0"], "12.0", True),  # PTX JIT-compiles forward, across majors
    (["5.0"], "8.6", True),
    (["9.0"], "9.0", True),
    (["9.0"], "8.9", False),  # never backwards
    (["12.0"], "10.0", False),
    (["9.0a"], "10.0", False),  # arch-specific PTX is not forward compatible
    ([], "8.0", False),
])
def test_ptx_covers(ptx: list[str], cc: str, expected: bool):
    assert rules.ptx_covers(ptx, cc) is expected


@pytest.fixture(scope="module")
def matrix():
    return snapshot_matrix()


def _build(cuda: str, archs: list[str], ptx: list[str] = (), cudnn: str | None = None) -> tuple[FrameworkRelease, Variant]:
    variant = Variant(name="cuX", source="test", cuda=Version(cuda), cudnn=Version(cudnn) if cudnn else None,
                      archs=list(archs), ptx=list(ptx))
    release = FrameworkRelease(name="torch", version=Version("2.0.0"), python=[], variants=[variant], source="test")
    return release, variant


def _target(driver: str, cc: str, platform: str = "linux_x86_64") -> Target:
    return Target(name="m", driver=driver, gpus=(TargetGpu(cc),), platform=platform)


@pytest.mark.parametrize(("cuda", "driver", "platform", "expected"), [
    ("12.4", "550.54.15", "linux_x86_64", []),  # >= 550.54.14, the 12.4 floor
    ("12.4", "535.104.05", "linux_x86_64", []),  # minor-version compatibility (>= 525.60.13), SASS present
    ("12.4", "525.60.13", "linux_x86_64", []),  # exactly the 12.x minor-version floor
    ("12.4", "520.61.05", "linux_x86_64", ["driver_floor"]),  # below the 12.x floor
    ("12.1", "470.82.01", "linux_x86_64", ["driver_floor"]),
    ("11.8", "450.80.02", "linux_x86_64", []),  # the 11.x minor-version floor
    ("11.8", "450.51.05", "linux_x86_64", ["driver_floor"]),  # 11.0's own floor, below the 11.x one
    ("11.8", "520.61.05", "linux_x86_64", []),  # 11.8's own floor
    ("13.0", "580.65.06", "linux_x86_64", []),  # 13.0's floor
    ("13.0", "575.51.03", "linux_x86_64", ["driver_floor"]),  # 13.x needs branch 580 or newer
    ("12.4", "551.61", "win_amd64", []),  # the Windows column
    ("12.4", "527.41", "win_amd64", []),  # Windows minor-version floor for 12.x
    ("12.4", "522.06", "win_amd64", ["driver_floor"]),
])
def test_driver_floors(matrix, cuda: str, driver: str, platform: str, expected: list[str]):
    release, variant = _build(cuda, ["7.5", "8.0", "8.6", "9.0"])
    found = rules.check(matrix, release, variant, _target(driver, "8.0", platform))
    assert [r.rule for r in found] == expected


@pytest.mark.parametrize(("cuda", "driver", "expected"), [
    ("12.4", "550.54.14", True),
    ("12.4", "535.104.05", False),  # runs, but only through minor-version compatibility
    ("11.8", "535.104.05", True),
    ("13.0", "580.65.06", True),
])
def test_full_support(matrix, cuda: str, driver: str, expected: bool):
    _, variant = _build(cuda, ["8.0"])
    assert rules.full_support(matrix, variant, _target(driver, "8.0")) is expected


@pytest.mark.parametrize(("driver", "archs", "ptx", "cc", "expected"), [
    # PTX JIT needs full driver support: not under minor-version compatibility (CUDA Compatibility guide)
    ("535.104.05", ["7.5"], ["8.0"], "8.9", ["arch"]),
    ("550.54.15", ["7.5"], ["8.0"], "8.9", []),
    ("535.104.05", ["8.0"], [], "8.9", []),  # SASS of 8.0 runs on 8.9: minor-version compatibility is fine
    ("570.124.04", ["7.5", "8.0", "8.6", "9.0"], [], "12.0", ["arch"]),  # no kernel image for an RTX 50
    ("570.124.04", ["7.5", "8.0", "8.6", "9.0"], ["9.0"], "12.0", []),  # ... unless PTX reaches it
    # R550 does not drive Blackwell at all: R570 is the first branch (CUDA 12.8's driver, release notes table)
    ("550.54.15", ["7.5", "8.0", "8.6", "9.0"], ["9.0"], "12.0", ["gpu_driver"]),
])
def test_coverage_under_each_driver(matrix, driver, archs, ptx, cc, expected):
    release, variant = _build("12.4", archs, ptx)
    assert [r.rule for r in rules.check(matrix, release, variant, _target(driver, cc))] == expected


@pytest.mark.parametrize(("cc", "expected"), [
    ("3.7", ["cudnn_gpu"]),  # Kepler: below cuDNN 9.1's compute capability 5.0
    ("5.0", []),
    ("7.5", []),
])
def test_cudnn_compute_capability_floor(matrix, cc: str, expected: list[str]):
    release, variant = _build("12.4", [cc], cudnn="9.1.0")
    assert [r.rule for r in rules.check(matrix, release, variant, _target("550.54.15", cc))] == expected


def test_driver_floor_reason_names_the_driver_that_would_do(matrix):
    release, variant = _build("12.4", ["8.0"])
    (reason,) = rules.check(matrix, release, variant, _target("470.82.01", "8.0"))
    assert reason.need_driver == "525.60.13"  # the 12.x minor-version floor is the lowest that runs it
    assert "470.82.01" in reason.message


@pytest.mark.parametrize(("a", "b", "conflict"), [
    (["nvidia-cudnn-cu12==9.1.0.70"], ["nvidia-cudnn-cu12==9.1.0.70"], False),
    (["nvidia-cudnn-cu12==9.1.0.70"], ["nvidia-cudnn-cu12==8.9.4.25"], True),
    (["nvidia-cublas-cu12>=12.1"], ["nvidia-cublas-cu12==12.4.5.8"], False),
    (["nvidia-cublas-cu12==12.1.3.1"], ["nvidia-cublas-cu12>=12.4"], True),
    (["nvidia-cublas-cu12==12.4.*"], ["nvidia-cublas-cu12==12.4.5.8"], False),
    (["nvidia-cublas-cu12==12.4.5.8"], ["nvidia-cufft-cu12==11.2.1.3"], False),
    (["nvidia-cudnn-cu12>=9,<10"], ["nvidia-cudnn-cu12>=9.1"], False),  # two ranges that meet
    (["Nvidia_CuDNN_CU12==9.1.0.70"], ["nvidia-cudnn-cu12==8.9.4.25"], True),  # names compare normalised
])
def test_pin_conflicts(a: list[str], b: list[str], conflict: bool):
    problems = rules.pin_conflicts([Requirement(x) for x in a], [Requirement(x) for x in b], "A", "B")
    assert bool(problems) is conflict


@pytest.mark.parametrize(("name", "key"), [
    ("nvidia-cudnn-cu12", "nvidia-cudnn"),
    ("nvidia-cudnn-cu13", "nvidia-cudnn"),
    ("nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime"),
    ("Nvidia_NCCL_CU12", "nvidia-nccl"),
    ("nvidia-cudnn", "nvidia-cudnn"),
    ("nvidia-cuda-nvcc", "nvidia-cuda-nvcc"),
])
def test_library_key(name: str, key: str):
    assert rules.library_key(name) == key


# --- solve rules registry ------------------------------------------------------------------------------------------

CU124 = variant("cu124", "12.4", archs=["7.5", "8.0", "8.6", "9.0"], cudnn="9.1.0")


def _ask(rule, v, t: Target, *, name: str = "torch", python=("3.10", "3.11", "3.12"), matrix=None, gpu=None):
    rel = replace(release("2.5.1", v, name=name), python=list(python))
    found = rule(rules.Build(matrix or build(rel), rel, v, t), gpu) if gpu is not None else \
        rule(rules.Build(matrix or build(rel), rel, v, t))
    return [(r.rule, r.message) for r in found]


# PyTorch "Get Started": macOS binaries carry no CUDA; a build is published for the platforms its row lists.
PLATFORM = [
    (CU124, "macos_arm64", [("platform", "torch 2.5.1 cu124 is a CUDA build; CUDA builds are not published for macOS")]),
    (variant("cpu", None), "macos_arm64", [("platform", "torch 2.5.1 cpu is not published for macos_arm64 (only "
                                                        "linux_x86_64, win_amd64)")]),
    (replace(CU124, platforms=["linux_x86_64"]), "win_amd64",
     [("platform", "torch 2.5.1 cu124 is not published for win_amd64 (only linux_x86_64)")]),
    (CU124, "win_amd64", []),
    (CU124, "linux_x86_64", []),
]


@pytest.mark.parametrize("v, platform, expected", PLATFORM)
def test_platform(v, platform, expected):
    assert _ask(rules.platform, v, target(None, platform=platform)) == expected


# PyPI wheel tags: the release has wheels for the Python versions its row lists; none listed is unknown.
PYTHON = [
    ("3.13", ("3.10", "3.11", "3.12"), [("python", "torch 2.5.1 cu124 supports Python 3.10, 3.11, 3.12, not 3.13")]),
    ("3.11", ("3.10", "3.11", "3.12"), []),
    (None, ("3.10",), []),
    ("3.11", (), [("unknown", "the Python versions torch 2.5.1 cu124 is published for are not in the matrix, so "
                              "Python 3.11 cannot be checked")]),
    (None, (), []),
]


@pytest.mark.parametrize("want, listed, expected", PYTHON)
def test_python(want, listed, expected):
    assert _ask(rules.python, CU124, target(None, python=want), python=listed) == expected


# TensorFlow "Tested build configurations": builds before 2.14 (no nvidia-* wheels) load the system's CUDA of the
# major they were built with; with the and-cuda extra the wheels bring it, and the toolkit plays no part.
TF_CU118 = variant("cuda11", "11.8", archs=["8.0"], cudnn="9.1.0")


SYSTEM_CUDA = [
    (TF_CU118, "tensorflow", "12.2", [("system_cuda", "tensorflow 2.5.1 cuda11 loads the system's CUDA 11.8 "
                                                      "libraries; the target's toolkit is CUDA 12.2")]),
    (TF_CU118, "tensorflow", "11.2", []),
    (TF_CU118, "tensorflow", None, []),
    (TF_CU118, "tensorflow", "not-a-version", []),
    (replace(TF_CU118, pip_extra="and-cuda"), "tensorflow", "12.2", []),
    (TF_CU118, "torch", "12.2", []),  # only TensorFlow loads the system's CUDA this way
]


@pytest.mark.parametrize("v, family, toolkit, expected", SYSTEM_CUDA)
def test_system_cuda(v, family, toolkit, expected):
    t = target("550.54.15", "8.0", cuda_toolkit=toolkit)
    assert _ask(rules.system_cuda, v, t, name=family) == expected


# CUDA Toolkit release notes ("CUDA Toolkit and Corresponding Driver Versions"): CUDA 12.4 needs Linux >= 550.54.14;
# the CUDA Compatibility guide: any CUDA 12.x runs on Linux >= 525.60.13 under minor-version compatibility.
# CUDA 10.2 has no row in the small matrix: its floor is unknown, never a pass.
DRIVER_FLOOR = [
    (CU124, "550.54.14", []),
    (CU124, "535.104.05", []),
    (CU124, None, []),
    (CU124, "520.61.05", [("driver_floor", "driver 520.61.05 runs CUDA 11.8 at most; torch 2.5.1 cu124 needs CUDA "
                                           "12.4, which needs driver >= 525.60.13 under minor-version compatibility, "
                                           "and 550.54.14 for full support")]),
    (CU124, "390.48", [("driver_floor", "driver 390.48 is older than every CUDA release in the matrix; torch 2.5.1 "
                                        "cu124 needs CUDA 12.4, which needs driver >= 525.60.13 under minor-version "
                                        "compatibility, and 550.54.14 for full support")]),
    (variant("cu102", "10.2", archs=["8.0"]), "450.80.02",
     [("unknown", "torch 2.5.1 cu102 is built with CUDA 10.2, whose minimum driver is not in the matrix, so driver "
                  "450.80.02 cannot be checked against it")]),
]


@pytest.mark.parametrize("v, driver, expected", DRIVER_FLOOR)
def test_driver_floor(v, driver, expected):
    assert _ask(rules.driver_floor, v, target(driver, "8.0")) == expected


# A minimum driver the framework documents for one build (the row's min_driver and its source).
MIN_DRIVER = [
    ("535.54.03", "530.30.02", [("driver_floor", "torch 2.5.1 cu124 documents a minimum driver of 535.54.03; the "
                                                 "target has 530.30.02")]),
    ("535.54.03", "535.54.03", []),
    ("535.54.03", None, []),
    (None, "530.30.02", []),
]


@pytest.mark.parametrize("documented, driver, expected", MIN_DRIVER)
def test_documented_min_driver(documented, driver, expected):
    v = replace(CU124, min_driver=documented)
    assert _ask(rules.documented_min_driver, v, target(driver, "8.0")) == expected


# The first driver of an architecture (release notes: the driver of the first CUDA release whose compiler targets
# it): Hopper 9.0 -> 520.61.05, Blackwell 12.0 -> 570.26; one reason per GPU below its floor.
GPU_DRIVER = [
    ("565.57.01", ("12.0",), [("gpu_driver", "driver 565.57.01 does not drive sm_120 (Blackwell, compute capability "
                                             "12.0): the first driver for it is 570.26 (branch R570)")]),
    ("515.65.01", ("9.0", "12.0"), [
        ("gpu_driver", "driver 515.65.01 does not drive sm_90 (Hopper, compute capability 9.0): the first driver for "
                       "it is 520.61.05 (branch R520)"),
        ("gpu_driver", "driver 515.65.01 does not drive sm_120 (Blackwell, compute capability 12.0): the first driver "
                       "for it is 570.26 (branch R570)")]),
    ("570.26", ("9.0", "12.0"), []),
    (None, ("12.0",), []),
    ("570.26", ("99.0",), [("unknown", "compute capability 99.0 (sm_990) is not in the matrix, so the driver that "
                                       "drives it is unknown")]),
]


@pytest.mark.parametrize("driver, ccs, expected", GPU_DRIVER)
def test_gpu_driver(driver, ccs, expected):
    assert _ask(rules.gpu_driver, CU124, target(driver, *ccs)) == expected


# NVIDIA's "PyTorch for Jetson" page and PyTorch's aarch64 arch list: a board named by a JetPack advisory gets no
# default-index or PyTorch-index build of the family the advisory names.
JETSON_ADVISORY = Advisory(id="CM-TEST-JETSON", affects=["torch>=0"], symptom="no kernel image on the board",
                           fix="install NVIDIA's JetPack wheels", gpu_compute_capabilities=["8.7"],
                           source="https://forums.developer.nvidia.com/t/pytorch-for-jetson/72048")


JETSON = [
    ("8.7", "torch", [("jetson", "sm_87 (compute capability 8.7) is a Jetson board: torch 2.5.1 cu124 from the "
                                 "default or PyTorch index has no kernels for it; install NVIDIA's JetPack wheels of "
                                 "torch for the board's JetPack release (CM-TEST-JETSON)")]),
    ("8.6", "torch", []),
    ("8.7", "tensorflow", []),  # the advisory names torch only
]


@pytest.mark.parametrize("cc, family, expected", JETSON)
def test_jetson(cc, family, expected):
    rel = release("2.5.1", CU124, name=family)
    m = replace(build(rel), advisories=AdvisoryFile(advisories=[JETSON_ADVISORY]))
    assert _ask(rules.jetson, CU124, target("550.54.14", cc), name=family, matrix=m, gpu=TargetGpu(cc)) == expected


# CUDA C++ Programming Guide, "Binary Compatibility" and "PTX Compatibility"; CUDA Compatibility guide: under
# minor-version compatibility (driver 535 for CUDA 12.4) PTX is not JIT-compiled. An unlisted arch list: CUDA 12.x
# compiles for compute capability 5.0 and newer (release notes), so only an older GPU is known to fail.
PTX_ONLY = variant("cu124", "12.4", archs=["8.0", "8.6"], ptx=["8.6"], cudnn="9.1.0")


UNLISTED = variant("cu124", "12.4", cudnn="9.1.0")


ARCH = [
    (PTX_ONLY, "550.54.14", "8.0", []),
    (PTX_ONLY, "550.54.14", "9.0", []),
    (PTX_ONLY, "535.104.05", "9.0", [("arch", "torch 2.5.1 cu124 reaches sm_90 (compute capability 9.0) only by PTX "
                                              "JIT, which the driver's minor-version compatibility does not cover")]),
    (replace(PTX_ONLY, min_driver="540.0"), "535.104.05", "9.0", []),  # the documented floor says it already
    (PTX_ONLY, "520.61.05", "9.0", []),  # below every floor: driver_floor says it
    (PTX_ONLY, None, "9.0", []),
    (PTX_ONLY, "550.54.14", "7.5", [("arch", "torch 2.5.1 cu124 has no kernel image for sm_75 (compute capability "
                                             "7.5): SASS sm_80 sm_86, PTX compute_86")]),
    (variant("cu124", "12.4", archs=["9.0a"]), "550.54.14", "10.0",
     [("arch", "torch 2.5.1 cu124 has no kernel image for sm_100 (compute capability 10.0): SASS sm_90a, PTX none")]),
    (UNLISTED, "550.54.14", "3.7", [("arch", "torch 2.5.1 cu124 is built with CUDA 12.4, which compiles for compute "
                                             "capability 5.0 and newer; sm_37 (3.7) is older, so the build has no "
                                             "kernel image for it")]),
    (UNLISTED, "550.54.14", "8.0", [("unknown", "the GPU architectures torch 2.5.1 cu124 was compiled for are not in "
                                                "the matrix, so whether it has a kernel image for sm_80 (compute "
                                                "capability 8.0) is unknown")]),
]


@pytest.mark.parametrize("v, driver, cc, expected", ARCH)
def test_arch(v, driver, cc, expected):
    assert _ask(rules.arch, v, target(driver, cc), gpu=TargetGpu(cc)) == expected


# cuDNN Support Matrix: cuDNN 9.1.0 supports compute capability 5.0 and newer, 9.17.0 7.5 and newer; a build whose
# cuDNN is unknown passes only where every cuDNN release for its CUDA supports the GPU.
CUDNN_GPU = [
    ("9.1.0", "5.0", []),
    ("9.1.0", "3.7", [("cudnn_gpu", "cuDNN 9.1.0 bundled with torch 2.5.1 cu124 supports compute capability >= 5.0, "
                                    "not sm_37 (3.7)")]),
    ("9.17.0", "7.0", [("cudnn_gpu", "cuDNN 9.17.0 bundled with torch 2.5.1 cu124 supports compute capability >= "
                                     "7.5, not sm_70 (7.0)")]),
    ("8.9.7", "7.5", [("unknown", "the compute capabilities cuDNN 8.9.7 of torch 2.5.1 cu124 supports are not in the "
                                  "matrix, so sm_75 (7.5) cannot be checked against them")]),
    (None, "7.5", []),
    (None, "7.0", [("unknown", "the cuDNN version of torch 2.5.1 cu124 is not in the matrix, and some cuDNN releases "
                               "for CUDA 12.4 do not support sm_70 (7.0), so the build cannot be checked")]),
]


@pytest.mark.parametrize("cudnn, cc, expected", CUDNN_GPU)
def test_cudnn_gpu(cudnn, cc, expected):
    v = replace(CU124, cudnn=variant("x", None, cudnn=cudnn).cudnn)
    assert _ask(rules.cudnn_gpu, v, target(None, cc), gpu=TargetGpu(cc)) == expected


# cudnn.json gpu_floors (NVIDIA's cuDNN support matrix, 9.10.2 edition: from compute capability 5.0; 9.17.0 edition:
# from 7.5; the wheels' cuobjdump on either side of 9.11): a build whose cuDNN wheel is a range reaching 9.11 lets
# pip install a cuDNN with no kernels for a Pascal GPU; it fits only when a version below 9.11 in the range is known
# (a pin another build of the matrix declares, here torch's nvidia-cudnn-cu12==9.10.2.21), which the answer pins.
TF_RANGE = variant("and-cuda", "12.5", archs=["6.0", "7.0", "7.5", "8.0", "9.0"], cudnn="9.3.0.75",
                   nvidia_pins=["nvidia-cudnn-cu12<10.0,>=9.3.0.75"], pip_extra="and-cuda")


HIGH_FLOOR = replace(TF_RANGE, nvidia_pins=["nvidia-cudnn-cu12<10.0,>=9.12.0.46"])


CUDNN_RANGE = [
    (TF_RANGE, "6.0", ["nvidia-cudnn-cu12==9.10.2.21"], "nvidia-cudnn-cu12==9.10.2.21", []),
    (TF_RANGE, "6.0", [], "nvidia-cudnn-cu12==9.3.0.75", []),  # the range's own floor is a published wheel
    (HIGH_FLOOR, "6.0", ["nvidia-cudnn-cu12==9.10.2.21"], None,
     [("cudnn_gpu", "torch 2.5.1 and-cuda: cuDNN >=9.11 has no kernels below compute capability 7.5 (the GPU is "
                    "6.0), and nvidia-cudnn-cu12<10.0,>=9.12.0.46 lets pip take the newest; the matrix knows no "
                    "nvidia-cudnn-cu12 version in that range that has them")]),
    (TF_RANGE, "8.0", [], None, []),
]


@pytest.mark.parametrize("v, cc, other_pins, pinned, expected", CUDNN_RANGE)
def test_cudnn_range(v, cc, other_pins, pinned, expected):
    from cudamatrix.matrix.data import CudnnGpuFloor
    from cudamatrix.solve.pins import cudnn_for_gpus

    rel = replace(release("2.5.1", v), python=["3.10", "3.11", "3.12"])
    other = release("2.8.0", variant("cu128", "12.8", nvidia_pins=other_pins))
    m = build(rel, other)
    m = replace(m, cudnn=replace(m.cudnn, gpu_floors=[CudnnGpuFloor(versions=">=9.11", min_compute_capability="7.5",
                                                                    source=CUDNN_917)]))
    found = rules.cudnn_range(rules.Build(m, rel, v, target(None, cc)), TargetGpu(cc))
    assert [(r.rule, r.message) for r in found] == expected
    pin, _ = cudnn_for_gpus(m, v, target(None, cc))
    assert (str(pin) if pin else None) == pinned


@pytest.mark.parametrize("pin, pinned", [
    ("nvidia-cudnn-cu12==9.10.2.21", None),  # an exact pin is the build's own choice: nothing to pin over it
    ("nvidia-cudnn-cu12>=9.1,<10", "nvidia-cudnn-cu12==9.10.2.21"),
    ("nvidia-cudnn-cu12==9.*", "nvidia-cudnn-cu12==9.10.2.21"),  # a wildcard is a range
])
def test_only_a_cudnn_range_is_pinned_below_a_gpu_floor(pin, pinned):
    """The shipped cudnn.json floor (cuDNN >= 9.11: no kernels below compute capability 7.5) on a V100 (7.0): the
    newest nvidia-cudnn-cu12 the matrix knows below 9.11 is 9.10.2.21 (the pin of torch 2.8.0 to 2.10.0 cu128 in
    torch.json)."""
    from cudamatrix.solve.pins import cudnn_for_gpus

    m = load_matrix()
    v = replace(variant("cu128", "12.8"), nvidia_pins=[pin])
    found, why = cudnn_for_gpus(m, v, target(None, "7.0"))
    assert (str(found) if found else None) == pinned
    assert (why is None) is (pinned is None)


def test_registries_hold_every_rule_in_order():
    assert rules.BUILD_RULES == [rules.platform, rules.python]
    assert rules.CUDA_RULES == [rules.system_cuda, rules.driver_floor, rules.documented_min_driver, rules.gpu_driver]
    assert rules.GPU_RULES == [rules.jetson, rules.arch, rules.cudnn_gpu, rules.cudnn_range]
    assert rules.DECISIVE == {rules.jetson}


def test_every_rule_says_what_it_checks_and_its_source():
    for fn in rules.BUILD_RULES + rules.CUDA_RULES + rules.GPU_RULES:
        doc = fn.__doc__ or ""
        assert doc.startswith("Rule ``"), fn.__name__
        assert any(s in doc for s in ("NVIDIA", "PyTorch", "TensorFlow", "cuDNN", "CUDA", "PyPI", "matrix row",
                                      "gpu_driver_reason")), fn.__name__


def test_check_asks_the_cuda_rules_only_of_a_cuda_build_on_a_gpu_or_driver_target():
    cpu = variant("cpu", None)
    rel = release("2.5.1", cpu)
    assert rules.check(build(rel), rel, cpu, target("390.48", "3.7")) == []
    rel = release("2.5.1", CU124)
    assert rules.check(build(rel), rel, CU124, target(None)) == []
    assert [r.rule for r in rules.check(build(rel), rel, CU124, target("390.48"))] == ["driver_floor"]


def test_check_orders_reasons_by_registry_then_by_gpu():
    v = variant("cu124", "12.4", archs=["8.0"], cudnn="9.17.0")
    rel = replace(release("2.5.1", v), python=["3.10"])
    t = target("515.65.01", "7.0", "9.0", python="3.12")
    found = [(r.rule, r.message.split(" ")[0:4]) for r in rules.check(build(rel), rel, v, t)]
    assert [r for r, _ in found] == ["python", "driver_floor", "gpu_driver", "arch", "cudnn_gpu", "arch"]
    # the GPUs in the target's order: 7.0 (no SASS, older than cuDNN 9.17's floor), then 9.0 (no SASS)
    assert "sm_70" in rules.check(build(rel), rel, v, t)[3].message


def test_a_decisive_jetson_reason_leaves_that_gpus_other_rules_unasked():
    v = variant("cu124", "12.4", archs=["9.0"], cudnn="9.17.0")
    rel = release("2.5.1", v)
    m = replace(build(rel), advisories=AdvisoryFile(advisories=[JETSON_ADVISORY]))
    found = rules.check(m, rel, v, target(None, "8.7", "7.0"))
    # the board (8.7) gets the jetson reason only; the other GPU (7.0) still gets arch and cudnn_gpu
    assert [r.rule for r in found] == ["jetson", "arch", "cudnn_gpu"]


# --- table rules ---------------------------------------------------------------------------------------------------

# CUDA C++ Programming Guide, "Binary Compatibility": a cubin for compute capability X.y runs on devices of
# compute capability X.z with z >= y, never on another major. "Feature availability": an arch-specific
# target (sm_90a) runs on exactly that compute capability; a family-specific one (sm_100f) on devices of the
# same family (same major) with an equal or higher minor.
SASS = [
    (["8.0"], "8.0", True),
    (["8.0"], "8.6", True),
    (["8.6"], "8.0", False),
    (["8.6"], "8.9", True),
    (["7.5"], "8.0", False),
    (["9.0"], "10.0", False),
    (["8.0"], "7.5", False),
    ([], "7.5", False),
    (["5.0", "6.0", "7.0"], "7.5", True),
    (["9.0a"], "9.0", True),
    (["9.0a"], "10.0", False),
    (["10.0a"], "10.3", False),
    (["10.0f"], "10.3", True),
    (["10.0f"], "10.0", True),
    (["10.3f"], "10.0", False),
    (["10.0f"], "12.0", False),
    (["12.0f"], "12.1", True),
    (["12.0a"], "12.1", False),
]


@pytest.mark.parametrize("archs, cc, runs", SASS)
def test_sass_binary_compatibility(archs, cc, runs):
    assert rules.sass_covers(archs, cc) is runs


# CUDA C++ Programming Guide, "PTX Compatibility": PTX for compute capability X.y is JIT-compiled for any
# device of an equal or higher compute capability (any major); arch- and family-specific PTX is not portable.
PTX = [
    (["8.0"], "9.0", True),
    (["8.0"], "8.0", True),
    (["9.0"], "8.9", False),
    (["5.0"], "12.0", True),
    ([], "7.5", False),
    (["9.0a"], "10.0", False),
    (["10.0f"], "12.0", False),
    (["9.0", "10.0a"], "12.0", True),
]


@pytest.mark.parametrize("ptx, cc, jit", PTX)
def test_ptx_forward_compatibility(ptx, cc, jit):
    assert rules.ptx_covers(ptx, cc) is jit


# CUDA Toolkit Release Notes, table "CUDA Toolkit and Corresponding Driver Versions": CUDA 12.4 GA needs Linux
# >= 550.54.14 (Windows >= 551.61); minor-version compatibility (CUDA Compatibility guide) runs any CUDA 12.x
# application on Linux >= 525.60.13 (Windows >= 527.41) when the binary carries SASS for the GPU. Below that,
# the build does not run, and the driver to install is the minor-version floor.
CU124_T4 = variant("cu124", "12.4", archs=["5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0"], cudnn="9.1.0")


DRIVER_FLOOR_table = [
    ("550.54.14", "linux_x86_64", None),
    ("560.35.03", "linux_x86_64", None),
    ("550.54.13", "linux_x86_64", None),  # minor-version compatibility, SASS 7.5 present
    ("535.104.05", "linux_x86_64", None),
    ("525.60.13", "linux_x86_64", None),
    ("525.60.12", "linux_x86_64", "525.60.13"),
    ("520.61.05", "linux_x86_64", "525.60.13"),
    ("470.82.01", "linux_x86_64", "525.60.13"),
    ("551.61", "win_amd64", None),
    ("527.41", "win_amd64", None),
    ("527.27", "win_amd64", "527.41"),
]


@pytest.mark.parametrize("driver, platform, need", DRIVER_FLOOR_table)
def test_driver_floor_of_a_cuda_build(driver, platform, need):
    m = build()
    reasons = rules.check(m, release("2.5.1", CU124_T4), CU124_T4, target(driver, "7.5", platform=platform))
    floors = [r for r in reasons if r.rule == "driver_floor"]
    if need is None:
        assert reasons == []
    else:
        assert [r.need_driver for r in floors] == [need]
        assert floors[0].row == "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html"
        assert f">= {need} under minor-version compatibility" in floors[0].message


# Full support (no minor-version compatibility needed) is the driver at or above the toolkit's own floor.
FULL = [
    ("12.4", "550.54.14", "linux_x86_64", True),
    ("12.4", "550.54.13", "linux_x86_64", False),
    ("12.1", "535.104.05", "linux_x86_64", True),
    ("12.1", "530.30.01", "linux_x86_64", False),
    ("12.4", "551.61", "win_amd64", True),
    ("12.4", "551.52", "win_amd64", False),
    ("12.4", None, "linux_x86_64", True),  # no driver stated: nothing to judge
]


@pytest.mark.parametrize("cuda, driver, platform, full", FULL)
def test_full_support_table(cuda, driver, platform, full):
    m = build()
    assert rules.full_support(m, variant("v", cuda), target(driver, platform=platform)) is full


JIT = [
    ("550.54.14", []),  # full support: PTX 8.6 is JIT-compiled for the H100 (9.0)
    ("555.42.02", []),
    ("535.104.05", ["arch"]),  # minor-version compatibility: no JIT, and no SASS 9.0
    ("525.60.13", ["arch"]),
]


@pytest.mark.parametrize("driver, rules_broken", JIT)
def test_ptx_jit_is_not_covered_by_minor_version_compatibility(driver, rules_broken):
    m = build()
    reasons = rules.check(m, release("2.5.1", PTX_ONLY), PTX_ONLY, target(driver, "9.0"))
    assert [r.rule for r in reasons] == rules_broken
    if rules_broken:
        assert "only by PTX JIT" in reasons[0].message


# No SASS for the GPU and no PTX at or below it: no kernel image (CUDA Programming Guide, Binary and PTX
# Compatibility), whatever the driver.
KERNEL = [
    (["7.5", "8.0"], [], "8.6", []),
    (["7.5", "8.0"], [], "9.0", ["arch"]),
    (["8.0", "9.0"], [], "7.5", ["arch"]),
    (["8.0"], ["9.0"], "8.9", []),       # SASS 8.0 runs on 8.9 (same major)
    (["9.0a"], [], "9.0", []),
    (["9.0a"], [], "10.0", ["arch"]),
    (["9.0"], ["9.0"], "12.0", []),      # PTX JIT on a newer major, full driver
]


@pytest.mark.parametrize("archs, ptx, cc, rules_broken", KERNEL)
def test_kernel_image_for_the_gpu(archs, ptx, cc, rules_broken):
    m = build()
    v = variant("cu128", "12.8", archs=archs, ptx=ptx, cudnn="9.17.0")
    reasons = [r for r in rules.check(m, release("2.7.0", v), v, target("570.86.10", cc))
               if r.rule != "cudnn_gpu"]
    assert [r.rule for r in reasons] == rules_broken


# The GPU's own driver floor: the first driver of an architecture is that of the first CUDA release whose
# compiler targets it (Release Notes table): Hopper 9.0 -> CUDA 11.8 GA 520.61.05, Blackwell 12.0 -> CUDA 12.8
# GA 570.26. Minor-version compatibility never lowers it. Windows driver numbers differ from Linux ones, so
# only the branch is compared there.
GPU_DRIVER_table = [
    ("9.0", "520.61.05", "linux_x86_64", None),
    ("9.0", "515.65.01", "linux_x86_64", "520.61.05"),
    ("12.0", "570.26", "linux_x86_64", None),
    ("12.0", "565.57.01", "linux_x86_64", "570.26"),
    ("12.0", "570.12", "win_amd64", None),
    ("12.0", "566.36", "win_amd64", "570.26"),
    ("8.6", "455.23", "linux_x86_64", None),
    ("8.6", "455.22", "linux_x86_64", "455.23"),
    ("6.0", "384.81", "linux_x86_64", None),  # Pascal predates every CUDA floor held: the CUDA rule decides
]


@pytest.mark.parametrize("cc, driver, platform, need", GPU_DRIVER_table)
def test_first_driver_of_the_gpu(cc, driver, platform, need):
    reason = rules.gpu_driver_reason(build(), cc, None, driver, platform)
    if need is None:
        assert reason is None
    else:
        assert (reason.rule, reason.need_driver) == ("gpu_driver", need)
        assert f"(branch R{need.split('.')[0]})" in reason.message


def test_unknown_architecture_is_not_a_pass():
    reason = rules.gpu_driver_reason(build(), "99.0", "a future GPU", "999.1", "linux_x86_64")
    assert reason.rule == "unknown"


def test_blackwell_on_r565_is_refused_even_when_the_cuda_floor_passes():
    # CUDA 12.4 runs on 565 under full support, but 565 does not drive a compute capability 12.0 GPU
    m = build()
    v = variant("cu124", "12.4", archs=["9.0"], ptx=["9.0"], cudnn="9.1.0")
    reasons = rules.check(m, release("2.5.1", v), v, target("565.57.01", "12.0"))
    assert "gpu_driver" in [r.rule for r in reasons]


# cuDNN Support Matrix: cuDNN 9.1.0 supports compute capability 5.0 and newer; 9.17.0 supports 7.5 and newer.
# A version between two rows reads the nearest lower row of its major.
CUDNN_GPU_table = [
    ("9.1.0", "5.0", []),
    ("9.1.0", "3.7", ["cudnn_gpu"]),
    ("9.1.0.70", "3.7", ["cudnn_gpu"]),
    ("9.17.0", "7.5", []),
    ("9.17.0", "7.0", ["cudnn_gpu"]),
    ("9.20.0", "7.0", ["cudnn_gpu"]),  # read from the 9.17.0 row
    ("9.5.1", "7.0", []),              # read from the 9.1.0 row
    ("8.9.7", "7.5", ["unknown"]),     # no cuDNN 8 row: unknown, never a pass
]


@pytest.mark.parametrize("cudnn, cc, rules_broken", CUDNN_GPU_table)
def test_cudnn_supports_the_gpu(cudnn, cc, rules_broken):
    m = build()
    v = variant("cu118", "11.8", archs=["3.5", "3.7", "5.0", "6.0", "7.0", "7.5"], cudnn=cudnn)
    reasons = rules.check(m, release("2.5.1", v), v, target(None, cc))
    assert [r.rule for r in reasons] == rules_broken


CUDNN_ROW = [
    ("9.1.0", "9.1.0"),
    ("9.1.0.70", "9.1.0"),
    ("9.3.0", "9.1.0"),
    ("9.17.0", "9.17.0"),
    ("9.28.0", "9.17.0"),
    ("9.0.0", None),
    ("8.9.7", None),
    ("10.0.0", None),
]


@pytest.mark.parametrize("version, row", CUDNN_ROW)
def test_cudnn_row_lookup(version, row):
    found = rules.cudnn_row(build(), Version(version))
    assert (str(found.version) if found else None) == row


# A build whose cuDNN is unknown passes only where every cuDNN release for its CUDA supports the GPU:
# for CUDA 12.4 that is 9.1.0 (>= 5.0) and 9.17.0 (>= 7.5), so compute capability 7.5 and newer.
UNKNOWN_CUDNN = [
    ("7.5", []),
    ("9.0", []),
    ("7.0", ["unknown"]),
]


@pytest.mark.parametrize("cc, rules_broken", UNKNOWN_CUDNN)
def test_unknown_cudnn_passes_only_where_every_release_agrees(cc, rules_broken):
    m = build()
    v = variant("cu124", "12.4", archs=["7.0", "7.5", "8.0", "9.0"])
    reasons = rules.check(m, release("2.5.1", v), v, target(None, cc))
    assert [r.rule for r in reasons] == rules_broken


# --- the rules' other facts ---------------------------------------------------------------------------------
# PyTorch "Get Started": macOS binaries have no CUDA; a build is published for the platforms its row lists.
# PyPI wheel tags: a release has wheels for the Python versions its row lists. TensorFlow "Tested build
# configurations": builds before 2.14 load the system's CUDA of the major they were built with (2.13: CUDA 11.8).
def _rules_for(v, t, name="torch", python=("3.10", "3.11", "3.12")):
    rel = replace(release("2.5.1", v, name=name), python=list(python))
    return [(r.rule, r.message) for r in rules.check(build(rel), rel, v, t)]


def test_platform_rules():
    cuda = variant("cu124", "12.4", archs=["8.0"], cudnn="9.1.0")
    assert _rules_for(cuda, target(None, platform="macos_arm64")) == [
        ("platform", "torch 2.5.1 cu124 is a CUDA build; CUDA builds are not published for macOS")]
    linux_only = replace(cuda, platforms=["linux_x86_64", "linux_aarch64"])
    assert _rules_for(linux_only, target(None, platform="win_amd64")) == [
        ("platform", "torch 2.5.1 cu124 is not published for win_amd64 (only linux_x86_64, linux_aarch64)")]
    assert _rules_for(linux_only, target(None, platform="linux_aarch64")) == []


def test_python_rules():
    cpu = variant("cpu", None)
    assert _rules_for(cpu, target(None, python="3.13")) == [
        ("python", "torch 2.5.1 cpu supports Python 3.10, 3.11, 3.12, not 3.13")]
    assert _rules_for(cpu, target(None, python="3.13"), python=()) == [
        ("unknown", "the Python versions torch 2.5.1 cpu is published for are not in the matrix, so Python 3.13 "
                    "cannot be checked")]
    assert _rules_for(cpu, target(None)) == []


SYSTEM_CUDA_table = [("12.2", ["system_cuda"]), ("11.8", []), ("11.2", []), ("not-a-version", []), (None, [])]


@pytest.mark.parametrize("toolkit, broken", SYSTEM_CUDA_table)
def test_tensorflow_before_214_needs_the_system_cuda_major(toolkit, broken):
    tf = variant("cuda11", "11.8", archs=["8.0"], cudnn="9.1.0")
    found = _rules_for(tf, target("550.54.15", "8.0", cuda_toolkit=toolkit), name="tensorflow")
    assert [r for r, _ in found] == broken
    if broken:
        assert found[0][1] == ("tensorflow 2.5.1 cuda11 loads the system's CUDA 11.8 libraries; the target's toolkit "
                               "is CUDA 12.2")
    # with nvidia-* wheels (the and-cuda extra) the system toolkit plays no part
    wheels = replace(tf, pip_extra="and-cuda")
    assert _rules_for(wheels, target("550.54.15", "8.0", cuda_toolkit="12.2"), name="tensorflow") == []


def test_a_documented_minimum_driver_of_the_build():
    v = variant("cu121", "12.1", archs=["8.0"], cudnn="9.1.0", min_driver="535.54.03")
    rel = release("2.5.1", v)
    found = rules.check(build(rel), rel, v, target("530.30.02", "8.0"))
    assert [(r.rule, r.need_driver, r.message) for r in found] == [
        ("driver_floor", "535.54.03", "torch 2.5.1 cu121 documents a minimum driver of 535.54.03; the target has "
                                      "530.30.02")]
    assert rules.check(build(rel), rel, v, target("535.54.03", "8.0")) == []


def test_driver_floor_message_names_both_floors():
    v = variant("cu124", "12.4", archs=["8.0"], cudnn="9.1.0")
    rel = release("2.5.1", v)
    (r,) = rules.check(build(rel), rel, v, target("520.61.05", "8.0"))
    assert r.message == ("driver 520.61.05 runs CUDA 11.8 at most; torch 2.5.1 cu124 needs CUDA 12.4, which needs "
                         "driver >= 525.60.13 under minor-version compatibility, and 550.54.14 for full support")
    (old,) = rules.check(build(rel), rel, v, target("390.48"))
    assert old.message.startswith("driver 390.48 is older than every CUDA release in the matrix; ")


# a build whose arch list the matrix lacks: only its toolkit's lowest target is known (CUDA 12.x compiles for
# compute capability 5.0 and newer, Release Notes), so an older GPU is refused and a newer one is unknown
def test_unknown_arch_list_uses_the_toolkit_floor():
    v = variant("cu121", "12.1", cudnn="9.1.0")
    rel = release("2.5.1", v)
    old = rules.check(build(rel), rel, v, target(None, "3.7"))
    assert [(r.rule, r.message) for r in old][0] == (
        "arch", "torch 2.5.1 cu121 is built with CUDA 12.1, which compiles for compute capability 5.0 and newer; "
                "sm_37 (3.7) is older, so the build has no kernel image for it")
    new = rules.check(build(rel), rel, v, target(None, "8.0"))
    assert [(r.rule, r.message) for r in new] == [
        ("unknown", "the GPU architectures torch 2.5.1 cu121 was compiled for are not in the matrix, so whether it "
                    "has a kernel image for sm_80 (compute capability 8.0) is unknown")]


def test_a_cuda_whose_driver_floor_is_unknown():
    v = variant("cu102", "10.2", archs=["8.0"], cudnn="9.1.0")
    rel = release("1.6.0", v)
    found = rules.check(build(rel), rel, v, target("450.80.02"))
    assert [(r.rule, r.message) for r in found] == [
        ("unknown", "torch 1.6.0 cu102 is built with CUDA 10.2, whose minimum driver is not in the matrix, so driver "
                    "450.80.02 cannot be checked against it")]


# --- mut rules -----------------------------------------------------------------------------------------------------

VARIANT_ROW = "the variant's row (constructed)"


RELEASE_ROW = "the release's row (constructed)"


def _v(name: str, cuda: str | None, **kw):
    return replace(variant(name, cuda, **kw), source=VARIANT_ROW)


def _rel(version: str, v, name: str = "torch", python=("3.10", "3.11", "3.12")):
    return replace(release(version, v, name=name), source=RELEASE_ROW, python=list(python))


def _check(v, t, *, version: str = "2.5.1", name: str = "torch", python=("3.10", "3.11", "3.12"), matrix=None):
    rel = _rel(version, v, name, python)
    return rules.check(matrix or build(rel), rel, v, t)


def _gpu(cc: str, name: str | None = None) -> TargetGpu:
    return TargetGpu(cc, name)


def _on(driver: str | None, *gpus: TargetGpu, platform: str = "linux_x86_64", **kw) -> Target:
    return Target(name="t", driver=driver, gpus=gpus, platform=platform, **kw)


# --- platform and Python (PyTorch "Get Started": no CUDA builds for macOS; PyPI wheel tags per release) ------------
CU124_whole = _v("cu124", "12.4", archs=["7.5", "8.0", "8.6", "9.0"], cudnn="9.1.0")


CPU = _v("cpu", None)


PLATFORM_PYTHON = [
    pytest.param(CU124_whole, target(None, platform="macos_arm64"), (), [
        Reason("platform", "torch 2.5.1 cu124 is a CUDA build; CUDA builds are not published for macOS", VARIANT_ROW)],
        id="macos-cuda-build"),
    pytest.param(replace(CU124_whole, platforms=["linux_x86_64"]), target(None, platform="win_amd64"), (), [
        Reason("platform", "torch 2.5.1 cu124 is not published for win_amd64 (only linux_x86_64)", VARIANT_ROW)],
        id="platform-not-published"),
    pytest.param(CPU, target(None, python="3.13"), (), [
        Reason("python", "torch 2.5.1 cpu supports Python 3.10, 3.11, 3.12, not 3.13", RELEASE_ROW)],
        id="python-not-published"),
    pytest.param(CPU, target(None, python="3.13"), None, [
        Reason("unknown", "the Python versions torch 2.5.1 cpu is published for are not in the matrix, so Python "
                          "3.13 cannot be checked", RELEASE_ROW)], id="python-list-unknown"),
    # no Python asked: an unknown Python list is nothing to check
    pytest.param(CPU, target(None), None, [], id="no-python-asked"),
    # a CPU build on a GPU machine: no CUDA rule applies to it
    pytest.param(CPU, target("550.54.15", "8.0"), (), [], id="cpu-build-on-a-gpu"),
]


@pytest.mark.parametrize("v, t, python, reasons", PLATFORM_PYTHON)
def test_platform_and_python_reasons(v, t, python, reasons):
    py = ("3.10", "3.11", "3.12") if python == () else ()
    assert _check(v, t, python=py) == reasons


# --- driver floors (CUDA Toolkit Release Notes, "CUDA Toolkit and Corresponding Driver Versions"; CUDA
# Compatibility guide, minor-version compatibility from CUDA 11 on: 11.x >= 450.80.02 Linux / 452.39 Windows, 12.x
# >= 525.60.13 / 527.41) ----------------------------------------------------------------------------------------
# CUDA 12.0 GA needs >= 525.60.13 (Linux) and 527.41 (Windows): the same numbers as the 12.x minor-version floor.
# CUDA 10.2.89 needs >= 440.33 (Linux) and 441.22 (Windows); CUDA 10 has no minor-version compatibility. Driver
# branch 418 reports CUDA 10.1 (Release Notes: 418.39 is CUDA 10.1's floor).
def _wider():
    m = build()
    extra = [CudaRelease(version=Version("10.2"), source=NOTES, linux_min_driver="440.33", windows_min_driver="441.22"),
             CudaRelease(version=Version("12.0"), source=NOTES, linux_min_driver="525.60.13",
                         windows_min_driver="527.41")]
    branches = [DriverBranch(branch=418, max_cuda=Version("10.1"), source=NOTES)] + list(m.cuda.driver_branches)
    return replace(m, cuda=replace(m.cuda, releases=list(m.cuda.releases) + extra, driver_branches=branches))


WIDER = _wider()


CU102 = _v("cu102", "10.2", archs=["7.5"], cudnn="9.1.0")


CU120 = _v("cu120", "12.0", archs=["7.5"], cudnn="9.1.0")


CU124_T4_whole = _v("cu124", "12.4", archs=["7.5"], cudnn="9.1.0")


FLOORS = [
    pytest.param(CU102, "418.87.00", "linux_x86_64", [Reason(
        "driver_floor", "driver 418.87.00 runs CUDA 10.1 at most; torch 2.5.1 cu102 needs CUDA 10.2, which needs "
                        "driver >= 440.33", NOTES, need_driver="440.33")], id="cuda10-no-minor-compat"),
    pytest.param(CU102, "440.33", "linux_x86_64", [], id="cuda10-at-its-floor"),
    pytest.param(CU102, "441.22", "win_amd64", [], id="cuda10-windows-floor"),
    pytest.param(CU102, "440.64", "win_amd64", [Reason(
        "driver_floor", "driver 440.64 runs CUDA 10.1 at most; torch 2.5.1 cu102 needs CUDA 10.2, which needs "
                        "driver >= 441.22", NOTES, need_driver="441.22")], id="cuda10-windows-below"),
    pytest.param(CU120, "520.61.05", "linux_x86_64", [Reason(
        "driver_floor", "driver 520.61.05 runs CUDA 11.8 at most; torch 2.5.1 cu120 needs CUDA 12.0, which needs "
                        "driver >= 525.60.13 under minor-version compatibility", NOTES, need_driver="525.60.13")],
        id="cuda12.0-floor-is-the-minor-floor"),
    pytest.param(CU124_T4_whole, "520.61.05", "linux_x86_64", [Reason(
        "driver_floor", "driver 520.61.05 runs CUDA 11.8 at most; torch 2.5.1 cu124 needs CUDA 12.4, which needs "
                        "driver >= 525.60.13 under minor-version compatibility, and 550.54.14 for full support", NOTES,
        need_driver="525.60.13")], id="cuda12.4-both-floors"),
    pytest.param(CU124_T4_whole, "522.06", "win_amd64", [Reason(
        "driver_floor", "driver 522.06 runs CUDA 11.8 at most; torch 2.5.1 cu124 needs CUDA 12.4, which needs "
                        "driver >= 527.41 under minor-version compatibility, and 551.61 for full support", NOTES,
        need_driver="527.41")], id="cuda12.4-windows-both-floors"),
]


@pytest.mark.parametrize("v, driver, platform, reasons", FLOORS)
def test_driver_floor_reasons(v, driver, platform, reasons):
    assert _check(v, _on(driver, _gpu("7.5"), platform=platform), matrix=WIDER) == reasons


def test_a_driver_the_rules_cannot_read_is_not_taken_as_new_enough():
    # a saved environment may carry a driver string that is not dotted numbers: nothing shows it meets a floor
    assert rules.full_support(build(), CU124_T4_whole, _on("550.x", _gpu("7.5"))) is False
    reason = rules.gpu_driver_reason(build(), "9.0", "H100", "n/a", "linux_x86_64")
    assert reason == Reason("gpu_driver", "driver n/a does not drive H100 (Hopper, compute capability 9.0): the first "
                                          "driver for it is 520.61.05 (branch R520)", NOTES, need_driver="520.61.05")


def test_documented_minimum_driver_and_unknown_floor_cite_the_variant_row():
    v = _v("cu121", "12.1", archs=["8.0"], cudnn="9.1.0", min_driver="535.54.03")
    assert _check(v, _on("530.30.02", _gpu("8.0"))) == [Reason(
        "driver_floor", "torch 2.5.1 cu121 documents a minimum driver of 535.54.03; the target has 530.30.02",
        VARIANT_ROW, need_driver="535.54.03")]
    # CUDA 10.1 has no row in the small matrix: its floor is unknown, never a pass
    old = _v("cu101", "10.1", archs=["8.0"], cudnn="9.1.0")
    assert _check(old, _on("450.80.02", _gpu("8.0"))) == [Reason(
        "unknown", "torch 2.5.1 cu101 is built with CUDA 10.1, whose minimum driver is not in the matrix, so driver "
                   "450.80.02 cannot be checked against it", VARIANT_ROW)]


# --- the GPU's first driver (Release Notes: Hopper 9.0 first targeted by CUDA 11.8, GA driver 520.61.05;
# Blackwell 12.0 by CUDA 12.8, GA driver 570.26); the GPU is named as the target names it ------------------------
def test_the_gpu_driver_reason_names_the_gpu():
    v = _v("cu124", "12.4", archs=["9.0"], ptx=["9.0"], cudnn="9.1.0")
    reasons = _check(v, _on("565.57.01", _gpu("12.0", "NVIDIA GeForce RTX 5090")))
    assert reasons == [Reason(
        "gpu_driver", "driver 565.57.01 does not drive NVIDIA GeForce RTX 5090 (Blackwell, compute capability 12.0): "
                      "the first driver for it is 570.26 (branch R570)", NOTES, need_driver="570.26")]


GPU_FLOOR = [
    ("9.0", ("520.61.05", "Hopper", NOTES)),
    ("9.0a", ("520.61.05", "Hopper", NOTES)),     # an arch-specific name of the same GPU
    ("12.0", ("570.26", "Blackwell", NOTES)),
    ("6.1", (None, "Pascal", None)),             # older than every CUDA floor held
    ("99.0", (None, None, None)),                # not in the matrix
]


@pytest.mark.parametrize("cc, floor", GPU_FLOOR)
def test_gpu_driver_floor(cc, floor):
    assert rules.gpu_driver_floor(build(), cc) == floor


def test_an_unknown_architecture_names_the_gpu_and_cites_nothing():
    assert rules.gpu_driver_reason(build(), "99.0", None, "999.1", "linux_x86_64") == Reason(
        "unknown", "compute capability 99.0 (sm_990) is not in the matrix, so the driver that drives it is unknown")
    assert rules.gpu_driver_reason(build(), "99.0", "a future GPU", "999.1", "win_amd64") == Reason(
        "unknown", "compute capability 99.0 (a future GPU) is not in the matrix, so the driver that drives it is "
                   "unknown")


# Windows driver numbers (570.65 for CUDA 12.8) differ from Linux ones: only the branch is compared there
WINDOWS_BRANCH = [
    ("570.12", None),
    ("571.96", None),
    ("566.36", "570.26"),
    ("garbage", "570.26"),
]


@pytest.mark.parametrize("driver, need", WINDOWS_BRANCH)
def test_windows_compares_driver_branches(driver, need):
    reason = rules.gpu_driver_reason(build(), "12.0", "RTX 5090", driver, "win_amd64")
    assert (reason.need_driver if reason else None) == need
    if reason:
        assert reason.message == (f"driver {driver} does not drive RTX 5090 (Blackwell, compute capability 12.0): the "
                                  f"first driver for it is 570.26 (branch R570)")


# --- kernel images (CUDA C++ Programming Guide, "Binary Compatibility", "PTX Compatibility"; CUDA Compatibility
# guide: minor-version compatibility runs SASS only) -------------------------------------------------------------
def test_no_kernel_image_names_what_the_build_carries():
    v = _v("cu128", "12.8", archs=["8.0", "9.0"], ptx=["9.0"], cudnn="9.17.0")
    assert _check(v, _on("570.86.10", _gpu("7.5", "Tesla T4"))) == [Reason(
        "arch", "torch 2.5.1 cu128 has no kernel image for Tesla T4 (compute capability 7.5): SASS sm_80 sm_90, "
                "PTX compute_90", VARIANT_ROW)]
    sass_only = _v("cu128", "12.8", archs=["8.0", "9.0"], cudnn="9.17.0")
    assert _check(sass_only, _on("570.86.10", _gpu("7.5"))) == [Reason(
        "arch", "torch 2.5.1 cu128 has no kernel image for sm_75 (compute capability 7.5): SASS sm_80 sm_90, PTX none",
        VARIANT_ROW)]
    ptx_only = _v("cu128", "12.8", ptx=["9.0"], cudnn="9.17.0")
    assert _check(ptx_only, _on("570.86.10", _gpu("8.0"))) == [Reason(
        "arch", "torch 2.5.1 cu128 has no kernel image for sm_80 (compute capability 8.0): SASS none, PTX compute_90",
        VARIANT_ROW)]
    # PTX alone reaches a newer GPU under the full driver
    assert _check(ptx_only, _on("570.86.10", _gpu("12.0"))) == []
    # several PTX targets are listed one after another, as the SASS ones are
    two_ptx = _v("cu128", "12.8", archs=["8.0", "9.0"], ptx=["8.0", "9.0"], cudnn="9.17.0")
    assert _check(two_ptx, _on("570.86.10", _gpu("7.5"))) == [Reason(
        "arch", "torch 2.5.1 cu128 has no kernel image for sm_75 (compute capability 7.5): SASS sm_80 sm_90, "
                "PTX compute_80 compute_90", VARIANT_ROW)]


def test_ptx_under_minor_version_compatibility_names_the_gpu():
    v = _v("cu124", "12.4", archs=["8.0"], ptx=["8.0"], cudnn="9.1.0")
    assert _check(v, _on("535.104.05", _gpu("9.0", "H100"))) == [Reason(
        "arch", "torch 2.5.1 cu124 reaches H100 (compute capability 9.0) only by PTX JIT, which the driver's "
                "minor-version compatibility does not cover", VARIANT_ROW)]
    # below the minor-version floor the driver rule alone is the answer (no second, arch, reason)
    below = _check(v, _on("520.61.05", _gpu("9.0", "H100")))
    assert [r.rule for r in below] == ["driver_floor"]
    # no driver stated: nothing says JIT is unavailable
    assert _check(v, _on(None, _gpu("9.0"))) == []


# a build whose arch list is not in the matrix: CUDA 12.x compiles for compute capability 5.0 and newer (Release
# Notes), the only known fact; a toolkit with no row in the matrix leaves even that unknown
def test_unknown_arch_list_reasons_cite_the_right_row():
    v = _v("cu121", "12.1", cudnn="9.1.0")
    assert _check(v, _on(None, _gpu("3.7", "Tesla K80"))) == [Reason(
        "arch", "torch 2.5.1 cu121 is built with CUDA 12.1, which compiles for compute capability 5.0 and newer; "
                "Tesla K80 (3.7) is older, so the build has no kernel image for it", NOTES),
        # and the cuDNN it bundles (9.1.0: compute capability 5.0 and newer, cuDNN Support Matrix) says the same
        Reason("cudnn_gpu", "cuDNN 9.1.0 bundled with torch 2.5.1 cu121 supports compute capability >= 5.0, not Tesla "
                            "K80 (3.7)", CUDNN_910)]
    assert _check(v, _on(None, _gpu("5.0"))) == [Reason(
        "unknown", "the GPU architectures torch 2.5.1 cu121 was compiled for are not in the matrix, so whether it has "
                   "a kernel image for sm_50 (compute capability 5.0) is unknown", VARIANT_ROW)]
    no_row = _v("cu101", "10.1", cudnn="9.1.0")
    assert _check(no_row, _on(None, _gpu("8.0"))) == [Reason(
        "unknown", "the GPU architectures torch 2.5.1 cu101 was compiled for are not in the matrix, so whether it has "
                   "a kernel image for sm_80 (compute capability 8.0) is unknown", VARIANT_ROW)]


def test_a_toolkit_whose_targets_carry_suffixes_reads_the_plain_capability():
    # CUDA 12.9 lists arch-specific targets ("10.0a", "10.0f") beside plain ones (CUDA 12.9 release notes); the
    # lowest target is still a compute capability
    m = build()
    suffixed = replace(m, cuda=replace(m.cuda, releases=[
        replace(r, compute_capabilities=["9.0a", "10.0f", "10.0", "12.0a"]) if str(r.version) == "12.8" else r
        for r in m.cuda.releases]))
    v = _v("cu128", "12.8", cudnn="9.17.0")
    assert [(r.rule, r.message) for r in _check(v, _on(None, _gpu("8.9")), matrix=suffixed)] == [
        ("arch", "torch 2.5.1 cu128 is built with CUDA 12.8, which compiles for compute capability 9.0 and newer; "
                 "sm_89 (8.9) is older, so the build has no kernel image for it")]
    assert [r.rule for r in _check(v, _on(None, _gpu("9.0")), matrix=suffixed)] == ["unknown"]


# --- Jetson boards (advisory CM-2026-002 of the shipped data: PyTorch's aarch64 CUDA builds carry no Tegra kernels,
# NVIDIA publishes JetPack wheels per board) ---------------------------------------------------------------------
def test_a_jetson_board_is_sent_to_jetpack_wheels_and_other_gpus_are_still_judged():
    jetson = next(a for a in load_matrix().advisories.advisories if a.id == "CM-2026-002")  # the snapshot predates it
    v = _v("cu128", "12.8", archs=["8.0", "9.0"], cudnn="9.17.0", platforms=["linux_aarch64"])
    rel = _rel("2.7.0", v)
    m = replace(build(rel), advisories=replace(build().advisories, advisories=[jetson]))
    reasons = rules.check(m, rel, v, _on(None, _gpu("8.7", "Jetson AGX Orin"), _gpu("7.5"), platform="linux_aarch64"))
    assert reasons == [
        Reason("jetson", "Jetson AGX Orin (compute capability 8.7) is a Jetson board: torch 2.7.0 cu128 from the "
                         "default or PyTorch index has no kernels for it; install NVIDIA's JetPack wheels of torch for "
                         "the board's JetPack release (CM-2026-002)", jetson.source),
        Reason("arch", "torch 2.7.0 cu128 has no kernel image for sm_75 (compute capability 7.5): SASS sm_80 sm_90, "
                       "PTX none", VARIANT_ROW)]
    # the advisory names torch only: a JAX build on the same board is judged by its kernels
    jax = _rel("0.4.30", v, name="jax")
    assert rules.check(m, jax, v, _on(None, _gpu("8.7"), platform="linux_aarch64")) == []


def test_a_jetson_driver_runs_the_cuda_of_its_jetpack_line_and_no_newer():
    """cuda.json's ``jetpack`` line for driver 540.4.0 (JetPack 6.1/6.2, Jetson Linux 36.4, CUDA 12.6: NVIDIA's
    JetPack release notes and an Orin's nvidia-smi, the row's sources): a build of CUDA 12.6, or of a 12.6 patch
    release, runs on it; one of CUDA 12.8 does not, whatever the desktop table says of branch 540."""
    m = load_matrix()
    board = next(b for b in m.cuda.jetpack if b.driver == "540.4.0")
    t = target_jetson(m, "Jetson AGX Orin")

    def floor(cuda: str) -> list[Reason]:
        v = _v(f"cu{cuda.replace('.', '')}", cuda, archs=["8.7"], cudnn="9.17.0", platforms=["linux_aarch64"])
        return [r for r in rules.check(m, _rel("2.7.0", v), v, t) if r.rule == "driver_floor"]

    assert floor("12.6") == [] and floor("12.6.3") == [] and floor("12.4") == []
    assert floor("12.8") == [Reason("driver_floor", "driver 540.4.0 is JetPack 6.1/6.2's (Jetson Linux 36.4), which "
                                                    "runs CUDA 12.6 at most; torch 2.7.0 cu128 needs CUDA 12.8",
                                    board.source)]
    assert [r.message for r in floor("13.0")] == ["driver 540.4.0 is JetPack 6.1/6.2's (Jetson Linux 36.4), which "
                                                  "runs CUDA 12.6 at most; torch 2.7.0 cu130 needs CUDA 13.0"]


# --- SASS: an arch-specific target that does not match does not end the search (Programming Guide, "Binary
# Compatibility": any cubin of the same major and a lower or equal minor runs) -----------------------------------
SASS_ORDER = [
    (["9.0a", "8.0"], "8.6", True),
    (["10.0a", "8.0"], "8.9", True),
    (["10.3f", "12.0"], "12.1", True),
]


@pytest.mark.parametrize("archs, cc, runs", SASS_ORDER)
def test_sass_reads_every_target(archs, cc, runs):
    assert rules.sass_covers(archs, cc) is runs


# --- cuDNN's own GPU floor (cuDNN Support Matrix: 9.1.0 supports compute capability 5.0 and newer, 9.17.0 7.5 and
# newer; both list CUDA 12.x); a cuDNN the matrix does not describe is unknown, never a pass --------------------
CUDNN_REASONS = [
    pytest.param("11.8", "8.9.7", _gpu("7.5"), [Reason(
        "unknown", "the compute capabilities cuDNN 8.9.7 of torch 2.5.1 cu supports are not in the matrix, so sm_75 "
                   "(7.5) cannot be checked against them", VARIANT_ROW)], id="no-cudnn-8-row"),
    pytest.param("12.4", "9.17.0", _gpu("7.0", "Tesla V100"), [Reason(
        "cudnn_gpu", "cuDNN 9.17.0 bundled with torch 2.5.1 cu supports compute capability >= 7.5, not Tesla V100 "
                     "(7.0)", CUDNN_917)], id="cudnn-9.17-drops-volta"),
    pytest.param("12.4", "9.17.0", _gpu("7.5"), [], id="cudnn-9.17-at-its-floor"),
    pytest.param("12.4", None, _gpu("7.0", "Tesla V100"), [Reason(
        "unknown", "the cuDNN version of torch 2.5.1 cu is not in the matrix, and some cuDNN releases for CUDA 12.4 "
                   "do not support Tesla V100 (7.0), so the build cannot be checked", VARIANT_ROW)],
        id="unknown-cudnn-some-release-drops-the-gpu"),
    pytest.param("12.4", None, _gpu("7.5"), [], id="unknown-cudnn-every-release-agrees"),
    # no cuDNN release in the matrix lists CUDA 10.2: nothing is known
    pytest.param("10.2", None, _gpu("9.0"), [Reason(
        "unknown", "the cuDNN version of torch 2.5.1 cu is not in the matrix, and some cuDNN releases for CUDA 10.2 "
                   "do not support sm_90 (9.0), so the build cannot be checked", VARIANT_ROW)],
        id="no-cudnn-release-for-the-cuda"),
]


@pytest.mark.parametrize("cuda, cudnn, gpu, reasons", CUDNN_REASONS)
def test_cudnn_reasons(cuda, cudnn, gpu, reasons):
    v = _v("cu", cuda, archs=["7.0", "7.5", "8.0", "9.0"], cudnn=cudnn)
    assert _check(v, _on(None, gpu)) == reasons


def test_a_cudnn_row_without_compute_capabilities_is_unknown():
    m = build()
    bare = replace(m, cudnn=replace(m.cudnn, releases=[replace(r, compute_capabilities=[]) for r in m.cudnn.releases]))
    v = _v("cu", "12.4", archs=["8.0"], cudnn="9.1.0")
    assert _check(v, _on(None, _gpu("8.0")), matrix=bare) == [Reason(
        "unknown", "the compute capabilities cuDNN 9.1.0 of torch 2.5.1 cu supports are not in the matrix, so sm_80 "
                   "(8.0) cannot be checked against them", VARIANT_ROW)]
    # and a build of unknown cuDNN has no release that says
    unknown = _v("cu", "12.4", archs=["8.0"])
    assert [r.rule for r in _check(unknown, _on(None, _gpu("8.0")), matrix=bare)] == ["unknown"]


# TensorFlow "Tested build configurations": tensorflow 2.13 was built with CUDA 11.8 and, without nvidia-* wheels,
# loads the system's CUDA libraries of that major
def test_a_tensorflow_build_on_another_system_cuda_major_cites_its_row():
    tf = _v("cuda11", "11.8", archs=["8.0"], cudnn="9.1.0")
    assert _check(tf, _on("550.54.15", _gpu("8.0"), cuda_toolkit="12.2"), name="tensorflow", version="2.13.1") == [
        Reason("system_cuda", "tensorflow 2.13.1 cuda11 loads the system's CUDA 11.8 libraries; the target's toolkit "
                              "is CUDA 12.2", VARIANT_ROW)]


# === check: a requirements file read as pip reads it (pip documentation, "Requirements File Format", "--index-url",
# "--find-links"; PEP 440 for versions and local labels) ============================================================
PT = PYTORCH_INDEX_PREFIX  # the PyTorch index, as the product names it


CU118 = variant("cu118", "11.8", archs=["7.5", "8.0", "9.0"], cudnn="9.1.0", index_url=f"{PT}/cu118",
                local_version="+cu118")


CU121 = variant("cu121", "12.1", archs=["7.5", "8.0", "9.0"], cudnn="9.1.0", index_url=f"{PT}/cu121",
                local_version="+cu121")


CU124P = variant("cu124", "12.4", archs=["7.5", "8.0"], ptx=["8.0"], cudnn="9.1.0", index_url=f"{PT}/cu124",
                 local_version="+cu124", pypi_default=True)


CPU_B = variant("cpu", None, index_url=f"{PT}/cpu", local_version="+cpu")


TORCH = replace(release("2.5.1", CU118, CU121, CU124P), companions={"torchvision": "0.20.1"})


FILE_MATRIX = build(TORCH)


def _file(text: str, *targets: Target, mirror: str | None = None, matrix=FILE_MATRIX) -> dict:
    from cudamatrix.solve.checks import check_requirements

    return check_requirements(matrix, list(targets) or [target("550.54.15", "8.0", python="3.11")], None, text,
                              "r.txt", mirror=mirror)


# the index folder's name is the build: a query or fragment is not part of it; only a name that can be a local
# version label (lower-case letters and digits) names a build; a mirror (--mirror) is read like the PyTorch index
INDEX_LINES = [
    (f"--index-url {PT}/cu121?ref=docs\ntorch==2.5.1\n", None, ["torch==2.5.1+cu121"], []),
    (f"--index-url {PT}/cu121#frag\ntorch==2.5.1\n", None, ["torch==2.5.1+cu121"], []),
    (f"--index-url {PT}/Cu121\ntorch==2.5.1\n", None, [],
     [f"torch==2.5.1: which torch build {PT}/Cu121 serves is not known (a mirror of the PyTorch index? pass --mirror "
      f"URL)"]),
    ("--index-url https://mirror.example/whl\ntorch==2.5.1\n", "https://mirror.example", [],
     ["torch==2.5.1: which torch build https://mirror.example/whl serves is not known (a mirror of the PyTorch "
      "index? pass --mirror URL)"]),
    ("--index-url https://mirror.example/torchX/cu121\ntorch==2.5.1\n", "https://mirror.example/torchX/",
     ["torch==2.5.1+cu121"], []),
    ("--index-url https://mirror.example/pt/cu12X\ntorch==2.5.1\n", "https://mirror.example/pt", [],
     ["torch==2.5.1: which torch build https://mirror.example/pt/cu12X serves is not known (a mirror of the PyTorch "
      "index? pass --mirror URL)"]),
    # a --find-links page at the mirror's own address lists every build; pip takes the highest local version
    ("-f https://mirror.example/pt\ntorch==2.5.1\n", "https://mirror.example/pt/", ["torch==2.5.1+cu124"], []),
    ("-f https://mirror.example/torchX\ntorch==2.5.1\n", "https://mirror.example/torchX/", ["torch==2.5.1+cu124"], []),
    ("-f https://mirror.example/torch/stable.html\ntorch==2.5.1\n", "https://mirror.example/torchX/", [],
     ["torch==2.5.1: what https://mirror.example/torch/stable.html (a --find-links page) offers is not known"]),
    # a local version asked for on a find-links page: that build, wherever it stands in the list
    (f"-f {PT}/torch_stable.html\ntorch==2.5.1+cu121\n", None, ["torch==2.5.1+cu121"], []),
    # the default index (PyPI's torch 2.5.1 is the CUDA 12.4 build) and a find-links page: every build is offered,
    # the highest local version wins (PEP 440: cu124 > cu121 > cu118)
    (f"--index-url {PT}/cu118\n-f {PT}/torch_stable.html\ntorch==2.5.1\n", None, ["torch==2.5.1+cu124"], []),
    # === compares the version string as written: PyPI's file is "2.5.1" (no local label)
    ("torch===2.5.1\n", None, ["torch==2.5.1+cu124"], []),
    # two extras, both kept, in order
    (f"--index-url {PT}/cu121\ntorch[optree,opt-einsum]==2.5.1\n", None, ["torch[opt-einsum,optree]==2.5.1+cu121"],
     []),
    # another framework passes as written
    (f"--index-url {PT}/cu121\ntorch==2.5.1\njax==0.4.30\n", None, ["torch==2.5.1+cu121", "jax==0.4.30"], None),
    # a torch line that cannot be read leaves nothing for its companion to pair with
    ("--index-url https://other.example/simple\ntorch==2.5.1\ntorchvision==0.20.1\n", None, [],
     ["torch==2.5.1: which torch build https://other.example/simple serves is not known (a mirror of the PyTorch "
      "index? pass --mirror URL)"]),
]


# PEP 440: a specifier that names a pre-release admits it; === compares the string as written, and a local label
# in a specifier must match the file's. A pre-release row (constructed: a test-channel build) is found when named.
RC = variant("cu124", "12.4", archs=["8.0"], cudnn="9.1.0", index_url=f"{PT}/test/cu124", local_version="+cu124")


RC_MATRIX = build(release("2.6.0rc1", RC), TORCH)


INDEX_LINES += [
    (f"--index-url {PT}/test/cu124\ntorch===2.6.0rc1\n", None, ["torch==2.6.0rc1+cu124"], []),
    (f"-f {PT}/torch_stable.html\ntorch==2.6.0rc1+cu124\n", None, ["torch==2.6.0rc1+cu124"], []),
]


@pytest.mark.parametrize("text, mirror, checked, problems", INDEX_LINES)
def test_index_lines_as_pip_reads_them(text, mirror, checked, problems):
    result = _file(text, mirror=mirror, matrix=RC_MATRIX)
    assert result["checked"] == checked
    if problems is not None:
        assert result["problems"] == problems
        assert result["fits"] is (not problems)


def test_a_mixed_fleet_names_only_the_platforms_without_a_known_default_build():
    targets = [target("550.54.15", "8.0", python="3.11"), target("550.54.15", "8.0", python="3.11",
                                                                   platform="win_amd64")]
    assert _file("torch==2.5.1\n", *targets)["problems"] == [
        "torch==2.5.1: which build of torch 2.5.1 the default index serves for win_amd64 is not in the matrix"]


def test_a_fitting_file_reports_every_field():
    result = _file(f"--index-url {PT}/cu121\ntorch==2.5.1\n")
    assert sorted(result) == ["base_image", "checked", "fits", "nvidia_require_cuda", "problems", "python_in_image",
                              "skipped", "solution", "targets", "unchecked", "unverified", "ways_out"]
    assert (result["fits"], result["problems"], result["unverified"]) == (True, [], [])


def test_a_driver_problem_names_the_machine_and_the_index_that_fits():
    # CUDA 12.4 needs driver >= 525.60.13 under minor-version compatibility (Release Notes): 520 runs none of the
    # 12.x builds; cu118 fits (full support from 520.61.05)
    result = _file(f"--index-url {PT}/cu124\ntorch==2.5.1\n", target("520.61.05", "8.0", python="3.11"))
    assert (result["fits"], result["problems"]) == (False, [
        "driver 520.61.05 runs CUDA 11.8 at most; torch 2.5.1 cu124 needs CUDA 12.4, which needs driver >= 525.60.13 "
        "under minor-version compatibility, and 550.54.14 for full support (blocks: t)"])
    assert result["ways_out"][0] == (f"add the line --extra-index-url {PT}/cu118 to the file and pin "
                                     f"torch==2.5.1+cu118: pip then installs that build, which fits with the file's "
                                     f"other frameworks; other packages keep their index")


def test_the_blocks_clause_names_every_machine():
    old = [dataclasses.replace(target("470.82.01", "8.0"), name=n) for n in ("old-a", "old-b")]
    res = _file(f"--index-url {PT}/cu121\ntorch==2.5.1\n", target("550.54.15", "8.0"), *old)
    assert res["problems"][0].endswith("(it fits every other machine) (blocks: old-a, old-b)"), res["problems"]


def test_the_index_way_out_reads_a_release_with_a_cpu_build_and_bare_variant_names():
    bare = replace(CU118, local_version=None)
    m = build(release("2.5.1", CPU_B, bare, CU124P))
    res = _file(f"--index-url {PT}/cu124\ntorch==2.5.1\n", target("535.104.05", "9.0", python="3.11"), matrix=m)
    assert res["fits"] is False
    # cu118 here carries no local version: no pin tells it from the default index's 2.5.1, so its folder must be
    # the file's only index
    assert [w for w in res["ways_out"] if w.startswith("make")] == [
        f"make --index-url {PT}/cu118 the file's only index line: pip then installs torch 2.5.1 (cu118, whose wheels "
        f"carry no local version), which fits; list any other package's index after it with --extra-index-url"]
    from support.fakes import apply_advice  # applied, the advice makes the file fit

    applied = apply_advice(f"--index-url {PT}/cu124\ntorch==2.5.1\n", res["advice"][0])
    assert _file(applied, target("535.104.05", "9.0", python="3.11"), matrix=m)["fits"] is True


def test_installed_sets_keep_other_frameworks_and_written_local_versions():
    from cudamatrix.models import Environment, Framework
    from cudamatrix.solve.checks import check_requirements

    t = target("550.54.15", "8.0", python="3.11")
    env = Environment(packages={"torch": "2.5.1+cu121", "torchvision": "0.20.1", "jax": "0.4.30"},
                      frameworks=[Framework(name="torch", version="2.5.1", variant="cu121")])
    assert check_requirements(FILE_MATRIX, [t], env, None, None)["checked"] == [
        "torch==2.5.1+cu121", "torchvision==0.20.1+cu121", "jax==0.4.30"]


def test_an_installed_torch_the_matrix_does_not_hold_has_no_index_way_out():
    from cudamatrix.models import Environment, Framework
    from cudamatrix.solve.checks import check_requirements

    env = Environment(packages={"torch": "1.0.0"}, frameworks=[Framework(name="torch", version="1.0.0", variant="cu90")])
    res = check_requirements(FILE_MATRIX, [target("550.54.15", "8.0")], env, None, None)
    # a request the matrix cannot place blocks no machine in particular: no "(blocks: ...)" clause
    assert (res["fits"], res["problems"], res["ways_out"]) == (
        False, ["no torch release in the matrix matches torch==1.0.0+cu90"], [])


# --- NVIDIA_REQUIRE_CUDA and the base image (CUDA Compatibility guide: SASS for every GPU runs on the major's
# minor-version floor, PTX needs the build's own CUDA; the NVIDIA container runtime refuses a constraint the driver
# does not meet; nvidia/cuda tags: Ubuntu 22.04 from CUDA 11.7 on) -------------------------------------------------
def _solution(*fws):
    from cudamatrix.models import FrameworkChoice, Solution

    return Solution(request=["x"], targets=["t"], frameworks=[FrameworkChoice(name=n, version=ver, variant=var, cuda=c)
                                                              for n, ver, var, c in fws])


JAX_CPU = variant("cpu", None)


TF_PTX = variant("and-cuda", "12.4", archs=["8.0"], ptx=["8.0"], pip_extra="and-cuda")


TORCH_SASS = variant("cu121", "12.1", archs=["8.0", "9.0"], cudnn="9.1.0")


REQUIRE_MATRIX = replace(build(release("2.5.1", TORCH_SASS)),
                         jax=replace(build().jax, releases=[release("0.4.30", JAX_CPU, name="jax")]),
                         tensorflow=replace(build().tensorflow, releases=[release("2.16.1", TF_PTX,
                                                                                  name="tensorflow")]))


REQUIRE_SETS = [
    # a CPU build first does not end the reading: torch's SASS build needs only the 12.x floor
    pytest.param([("jax", "0.4.30", "cpu", None), ("torch", "2.5.1", "cu121", "12.1")], "cuda>=12.0", id="cpu-first"),
    # the strictest member decides, whatever the order
    pytest.param([("tensorflow", "2.16.1", "and-cuda", "12.4"), ("torch", "2.5.1", "cu121", "12.1")], "cuda>=12.4",
                 id="ptx-build-first"),
    pytest.param([("torch", "2.5.1", "cu121", "12.1"), ("tensorflow", "2.16.1", "and-cuda", "12.4")], "cuda>=12.4",
                 id="ptx-build-last"),
    # a chosen build the matrix does not hold adds nothing
    pytest.param([("torch", "9.9.9", "cu121", "12.1")], None, id="release-not-in-the-matrix"),
    pytest.param([("torch", "2.5.1", "cu999", "12.1")], None, id="variant-not-in-the-release"),
]


@pytest.mark.parametrize("fws, require", REQUIRE_SETS)
def test_nvidia_require_cuda_of_a_set(fws, require):
    from cudamatrix.solve.checks import nvidia_require_cuda

    # a target without a stated driver caps nothing
    assert nvidia_require_cuda(_solution(*fws), REQUIRE_MATRIX, [target(None, "9.0"), target("570.86.10", "8.0")]) \
        == require


def test_the_first_ubuntu_of_a_cuda_release_boundary():
    from cudamatrix.models import Pin, Solution
    from cudamatrix.solve.checks import base_image

    m = build()
    m = replace(m, cuda=replace(m.cuda, releases=list(m.cuda.releases) + [
        CudaRelease(version=Version("11.7.0"), source=NOTES)]))
    sol = Solution(request=["x"], targets=["t"], packages=[Pin(name="nvidia-cudnn-cu11", version="8.5.0.96")],
                   cuda="11.7")
    # CUDA 11.7.0 is published for Ubuntu 22.04 (the first CUDA release that is); its python3 is 3.10, not 3.8
    assert base_image(sol, m, [target("520.61.05", "8.0", python="3.8")]) == (
        "nvidia/cuda:11.7.0-base-ubuntu22.04",
        "the image has no Python, and Ubuntu 22.04's python3 is 3.10, not the targets' 3.8: install Python 3.8 into "
        "it (for example uv python install 3.8)")


# === lock: the files people use (pip documentation, "Requirements File Format": one --index-url replaces the
# default index, --extra-index-url adds one; uv "Package indexes": an explicit [[tool.uv.index]] with a source) ===
def _torch_only(*extras: str):
    from cudamatrix.models import FrameworkChoice, Pin, Solution

    return Solution(request=["torch"], targets=["t"], matrix_version="2026.1",
                    packages=[Pin(name="torch", version="2.5.1+cu121", extras=list(extras), index_url=f"{PT}/cu121"),
                              Pin(name="torchvision", version="0.20.1+cu121", index_url=f"{PT}/cu121")],
                    frameworks=[FrameworkChoice(name="torch", version="2.5.1", variant="cu121", cuda="12.1",
                                                cudnn="9.1.0.70")])


def _targets(n: int) -> list[Target]:
    return [Target(name=f"m{i}") for i in range(n)]


HEAD = ["# written by cudamatrix lock from matrix 2026.1", "# request: torch",
        "# torch 2.5.1 cu121: CUDA 12.1, cuDNN 9.1.0.70"]


PINS_ONLY = ("# pins only (--pins-only): the frameworks and their nvidia-* wheels, no hashes; pip resolves their other "
             "dependencies when it installs, so this is not a complete lock")


@pytest.mark.parametrize("n, more", [(20, []), (21, ["# ... and 1 more targets"])])
def test_the_header_lists_twenty_targets_then_counts(n, more):
    from cudamatrix.lock.lockfile import requirements_txt

    text = requirements_txt(_torch_only(), _targets(n)).splitlines()
    shown = [f"# target m{i}: no GPU; driver unknown; Python any; linux_x86_64" for i in range(min(n, 20))]
    assert text[:1 + len(shown) + len(more)] == HEAD[:1] + shown + more
    assert text[1 + len(shown) + len(more):] == HEAD[1:] + [PINS_ONLY, f"--index-url {PT}/cu121",
                                                            "torch==2.5.1+cu121", "torchvision==0.20.1+cu121"]


def test_a_pass_through_line_keeps_the_default_index():
    from cudamatrix.lock.lockfile import requirements_txt

    # numpy comes from the default index, so the PyTorch index is an extra one
    assert requirements_txt(_torch_only(), [], ["numpy==1.26.4"]).splitlines() == HEAD + [PINS_ONLY,
        f"--extra-index-url {PT}/cu121", "torch==2.5.1+cu121", "torchvision==0.20.1+cu121", "numpy==1.26.4"]


def test_a_complete_lock_pins_every_file_with_its_hashes():
    """pip's "Hash-checking mode": every requirement pinned with == and its --hash options (a continuation line
    each); the index lines the set was resolved against; the header says what the lock holds and assumed."""
    from cudamatrix.lock.closure import Closure, Locked, LockedFile, LockSpec
    from cudamatrix.lock.lockfile import requirements_txt

    spec = LockSpec("linux_x86_64", "3.12", "2.35", ("glibc 2.35 assumed (this machine's)",))
    files = [Locked("filelock", "3.20.0", [LockedFile("filelock", "3.20.0", "u/f.whl", "a" * 64)]),
             Locked("markupsafe", "3.0.3", [LockedFile("markupsafe", "3.0.3", "u/m312.whl", "c" * 64),
                                            LockedFile("markupsafe", "3.0.3", "u/m311.whl", "b" * 64)]),
             Locked("torch", "2.5.1+cu121", [LockedFile("torch", "2.5.1+cu121", "u/t.whl", "d" * 64)])]
    text = requirements_txt(_torch_only(), [], [], Closure([spec], files, "pip 25.2"), "req.txt").splitlines()
    assert text == HEAD + [
        "# complete: 3 distributions, every file hashed, resolved by pip 25.2 for Python 3.12 on linux_x86_64, "
        "glibc 2.35", "# glibc 2.35 assumed (this machine's)",
        "# install: pip install --require-hashes -r req.txt (or: uv pip sync req.txt)",
        f"--index-url {PT}/cu121",
        "filelock==3.20.0 \\", "    --hash=sha256:" + "a" * 64,
        "markupsafe==3.0.3 \\", "    --hash=sha256:" + "b" * 64 + " \\", "    --hash=sha256:" + "c" * 64,
        "torch==2.5.1+cu121 \\", "    --hash=sha256:" + "d" * 64]


def test_uv_lists_every_extra_and_one_source_per_package():
    from cudamatrix.lock.lockfile import uv_project

    assert uv_project(_torch_only("opt-einsum", "optree"), []).splitlines() == HEAD + [
        "# merge into pyproject.toml", "[project]", "dependencies = [", '    "torch[opt-einsum,optree]==2.5.1",',
        '    "torchvision==0.20.1",', "]", "", "[[tool.uv.index]]", 'name = "pytorch-cu121"', f'url = "{PT}/cu121"',
        "explicit = true", "", "[tool.uv.sources]", 'torch = [{ index = "pytorch-cu121" }]',
        'torchvision = [{ index = "pytorch-cu121" }]']
    assert tomlread.loads(uv_project(_torch_only("opt-einsum", "optree"), []))["project"]["dependencies"] == [
        "torch[opt-einsum,optree]==2.5.1", "torchvision==0.20.1"]


# pip's requirements file syntax: a line whose first non-blank character is "#" is a comment; "-f<dir>" and
# "-i<url>" may be written without a space
READ = [
    ("\t# pinned for the image\ntorch==2.5.1\n", ["torch==2.5.1"], []),
    ("-f.\ntorch==2.5.1\n", ["torch==2.5.1"], ["."]),
]


@pytest.mark.parametrize("text, requirements, find_links", READ)
def test_requirements_file_lines(text, requirements, find_links):
    from cudamatrix.solve.requirements import parse_requirements

    parsed = parse_requirements(text, "r.txt")
    assert ([str(r) for r in parsed.requirements], parsed.find_links) == (requirements, find_links)


# === verify: the loader model's predictions against what the child mapped (/proc/self/maps). Files stand in for
# libraries (not ELF: their SONAME is their file name, as elf.try_read gives none); a prediction agrees when its
# file is mapped, is wrong when another file of that SONAME is, or when nothing of it is although the import went
# through; a first-use load not yet mapped is undecided ==============================================================
def _lib(folder, name: str) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(b"not an ELF file")
    return str(path)


def _report(maps, imported: bool):
    from cudamatrix.models import FrameworkReport

    report = FrameworkReport(framework="torch", status="verified")
    vars(report).update(_maps=maps, _imported=imported)
    return report


def _load(soname: str, path, when: str = "import", rule: str = "DT_RUNPATH of libtorch_cuda.so"):
    from cudamatrix.models import LibraryLoad

    return LibraryLoad(framework="torch", soname=soname, path=path, rule=rule, when=when)


def test_predicted_loads_against_the_mapped_files(tmp_path):
    import os

    wheel = _lib(tmp_path / "wheel", "libcudnn.so.9")
    system = _lib(tmp_path / "system", "libcudnn.so.9")
    blas = _lib(tmp_path / "wheel", "libcublas.so.12")
    (tmp_path / "link").mkdir()
    os.symlink(blas, tmp_path / "link" / "libcublas.so.12")
    mapped_blas = str(tmp_path / "link" / "libcublas.so.12")  # the maps name a symlink; the model a real path
    nccl = _lib(tmp_path / "wheel", "libnccl.so.2")
    report = _report([system, mapped_blas], imported=True)
    from cudamatrix.verify.run import compare_maps

    compare_maps(report, [
        _load("libcurand.so.10", None),                         # not found: the load itself fails, nothing to compare
        _load("libcudnn.so.9", wheel),                          # the system copy is mapped instead
        _load("libcublas.so.12", blas, rule="LD_LIBRARY_PATH"),  # mapped, through a symlink
        _load("libnccl.so.2", nccl),                            # nothing mapped although the import went through
        _load("libcufft.so.11", str(tmp_path / "x.so"), when="first use"),  # not used yet
    ])
    assert report.loads_compared == [
        {"soname": "libcudnn.so.9", "predicted": wheel, "rule": "DT_RUNPATH of libtorch_cuda.so", "when": "import",
         "mapped": system, "agree": False},
        {"soname": "libcublas.so.12", "predicted": blas, "rule": "LD_LIBRARY_PATH", "when": "import",
         "mapped": mapped_blas, "agree": True},
        {"soname": "libnccl.so.2", "predicted": nccl, "rule": "DT_RUNPATH of libtorch_cuda.so", "when": "import",
         "mapped": None, "agree": False},
        {"soname": "libcufft.so.11", "predicted": str(tmp_path / "x.so"), "rule": "DT_RUNPATH of libtorch_cuda.so",
         "when": "first use", "mapped": None, "agree": None},
    ]
    assert report.model_errors == [
        {"soname": "libcudnn.so.9", "predicted": wheel, "mapped": system, "rule": "DT_RUNPATH of libtorch_cuda.so"},
        {"soname": "libnccl.so.2", "predicted": nccl, "mapped": None, "rule": "DT_RUNPATH of libtorch_cuda.so"}]


def test_an_import_that_stopped_early_decides_nothing_and_no_maps_compare_nothing(tmp_path):
    from cudamatrix.verify.run import compare_maps

    nccl = _lib(tmp_path, "libnccl.so.2")
    stopped = _report([], imported=False)
    compare_maps(stopped, [_load("libnccl.so.2", nccl)])
    assert (stopped.loads_compared, stopped.model_errors) == (
        [{"soname": "libnccl.so.2", "predicted": nccl, "rule": "DT_RUNPATH of libtorch_cuda.so", "when": "import",
          "mapped": None, "agree": None}], [])
    unread = _report(None, imported=True)
    compare_maps(unread, [_load("libnccl.so.2", nccl)])
    assert (unread.loads_compared, unread.model_errors) == ([], [])
    # a report the child never got to write (a crash, a timeout) carries no maps at all
    from cudamatrix.models import FrameworkReport

    crashed = FrameworkReport(framework="torch", status="failed")
    compare_maps(crashed, [_load("libnccl.so.2", nccl)])
    assert (crashed.loads_compared, crashed.model_errors) == ([], [])


# the child's own lines: what it mapped and whether the import went through reach the comparison; a run without the
# CPU check says so; only a failed result is classified by its cause (CUDA Runtime API error strings)
def test_the_child_result_carries_its_maps_and_the_import_stage(tmp_path):
    import os

    from support.fakes import interpreter

    from cudamatrix.verify.run import check

    maps = ["/x/libcudnn.so.9"]
    python = interpreter(tmp_path, [{"stage": "imported"}, {"stage": "result", "status": "verified", "maps": maps}])
    report = check(python, "torch", gpu_expected=True, timeout=60, env=dict(os.environ))
    assert (report.status, report.cpu_checked, vars(report)["_maps"], vars(report)["_imported"]) == (
        "verified", False, maps, True)
    cause = "CUDA error: no kernel image is available for execution on the device"
    python = interpreter(tmp_path, [{"stage": "result", "status": "not_possible", "cause": cause}])
    report = check(python, "torch", gpu_expected=False, timeout=60, env=dict(os.environ))
    assert (report.status, report.finding_code, vars(report)["_imported"]) == ("not_possible", None, False)


# the cheap GPU probe: the NVIDIA kernel module's version file and the first device node (NVIDIA driver README,
# "Installed Components": /proc/driver/nvidia/version, /dev/nvidia0). This machine has neither, so they are faked.
PROBE = [
    ({"/proc/driver/nvidia/version", "/dev/nvidia0"}, None, True),
    ({"/proc/driver/nvidia/version"}, None, False),     # module loaded, no device node (container without devices)
    ({"/dev/nvidia0"}, None, False),
    (set(), None, False),
    # a detected environment whose driver status is unknown defers to the probe
    ({"/proc/driver/nvidia/version", "/dev/nvidia0"}, "unknown", True),
    ({"/proc/driver/nvidia/version", "/dev/nvidia0"}, "absent", False),
]


@pytest.mark.parametrize("present, status, gpu", PROBE)
def test_the_gpu_probe(monkeypatch, present, status, gpu):
    from cudamatrix.models import Driver, Environment
    from cudamatrix.verify import run

    monkeypatch.setattr(run.os.path, "exists", lambda path: path in present)
    env = Environment(driver=Driver(status=status)) if status else None
    assert run.gpu_present(env) is gpu


# --- pins: which declared requirements apply on a target --------------------------------------------------
# torch's CUDA wheels declare their nvidia-* requirements with the marker
# 'platform_system == "Linux" and platform_machine == "x86_64"' (torch 2.5.1's METADATA, data/torch.json);
# TensorFlow's declare them behind its extra: 'extra == "and-cuda"' (tensorflow 2.18.0's METADATA); JAX's
# CUDA plugin behind 'extra == "with-cuda"' (jax-cuda12-plugin's METADATA).
TORCH_PIN = 'nvidia-cudnn-cu12==9.1.0.70; platform_system == "Linux" and platform_machine == "x86_64"'


TF_PIN = 'nvidia-cudnn-cu12==9.3.0.75; extra == "and-cuda"'


JAX_PIN = 'nvidia-cudnn-cu12>=9.1,<10.0; extra == "with-cuda"'


OTHER_EXTRA = 'nvidia-nccl-cu12==2.21.5; extra == "benchmarks"'


@pytest.mark.parametrize(("pip_extra", "platform", "wanted"), [
    (None, "linux_x86_64", [TORCH_PIN, JAX_PIN]),  # no extra asked: only unmarked-extra pins and with-cuda
    (None, "linux_aarch64", [JAX_PIN]),  # torch's x86_64-only pins do not apply on aarch64
    (None, "win_amd64", [JAX_PIN]),
    ("and-cuda", "linux_x86_64", [TORCH_PIN, TF_PIN, JAX_PIN]),  # the variant's extra, and the CUDA extras
    ("cuda12", "linux_x86_64", [TORCH_PIN, TF_PIN, JAX_PIN]),
])
def test_pins_for_evaluates_markers_on_the_target(pip_extra, platform, wanted):
    from support.smallmatrix import target, variant

    from cudamatrix.solve.pins import pins_for

    v = variant("cu121", "12.1", nvidia_pins=[TORCH_PIN, TF_PIN, JAX_PIN, OTHER_EXTRA], pip_extra=pip_extra)
    got = pins_for(v, target("550.54.15", "8.0", platform=platform))
    assert [str(r) for r in got] == [str(Requirement(w)) for w in wanted]


@pytest.mark.parametrize(("x", "y", "meet"), [
    ("a==1.0", "a==1.0", True), ("a==1.0", "a==2.0", False), ("a>=2", "a==1.0", False), ("a==1.0", "a>=2", False),
    ("a==1.0", "a<2", True), ("a<2", "a==1.0", True), ("a===1.0", "a==1.0", True), ("a===1.0", "a==2.0", False),
    ("a==1.*", "a==2.*", True),  # wildcards are ranges: assumed to meet
    ("a>=1,<2", "a>=3", True),  # two ranges: assumed to meet
    ("a==1.0,>=2", "a", False),  # an exact pin its own range refuses
    ("a==2.0rc1", "a>=2.0rc1", True),  # a pre-release pinned exactly counts
    # PEP 440: a specifier set that names a pre-release admits pre-releases, so pip installs 2.0rc1 for both
    ("a==2.0rc1", "a>=1", True), ("a>=1", "a==2.0rc1", True),
    ("a===1.0", "a>=2", False), ("a>=2", "a===1.0", False),  # arbitrary equality is an exact pin too (PEP 440)
])
def test_specs_meet(x, y, meet):
    from cudamatrix.solve.pins import _specs_meet

    assert _specs_meet(Requirement(x), Requirement(y)) is meet


@pytest.mark.parametrize(("name", "key"), [
    ("nvidia-cu12", "nvidia-cu12"),  # two parts: nothing to drop
    ("nvidia-cudnn-cu", "nvidia-cudnn-cu"),  # no digits after cu
    ("nvidia-cudnn-cuda12", "nvidia-cudnn-cuda12"),
    ("nvidia-cudnn-xcu12", "nvidia-cudnn-xcu12"),
    ("nvidia-cudnn-cux12", "nvidia-cudnn-cux12"),  # "cu" then a letter: not a CUDA-major suffix
    ("nvidia-cublas-cu9", "nvidia-cublas"),  # a one-digit CUDA major is a CUDA-major suffix too
    ("nvidia.cufft_cu11", "nvidia-cufft"),
])
def test_library_key_edges(name, key):
    from cudamatrix.solve.pins import library_key

    assert library_key(name) == key


# a target's platform comes from the probe (sysconfig.get_platform(), "linux-ppc64le" -> "linux_ppc64le") and can lie
# outside the table of known platforms; PEP 508's marker variables are strings whatever the platform
@pytest.mark.parametrize("platform", ["linux_x86_64", "linux_aarch64", "win_amd64", "macos_arm64", "macos_x86_64",
                                      "linux_ppc64le", "macosx_14_0_arm64"])
def test_marker_env_values_are_strings(platform):
    from support.smallmatrix import target, variant

    from cudamatrix.solve.pins import marker_env, pins_for

    env = marker_env(target(None, platform=platform), None)
    assert all(isinstance(value, str) for value in env.values())
    v = variant("cu121", "12.1", nvidia_pins=[TORCH_PIN])
    pins_for(v, target("550.54.15", "8.0", platform=platform))  # evaluates the marker without an error


# CUDA Toolkit Release Notes, Table 3: CUDA 10.2 needs driver >= 440.33 (Linux), >= 441.22 (Windows); minor-version
# compatibility begins with CUDA 11 (CUDA Compatibility guide), so CUDA 10.2 has no minor-version floor at all
@pytest.mark.parametrize(("platform", "full"), [("linux_x86_64", "440.33"), ("win_amd64", "441.22")])
def test_a_cuda_major_without_minor_version_compatibility_has_no_minor_floor(platform, full):
    from cudamatrix.matrix.sources import records_of

    matrix = load_matrix()
    floor, minor, source = rules.driver_floors(matrix, Version("10.2"), platform)
    assert (floor, minor) == (full, None)
    assert [r.url for r in records_of(source)] == ["https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html"]


# --- requirements files as pip reads them ------------------------------------------------------------------
# pip's "Requirements File Format": "A line ending in an unescaped \ is treated as a line continuation and the
# newline following it is effectively ignored"; "Whitespace followed by a # causes the # and the remainder of
# the line to be treated as a comment"; "Comments are stripped after line continuations are processed."
PIP_LINES = [
    ("torch==2.5.1 \\\n  --hash=sha256:abc\n", [(1, "torch==2.5.1   --hash=sha256:abc")]),
    ("torch==2.5.1 \\ \nnumpy\n", [(1, "torch==2.5.1 \\"), (2, "numpy")]),  # blanks after the backslash: no join
    # pip-compile's layout: the "# via" line ends the continued requirement
    ("numpy==1.18.1 \\\n    --hash=sha256:aa \\\n    # via scipy\nscipy==1.4.1\n",
     [(1, "numpy==1.18.1     --hash=sha256:aa"), (4, "scipy==1.4.1")]),
    ("torch # note \\\nnumpy\n", [(1, "torch")]),  # joined first, then the comment takes the rest
    ("# comment \\\ntorch\n", [(2, "torch")]),  # a comment line never continues
    ("torch\t# tab comment\n", [(1, "torch")]),
    ("torch\\\n==2.5.1\n", [(1, "torch==2.5.1")]),
    ("a \\\n", [(1, "a")]),
    ("a \\\nb \\\n", [(1, "a b")]),  # the file ends inside a continued line
    ("torch # note \\\n", [(1, "torch")]),
    ("torch==2.5.1\\\n# via x\n", [(1, "torch==2.5.1")]),  # a comment line ends a continued one
    ("XlsxWriter==3.0.3 \\\n  --hash=sha256:aa\n", [(1, "XlsxWriter==3.0.3   --hash=sha256:aa")]),
]


@pytest.mark.parametrize(("text", "lines"), PIP_LINES)
def test_logical_lines_as_pip_reads_them(text, lines):
    from cudamatrix.solve.requirements import _logical_lines

    assert [(n, line) for n, line in _logical_lines(text) if line] == lines


@pytest.mark.slow
@pytest.mark.parametrize(("text", "lines"), PIP_LINES)
def test_logical_lines_agree_with_the_installed_pip(text, lines):
    """The same table through the pip installed here (its own reader, not a copy of it)."""
    try:
        from pip._internal.req.req_file import preprocess
    except ImportError as exc:  # pip's internal layout moved: the table above still holds pip's documented rules
        pytest.skip(f"pip's requirements-file reader is not importable here ({exc})")
    assert [(n, line) for n, line in preprocess(text) if line] == lines


# platform_machine as Python's platform.machine() reports it on each system (PEP 508 defines the marker as
# platform.machine()): "ppc64le" on little-endian POWER Linux, "s390x" on IBM Z, "ARM64" on Windows on Arm,
# "arm64" on Apple silicon; a tag naming no known CPU keeps the x86_64 default
@pytest.mark.parametrize(("platform", "machine"), [
    ("linux_ppc64le", "ppc64le"), ("linux_s390x", "s390x"), ("win_arm64", "ARM64"),
    ("macosx_14_0_arm64", "arm64"), ("macosx_10_9_x86_64", "x86_64"), ("linux_mystery", "x86_64"),
])
def test_marker_machine_of_platforms_outside_the_table(platform, machine):
    from cudamatrix.solve.pins import marker_env
    from cudamatrix.solve.target import Target

    assert marker_env(Target(name="t", platform=platform), None)["platform_machine"] == machine


def test_torch_x86_64_pins_do_not_apply_on_power():
    from cudamatrix.solve.pins import pins_for

    v = variant("cu121", "12.1", nvidia_pins=[TORCH_PIN])
    assert pins_for(v, target("550.54.15", "8.0", platform="linux_ppc64le")) == []
    assert [str(r) for r in pins_for(v, target("550.54.15", "8.0", platform="linux_x86_64"))] == \
        [str(Requirement(TORCH_PIN))]


# --- jetson --------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def matrix_jetson():
    return load_matrix()


def target_jetson(m, gpu: str, driver: str = "540.4.0", platform: str = "linux_aarch64") -> Target:
    t = from_flags(m, driver=driver, gpus=[gpu], python="3.12", platform=platform, cuda_toolkit=None,
                   base=Target(name="t"))
    return dataclasses.replace(t, name="t")


JETSONS = [  # (name as the matrix_jetson knows it, compute capability the advisory lists)
    ("Jetson AGX Orin", "8.7"),
    ("Jetson Orin Nano", "8.7"),
    ("Jetson AGX Xavier", "7.2"),
    ("Jetson TX2", "6.2"),
    ("Jetson Nano", "5.3"),
]


@pytest.mark.parametrize("gpu,cc", JETSONS)
def test_every_torch_cuda_build_is_rejected_on_a_jetson(matrix_jetson, gpu, cc):
    t = target_jetson(matrix_jetson, gpu)
    assert t.gpus[0].compute_capability == cc
    checked = 0
    for rel in matrix_jetson.frameworks("torch"):
        for var in rel.variants:
            if var.cuda is None:
                continue
            reasons = rules.check(matrix_jetson, rel, var, t)
            jetson = [r for r in reasons if r.rule == "jetson"]
            assert jetson, f"torch {rel.version} {var.name} was not rejected on {gpu}"
            assert "JetPack" in jetson[0].message and cc in jetson[0].message
            assert "CM-2026-002" in jetson[0].message
            checked += 1
    assert checked > 20


@pytest.mark.slow
@pytest.mark.parametrize("gpu,cc", JETSONS)
def test_solve_on_a_jetson_has_no_answer_and_names_jetpack(matrix_jetson, gpu, cc):
    with pytest.raises(NoSolution) as exc:
        solve([target_jetson(matrix_jetson, gpu)], parse_request(["torch"]), matrix_jetson)
    assert exc.value.causes[0].rule == "jetson"  # said first: no other change makes a build fit
    kinds = [w.kind for w in exc.value.ways_out]
    assert "jetpack" in kinds
    jet = next(w for w in exc.value.ways_out if w.kind == "jetpack")
    assert "JetPack" in jet.message
    # no way out sends the board to a driver upgrade or an older PyTorch-index build
    assert "upgrade_driver" not in kinds and "pin_older" not in kinds


def test_before_the_rule_an_orin_was_answered_with_a_pytorch_index_build(matrix_jetson):
    # the case the rule exists for: sm_80 SASS "covers" 8.7 by the same-major rule, which is wrong on Tegra
    t = target_jetson(matrix_jetson, "Jetson AGX Orin")
    rel = next(r for r in matrix_jetson.frameworks("torch") if any(v.cuda and rules.sass_covers(v.archs, "8.7")
                                                            and "linux_aarch64" in (v.platforms or r.platforms)
                                                            for v in r.variants))
    var = next(v for v in rel.variants if v.cuda and rules.sass_covers(v.archs, "8.7"))
    assert [r.rule for r in rules.check(matrix_jetson, rel, var, t) if r.rule in ("arch", "jetson")] == ["jetson"]


@pytest.mark.parametrize("gpu", ["NVIDIA GH200", "NVIDIA A100-SXM4-80GB"])
def test_server_gpus_are_not_jetsons(matrix_jetson, gpu):
    # aarch64 server boards (SBSA) and x86 GPUs keep their answers
    t = target_jetson(matrix_jetson, gpu, driver="580.65.06",
               platform="linux_aarch64" if "GH200" in gpu else "linux_x86_64")
    sol = solve([t], parse_request(["torch"]), matrix_jetson)
    assert sol.frameworks[0].name == "torch" and sol.cuda is not None
    assert not any("jetson" in r.rules for r in sol.rejected)


def test_jax_and_tensorflow_are_not_touched_by_the_torch_advisory(matrix_jetson):
    # CM-2026-002 affects torch only; the rule reads the advisory per family
    t = target_jetson(matrix_jetson, "Jetson AGX Orin")
    for family in ("tensorflow", "jax"):
        for rel in matrix_jetson.frameworks(family):
            for var in rel.variants:
                assert not [r for r in rules.check(matrix_jetson, rel, var, t) if r.rule == "jetson"]


def test_no_torch_build_in_the_matrix_carries_a_tegra_architecture(matrix_jetson):
    # the fact the rule rests on, as the matrix_jetson holds it: no recorded torch build ships SASS for a Jetson's
    # compute capability, so the same-major rule would be the only thing letting sm_80 "cover" an Orin
    tegra = {"5.3", "6.2", "7.2", "8.7"}
    for rel in matrix_jetson.frameworks("torch"):
        for var in rel.variants:
            assert not tegra & {a.rstrip("af") for a in var.archs}, (rel.version, var.name, var.archs)
