"""Rule tables: inputs and the answer the cited NVIDIA document gives, side by side (pypa/packaging's style).

The matrix is the small one of ``smallmatrix`` (facts copied from the documents), so the tables do not move when
the shipped data changes. Each expectation comes from the document cited above its table, not from the code.
"""
from __future__ import annotations

import pytest
from packaging.version import Version

from cudamatrix.solve import rules
from smallmatrix import build, release, replace, target, variant

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
DRIVER_FLOOR = [
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


@pytest.mark.parametrize("driver, platform, need", DRIVER_FLOOR)
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
def test_full_support(cuda, driver, platform, full):
    m = build()
    assert rules.full_support(m, variant("v", cuda), target(driver, platform=platform)) is full


# CUDA Compatibility guide, "Minor Version Compatibility" limitations: an application running on an older
# driver of its major needs SASS for the GPU; PTX is not JIT-compiled there. With the full driver, PTX for an
# older compute capability is JIT-compiled for the GPU (PTX Compatibility).
PTX_ONLY = variant("cu124", "12.4", archs=["8.0", "8.6"], ptx=["8.6"], cudnn="9.1.0")
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
GPU_DRIVER = [
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


@pytest.mark.parametrize("cc, driver, platform, need", GPU_DRIVER)
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
CUDNN_GPU = [
    ("9.1.0", "5.0", []),
    ("9.1.0", "3.7", ["cudnn_gpu"]),
    ("9.1.0.70", "3.7", ["cudnn_gpu"]),
    ("9.17.0", "7.5", []),
    ("9.17.0", "7.0", ["cudnn_gpu"]),
    ("9.20.0", "7.0", ["cudnn_gpu"]),  # read from the 9.17.0 row
    ("9.5.1", "7.0", []),              # read from the 9.1.0 row
    ("8.9.7", "7.5", ["unknown"]),     # no cuDNN 8 row: unknown, never a pass
]


@pytest.mark.parametrize("cudnn, cc, rules_broken", CUDNN_GPU)
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


SYSTEM_CUDA = [("12.2", ["system_cuda"]), ("11.8", []), ("11.2", []), ("not-a-version", []), (None, [])]


@pytest.mark.parametrize("toolkit, broken", SYSTEM_CUDA)
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
