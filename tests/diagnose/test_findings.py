"""Tests of cudamatrix/diagnose/findings.py.

Each finding code is raised by a minimal Environment that has the problem, and not by its healthy twin.

The healthy machine: a Tesla T4 (compute capability 7.5) on driver 550.54.15 (CUDA 12.4), Python 3.11,
torch 2.5.1+cu121 with the cuDNN wheel it pins. Each case changes one thing. Runs on the frozen matrix
snapshot kept with the tests; the cases rest on NVIDIA's tables as copied there (driver floors, the
Kepler driver branch, compiled architectures of the torch wheels).

Doctor's finding registry (``cudamatrix.diagnose.findings``): one table per finding function, each asked on its own.

A case is an Environment built here (on the small matrix of ``smallmatrix``) -> the Findings of that one function,
as (code, severity, title). The expected answers come from the documents named above each table; the whole
wording of every finding is pinned by ``tests/diagnose/test_findings.py``. ``diagnose`` itself is the loop over
:data:`FINDINGS`: the last tests pin the registry's order and the severity sort.

Doctor tables: a machine's facts and the finding the cited document implies, side by side.

The matrix is ``smallmatrix``'s (facts copied from NVIDIA's documents), so the tables do not move when the
shipped data changes; environments are built in the test.

Doctor tables, second part: the driver's state, the installed build against the machine, the nvidia-* wheels
a framework declares, and the toolkit next to the driver. Small matrix of ``smallmatrix``; environments built
here.

Facts: CUDA Toolkit Release Notes (12.1 GA needs 530.30.02; any 12.x runs on 525.60.13 under minor-version
compatibility; Kepler's last driver branch is R470, "Data Center Driver Support" of the driver/architecture
matrix); pip's resolver semantics for Requires-Dist (an ``==`` pin is met only by that version).

Doctor's findings, whole: code, severity, title, evidence, fix and pip command of every finding, for
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

import copy
from collections.abc import Callable

import pytest
from packaging.version import Version
from support.smallmatrix import ARCHS, NOTES, ROW, build, release, replace, variant
from support.snapshot import snapshot_matrix

from cudamatrix.diagnose import extensions, findings, findlinks, host, loads, wheels
from cudamatrix.diagnose.codes import DOCTOR
from cudamatrix.diagnose.context import Diagnosis
from cudamatrix.diagnose.findings import Installed, diagnose, match_installed, summary_exit
from cudamatrix.diagnose.stated import stated_build
from cudamatrix.matrix.data import Advisory, AdvisoryFile, FrameworkFile, FrameworkRelease, Variant
from cudamatrix.models import (
    Context,
    DiskSpace,
    Driver,
    Environment,
    Extension,
    ExtensionObject,
    FileConflict,
    Finding,
    Framework,
    GpuInfo,
    GpuProcess,
    HostResources,
    Library,
    LibraryLoad,
    Note,
    PythonInfo,
    Severity,
    Toolkit,
    ToolMessage,
)
from cudamatrix.solve.rules import Reason

# --- diagnose ------------------------------------------------------------------------------------------------------

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


def known_bad(env, found="8.0.3"):  # advisory CM-2022-001: torch>=1.12,<1.13 on a cuDNN older than 8.3.2 (functorch#926)
    _torch(env, "1.12.1+cu116", "cu116", "11.6")
    env.messages = [ToolMessage(tool="torch", kind="library_version", library="cudnn", built="8.3.2", found=found,
                                text="cuDNN version incompatibility")]


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


def extension_abi(env):  # the loader's words in a paste (tests/data/pastes/undefined-symbol_flash-attn-2.5.7_...)
    env.messages = [ToolMessage(tool="loader", kind="undefined_symbol", library="torch", package="flash-attn",
                                soname="flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so",
                                symbol="_ZN3c104cuda9SetDeviceEi",
                                text="flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: undefined symbol: "
                                     "_ZN3c104cuda9SetDeviceEi")]


def extension_same_build(env):  # xFormers' block naming the torch it found as the one it was built for
    env.messages = [ToolMessage(tool="xformers", kind="extension_built_for", library="torch", package="xformers",
                                built="2.5.1+cu121", found="2.5.1+cu121", text="PyTorch 2.5.1+cu121 with CUDA 1201 "
                                "(you have 2.5.1+cu121)")]


def extension_pin(env):  # pip's resolver in a paste (tests/data/pastes/pip-resolver_vllm-0.6.3-...)
    env.messages = [ToolMessage(tool="pip", kind="requirement_conflict", library="torch", package="vllm",
                                package_version="0.6.3", requirement="==2.4.0", found="2.5.1+cu121",
                                text="vllm 0.6.3 requires torch==2.4.0, but you have torch 2.5.1+cu121 which is "
                                     "incompatible")]


def extension_cuda(env, major="11"):  # ONNX Runtime's words (tests/data/pastes/onnxruntime-provider_...): a CUDA 11
    env.messages = [ToolMessage(tool="onnxruntime", kind="provider_load_failed", library="cublaslt",  # provider
                                package="onnxruntime-gpu", soname=f"libcublasLt.so.{major}", built=major,
                                text=f"Failed to load library libonnxruntime_providers_cuda.so with error: "
                                     f"libcublasLt.so.{major}: cannot open shared object file")]

XF_SO = "site-packages/xformers/_C.so"


def xformers_abi(env, missing: int = 1):
    # xformers 0.0.29.post3's _C.so needs c10::cuda::SetDevice(signed char); torch 2.14.1 defines only
    # SetDevice(signed char, bool) (nm evidence in tests/pastes/test_extensions.py); the twin: all defined
    env.extensions = [Extension(name="xformers", version="0.0.29.post3", built_for="2.6.0+cu124",
                                built_for_source="xformers/cpp_lib.json",
                                objects=[ExtensionObject(path=XF_SO, needed=["libc10.so", "libcudart.so.12"],
                                                         torch_symbols=165, missing_count=missing,
                                                         missing=["_ZN3c104cuda9SetDeviceEa"][:missing])])]


def xformers_pin(env, pin: str = "torch==2.6.0"):  # xformers 0.0.29.post3's METADATA: Requires-Dist: torch==2.6.0
    env.extensions = [Extension(name="xformers", version="0.0.29.post3", declares=[pin])]


def cuda13_extension(env, soname: str = "libcublasLt.so.13"):
    # onnxruntime-gpu 1.31.1's CUDA provider needs libcublasLt.so.13; torch 2.5.1+cu121 is a CUDA 12 build
    env.extensions = [Extension(name="onnxruntime-gpu", version="1.31.1", objects=[ExtensionObject(
        path="site-packages/onnxruntime/capi/libonnxruntime_providers_cuda.so", needed=[soname])])]


def cupy_twice(env, other: str | None = "cupy-cuda11x"):
    env.packages["cupy-cuda12x"] = "13.6.0"
    if other:
        env.packages[other] = "13.6.0"


def xformers_kernels(env, gpu: tuple[str, str] | None = ("Tesla M60", "5.2")):
    # xformers 0.0.29.post3's _C.so: its .nv_fatbin holds SASS sm_60 sm_70 sm_75 sm_80 sm_90 and PTX compute_60
    # compute_80 (cuobjdump --list-elf / --list-ptx; tests/pastes/test_extensions.py reads the real file): a
    # Maxwell Tesla M60 (5.2) has no kernel in it; the twin, the healthy T4 (7.5), runs its sm_75 SASS
    env.extensions = [Extension(name="xformers", version="0.0.29.post3", objects=[ExtensionObject(
        path=XF_SO, needed=["libc10.so", "libcudart.so.12"], sass=["6.0", "7.0", "7.5", "8.0", "9.0"],
        ptx=["6.0", "8.0"])])]
    if gpu:
        env.gpus = [GpuInfo(index=0, name=gpu[0], compute_capability=gpu[1], memory_total_mib=8192)]


def jax_plugin(env, plugin: str = "0.4.34"):
    env.packages.update({"jax": "0.4.35", "jaxlib": "0.4.35", "jax-cuda12-plugin": plugin, "jax-cuda12-pjrt": "0.4.35"})


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
    "KNOWN_BAD": (known_bad, lambda env: known_bad(env, found="8.3.2")),
    "UNKNOWN_FRAMEWORK_BUILD": (unknown_build, None),
    "TOOLKIT_NEWER_THAN_DRIVER": (new_toolkit, None),
    "LIBRARY_MISSING": (missing_library, None),
    "LIBRARY_MISMATCH": (older_library, None),
    "EXTENSION_ABI_MISMATCH": (extension_abi, extension_same_build),
    "EXTENSION_PIN_MISMATCH": (extension_pin, None),
    "EXTENSION_CUDA_MISMATCH": (extension_cuda, lambda env: extension_cuda(env, "12")),  # torch here is cu121
    "EXTENSION_VARIANT_CLASH": (cupy_twice, lambda env: cupy_twice(env, None)),
    "JAX_PLUGIN_MISMATCH": (jax_plugin, lambda env: jax_plugin(env, "0.4.35")),
    "EXTENSION_ARCH_UNSUPPORTED": (xformers_kernels, lambda env: xformers_kernels(env, None)),
}

# the same codes from an installed extension's own files (detect.extensions), not from a paste's words
LIVE_CASES: dict[str, tuple[Callable[[Environment], None], Callable[[Environment], None]]] = {
    "EXTENSION_ABI_MISMATCH": (xformers_abi, lambda env: xformers_abi(env, missing=0)),
    "EXTENSION_PIN_MISMATCH": (xformers_pin, lambda env: xformers_pin(env, "torch==2.5.1")),
    "EXTENSION_CUDA_MISMATCH": (cuda13_extension, lambda env: cuda13_extension(env, "libcublasLt.so.12")),
    "EXTENSION_ARCH_UNSUPPORTED": (xformers_kernels, lambda env: xformers_kernels(env, ("NVIDIA H100", "9.0"))),
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
    """Every doctor code of the one table the reference is generated from (diagnose/codes.py) has a case here
    that raises it, and every case's code is in that table."""
    assert {c.code for c in DOCTOR} == set(CASES)


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


@pytest.mark.parametrize("code", list(LIVE_CASES))
def test_code_is_raised_by_an_installed_extension_and_not_by_its_healthy_twin(matrix, code: str):
    cause, twin = LIVE_CASES[code]
    broken, fine = healthy(), healthy()
    cause(broken)
    twin(fine)
    assert _codes(broken, matrix).get(code) == "error" and code not in _codes(fine, matrix)


def test_diagnose_leaves_the_environment_as_it_was(matrix):
    env = healthy()
    shadowed(env)
    before = copy.deepcopy(env).to_dict()
    diagnose(env, matrix)
    assert env.to_dict() == before


# --- diagnose findings registry ------------------------------------------------------------------------------------

A = ["3.7", "5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0"]


CU121 = variant("cu121", "12.1", archs=A, cudnn="9.1.0", local_version="+cu121")


CU124 = variant("cu124", "12.4", archs=A, cudnn="9.1.0", local_version="+cu124", pypi_default=True)


CPU = variant("cpu", None, local_version="+cpu")


TORCH = replace(release("2.5.1", CU121, CU124, CPU), companions={"torchvision": "0.20.1", "torchaudio": "2.5.1"})


TORCH24 = release("2.4.0", variant("cu124", "12.4", local_version="+cu124"))  # no arch list, no cuDNN


M = build(TORCH, TORCH24)


T4 = GpuInfo(index=0, name="Tesla T4", compute_capability="7.5")


K80 = GpuInfo(index=0, name="Tesla K80", compute_capability="3.7")


RTX5090 = GpuInfo(index=0, name="NVIDIA GeForce RTX 5090", compute_capability="12.0")


def env(*, driver="550.54.15", status="ok", gpus=(T4,), torch="2.5.1+cu121", python="3.11.9", packages=None,
        **kw) -> Environment:
    fw = [Framework(name="torch", version=torch, variant=torch.partition("+")[2] or None)] if torch else []
    pk = {"torch": torch} if torch else {}
    pk.update(packages or {})
    drv = driver if isinstance(driver, Driver) else Driver(version=driver, status=status)
    return Environment(origin="file", driver=drv, gpus=list(gpus),
                       python=PythonInfo(version=python, platform="linux_x86_64"), frameworks=fw, packages=pk, **kw)


def ask(check, e: Environment, matrix=M) -> list[tuple[str, str, str]]:
    return [(f.code, f.severity, f.title) for f in check(Diagnosis(e, matrix))]


NO_DRIVER = "No NVIDIA driver is installed or loaded"


MISMATCH = "The kernel driver and the user-space NVIDIA libraries differ"


NO_DEVICE = "The driver is present but no GPU is visible"


UNUSABLE = "A GPU is visible but the driver reports an error"


# The driver's state as detect read it (/proc/driver/nvidia/version, NVML's "Driver/library version mismatch",
# nvidia-smi's "No devices were found" and "ERR!"): each state is its own finding; NO_DRIVER is only a warning for
# a CPU build (PyTorch "Get Started": CPU wheels need no driver).
DRIVER_STATE = [
    (findings.no_driver, env(driver=None, status="absent"), [("NO_DRIVER", "error", NO_DRIVER)]),
    (findings.no_driver, env(driver=None, status="absent", torch="2.5.1+cpu"), [("NO_DRIVER", "warning", NO_DRIVER)]),
    (findings.no_driver, env(), []),
    (findings.driver_library_mismatch, env(driver=Driver(status="mismatch")),
     [("DRIVER_LIBRARY_MISMATCH", "error", MISMATCH)]),
    (findings.driver_library_mismatch, env(driver=None, status="absent"), []),
    (findings.no_device_visible, env(driver=Driver(status="no_device"), gpus=()),
     [("NO_DEVICE_VISIBLE", "error", NO_DEVICE)]),
    (findings.no_device_visible, env(), []),
    (findings.gpu_unusable, env(status="error"), [("GPU_UNUSABLE", "error", UNUSABLE)]),
    (findings.gpu_unusable, env(driver=Driver(status="mismatch")), []),
]


@pytest.mark.parametrize("check, e, expected", DRIVER_STATE)
def test_driver_state(check, e, expected):
    assert ask(check, e) == expected


def test_no_device_visible_names_cuda_visible_devices():
    e = env(driver=Driver(status="no_device"), gpus=(), context=Context(env={"CUDA_VISIBLE_DEVICES": "-1"}))
    (f,) = findings.no_device_visible(Diagnosis(e, M))
    assert f.evidence == ["the driver answers but lists no GPU", "CUDA_VISIBLE_DEVICES='-1'"]


# The CUDA toolkit's lib64/stubs/libcuda.so is for linking only: first on the search path, every call fails.
STUB = [
    ([Library(name="cuda", soname="libcuda.so.1", path="/usr/local/cuda/lib64/stubs/libcuda.so.1", origin="LD_LIBRARY_PATH",
              loaded_first=True, stub=True)], [("STUB_LIBCUDA", "error", "A link-time stub libcuda is on the search path")]),
    ([Library(name="cuda", soname="libcuda.so.1", path="/s/libcuda.so.1", origin="LD_LIBRARY_PATH", stub=True)], []),
    ([Library(name="cuda", soname="libcuda.so.1", path="/usr/lib/libcuda.so.1", origin="ldconfig", loaded_first=True)], []),
]


@pytest.mark.parametrize("libraries, expected", STUB)
def test_stub_libcuda(libraries, expected):
    assert ask(findings.stub_libcuda, env(libraries=libraries)) == expected


# Data-center "CUDA Toolkit, Driver, and Architecture Matrix": Kepler support ended with R470; release notes: the
# first driver for Blackwell (12.0) is that of CUDA 12.8, 570.26. A paste states a driver without a status.
GPU_DRIVER = [
    (env(driver="535.104.05", gpus=(K80,)), [("GPU_UNSUPPORTED_BY_DRIVER", "error", "Tesla K80 (Kepler) is not "
                                                                                    "supported by driver branch 535")]),
    (env(driver="470.82.01", gpus=(K80,)), []),
    (env(driver="565.57.01", gpus=(RTX5090,)), [("GPU_UNSUPPORTED_BY_DRIVER", "error", "Driver 565.57.01 is older "
                                                                                       "than the first driver for "
                                                                                       "NVIDIA GeForce RTX 5090")]),
    (env(driver="565.57.01", status="unknown", gpus=(RTX5090,)), [
        ("GPU_UNSUPPORTED_BY_DRIVER", "error", "Driver 565.57.01 is older than the first driver for NVIDIA GeForce "
                                               "RTX 5090")]),
    (env(driver="565.57.01", status="mismatch", gpus=(RTX5090,)), []),
    (env(driver="570.26", gpus=(RTX5090,)), []),
]


@pytest.mark.parametrize("e, expected", GPU_DRIVER)
def test_gpu_unsupported_by_driver(e, expected):
    assert ask(findings.gpu_unsupported_by_driver, e) == expected


# --- the build findings, one installed framework at a time -------------------------------------------------------
def judged(e: Environment):
    d = Diagnosis(e, M)
    return d, findings.Judged(d, d.installed[0])


# A release the matrix lacks is judged on what the environment states (its +cuXXX tag).
NOT_IN_MATRIX = [
    (env(torch="2.6.0+cu124"), [("UNKNOWN_FRAMEWORK_BUILD", "info", "torch 2.6.0+cu124 is not in the matrix test")]),
    (env(torch="2.5.1+cu999"), [("UNKNOWN_FRAMEWORK_BUILD", "info", "torch 2.5.1+cu999 is not in the matrix test")]),
    (env(), []),
]


@pytest.mark.parametrize("e, expected", NOT_IN_MATRIX)
def test_not_in_matrix(e, expected):
    d, j = judged(e)
    assert [(f.code, f.severity, f.title) for f in findings.not_in_matrix(d, j)] == expected


# PyTorch "Get Started": the +cpu wheels carry no CUDA; only a GPU with a usable driver makes that a problem.
CPU_ONLY = [
    (env(torch="2.5.1+cpu"), [("CPU_ONLY_BUILD", "error", "torch 2.5.1+cpu is a CPU-only build on a GPU machine")]),
    (env(torch="2.5.1+cpu", status="unknown"), [("CPU_ONLY_BUILD", "error", "torch 2.5.1+cpu is a CPU-only build on "
                                                                           "a GPU machine")]),
    (env(torch="2.5.1+cpu", gpus=()), []),
    (env(torch="2.5.1+cpu", driver=Driver(status="mismatch")), []),
    (env(), []),
]


@pytest.mark.parametrize("e, expected", CPU_ONLY)
def test_cpu_only_build(e, expected):
    d, j = judged(e)
    assert [(f.code, f.severity, f.title) for f in findings.cpu_only_build(d, j)] == expected


# The solver's rules on the installed build, through REASON_FINDINGS: CUDA 12.1 needs >= 525.60.13 under
# minor-version compatibility (release notes, CUDA Compatibility guide); cuDNN 9.1.0 supports compute capability
# 5.0 and newer (cuDNN Support Matrix), so a K80 (3.7) is refused.
BROKEN_RULES = [
    (env(driver="520.61.05"), [("DRIVER_TOO_OLD", "error", "The driver is too old for torch 2.5.1+cu121")]),
    (env(driver="470.82.01", gpus=(K80,)), [
        ("DRIVER_TOO_OLD", "error", "The driver is too old for torch 2.5.1+cu121"),
        ("CUDNN_MISMATCH", "error", "cuDNN of torch 2.5.1+cu121 does not support the GPU")]),
    (env(driver="570.26", gpus=(RTX5090,)), [("ARCH_UNSUPPORTED", "error", "torch 2.5.1+cu121 has no kernel image for "
                                                                          "this GPU (\"no kernel image is available\")")]),
    (env(), []),
    (env(torch="2.5.1+cpu"), []),
    (env(driver="520.61.05", gpus=()), []),
]


@pytest.mark.parametrize("e, expected", BROKEN_RULES)
def test_broken_rules(e, expected):
    d, j = judged(e)
    assert [(f.code, f.severity, f.title) for f in findings.broken_rules(d, j)] == expected


UNKNOWN_FACTS = [
    (env(torch="2.4.0+cu124"), [("UNKNOWN_FRAMEWORK_BUILD", "info", "Some facts about torch 2.4.0+cu124 are not in "
                                                                    "the matrix test")]),
    (env(torch="2.6.0+cu124"), []),  # judged on its stated facts: not_in_matrix listed them
    (env(), []),
]


@pytest.mark.parametrize("e, expected", UNKNOWN_FACTS)
def test_unknown_facts(e, expected):
    d, j = judged(e)
    assert [(f.code, f.severity, f.title) for f in findings.unknown_facts(d, j)] == expected


REASONS = [
    ("driver_floor", findings.driver_too_old, "DRIVER_TOO_OLD"),
    ("arch", findings.arch_unsupported, "ARCH_UNSUPPORTED"),
    ("cudnn_gpu", findings.cudnn_unsupported_gpu, "CUDNN_MISMATCH"),
]


@pytest.mark.parametrize("rule, to_finding, code", REASONS)
def test_reason_findings(rule, to_finding, code):
    assert findings.REASON_FINDINGS[rule] is to_finding
    f = to_finding("torch 2.5.1", Reason(rule, "the sentence", "the row", need_driver="550.54.14"))
    assert f.code == code and f.severity == "error" and f.evidence[0] == "the sentence"
    assert set(findings.REASON_FINDINGS) == {"driver_floor", "arch", "cudnn_gpu"}


# pytorch/pytorch RELEASE.md: torch 2.5.1's wheels are for the Python versions its row lists (3.10-3.12 here).
PYTHON = [
    (env(python="3.13.1"), [("PYTHON_UNSUPPORTED", "error", "torch 2.5.1+cu121 is not built for Python 3.13")]),
    (env(python="3.12.4"), []),
    (env(python=None), []),
    (env(python="3.13.1", torch="2.6.0+cu124"), []),  # a release the matrix lacks: its Python versions are unknown
]


@pytest.mark.parametrize("e, expected", PYTHON)
def test_python_unsupported(e, expected):
    assert ask(findings.python_unsupported, e) == expected


# --- library loads (ld.so(8) search order, as the loader model predicts it) ---------------------------------------
WHEEL = "/v/site-packages/nvidia/cudnn/lib/libcudnn.so.9"


WHEEL_DIR = "/v/site-packages/nvidia/cudnn/lib"


OPT = "/opt/cudnn/lib/libcudnn.so.9"


RPATH = "DT_RPATH of libtorch_cuda.so"


def _lib(path, version, origin, first=False, soname="libcudnn.so.9"):
    return Library(name="cudnn", soname=soname, path=path, version=version, origin=origin, loaded_first=first)


def _load(path, rule, **kw):
    return LibraryLoad("torch", "libcudnn.so.9", path, rule, expected=WHEEL, expected_rule=RPATH, **kw)


def _opened(soname, path, rule, expected=None, **kw):
    """A library the wheel's cuDNN 9 shim opens itself at run time (dlopen by name: data/loaders.json)."""
    return LibraryLoad("torch", soname, path, rule, requested_by=WHEEL, how="dlopen", expected=expected,
                       expected_rule=f"DT_RUNPATH of {WHEEL}" if expected else None, **kw)


# a cuDNN 9.19 wheel's shim with a system-style 9.14 folder first on LD_LIBRARY_PATH (issue #22): the shim is the
# wheel's, the sub-libraries it opens by name are the system's
MIXED = [LibraryLoad("torch", "libcudnn.so.9", WHEEL, RPATH, version="9.19.0"),
         _opened("libcudnn_graph.so.9", "/opt/cudnn/lib/libcudnn_graph.so.9", "LD_LIBRARY_PATH",
                 f"{WHEEL_DIR}/libcudnn_graph.so.9", version="9.14.0", expected_version="9.19.0"),
         _opened("libcudnn_ops.so.9", "/opt/cudnn/lib/libcudnn_ops.so.9", "LD_LIBRARY_PATH",
                 f"{WHEEL_DIR}/libcudnn_ops.so.9", version="9.14.0", expected_version="9.19.0")]


SHADOWED = [
    ([_lib(OPT, "9.0.0", "LD_PRELOAD", True), _lib(WHEEL, "9.1.0", "wheel:nvidia-cudnn-cu12")],
     [_load(OPT, "already loaded (LD_PRELOAD)", how="LD_PRELOAD")],
     [("LIBRARY_PRELOADED", "error", f"LD_PRELOAD puts {OPT} in place of torch's libcudnn.so.9 (9.0.0 where the "
                                     "framework's own copy is 9.1.0)")]),
    ([_lib(OPT, "9.3.0", "LD_LIBRARY_PATH", True), _lib(WHEEL, "9.1.0", "wheel:nvidia-cudnn-cu12")],
     [_load(OPT, "LD_LIBRARY_PATH")],
     [("LIBRARY_SHADOWED", "error", f"torch will map {OPT} for libcudnn.so.9, not its own copy (9.3.0 where the "
                                    "framework's own copy is 9.1.0)")]),
    # the libraries one folder makes win are one finding, naming the folder and the rule
    ([], MIXED,
     [("LIBRARY_SHADOWED", "error", "torch will map libcudnn_graph.so.9, libcudnn_ops.so.9 from /opt/cudnn/lib "
                                    "(LD_LIBRARY_PATH), not its own copies (9.14.0 where the framework's own copy is "
                                    "9.19.0)")]),
    # no prediction (a paste): the search-order view, a warning
    ([_lib(OPT, "9.0.0", "LD_LIBRARY_PATH", True), _lib(WHEEL, "9.1.0", "wheel:nvidia-cudnn-cu12")], [],
     [("LIBRARY_SHADOWED", "warning", "libcudnn.so.9 on LD_LIBRARY_PATH (9.0.0) may win over the wheel's copy "
                                      "(9.1.0)")]),
    ([_lib(WHEEL, "9.1.0", "wheel:nvidia-cudnn-cu12", True)], [LibraryLoad("torch", "libcudnn.so.9", WHEEL, RPATH)],
     []),
]


@pytest.mark.parametrize("libraries, predicted, expected", SHADOWED)
def test_library_shadowed(libraries, predicted, expected):
    assert ask(loads.library_shadowed, env(libraries=libraries, library_loads=predicted)) == expected


def test_a_mixed_load_names_the_framework_own_opener_and_the_fix_names_the_folder():
    [f] = loads.library_shadowed(Diagnosis(env(library_loads=MIXED), M))
    assert f.evidence[-1] == (f"a mixed load: {WHEEL} is the framework's own copy, but the libraries it opens come "
                              "from /opt/cudnn/lib")
    assert f.fix == "remove /opt/cudnn/lib from LD_LIBRARY_PATH (cudamatrix env prints the export)"


# torch/backends/cudnn/__init__.py: the same major, and a runtime minor no lower than the compiled one (9.1.0). The
# cuDNN that runs is the one of the library answering cudnnGetVersion() (cuDNN 9's graph library: data/loaders.json).
GRAPH_9_0 = [LibraryLoad("torch", "libcudnn.so.9", WHEEL, RPATH, version="9.1.0"),
             _opened("libcudnn_graph.so.9", "/opt/cudnn/lib/libcudnn_graph.so.9", "LD_LIBRARY_PATH",
                     f"{WHEEL_DIR}/libcudnn_graph.so.9", version="9.0.0", expected_version="9.1.0")]


CUDNN_MAPPED = [
    ([_lib(WHEEL, "9.0.0", "wheel:nvidia-cudnn-cu12", True)], [LibraryLoad("torch", "libcudnn.so.9", WHEEL, RPATH)],
     [("CUDNN_MISMATCH", "error", f"torch 2.5.1+cu121 was built with cuDNN 9.1.0 but will run cuDNN 9.0.0 from "
                                  f"{WHEEL}")]),
    ([], GRAPH_9_0,
     [("CUDNN_MISMATCH", "error", "torch 2.5.1+cu121 was built with cuDNN 9.1.0 but will run cuDNN 9.0.0 from "
                                  "/opt/cudnn/lib/libcudnn_graph.so.9 (libcudnn_graph.so.9 answers cudnnGetVersion)")]),
    ([_lib(WHEEL, "9.3.0", "wheel:nvidia-cudnn-cu12", True)], [LibraryLoad("torch", "libcudnn.so.9", WHEEL, RPATH)],
     []),
    ([_lib(WHEEL, "unknown", "wheel:nvidia-cudnn-cu12", True)],
     [LibraryLoad("torch", "libcudnn.so.9", WHEEL, RPATH)], []),
    ([_lib(OPT, "9.0.0", "LD_LIBRARY_PATH", True)], [], []),  # no prediction: nothing said about the mapped copy
]


@pytest.mark.parametrize("libraries, predicted, expected", CUDNN_MAPPED)
def test_cudnn_mapped(libraries, predicted, expected):
    assert ask(loads.cudnn_mapped, env(libraries=libraries, library_loads=predicted)) == expected


# The fix stops what made the file win (ld.so(8): LD_LIBRARY_PATH, LD_PRELOAD), even with no framework copy to
# compare; a reinstall only where the framework's own copy is the wrong version.
CUDNN_FIX = [
    ([_lib(WHEEL, "9.0.0", "wheel:nvidia-cudnn-cu12", True)], [LibraryLoad("torch", "libcudnn.so.9", WHEEL, RPATH)],
     "reinstall the cuDNN wheel torch declares (cuDNN 9.1.0): cudamatrix fix"),
    ([], GRAPH_9_0, "remove /opt/cudnn/lib from LD_LIBRARY_PATH (cudamatrix env prints the export)"),
    ([_lib(OPT, "9.0.0", "LD_LIBRARY_PATH", True)], [LibraryLoad("torch", "libcudnn.so.9", OPT, "LD_LIBRARY_PATH")],
     "remove /opt/cudnn/lib from LD_LIBRARY_PATH (cudamatrix env prints the export)"),
    ([_lib(OPT, "9.0.0", "LD_PRELOAD", True)],
     [LibraryLoad("torch", "libcudnn.so.9", OPT, "already loaded (LD_PRELOAD)", how="LD_PRELOAD")],
     "remove it from LD_PRELOAD (cudamatrix env prints the change); a running notebook kernel keeps it until it is "
     "restarted without it"),
]


@pytest.mark.parametrize("libraries, predicted, fix", CUDNN_FIX)
def test_cudnn_mapped_fix(libraries, predicted, fix):
    [f] = loads.cudnn_mapped(Diagnosis(env(libraries=libraries, library_loads=predicted), M))
    assert f.fix == fix


# --- wheels (each distribution's METADATA Requires-Dist, as pip checks it) ----------------------------------------
CUDNN_REQ = {"torch": ["nvidia-cudnn-cu12==9.1.0.70; platform_system == \"Linux\""]}


DRIFT = [
    (dict(requirements=CUDNN_REQ, packages={"nvidia-cudnn-cu12": "9.1.0.70"}), []),
    (dict(requirements=CUDNN_REQ, packages={"nvidia-cudnn-cu12": "9.5.0.50"}), [
        ("NVIDIA_WHEEL_DRIFT", "error", "nvidia-cudnn-cu12 9.5.0.50 is installed; torch declares ==9.1.0.70")]),
    (dict(requirements=CUDNN_REQ), [
        ("NVIDIA_WHEEL_DRIFT", "error", "torch needs nvidia-cudnn-cu12==9.1.0.70, which is not installed")]),
    (dict(requirements={"torch": ["nvidia-cudnn-cu12==9.1.0.70; platform_system == \"Windows\""]}), []),
    (dict(requirements={"torch": ["not a requirement ((("]}), []),
]


@pytest.mark.parametrize("kw, expected", DRIFT)
def test_nvidia_wheel_drift(kw, expected):
    assert ask(wheels.nvidia_wheel_drift, env(**kw)) == expected


CONFLICT = [
    ({"torch": ["nvidia-cudnn-cu12==9.1.0.70"], "tensorflow": ["nvidia-cudnn-cu12==8.9.4.25"]},
     [("FRAMEWORK_CONFLICT", "error", "torch and tensorflow need different nvidia-* wheels")]),
    ({"torch": ["nvidia-cudnn-cu12==9.1.0.70"], "tensorflow": ["nvidia-cudnn-cu12>=9"]}, []),
    ({"torch": ["nvidia-cudnn-cu12==9.1.0.70"], "torchvision": ["nvidia-cudnn-cu12==8.9.4.25"]}, []),  # one family
]


@pytest.mark.parametrize("requirements, expected", CONFLICT)
def test_framework_conflict(requirements, expected):
    pk = {"nvidia-cudnn-cu12": "9.1.0.70", "tensorflow": "2.15.0", "torchvision": "0.20.1"}
    assert ask(wheels.framework_conflict, env(requirements=requirements, packages=pk)) == expected


CLOBBER = [
    ([FileConflict(path="nvidia/cudnn/lib/libcudnn.so.9", distributions=["nvidia-cudnn-cu12", "nvidia-cudnn-cu11"])],
     [("FILE_CLOBBER", "error", "nvidia-cudnn-cu11 and nvidia-cudnn-cu12 install the same file")]),
    ([FileConflict(path=p, distributions=["a", "b"]) for p in ("x", "y", "x")],
     [("FILE_CLOBBER", "error", "a and b install the same 2 files")]),
    ([], []),
]


@pytest.mark.parametrize("conflicts, expected", CLOBBER)
def test_file_clobber(conflicts, expected):
    assert ask(wheels.file_clobber, env(file_conflicts=conflicts)) == expected


# PyTorch "Previous PyTorch Versions": torch 2.5.1 pairs with torchvision 0.20.1 and torchaudio 2.5.1, from the same
# index (the same local tag).
COMPANIONS = [
    ({"torchvision": "0.19.0"}, [("TORCHVISION_MISMATCH", "error", "torchvision 0.19.0 does not match torch "
                                                                   "2.5.1+cu121 (needs 0.20.1+cu121)")]),
    ({"torchvision": "0.20.1+cu124"}, [("TORCHVISION_MISMATCH", "error", "torchvision 0.20.1+cu124 does not match "
                                                                         "torch 2.5.1+cu121 (needs 0.20.1+cu121)")]),
    ({"torchvision": "0.20.1+cu121", "torchaudio": "2.5.1"}, []),
    ({"torchvision": "0.20.1"}, []),
]


@pytest.mark.parametrize("packages, expected", COMPANIONS)
def test_torchvision_mismatch(packages, expected):
    assert ask(wheels.torchvision_mismatch, env(packages=packages)) == expected


# --- the host ------------------------------------------------------------------------------------------------------
BUSY = GpuInfo(index=0, name="Tesla T4", compute_capability="7.5", memory_total_mib=15360, memory_used_mib=14000,
               processes=[GpuProcess(pid=4242, name="python", used_memory_mib=13990)])


HOST = [
    (host.gpu_memory_busy, env(gpus=(BUSY,)), [("GPU_MEMORY_BUSY", "warning", "GPU 0 has 14000 of 15360 MiB in use")]),
    (host.gpu_memory_busy, env(gpus=(replace(BUSY, memory_used_mib=12000),)), []),
    (host.unsafe_library_path, env(notes=[Note(probe="unsafe library path", message="'' (the current folder)")]),
     [("UNSAFE_LIBRARY_PATH", "warning", "the library search path has folders others can plant libraries in")]),
    (host.unsafe_library_path, env(), []),
    (host.low_disk, env(host=HostResources(disks=[DiskSpace(purpose="site-packages", path="/v", free_mib=1024,
                                                            total_mib=9000)])),
     [("LOW_DISK", "warning", "only 1.0 GiB free on the disk of site-packages")]),
    (host.low_disk, env(host=HostResources(disks=[DiskSpace(purpose="temp", path="/t", free_mib=8192,
                                                            total_mib=9000)])), []),
    (host.low_host_memory, env(host=HostResources(memory_total_mib=65536, memory_available_mib=2000)),
     [("LOW_HOST_MEMORY", "warning", "only 2000 MiB of 65536 MiB host memory is available")]),
    (host.low_host_memory, env(host=HostResources(memory_total_mib=65536, memory_available_mib=6000)),
     [("LOW_HOST_MEMORY", "warning", "only 6000 MiB of 65536 MiB host memory is available")]),  # under 10 %
    (host.low_host_memory, env(host=HostResources(memory_total_mib=16384, memory_available_mib=4096)), []),
    (host.toolkit_newer_than_driver, env(driver=Driver(version="535.104.05", cuda_version="12.2", status="ok"),
                                         toolkits=[Toolkit(source="nvcc --version", version="12.4")]),
     [("TOOLKIT_NEWER_THAN_DRIVER", "info", "CUDA toolkit 12.4 is newer than the driver's CUDA 12.2")]),
    (host.toolkit_newer_than_driver, env(driver=Driver(version="535.104.05", cuda_version="12.2", status="ok"),
                                         toolkits=[Toolkit(source="nvcc --version", version="12.2")]), []),
]


@pytest.mark.parametrize("check, e, expected", HOST)
def test_host(check, e, expected):
    assert ask(check, e) == expected


# An advisory matches when every requirement it names matches an installed package, and its GPU and driver
# conditions hold (each advisory cites its own source).
ADV = Advisory(id="CM-TEST", affects=["torch==2.5.1+cu121"], symptom="a known failure", fix="upgrade",
               source="https://github.com/pytorch/pytorch/issues/1", gpu_compute_capabilities=["7.5"],
               driver="<550")


KNOWN_BAD = [
    (env(driver="535.104.05"), [("KNOWN_BAD", "error", "CM-TEST: a known failure")]),
    (env(driver="550.54.15"), []),
    (env(driver="535.104.05", gpus=(K80,)), []),
    (env(driver="535.104.05", torch="2.5.1+cpu"), []),
]


@pytest.mark.parametrize("e, expected", KNOWN_BAD)
def test_known_bad(e, expected):
    m = replace(M, advisories=AdvisoryFile(advisories=[ADV]))
    assert ask(host.known_bad, e, m) == expected


def test_the_registry_in_order():
    assert findings.FINDINGS == [
        findings.no_driver, findings.driver_library_mismatch, findings.no_device_visible, findings.gpu_unusable,
        findings.stub_libcuda, findings.gpu_unsupported_by_driver, findings.framework_builds,
        findings.python_unsupported, loads.library_shadowed, loads.cudnn_mapped, wheels.nvidia_wheel_drift,
        wheels.framework_conflict, wheels.file_clobber, wheels.torchvision_mismatch,
        extensions.extension_abi_mismatch, extensions.extension_pin_mismatch, extensions.extension_cuda_mismatch,
        findlinks.find_links_mismatch,
        extensions.extension_variant_clash, extensions.jax_plugin_mismatch, extensions.extension_arch_unsupported,
        host.gpu_memory_busy, host.unsafe_library_path, host.low_disk, host.low_host_memory, host.known_bad,
        host.toolkit_newer_than_driver]
    assert findings.BUILD_FINDINGS == [findings.not_in_matrix, findings.cpu_only_build, findings.broken_rules,
                                       findings.unknown_facts]


def test_every_finding_function_names_its_code_and_source():
    for fn in findings.FINDINGS + findings.BUILD_FINDINGS:
        assert fn.__doc__ and len(fn.__doc__) > 60, fn.__name__


def test_diagnose_lists_errors_then_warnings_then_info_in_registry_order():
    e = env(driver="520.61.05", torch="2.6.0+cu124", python="3.13.1",
            host=HostResources(memory_total_mib=65536, memory_available_mib=1000),
            toolkits=[Toolkit(source="nvcc --version", version="12.4")],
            notes=[Note(probe="unsafe library path", message="''")])
    e.driver.cuda_version = "11.8"
    codes = [f.code for f in findings.diagnose(e, M)]
    assert codes == ["DRIVER_TOO_OLD", "UNSAFE_LIBRARY_PATH", "LOW_HOST_MEMORY", "UNKNOWN_FRAMEWORK_BUILD",
                     "TOOLKIT_NEWER_THAN_DRIVER"]


# --- table doctor --------------------------------------------------------------------------------------------------

# a torch build for CUDA 12.1 with cuDNN 9.1.0 (constructed), paired with torchvision 0.20.1 (the pairing the
# PyTorch "Previous PyTorch Versions" page gives for torch 2.5.1: torch==2.5.1 torchvision==0.20.1)
CU121_table = variant("cu121", "12.1", archs=["5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0"], cudnn="9.1.0",
                local_version="+cu121")


TORCH_table = replace(release("2.5.1", CU121_table), companions={"torchvision": "0.20.1"})


WHEEL_CUDNN_table = "/v/site-packages/nvidia/cudnn/lib/libcudnn.so.9"


def env_table(*, driver="550.54.15", status="ok", gpus=(("Tesla T4", "7.5", 15360, 0),), libraries=(),
        packages=None, torch="2.5.1+cu121", torchvision=None, ld_path=None) -> Environment:
    pk = dict(packages or {})
    frameworks = []
    if torch:
        pk["torch"] = torch
        frameworks.append(Framework(name="torch", version=torch, variant=torch.partition("+")[2] or None))
    if torchvision:
        pk["torchvision"] = torchvision
    return Environment(
        origin="file", driver=Driver(version=driver, status=status),
        gpus=[GpuInfo(index=i, name=n, compute_capability=cc, memory_total_mib=tot, memory_used_mib=used)
              for i, (n, cc, tot, used) in enumerate(gpus)],
        libraries=list(libraries), packages=pk, frameworks=frameworks,
        python=PythonInfo(version="3.11.9", platform="linux_x86_64"),
        context=Context(env={"LD_LIBRARY_PATH": ld_path} if ld_path else {}))


def codes(environment: Environment, matrix=None) -> list[str]:
    return sorted(f.code for f in diagnose(environment, matrix or build(TORCH_table)))


def cudnn(path: str, version: str, origin: str, first: bool) -> Library:
    return Library(name="cudnn", soname="libcudnn.so.9" if version.startswith("9") else "libcudnn.so.8", path=path,
                   version=version, origin=origin, loaded_first=first)


def maps(path: str, rule: str, **kw) -> LibraryLoad:
    """The loader model's prediction: torch maps ``path`` for its libcudnn (``expected``: its own copy)."""
    return LibraryLoad("torch", path.rsplit("/", 1)[1], path, rule, **kw)


CUDNN_MAJOR = [
    ([cudnn("/opt/cudnn8/lib/libcudnn.so.8", "8.9.2", "LD_LIBRARY_PATH", True)],
     [maps("/opt/cudnn8/lib/libcudnn.so.8", "LD_LIBRARY_PATH")], ["CUDNN_MISMATCH"]),
    ([cudnn("/opt/cudnn9/lib/libcudnn.so.9", "9.0.0", "LD_LIBRARY_PATH", True),
      cudnn(WHEEL_CUDNN_table, "9.1.0", "wheel:nvidia-cudnn-cu12", False)], [], ["LIBRARY_SHADOWED"]),
    ([cudnn("/usr/lib/x86_64-linux-gnu/libcudnn.so.9", "9.0.0", "ldconfig", True),
      cudnn(WHEEL_CUDNN_table, "9.1.0", "wheel:nvidia-cudnn-cu12", False)], [maps(WHEEL_CUDNN_table, RPATH)], []),
    ([cudnn("/opt/cudnn9/lib/libcudnn.so.9", "9.0.0", "LD_LIBRARY_PATH", True),
      cudnn(WHEEL_CUDNN_table, "9.1.0", "wheel:nvidia-cudnn-cu12", False)],
     [maps("/opt/cudnn9/lib/libcudnn.so.9", "LD_LIBRARY_PATH", expected=WHEEL_CUDNN_table,
           expected_rule="DT_RUNPATH of libtorch_cuda.so")], ["CUDNN_MISMATCH", "LIBRARY_SHADOWED"]),
    ([cudnn("/usr/lib/x86_64-linux-gnu/libcudnn.so.8", "8.9.2", "ldconfig", True)], [], []),
    ([cudnn(WHEEL_CUDNN_table, "9.1.0", "wheel:nvidia-cudnn-cu12", True)], [maps(WHEEL_CUDNN_table, RPATH)], []),
    ([cudnn("/opt/cudnn9/lib/libcudnn.so.9", "9.1.0", "LD_LIBRARY_PATH", True),
      cudnn(WHEEL_CUDNN_table, "9.1.0", "wheel:nvidia-cudnn-cu12", False)], [], []),
]


@pytest.mark.parametrize("libraries, loads, expected", CUDNN_MAJOR)
def test_cudnn_major_that_loads_first(libraries, loads, expected):
    environment = env_table(libraries=libraries)
    environment.library_loads = loads
    assert codes(environment) == expected


def test_library_shadowed_severity_and_fix():
    libraries, loads, _ = CUDNN_MAJOR[3]
    predicted = env_table(libraries=libraries, ld_path="/opt/cudnn9/lib:/usr/local/nvidia/lib64")
    predicted.library_loads = loads
    shadow = next(f for f in diagnose(predicted, build(TORCH_table)) if f.code == "LIBRARY_SHADOWED")
    assert shadow.severity == "error"  # both versions are known and differ
    assert shadow.title == ("torch will map /opt/cudnn9/lib/libcudnn.so.9 for libcudnn.so.9, not its own copy "
                            "(9.0.0 where the framework's own copy is 9.1.0)")
    assert shadow.fix == "remove /opt/cudnn9/lib from LD_LIBRARY_PATH (cudamatrix env prints the export)"
    assert shadow.evidence == ["torch maps /opt/cudnn9/lib/libcudnn.so.9 for libcudnn.so.9 (LD_LIBRARY_PATH; "
                               "DT_NEEDED from the program), 9.0.0; its own copy: "
                               f"{WHEEL_CUDNN_table} (DT_RUNPATH of libtorch_cuda.so), 9.1.0"]
    # the same machine pasted without a prediction: whether torch's DT_RPATH wins is unknown, so a warning
    pasted = next(f for f in diagnose(env_table(libraries=libraries), build(TORCH_table)) if f.code == "LIBRARY_SHADOWED")
    assert pasted.severity == "warning"
    assert pasted.title == "libcudnn.so.9 on LD_LIBRARY_PATH (9.0.0) may win over the wheel's copy (9.1.0)"
    assert pasted.fix == "run cudamatrix doctor on the machine itself"


# cuDNN Support Matrix: cuDNN 9.1.0 supports compute capability 5.0 and newer, so a K80 (3.7) is refused.
CUDNN_GPU = [
    (("Tesla K80", "3.7", 11441, 0), ["CUDNN_MISMATCH"]),
    (("Tesla M60", "5.2", 8192, 0), []),
    (("Tesla T4", "7.5", 15360, 0), []),
]


@pytest.mark.parametrize("gpu, expected", CUDNN_GPU)
def test_doctor_cudnn_supports_the_gpu(gpu, expected):
    # a build with SASS for every GPU here, so only the cuDNN rule can refuse (Kepler's driver limit aside)
    v = variant("cu121", "12.1", archs=["3.7", "5.0", "7.5"], cudnn="9.1.0")
    found = [c for c in codes(env_table(gpus=(gpu,)), build(release("2.5.1", v))) if c != "GPU_UNSUPPORTED_BY_DRIVER"]
    assert found == expected


# PyTorch "Previous PyTorch Versions": torch 2.5.1 pairs with torchvision 0.20.1, both from the same index
# (so the same local tag, +cu121 from whl/cu121).
TORCHVISION = [
    ("2.5.1+cu121", "0.20.1+cu121", []),
    ("2.5.1+cu121", "0.20.1", []),               # no local tag stated: nothing contradicts
    ("2.5.1+cu121", "0.20.1+cu124", ["TORCHVISION_MISMATCH"]),
    ("2.5.1+cu121", "0.19.1+cu121", ["TORCHVISION_MISMATCH"]),
    ("2.5.1+cu121", "0.21.0", ["TORCHVISION_MISMATCH"]),
]


@pytest.mark.parametrize("torch, torchvision, expected", TORCHVISION)
def test_torchvision_pairs_with_torch(torch, torchvision, expected):
    assert codes(env_table(torch=torch, torchvision=torchvision)) == expected


def test_torchvision_fix_names_the_local_tag():
    found = diagnose(env_table(torchvision="0.20.1+cu124"), build(TORCH_table))
    tv = next(f for f in found if f.code == "TORCHVISION_MISMATCH")
    assert tv.fix == "pip install torchvision==0.20.1+cu121 from the same index as torch"


# CUDA Driver API, CUDA_ERROR_STUB_LIBRARY: the toolkit's lib64/stubs/libcuda.so is for linking only; a program
# that loads it instead of the driver's libcuda gets that error. Only the copy the loader picks matters.
STUB_table = [
    (True, True, ["STUB_LIBCUDA"]),
    (True, False, []),
    (False, True, []),
]


@pytest.mark.parametrize("stub, first, expected", STUB_table)
def test_stub_libcuda_table(stub, first, expected):
    lib = Library(name="cuda", soname="libcuda.so.1", path="/usr/local/cuda/lib64/stubs/libcuda.so.1",
                  origin="LD_LIBRARY_PATH", stub=stub, loaded_first=first)
    found = diagnose(env_table(libraries=[lib]), build(TORCH_table))
    assert [f.code for f in found] == expected
    if expected:
        assert found[0].severity == "error" and found[0].evidence == [lib.path]


# nvidia-smi reports a visible GPU it cannot use as "Unknown Error" / ERR!: the driver status is "error".
DRIVER_STATUS = [
    ("error", ["GPU_UNUSABLE"]),
    ("ok", []),
]


@pytest.mark.parametrize("status, expected", DRIVER_STATUS)
def test_gpu_unusable(status, expected):
    e = env_table(status=status)
    e.driver.error = "Unable to determine the device handle for GPU0000:00:1E.0: Unknown Error"
    found = [f for f in diagnose(e, build(TORCH_table)) if f.code == "GPU_UNUSABLE"]
    assert [f.code for f in found] == expected
    if found:
        assert found[0].severity == "error" and found[0].evidence == [e.driver.error]


# README, finding codes: GPU_MEMORY_BUSY warns when 80 % or more of a GPU's memory is in use.
BUSY_table = [
    (16000, 12800, ["GPU_MEMORY_BUSY"]),
    (16000, 12799, []),
    (16000, 16000, ["GPU_MEMORY_BUSY"]),
    (16000, 0, []),
    (16000, None, []),
]


@pytest.mark.parametrize("total, used, expected", BUSY_table)
def test_gpu_memory_busy_threshold(total, used, expected):
    found = diagnose(env_table(gpus=(("Tesla T4", "7.5", total, used),)), build(TORCH_table))
    busy = [f for f in found if f.code == "GPU_MEMORY_BUSY"]
    assert [f.code for f in busy] == expected
    if busy:
        assert busy[0].severity == "warning" and busy[0].title == f"GPU 0 has {used} of {total} MiB in use"


# Quansight/open-gpu-server#69: cuDNN 9.11 and later no longer support Volta (compute capability 7.0).
VOLTA = Advisory(id="CM-2025-003", affects=["nvidia-cudnn-cu12>=9.11"], gpu_compute_capabilities=["7.0"],
                 symptom="cuDNN 9.11 and later no longer support Volta", fix="Keep cuDNN at 9.10.x on Volta GPUs.",
                 source="https://github.com/Quansight/open-gpu-server/issues/69")


KNOWN_BAD_table = [
    ("9.11.0.98", "7.0", None, "550.54.15", ["KNOWN_BAD"]),
    ("9.10.2.21", "7.0", None, "550.54.15", []),
    ("9.11.0.98", "7.5", None, "550.54.15", []),
    (None, "7.0", None, "550.54.15", []),
    ("9.11.0.98", "7.0", "<550", "550.54.15", []),
    ("9.11.0.98", "7.0", ">=550", "550.54.15", ["KNOWN_BAD"]),
]


@pytest.mark.parametrize("cudnn_wheel, cc, driver_spec, driver, expected", KNOWN_BAD_table)
def test_known_bad_advisory(cudnn_wheel, cc, driver_spec, driver, expected):
    m = replace(build(TORCH_table), advisories=AdvisoryFile(advisories=[replace(VOLTA, driver=driver_spec)]))
    packages = {"nvidia-cudnn-cu12": cudnn_wheel} if cudnn_wheel else {}
    found = [f for f in diagnose(env_table(gpus=(("GPU", cc, 16000, 0),), packages=packages, driver=driver), m)
             if f.code == "KNOWN_BAD"]
    assert [f.code for f in found] == expected
    if found:
        assert found[0].title == "CM-2025-003: cuDNN 9.11 and later no longer support Volta"
        assert found[0].evidence == ["nvidia-cudnn-cu12>=9.11", VOLTA.source] and found[0].fix == VOLTA.fix


# --- table doctor builds -------------------------------------------------------------------------------------------

TORCH_builds = replace(release("2.5.1", CU121, CPU), python=["3.10", "3.11", "3.12"])


M_builds = build(TORCH_builds)


def env_builds(*, driver="550.54.15", status="ok", cc="7.5", torch="2.5.1+cu121", python="3.11.9", error=None,
        **kw) -> Environment:
    fw = [Framework(name="torch", version=torch, variant=torch.partition("+")[2] or None)] if torch else []
    e = Environment(origin="file", driver=Driver(version=driver, status=status, error=error),
                    gpus=[GpuInfo(index=0, name="GPU", compute_capability=cc)] if cc else [],
                    python=PythonInfo(version=python, platform="linux_x86_64"), frameworks=fw,
                    packages={"torch": torch} if torch else {}, **kw)
    return e


def codes_builds(e: Environment) -> list[tuple[str, str]]:
    return [(f.code, f.severity) for f in diagnose(e, M_builds)]


DRIVER = [
    # no driver: an error when a CUDA build is installed, a warning for a CPU build
    (dict(driver=None, status="absent"), [("NO_DRIVER", "error")]),
    (dict(driver=None, status="absent", torch="2.5.1+cpu"), [("NO_DRIVER", "warning")]),
    (dict(status="mismatch", error="Failed to initialize NVML: Driver/library version mismatch"),
     [("DRIVER_LIBRARY_MISMATCH", "error")]),
    (dict(status="no_device", cc=None), [("NO_DEVICE_VISIBLE", "error")]),
    (dict(status="error"), [("GPU_UNUSABLE", "error")]),
    # CUDA 12.1 on 525.60.13: minor-version compatibility, SASS for sm_75 present: fine
    (dict(driver="525.60.13"), []),
    (dict(driver="520.61.05"), [("DRIVER_TOO_OLD", "error")]),
    # a CPU build on a machine with a GPU and a working driver
    (dict(torch="2.5.1+cpu"), [("CPU_ONLY_BUILD", "error")]),
    # Kepler support ended with the R470 branch; cuDNN 9.1.0 supports compute capability 5.0 and newer only
    (dict(driver="535.104.05", cc="3.7"), [("GPU_UNSUPPORTED_BY_DRIVER", "error"), ("CUDNN_MISMATCH", "error")]),
    (dict(driver="470.82.01", cc="3.7"), [("DRIVER_TOO_OLD", "error"), ("CUDNN_MISMATCH", "error")]),
    (dict(cc="12.0", driver="570.86.10"), [("ARCH_UNSUPPORTED", "error")]),
    (dict(python="3.13.1"), [("PYTHON_UNSUPPORTED", "error")]),
]


@pytest.mark.parametrize("facts, expected", DRIVER)
def test_driver_and_build_findings(facts, expected):
    found = codes_builds(env_builds(**facts))
    assert found == expected
    assert summary_exit(diagnose(env_builds(**facts), M_builds)) == (1 if any(s == "error" for _, s in expected) else 0)


def test_no_device_visible_names_cuda_visible_devices_builds():
    e = env_builds(status="no_device", cc=None, context=Context(env={"CUDA_VISIBLE_DEVICES": ""}))
    (f,) = diagnose(e, M_builds)
    assert f.evidence == ["the driver answers but lists no GPU", "CUDA_VISIBLE_DEVICES=''"]


def test_no_driver_evidence_is_the_probes_words():
    e = env_builds(driver=None, status="absent", notes=[Note(probe="nvidia-smi", message="nvidia-smi: not found"),
                                                  Note(probe="python", message="unrelated")])
    (f,) = diagnose(e, M_builds)
    assert f.evidence == ["nvidia-smi: not found"]


def test_driver_too_old_fix_names_the_driver():
    # no build of this small matrix runs on R520 (CUDA 11.8): the driver floor is the whole answer
    (f,) = diagnose(env_builds(driver="520.61.05"), M_builds)
    assert f.fix == "upgrade the driver to >= 525.60.13"


LINUX = 'platform_system == "Linux" and platform_machine == "x86_64"'


WHEELS = [
    ({"torch": [f"nvidia-cudnn-cu12==9.1.0.70; {LINUX}"]}, {"nvidia-cudnn-cu12": "9.1.0.70"}, []),
    ({"torch": [f"nvidia-cudnn-cu12==9.1.0.70; {LINUX}"]}, {"nvidia-cudnn-cu12": "9.3.0.75"},
     [("NVIDIA_WHEEL_DRIFT", "nvidia-cudnn-cu12 9.3.0.75 is installed; torch declares ==9.1.0.70")]),
    ({"torch": [f"nvidia-cudnn-cu12==9.1.0.70; {LINUX}"]}, {},
     [("NVIDIA_WHEEL_DRIFT", "torch needs nvidia-cudnn-cu12==9.1.0.70, which is not installed")]),
    # a requirement for another platform does not apply here
    ({"torch": ['nvidia-cudnn-cu12==9.1.0.70; platform_system == "Windows"']}, {}, []),
    # behind an extra: applies when its distribution is installed
    ({"tensorflow": ['nvidia-cudnn-cu12==8.9.4.25; extra == "and-cuda"']}, {}, []),
    ({"tensorflow": ['nvidia-cudnn-cu12==8.9.4.25; extra == "and-cuda"']}, {"nvidia-cudnn-cu12": "8.9.4.25"}, []),
]


@pytest.mark.parametrize("requirements, wheels, expected", WHEELS)
def test_declared_wheels(requirements, wheels, expected):
    e = env_builds(requirements=requirements)
    e.packages.update(wheels)
    found = [(f.code, f.title) for f in diagnose(e, M_builds) if f.code == "NVIDIA_WHEEL_DRIFT"]
    assert found == expected


def test_two_frameworks_pinning_different_cudnn_conflict():
    # torch 2.5.1's wheel pins nvidia-cudnn-cu12==9.1.0.70, tensorflow[and-cuda] 2.15's pins 8.9.4.25
    e = env_builds(requirements={"torch": [f"nvidia-cudnn-cu12==9.1.0.70; {LINUX}"],
                          "tensorflow": ['nvidia-cudnn-cu12==8.9.4.25; extra == "and-cuda"']})
    e.packages.update({"tensorflow": "2.15.0", "nvidia-cudnn-cu12": "8.9.4.25"})
    conflict = [f for f in diagnose(e, M_builds) if f.code == "FRAMEWORK_CONFLICT"]
    assert [f.evidence for f in conflict] == [[
        "torch needs nvidia-cudnn-cu12==9.1.0.70, tensorflow needs nvidia-cudnn-cu12==8.9.4.25"]]
    # torchvision and torch are one family: never a conflict between them
    e2 = env_builds(requirements={"torch": [f"nvidia-cudnn-cu12==9.1.0.70; {LINUX}"],
                           "torchvision": [f"nvidia-cudnn-cu12==9.1.0.70; {LINUX}"]})
    e2.packages["nvidia-cudnn-cu12"] = "9.1.0.70"
    assert [f.code for f in diagnose(e2, M_builds)] == []


def test_file_clobber_builds():
    e = env_builds(file_conflicts=[FileConflict(path="cupy/__init__.py", distributions=["cupy-cuda12x", "cupy-cuda13x"])])
    (f,) = diagnose(e, M_builds)
    assert (f.code, f.title, f.evidence) == ("FILE_CLOBBER", "cupy-cuda12x and cupy-cuda13x install the same file",
                                             ["cupy/__init__.py"])
    # several files of the same pair: one finding that counts them and lists them sorted
    e.file_conflicts.append(FileConflict(path="cupy/_core/core.so", distributions=["cupy-cuda13x", "cupy-cuda12x"]))
    (f,) = diagnose(e, M_builds)
    assert (f.code, f.title, f.evidence) == ("FILE_CLOBBER", "cupy-cuda12x and cupy-cuda13x install the same 2 files",
                                             ["cupy/__init__.py", "cupy/_core/core.so"])


TOOLKIT = [
    ("12.4", "13.0.88", [("TOOLKIT_NEWER_THAN_DRIVER", "info")]),
    ("13.0", "13.0.88", []),
    ("13.0", "12.8.93", []),
    (None, "13.0.88", []),
]


@pytest.mark.parametrize("driver_cuda, toolkit, expected", TOOLKIT)
def test_toolkit_newer_than_the_driver_is_information(driver_cuda, toolkit, expected):
    e = env_builds(toolkits=[Toolkit(source="nvcc --version", version=toolkit, path="/usr/local/cuda/bin/nvcc")])
    e.driver.cuda_version = driver_cuda
    assert codes_builds(e) == expected
    assert summary_exit(diagnose(e, M_builds)) == 0


# which matrix row an installed framework is: its release, and its variant from the detected build; a plain
# version from the default index is the variant the matrix marks pypi_default (torch 2.5.1 on Linux x86_64:
# the CUDA 12.4 build); a local version the matrix lacks is no known variant
DEFAULT = replace(release("2.5.1", CU121, replace(CU121, name="cu124", cuda=CU121.cuda, pypi_default=True,
                                                  local_version="+cu124"), CPU), python=["3.11"])


MATCH = [
    ("torch", "2.5.1", None, "cu124"),
    ("torch", "2.5.1+cu121", "cu121", "cu121"),
    ("torch", "2.5.1+cu999", None, None),
    ("torch", "9.9.9", None, None),
    ("torchvision", "0.20.1", None, "skip"),
]


@pytest.mark.parametrize("name, version, variant_name, matched", MATCH)
def test_installed_framework_matched_to_its_row(name, version, variant_name, matched):
    from cudamatrix.diagnose.findings import match_installed

    e = Environment(frameworks=[Framework(name=name, version=version, variant=variant_name),
                                Framework(name="jax", version="0.4.30", variant="cuda12")])
    found = match_installed(e, build(DEFAULT))
    if matched == "skip":
        assert [i.name for i in found] == ["jax"]
        return
    inst = found[0]
    assert (inst.name, inst.version) == (name, version)
    assert (inst.variant.name if inst.variant else None) == matched
    assert inst.variant_name == (variant_name or matched)
    assert (inst.release is not None) is (version.startswith("2.5.1"))
    assert [i.name for i in found] == ["torch", "jax"]


TITLES = [
    (dict(driver=None, status="absent"), "No NVIDIA driver is installed or loaded"),
    (dict(status="mismatch"), "The kernel driver and the user-space NVIDIA libraries differ"),
    (dict(status="no_device", cc=None), "The driver is present but no GPU is visible"),
    (dict(status="error"), "A GPU is visible but the driver reports an error"),
    (dict(driver="520.61.05"), "The driver is too old for torch 2.5.1+cu121"),
    (dict(torch="2.5.1+cpu"), "torch 2.5.1+cpu is a CPU-only build on a GPU machine"),
    (dict(cc="12.0", driver="570.86.10"), 'torch 2.5.1+cu121 has no kernel image for this GPU ("no kernel image is '
                                          'available")'),
    (dict(python="3.13.1"), "torch 2.5.1+cu121 is not built for Python 3.13"),
    (dict(driver="535.104.05", cc="3.7"), "GPU (Kepler) is not supported by driver branch 535"),
]


@pytest.mark.parametrize("facts, title", TITLES)
def test_finding_titles(facts, title):
    assert diagnose(env_builds(**facts), M_builds)[0].title == title


def test_drift_findings_carry_the_pip_command():
    e = env_builds(requirements={"torch": [f"nvidia-cudnn-cu12==9.1.0.70; {LINUX}", f"nvidia-cublas-cu12==12.1.3.1; {LINUX}",
                                    "not a requirement ~~"]})
    e.packages["nvidia-cublas-cu12"] = "12.4.5.8"
    drift = [f for f in diagnose(e, M_builds) if f.code == "NVIDIA_WHEEL_DRIFT"]
    assert [(f.fix, f.fix_commands, f.evidence) for f in drift] == [
        ("pip install 'nvidia-cudnn-cu12==9.1.0.70'", [["pip", "install", "nvidia-cudnn-cu12==9.1.0.70"]],
         ["torch 2.5.1+cu121 declares " + f"nvidia-cudnn-cu12==9.1.0.70; {LINUX}"]),
        ("pip install 'nvidia-cublas-cu12==12.1.3.1' (cudamatrix fix reinstalls only the drifted wheels)",
         [["pip", "install", "nvidia-cublas-cu12==12.1.3.1"]],
         ["torch 2.5.1+cu121 requires " + f"nvidia-cublas-cu12==12.1.3.1; {LINUX}"])]


def test_clobber_fix_and_torchaudio_pairing():
    e = env_builds(file_conflicts=[FileConflict(path="p", distributions=["a", "b"])])
    (f,) = diagnose(e, M_builds)
    assert f.fix == "uninstall one of them (the one the framework does not declare), then reinstall the other"
    paired = replace(TORCH_builds, companions={"torchvision": "0.20.1", "torchaudio": "2.5.1"})
    e = env_builds()
    e.packages.update({"torchvision": "0.20.1+cu121", "torchaudio": "2.5.1+cu124"})
    found = [(f.code, f.title) for f in diagnose(e, build(paired))]
    assert found == [("TORCHVISION_MISMATCH", "torchaudio 2.5.1+cu124 does not match torch 2.5.1+cu121 (needs "
                                              "2.5.1+cu121)")]


def test_library_findings_over_several_libraries():
    from cudamatrix.models import Library, LibraryLoad

    libs = [
        Library(name="cublas", soname="libcublas.so.12", path="/w/libcublas.so.12", origin="wheel:nvidia-cublas-cu12",
                version="12.1.3", loaded_first=True),
        Library(name="cublas", soname="libcublas.so.12", path="/usr/lib/libcublas.so.12", origin="ldconfig",
                version="12.4.5"),
        Library(name="cudnn", soname="libcudnn.so.9", path="/opt/c/libcudnn.so.9", origin="LD_LIBRARY_PATH",
                loaded_first=True),
        Library(name="cudnn", soname="libcudnn.so.9", path="/w/libcudnn.so.9", origin="wheel:nvidia-cudnn-cu12",
                version="9.1.0"),
    ]
    # the loader model's predictions (detect/libpaths.wrong_loads): torch maps its wheel's cuBLAS (nothing to say;
    # the next load is still looked at), but LD_LIBRARY_PATH's cuDNN wins over its DT_RUNPATH copy
    loads = [LibraryLoad("torch", "libcublas.so.12", "/w/libcublas.so.12", "DT_RPATH of libtorch_cuda.so"),
             LibraryLoad("torch", "libcudnn.so.9", "/opt/c/libcudnn.so.9", "LD_LIBRARY_PATH",
                         expected="/w/libcudnn.so.9", expected_rule="DT_RUNPATH of libtorch_cuda.so")]
    (f,) = [f for f in diagnose(env_builds(libraries=libs, library_loads=loads), M_builds) if f.code == "LIBRARY_SHADOWED"]
    # the mapped copy's version is unknown, so it is not known to differ: a warning
    assert f.severity == "warning"
    assert f.title == ("torch will map /opt/c/libcudnn.so.9 for libcudnn.so.9, not its own copy (version unknown "
                       "where the framework's own copy is 9.1.0)")
    assert f.fix == "remove /opt/c from LD_LIBRARY_PATH (cudamatrix env prints the export)"
    # a system copy an earlier import already mapped (a notebook kernel): it wins over torch's own copy
    system = [replace(libs[2], path="/usr/local/cuda/lib64/libcudnn.so.9", origin="ldconfig", version="9.0.0"),
              replace(libs[3], version=None)]
    earlier = [LibraryLoad("torch", "libcudnn.so.9", "/usr/local/cuda/lib64/libcudnn.so.9",
                           "already loaded (a dependency loaded earlier)", expected="/w/libcudnn.so.9",
                           expected_rule="DT_RPATH of libtorch_cuda.so")]
    (g,) = [f for f in diagnose(env_builds(libraries=system, library_loads=earlier), M_builds) if f.code == "LIBRARY_SHADOWED"]
    assert (g.severity, g.title) == ("warning", "torch will map /usr/local/cuda/lib64/libcudnn.so.9 for libcudnn.so.9, "
                                                "not its own copy (9.0.0 where the framework's own copy is of "
                                                "unknown version)")
    assert g.fix == "restart the kernel, and import the framework before what loaded the other copy"


def test_cudnn_major_mismatch_names_the_copy():
    from cudamatrix.models import Library, LibraryLoad

    libs = [Library(name="cudnn", soname="libcudnn.so.x", path="/bad", origin="LD_LIBRARY_PATH", version="garbage",
                    loaded_first=True),
            Library(name="cudnn", soname="libcudnn.so.8", path="/opt/c8/libcudnn.so.8", origin="LD_LIBRARY_PATH",
                    version="8.9.2", loaded_first=True)]
    # a predicted load whose SONAME has no major number is not a cuDNN load; the next one is
    loads = [LibraryLoad("torch", "libcudnn.so.x", "/bad", "LD_LIBRARY_PATH"),
             LibraryLoad("torch", "libcudnn.so.8", "/opt/c8/libcudnn.so.8", "LD_LIBRARY_PATH")]
    (f,) = [f for f in diagnose(env_builds(libraries=libs, library_loads=loads), M_builds) if f.code == "CUDNN_MISMATCH"]
    assert (f.severity, f.title) == ("error", "torch 2.5.1+cu121 was built with cuDNN 9.1.0 but will run cuDNN 8.9.2 "
                                              "from /opt/c8/libcudnn.so.8")
    assert f.evidence == ["libcudnn.so.8: /opt/c8/libcudnn.so.8 (LD_LIBRARY_PATH; found as /opt/c8/libcudnn.so.8)",
                          "torch needs the same major and a minor at least the compiled one"]
    assert f.fix == "remove /opt/c8 from LD_LIBRARY_PATH (cudamatrix env prints the export)"
    # the same copies without a prediction (a pasted environment): no cuDNN finding at all
    assert [f.code for f in diagnose(env_builds(libraries=libs), M_builds) if f.code in ("CUDNN_MISMATCH", "LIBRARY_SHADOWED")] == []


def test_busy_gpu_names_the_processes():
    from cudamatrix.models import GpuProcess

    gpu = GpuInfo(name="NVIDIA A100", compute_capability="8.0", memory_total_mib=1000, memory_used_mib=900,
                  processes=[GpuProcess(pid=4242, name="python", used_memory_mib=850), GpuProcess(name="Xorg")])
    (f,) = [f for f in diagnose(Environment(gpus=[gpu]), M_builds)
            if f.code == "GPU_MEMORY_BUSY"]
    assert f.title == "NVIDIA A100 has 900 of 1000 MiB in use"
    assert f.evidence == ["pid 4242 python 850 MiB", "a process Xorg"]
    nameless = GpuInfo(memory_total_mib=1000, memory_used_mib=900)
    (g,) = [f for f in diagnose(Environment(gpus=[nameless]), M_builds) if f.code == "GPU_MEMORY_BUSY"]
    assert g.title == "A GPU has 900 of 1000 MiB in use"
    assert g.evidence == ["other processes hold most of the GPU memory"]


def test_toolkit_evidence_and_unreadable_versions():
    e = env_builds(toolkits=[Toolkit(source="report:nvcc", version="13.0.88"), Toolkit(source="x", version="garbage"),
                      Toolkit(source="y", version=None)])
    e.driver.cuda_version = "12.4"
    (f,) = diagnose(e, M_builds)
    assert (f.code, f.evidence) == ("TOOLKIT_NEWER_THAN_DRIVER", ["report:nvcc"])
    assert f.title == "CUDA toolkit 13.0.88 is newer than the driver's CUDA 12.4"
    e.driver.cuda_version = "unknown"
    assert diagnose(e, M_builds) == []


# PyTorch's Linux GPU wheels declare nvidia-* wheels from 2.1 on (wheel METADATA); a build with declared pins,
# a pip extra (tensorflow[and-cuda]) or extra packages (jax-cuda12-plugin) brings them too; Windows builds and
# CPU builds bring none
BUNDLES = [
    ("torch", "2.1.0", dict(), "linux_x86_64", True),
    ("torch", "2.0.1", dict(), "linux_x86_64", False),
    ("tensorflow", "2.15.0", dict(pip_extra="and-cuda"), "linux_x86_64", True),
    ("jax", "0.4.30", dict(extra_packages=["jax-cuda12-plugin==0.4.30"]), "linux_x86_64", True),
    ("tensorflow", "2.13.1", dict(), "linux_x86_64", False),
    ("torch", "2.5.1", dict(), "win_amd64", False),
]


@pytest.mark.parametrize("family, version, fields, platform, bundles", BUNDLES)
def test_which_builds_bring_nvidia_wheels(family, version, fields, platform, bundles):
    from cudamatrix.solve.pins import bundles_nvidia_wheels
    from cudamatrix.solve.target import Target

    v = variant("v", "12.1", **fields)
    assert bundles_nvidia_wheels(release(version, v, name=family), v, Target(name="t", platform=platform)) is bundles
    cpu = variant("cpu", None, **fields)
    assert bundles_nvidia_wheels(release(version, cpu, name=family), cpu, Target(name="t")) is False


def test_a_family_the_matrix_has_no_release_of():
    from cudamatrix.errors import NoSolution
    from cudamatrix.solve.solver import parse_request, solve
    from cudamatrix.solve.target import Target

    with pytest.raises(NoSolution) as err:
        solve([Target(name="t")], parse_request(["jax", "torch"]), M_builds)
    assert err.value.detail["causes"][0] == {"rule": "request", "message": "the matrix has no jax release",
                                             "machines": []}


# --- mut diagnose --------------------------------------------------------------------------------------------------

# torch 2.1.0: Python 3.8-3.11 (RELEASE.md); its CUDA 12.1 build, constructed SASS list as above
TORCH21 = replace(release("2.1.0", CU121, CPU), python=["3.8", "3.9", "3.10", "3.11"])


# a torch build whose SASS list and cuDNN the matrix lacks (constructed), so some rules cannot decide
TORCH24_whole = release("2.4.0", variant("cu124", "12.4", local_version="+cu124"))


# JAX installation guide: plain ``pip install jax`` is the CPU build; the CUDA one is the cuda12 extra
JAX = release("0.4.30", variant("cuda12", "12.1", archs=A, cudnn="9.1.0", pip_extra="cuda12"),
              variant("cpu", None, pypi_default=True), name="jax")


M_whole = replace(build(TORCH, TORCH21, TORCH24_whole), jax=FrameworkFile(releases=[JAX]))


def env_whole(*, driver: str | Driver | None = "550.54.15", status="ok", gpus=(T4,), torch: str | None = "2.5.1+cu121",
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


DRIVER_STATE_whole = [
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


@pytest.mark.parametrize("facts, expected", DRIVER_STATE_whole)
def test_driver_state_findings_whole(facts, expected):
    assert diagnose(env_whole(**facts), M_whole) == expected


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
          # diagnose.implied: the fix is what the solve says; nothing in this matrix covers sm_120 on R560
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
    assert diagnose(env_whole(**facts), M_whole) == expected


def jax(version="0.4.30", variant="cpu") -> Framework:
    return Framework(name="jax", version=version, variant=variant)


def unknown_build_whole(label: str, *facts: str) -> Finding:
    return F("UNKNOWN_FRAMEWORK_BUILD", "info", f"{label} is not in the matrix test", list(facts), UNKNOWN_FIX)


UNSTATED = ["unknown: the CUDA version it was built with", "unknown: the Python versions it is built for"]


FRAMEWORKS = [
    # a release the matrix lacks is judged on what it states: +cu124 is CUDA 12.4, past R520 (CUDA 11.8)
    pytest.param(dict(torch="2.6.0+cu124", driver="520.61.05"), [
        F("DRIVER_TOO_OLD", "error", "The driver is too old for torch 2.6.0+cu124",
          ["driver 520.61.05 runs CUDA 11.8 at most; torch 2.6.0 cu124 needs CUDA 12.4, which needs driver >= "
           "525.60.13 under minor-version compatibility, and 550.54.14 for full support", f"matrix row: {NOTES}"],
          "upgrade the driver to >= 525.60.13"),
        unknown_build_whole("torch 2.6.0+cu124", "variant cu124", "unknown: the GPU architectures it was compiled for",
                      "unknown: its cuDNN version", "unknown: the Python versions it is built for")],
      id="stated-cu124-on-r520"),
    # a build stating nothing is not judged; the next framework still is
    pytest.param(dict(torch="9.9.9", frameworks=[jax()]), [
        F("CPU_ONLY_BUILD", "error", "jax 0.4.30 is a CPU-only build on a GPU machine",
          ["jax variant cpu", "GPU: Tesla T4"], CPU_FIX.format("jax")),
        unknown_build_whole("torch 9.9.9", "variant unknown", *UNSTATED)], id="unstated-then-jax-cpu"),
    pytest.param(dict(torch="2.5.1+cpu", frameworks=[jax()]), [
        F("CPU_ONLY_BUILD", "error", "torch 2.5.1+cpu is a CPU-only build on a GPU machine",
          ["torch variant cpu", "GPU: Tesla T4"], CPU_FIX.format("torch")),
        F("CPU_ONLY_BUILD", "error", "jax 0.4.30 is a CPU-only build on a GPU machine",
          ["jax variant cpu", "GPU: Tesla T4"], CPU_FIX.format("jax"))], id="two-cpu-builds"),
    # no GPU: builds are not judged against one, but a build the matrix lacks is still reported
    pytest.param(dict(gpus=(), driver=None, status="absent", torch="2.5.1+cpu", frameworks=[jax("0.9.9", "cuda12")]), [
        F("NO_DRIVER", "warning", "No NVIDIA driver is installed or loaded",
          ["no /proc/driver/nvidia/version, no libnvidia-ml, no nvidia-smi"], NO_DRIVER_FIX),
        unknown_build_whole("jax 0.9.9", "variant cuda12", *UNSTATED)], id="no-gpu-then-unknown-jax"),
    # in the matrix without its SASS list: the arch rule cannot decide (the cuDNN rule can: every cuDNN for
    # CUDA 12.x in the matrix supports 7.5, cuDNN 9.17's lowest)
    pytest.param(dict(torch="2.4.0+cu124"), [
        F("UNKNOWN_FRAMEWORK_BUILD", "info", "Some facts about torch 2.4.0+cu124 are not in the matrix test",
          ["unknown: the GPU architectures torch 2.4.0 cu124 was compiled for are not in the matrix, so whether it "
           "has a kernel image for Tesla T4 (compute capability 7.5) is unknown"],
          "update cudamatrix for newer matrix data; the other rules were checked")], id="matrix-row-without-sass"),
    # PyTorch published 2.5.1+cu118, a build this matrix's 2.5.1 row lacks: judged on its tag, reported once
    pytest.param(dict(torch="2.5.1+cu118"), [
        unknown_build_whole("torch 2.5.1+cu118", "variant cu118", "unknown: the GPU architectures it was compiled for",
                      "unknown: its cuDNN version", "unknown: the Python versions it is built for")],
      id="known-release-unknown-build"),
]


@pytest.mark.parametrize("facts, expected", FRAMEWORKS)
def test_framework_findings_whole(facts, expected):
    assert diagnose(env_whole(**facts), M_whole) == expected


V100 = GpuInfo(index=0, name="Tesla V100-SXM2-16GB", compute_capability="7.0", memory_total_mib=16384,
               memory_used_mib=15000)


def test_every_kind_of_finding_most_severe_first():
    # found in this order: the unknown build (info), the busy GPU, unsafe path, low disk and memory (warnings),
    # the advisory (error), the toolkit (info); reported errors first, then warnings, then information
    e = env_whole(torch="2.6.0+cu124", gpus=(V100,), packages={"nvidia-cudnn-cu12": "9.11.0.98"},
            notes=[Note(probe="unsafe library path", message="LD_LIBRARY_PATH has an empty entry (the current "
                                                             "folder)")],
            host=HostResources(memory_total_mib=65536, memory_available_mib=1024,
                               disks=[DiskSpace(purpose="site-packages", path="/v/lib", free_mib=4096,
                                                total_mib=102400),
                                      DiskSpace(purpose="temp", path="/tmp", free_mib=8192, total_mib=102400)]),
            toolkits=[Toolkit(source="nvcc --version", version="12.6.85", path="/usr/local/cuda/bin/nvcc")])
    e.driver.cuda_version = "12.4"
    m = replace(M_whole, advisories=AdvisoryFile(advisories=[VOLTA]))
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
        unknown_build_whole("torch 2.6.0+cu124", "variant cu124", "unknown: the GPU architectures it was compiled for",
                      "unknown: its cuDNN version", "unknown: the Python versions it is built for"),
        F("TOOLKIT_NEWER_THAN_DRIVER", "info", "CUDA toolkit 12.6.85 is newer than the driver's CUDA 12.4",
          ["/usr/local/cuda/bin/nvcc"],
          "harmless for pip wheels, which bring their own runtime; programs you build with this nvcc need a newer "
          "driver")]


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
    e = env_whole(torch="2.5.1", packages={"tensorflow": "2.15.0", "torchvision": "0.20.1", **TORCH_PINS},
            requirements={"torch": [f"{n}=={v}; {LINUX}" for n, v in TORCH_PINS.items()], "torchvision": [],
                          "tensorflow": [f'{n}=={v}; extra == "and-cuda"' for n, v in TF_PINS.items()]})
    conflicts = [f for f in diagnose(e, M_whole) if f.code == "FRAMEWORK_CONFLICT"]
    # tensorflow's order; nvcc, which torch does not declare (and is not installed), is no conflict
    assert conflicts == [F(
        "FRAMEWORK_CONFLICT", "error", "torch and tensorflow need different nvidia-* wheels",
        [f"torch needs {n}=={TORCH_PINS[n]}, tensorflow needs {n}=={TF_PINS[n]}"
         for n in ("nvidia-cublas-cu12", "nvidia-cuda-cupti-cu12", "nvidia-cuda-nvrtc-cu12",
                   "nvidia-cuda-runtime-cu12", "nvidia-cudnn-cu12")],
        "cudamatrix solve torch tensorflow for a shared set, or keep them in separate environments")]


def test_two_distributions_of_no_family_still_conflict():
    # constructed distributions outside every framework family: each is its own family
    e = env_whole(torch=None, packages={"example-a": "1.0", "example-b": "1.0", "nvidia-cudnn-cu12": "9.1.0.70"},
            requirements={"example-a": ["nvidia-cudnn-cu12==9.1.0.70"], "example-b": ["nvidia-cudnn-cu12==8.9.4.25"]})
    assert [(f.code, f.evidence) for f in diagnose(e, M_whole) if f.code == "FRAMEWORK_CONFLICT"] == [
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
    e = env_whole(torch="2.5.1", packages=wheels, requirements={"torch": declared})
    e.python = PythonInfo(version=python, platform=platform)
    expected = []
    for req in missing:
        spec = req.split(";")[0]
        expected.append(F("NVIDIA_WHEEL_DRIFT", "error", f"torch needs {spec}, which is not installed",
                          [f"torch 2.5.1 declares {req}"], f"pip install '{spec}'", [["pip", "install", spec]]))
    assert [f for f in diagnose(e, M_whole) if f.code == "NVIDIA_WHEEL_DRIFT"] == expected


SOURCE = f"matrix row: {ROW}"


# PyTorch "Previous PyTorch Versions": torch 2.5.1 with torchvision 0.20.1 and torchaudio 2.5.1, from one index
COMPANIONS_whole = [
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


@pytest.mark.parametrize("torch, companions, expected", COMPANIONS_whole)
def test_companions_whole(torch, companions, expected):
    assert diagnose(env_whole(torch=torch, packages=companions), M_whole) == expected


def stated(version: str, **fw) -> tuple[FrameworkRelease | None, Variant | None, list[str]]:
    framework = Framework(name="torch", version=version, **fw)
    (inst,) = match_installed(Environment(frameworks=[framework]), M_whole)
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
    torch = next(i for i in match_installed(e, M_whole) if i.name == "torch")
    assert stated_build(e, torch) == (None, None, ["the CUDA version it was built with", PY_UNKNOWN])


def test_installed_without_a_default_variant_matches_no_variant():
    # torch 2.1.0 here has no variant marked as the default index's build, so a plain 2.1.0 is no known variant
    # torchvision is no framework family of its own: it is skipped, and what follows still matched
    (inst,) = match_installed(Environment(frameworks=[Framework(name="torchvision", version="0.16.0"),
                                                      Framework(name="torch", version="2.1.0")]), M_whole)
    assert inst == Installed("torch", "2.1.0", None, TORCH21, None)


SO9 = "libcudnn.so.9"


OWN = f"its own copy: {WHEEL} ({RPATH})"


TORCH_RULE = "torch needs the same major and a minor at least the compiled one"


def lib(path: str, version: str | None, origin: str, first=False) -> Library:
    return Library(name="cudnn", soname=SO9, path=path, version=version, origin=origin, loaded_first=first)


def load(path: str, rule: str, **kw) -> LibraryLoad:
    return LibraryLoad("torch", SO9, path, rule, expected=WHEEL, expected_rule=RPATH, **kw)


def mismatch_whole(have: str, path: str, rule: str, fix: str, built="9.1.0", found: str | None = None) -> Finding:
    return F("CUDNN_MISMATCH", "error", f"torch 2.5.1+cu121 was built with cuDNN {built} but will run cuDNN {have} "
                                        f"from {path}", [f"{SO9}: {path} ({rule}; found as {found or path})",
                                                         TORCH_RULE], fix)


def maps_whole(path: str, rule: str, how: str, version: str | None, own: str | None) -> str:
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
          [maps_whole(OPT, "already loaded (LD_PRELOAD)", "LD_PRELOAD from the program", "9.0.0", "9.1.0")], PRELOAD_FIX),
        mismatch_whole("9.0.0", OPT, "already loaded (LD_PRELOAD)", PRELOAD_FIX)],
      id="preloaded-older-minor"),
    # a preloaded copy of unknown version is still an error (LD_PRELOAD wins over everything); no minor to compare
    pytest.param([lib(OPT, None, "LD_PRELOAD", True), lib(WHEEL, None, "wheel:nvidia-cudnn-cu12")],
                 [load(OPT, "already loaded (LD_PRELOAD)", how="LD_PRELOAD", requested_by="libtorch_cuda.so")], [
        F("LIBRARY_PRELOADED", "error", f"LD_PRELOAD puts {OPT} in place of torch's {SO9} (version unknown where the "
                                        "framework's own copy is of unknown version)",
          [maps_whole(OPT, "already loaded (LD_PRELOAD)", "LD_PRELOAD from libtorch_cuda.so", None, None)],
          PRELOAD_FIX)], id="preloaded-versions-unknown"),
    # LD_LIBRARY_PATH found it through a symlinked folder: the folder to remove is the one on the path
    pytest.param([lib("/opt/cuda-12/lib/libcudnn.so.9.0.0", "9.0.0", "LD_LIBRARY_PATH", True),
                  lib(WHEEL, "9.1.0", "wheel:nvidia-cudnn-cu12")],
                 [load("/opt/cuda-12/lib/libcudnn.so.9.0.0", "LD_LIBRARY_PATH", found_as="/opt/cuda/lib64/"
                                                                                          "libcudnn.so.9")], [
        F("LIBRARY_SHADOWED", "error", f"torch will map /opt/cuda-12/lib/libcudnn.so.9.0.0 for {SO9}, not its own "
                                       "copy (9.0.0 where the framework's own copy is 9.1.0)",
          [maps_whole("/opt/cuda-12/lib/libcudnn.so.9.0.0", "LD_LIBRARY_PATH", "DT_NEEDED from the program", "9.0.0",
                "9.1.0")],
          "remove /opt/cuda/lib64 from LD_LIBRARY_PATH (cudamatrix env prints the export)"),
        mismatch_whole("9.0.0", "/opt/cuda-12/lib/libcudnn.so.9.0.0", "LD_LIBRARY_PATH",
                 "remove /opt/cuda/lib64 from LD_LIBRARY_PATH (cudamatrix env prints the export)",
                 found="/opt/cuda/lib64/libcudnn.so.9")], id="ld-library-path-symlinked-folder"),
    # another rule (the ld.so cache) picks the system's older cuDNN 9; the wheel's version is unread: a warning,
    # and the fix is the other copy's way in, never a reinstall of the framework's own (it is not the one mapped)
    pytest.param([lib("/usr/lib/libcudnn.so.9", "9.0.0", "ldconfig", True),
                  lib(WHEEL, None, "wheel:nvidia-cudnn-cu12")],
                 [load("/usr/lib/libcudnn.so.9", "ld.so cache")], [
        mismatch_whole("9.0.0", "/usr/lib/libcudnn.so.9", "ld.so cache", CACHE_FIX),
        F("LIBRARY_SHADOWED", "warning", f"torch will map /usr/lib/libcudnn.so.9 for {SO9}, not its own copy (9.0.0 "
                                         "where the framework's own copy is of unknown version)",
          [maps_whole("/usr/lib/libcudnn.so.9", "ld.so cache", "DT_NEEDED from the program", "9.0.0", None)], CACHE_FIX)],
      id="ld-cache-older-minor"),
    # a newer minor of the same major is what torch accepts: the wrong file, but no cuDNN mismatch
    pytest.param([lib(OPT, "9.3.0", "LD_LIBRARY_PATH", True), lib(WHEEL, "9.1.0", "wheel:nvidia-cudnn-cu12")],
                 [load(OPT, "LD_LIBRARY_PATH")], [
        F("LIBRARY_SHADOWED", "error", f"torch will map {OPT} for {SO9}, not its own copy (9.3.0 where the "
                                       "framework's own copy is 9.1.0)",
          [maps_whole(OPT, "LD_LIBRARY_PATH", "DT_NEEDED from the program", "9.3.0", "9.1.0")],
          "remove /opt/cudnn/lib from LD_LIBRARY_PATH (cudamatrix env prints the export)")], id="newer-minor"),
    # the wheel's own copy mapped through its DT_RPATH, but an older minor than the build's: reinstall the wheel
    pytest.param([lib(WHEEL, "9.0.0", "wheel:nvidia-cudnn-cu12", True)],
                 [LibraryLoad("torch", SO9, WHEEL, RPATH)],
                 [mismatch_whole("9.0.0", WHEEL, RPATH, "reinstall the cuDNN wheel torch declares (cuDNN 9.1.0): "
                                                  "cudamatrix fix")], id="own-wheel-older-minor"),
    # the mapped copy is of the build's major but its version is unreadable: no minor to compare, no mismatch
    pytest.param([lib(WHEEL, "unknown", "wheel:nvidia-cudnn-cu12", True)],
                 [LibraryLoad("torch", SO9, WHEEL, RPATH)], [], id="own-wheel-version-unreadable"),
]


@pytest.mark.parametrize("libraries, loads, expected", LOADS)
def test_library_findings_whole(libraries, loads, expected):
    assert diagnose(env_whole(libraries=libraries, library_loads=loads), M_whole) == expected


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
    assert diagnose(env_whole(libraries=libraries), M_whole) == [F(
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
    e = env_whole(toolkits=[Toolkit(source="conda", version="unknown"),
                      Toolkit(source="/usr/local/cuda-12.4", version="12.4.131"),
                      Toolkit(source="nvcc --version", version="13.0.88")])
    e.driver.cuda_version = "12.4"
    assert [(f.code, f.evidence) for f in diagnose(e, M_whole)] == [("TOOLKIT_NEWER_THAN_DRIVER", ["nvcc --version"])]


def test_an_advisory_covers_an_installed_prerelease():
    # PEP 440: an installed pre-release satisfies ">=9.11"; the advisory's other conditions hold (Volta)
    e = env_whole(gpus=(replace(V100, memory_used_mib=0),), packages={"nvidia-cudnn-cu12": "9.12.0rc1"})
    m = replace(M_whole, advisories=AdvisoryFile(advisories=[VOLTA]))
    assert [f.code for f in diagnose(e, m)] == ["KNOWN_BAD"]


@pytest.mark.parametrize("first", [jax(variant="cpu"), jax(variant="cuda12"), jax("0.9.9", "cuda12")],
                         ids=["cpu-jax", "jax-without-a-load", "jax-not-in-the-matrix"])
def test_cudnn_of_each_framework(first):
    # a framework before torch with no cuDNN, or with no predicted cuDNN load, does not end the check
    e = env_whole(torch=None, frameworks=[first, Framework(name="torch", version="2.5.1+cu121", variant="cu121")],
            packages={"torch": "2.5.1+cu121"}, libraries=[lib(WHEEL, "9.0.0", "wheel:nvidia-cudnn-cu12", True)],
            library_loads=[LibraryLoad("torch", SO9, WHEEL, RPATH)])
    assert [f for f in diagnose(e, M_whole) if f.code == "CUDNN_MISMATCH"] == [
        mismatch_whole("9.0.0", WHEEL, RPATH, "reinstall the cuDNN wheel torch declares (cuDNN 9.1.0): cudamatrix fix")]


# the extras that bring nvidia-* wheels: tensorflow[and-cuda], jax-cuda12-plugin[with-cuda], jax[cuda12] and
# jax[cuda13] (data/jax.json), and jax[cuda] of the 0.4 series' install guide; a requirement behind one applies
# once the wheel it names is installed (the extra was asked for); one behind any other extra never does
EXTRAS = [("tensorflow", "and-cuda", True), ("jax-cuda12-plugin", "with-cuda", True), ("jax", "cuda", True),
          ("jax", "cuda12", True), ("jax", "cuda13", True), ("jax", "test", False)]


@pytest.mark.parametrize("dist, extra, applies", EXTRAS)
def test_requirements_behind_an_extra(dist, extra, applies):
    e = env_whole(torch=None, packages={dist: "1.0", "nvidia-cudnn-cu12": "8.9.4.25"},
            requirements={dist: [f'nvidia-cudnn-cu12>=9.1; extra == "{extra}"']})
    assert diagnose(e, M_whole) == ([F(
        "NVIDIA_WHEEL_DRIFT", "error", f"nvidia-cudnn-cu12 8.9.4.25 is installed; {dist} declares >=9.1",
        [f'{dist} 1.0 requires nvidia-cudnn-cu12>=9.1; extra == "{extra}"'],
        "pip install 'nvidia-cudnn-cu12>=9.1' (cudamatrix fix reinstalls only the drifted wheels)",
        [["pip", "install", "nvidia-cudnn-cu12>=9.1"]])] if applies else [])


# CuPy's install guide: install one cupy-cudaXXx package; two install the same cupy/ files. The finding lists
# twenty of them and counts the rest
CLOBBER_whole = [(1, "file", []), (20, "20 files", []), (21, "21 files", ["... and 1 more"]),
           (23, "23 files", ["... and 3 more"])]


@pytest.mark.parametrize("count, files, more", CLOBBER_whole)
def test_file_clobber_whole(count, files, more):
    paths = [f"cupy/_core/m{i:02}.so" for i in range(count)]
    e = env_whole(file_conflicts=[FileConflict(path=p, distributions=["cupy-cuda13x", "cupy-cuda12x"]) for p in paths])
    assert diagnose(e, M_whole) == [F("FILE_CLOBBER", "error", f"cupy-cuda12x and cupy-cuda13x install the same {files}",
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
    e = env_whole(host=HostResources(memory_total_mib=total, memory_available_mib=available))
    assert diagnose(e, M_whole) == ([F("LOW_HOST_MEMORY", "warning", f"only {available} MiB of {total} MiB host memory is "
                                                              "available", ["/proc/meminfo MemAvailable"],
                                 "close other notebooks and processes (or restart stale kernels) before loading large "
                                 "models")] if low else [])


def test_low_disk_title_in_gib():
    # 7220 MiB is 7.05 GiB: one decimal, rounded
    e = env_whole(host=HostResources(disks=[DiskSpace(purpose="pip cache", path="/c", free_mib=7220, total_mib=9000)]))
    assert [(f.code, f.title) for f in diagnose(e, M_whole)] == [("LOW_DISK", "only 7.1 GiB free on the disk of pip cache")]


def test_unsafe_library_path_names_ten_folders():
    notes = [Note(probe="unsafe library path", message=f"/tmp/lib{i} is world-writable") for i in range(11)]
    (f,) = diagnose(env_whole(notes=notes), M_whole)
    assert (f.code, f.evidence) == ("UNSAFE_LIBRARY_PATH", [n.message for n in notes[:10]])


@pytest.mark.parametrize("gpu, applies", [(V100, True), (T4, False)], ids=["volta", "turing"])
def test_an_advisory_about_the_machine_alone(gpu, applies):
    # an advisory naming no package (the schema allows an empty ``affects``) rests on its machine conditions
    volta_only = replace(VOLTA, affects=[])
    e = env_whole(gpus=(replace(gpu, memory_used_mib=0),))
    assert [f.code for f in diagnose(e, replace(M_whole, advisories=AdvisoryFile(advisories=[volta_only])))] == \
        (["KNOWN_BAD"] if applies else [])


def test_extension_arch_unsupported_whole(matrix):
    """xformers 0.0.29.post3's _C.so (SASS sm_60..sm_90, PTX compute_60 compute_80) on a Tesla M60 (5.2): no
    SASS of major 5 and no PTX at or below 5.2; an H100 (9.0) beside it runs its sm_90 SASS, an RTX 3090 (8.6)
    its sm_80 SASS; a GPU stated as text no compute capability is skipped."""
    env = healthy()
    xformers_kernels(env)
    env.gpus.append(GpuInfo(index=1, name="NVIDIA H100", compute_capability="9.0", memory_total_mib=81559))
    env.gpus.append(GpuInfo(index=2, name="NVIDIA GeForce RTX 3090", compute_capability="8.6", memory_total_mib=24576))
    env.extensions[0].objects[0].sass.append("9" * 500)  # a saved environment's text: left out
    (f,) = extensions.extension_arch_unsupported(Diagnosis(env, matrix))
    assert f.code == "EXTENSION_ARCH_UNSUPPORTED" and f.severity == "error"
    assert f.title == ('xformers 0.0.29.post3 has no kernel image for Tesla M60 (compute capability 5.2): '
                       '"no kernel image is available"')
    assert f.evidence == ["_C.so: SASS sm_60 sm_70 sm_75 sm_80 sm_90, PTX compute_60 compute_80"]
    assert f.fix == ('xformers built for sm_52: from source, TORCH_CUDA_ARCH_LIST="5.2" pip install '
                     "--no-build-isolation --no-binary xformers 'xformers==0.0.29.post3'; or run it on a GPU whose "
                     "architecture it carries")
    env.extensions[0].objects[0].sass, env.extensions[0].objects[0].ptx = [], []  # no device code: not judged
    assert extensions.extension_arch_unsupported(Diagnosis(env, matrix)) == []
