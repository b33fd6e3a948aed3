"""Doctor tables, second part: the driver's state, the installed build against the machine, the nvidia-* wheels
a framework declares, and the toolkit next to the driver. Small matrix of ``smallmatrix``; environments built
here.

Facts: CUDA Toolkit Release Notes (12.1 GA needs 530.30.02; any 12.x runs on 525.60.13 under minor-version
compatibility; Kepler's last driver branch is R470, "Data Center Driver Support" of the driver/architecture
matrix); pip's resolver semantics for Requires-Dist (an ``==`` pin is met only by that version).
"""
from __future__ import annotations

import pytest

from cudamatrix.diagnose.findings import diagnose, summary_exit
from cudamatrix.models import (Context, Driver, Environment, FileConflict, Framework, GpuInfo, Note, PythonInfo,
                               Toolkit)
from smallmatrix import build, release, replace, variant

A = ["3.7", "5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0"]
CU121 = variant("cu121", "12.1", archs=A, cudnn="9.1.0", local_version="+cu121")
CPU = variant("cpu", None, local_version="+cpu")
TORCH = replace(release("2.5.1", CU121, CPU), python=["3.10", "3.11", "3.12"])
M = build(TORCH)


def env(*, driver="550.54.15", status="ok", cc="7.5", torch="2.5.1+cu121", python="3.11.9", error=None,
        **kw) -> Environment:
    fw = [Framework(name="torch", version=torch, variant=torch.partition("+")[2] or None)] if torch else []
    e = Environment(origin="file", driver=Driver(version=driver, status=status, error=error),
                    gpus=[GpuInfo(index=0, name="GPU", compute_capability=cc)] if cc else [],
                    python=PythonInfo(version=python, platform="linux_x86_64"), frameworks=fw,
                    packages={"torch": torch} if torch else {}, **kw)
    return e


def codes(e: Environment) -> list[tuple[str, str]]:
    return [(f.code, f.severity) for f in diagnose(e, M)]


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
    found = codes(env(**facts))
    assert found == expected
    assert summary_exit(diagnose(env(**facts), M)) == (1 if any(s == "error" for _, s in expected) else 0)


def test_no_device_visible_names_cuda_visible_devices():
    e = env(status="no_device", cc=None, context=Context(env={"CUDA_VISIBLE_DEVICES": ""}))
    (f,) = diagnose(e, M)
    assert f.evidence == ["the driver answers but lists no GPU", "CUDA_VISIBLE_DEVICES=''"]


def test_no_driver_evidence_is_the_probes_words():
    e = env(driver=None, status="absent", notes=[Note(probe="nvidia-smi", message="nvidia-smi: not found"),
                                                  Note(probe="python", message="unrelated")])
    (f,) = diagnose(e, M)
    assert f.evidence == ["nvidia-smi: not found"]


def test_driver_too_old_fix_names_the_driver():
    # no build of this small matrix runs on R520 (CUDA 11.8): the driver floor is the whole answer
    (f,) = diagnose(env(driver="520.61.05"), M)
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
    e = env(requirements=requirements)
    e.packages.update(wheels)
    found = [(f.code, f.title) for f in diagnose(e, M) if f.code == "NVIDIA_WHEEL_DRIFT"]
    assert found == expected


def test_two_frameworks_pinning_different_cudnn_conflict():
    # torch 2.5.1's wheel pins nvidia-cudnn-cu12==9.1.0.70, tensorflow[and-cuda] 2.15's pins 8.9.4.25
    e = env(requirements={"torch": [f"nvidia-cudnn-cu12==9.1.0.70; {LINUX}"],
                          "tensorflow": ['nvidia-cudnn-cu12==8.9.4.25; extra == "and-cuda"']})
    e.packages.update({"tensorflow": "2.15.0", "nvidia-cudnn-cu12": "8.9.4.25"})
    conflict = [f for f in diagnose(e, M) if f.code == "FRAMEWORK_CONFLICT"]
    assert [f.evidence for f in conflict] == [[
        "torch needs nvidia-cudnn-cu12==9.1.0.70, tensorflow needs nvidia-cudnn-cu12==8.9.4.25"]]
    # torchvision and torch are one family: never a conflict between them
    e2 = env(requirements={"torch": [f"nvidia-cudnn-cu12==9.1.0.70; {LINUX}"],
                           "torchvision": [f"nvidia-cudnn-cu12==9.1.0.70; {LINUX}"]})
    e2.packages["nvidia-cudnn-cu12"] = "9.1.0.70"
    assert [f.code for f in diagnose(e2, M)] == []


def test_file_clobber():
    e = env(file_conflicts=[FileConflict(path="cupy/__init__.py", distributions=["cupy-cuda12x", "cupy-cuda13x"])])
    (f,) = diagnose(e, M)
    assert (f.code, f.title, f.evidence) == ("FILE_CLOBBER", "cupy-cuda12x and cupy-cuda13x install the same file",
                                             ["cupy/__init__.py"])
    # several files of the same pair: one finding that counts them and lists them sorted
    e.file_conflicts.append(FileConflict(path="cupy/_core/core.so", distributions=["cupy-cuda13x", "cupy-cuda12x"]))
    (f,) = diagnose(e, M)
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
    e = env(toolkits=[Toolkit(source="nvcc --version", version=toolkit, path="/usr/local/cuda/bin/nvcc")])
    e.driver.cuda_version = driver_cuda
    assert codes(e) == expected
    assert summary_exit(diagnose(e, M)) == 0


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
    assert diagnose(env(**facts), M)[0].title == title


def test_drift_findings_carry_the_pip_command():
    e = env(requirements={"torch": [f"nvidia-cudnn-cu12==9.1.0.70; {LINUX}", f"nvidia-cublas-cu12==12.1.3.1; {LINUX}",
                                    "not a requirement ~~"]})
    e.packages["nvidia-cublas-cu12"] = "12.4.5.8"
    drift = [f for f in diagnose(e, M) if f.code == "NVIDIA_WHEEL_DRIFT"]
    assert [(f.fix, f.fix_commands, f.evidence) for f in drift] == [
        ("pip install 'nvidia-cudnn-cu12==9.1.0.70'", [["pip", "install", "nvidia-cudnn-cu12==9.1.0.70"]],
         ["torch 2.5.1+cu121 declares " + f"nvidia-cudnn-cu12==9.1.0.70; {LINUX}"]),
        ("pip install 'nvidia-cublas-cu12==12.1.3.1' (cudamatrix fix reinstalls only the drifted wheels)",
         [["pip", "install", "nvidia-cublas-cu12==12.1.3.1"]],
         ["torch 2.5.1+cu121 requires " + f"nvidia-cublas-cu12==12.1.3.1; {LINUX}"])]


def test_clobber_fix_and_torchaudio_pairing():
    e = env(file_conflicts=[FileConflict(path="p", distributions=["a", "b"])])
    (f,) = diagnose(e, M)
    assert f.fix == "uninstall one of them (the one the framework does not declare), then reinstall the other"
    paired = replace(TORCH, companions={"torchvision": "0.20.1", "torchaudio": "2.5.1"})
    e = env()
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
    (f,) = [f for f in diagnose(env(libraries=libs, library_loads=loads), M) if f.code == "LIBRARY_SHADOWED"]
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
    (g,) = [f for f in diagnose(env(libraries=system, library_loads=earlier), M) if f.code == "LIBRARY_SHADOWED"]
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
    (f,) = [f for f in diagnose(env(libraries=libs, library_loads=loads), M) if f.code == "CUDNN_MISMATCH"]
    assert (f.severity, f.title) == ("error", "torch 2.5.1+cu121 was built with cuDNN 9.1.0 but will run cuDNN 8.9.2 "
                                              "from /opt/c8/libcudnn.so.8")
    assert f.evidence == ["libcudnn.so.8: /opt/c8/libcudnn.so.8 (LD_LIBRARY_PATH; found as /opt/c8/libcudnn.so.8)",
                          "torch needs the same major and a minor at least the compiled one"]
    assert f.fix == "remove /opt/c8 from LD_LIBRARY_PATH (cudamatrix env prints the export)"
    # the same copies without a prediction (a pasted environment): no cuDNN finding at all
    assert [f.code for f in diagnose(env(libraries=libs), M) if f.code in ("CUDNN_MISMATCH", "LIBRARY_SHADOWED")] == []


def test_busy_gpu_names_the_processes():
    from cudamatrix.models import GpuProcess

    gpu = GpuInfo(name="NVIDIA A100", compute_capability="8.0", memory_total_mib=1000, memory_used_mib=900,
                  processes=[GpuProcess(pid=4242, name="python", used_memory_mib=850), GpuProcess(name="Xorg")])
    (f,) = [f for f in diagnose(Environment(gpus=[gpu]), M)
            if f.code == "GPU_MEMORY_BUSY"]
    assert f.title == "NVIDIA A100 has 900 of 1000 MiB in use"
    assert f.evidence == ["pid 4242 python 850 MiB", "a process Xorg"]
    nameless = GpuInfo(memory_total_mib=1000, memory_used_mib=900)
    (g,) = [f for f in diagnose(Environment(gpus=[nameless]), M) if f.code == "GPU_MEMORY_BUSY"]
    assert g.title == "A GPU has 900 of 1000 MiB in use"
    assert g.evidence == ["other processes hold most of the GPU memory"]


def test_toolkit_evidence_and_unreadable_versions():
    e = env(toolkits=[Toolkit(source="report:nvcc", version="13.0.88"), Toolkit(source="x", version="garbage"),
                      Toolkit(source="y", version=None)])
    e.driver.cuda_version = "12.4"
    (f,) = diagnose(e, M)
    assert (f.code, f.evidence) == ("TOOLKIT_NEWER_THAN_DRIVER", ["report:nvcc"])
    assert f.title == "CUDA toolkit 13.0.88 is newer than the driver's CUDA 12.4"
    e.driver.cuda_version = "unknown"
    assert diagnose(e, M) == []


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
        solve([Target(name="t")], parse_request(["jax", "torch"]), M)
    assert err.value.detail["causes"][0] == {"rule": "request", "message": "the matrix has no jax release",
                                             "machines": []}
