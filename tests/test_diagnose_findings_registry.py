"""Doctor's finding registry (``cudamatrix.diagnose.findings``): one table per finding function, each asked on its own.

A case is an Environment built here (on the small matrix of ``smallmatrix``) -> the Findings of that one function,
as (code, severity, title). The expected answers come from the documents named above each table; the whole
wording of every finding is pinned by ``tests/test_mut_diagnose.py``. ``diagnose`` itself is the loop over
:data:`FINDINGS`: the last tests pin the registry's order and the severity sort.
"""
from __future__ import annotations

import pytest

from cudamatrix.diagnose import findings, host, loads, wheels
from cudamatrix.diagnose.context import Diagnosis
from cudamatrix.matrix.data import Advisory, AdvisoryFile
from cudamatrix.models import (Context, DiskSpace, Driver, Environment, FileConflict, Framework, GpuInfo, GpuProcess,
                               HostResources, Library, LibraryLoad, Note, PythonInfo, Toolkit)
from cudamatrix.solve.rules import Reason
from smallmatrix import build, release, replace, variant

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


# --- diagnose: the loop over the registry ------------------------------------------------------------------------

def test_the_registry_in_order():
    assert findings.FINDINGS == [
        findings.no_driver, findings.driver_library_mismatch, findings.no_device_visible, findings.gpu_unusable,
        findings.stub_libcuda, findings.gpu_unsupported_by_driver, findings.framework_builds,
        findings.python_unsupported, loads.library_shadowed, loads.cudnn_mapped, wheels.nvidia_wheel_drift,
        wheels.framework_conflict, wheels.file_clobber, wheels.torchvision_mismatch, host.gpu_memory_busy,
        host.unsafe_library_path, host.low_disk, host.low_host_memory, host.known_bad, host.toolkit_newer_than_driver]
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
