"""The solver's rule registry (``cudamatrix.solve.rules``): one table per rule function, each rule asked on its own.

A case is (the build, the target) -> the Reasons the rule gives, as (rule id, sentence). The matrix is the small one
of ``smallmatrix`` (its CUDA, cuDNN and architecture rows copied from the NVIDIA documents named there); the
expected answer of each table comes from the document cited above it. ``check`` itself is the loop over the
registries: the last tests pin their order and the decisive Jetson rule.
"""
from __future__ import annotations

import pytest

from cudamatrix.matrix.data import Advisory, AdvisoryFile
from cudamatrix.solve import rules
from cudamatrix.solve.target import Target, TargetGpu
from smallmatrix import CUDNN_917, build, release, replace, target, variant

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


# --- check: the loop over the registries ------------------------------------------------------------------------

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
