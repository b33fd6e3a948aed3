"""Live probes against fakes of the hardware: gcc-built libnvidia-ml / libcuda / libcudnn / libcudart,
a fake nvidia-smi on PATH, and a /proc-like root. detect runs in a child with the environment set."""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from support.fakes import (
    CRASH_C,
    CUDART_C,
    CUDNN_C,
    HANG_C,
    HAVE_GCC,
    LIBCUDA_C,
    build_lib,
    child_env,
    fake_nvml,
    fake_smi,
    fixture,
    proc_root,
    run_detect,
)
from support.localindex import venv_python

from cudamatrix.detect import _pyprobe, context, python_env

needs_gcc = pytest.mark.skipif(not HAVE_GCC, reason="gcc is needed to build fake NVIDIA libraries")


def lib(env, soname_or_path):
    return [x for x in env["libraries"] if x["soname"] == soname_or_path or x["path"] == soname_or_path]


def notes(env, word):
    return [n for n in env["notes"] if word in n["message"]]


@pytest.mark.slow
@needs_gcc
def test_nvml_lists_the_gpu(tmp_path):
    """NVML's answers through its C interface: memory from the v2 structure (the driver's reserved memory is not
    "used": the stand-in's v1 call counts it, 1,640 MiB, as a driver 580 H200's did), the PCI bus id from
    nvmlPciInfo_t's busId field, a process's memory."""
    fake_nvml(tmp_path / "lib")
    env = run_detect(child_env(ld_library_path=[tmp_path / "lib"]), root=proc_root(tmp_path / "root",
                                                                                   module_version="550.54.15"))
    d = env["driver"]
    assert (d["version"], d["cuda_version"], d["status"], d["source"]) == ("550.54.15", "12.4", "ok", "nvml")
    assert d["kernel_module_version"] == "550.54.15"
    g = env["gpus"][0]
    assert (g["name"], g["compute_capability"], g["memory_total_mib"], g["memory_used_mib"]) == (
        "NVIDIA A100-SXM4-80GB", "8.0", 81920, 1024)
    assert (g["uuid"], g["mig_mode"], g["source"], g["pci_bus_id"]) == ("GPU-fake-0000", "Disabled", "nvml",
                                                                          "00000000:19:00.0")
    assert g["processes"] == [{"pid": 4242, "name": "python", "used_memory_mib": 500}]
    nvml = lib(env, "libnvidia-ml.so.1")
    assert nvml and nvml[0]["path"].startswith(str(tmp_path)) and nvml[0]["loaded_first"]
    assert "nvidia-smi" not in env["timings_ms"]  # NVML answered: the expensive step is skipped
    # where the NVML child's time went: the interpreter's start, its imports, NVML's load, init and queries
    t = env["timings_ms"]
    assert all(t[k] >= 0 for k in ("nvml:start", "nvml:imports", "loader:nvml:load", "loader:nvml:init",
                                   "loader:nvml:query"))
    assert t["nvml:start"] + t["nvml:imports"] + t["loader:nvml"] <= t["nvml"]


@pytest.mark.slow
@needs_gcc
def test_nvml_process_memory_not_available_is_unknown(tmp_path):
    """NVML_VALUE_NOT_AVAILABLE (all bits set) in a process's usedGpuMemory: unknown, never 16 EiB."""
    fake_nvml(tmp_path / "lib")
    env = run_detect(child_env(ld_library_path=[tmp_path / "lib"], extra={"FAKE_NVML_PROC_NA": "1"}))
    assert env["gpus"][0]["processes"] == [{"pid": 4242, "name": "python", "used_memory_mib": None}]


@pytest.mark.slow
@needs_gcc
@pytest.mark.parametrize("rc,status", [(18, "mismatch"), (999, "error")])
def test_nvml_init_failures(tmp_path, rc, status):
    fake_nvml(tmp_path / "lib")
    env = run_detect(child_env(ld_library_path=[tmp_path / "lib"], extra={"FAKE_NVML_INIT_RC": str(rc)}))
    assert env["driver"]["status"] == status
    assert env["gpus"] == []


@pytest.mark.slow
@needs_gcc
def test_cuda_visible_devices_empty_is_no_device(tmp_path):
    fake_nvml(tmp_path / "lib")
    env = run_detect(child_env(ld_library_path=[tmp_path / "lib"], extra={"CUDA_VISIBLE_DEVICES": ""}))
    assert env["driver"]["status"] == "no_device"
    assert notes(env, "CUDA_VISIBLE_DEVICES")


@pytest.mark.slow
def test_fake_nvidia_smi_on_path_replays_a_real_table(tmp_path):
    fake_smi(tmp_path / "bin", fixture("nvidia-smi/570.195.03_T4G_cuda13.0-in-container_eks.txt"),
             query="0, NVIDIA T4G, 570.195.03, 15360, 0, 7.5, GPU-5a1b, 00000000:00:1F.0, [N/A]\n")
    env = run_detect(child_env(path_prepend=[tmp_path / "bin"], ld_library_path=[tmp_path / "empty"]))
    d = env["driver"]
    assert (d["version"], d["cuda_version"], d["status"], d["source"]) == ("570.195.03", "13.0", "ok", "nvidia-smi")
    g = env["gpus"][0]
    assert (g["name"], g["compute_capability"], g["memory_total_mib"], g["uuid"]) == (
        "NVIDIA T4G", "7.5", 15360, "GPU-5a1b")
    assert env["timings_ms"]["nvidia-smi"] > 0


@pytest.mark.slow
def test_fake_nvidia_smi_error_message(tmp_path):
    fake_smi(tmp_path / "bin", "Failed to initialize NVML: Driver/library version mismatch\n", rc=18)
    env = run_detect(child_env(path_prepend=[tmp_path / "bin"]), root=proc_root(tmp_path / "r", module_version="520.56.06"))
    assert env["driver"]["status"] == "mismatch"
    assert env["driver"]["kernel_module_version"] == "520.56.06"


@pytest.mark.slow
def test_hung_nvidia_smi_is_a_note_within_the_timeout(tmp_path):
    fake_smi(tmp_path / "bin", "never printed", sleep=30)
    start = time.monotonic()
    env = run_detect(child_env(path_prepend=[tmp_path / "bin"]), timeout_s=1.0)
    assert time.monotonic() - start < 15
    assert notes(env, "timed out")
    assert env["driver"]["status"] == "error"


@pytest.mark.slow
def test_kernel_module_without_user_space_is_no_device(tmp_path):
    root = proc_root(tmp_path / "root", module_version="535.104.05", dockerenv=True)
    env = run_detect(child_env(ld_library_path=[]), root=root)
    d = env["driver"]
    assert (d["status"], d["version"], d["source"]) == ("no_device", "535.104.05", "/proc/driver/nvidia/version")
    assert notes(env, "container")
    assert env["context"]["container"] == "docker"


@pytest.mark.slow
def test_nothing_at_all_is_absent(tmp_path):
    env = run_detect(child_env(ld_library_path=[]), root=proc_root(tmp_path / "root"))
    assert env["driver"]["status"] == "absent" and env["gpus"] == []


@pytest.mark.slow
@needs_gcc
def test_libcuda_answers_the_driver_cuda_version(tmp_path):
    build_lib(tmp_path / "lib", "libcuda.so.1", LIBCUDA_C, VERSION=12080, RC=0)
    env = run_detect(child_env(ld_library_path=[tmp_path / "lib"]), root=proc_root(tmp_path / "root"))
    assert env["driver"]["cuda_version"] == "12.8"
    cuda = lib(env, "libcuda.so.1")[0]
    assert (cuda["version"], cuda["stub"], cuda["loaded_first"]) == ("12.8", False, True)


@pytest.mark.slow
@needs_gcc
def test_stub_libcuda_on_the_search_path(tmp_path):
    stubs = tmp_path / "cuda" / "lib64" / "stubs"
    build_lib(stubs, "libcuda.so.1", LIBCUDA_C, VERSION=0, RC=34)
    env = run_detect(child_env(ld_library_path=[stubs]), root=proc_root(tmp_path / "root"))
    cuda = lib(env, "libcuda.so.1")[0]
    assert cuda["stub"] is True
    assert notes(env, "stub")
    assert env["driver"]["cuda_version"] is None


@pytest.mark.slow
@needs_gcc
def test_cudnn_copies_versions_and_shadowing(tmp_path, template_venv):
    first = build_lib(tmp_path / "a", "libcudnn.so.9", CUDNN_C, VERSION=90100)
    second = build_lib(tmp_path / "b", "libcudnn.so.9", CUDNN_C, VERSION=90500)
    old = build_lib(tmp_path / "c", "libcudnn.so.8", CUDNN_C, VERSION=8902)
    # a Python environment without frameworks: the search-order note is what is left to say. (The test extra's
    # torch is the CUDA build where pip takes it from the default index; its DT_RPATH maps its own wheel's
    # cuDNN, and detect rightly says that instead: tests/test_loader*.py cover that case.)
    env = run_detect(child_env(ld_library_path=[tmp_path / "a", tmp_path / "b", tmp_path / "c"]),
                     python=venv_python(template_venv))
    a, b, c = lib(env, str(first))[0], lib(env, str(second))[0], lib(env, str(old))[0]
    assert (a["version"], a["loaded_first"], a["shadowed_by"], a["origin"]) == ("9.1.0", True, None, "LD_LIBRARY_PATH")
    assert (b["version"], b["loaded_first"], b["shadowed_by"]) == ("9.5.0", False, str(first))
    assert (c["version"], c["soname"], c["loaded_first"]) == ("8.9.2", "libcudnn.so.8", True)
    assert notes(env, "shadows")


@pytest.mark.slow
@needs_gcc
def test_a_hanging_library_is_skipped_and_the_rest_answered(tmp_path):
    build_lib(tmp_path / "a", "libcudart.so.12", HANG_C)
    good = build_lib(tmp_path / "b", "libcudnn.so.9", CUDNN_C, VERSION=90300)
    start = time.monotonic()
    env = run_detect(child_env(ld_library_path=[tmp_path / "a", tmp_path / "b"]), timeout_s=1.5)
    assert time.monotonic() - start < 20
    assert notes(env, "hung")
    assert lib(env, str(good))[0]["version"] == "9.3.0"


@pytest.mark.slow
@needs_gcc
def test_a_crashing_library_is_a_note(tmp_path):
    bad = build_lib(tmp_path / "a", "libcudnn.so.9", CRASH_C)
    good = build_lib(tmp_path / "b", "libcudart.so.12", CUDART_C, VERSION=12040)
    env = run_detect(child_env(ld_library_path=[tmp_path / "a", tmp_path / "b"]))
    assert [n for n in notes(env, "crashed") if str(bad) in n["message"]]
    assert lib(env, str(good))[0]["version"] == "12.4"


@pytest.mark.slow
@needs_gcc
def test_wheel_copies_conflicts_and_torch_variant(tmp_path):
    site = tmp_path / "venv" / "lib" / "site-packages"
    wheel_lib = build_lib(site / "nvidia" / "cudnn" / "lib", "libcudnn.so.9", CUDNN_C, VERSION=90100)
    record = "nvidia/cudnn/lib/libcudnn.so.9,sha256=x,1\nnvidia/__init__.py,,\n"
    for dist, version in (("nvidia_cudnn_cu12", "9.1.0.70"), ("nvidia_cudnn_cu13", "9.13.0.50")):
        info = site / f"{dist}-{version}.dist-info"
        info.mkdir()
        info.joinpath("METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist.replace('_', '-')}\nVersion: {version}\n")
        info.joinpath("RECORD").write_text(record + f"{info.name}/METADATA,,\n")
    torch = site / "torch-2.5.1.dist-info"
    torch.mkdir()
    torch.joinpath("METADATA").write_text(
        "Metadata-Version: 2.1\nName: torch\nVersion: 2.5.1\n"
        "Requires-Dist: filelock\n"
        "Requires-Dist: nvidia-cuda-runtime-cu12==12.4.127; platform_system == \"Linux\"\n"
        "Requires-Dist: nvidia-cudnn-cu12==9.1.0.70; platform_system == \"Linux\"\n\nA long README body\n")
    side = python_env.build(_pyprobe.collect([str(site)]))
    assert side.packages == {"nvidia-cudnn-cu12": "9.1.0.70", "nvidia-cudnn-cu13": "9.13.0.50", "torch": "2.5.1"}
    assert side.requirements["torch"][1].startswith("nvidia-cudnn-cu12==9.1.0.70")
    t = side.frameworks[0]
    assert (t.variant, t.cuda, t.cudnn, t.source) == ("cu124", "12.4", "9.1.0", "nvidia requirements")
    assert [(c.path, c.distributions) for c in side.file_conflicts] == [
        ("nvidia/cudnn/lib/libcudnn.so.9", ["nvidia-cudnn-cu12==9.1.0.70", "nvidia-cudnn-cu13==9.13.0.50"])]
    # live: the wheel copy is found with its owner, and a system copy on LD_LIBRARY_PATH shadows it
    system = build_lib(tmp_path / "system", "libcudnn.so.9", CUDNN_C, VERSION=90000)
    env = run_detect(child_env(ld_library_path=[tmp_path / "system"]) | {
        "PYTHONPATH": f"{child_env()['PYTHONPATH']}:{site}"})
    w = lib(env, str(wheel_lib))[0]
    # its own answer (9.1.0) refined by the owning wheel's version
    assert (w["origin"], w["version"], w["shadowed_by"]) == ("wheel:nvidia-cudnn-cu12", "9.1.0.70", str(system))
    assert lib(env, str(system))[0]["version"] == "9.0.0"
    assert env["file_conflicts"] and notes(env, "overwrite each other")


def test_torch_variant_from_local_version_and_version_py():
    assert python_env.torch_variant("2.5.1+cu121", [], None).cuda == "12.1"
    assert python_env.torch_variant("2.13.0+cpu", [], None).variant == "cpu"
    rocm = python_env.torch_variant("2.4.0", [], "__version__ = '2.4.0'\ncuda: Optional[str] = None\nhip: Optional[str] = '6.1.40091'\n")
    assert rocm.variant == "rocm6.1"
    assert python_env.cuda_from_tag("cu92") == "9.2" and python_env.cuda_from_tag("cu130") == "13.0"


def test_context_markers(tmp_path):
    root = proc_root(tmp_path, dockerenv=True, wsl=True)
    ctx = context.probe(str(root), {"COLAB_RELEASE_TAG": "x", "KAGGLE_KERNEL_RUN_TYPE": "Interactive",
                                    "JPY_PARENT_PID": "1", "LD_LIBRARY_PATH": "/x", "HOME": "/home/user"})
    assert (ctx.container, ctx.wsl, ctx.colab, ctx.kaggle, ctx.jupyter) == ("docker", True, True, True, True)
    assert ctx.env == {"LD_LIBRARY_PATH": "/x"}
    assert context.probe(str(root), {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}).container == "kubernetes"
    podman = tmp_path / "p"
    (podman / "run").mkdir(parents=True)
    (podman / "run/.containerenv").write_text("")
    assert context.probe(str(podman), {}).container == "podman"
    assert context.probe(str(tmp_path / "bare"), {}).container is None


def test_real_python_side_does_not_import_frameworks():
    import sys

    before = set(sys.modules)
    side, error = python_env.probe(None, 5.0)
    assert error is None and side.python.version
    assert not {m for m in set(sys.modules) - before if m.split(".")[0] in ("torch", "tensorflow", "jax", "pydantic")}
    assert Path(side.python.executable).exists()


@pytest.mark.slow
@needs_gcc
def test_a_library_that_fails_to_load_is_a_note(tmp_path):
    dep = build_lib(tmp_path / "dep", "libcudnn_missing_dep.so", "int helper(void) { return 1; }")
    src = tmp_path / "cudart.c"
    src.write_text("int helper(void);\nint cudaRuntimeGetVersion(int *v) { *v = helper(); return 0; }\n")
    target = tmp_path / "a" / "libcudart.so.12"
    target.parent.mkdir()
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libcudart.so.12", "-o", str(target), str(src),
                    f"-L{dep.parent}", "-l:libcudnn_missing_dep.so"], check=True, capture_output=True, timeout=60)
    dep.unlink()  # the copy now names a dependency the loader cannot find
    env = run_detect(child_env(ld_library_path=[tmp_path / "a"]))
    assert [n for n in notes(env, "failed to load") if "libcudnn_missing_dep.so" in n["message"]]
    assert lib(env, str(target))[0]["version"] is None


def test_toolkit_copies_no_loader_reaches_only_with_all_copies(tmp_path):
    """The scan reads the folders a loader can reach; a toolkit's copy outside the ldconfig cache (and CUDA_HOME's)
    is listed only when asked for (--all-copies); one the cache lists is found either way, as ldconfig's."""
    from cudamatrix.detect.libraries import find_copies
    from cudamatrix.ldso.ldcache import LdEntry

    lib64 = tmp_path / "usr/local/cuda-12.4/lib64"
    lib64.mkdir(parents=True)
    (lib64 / "libcudart.so.12.4.127").write_text("")
    (lib64 / "libcudnn.so.9.1.0").write_text("")
    home = tmp_path / "opt/cuda/lib64"
    home.mkdir(parents=True)
    (home / "libnvrtc.so.12.4.99").write_text("")
    cached = [LdEntry("libcudnn.so.9", "libc6,x86-64", str(lib64 / "libcudnn.so.9.1.0"))]
    environ = {"CUDA_HOME": str(tmp_path / "opt/cuda")}

    def found(**kw):
        return {(os.path.basename(c.path), c.origin) for c in find_copies(environ, str(tmp_path), [], cached, {}, **kw)}

    assert found() == {("libcudnn.so.9.1.0", "ldconfig")}
    assert found(all_copies=True) == {("libcudnn.so.9.1.0", "ldconfig"), ("libnvrtc.so.12.4.99", "CUDA_HOME"),
                                      ("libcudart.so.12.4.127", "/usr/local/cuda-12.4")}


def test_nvml_answers_on_a_real_h100_match_nvidia_smi_there():
    """The NVML child's answers recorded on a lent H100 (detect --json, NVML through its C interface) against
    nvidia-smi's query on the same machine, read by the paste reader: the same GPU, driver, memory (used without
    the 480 MiB the driver reserves), bus id, UUID and MIG mode."""
    import json

    from support.fakes import DATA, fixture

    from cudamatrix.pastes.reports import from_reports

    folder = "gpu_speed/h100-2026-11-27b"
    live = json.loads((DATA / folder / "detect.json").read_text())["data"]["environment"]
    smi = from_reports([("nvidia-smi-query.csv", fixture(f"{folder}/nvidia-smi-query.csv"))])
    reserved = fixture(f"{folder}/nvidia-smi-reserved.csv").splitlines()[1]
    assert reserved == "0, 480 MiB"
    assert live["driver"]["source"] == "nvml" and live["driver"]["version"] == smi.driver.version == "580.159.04"
    (gpu,), (row,) = live["gpus"], smi.gpus
    assert gpu["source"] == "nvml"
    for mine, theirs in (("name", "name"), ("compute_capability", "compute_capability"),
                         ("memory_total_mib", "memory_total_mib"), ("memory_used_mib", "memory_used_mib"),
                         ("pci_bus_id", "pci_bus_id"), ("uuid", "uuid"), ("mig_mode", "mig_mode")):
        assert gpu[mine] == getattr(row, theirs) and gpu[mine] is not None, mine
