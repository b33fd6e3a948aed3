"""Findings about the host around the frameworks: GPU memory in use, library folders others can write, disk and
memory headroom, known-bad combinations, a toolkit newer than the driver. No I/O."""
from __future__ import annotations

from packaging.version import InvalidVersion, Version

from cudamatrix.diagnose.context import Diagnosis
from cudamatrix.matrix.data import Advisory
from cudamatrix.models import Environment, Finding
from cudamatrix.names import canonical, name_and_specifier
from cudamatrix.schema.pep508 import specifiers

BUSY_FRACTION = 0.8

# Inference rules (written down, not measured here): a CUDA build of torch with its nvidia-* wheels takes several
# GB once unpacked (cudamatrix.install.resources estimates each plan from the index's sizes), so under 8 GiB
# free where packages go, an install is likely to fail half-way; a notebook with under 2 GiB (or under 10 %)
# of host memory available is one large tensor away from the kernel's OOM killer.
LOW_DISK_MIB = 8 * 1024
LOW_MEMORY_MIB = 2 * 1024
LOW_MEMORY_FRACTION = 0.10


def gpu_memory_busy(d: Diagnosis) -> list[Finding]:
    """GPU_MEMORY_BUSY (warning): 80 % or more of a GPU's memory in use (NVML / nvidia-smi memory figures),
    naming the processes that hold it."""
    out = []
    for gpu in d.env.gpus:
        if gpu.memory_total_mib and gpu.memory_used_mib is not None and \
                gpu.memory_used_mib >= BUSY_FRACTION * gpu.memory_total_mib:
            procs = [" ".join(x for x in (f"pid {p.pid}" if p.pid is not None else "a process", p.name,
                                          f"{p.used_memory_mib} MiB" if p.used_memory_mib is not None else None)
                              if x) for p in gpu.processes]
            which = f"GPU {gpu.index}" if gpu.index is not None else (gpu.name or "A GPU")
            out.append(Finding(code="GPU_MEMORY_BUSY", severity="warning",
                               title=f"{which} has {gpu.memory_used_mib} of {gpu.memory_total_mib} MiB in use",
                               evidence=procs or ["other processes hold most of the GPU memory"],
                               fix="stop the processes holding it (or restart a stale notebook kernel)"))
    return out


def unsafe_library_path(d: Diagnosis) -> list[Finding]:
    """UNSAFE_LIBRARY_PATH (warning): library folders anyone may plant a library in; detect did not load from
    them (ld.so(8): an empty LD_LIBRARY_PATH entry is the current folder)."""
    evidence = [n.message for n in d.env.notes if n.probe == "unsafe library path"]
    if not evidence:
        return []
    return [Finding(code="UNSAFE_LIBRARY_PATH", severity="warning",
                    title="the library search path has folders others can plant libraries in",
                    evidence=evidence[:10],
                    fix="use absolute LD_LIBRARY_PATH entries without empty ones (no leading, trailing or double "
                        "colon), and no world-writable folders")]


def low_disk(d: Diagnosis) -> list[Finding]:
    """LOW_DISK (warning): under 8 GiB free (statvfs) where packages, the temp folder or pip's cache live (the
    inference rule above)."""
    return [Finding(code="LOW_DISK", severity="warning",
                    title=f"only {disk.free_mib / 1024:.1f} GiB free on the disk of {disk.purpose}",
                    evidence=[f"{disk.path}: {disk.free_mib} of {disk.total_mib} MiB free (statvfs)"],
                    fix="free space there (pip cache purge, old environments), or point TMPDIR / "
                        "PIP_CACHE_DIR at a larger disk: a CUDA framework with its nvidia-* wheels "
                        "needs several GB")
            for disk in d.env.host.disks if disk.free_mib < LOW_DISK_MIB]


def low_host_memory(d: Diagnosis) -> list[Finding]:
    """LOW_HOST_MEMORY (warning): under 2 GiB or 10 % of host memory available (/proc/meminfo MemAvailable; the
    inference rule above)."""
    host = d.env.host
    avail, total = host.memory_available_mib, host.memory_total_mib
    if avail is None or not total or not (avail < LOW_MEMORY_MIB or avail < LOW_MEMORY_FRACTION * total):
        return []
    return [Finding(code="LOW_HOST_MEMORY", severity="warning",
                    title=f"only {avail} MiB of {total} MiB host memory is available",
                    evidence=["/proc/meminfo MemAvailable"],
                    fix="close other notebooks and processes (or restart stale kernels) before loading "
                        "large models")]


def _specifier(text: str):
    """The specifier set: plain releases read here (:mod:`cudamatrix.schema.pep508`, packaging's answers without
    its import), the rest by packaging, imported on first use."""
    lite = specifiers(text)
    if lite is not None:
        return lite
    from packaging.specifiers import SpecifierSet

    return SpecifierSet(text)


def _affects(adv: Advisory, env: Environment) -> bool:
    """Every requirement the advisory names matches an installed package, and its GPU and driver conditions
    hold."""
    for text in adv.affects:
        name, spec = name_and_specifier(text)
        have = env.packages.get(canonical(name))
        if have is None or not _specifier(spec).contains(have, prereleases=True):
            return False
    ccs = {g.compute_capability for g in env.gpus if g.compute_capability}
    if adv.gpu_compute_capabilities and not ccs & set(adv.gpu_compute_capabilities):
        return False
    return not adv.driver or bool(env.driver.version and _specifier(adv.driver).contains(env.driver.version))


def _loaded(env: Environment, library: str) -> tuple[set[str], bool]:
    """The versions of ``library`` the facts show loaded (a framework's "found" version, the copy the loader
    picks), and whether they show it failing to load."""
    versions = {m.found for m in env.messages if m.library == library and m.kind == "library_version" and m.found}
    versions |= {lib.version for lib in env.libraries if lib.name == library and lib.loaded_first and lib.version}
    versions |= {load.version for load in env.library_loads if load.path and load.version and
                 load.soname.startswith((f"lib{library}.", f"lib{library}_"))}
    missing = any(m.library == library and m.kind == "library_missing" for m in env.messages) or \
        any(load.path is None and load.soname.startswith(f"lib{library}.") for load in env.library_loads)
    return {v for v in versions if v}, missing


def _cpu_builds_only(adv: Advisory, env: Environment) -> bool:
    """Every installed framework the advisory names is a CPU build."""
    named = {canonical(name_and_specifier(text)[0]) for text in adv.affects}
    builds = [f for f in env.frameworks if canonical(f.name) in named]
    return bool(builds) and all(f.variant == "cpu" for f in builds)


def _library_condition(adv: Advisory, env: Environment) -> str:
    """"met", "not met" or "unknown": the advisory's library condition over the facts ("met" without one)."""
    if not adv.library:
        return "met"
    if _cpu_builds_only(adv, env):
        return "not met"  # a CPU build loads no CUDA library
    versions, missing = _loaded(env, adv.library)
    if adv.library_missing:
        return "met" if missing else ("not met" if versions else "unknown")
    spec = _specifier(adv.library_version or "")
    if versions:
        return "met" if any(spec.contains(v, prereleases=True) for v in versions) else "not met"
    present = {lib.version for lib in env.libraries if lib.name == adv.library and lib.version}
    if present and not any(spec.contains(v, prereleases=True) for v in present):
        return "not met"  # no copy on the machine could be the failing one
    return "unknown"


def _condition_text(adv: Advisory) -> str:
    if adv.library_missing:
        return f"{adv.library} fails to load"
    return f"the {adv.library} loaded is {adv.library_version}"


def known_bad(d: Diagnosis) -> list[Finding]:
    """KNOWN_BAD: an advisory of ``advisories.json`` matches (each advisory cites its own source: the
    framework's issue or release note): an error when the facts meet its library condition too, a note (info)
    when they do not show whether they do, nothing when they show they do not."""
    out = []
    for adv in d.matrix.advisories.advisories:
        if not _affects(adv, d.env):
            continue
        state = _library_condition(adv, d.env)
        if state == "met":
            out.append(Finding(code="KNOWN_BAD", severity="error", title=f"{adv.id}: {adv.symptom}",
                               evidence=list(adv.affects) + ([_condition_text(adv)] if adv.library else []) +
                               [adv.source], fix=adv.fix))
        elif state == "unknown":
            out.append(Finding(code="KNOWN_BAD", severity="info", title=f"{adv.id} may apply: {adv.symptom}",
                               evidence=list(adv.affects) + [f"applies only when {_condition_text(adv)}; the facts "
                                                             f"do not show which {adv.library} is loaded",
                                                             adv.source], fix=adv.fix))
    return out


def toolkit_newer_than_driver(d: Diagnosis) -> list[Finding]:
    """TOOLKIT_NEWER_THAN_DRIVER (info): an installed CUDA toolkit newer than the CUDA version the driver reports
    (nvidia-smi's "CUDA Version"); harmless for wheels, which bring their own runtime (CUDA Compatibility guide)."""
    env = d.env
    if not env.driver.cuda_version:
        return []
    try:
        driver_cuda = Version(env.driver.cuda_version)
    except InvalidVersion:
        return []
    out: list[Finding] = []
    for tk in env.toolkits:
        try:
            v = Version(tk.version or "")
        except InvalidVersion:
            continue
        if v.release[:2] > driver_cuda.release[:2]:
            out.append(Finding(code="TOOLKIT_NEWER_THAN_DRIVER", severity="info",
                               title=f"CUDA toolkit {tk.version} is newer than the driver's CUDA {env.driver.cuda_version}",
                               evidence=[tk.path or tk.source],
                               fix="harmless for pip wheels, which bring their own runtime; programs you build with "
                                   "this nvcc need a newer driver"))
    return out
