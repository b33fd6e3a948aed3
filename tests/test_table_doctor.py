"""Doctor tables: a machine's facts and the finding the cited document implies, side by side.

The matrix is ``smallmatrix``'s (facts copied from NVIDIA's documents), so the tables do not move when the
shipped data changes; environments are built in the test.
"""
from __future__ import annotations

import pytest

from cudamatrix.diagnose.findings import diagnose
from cudamatrix.matrix.data import Advisory, AdvisoryFile
from cudamatrix.models import Context, Driver, Environment, Framework, GpuInfo, Library, LibraryLoad, PythonInfo
from smallmatrix import build, release, replace, variant

# a torch build for CUDA 12.1 with cuDNN 9.1.0 (constructed), paired with torchvision 0.20.1 (the pairing the
# PyTorch "Previous PyTorch Versions" page gives for torch 2.5.1: torch==2.5.1 torchvision==0.20.1)
CU121 = variant("cu121", "12.1", archs=["5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0"], cudnn="9.1.0",
                local_version="+cu121")
TORCH = replace(release("2.5.1", CU121), companions={"torchvision": "0.20.1"})
WHEEL_CUDNN = "/v/site-packages/nvidia/cudnn/lib/libcudnn.so.9"


def env(*, driver="550.54.15", status="ok", gpus=(("Tesla T4", "7.5", 15360, 0),), libraries=(),
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
    return sorted(f.code for f in diagnose(environment, matrix or build(TORCH)))


def cudnn(path: str, version: str, origin: str, first: bool) -> Library:
    return Library(name="cudnn", soname="libcudnn.so.9" if version.startswith("9") else "libcudnn.so.8", path=path,
                   version=version, origin=origin, loaded_first=first)


# cuDNN's API compatibility (cuDNN Developer Guide, "API Compatibility"): an application built against one cuDNN
# major runs only with a library of that major; torch's own check (torch/backends/cudnn/__init__.py) also wants a
# runtime minor no lower than the compiled one. torch 2.5.1 cu121 is built with cuDNN 9.1. Library findings come
# only from the loader model's prediction (Environment.library_loads, detect/libpaths.py): a cuDNN 8 that torch
# is predicted to map breaks it (CUDNN_MISMATCH); a cuDNN 9.0 on LD_LIBRARY_PATH that wins over the wheel's
# DT_RUNPATH copy is both a wrong load (LIBRARY_SHADOWED) and too old a minor (CUDNN_MISMATCH); a copy found
# through ldconfig does not decide what torch maps (its DT_RPATH wins), so nothing is wrong. Without a
# prediction (a pasted environment) a different copy first on LD_LIBRARY_PATH is at most a warning.
RPATH = "DT_RPATH of libtorch_cuda.so"


def maps(path: str, rule: str, **kw) -> LibraryLoad:
    """The loader model's prediction: torch maps ``path`` for its libcudnn (``expected``: its own copy)."""
    return LibraryLoad("torch", path.rsplit("/", 1)[1], path, rule, **kw)


CUDNN_MAJOR = [
    ([cudnn("/opt/cudnn8/lib/libcudnn.so.8", "8.9.2", "LD_LIBRARY_PATH", True)],
     [maps("/opt/cudnn8/lib/libcudnn.so.8", "LD_LIBRARY_PATH")], ["CUDNN_MISMATCH"]),
    ([cudnn("/opt/cudnn9/lib/libcudnn.so.9", "9.0.0", "LD_LIBRARY_PATH", True),
      cudnn(WHEEL_CUDNN, "9.1.0", "wheel:nvidia-cudnn-cu12", False)], [], ["LIBRARY_SHADOWED"]),
    ([cudnn("/usr/lib/x86_64-linux-gnu/libcudnn.so.9", "9.0.0", "ldconfig", True),
      cudnn(WHEEL_CUDNN, "9.1.0", "wheel:nvidia-cudnn-cu12", False)], [maps(WHEEL_CUDNN, RPATH)], []),
    ([cudnn("/opt/cudnn9/lib/libcudnn.so.9", "9.0.0", "LD_LIBRARY_PATH", True),
      cudnn(WHEEL_CUDNN, "9.1.0", "wheel:nvidia-cudnn-cu12", False)],
     [maps("/opt/cudnn9/lib/libcudnn.so.9", "LD_LIBRARY_PATH", expected=WHEEL_CUDNN,
           expected_rule="DT_RUNPATH of libtorch_cuda.so")], ["CUDNN_MISMATCH", "LIBRARY_SHADOWED"]),
    ([cudnn("/usr/lib/x86_64-linux-gnu/libcudnn.so.8", "8.9.2", "ldconfig", True)], [], []),
    ([cudnn(WHEEL_CUDNN, "9.1.0", "wheel:nvidia-cudnn-cu12", True)], [maps(WHEEL_CUDNN, RPATH)], []),
    ([cudnn("/opt/cudnn9/lib/libcudnn.so.9", "9.1.0", "LD_LIBRARY_PATH", True),
      cudnn(WHEEL_CUDNN, "9.1.0", "wheel:nvidia-cudnn-cu12", False)], [], []),
]


@pytest.mark.parametrize("libraries, loads, expected", CUDNN_MAJOR)
def test_cudnn_major_that_loads_first(libraries, loads, expected):
    environment = env(libraries=libraries)
    environment.library_loads = loads
    assert codes(environment) == expected


def test_library_shadowed_severity_and_fix():
    libraries, loads, _ = CUDNN_MAJOR[3]
    predicted = env(libraries=libraries, ld_path="/opt/cudnn9/lib:/usr/local/nvidia/lib64")
    predicted.library_loads = loads
    shadow = next(f for f in diagnose(predicted, build(TORCH)) if f.code == "LIBRARY_SHADOWED")
    assert shadow.severity == "error"  # both versions are known and differ
    assert shadow.title == ("torch will map /opt/cudnn9/lib/libcudnn.so.9 for libcudnn.so.9, not its own copy "
                            "(9.0.0 where the framework's own copy is 9.1.0)")
    assert shadow.fix == "remove /opt/cudnn9/lib from LD_LIBRARY_PATH (cudamatrix env prints the export)"
    assert shadow.evidence == ["torch maps /opt/cudnn9/lib/libcudnn.so.9 for libcudnn.so.9 (LD_LIBRARY_PATH; "
                               "DT_NEEDED from the program), 9.0.0; its own copy: "
                               f"{WHEEL_CUDNN} (DT_RUNPATH of libtorch_cuda.so), 9.1.0"]
    # the same machine pasted without a prediction: whether torch's DT_RPATH wins is unknown, so a warning
    pasted = next(f for f in diagnose(env(libraries=libraries), build(TORCH)) if f.code == "LIBRARY_SHADOWED")
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
    found = [c for c in codes(env(gpus=(gpu,)), build(release("2.5.1", v))) if c != "GPU_UNSUPPORTED_BY_DRIVER"]
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
    assert codes(env(torch=torch, torchvision=torchvision)) == expected


def test_torchvision_fix_names_the_local_tag():
    found = diagnose(env(torchvision="0.20.1+cu124"), build(TORCH))
    tv = next(f for f in found if f.code == "TORCHVISION_MISMATCH")
    assert tv.fix == "pip install torchvision==0.20.1+cu121 from the same index as torch"


# CUDA Driver API, CUDA_ERROR_STUB_LIBRARY: the toolkit's lib64/stubs/libcuda.so is for linking only; a program
# that loads it instead of the driver's libcuda gets that error. Only the copy the loader picks matters.
STUB = [
    (True, True, ["STUB_LIBCUDA"]),
    (True, False, []),
    (False, True, []),
]


@pytest.mark.parametrize("stub, first, expected", STUB)
def test_stub_libcuda(stub, first, expected):
    lib = Library(name="cuda", soname="libcuda.so.1", path="/usr/local/cuda/lib64/stubs/libcuda.so.1",
                  origin="LD_LIBRARY_PATH", stub=stub, loaded_first=first)
    found = diagnose(env(libraries=[lib]), build(TORCH))
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
    e = env(status=status)
    e.driver.error = "Unable to determine the device handle for GPU0000:00:1E.0: Unknown Error"
    found = [f for f in diagnose(e, build(TORCH)) if f.code == "GPU_UNUSABLE"]
    assert [f.code for f in found] == expected
    if found:
        assert found[0].severity == "error" and found[0].evidence == [e.driver.error]


# README, finding codes: GPU_MEMORY_BUSY warns when 80 % or more of a GPU's memory is in use.
BUSY = [
    (16000, 12800, ["GPU_MEMORY_BUSY"]),
    (16000, 12799, []),
    (16000, 16000, ["GPU_MEMORY_BUSY"]),
    (16000, 0, []),
    (16000, None, []),
]


@pytest.mark.parametrize("total, used, expected", BUSY)
def test_gpu_memory_busy_threshold(total, used, expected):
    found = diagnose(env(gpus=(("Tesla T4", "7.5", total, used),)), build(TORCH))
    busy = [f for f in found if f.code == "GPU_MEMORY_BUSY"]
    assert [f.code for f in busy] == expected
    if busy:
        assert busy[0].severity == "warning" and busy[0].title == f"GPU 0 has {used} of {total} MiB in use"


# Quansight/open-gpu-server#69: cuDNN 9.11 and later no longer support Volta (compute capability 7.0).
VOLTA = Advisory(id="CM-2025-003", affects=["nvidia-cudnn-cu12>=9.11"], gpu_compute_capabilities=["7.0"],
                 symptom="cuDNN 9.11 and later no longer support Volta", fix="Keep cuDNN at 9.10.x on Volta GPUs.",
                 source="https://github.com/Quansight/open-gpu-server/issues/69")
KNOWN_BAD = [
    ("9.11.0.98", "7.0", None, "550.54.15", ["KNOWN_BAD"]),
    ("9.10.2.21", "7.0", None, "550.54.15", []),
    ("9.11.0.98", "7.5", None, "550.54.15", []),
    (None, "7.0", None, "550.54.15", []),
    ("9.11.0.98", "7.0", "<550", "550.54.15", []),
    ("9.11.0.98", "7.0", ">=550", "550.54.15", ["KNOWN_BAD"]),
]


@pytest.mark.parametrize("cudnn_wheel, cc, driver_spec, driver, expected", KNOWN_BAD)
def test_known_bad_advisory(cudnn_wheel, cc, driver_spec, driver, expected):
    m = replace(build(TORCH), advisories=AdvisoryFile(advisories=[replace(VOLTA, driver=driver_spec)]))
    packages = {"nvidia-cudnn-cu12": cudnn_wheel} if cudnn_wheel else {}
    found = [f for f in diagnose(env(gpus=(("GPU", cc, 16000, 0),), packages=packages, driver=driver), m)
             if f.code == "KNOWN_BAD"]
    assert [f.code for f in found] == expected
    if found:
        assert found[0].title == "CM-2025-003: cuDNN 9.11 and later no longer support Volta"
        assert found[0].evidence == ["nvidia-cudnn-cu12>=9.11", VOLTA.source] and found[0].fix == VOLTA.fix
