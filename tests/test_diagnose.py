"""Each finding code is raised by a minimal Environment that has the problem, and not by its healthy twin.

The healthy machine: a Tesla T4 (compute capability 7.5) on driver 550.54.15 (CUDA 12.4), Python 3.11,
torch 2.5.1+cu121 with the cuDNN wheel it pins. Each case changes one thing. Runs on the frozen matrix
snapshot kept with the tests; the cases rest on NVIDIA's tables as copied there (driver floors, the
Kepler driver branch, compiled architectures of the torch wheels).
"""
from __future__ import annotations

import copy
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from cudamatrix.diagnose.findings import diagnose, summary_exit
from cudamatrix.models import DiskSpace, HostResources, LibraryLoad, Note, ToolMessage
from cudamatrix.models import (
    Context,
    Driver,
    Environment,
    FileConflict,
    Framework,
    GpuInfo,
    Library,
    PythonInfo,
    Toolkit,
)
from snapshot import snapshot_matrix

CUDNN_PIN = "nvidia-cudnn-cu12==9.1.0.70; platform_system == 'Linux' and platform_machine == 'x86_64'"
WHEEL_CUDNN = "site-packages/nvidia/cudnn/lib/libcudnn.so.9"


def healthy() -> Environment:
    return Environment(
        origin="file",
        driver=Driver(version="550.54.15", cuda_version="12.4", status="ok"),
        gpus=[GpuInfo(index=0, name="Tesla T4", compute_capability="7.5", memory_total_mib=15360,
                      memory_used_mib=300)],
        python=PythonInfo(version="3.11.9", platform="linux_x86_64"),
        packages={"torch": "2.5.1+cu121", "nvidia-cudnn-cu12": "9.1.0.70"},
        requirements={"torch": [CUDNN_PIN]},
        frameworks=[Framework(name="torch", version="2.5.1+cu121", variant="cu121", cuda="12.1", cudnn="9.1")],
    )


def _torch(env: Environment, version: str, variant: str, cuda: str | None) -> None:
    env.packages["torch"] = version
    env.frameworks = [Framework(name="torch", version=version, variant=variant, cuda=cuda)]


def no_driver(env):
    env.driver = Driver(status="absent")


def mismatch(env):
    env.driver = Driver(status="mismatch", error="Failed to initialize NVML: Driver/library version mismatch",
                        kernel_module_version="550.54.15", library_version="550.90.07")


def no_device(env):
    env.driver = Driver(version="550.54.15", status="no_device", error="No devices were found")
    env.gpus = []
    env.context = Context(env={"CUDA_VISIBLE_DEVICES": ""})


def unusable(env):
    env.driver.status = "error"
    env.driver.error = "Unable to determine the device handle for GPU0: Unknown Error"


def old_driver(env):  # CUDA 12.1 needs the 12.x minor-version floor 525.60.13 at least
    env.driver = Driver(version="470.82.01", cuda_version="11.4", status="ok")


def kepler_on_new_branch(env):  # Kepler support ended with the R470 branch
    env.driver = Driver(version="535.104.05", cuda_version="12.2", status="ok")
    env.gpus = [GpuInfo(index=0, name="Tesla K80", compute_capability="3.7", memory_total_mib=11441)]


def stub_libcuda(env):
    env.libraries = [Library(name="cuda", soname="libcuda.so.1", origin="LD_LIBRARY_PATH", stub=True,
                             loaded_first=True, path="/usr/local/cuda/lib64/stubs/libcuda.so.1")]


def cpu_build(env):
    _torch(env, "2.5.1+cpu", "cpu", None)


def rtx5090(env):  # torch 2.5.1 cu121 carries SASS up to sm_90 and no PTX
    env.driver = Driver(version="570.124.04", cuda_version="12.8", status="ok")
    env.gpus = [GpuInfo(index=0, name="NVIDIA GeForce RTX 5090", compute_capability="12.0", memory_total_mib=32607)]


def cudnn_clobbered(env):
    # the loader model predicts torch maps its wheel's libcudnn.so.9, but that file is cuDNN 9.0.0 where the
    # build needs 9.1 (torch refuses a runtime cuDNN older than the one it was compiled with)
    env.libraries = [Library(name="cudnn", soname="libcudnn.so.9", version="9.0.0", origin="wheel:nvidia-cudnn-cu12",
                             path=WHEEL_CUDNN)]
    env.library_loads = [LibraryLoad("torch", "libcudnn.so.9", WHEEL_CUDNN, "DT_RPATH of libtorch_cuda.so")]


def preloaded(env):
    env.libraries = [Library(name="cudnn", soname="libcudnn.so.9", version="9.1.0", origin="wheel:nvidia-cudnn-cu12",
                             path=WHEEL_CUDNN)]
    env.library_loads = [LibraryLoad("torch", "libcudnn.so.9", "/tmp/s/libcudnn.so.9", "already loaded (LD_PRELOAD)",
                                     expected=WHEEL_CUDNN, expected_rule="DT_RPATH of libtorch_cuda.so")]
    env.context.env = {"LD_PRELOAD": "/tmp/s/libcudnn.so.9"}


def shadowed(env, wheel_first: bool = False):
    # a cuDNN 9.0 on LD_LIBRARY_PATH; the loader model says which file torch will map (its healthy twin: the wheel's)
    env.libraries = [
        Library(name="cudnn", soname="libcudnn.so.9", version="9.0.0", origin="LD_LIBRARY_PATH",
                loaded_first=not wheel_first, path="/opt/cudnn/lib/libcudnn.so.9"),
        Library(name="cudnn", soname="libcudnn.so.9", version="9.1.0", origin="wheel:nvidia-cudnn-cu12",
                loaded_first=wheel_first, path=WHEEL_CUDNN),
    ]
    env.context.env = {"LD_LIBRARY_PATH": "/opt/cudnn/lib"}
    if wheel_first:
        env.library_loads = [LibraryLoad("torch", "libcudnn.so.9", WHEEL_CUDNN, "DT_RPATH of libtorch_cuda.so")]
    else:
        env.library_loads = [LibraryLoad("torch", "libcudnn.so.9", "/opt/cudnn/lib/libcudnn.so.9", "LD_LIBRARY_PATH",
                                         expected=WHEEL_CUDNN, expected_rule="DT_RUNPATH of libtorch_cuda.so")]


def unsafe_path(env):
    # detect's probe refused an empty LD_LIBRARY_PATH entry (the current folder) and said so in a note
    env.notes = [Note("unsafe library path", "LD_LIBRARY_PATH entry '': the current folder; libraries there are "
                                             "not loaded by detect")]


def low_disk(env):
    # 8 GiB is the written-down floor (diagnose.findings.LOW_DISK_MIB); 2 GiB free where packages go is below it
    env.host = HostResources(disks=[DiskSpace(purpose="site-packages", path="/venv/lib", free_mib=2048,
                                              total_mib=100_000)])


def low_memory(env):
    env.host = HostResources(memory_total_mib=16_000, memory_available_mib=900)


def drift(env):
    env.packages["nvidia-cudnn-cu12"] = "9.5.1.17"


def clobber(env):
    env.file_conflicts = [FileConflict(path="nvidia/cudnn/lib/libcudnn.so.9",
                                       distributions=["nvidia-cudnn-cu12", "nvidia-cudnn-cu13"])]


def framework_conflict(env):
    env.packages["tensorflow"] = "2.15.0"
    env.requirements["tensorflow"] = ["nvidia-cudnn-cu12==8.9.4.25; extra == 'and-cuda'"]


def torchvision(env, version: str = "0.19.1+cu121"):  # torch 2.5.1 pairs with torchvision 0.20.1
    env.packages["torchvision"] = version


def old_python(env):  # torch 2.5.1 wheels exist for Python 3.9 to 3.13
    env.python.version = "3.8.10"


def busy(env):
    env.gpus[0].memory_used_mib = 15000


def known_bad(env):  # advisory CM-2022-001 affects torch>=1.12,<1.13 on any GPU
    _torch(env, "1.12.1+cu116", "cu116", "11.6")


def unknown_build(env):
    _torch(env, "2.99.0+cu130", "cu130", "13.0")


def new_toolkit(env):
    env.toolkits = [Toolkit(source="nvcc --version", version="12.8", path="/usr/local/cuda-12.8/bin/nvcc")]


def missing_library(env):  # TensorFlow's words in a paste (tests/data/pastes/tf-log_could-not-load-libcudart...)
    env.messages = [ToolMessage(tool="tensorflow", kind="library_missing", library="cudart", soname="libcudart.so.11.0",
                                text="Could not load dynamic library 'libcudart.so.11.0'")]


def older_library(env):  # JAX's words in a paste (tests/data/pastes/jax-log_unable-to-initialize-backend-cuda_...)
    env.messages = [ToolMessage(tool="jax", kind="library_version", library="cusolver", built="11401", found="11002",
                                text="Found cuSOLVER version 11002, but JAX was built against version 11401")]


# code -> (the change that causes it, the change of its healthy twin or None for the healthy machine)
CASES: dict[str, tuple[Callable[[Environment], None], Callable[[Environment], None] | None]] = {
    "NO_DRIVER": (no_driver, None),
    "DRIVER_LIBRARY_MISMATCH": (mismatch, None),
    "NO_DEVICE_VISIBLE": (no_device, None),
    "GPU_UNUSABLE": (unusable, None),
    "DRIVER_TOO_OLD": (old_driver, None),
    "GPU_UNSUPPORTED_BY_DRIVER": (kepler_on_new_branch, None),
    "STUB_LIBCUDA": (stub_libcuda, None),
    "CPU_ONLY_BUILD": (cpu_build, None),
    "ARCH_UNSUPPORTED": (rtx5090, None),
    "CUDNN_MISMATCH": (cudnn_clobbered, None),
    "LIBRARY_PRELOADED": (preloaded, None),
    "LIBRARY_SHADOWED": (shadowed, lambda env: shadowed(env, wheel_first=True)),
    "NVIDIA_WHEEL_DRIFT": (drift, None),
    "UNSAFE_LIBRARY_PATH": (unsafe_path, None),
    "LOW_DISK": (low_disk, lambda env: setattr(env, "host", HostResources(disks=[DiskSpace(
        purpose="site-packages", path="/venv/lib", free_mib=50_000, total_mib=100_000)]))),
    "LOW_HOST_MEMORY": (low_memory, lambda env: setattr(env, "host", HostResources(memory_total_mib=16_000,
                                                                                    memory_available_mib=9_000))),
    "FILE_CLOBBER": (clobber, None),
    "FRAMEWORK_CONFLICT": (framework_conflict, None),
    "TORCHVISION_MISMATCH": (torchvision, lambda env: torchvision(env, "0.20.1+cu121")),
    "PYTHON_UNSUPPORTED": (old_python, None),
    "GPU_MEMORY_BUSY": (busy, None),
    "KNOWN_BAD": (known_bad, None),
    "UNKNOWN_FRAMEWORK_BUILD": (unknown_build, None),
    "TOOLKIT_NEWER_THAN_DRIVER": (new_toolkit, None),
    "LIBRARY_MISSING": (missing_library, None),
    "LIBRARY_MISMATCH": (older_library, None),
}
INFO = {"UNKNOWN_FRAMEWORK_BUILD", "TOOLKIT_NEWER_THAN_DRIVER"}  # README: information, not problems


@pytest.fixture(scope="module")
def matrix():
    return snapshot_matrix()


def _codes(env: Environment, matrix) -> dict[str, str]:
    return {f.code: f.severity for f in diagnose(env, matrix)}


def test_the_healthy_machine_has_no_problem(matrix):
    findings = diagnose(healthy(), matrix)
    assert [f.code for f in findings] == []
    assert summary_exit(findings) == 0


def test_every_documented_code_has_a_case():
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = readme.split("### Finding codes", 1)[1].split("\n\n", 2)[1]  # the list of codes
    codes = {c for c in re.findall(r"`([A-Z_]{4,})`", section) if c not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    assert codes == set(CASES)


@pytest.mark.parametrize("code", list(CASES))
def test_code_is_raised_by_the_problem_and_not_by_its_healthy_twin(matrix, code: str):
    cause, twin = CASES[code]
    broken = healthy()
    cause(broken)
    found = _codes(broken, matrix)
    assert code in found, f"{code} not raised: {found}"
    assert (found[code] == "info") is (code in INFO)
    fine = healthy()
    if twin is not None:
        twin(fine)
    assert code not in _codes(fine, matrix)


def test_diagnose_leaves_the_environment_as_it_was(matrix):
    env = healthy()
    shadowed(env)
    before = copy.deepcopy(env).to_dict()
    diagnose(env, matrix)
    assert env.to_dict() == before
