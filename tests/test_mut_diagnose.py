"""Doctor's findings, whole: code, severity, title, evidence, fix and pip command of every finding, for
environments built here on the small matrix of ``smallmatrix``.

The product promises each finding is a whole sentence with its evidence and a fix; these tables pin all of it,
so a changed word, a dropped evidence line or a wrong severity is seen. Facts (the expectations come from them):

- CUDA Toolkit Release Notes, "CUDA Toolkit and Corresponding Driver Versions": CUDA 12.1 GA needs Linux driver
  >= 530.30.02, CUDA 12.8 GA >= 570.26, CUDA 11.8 >= 520.61.05; any CUDA 12.x runs on >= 525.60.13 under
  minor-version compatibility. The first driver for an architecture is the driver of the first CUDA release
  that compiles for it: Blackwell (compute capability 12.0, GeForce RTX 5090) arrived with CUDA 12.8, so 570.26.
- Data-center "CUDA Toolkit, Driver, and Architecture Matrix": Kepler (3.5, 3.7; Tesla K80 is 3.7) support ended
  with the R470 driver branch.
- cuDNN 9.1.0 Support Matrix: compute capability 5.0 and newer (a K80 is refused).
- pytorch/pytorch RELEASE.md, "Release Compatibility Matrix": torch 2.1 supports Python 3.8 to 3.11.
- PyTorch "Previous PyTorch Versions": torch 2.5.1 pairs with torchvision 0.20.1 and torchaudio 2.5.1.
- PEP 440, "Handling of pre-releases": installers accept an already installed pre-release for any specifier.
"""
from __future__ import annotations

import pytest
from packaging.version import Version

from cudamatrix.diagnose.findings import Installed, diagnose, match_installed
from cudamatrix.diagnose.stated import stated_build
from cudamatrix.matrix.data import Advisory, AdvisoryFile, FrameworkFile, FrameworkRelease, Variant
from cudamatrix.models import (Context, DiskSpace, Driver, Environment, FileConflict, Finding, Framework, GpuInfo,
                               HostResources, Library, LibraryLoad, Note, PythonInfo, Severity, Toolkit)
from smallmatrix import ARCHS, NOTES, ROW, build, release, replace, variant

A = ["3.7", "5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0"]
CU121 = variant("cu121", "12.1", archs=A, cudnn="9.1.0", local_version="+cu121")
CPU = variant("cpu", None, local_version="+cpu")
# the plain torch 2.5.1 wheel of the default index for Linux x86_64 is the CUDA 12.4 build
CU124 = variant("cu124", "12.4", archs=A, cudnn="9.1.0", local_version="+cu124", pypi_default=True)
TORCH = replace(release("2.5.1", CU121, CU124, CPU), companions={"torchvision": "0.20.1", "torchaudio": "2.5.1"})
# torch 2.1.0: Python 3.8-3.11 (RELEASE.md); its CUDA 12.1 build, constructed SASS list as above
TORCH21 = replace(release("2.1.0", CU121, CPU), python=["3.8", "3.9", "3.10", "3.11"])
# a torch build whose SASS list and cuDNN the matrix lacks (constructed), so some rules cannot decide
TORCH24 = release("2.4.0", variant("cu124", "12.4", local_version="+cu124"))
# JAX installation guide: plain ``pip install jax`` is the CPU build; the CUDA one is the cuda12 extra
JAX = release("0.4.30", variant("cuda12", "12.1", archs=A, cudnn="9.1.0", pip_extra="cuda12"),
              variant("cpu", None, pypi_default=True), name="jax")
M = replace(build(TORCH, TORCH21, TORCH24), jax=FrameworkFile(releases=[JAX]))

T4 = GpuInfo(index=0, name="Tesla T4", compute_capability="7.5")
K80 = GpuInfo(index=0, name="Tesla K80", compute_capability="3.7")
RTX5090 = GpuInfo(index=0, name="NVIDIA GeForce RTX 5090", compute_capability="12.0")


def env(*, driver: str | Driver | None = "550.54.15", status="ok", gpus=(T4,), torch: str | None = "2.5.1+cu121",
        python="3.11.9", frameworks=None, packages=None, **kw) -> Environment:
    fw = [Framework(name="torch", version=torch, variant=torch.partition("+")[2] or None)] if torch else []
    pk = {"torch": torch} if torch else {}
    pk.update(packages or {})
    drv = driver if isinstance(driver, Driver) else Driver(version=driver, status=status)
    return Environment(origin="file", driver=drv, gpus=list(gpus),
                       python=PythonInfo(version=python, platform="linux_x86_64"),
                       frameworks=fw + list(frameworks or []), packages=pk, **kw)


def F(code: str, severity: Severity, title: str, evidence: list[str], fix: str, commands=()) -> Finding:
    """A finding, whole."""
    return Finding(code=code, severity=severity, title=title, evidence=evidence, fix=fix,
                   fix_commands=[list(c) for c in commands])


NO_DRIVER_FIX = ("install the NVIDIA driver on the host (and the NVIDIA Container Toolkit, run with --gpus all, inside "
                 "containers); a CPU build needs none")
MISMATCH_FIX = ("reboot (a driver upgrade without reboot leaves the old module loaded), or reinstall one driver "
                "version for both")
NO_DEVICE_FIX = ("unset or correct CUDA_VISIBLE_DEVICES; in a container run with --gpus all (or the Kubernetes "
                 "nvidia.com/gpu resource)")
UNUSABLE_FIX = "check dmesg for Xid errors; reset the GPU or reboot the machine"
UNKNOWN_FIX = ("update cudamatrix for newer matrix data; the other findings about this build rest on what the "
               "environment states about it")
PROBES = [Note(probe="driver", message="no /proc/driver/nvidia/version"),
          Note(probe="ldconfig", message="not a driver probe"),
          Note(probe="nvml", message="NVML Shared Library Not Found"),
          Note(probe="nvidia-smi", message="nvidia-smi: command not found"),
          Note(probe="driver:modinfo", message="modinfo: ERROR: Module nvidia not found.")]

DRIVER_STATE = [
    # no driver: an error with a CUDA build installed; the evidence is the first three driver probes' own words
    pytest.param(dict(driver=None, status="absent", notes=PROBES), [
        F("NO_DRIVER", "error", "No NVIDIA driver is installed or loaded",
          ["no /proc/driver/nvidia/version", "NVML Shared Library Not Found", "nvidia-smi: command not found"],
          NO_DRIVER_FIX)], id="no-driver-probes-words"),
    pytest.param(dict(driver=None, status="absent", torch="2.5.1+cpu"), [
        F("NO_DRIVER", "warning", "No NVIDIA driver is installed or loaded",
          ["no /proc/driver/nvidia/version, no libnvidia-ml, no nvidia-smi"], NO_DRIVER_FIX)],
      id="no-driver-cpu-build-warning"),
    # a driver upgrade without a reboot: NVML says "Driver/library version mismatch", both versions are named
    pytest.param(dict(driver=Driver(status="mismatch", kernel_module_version="535.104.05",
                                                       library_version="550.54.15",
                                                       error="Failed to initialize NVML: Driver/library version "
                                                             "mismatch")), [
        F("DRIVER_LIBRARY_MISMATCH", "error", "The kernel driver and the user-space NVIDIA libraries differ",
          ["Failed to initialize NVML: Driver/library version mismatch", "kernel module 535.104.05",
           "library 550.54.15"], MISMATCH_FIX)], id="mismatch-names-both-versions"),
    pytest.param(dict(driver=Driver(status="mismatch", error="Driver/library version mismatch")), [
        F("DRIVER_LIBRARY_MISMATCH", "error", "The kernel driver and the user-space NVIDIA libraries differ",
          ["Driver/library version mismatch"], MISMATCH_FIX)], id="mismatch-versions-unread"),
    # while kernel module and library differ no GPU works, so nothing is judged against the GPU (a K80 on a
    # version past R470, a CPU build)
    pytest.param(dict(driver=Driver(version="535.104.05", status="mismatch", error="Driver/library version mismatch"),
                      gpus=(K80,), torch="2.5.1+cpu"), [
        F("DRIVER_LIBRARY_MISMATCH", "error", "The kernel driver and the user-space NVIDIA libraries differ",
          ["Driver/library version mismatch"], MISMATCH_FIX)], id="mismatch-judges-no-gpu"),
    pytest.param(dict(driver=Driver(status="no_device", error="No devices were found"), gpus=()), [
        F("NO_DEVICE_VISIBLE", "error", "The driver is present but no GPU is visible", ["No devices were found"],
          NO_DEVICE_FIX)], id="no-device-driver-words"),
    pytest.param(dict(driver=Driver(status="no_device"), gpus=(),
                      context=Context(env={"CUDA_VISIBLE_DEVICES": "-1"})), [
        F("NO_DEVICE_VISIBLE", "error", "The driver is present but no GPU is visible",
          ["the driver answers but lists no GPU", "CUDA_VISIBLE_DEVICES='-1'"], NO_DEVICE_FIX)],
      id="no-device-cuda-visible-devices"),
    # nvidia-smi shows a GPU it cannot use as "ERR!" / "Unknown Error"
    pytest.param(dict(driver=Driver(version="550.54.15", status="error")), [
        F("GPU_UNUSABLE", "error", "A GPU is visible but the driver reports an error",
          ["nvidia-smi printed ERR! / Unknown Error"], UNUSABLE_FIX)], id="gpu-unusable"),
    # CUDA Driver API, CUDA_ERROR_STUB_LIBRARY: the toolkit's stubs/libcuda.so is for linking only
    pytest.param(dict(libraries=[Library(name="cuda", soname="libcuda.so.1", path="/usr/local/cuda/lib64/stubs/"
                                         "libcuda.so.1", origin="LD_LIBRARY_PATH", stub=True, loaded_first=True)]), [
        F("STUB_LIBCUDA", "error", "A link-time stub libcuda is on the search path",
          ["/usr/local/cuda/lib64/stubs/libcuda.so.1"],
          "remove the stubs folder from LD_LIBRARY_PATH; it is for linking only")], id="stub-libcuda"),
]


@pytest.mark.parametrize("facts, expected", DRIVER_STATE)
def test_driver_state_findings_whole(facts, expected):
    assert diagnose(env(**facts), M) == expected


CPU_FIX = "cudamatrix fix (or cudamatrix solve {} for the pip command)"
KEPLER_ENDED = f"Kepler support ended with the R470 branch ({ARCHS})"
CUDNN_OLDER = "install a build bundling an older cuDNN (cudamatrix fix)"
NO_KERNEL = 'torch 2.5.1+cu121 has no kernel image for this GPU ("no kernel image is available")'
SASS = "SASS sm_37 sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90, PTX none"
BUILD = [
    # Kepler on R535: past its last branch (R470); cuDNN 9.1.0 starts at compute capability 5.0
    pytest.param(dict(driver="535.104.05", gpus=(K80,)), [
        F("GPU_UNSUPPORTED_BY_DRIVER", "error", "Tesla K80 (Kepler) is not supported by driver branch 535",
          [KEPLER_ENDED], "install an R470 driver"),
        F("CUDNN_MISMATCH", "error", "cuDNN of torch 2.5.1+cu121 does not support the GPU",
          ["cuDNN 9.1.0 bundled with torch 2.5.1 cu121 supports compute capability >= 5.0, not Tesla K80 (3.7)"],
          CUDNN_OLDER)], id="kepler-on-r535"),
    pytest.param(dict(driver="535.104.05", gpus=(replace(K80, name=None),)), [
        F("GPU_UNSUPPORTED_BY_DRIVER", "error", "The GPU (Kepler) is not supported by driver branch 535",
          [KEPLER_ENDED], "install an R470 driver"),
        F("CUDNN_MISMATCH", "error", "cuDNN of torch 2.5.1+cu121 does not support the GPU",
          ["cuDNN 9.1.0 bundled with torch 2.5.1 cu121 supports compute capability >= 5.0, not sm_37 (3.7)"],
          CUDNN_OLDER)], id="unnamed-kepler-on-r535"),
    # an RTX 5090 (Blackwell, 12.0) on R560: its first driver is CUDA 12.8's 570.26; the build has no sm_120
    pytest.param(dict(driver="560.35.03", gpus=(RTX5090,)), [
        F("GPU_UNSUPPORTED_BY_DRIVER", "error",
          "Driver 560.35.03 is older than the first driver for NVIDIA GeForce RTX 5090",
          ["driver 560.35.03 does not drive NVIDIA GeForce RTX 5090 (Blackwell, compute capability 12.0): the first "
           "driver for it is 570.26 (branch R570)", f"matrix row: {NOTES}"],
          "install driver 570.26 or newer (branch R570 or a later one)"),
        F("ARCH_UNSUPPORTED", "error", NO_KERNEL,
          [f"torch 2.5.1 cu121 has no kernel image for NVIDIA GeForce RTX 5090 (compute capability 12.0): {SASS}"],
          # diagnose.remedy: the fix is what the solve says; nothing in this matrix covers sm_120 on R560
          "no torch build in the matrix fits this machine (driver 560.35.03 does not drive NVIDIA GeForce RTX 5090 "
          "(Blackwell, compute capability 12.0): the first driver for it is 570.26 (branch R570))")],
      id="rtx5090-on-r560"),
    pytest.param(dict(driver="560.35.03", gpus=(replace(RTX5090, name=None),)), [
        F("GPU_UNSUPPORTED_BY_DRIVER", "error", "Driver 560.35.03 is older than the first driver for the GPU",
          ["driver 560.35.03 does not drive sm_120 (Blackwell, compute capability 12.0): the first driver for it is "
           "570.26 (branch R570)", f"matrix row: {NOTES}"],
          "install driver 570.26 or newer (branch R570 or a later one)"),
        F("ARCH_UNSUPPORTED", "error", NO_KERNEL,
          [f"torch 2.5.1 cu121 has no kernel image for sm_120 (compute capability 12.0): {SASS}"],
          "no torch build in the matrix fits this machine (driver 560.35.03 does not drive sm_120 (Blackwell, "
          "compute capability 12.0): the first driver for it is 570.26 (branch R570))")],
      id="unnamed-rtx5090-on-r560"),
    # 520.61.05 is CUDA 11.8's driver: below 12.x's minor-version floor 525.60.13
    pytest.param(dict(driver="520.61.05"), [
        F("DRIVER_TOO_OLD", "error", "The driver is too old for torch 2.5.1+cu121",
          ["driver 520.61.05 runs CUDA 11.8 at most; torch 2.5.1 cu121 needs CUDA 12.1, which needs driver >= "
           "525.60.13 under minor-version compatibility, and 530.30.02 for full support", f"matrix row: {NOTES}"],
          "upgrade the driver to >= 525.60.13")],  # no build of this matrix runs on R520: the driver is the answer
      id="cuda-12.1-on-r520"),
    # a pasted nvidia-smi states the driver's version without a status: the rules read that version
    pytest.param(dict(driver="520.61.05", status="unknown"), [
        F("DRIVER_TOO_OLD", "error", "The driver is too old for torch 2.5.1+cu121",
          ["driver 520.61.05 runs CUDA 11.8 at most; torch 2.5.1 cu121 needs CUDA 12.1, which needs driver >= "
           "525.60.13 under minor-version compatibility, and 530.30.02 for full support", f"matrix row: {NOTES}"],
          "upgrade the driver to >= 525.60.13")],
      id="pasted-r520"),
    # a CPU build where GPUs work; the GPUs are named, or given by compute capability where unnamed
    pytest.param(dict(torch="2.5.1+cpu", gpus=(T4, GpuInfo(index=1, compute_capability="8.0"))), [
        F("CPU_ONLY_BUILD", "error", "torch 2.5.1+cpu is a CPU-only build on a GPU machine",
          ["torch variant cpu", "GPU: Tesla T4, 8.0"], CPU_FIX.format("torch"))],
      id="cpu-build-two-gpus"),
    # a driver that answers (status ok) without a version read is still a working GPU machine
    pytest.param(dict(driver=None, torch="2.5.1+cpu"), [
        F("CPU_ONLY_BUILD", "error", "torch 2.5.1+cpu is a CPU-only build on a GPU machine",
          ["torch variant cpu", "GPU: Tesla T4"], CPU_FIX.format("torch"))],
      id="cpu-build-driver-ok-version-unread"),
    # RELEASE.md: torch 2.1 is built for Python 3.8-3.11
    pytest.param(dict(torch="2.1.0+cu121", python="3.12.4"), [
        F("PYTHON_UNSUPPORTED", "error", "torch 2.1.0+cu121 is not built for Python 3.12",
          ["supported: 3.8, 3.9, 3.10, 3.11"], "use Python 3.11, or a torch release built for 3.12")],
      id="torch-2.1-on-python-3.12"),
]


@pytest.mark.parametrize("facts, expected", BUILD)
def test_build_findings_whole(facts, expected):
    assert diagnose(env(**facts), M) == expected


def jax(version="0.4.30", variant="cpu") -> Framework:
    return Framework(name="jax", version=version, variant=variant)


def unknown_build(label: str, *facts: str) -> Finding:
    return F("UNKNOWN_FRAMEWORK_BUILD", "info", f"{label} is not in the matrix test", list(facts), UNKNOWN_FIX)


UNSTATED = ["unknown: the CUDA version it was built with", "unknown: the Python versions it is built for"]
FRAMEWORKS = [
    # a release the matrix lacks is judged on what it states: +cu124 is CUDA 12.4, past R520 (CUDA 11.8)
    pytest.param(dict(torch="2.6.0+cu124", driver="520.61.05"), [
        F("DRIVER_TOO_OLD", "error", "The driver is too old for torch 2.6.0+cu124",
          ["driver 520.61.05 runs CUDA 11.8 at most; torch 2.6.0 cu124 needs CUDA 12.4, which needs driver >= "
           "525.60.13 under minor-version compatibility, and 550.54.14 for full support", f"matrix row: {NOTES}"],
          "upgrade the driver to >= 525.60.13"),
        unknown_build("torch 2.6.0+cu124", "variant cu124", "unknown: the GPU architectures it was compiled for",
                      "unknown: its cuDNN version", "unknown: the Python versions it is built for")],
      id="stated-cu124-on-r520"),
    # a build stating nothing is not judged; the next framework still is
    pytest.param(dict(torch="9.9.9", frameworks=[jax()]), [
        F("CPU_ONLY_BUILD", "error", "jax 0.4.30 is a CPU-only build on a GPU machine",
          ["jax variant cpu", "GPU: Tesla T4"], CPU_FIX.format("jax")),
        unknown_build("torch 9.9.9", "variant unknown", *UNSTATED)], id="unstated-then-jax-cpu"),
    pytest.param(dict(torch="2.5.1+cpu", frameworks=[jax()]), [
        F("CPU_ONLY_BUILD", "error", "torch 2.5.1+cpu is a CPU-only build on a GPU machine",
          ["torch variant cpu", "GPU: Tesla T4"], CPU_FIX.format("torch")),
        F("CPU_ONLY_BUILD", "error", "jax 0.4.30 is a CPU-only build on a GPU machine",
          ["jax variant cpu", "GPU: Tesla T4"], CPU_FIX.format("jax"))], id="two-cpu-builds"),
    # no GPU: builds are not judged against one, but a build the matrix lacks is still reported
    pytest.param(dict(gpus=(), driver=None, status="absent", torch="2.5.1+cpu", frameworks=[jax("0.9.9", "cuda12")]), [
        F("NO_DRIVER", "warning", "No NVIDIA driver is installed or loaded",
          ["no /proc/driver/nvidia/version, no libnvidia-ml, no nvidia-smi"], NO_DRIVER_FIX),
        unknown_build("jax 0.9.9", "variant cuda12", *UNSTATED)], id="no-gpu-then-unknown-jax"),
    # in the matrix without its SASS list: the arch rule cannot decide (the cuDNN rule can: every cuDNN for
    # CUDA 12.x in the matrix supports 7.5, cuDNN 9.17's lowest)
    pytest.param(dict(torch="2.4.0+cu124"), [
        F("UNKNOWN_FRAMEWORK_BUILD", "info", "Some facts about torch 2.4.0+cu124 are not in the matrix test",
          ["unknown: the GPU architectures torch 2.4.0 cu124 was compiled for are not in the matrix, so whether it "
           "has a kernel image for Tesla T4 (compute capability 7.5) is unknown"],
          "update cudamatrix for newer matrix data; the other rules were checked")], id="matrix-row-without-sass"),
    # PyTorch published 2.5.1+cu118, a build this matrix's 2.5.1 row lacks: judged on its tag, reported once
    pytest.param(dict(torch="2.5.1+cu118"), [
        unknown_build("torch 2.5.1+cu118", "variant cu118", "unknown: the GPU architectures it was compiled for",
                      "unknown: its cuDNN version", "unknown: the Python versions it is built for")],
      id="known-release-unknown-build"),
]


@pytest.mark.parametrize("facts, expected", FRAMEWORKS)
def test_framework_findings_whole(facts, expected):
    assert diagnose(env(**facts), M) == expected


# README, finding codes: GPU_MEMORY_BUSY at 80 % or more in use, LOW_DISK under 8 GiB free, LOW_HOST_MEMORY under
# 2 GiB (or 10 %) available; Quansight/open-gpu-server#69: cuDNN 9.11 and later dropped Volta (7.0)
VOLTA = Advisory(id="CM-2025-003", affects=["nvidia-cudnn-cu12>=9.11"], gpu_compute_capabilities=["7.0"],
                 symptom="cuDNN 9.11 and later no longer support Volta", fix="Keep cuDNN at 9.10.x on Volta GPUs.",
                 source="https://github.com/Quansight/open-gpu-server/issues/69")
V100 = GpuInfo(index=0, name="Tesla V100-SXM2-16GB", compute_capability="7.0", memory_total_mib=16384,
               memory_used_mib=15000)


def test_every_kind_of_finding_most_severe_first():
    # found in this order: the unknown build (info), the busy GPU, unsafe path, low disk and memory (warnings),
    # the advisory (error), the toolkit (info); reported errors first, then warnings, then information
    e = env(torch="2.6.0+cu124", gpus=(V100,), packages={"nvidia-cudnn-cu12": "9.11.0.98"},
            notes=[Note(probe="unsafe library path", message="LD_LIBRARY_PATH has an empty entry (the current "
                                                             "folder)")],
            host=HostResources(memory_total_mib=65536, memory_available_mib=1024,
                               disks=[DiskSpace(purpose="site-packages", path="/v/lib", free_mib=4096,
                                                total_mib=102400),
                                      DiskSpace(purpose="temp", path="/tmp", free_mib=8192, total_mib=102400)]),
            toolkits=[Toolkit(source="nvcc --version", version="12.6.85", path="/usr/local/cuda/bin/nvcc")])
    e.driver.cuda_version = "12.4"
    m = replace(M, advisories=AdvisoryFile(advisories=[VOLTA]))
    assert diagnose(e, m) == [
        F("KNOWN_BAD", "error", "CM-2025-003: cuDNN 9.11 and later no longer support Volta",
          ["nvidia-cudnn-cu12>=9.11", VOLTA.source], VOLTA.fix),
        F("GPU_MEMORY_BUSY", "warning", "GPU 0 has 15000 of 16384 MiB in use",
          ["other processes hold most of the GPU memory"],
          "stop the processes holding it (or restart a stale notebook kernel)"),
        F("UNSAFE_LIBRARY_PATH", "warning", "the library search path has folders others can plant libraries in",
          ["LD_LIBRARY_PATH has an empty entry (the current folder)"],
          "use absolute LD_LIBRARY_PATH entries without empty ones (no leading, trailing or double colon), and no "
          "world-writable folders"),
        F("LOW_DISK", "warning", "only 4.0 GiB free on the disk of site-packages",
          ["/v/lib: 4096 of 102400 MiB free (statvfs)"],
          "free space there (pip cache purge, old environments), or point TMPDIR / PIP_CACHE_DIR at a larger disk: "
          "a CUDA framework with its nvidia-* wheels needs several GB"),
        F("LOW_HOST_MEMORY", "warning", "only 1024 MiB of 65536 MiB host memory is available",
          ["/proc/meminfo MemAvailable"],
          "close other notebooks and processes (or restart stale kernels) before loading large models"),
        unknown_build("torch 2.6.0+cu124", "variant cu124", "unknown: the GPU architectures it was compiled for",
                      "unknown: its cuDNN version", "unknown: the Python versions it is built for"),
        F("TOOLKIT_NEWER_THAN_DRIVER", "info", "CUDA toolkit 12.6.85 is newer than the driver's CUDA 12.4",
          ["/usr/local/cuda/bin/nvcc"],
          "harmless for pip wheels, which bring their own runtime; programs you build with this nvcc need a newer "
          "driver")]


# torch 2.5.1's Linux x86_64 wheel on the default index (the CUDA 12.4 build) declares these nvidia-* pins, and
# tensorflow 2.15.0's and-cuda extra these (wheel METADATA, as recorded in data/torch.json and tensorflow.json)
LINUX = 'platform_system == "Linux" and platform_machine == "x86_64"'
TORCH_PINS = {"nvidia-cuda-nvrtc-cu12": "12.4.127", "nvidia-cuda-runtime-cu12": "12.4.127",
              "nvidia-cuda-cupti-cu12": "12.4.127", "nvidia-cudnn-cu12": "9.1.0.70", "nvidia-cublas-cu12": "12.4.5.8",
              "nvidia-cufft-cu12": "11.2.1.3", "nvidia-curand-cu12": "10.3.5.147",
              "nvidia-cusolver-cu12": "11.6.1.9", "nvidia-cusparse-cu12": "12.3.1.170", "nvidia-nccl-cu12": "2.21.5",
              "nvidia-nvtx-cu12": "12.4.127", "nvidia-nvjitlink-cu12": "12.4.127"}
TF_PINS = {"nvidia-cublas-cu12": "12.2.5.6", "nvidia-cuda-cupti-cu12": "12.2.142",
           "nvidia-cuda-nvcc-cu12": "12.2.140", "nvidia-cuda-nvrtc-cu12": "12.2.140",
           "nvidia-cuda-runtime-cu12": "12.2.140", "nvidia-cudnn-cu12": "8.9.4.25", "nvidia-cufft-cu12": "11.0.8.103",
           "nvidia-curand-cu12": "10.3.3.141", "nvidia-cusolver-cu12": "11.5.2.141",
           "nvidia-cusparse-cu12": "12.1.2.141", "nvidia-nccl-cu12": "2.16.5", "nvidia-nvjitlink-cu12": "12.2.140"}


def test_torch_and_tensorflow_pins_conflict_naming_the_first_five():
    # torchvision declares no nvidia-* wheels, and is of torch's family: never a conflict with torch
    e = env(torch="2.5.1", packages={"tensorflow": "2.15.0", "torchvision": "0.20.1", **TORCH_PINS},
            requirements={"torch": [f"{n}=={v}; {LINUX}" for n, v in TORCH_PINS.items()], "torchvision": [],
                          "tensorflow": [f'{n}=={v}; extra == "and-cuda"' for n, v in TF_PINS.items()]})
    conflicts = [f for f in diagnose(e, M) if f.code == "FRAMEWORK_CONFLICT"]
    # tensorflow's order; nvcc, which torch does not declare (and is not installed), is no conflict
    assert conflicts == [F(
        "FRAMEWORK_CONFLICT", "error", "torch and tensorflow need different nvidia-* wheels",
        [f"torch needs {n}=={TORCH_PINS[n]}, tensorflow needs {n}=={TF_PINS[n]}"
         for n in ("nvidia-cublas-cu12", "nvidia-cuda-cupti-cu12", "nvidia-cuda-nvrtc-cu12",
                   "nvidia-cuda-runtime-cu12", "nvidia-cudnn-cu12")],
        "cudamatrix solve torch tensorflow for a shared set, or keep them in separate environments")]


def test_two_distributions_of_no_family_still_conflict():
    # constructed distributions outside every framework family: each is its own family
    e = env(torch=None, packages={"example-a": "1.0", "example-b": "1.0", "nvidia-cudnn-cu12": "9.1.0.70"},
            requirements={"example-a": ["nvidia-cudnn-cu12==9.1.0.70"], "example-b": ["nvidia-cudnn-cu12==8.9.4.25"]})
    assert [(f.code, f.evidence) for f in diagnose(e, M) if f.code == "FRAMEWORK_CONFLICT"] == [
        ("FRAMEWORK_CONFLICT", ["example-a needs nvidia-cudnn-cu12==9.1.0.70, example-b needs "
                                "nvidia-cudnn-cu12==8.9.4.25"])]


CUDNN = "nvidia-cudnn-cu12==9.1.0.70"
# (requirements torch declares, the Python and platform doctor read, installed wheels, drifted requirements)
DECLARED = [
    # a requirement that does not parse, or does not apply here, is skipped: the next one is still checked
    pytest.param(["not a requirement ~~", CUDNN], "3.11.9", "linux_x86_64", {}, [CUDNN], id="unparsable-first"),
    pytest.param(['nvidia-nccl-cu12==2.21.5; platform_system == "Windows"', CUDNN], "3.11.9", "linux_x86_64", {},
                 [CUDNN], id="other-platform-first"),
    # python_version is major.minor: 3.12.1 is Python "3.12"
    pytest.param([f'{CUDNN}; python_version == "3.12"'], "3.12.1", "linux_x86_64", {}, [f'{CUDNN}; python_version == '
                                                                                         '"3.12"'],
                 id="python-major-minor"),
    # not stated: Python 3.11 on Linux x86_64 is assumed (the platforms the wheels are built for)
    pytest.param([f'{CUDNN}; python_version == "3.11"'], None, None, {}, [f'{CUDNN}; python_version == "3.11"'],
                 id="python-unstated"),
    pytest.param([f"{CUDNN}; {LINUX}"], "3.11.9", None, {}, [f"{CUDNN}; {LINUX}"], id="platform-unstated"),
    pytest.param([f"{CUDNN}; {LINUX}"], "3.11.9", "win_amd64", {}, [], id="windows"),
    # a marker that cannot be evaluated is taken to apply: a drift is shown, not hidden
    pytest.param([f'{CUDNN}; python_version ~= "x"'], "3.11.9", "linux_x86_64", {}, [f'{CUDNN}; python_version ~= '
                                                                                    '"x"'], id="marker-error"),
    # PEP 440: an installed pre-release satisfies a specifier
    pytest.param(["nvidia-nccl-cu12>=2.21"], "3.11.9", "linux_x86_64", {"nvidia-nccl-cu12": "2.22.3rc1"}, [],
                 id="installed-prerelease"),
]


@pytest.mark.parametrize("declared, python, platform, wheels, missing", DECLARED)
def test_declared_requirements_that_apply(declared, python, platform, wheels, missing):
    e = env(torch="2.5.1", packages=wheels, requirements={"torch": declared})
    e.python = PythonInfo(version=python, platform=platform)
    expected = []
    for req in missing:
        spec = req.split(";")[0]
        expected.append(F("NVIDIA_WHEEL_DRIFT", "error", f"torch needs {spec}, which is not installed",
                          [f"torch 2.5.1 declares {req}"], f"pip install '{spec}'", [["pip", "install", spec]]))
    assert [f for f in diagnose(e, M) if f.code == "NVIDIA_WHEEL_DRIFT"] == expected


SOURCE = f"matrix row: {ROW}"
# PyTorch "Previous PyTorch Versions": torch 2.5.1 with torchvision 0.20.1 and torchaudio 2.5.1, from one index
COMPANIONS = [
    # no torchvision installed: torchaudio is still checked
    pytest.param("2.5.1+cu121", {"torchaudio": "2.4.1+cu121"}, [
        F("TORCHVISION_MISMATCH", "error", "torchaudio 2.4.1+cu121 does not match torch 2.5.1+cu121 (needs "
                                           "2.5.1+cu121)", [SOURCE],
          "pip install torchaudio==2.5.1+cu121 from the same index as torch")], id="torchaudio-without-torchvision"),
    # torch from the default index has no local tag, so none is asked of the companion
    pytest.param("2.5.1", {"torchvision": "0.19.1"}, [
        F("TORCHVISION_MISMATCH", "error", "torchvision 0.19.1 does not match torch 2.5.1 (needs 0.20.1)", [SOURCE],
          "pip install torchvision==0.20.1 from the same index as torch")], id="no-local-tag"),
    pytest.param("2.5.1", {"torchvision": "0.20.1+cu124", "torchaudio": "2.5.1"}, [], id="paired"),
]


@pytest.mark.parametrize("torch, companions, expected", COMPANIONS)
def test_companions_whole(torch, companions, expected):
    assert diagnose(env(torch=torch, packages=companions), M) == expected


def stated(version: str, **fw) -> tuple[FrameworkRelease | None, Variant | None, list[str]]:
    framework = Framework(name="torch", version=version, **fw)
    (inst,) = match_installed(Environment(frameworks=[framework]), M)
    return stated_build(Environment(frameworks=[framework]), inst)


def stated_release(version: str, name: str, cuda: str | None, cudnn: str | None, source: str) -> FrameworkRelease:
    v = Variant(name=name, source=f"stated by the environment ({source})", cuda=Version(cuda) if cuda else None,
                cudnn=Version(cudnn) if cudnn else None)
    return FrameworkRelease(name="torch", version=Version(version), python=[], variants=[v], source=v.source)


ARCH_UNKNOWN, CUDNN_UNKNOWN, PY_UNKNOWN = ("the GPU architectures it was compiled for", "its cuDNN version",
                                          "the Python versions it is built for")
# PyTorch's local version tags: +cu124 is the CUDA 12.4 build, +cu118 CUDA 11.8, +cpu the CPU build; a report
# (torch.utils.collect_env: "CUDA used to build PyTorch: 12.6", "cuDNN version: 9.5.1") states them outright
STATED = [
    pytest.param("2.6.0+cu124", {}, ("2.6.0", "cu124", "12.4", None, "installed version"),
                 [ARCH_UNKNOWN, CUDNN_UNKNOWN, PY_UNKNOWN], id="local-tag-cu124"),
    pytest.param("2.6.0+cu118", {"variant": "cu118"}, ("2.6.0", "cu118", "11.8", None, "installed version"),
                 [ARCH_UNKNOWN, CUDNN_UNKNOWN, PY_UNKNOWN], id="local-tag-cu118"),
    pytest.param("2.6.0", {"cuda": "12.6", "cudnn": "9.5.1", "source": "report:collect_env"},
                 ("2.6.0", "cu126", "12.6", "9.5.1", "report:collect_env"), [ARCH_UNKNOWN, PY_UNKNOWN],
                 id="report-states-cuda-and-cudnn"),
    # a cuDNN given in words (a saved environment written by hand) is no version: unknown, and listed so
    pytest.param("2.6.0", {"cuda": "12.6", "cudnn": "unknown", "source": "report:collect_env"},
                 ("2.6.0", "cu126", "12.6", None, "report:collect_env"), [ARCH_UNKNOWN, CUDNN_UNKNOWN, PY_UNKNOWN],
                 id="report-cudnn-in-words"),
    # torch 1.7.1 was published with +cu92 (CUDA 9.2): a two-digit tag
    pytest.param("1.7.1+cu92", {}, ("1.7.1", "cu92", "9.2", None, "installed version"),
                 [ARCH_UNKNOWN, CUDNN_UNKNOWN, PY_UNKNOWN], id="local-tag-cu92"),
    pytest.param("2.6.0+cpu", {}, ("2.6.0", "cpu", None, None, "installed version"), [PY_UNKNOWN], id="cpu-tag"),
    pytest.param("2.6.0", {"variant": "cpu"}, ("2.6.0", "cpu", None, None, "installed version"), [PY_UNKNOWN],
                 id="cpu-variant"),
    # nothing states the build's CUDA: a date-stamped local tag, an unreadable CUDA, no tag at all
    pytest.param("2.6.0+20240101", {}, None, ["the CUDA version it was built with", PY_UNKNOWN], id="date-tag"),
    pytest.param("2.6.0+cu1", {}, None, ["the CUDA version it was built with", PY_UNKNOWN], id="short-tag"),
    # a tag of "cu" and something other than digits ("+cuv12" is a valid PEP 440 local label) is no +cuNNN tag
    pytest.param("2.6.0+cuv12", {}, None, ["the CUDA version it was built with", PY_UNKNOWN], id="cu-then-letter"),
    # PEP 440: the local label is what follows the first "+", and holds no "+" itself; "20240101+cu124" is no
    # +cuNNN tag, so a cu124 after a second "+" states nothing
    pytest.param("2.6.0+20240101+cu124", {}, None, ["the CUDA version it was built with", PY_UNKNOWN],
                 id="second-plus"),
    pytest.param("2.6.0", {"cuda": "unknown"}, None, ["the CUDA version it was built with", PY_UNKNOWN],
                 id="cuda-in-words"),
    pytest.param("2.6.0", {}, None, ["the CUDA version it was built with", PY_UNKNOWN], id="no-tag"),
    pytest.param("nightly+cu124", {}, None, ["its version"], id="version-unreadable"),
]


@pytest.mark.parametrize("version, fw, expected, unknown", STATED)
def test_stated_build(version, fw, expected, unknown):
    release, var, missing = stated(version, **fw)
    assert missing == unknown
    if expected is None:
        assert (release, var) == (None, None)
    else:
        assert release == stated_release(*expected)
        assert release is not None and var is release.variants[0]


def test_a_build_is_judged_on_its_own_statements():
    # TensorFlow 2.6.0 was built with CUDA 11.2 ("Tested build configurations"); a torch 2.6.0 next to it that
    # states nothing about its build is not given TensorFlow's CUDA
    frameworks = [Framework(name="tensorflow", version="2.6.0", cuda="11.2"), Framework(name="torch", version="2.6.0")]
    e = Environment(frameworks=frameworks)
    torch = next(i for i in match_installed(e, M) if i.name == "torch")
    assert stated_build(e, torch) == (None, None, ["the CUDA version it was built with", PY_UNKNOWN])


def test_installed_without_a_default_variant_matches_no_variant():
    # torch 2.1.0 here has no variant marked as the default index's build, so a plain 2.1.0 is no known variant
    # torchvision is no framework family of its own: it is skipped, and what follows still matched
    (inst,) = match_installed(Environment(frameworks=[Framework(name="torchvision", version="0.16.0"),
                                                      Framework(name="torch", version="2.1.0")]), M)
    assert inst == Installed("torch", "2.1.0", None, TORCH21, None)


# cuDNN Developer Guide, "API Compatibility": a program built with one cuDNN major runs only with that major;
# torch (torch/backends/cudnn/__init__.py) also refuses a runtime minor older than the compiled one. torch 2.5.1
# cu121 here is built with cuDNN 9.1.0, and its own copy is the nvidia-cudnn-cu12 wheel's, found through DT_RPATH.
WHEEL = "/v/site-packages/nvidia/cudnn/lib/libcudnn.so.9"
RPATH = "DT_RPATH of libtorch_cuda.so"
OPT = "/opt/cudnn/lib/libcudnn.so.9"
SO9 = "libcudnn.so.9"
OWN = f"its own copy: {WHEEL} ({RPATH})"
TORCH_RULE = "torch needs the same major and a minor at least the compiled one"


def lib(path: str, version: str | None, origin: str, first=False) -> Library:
    return Library(name="cudnn", soname=SO9, path=path, version=version, origin=origin, loaded_first=first)


def load(path: str, rule: str, **kw) -> LibraryLoad:
    return LibraryLoad("torch", SO9, path, rule, expected=WHEEL, expected_rule=RPATH, **kw)


def mismatch(have: str, path: str, rule: str, fix: str, built="9.1.0", found: str | None = None) -> Finding:
    return F("CUDNN_MISMATCH", "error", f"torch 2.5.1+cu121 was built with cuDNN {built} but will run cuDNN {have} "
                                        f"from {path}", [f"{SO9}: {path} ({rule}; found as {found or path})",
                                                         TORCH_RULE], fix)


def maps(path: str, rule: str, how: str, version: str | None, own: str | None) -> str:
    """The evidence line of a wrong load: the file, the rule, who asked, both versions."""
    return (f"torch maps {path} for {SO9} ({rule}; {how}), {version or 'version unknown'}; {OWN}, "
            f"{own or 'version unknown'}")


CACHE_FIX = "the copy in /usr/lib wins by ld.so cache: take it off the loader's path"
PRELOAD_FIX = ("remove it from LD_PRELOAD (cudamatrix env prints the change); a running notebook kernel keeps it "
               "until it is restarted without it")


LOADS = [
    # LD_PRELOAD puts an older cuDNN 9 minor in place of the wheel's: both findings, the fix is LD_PRELOAD's
    pytest.param([lib(OPT, "9.0.0", "LD_PRELOAD", True), lib(WHEEL, "9.1.0", "wheel:nvidia-cudnn-cu12")],
                 [load(OPT, "already loaded (LD_PRELOAD)", how="LD_PRELOAD")], [
        F("LIBRARY_PRELOADED", "error", f"LD_PRELOAD puts {OPT} in place of torch's {SO9} (9.0.0 where the "
                                        "framework's own copy is 9.1.0)",
          [maps(OPT, "already loaded (LD_PRELOAD)", "LD_PRELOAD from the program", "9.0.0", "9.1.0")], PRELOAD_FIX),
        mismatch("9.0.0", OPT, "already loaded (LD_PRELOAD)", PRELOAD_FIX)],
      id="preloaded-older-minor"),
    # a preloaded copy of unknown version is still an error (LD_PRELOAD wins over everything); no minor to compare
    pytest.param([lib(OPT, None, "LD_PRELOAD", True), lib(WHEEL, None, "wheel:nvidia-cudnn-cu12")],
                 [load(OPT, "already loaded (LD_PRELOAD)", how="LD_PRELOAD", requested_by="libtorch_cuda.so")], [
        F("LIBRARY_PRELOADED", "error", f"LD_PRELOAD puts {OPT} in place of torch's {SO9} (version unknown where the "
                                        "framework's own copy is of unknown version)",
          [maps(OPT, "already loaded (LD_PRELOAD)", "LD_PRELOAD from libtorch_cuda.so", None, None)],
          PRELOAD_FIX)], id="preloaded-versions-unknown"),
    # LD_LIBRARY_PATH found it through a symlinked folder: the folder to remove is the one on the path
    pytest.param([lib("/opt/cuda-12/lib/libcudnn.so.9.0.0", "9.0.0", "LD_LIBRARY_PATH", True),
                  lib(WHEEL, "9.1.0", "wheel:nvidia-cudnn-cu12")],
                 [load("/opt/cuda-12/lib/libcudnn.so.9.0.0", "LD_LIBRARY_PATH", found_as="/opt/cuda/lib64/"
                                                                                          "libcudnn.so.9")], [
        F("LIBRARY_SHADOWED", "error", f"torch will map /opt/cuda-12/lib/libcudnn.so.9.0.0 for {SO9}, not its own "
                                       "copy (9.0.0 where the framework's own copy is 9.1.0)",
          [maps("/opt/cuda-12/lib/libcudnn.so.9.0.0", "LD_LIBRARY_PATH", "DT_NEEDED from the program", "9.0.0",
                "9.1.0")],
          "remove /opt/cuda/lib64 from LD_LIBRARY_PATH (cudamatrix env prints the export)"),
        mismatch("9.0.0", "/opt/cuda-12/lib/libcudnn.so.9.0.0", "LD_LIBRARY_PATH",
                 "remove /opt/cuda/lib64 from LD_LIBRARY_PATH (cudamatrix env prints the export)",
                 found="/opt/cuda/lib64/libcudnn.so.9")], id="ld-library-path-symlinked-folder"),
    # another rule (the ld.so cache) picks the system's older cuDNN 9; the wheel's version is unread: a warning,
    # and the fix is the other copy's way in, never a reinstall of the framework's own (it is not the one mapped)
    pytest.param([lib("/usr/lib/libcudnn.so.9", "9.0.0", "ldconfig", True),
                  lib(WHEEL, None, "wheel:nvidia-cudnn-cu12")],
                 [load("/usr/lib/libcudnn.so.9", "ld.so cache")], [
        mismatch("9.0.0", "/usr/lib/libcudnn.so.9", "ld.so cache", CACHE_FIX),
        F("LIBRARY_SHADOWED", "warning", f"torch will map /usr/lib/libcudnn.so.9 for {SO9}, not its own copy (9.0.0 "
                                         "where the framework's own copy is of unknown version)",
          [maps("/usr/lib/libcudnn.so.9", "ld.so cache", "DT_NEEDED from the program", "9.0.0", None)], CACHE_FIX)],
      id="ld-cache-older-minor"),
    # a newer minor of the same major is what torch accepts: the wrong file, but no cuDNN mismatch
    pytest.param([lib(OPT, "9.3.0", "LD_LIBRARY_PATH", True), lib(WHEEL, "9.1.0", "wheel:nvidia-cudnn-cu12")],
                 [load(OPT, "LD_LIBRARY_PATH")], [
        F("LIBRARY_SHADOWED", "error", f"torch will map {OPT} for {SO9}, not its own copy (9.3.0 where the "
                                       "framework's own copy is 9.1.0)",
          [maps(OPT, "LD_LIBRARY_PATH", "DT_NEEDED from the program", "9.3.0", "9.1.0")],
          "remove /opt/cudnn/lib from LD_LIBRARY_PATH (cudamatrix env prints the export)")], id="newer-minor"),
    # the wheel's own copy mapped through its DT_RPATH, but an older minor than the build's: reinstall the wheel
    pytest.param([lib(WHEEL, "9.0.0", "wheel:nvidia-cudnn-cu12", True)],
                 [LibraryLoad("torch", SO9, WHEEL, RPATH)],
                 [mismatch("9.0.0", WHEEL, RPATH, "reinstall the cuDNN wheel torch declares (cuDNN 9.1.0): "
                                                  "cudamatrix fix")], id="own-wheel-older-minor"),
    # the mapped copy is of the build's major but its version is unreadable: no minor to compare, no mismatch
    pytest.param([lib(WHEEL, "unknown", "wheel:nvidia-cudnn-cu12", True)],
                 [LibraryLoad("torch", SO9, WHEEL, RPATH)], [], id="own-wheel-version-unreadable"),
]


@pytest.mark.parametrize("libraries, loads, expected", LOADS)
def test_library_findings_whole(libraries, loads, expected):
    assert diagnose(env(libraries=libraries, library_loads=loads), M) == expected


PASTED = ("no loader prediction in this environment (pasted or saved by an older version): whether the framework's "
          "DT_RPATH wins is unknown; run doctor on the machine")
CUBLAS_WHEEL = "/v/site-packages/nvidia/cublas/lib/libcublas.so.12"


def test_pasted_libraries_each_soname_on_its_own():
    # no loader prediction (a paste): per SONAME, a copy first on LD_LIBRARY_PATH that differs from the wheel's
    # may win. cuBLAS comes first from the wheel and cuSPARSE from the ld.so cache (searched after the wheel's
    # RUNPATH): nothing to say; cuFFT on LD_LIBRARY_PATH is the wheel's version; cuDNN and cuRAND may win
    libraries = [
        Library(name="cublas", soname="libcublas.so.12", path=CUBLAS_WHEEL, version="12.4.5",
                origin="wheel:nvidia-cublas-cu12", loaded_first=True),
        Library(name="cublas", soname="libcublas.so.12", path="/opt/cuda/lib64/libcublas.so.12", version="12.1.3",
                origin="LD_LIBRARY_PATH"),
        lib(OPT, None, "LD_LIBRARY_PATH", True), lib(WHEEL, "9.1.0", "wheel:nvidia-cudnn-cu12"),
        lib("/w2/nvidia/cudnn/lib/libcudnn.so.9", "9.3.0", "wheel:nvidia-cudnn-cu12"),
        Library(name="cufft", soname="libcufft.so.11", path="/opt/cuda/lib64/libcufft.so.11", version="11.2.1",
                origin="LD_LIBRARY_PATH", loaded_first=True),
        Library(name="cufft", soname="libcufft.so.11", path="/v/nvidia/cufft/lib/libcufft.so.11", version="11.2.1",
                origin="wheel:nvidia-cufft-cu12"),
        Library(name="cusparse", soname="libcusparse.so.12", path="/usr/lib/libcusparse.so.12", version="12.1.0",
                origin="ldconfig", loaded_first=True),
        Library(name="cusparse", soname="libcusparse.so.12", path="/v/nvidia/cusparse/lib/libcusparse.so.12",
                version="12.3.1", origin="wheel:nvidia-cusparse-cu12"),
        Library(name="curand", soname="libcurand.so.10", path="/opt/cuda/lib64/libcurand.so.10", version="10.3.2",
                origin="LD_LIBRARY_PATH", loaded_first=True),
        Library(name="curand", soname="libcurand.so.10", path="/v/nvidia/curand/lib/libcurand.so.10",
                origin="wheel:nvidia-curand-cu12"),
    ]
    assert diagnose(env(libraries=libraries), M) == [F(
        "LIBRARY_SHADOWED", "warning", f"{SO9} on LD_LIBRARY_PATH (version unknown) may win over the wheel's copy "
                                       "(9.1.0)",
        [f"first on LD_LIBRARY_PATH: {OPT}", f"wheel copy: {WHEEL}", "wheel copy: /w2/nvidia/cudnn/lib/libcudnn.so.9",
         PASTED], "run cudamatrix doctor on the machine itself"), F(
        "LIBRARY_SHADOWED", "warning", "libcurand.so.10 on LD_LIBRARY_PATH (10.3.2) may win over the wheel's copy "
                                       "(version unknown)",
        ["first on LD_LIBRARY_PATH: /opt/cuda/lib64/libcurand.so.10",
         "wheel copy: /v/nvidia/curand/lib/libcurand.so.10", PASTED], "run cudamatrix doctor on the machine itself")]


def test_an_unreadable_toolkit_does_not_hide_the_next():
    # CUDA 13.0's nvcc next to a driver for CUDA 12.4 (Release Notes: 13.0 needs R580)
    # a patch release of the driver's own CUDA (12.4.131 next to 12.4) is not newer
    e = env(toolkits=[Toolkit(source="conda", version="unknown"),
                      Toolkit(source="/usr/local/cuda-12.4", version="12.4.131"),
                      Toolkit(source="nvcc --version", version="13.0.88")])
    e.driver.cuda_version = "12.4"
    assert [(f.code, f.evidence) for f in diagnose(e, M)] == [("TOOLKIT_NEWER_THAN_DRIVER", ["nvcc --version"])]


def test_an_advisory_covers_an_installed_prerelease():
    # PEP 440: an installed pre-release satisfies ">=9.11"; the advisory's other conditions hold (Volta)
    e = env(gpus=(replace(V100, memory_used_mib=0),), packages={"nvidia-cudnn-cu12": "9.12.0rc1"})
    m = replace(M, advisories=AdvisoryFile(advisories=[VOLTA]))
    assert [f.code for f in diagnose(e, m)] == ["KNOWN_BAD"]


@pytest.mark.parametrize("first", [jax(variant="cpu"), jax(variant="cuda12"), jax("0.9.9", "cuda12")],
                         ids=["cpu-jax", "jax-without-a-load", "jax-not-in-the-matrix"])
def test_cudnn_of_each_framework(first):
    # a framework before torch with no cuDNN, or with no predicted cuDNN load, does not end the check
    e = env(torch=None, frameworks=[first, Framework(name="torch", version="2.5.1+cu121", variant="cu121")],
            packages={"torch": "2.5.1+cu121"}, libraries=[lib(WHEEL, "9.0.0", "wheel:nvidia-cudnn-cu12", True)],
            library_loads=[LibraryLoad("torch", SO9, WHEEL, RPATH)])
    assert [f for f in diagnose(e, M) if f.code == "CUDNN_MISMATCH"] == [
        mismatch("9.0.0", WHEEL, RPATH, "reinstall the cuDNN wheel torch declares (cuDNN 9.1.0): cudamatrix fix")]


# the extras that bring nvidia-* wheels: tensorflow[and-cuda], jax-cuda12-plugin[with-cuda], jax[cuda12] and
# jax[cuda13] (data/jax.json), and jax[cuda] of the 0.4 series' install guide; a requirement behind one applies
# once the wheel it names is installed (the extra was asked for); one behind any other extra never does
EXTRAS = [("tensorflow", "and-cuda", True), ("jax-cuda12-plugin", "with-cuda", True), ("jax", "cuda", True),
          ("jax", "cuda12", True), ("jax", "cuda13", True), ("jax", "test", False)]


@pytest.mark.parametrize("dist, extra, applies", EXTRAS)
def test_requirements_behind_an_extra(dist, extra, applies):
    e = env(torch=None, packages={dist: "1.0", "nvidia-cudnn-cu12": "8.9.4.25"},
            requirements={dist: [f'nvidia-cudnn-cu12>=9.1; extra == "{extra}"']})
    assert diagnose(e, M) == ([F(
        "NVIDIA_WHEEL_DRIFT", "error", f"nvidia-cudnn-cu12 8.9.4.25 is installed; {dist} declares >=9.1",
        [f'{dist} 1.0 requires nvidia-cudnn-cu12>=9.1; extra == "{extra}"'],
        "pip install 'nvidia-cudnn-cu12>=9.1' (cudamatrix fix reinstalls only the drifted wheels)",
        [["pip", "install", "nvidia-cudnn-cu12>=9.1"]])] if applies else [])


# CuPy's install guide: install one cupy-cudaXXx package; two install the same cupy/ files. The finding lists
# twenty of them and counts the rest
CLOBBER = [(1, "file", []), (20, "20 files", []), (21, "21 files", ["... and 1 more"]),
           (23, "23 files", ["... and 3 more"])]


@pytest.mark.parametrize("count, files, more", CLOBBER)
def test_file_clobber(count, files, more):
    paths = [f"cupy/_core/m{i:02}.so" for i in range(count)]
    e = env(file_conflicts=[FileConflict(path=p, distributions=["cupy-cuda13x", "cupy-cuda12x"]) for p in paths])
    assert diagnose(e, M) == [F("FILE_CLOBBER", "error", f"cupy-cuda12x and cupy-cuda13x install the same {files}",
                                paths[:20] + more,
                                "uninstall one of them (the one the framework does not declare), then reinstall the "
                                "other")]


# README: LOW_HOST_MEMORY under 2 GiB or under 10 % of host memory available
HOST_MEMORY = [
    (16384, 2047, True), (16384, 2048, False),   # 2 GiB decides on a 16 GiB machine (10 % is 1638 MiB)
    (65536, 6553, True), (65536, 6554, False),   # 10 % decides on a 64 GiB machine (6553.6 MiB)
    (20480, 2048, False),                        # exactly 2 GiB and exactly 10 %: neither is under
    (16384, None, False), (None, 512, False),   # unread
]


@pytest.mark.parametrize("total, available, low", HOST_MEMORY)
def test_low_host_memory(total, available, low):
    e = env(host=HostResources(memory_total_mib=total, memory_available_mib=available))
    assert diagnose(e, M) == ([F("LOW_HOST_MEMORY", "warning", f"only {available} MiB of {total} MiB host memory is "
                                                              "available", ["/proc/meminfo MemAvailable"],
                                 "close other notebooks and processes (or restart stale kernels) before loading large "
                                 "models")] if low else [])


def test_low_disk_title_in_gib():
    # 7220 MiB is 7.05 GiB: one decimal, rounded
    e = env(host=HostResources(disks=[DiskSpace(purpose="pip cache", path="/c", free_mib=7220, total_mib=9000)]))
    assert [(f.code, f.title) for f in diagnose(e, M)] == [("LOW_DISK", "only 7.1 GiB free on the disk of pip cache")]


def test_unsafe_library_path_names_ten_folders():
    notes = [Note(probe="unsafe library path", message=f"/tmp/lib{i} is world-writable") for i in range(11)]
    (f,) = diagnose(env(notes=notes), M)
    assert (f.code, f.evidence) == ("UNSAFE_LIBRARY_PATH", [n.message for n in notes[:10]])


@pytest.mark.parametrize("gpu, applies", [(V100, True), (T4, False)], ids=["volta", "turing"])
def test_an_advisory_about_the_machine_alone(gpu, applies):
    # an advisory naming no package (the schema allows an empty ``affects``) rests on its machine conditions
    volta_only = replace(VOLTA, affects=[])
    e = env(gpus=(replace(gpu, memory_used_mib=0),))
    assert [f.code for f in diagnose(e, replace(M, advisories=AdvisoryFile(advisories=[volta_only])))] == \
        (["KNOWN_BAD"] if applies else [])
