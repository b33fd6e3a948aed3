"""Every answer of the hard rules, whole: the rule, the sentence, the matrix row it cites and the driver to install.

Tables in pypa/packaging's style, on the small matrix of ``smallmatrix`` (its CUDA, cuDNN and architecture rows
are copied from the NVIDIA documents named there). The framework rows are constructed inputs; each carries its own
source string (``VARIANT_ROW``, ``RELEASE_ROW``) so a reason that cites the wrong row is seen. The expected verdict
of each case comes from the document cited above its table; the sentence is the product's promised wording (every
message a whole sentence with no empty slot).
"""
from __future__ import annotations

import dataclasses

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from cudamatrix.matrix.data import CudaRelease, DriverBranch, load_matrix
from cudamatrix.solve import rules
from cudamatrix.solve.indexes import PYTORCH_INDEX_PREFIX
from cudamatrix.solve.rules import Reason
from cudamatrix.solve.target import Target, TargetGpu
from smallmatrix import CUDNN_910, CUDNN_917, NOTES, build, release, replace, target, variant

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
CU124 = _v("cu124", "12.4", archs=["7.5", "8.0", "8.6", "9.0"], cudnn="9.1.0")
CPU = _v("cpu", None)
PLATFORM_PYTHON = [
    pytest.param(CU124, target(None, platform="macos_arm64"), (), [
        Reason("platform", "torch 2.5.1 cu124 is a CUDA build; CUDA builds are not published for macOS", VARIANT_ROW)],
        id="macos-cuda-build"),
    pytest.param(replace(CU124, platforms=["linux_x86_64"]), target(None, platform="win_amd64"), (), [
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
CU124_T4 = _v("cu124", "12.4", archs=["7.5"], cudnn="9.1.0")
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
    pytest.param(CU124_T4, "520.61.05", "linux_x86_64", [Reason(
        "driver_floor", "driver 520.61.05 runs CUDA 11.8 at most; torch 2.5.1 cu124 needs CUDA 12.4, which needs "
                        "driver >= 525.60.13 under minor-version compatibility, and 550.54.14 for full support", NOTES,
        need_driver="525.60.13")], id="cuda12.4-both-floors"),
    pytest.param(CU124_T4, "522.06", "win_amd64", [Reason(
        "driver_floor", "driver 522.06 runs CUDA 11.8 at most; torch 2.5.1 cu124 needs CUDA 12.4, which needs "
                        "driver >= 527.41 under minor-version compatibility, and 551.61 for full support", NOTES,
        need_driver="527.41")], id="cuda12.4-windows-both-floors"),
]


@pytest.mark.parametrize("v, driver, platform, reasons", FLOORS)
def test_driver_floor_reasons(v, driver, platform, reasons):
    assert _check(v, _on(driver, _gpu("7.5"), platform=platform), matrix=WIDER) == reasons


def test_a_driver_the_rules_cannot_read_is_not_taken_as_new_enough():
    # a saved environment may carry a driver string that is not dotted numbers: nothing shows it meets a floor
    assert rules.full_support(build(), CU124_T4, _on("550.x", _gpu("7.5"))) is False
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
    from test_table_check import apply_advice  # applied, the advice makes the file fit

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
    from cudamatrix.solve.lockfile import requirements_txt

    text = requirements_txt(_torch_only(), _targets(n)).splitlines()
    shown = [f"# target m{i}: no GPU; driver unknown; Python any; linux_x86_64" for i in range(min(n, 20))]
    assert text[:1 + len(shown) + len(more)] == HEAD[:1] + shown + more
    assert text[1 + len(shown) + len(more):] == HEAD[1:] + [PINS_ONLY, f"--index-url {PT}/cu121",
                                                            "torch==2.5.1+cu121", "torchvision==0.20.1+cu121"]


def test_a_pass_through_line_keeps_the_default_index():
    from cudamatrix.solve.lockfile import requirements_txt

    # numpy comes from the default index, so the PyTorch index is an extra one
    assert requirements_txt(_torch_only(), [], ["numpy==1.26.4"]).splitlines() == HEAD + [PINS_ONLY,
        f"--extra-index-url {PT}/cu121", "torch==2.5.1+cu121", "torchvision==0.20.1+cu121", "numpy==1.26.4"]


def test_a_complete_lock_pins_every_file_with_its_hashes():
    """pip's "Hash-checking mode": every requirement pinned with == and its --hash options (a continuation line
    each); the index lines the set was resolved against; the header says what the lock holds and assumed."""
    from cudamatrix.solve.closure import Closure, Locked, LockedFile, LockSpec
    from cudamatrix.solve.lockfile import requirements_txt

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
    from cudamatrix.solve.lockfile import uv_project

    assert uv_project(_torch_only("opt-einsum", "optree"), []).splitlines() == HEAD + [
        "# merge into pyproject.toml", "[project]", "dependencies = [", '    "torch[opt-einsum,optree]==2.5.1",',
        '    "torchvision==0.20.1",', "]", "", "[[tool.uv.index]]", 'name = "pytorch-cu121"', f'url = "{PT}/cu121"',
        "explicit = true", "", "[tool.uv.sources]", 'torch = [{ index = "pytorch-cu121" }]',
        'torchvision = [{ index = "pytorch-cu121" }]']


# pip's requirements file syntax: a line whose first non-blank character is "#" is a comment; "-f<dir>" and
# "-i<url>" may be written without a space
READ = [
    ("\t# pinned for the image\ntorch==2.5.1\n", ["torch==2.5.1"], []),
    ("-f.\ntorch==2.5.1\n", ["torch==2.5.1"], ["."]),
]


@pytest.mark.parametrize("text, requirements, find_links", READ)
def test_requirements_file_lines(text, requirements, find_links):
    from cudamatrix.solve.lockfile import parse_requirements

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

    from cudamatrix.verify.run import check
    from test_table_verify import interpreter

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
    from cudamatrix.solve.pins import pins_for
    from smallmatrix import target, variant

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
    from cudamatrix.solve.pins import marker_env, pins_for
    from smallmatrix import target, variant

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
    from cudamatrix.solve.lockfile import _logical_lines

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
