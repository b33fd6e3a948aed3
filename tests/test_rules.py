"""Table tests of the hard rules, in the parametrised style of pypa/packaging's tests.

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
"""
from __future__ import annotations

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from cudamatrix.matrix.data import FrameworkRelease, Variant
from cudamatrix.schema import cc_key, normalize_cc
from cudamatrix.solve import rules
from cudamatrix.solve.target import Target, TargetGpu
from snapshot import snapshot_matrix

# --- compute capabilities ------------------------------------------------------------------------


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


# --- SASS and PTX coverage -----------------------------------------------------------------------

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


# --- driver floors and minor-version compatibility -------------------------------------------------

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


# --- pin conflicts (PEP 440 specifiers) --------------------------------------------------------------

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
