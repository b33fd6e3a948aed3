"""Diagnosis: Findings about an Environment, each with a stable code, severity, evidence and fix.

No I/O. ``doctor`` = detect + diagnose. Codes are part of the public interface (README).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from cudamatrix.diagnose import remedy
from cudamatrix.diagnose.stated import stated_build
from cudamatrix.matrix.data import FrameworkRelease, Matrix, Variant
from cudamatrix.matrix.query import architecture
from cudamatrix.models import Environment, Finding
from cudamatrix.names import FAMILIES, canonical, family_of, name_and_specifier, requirement
from cudamatrix.schema import record
from cudamatrix.solve import rules
from cudamatrix.solve.target import Target, from_environment

if TYPE_CHECKING:
    from packaging.requirements import Requirement

BUSY_FRACTION = 0.8


@record(frozen=True)
class Installed:
    """An installed framework matched to its matrix row (release and variant, when known)."""

    name: str
    version: str
    variant_name: str | None
    release: FrameworkRelease | None
    variant: Variant | None


def _base(version: str) -> str:
    return version.split("+")[0]


def match_installed(env: Environment, matrix: Matrix) -> list[Installed]:
    out = []
    for fw in env.frameworks:
        if fw.name not in FAMILIES:
            continue
        release = None
        for rel in matrix.frameworks(fw.name):
            try:
                if rel.version == Version(_base(fw.version)):
                    release = rel
            except InvalidVersion:
                pass
        variant = None
        if release is not None:
            name = fw.variant
            if name is None and "+" not in fw.version:
                variant = next((v for v in release.variants if v.pypi_default), None)
            else:
                variant = next((v for v in release.variants if v.name == name), None)
        out.append(Installed(fw.name, fw.version, fw.variant or (variant.name if variant else None), release, variant))
    return out


def diagnose(env: Environment, matrix: Matrix) -> list[Finding]:
    """All findings for the environment, most severe first."""
    findings: list[Finding] = []
    add = findings.append
    target = from_environment(env, matrix)
    installed = match_installed(env, matrix)
    gpu_builds = [i for i in installed if i.variant is not None and i.variant.cuda is not None]
    drv = env.driver

    # --- driver and device ---------------------------------------------------------------------
    if drv.status == "absent":
        add(Finding(code="NO_DRIVER", severity="error" if gpu_builds else "warning",
                    title="No NVIDIA driver is installed or loaded",
                    evidence=[n.message for n in env.notes if n.probe.startswith(("driver", "nvml", "nvidia-smi"))][:3]
                    or ["no /proc/driver/nvidia/version, no libnvidia-ml, no nvidia-smi"],
                    fix="install the NVIDIA driver on the host (and the NVIDIA Container Toolkit, run with --gpus all, "
                        "inside containers); a CPU build needs none"))
    elif drv.status == "mismatch":
        add(Finding(code="DRIVER_LIBRARY_MISMATCH", severity="error",
                    title="The kernel driver and the user-space NVIDIA libraries differ",
                    evidence=[x for x in (drv.error, f"kernel module {drv.kernel_module_version}" if
                                          drv.kernel_module_version else None,
                                          f"library {drv.library_version}" if drv.library_version else None) if x],
                    fix="reboot (a driver upgrade without reboot leaves the old module loaded), or reinstall one "
                        "driver version for both"))
    elif drv.status == "no_device":
        visible = env.context.env.get("CUDA_VISIBLE_DEVICES")
        evidence = [drv.error or "the driver answers but lists no GPU"]
        if visible is not None:
            evidence.append(f"CUDA_VISIBLE_DEVICES={visible!r}")
        add(Finding(code="NO_DEVICE_VISIBLE", severity="error", title="The driver is present but no GPU is visible",
                    evidence=evidence,
                    fix="unset or correct CUDA_VISIBLE_DEVICES; in a container run with --gpus all (or the "
                        "Kubernetes nvidia.com/gpu resource)"))
    elif drv.status == "error":
        add(Finding(code="GPU_UNUSABLE", severity="error", title="A GPU is visible but the driver reports an error",
                    evidence=[drv.error or "nvidia-smi printed ERR! / Unknown Error"],
                    fix="check dmesg for Xid errors; reset the GPU or reboot the machine"))

    for lib in env.libraries:
        if lib.stub and lib.name == "cuda" and lib.loaded_first:
            add(Finding(code="STUB_LIBCUDA", severity="error", title="A link-time stub libcuda is on the search path",
                        evidence=[lib.path], fix="remove the stubs folder from LD_LIBRARY_PATH; it is for linking only"))

    # --- GPU architecture vs driver branch ------------------------------------------------------
    # a pasted report states the driver version without a status: the version is what the rules read
    driver_stated = bool(drv.version) and drv.status in ("ok", "unknown")
    if driver_stated and drv.version:  # driver_stated implies a version; this tells the type checker
        branch = rules._branch(drv.version)
        for gpu in target.gpus:
            arch = architecture(matrix, gpu.compute_capability)
            if arch and arch.last_driver_branch and branch and branch > arch.last_driver_branch:
                add(Finding(code="GPU_UNSUPPORTED_BY_DRIVER", severity="error",
                            title=f"{gpu.name or 'The GPU'} ({arch.name}) is not supported by driver branch {branch}",
                            evidence=[f"{arch.name} support ended with the R{arch.last_driver_branch} branch ({arch.source})"],
                            fix=f"install an R{arch.last_driver_branch} driver"))
            reason = rules.gpu_driver_reason(matrix, gpu.compute_capability, gpu.name, drv.version,
                                             target.platform)
            if reason is not None and reason.rule == "gpu_driver":
                add(Finding(code="GPU_UNSUPPORTED_BY_DRIVER", severity="error",
                            title=f"Driver {drv.version} is older than the first driver for "
                                  f"{gpu.name or 'the GPU'}",
                            evidence=[reason.message, f"matrix row: {reason.row}"],
                            fix=f"install driver {reason.need_driver} or newer (branch R{rules._branch(reason.need_driver or '')} "
                                f"or a later one)"))

    # --- framework builds vs this machine -------------------------------------------------------
    has_gpu = bool(target.gpus) and (drv.status == "ok" or driver_stated)
    for inst in installed:
        label = f"{inst.name} {inst.version}"
        unknown: list[str] = []
        release, var = inst.release, inst.variant
        if release is None or var is None:
            # not in the matrix: judge the build on what the environment states about it
            release, var, unknown = stated_build(env, inst)  # both None, or both set
            add(Finding(code="UNKNOWN_FRAMEWORK_BUILD", severity="info",
                        title=f"{label} is not in the matrix {matrix.meta.data_version}",
                        evidence=[f"variant {inst.variant_name or 'unknown'}"] +
                                 [f"unknown: {u}" for u in unknown],
                        fix="update cudamatrix for newer matrix data; the other findings about this build rest on "
                            "what the environment states about it"))
            if release is None or var is None:
                continue
        if has_gpu and var.cuda is None:
            add(Finding(code="CPU_ONLY_BUILD", severity="error", title=f"{label} is a CPU-only build on a GPU machine",
                        evidence=[f"{inst.name} variant {var.name}", f"GPU: {', '.join(g.name or g.compute_capability for g in target.gpus)}"],
                        fix=f"cudamatrix fix (or cudamatrix solve {inst.name} for the pip command)"))
            continue
        if not has_gpu:
            continue
        unknown_here = []
        for reason in rules.check(matrix, release, var, target):
            if reason.rule == "driver_floor":
                add(Finding(code="DRIVER_TOO_OLD", severity="error", title=f"The driver is too old for {label}",
                            evidence=[reason.message, f"matrix row: {reason.row}"],
                            fix=f"upgrade the driver to >= {reason.need_driver}, or install a build for an older CUDA "
                                f"(cudamatrix fix)"))
            elif reason.rule == "arch":
                add(Finding(code="ARCH_UNSUPPORTED", severity="error",
                            title=f"{label} has no kernel image for this GPU (\"no kernel image is available\")",
                            evidence=[reason.message], fix="cudamatrix fix: it picks a build that covers the GPU"))
            elif reason.rule == "cudnn_gpu":
                add(Finding(code="CUDNN_MISMATCH", severity="error", title=f"cuDNN of {label} does not support the GPU",
                            evidence=[reason.message], fix="install a build bundling an older cuDNN (cudamatrix fix)"))
            elif reason.rule == "unknown" and inst.variant is not None:
                # a build judged on its stated facts already listed what is unknown about it (above)
                unknown_here.append(reason.message)
            # python: reported below for every machine, GPU or not; gpu_driver: reported above, once per GPU
        if unknown_here:
            add(Finding(code="UNKNOWN_FRAMEWORK_BUILD", severity="info",
                        title=f"Some facts about {label} are not in the matrix {matrix.meta.data_version}",
                        evidence=[f"unknown: {m}" for m in unknown_here],
                        fix="update cudamatrix for newer matrix data; the other rules were checked"))
    for inst in installed:
        if inst.release is not None and env.python.version:
            py = ".".join(env.python.version.split(".")[:2])
            if inst.release.python and py not in inst.release.python:
                add(Finding(code="PYTHON_UNSUPPORTED", severity="error",
                            title=f"{inst.name} {inst.version} is not built for Python {py}",
                            evidence=[f"supported: {', '.join(inst.release.python)}"],
                            fix=f"use Python {inst.release.python[-1]}, or a {inst.name} release built for {py}"))

    findings.extend(_library_findings(env, installed))
    findings.extend(_wheel_findings(env, installed))
    findings.extend(_gpu_memory(env))
    findings.extend(_unsafe_library_paths(env))
    findings.extend(_host_resources(env))
    findings.extend(_advisories(env, matrix))
    findings.extend(_toolkit(env))
    remedy.complete(env, matrix, findings)  # what a paste's own words imply; the concrete build in the fixes
    order = {"error": 0, "warning": 1, "info": 2}
    findings.sort(key=lambda f: order[f.severity])
    return findings


def _library_findings(env: Environment, installed: list[Installed]) -> list[Finding]:
    """LIBRARY_SHADOWED, LIBRARY_PRELOADED and CUDNN_MISMATCH: :mod:`cudamatrix.diagnose.loads`."""
    from cudamatrix.diagnose import loads

    return loads.library_findings(env, installed)


def _wheel_findings(env: Environment, installed: list[Installed]) -> list[Finding]:
    out: list[Finding] = []
    parsed: dict[str, list[Requirement]] = {}
    applies: dict[tuple[str, bool], bool] = {}  # (marker, named distribution installed): many share one marker
    for dist, texts in env.requirements.items():
        from packaging.requirements import InvalidRequirement  # on first use: see names.requirement

        reqs = []
        for t in texts:
            try:
                r = requirement(t)
            except InvalidRequirement:
                continue
            if r.marker is not None:
                key = (str(r.marker), canonical(r.name) in env.packages)
                if key not in applies:
                    applies[key] = _marker_ok(r, env)
                if not applies[key]:
                    continue
            reqs.append(r)
        parsed[dist] = reqs
        for r in reqs:
            name = canonical(r.name)
            have = env.packages.get(name)
            if have is None:
                out.append(Finding(code="NVIDIA_WHEEL_DRIFT", severity="error",
                                   title=f"{dist} needs {r.name}{r.specifier}, which is not installed",
                                   evidence=[f"{_dist_label(env, dist)} declares {r}"],
                                   fix=f"pip install '{r.name}{r.specifier}'",
                                   fix_commands=[["pip", "install", f"{r.name}{r.specifier}"]]))
            elif r.specifier and not r.specifier.contains(have, prereleases=True):
                out.append(Finding(code="NVIDIA_WHEEL_DRIFT", severity="error",
                                   title=f"{name} {have} is installed; {dist} declares {r.specifier}",
                                   evidence=[f"{_dist_label(env, dist)} requires {r}"],
                                   fix=f"pip install '{r.name}{r.specifier}' (cudamatrix fix reinstalls only the drifted wheels)",
                                   fix_commands=[["pip", "install", f"{r.name}{r.specifier}"]]))
    dists = list(parsed)
    for i, a in enumerate(dists):
        for b in dists[i + 1:]:
            if _family(a) == _family(b):
                continue
            problems = rules.pin_conflicts(parsed[a], parsed[b], a, b)
            if problems:
                out.append(Finding(code="FRAMEWORK_CONFLICT", severity="error",
                                   title=f"{a} and {b} need different nvidia-* wheels",
                                   evidence=problems[:5],
                                   fix=f"cudamatrix solve {a} {b} for a shared set, or keep them in separate environments"))
    by_pair: dict[tuple[str, ...], list[str]] = {}
    for conflict in env.file_conflicts:  # one finding per pair of distributions, listing the files
        by_pair.setdefault(tuple(sorted(conflict.distributions)), []).append(conflict.path)
    for pair, paths in by_pair.items():
        paths = sorted(set(paths))
        out.append(Finding(code="FILE_CLOBBER", severity="error",
                           title=f"{' and '.join(pair)} install the same "
                                 + ("file" if len(paths) == 1 else f"{len(paths)} files"),
                           evidence=paths[:20] + ([f"... and {len(paths) - 20} more"] if len(paths) > 20 else []),
                           fix="uninstall one of them (the one the framework does not declare), then reinstall the other"))
    # torchvision / torchaudio pairing
    torch = next((i for i in installed if i.name == "torch"), None)
    if torch is not None and torch.release is not None:
        for comp in FAMILIES["torch"].companions:
            have = env.packages.get(comp)
            want = torch.release.companions.get(comp)
            if not have or not want:
                continue
            same_base = _base(have) == want
            local_t = torch.version.partition("+")[2]
            local_c = have.partition("+")[2]
            if not same_base or (local_t and local_c and local_t != local_c):
                out.append(Finding(code="TORCHVISION_MISMATCH", severity="error",
                                   title=f"{comp} {have} does not match torch {torch.version} (needs {want}"
                                         f"{'+' + local_t if local_t else ''})",
                                   evidence=[f"matrix row: {torch.release.source}"],
                                   fix=f"pip install {comp}=={want}{'+' + local_t if local_t else ''} "
                                       f"from the same index as torch"))
    return out


def _dist_label(env: Environment, dist: str) -> str:
    """"torch 2.5.1", or "torch" where the version is not known."""
    version = env.packages.get(dist)
    return f"{dist} {version}" if version else dist


def _family(dist: str) -> str:
    return family_of(dist) or dist


def _marker_ok(req: Requirement, env: Environment) -> bool:
    """Whether a declared requirement applies here. One behind an extra (``extra == "and-cuda"``) applies
    when its distribution is installed: that extra was asked for."""
    assert req.marker is not None  # the caller asks only about requirements with a marker
    py = ".".join((env.python.version or "3.11").split(".")[:2])
    target = Target(name="m", python=py, platform=env.python.platform or "linux_x86_64")
    try:
        if req.marker.evaluate(rules.marker_env(target, None)):
            return True
        extras = [e for e in ("and-cuda", "with-cuda", "cuda", "cuda12", "cuda13")
                  if req.marker.evaluate(rules.marker_env(target, e))]
    except Exception:
        return True
    return bool(extras) and canonical(req.name) in env.packages


def _gpu_memory(env: Environment) -> list[Finding]:
    out = []
    for gpu in env.gpus:
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


def _unsafe_library_paths(env: Environment) -> list[Finding]:
    """Library folders anyone may plant a library in (detect did not load from them: ld.so(8))."""
    evidence = [n.message for n in env.notes if n.probe == "unsafe library path"]
    if not evidence:
        return []
    return [Finding(code="UNSAFE_LIBRARY_PATH", severity="warning",
                    title="the library search path has folders others can plant libraries in",
                    evidence=evidence[:10],
                    fix="use absolute LD_LIBRARY_PATH entries without empty ones (no leading, trailing or double "
                        "colon), and no world-writable folders")]


# Inference rules (written down, not measured here): a CUDA build of torch with its nvidia-* wheels takes several
# GB once unpacked (cudamatrix.install.resources estimates each plan from the index's sizes), so under 8 GiB
# free where packages go, an install is likely to fail half-way; a notebook with under 2 GiB (or under 10 %)
# of host memory available is one large tensor away from the kernel's OOM killer.
LOW_DISK_MIB = 8 * 1024
LOW_MEMORY_MIB = 2 * 1024
LOW_MEMORY_FRACTION = 0.10


def _host_resources(env: Environment) -> list[Finding]:
    out = []
    host = env.host
    for disk in host.disks:
        if disk.free_mib < LOW_DISK_MIB:
            out.append(Finding(code="LOW_DISK", severity="warning",
                               title=f"only {disk.free_mib / 1024:.1f} GiB free on the disk of {disk.purpose}",
                               evidence=[f"{disk.path}: {disk.free_mib} of {disk.total_mib} MiB free (statvfs)"],
                               fix="free space there (pip cache purge, old environments), or point TMPDIR / "
                                   "PIP_CACHE_DIR at a larger disk: a CUDA framework with its nvidia-* wheels "
                                   "needs several GB"))
    avail, total = host.memory_available_mib, host.memory_total_mib
    if avail is not None and total and (avail < LOW_MEMORY_MIB or avail < LOW_MEMORY_FRACTION * total):
        out.append(Finding(code="LOW_HOST_MEMORY", severity="warning",
                           title=f"only {avail} MiB of {total} MiB host memory is available",
                           evidence=["/proc/meminfo MemAvailable"],
                           fix="close other notebooks and processes (or restart stale kernels) before loading "
                               "large models"))
    return out


def _advisories(env: Environment, matrix: Matrix) -> list[Finding]:
    out = []
    ccs = {g.compute_capability for g in env.gpus if g.compute_capability}
    for adv in matrix.advisories.advisories:
        matched = True
        for text in adv.affects:
            name, spec = name_and_specifier(text)
            have = env.packages.get(canonical(name))
            if have is None:
                matched = False
                break
            from packaging.specifiers import SpecifierSet

            if not SpecifierSet(spec).contains(have, prereleases=True):
                matched = False
                break
        if matched and adv.gpu_compute_capabilities:
            matched = bool(ccs & set(adv.gpu_compute_capabilities))
        if matched and adv.driver:
            from packaging.specifiers import SpecifierSet

            matched = bool(env.driver.version and SpecifierSet(adv.driver).contains(env.driver.version))
        if matched:
            out.append(Finding(code="KNOWN_BAD", severity="error", title=f"{adv.id}: {adv.symptom}",
                               evidence=list(adv.affects) + [adv.source], fix=adv.fix))
    return out


def _toolkit(env: Environment) -> list[Finding]:
    out: list[Finding] = []
    if not env.driver.cuda_version:
        return out
    try:
        driver_cuda = Version(env.driver.cuda_version)
    except InvalidVersion:
        return out
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


def summary_exit(findings: list[Finding]) -> int:
    return 1 if any(f.severity == "error" for f in findings) else 0
