"""The driver cascade, cheap before expensive: kernel-module files, then NVML (its C interface, in the loader child),
then ``cuDriverGetVersion`` on ``libcuda.so.1``, then nvidia-smi (:mod:`.smi`). Nothing here raises.

The statuses (models.DriverStatus) follow what a user can do about them:
absent (install a driver), no_device (pass the GPU through / unhide it), mismatch (reboot or reinstall
so kernel module and user-space libraries agree), error (the device is there but sick).
"""
from __future__ import annotations

import os

from cudamatrix.detect.text import version_from_int
from cudamatrix.models import Driver, GpuInfo, GpuProcess, Library, Note
from cudamatrix.safe.text import lazy

_PROC_VERSION = lazy(r"Kernel Module(?:\s+for\s+\S+)?\s+(?P<v>\d+\.\d+(?:\.\d+)?)")

# NVML return codes (nvml.h) that decide the status
NVML_DRIVER_NOT_LOADED = 9
NVML_LIBRARY_NOT_FOUND = 12
NVML_GPU_IS_LOST = 15
NVML_LIB_RM_VERSION_MISMATCH = 18
NVML_NO_PERMISSION = 4
NVML_UNKNOWN = 999


def parse_proc_version(text: str) -> str | None:
    """The kernel module's version from /proc/driver/nvidia/version ("NVRM version: ... Kernel Module 535.54.03")."""
    m = _PROC_VERSION.search(text)
    return m.group("v") if m else None


_TEGRA_RELEASE = lazy(r"#\s*R(?P<major>\d+)\s*\(release\),\s*REVISION:\s*(?P<rev>\d+(?:\.\d+)*)")


def parse_tegra_release(text: str) -> str | None:
    """The Jetson Linux (L4T) release a Jetson's /etc/nv_tegra_release names ("# R36 (release), REVISION: 4.3,
    GCID: ..." -> "36.4.3"), or None. The board's own record of its BSP, which carries its CUDA driver."""
    m = _TEGRA_RELEASE.search(text)
    return f"{int(m.group('major'))}.{m.group('rev')}" if m else None


def read_tegra_release(root: str = "/") -> str | None:
    """The Jetson Linux release of this machine (:func:`parse_tegra_release`), None when it is not a Jetson."""
    try:
        with open(os.path.join(root, "etc/nv_tegra_release"), encoding="utf-8", errors="replace") as fh:
            return parse_tegra_release(fh.read(4096))
    except OSError:
        return None


def read_module_version(root: str = "/") -> tuple[str | None, str | None]:
    """(version, source) of the loaded kernel module, from /proc then /sys; (None, None) when not loaded."""
    for rel, parse in (("proc/driver/nvidia/version", parse_proc_version),
                       ("sys/module/nvidia/version", lambda t: t.strip() or None)):
        try:
            with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as fh:
                version = parse(fh.read(4096))
        except OSError:
            continue
        if version:
            return version, "/" + rel
    return None, None


def from_nvml(answer: dict | None, driver: Driver, notes: list[Note]) -> list[GpuInfo]:
    """Fill ``driver`` from the loader child's NVML answer; returns the GPUs it listed."""
    if not answer:
        return []
    code = answer.get("code")
    if answer.get("error"):
        message = answer["error"]
        if code == NVML_LIBRARY_NOT_FOUND:
            notes.append(Note("nvml", "libnvidia-ml.so.1 not found: no NVIDIA user-space driver on the loader path"))
        elif code == NVML_LIB_RM_VERSION_MISMATCH:
            driver.status, driver.error = "mismatch", f"NVML: Driver/library version mismatch ({message})"
        elif code == NVML_DRIVER_NOT_LOADED:
            driver.status, driver.error = ("absent" if driver.kernel_module_version is None else "error"), message
        elif code in (NVML_UNKNOWN, NVML_GPU_IS_LOST, NVML_NO_PERMISSION) or code is not None:
            driver.status, driver.error = "error", f"NVML: {message}"
        else:
            notes.append(Note("nvml", message, "warning"))
        if not answer.get("driver"):
            return []
    if answer.get("driver"):
        driver.version = answer["driver"]
        driver.source = "nvml"
    if answer.get("cuda"):
        driver.cuda_version = version_from_int(answer["cuda"])
    gpus = []
    for g in answer.get("gpus") or []:
        if g.get("error"):
            driver.status, driver.error = "error", f"NVML, GPU {g['index']}: {g['error']}"
            gpus.append(GpuInfo(index=g["index"], source="nvml"))
            continue
        gpus.append(GpuInfo(index=g["index"], name=g.get("name"), compute_capability=g.get("cc"),
                            memory_total_mib=g.get("total"), memory_used_mib=g.get("used"), uuid=g.get("uuid"),
                            pci_bus_id=g.get("pci"), mig_mode=g.get("mig"), source="nvml",
                            processes=[GpuProcess(pid=p.get("pid"), name=p.get("name"),
                                                  used_memory_mib=p.get("used")) for p in g.get("procs") or []]))
    if driver.status == "unknown":
        driver.status = "ok" if gpus else "no_device"
    return gpus


def from_libcuda(answer: dict | None, driver: Driver, notes: list[Note]) -> Library | None:
    """Fill what ``cuDriverGetVersion`` tells; returns libcuda as a Library when it loaded."""
    if not answer:
        return None
    if answer.get("error"):
        notes.append(Note("libcuda", f"libcuda.so.1 not loadable: {answer['error'][:200]}"))
        return None
    path = answer.get("path") or "libcuda.so.1"
    lib = Library(name="cuda", soname="libcuda.so.1", path=path, origin="loader", loaded_first=True,
                  version=version_from_int(answer.get("version")))
    if answer.get("stub") or "/stubs/" in path:
        lib.stub = True
        notes.append(Note("libcuda", f"the libcuda.so.1 the loader picks is a link-time stub ({path}): CUDA programs "
                          "will fail with 'CUDA driver is a stub library'; remove its folder from "
                          "LD_LIBRARY_PATH", "error"))
        return lib
    if answer.get("rc") == 0 and lib.version:
        if driver.cuda_version is None:
            driver.cuda_version = lib.version
        if driver.source is None:
            driver.source = "libcuda"
    elif answer.get("rc"):
        notes.append(Note("libcuda", f"cuDriverGetVersion returned error {answer['rc']}", "warning"))
    return lib


def hidden_by_environment(environ: dict[str, str]) -> str | None:
    """Why CUDA would see no device although the driver lists some, or None."""
    cvd = environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None and cvd.strip() in ("", "-1", "NoDevFiles"):
        return f"CUDA_VISIBLE_DEVICES={cvd!r} hides every GPU from CUDA programs"
    nvd = environ.get("NVIDIA_VISIBLE_DEVICES")
    if nvd is not None and nvd.strip().lower() in ("void", "none", ""):
        return f"NVIDIA_VISIBLE_DEVICES={nvd!r}: the container runtime passes no GPU through"
    return None
