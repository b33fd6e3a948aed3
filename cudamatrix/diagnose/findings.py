"""Diagnosis: Findings about an Environment, each with a stable code, severity, evidence and fix.

No I/O. ``doctor`` = detect + diagnose. Codes are part of the public interface (diagnose/codes.py, docs/reference.md). :func:`diagnose` is a
loop over :data:`FINDINGS`, a registry of small functions (one per finding code, or per source of a code), each
taking the :class:`~cudamatrix.diagnose.context.Diagnosis` and returning its Findings; the framework builds are
judged by :data:`BUILD_FINDINGS`, and the solver's Reasons become Findings through :data:`REASON_FINDINGS`.
After the registry, :func:`cudamatrix.diagnose.implied.complete` adds what a paste's own words imply and names the
concrete build in the fixes that have one.
"""
from __future__ import annotations

from typing import Callable

from cudamatrix.diagnose import extensions, findlinks, host, implied, loads, pasted, wheels
from cudamatrix.diagnose.context import Diagnosis, Installed, match_installed
from cudamatrix.diagnose.stated import stated_build
from cudamatrix.matrix.data import FrameworkRelease, Matrix, Variant
from cudamatrix.matrix.query import architecture
from cudamatrix.models import Environment, Finding
from cudamatrix.safe.shells import Said, tool
from cudamatrix.solve import rules

__all__ = ["BUILD_FINDINGS", "FINDINGS", "REASON_FINDINGS", "Installed", "diagnose", "match_installed",
           "summary_exit"]

FindingCheck = Callable[[Diagnosis], list[Finding]]


def diagnose(env: Environment, matrix: Matrix) -> list[Finding]:
    """All findings for the environment, most severe first (in :data:`FINDINGS` order within a severity)."""
    d = Diagnosis(env, matrix)
    findings: list[Finding] = []
    for check in FINDINGS:
        findings += check(d)
    implied.complete(env, matrix, findings)  # what a paste's own words imply; the concrete build in the fixes
    order = {"error": 0, "warning": 1, "info": 2}
    findings.sort(key=lambda f: order[f.severity])
    return findings


# --- driver and device (the driver status detect read: /proc/driver/nvidia/version, NVML, nvidia-smi) ---------

def no_driver(d: Diagnosis) -> list[Finding]:
    """NO_DRIVER: no NVIDIA driver installed or loaded; an error when a CUDA build is installed, else a
    warning (a CPU build needs none). A paste's "couldn't communicate with the NVIDIA driver" is an error with the
    paste's words and a fix for where it was taken (:func:`cudamatrix.diagnose.pasted.pasted_no_driver`)."""
    env = d.env
    if env.driver.status != "absent":
        return []
    if env.origin == "report" and (env.driver.error or d.gpu_builds):  # a pasted GPU stack, in the paste's words
        return [pasted.pasted_no_driver(env)]
    return [Finding(code="NO_DRIVER", severity="error" if d.gpu_builds else "warning",
                    title="No NVIDIA driver is installed or loaded",
                    evidence=[n.message for n in env.notes if n.probe.startswith(("driver", "nvml", "nvidia-smi"))][:3]
                    or ["no /proc/driver/nvidia/version, no libnvidia-ml, no nvidia-smi"],
                    fix="install the NVIDIA driver on the host (and the NVIDIA Container Toolkit, run with --gpus all, "
                        "inside containers); a CPU build needs none")]


def driver_library_mismatch(d: Diagnosis) -> list[Finding]:
    """DRIVER_LIBRARY_MISMATCH: the kernel module and the user-space libraries are of different versions
    (NVML's "Driver/library version mismatch")."""
    drv = d.env.driver
    if drv.status != "mismatch":
        return []
    return [Finding(code="DRIVER_LIBRARY_MISMATCH", severity="error",
                    title="The kernel driver and the user-space NVIDIA libraries differ",
                    evidence=[x for x in (drv.error, f"kernel module {drv.kernel_module_version}" if
                                          drv.kernel_module_version else None,
                                          f"library {drv.library_version}" if drv.library_version else None) if x],
                    fix="reboot (a driver upgrade without reboot leaves the old module loaded), or reinstall one "
                        "driver version for both")]


def no_device_visible(d: Diagnosis) -> list[Finding]:
    """NO_DEVICE_VISIBLE: the driver answers but lists no GPU (CUDA_VISIBLE_DEVICES, a container without
    --gpus)."""
    drv = d.env.driver
    if drv.status != "no_device":
        return []
    visible = d.env.context.env.get("CUDA_VISIBLE_DEVICES")
    evidence = [drv.error or "the driver answers but lists no GPU"]
    if visible is not None:
        evidence.append(f"CUDA_VISIBLE_DEVICES={visible!r}")
    return [Finding(code="NO_DEVICE_VISIBLE", severity="error", title="The driver is present but no GPU is visible",
                    evidence=evidence,
                    fix="unset or correct CUDA_VISIBLE_DEVICES; in a container run with --gpus all (or the "
                        "Kubernetes nvidia.com/gpu resource)")]


def gpu_unusable(d: Diagnosis) -> list[Finding]:
    """GPU_UNUSABLE: a GPU is visible but the driver reports an error (nvidia-smi's ERR! / Unknown Error)."""
    drv = d.env.driver
    if drv.status != "error":
        return []
    return [Finding(code="GPU_UNUSABLE", severity="error", title="A GPU is visible but the driver reports an error",
                    evidence=[drv.error or "nvidia-smi printed ERR! / Unknown Error"],
                    fix="check dmesg for Xid errors; reset the GPU or reboot the machine")]


def stub_libcuda(d: Diagnosis) -> list[Finding]:
    """STUB_LIBCUDA: the CUDA toolkit's link-time stub libcuda (lib64/stubs) is the first libcuda on the search
    path; it only links, every call fails (CUDA toolkit documentation of the stubs folder)."""
    return [Finding(code="STUB_LIBCUDA", severity="error", title="A link-time stub libcuda is on the search path",
                    evidence=[lib.path], fix="remove the stubs folder from LD_LIBRARY_PATH; it is for linking only")
            for lib in d.env.libraries if lib.stub and lib.name == "cuda" and lib.loaded_first]


def gpu_unsupported_by_driver(d: Diagnosis) -> list[Finding]:
    """GPU_UNSUPPORTED_BY_DRIVER, for every GPU of a stated driver: the driver branch is past the last one of the
    GPU's architecture (NVIDIA's driver release notes, the matrix's ``last_driver_branch``), or older than the
    first driver of the architecture (the solver's rule ``gpu_driver``)."""
    drv = d.env.driver
    if not (d.driver_stated and drv.version):  # driver_stated implies a version; this tells the type checker
        return []
    out = []
    for gpu in d.target.gpus:
        out += _past_last_branch(d, gpu.compute_capability, gpu.name, drv.version)
        reason = rules.gpu_driver_reason(d.matrix, gpu.compute_capability, gpu.name, drv.version, d.target.platform)
        if reason is not None and reason.rule == "gpu_driver":
            out.append(Finding(code="GPU_UNSUPPORTED_BY_DRIVER", severity="error",
                               title=f"Driver {drv.version} is older than the first driver for "
                                     f"{gpu.name or 'the GPU'}",
                               evidence=[reason.message, f"matrix row: {reason.row}"],
                               fix=f"install driver {reason.need_driver} or newer (branch "
                                   f"R{rules._branch(reason.need_driver or '')} or a later one)"))
    return out


def _past_last_branch(d: Diagnosis, cc: str, name: str | None, driver: str) -> list[Finding]:
    branch = rules._branch(driver)
    arch = architecture(d.matrix, cc)
    if not (arch and arch.last_driver_branch and branch and branch > arch.last_driver_branch):
        return []
    return [Finding(code="GPU_UNSUPPORTED_BY_DRIVER", severity="error",
                    title=f"{name or 'The GPU'} ({arch.name}) is not supported by driver branch {branch}",
                    evidence=[f"{arch.name} support ended with the R{arch.last_driver_branch} branch ({arch.source})"],
                    fix=f"install an R{arch.last_driver_branch} driver")]


# --- framework builds vs this machine -----------------------------------------------------------------------

class Judged:
    """One installed framework as the build findings judge it: its matrix release and variant, or the build as
    the environment states it (``stated``, with the facts that stay unknown); the solver's Reasons, asked once."""

    def __init__(self, d: Diagnosis, inst: Installed) -> None:
        self.inst, self.label = inst, f"{inst.name} {inst.version}"
        self.release: FrameworkRelease | None = inst.release
        self.variant: Variant | None = inst.variant
        self.stated = self.release is None or self.variant is None
        self.unknown: list[str] = []
        if self.stated:  # not in the matrix: judge the build on what the environment states about it
            self.release, self.variant, self.unknown = stated_build(d.env, inst)  # both None, or both set
        self._reasons: list[rules.Reason] | None = None

    def reasons(self, d: Diagnosis) -> list[rules.Reason]:
        """The solver's hard rules on the diagnosed machine; asked only of a CUDA build on a GPU machine."""
        if self._reasons is None:
            if self.release is None or self.variant is None or self.variant.cuda is None or not d.has_gpu:
                self._reasons = []
            else:
                self._reasons = rules.check(d.matrix, self.release, self.variant, d.target)
        return self._reasons


BuildCheck = Callable[[Diagnosis, Judged], list[Finding]]


def framework_builds(d: Diagnosis) -> list[Finding]:
    """The findings of :data:`BUILD_FINDINGS` for every installed framework, one framework after the other."""
    out: list[Finding] = []
    for inst in d.installed:
        judged = Judged(d, inst)
        for check in BUILD_FINDINGS:
            out += check(d, judged)
    return out


def not_in_matrix(d: Diagnosis, j: Judged) -> list[Finding]:
    """UNKNOWN_FRAMEWORK_BUILD (info): the installed release or variant is not in the matrix; the other findings
    rest on what the environment states about the build (:func:`~cudamatrix.diagnose.stated.stated_build`). A
    release older than the matrix's first row is one no update brings: the fix says so."""
    if not j.stated:
        return []
    first = _first_release(d, j.inst.name)
    older = first is not None and _older(j.inst.version, first)
    fix = (f"the matrix starts at {j.inst.name} {first}: older releases are not covered by any matrix data; the "
           "other findings about this build rest on what the environment states about it" if older else
           "update cudamatrix for newer matrix data; the other findings about this build rest on what the "
           "environment states about it")
    return [Finding(code="UNKNOWN_FRAMEWORK_BUILD", severity="info",
                    title=f"{j.label} is not in the matrix {d.matrix.meta.data_version}" +
                          (f" (it starts at {j.inst.name} {first})" if older else ""),
                    evidence=[f"variant {j.inst.variant_name or 'unknown'}"] + [f"unknown: {u}" for u in j.unknown],
                    fix=fix)]


def _first_release(d: Diagnosis, name: str) -> str | None:
    """The oldest release of ``name`` the matrix holds."""
    releases = d.matrix.frameworks(name) if name in ("torch", "tensorflow", "jax") else []
    return str(min(r.version for r in releases)) if releases else None


def _older(version: str, first: str) -> bool:
    # packaging on first use only: doctor's start-up path does not load it (tests/schema/test_records.py)
    from packaging.version import InvalidVersion, Version

    try:
        return Version(version.split("+")[0]) < Version(first)
    except InvalidVersion:
        return False


def cpu_only_build(d: Diagnosis, j: Judged) -> list[Finding]:
    """CPU_ONLY_BUILD: a CPU build of a framework on a machine with a GPU and a usable driver (PyTorch "Get
    Started": the CPU wheels carry no CUDA); in a paste, also beside a CUDA toolkit it states (``nvcc``: the
    machine is set up for CUDA, and the ``+cpu`` build cannot use it)."""
    if j.variant is None or j.variant.cuda is not None:
        return []
    toolkits = [t.version for t in d.env.toolkits if t.version] if d.env.origin == "report" else []
    if not d.has_gpu and not toolkits:
        return []
    where = f"GPU: {', '.join(g.name or g.compute_capability for g in d.target.gpus)}" if d.has_gpu else \
        f"a CUDA toolkit beside it: CUDA {', '.join(dict.fromkeys(toolkits))}"
    return [Finding(code="CPU_ONLY_BUILD", severity="error",
                    title=f"{j.label} is a CPU-only build on a " + ("GPU machine" if d.has_gpu else "CUDA machine"),
                    evidence=[f"{j.inst.name} variant {j.variant.name}", where],
                    fix=Said(tool("fix"), " (or ", tool("solve", j.inst.name), " for the pip command)"))]


def broken_rules(d: Diagnosis, j: Judged) -> list[Finding]:
    """The solver's rules the build breaks on this machine, each through :data:`REASON_FINDINGS` (``python`` is
    reported by :func:`python_unsupported` for every machine; ``gpu_driver`` once per GPU by
    :func:`gpu_unsupported_by_driver`)."""
    out = []
    for reason in j.reasons(d):
        to_finding = REASON_FINDINGS.get(reason.rule)
        if to_finding is not None:
            out.append(to_finding(j.label, reason))
    return out


def unknown_facts(d: Diagnosis, j: Judged) -> list[Finding]:
    """UNKNOWN_FRAMEWORK_BUILD (info): facts about a build the matrix holds that the rules read and the matrix
    does not have (the solver's rule ``unknown``); a build judged on its stated facts listed them already."""
    if j.stated:
        return []
    unknown = [r.message for r in j.reasons(d) if r.rule == "unknown"]
    if not unknown:
        return []
    return [Finding(code="UNKNOWN_FRAMEWORK_BUILD", severity="info",
                    title=f"Some facts about {j.label} are not in the matrix {d.matrix.meta.data_version}",
                    evidence=[f"unknown: {m}" for m in unknown],
                    fix="update cudamatrix for newer matrix data; the other rules were checked")]


def driver_too_old(label: str, reason: rules.Reason) -> Finding:
    """DRIVER_TOO_OLD, from the solver's rule ``driver_floor``."""
    return Finding(code="DRIVER_TOO_OLD", severity="error", title=f"The driver is too old for {label}",
                   evidence=[reason.message, f"matrix row: {reason.row}"],
                   fix=Said(f"upgrade the driver to >= {reason.need_driver}, or install a build for an older CUDA (",
                            tool("fix"), ")"))


def arch_unsupported(label: str, reason: rules.Reason) -> Finding:
    """ARCH_UNSUPPORTED, from the solver's rule ``arch``."""
    return Finding(code="ARCH_UNSUPPORTED", severity="error",
                   title=f"{label} has no kernel image for this GPU (\"no kernel image is available\")",
                   evidence=[reason.message], fix=Said(tool("fix"), ": it picks a build that covers the GPU"))


def cudnn_unsupported_gpu(label: str, reason: rules.Reason) -> Finding:
    """CUDNN_MISMATCH, from the solver's rule ``cudnn_gpu``."""
    return Finding(code="CUDNN_MISMATCH", severity="error", title=f"cuDNN of {label} does not support the GPU",
                   evidence=[reason.message], fix=Said("install a build bundling an older cuDNN (", tool("fix"), ")"))


def python_unsupported(d: Diagnosis) -> list[Finding]:
    """PYTHON_UNSUPPORTED: an installed release the matrix holds has no build for the interpreter's Python (the
    Python versions of the release's wheels on the index)."""
    if not d.env.python.version:
        return []
    py = ".".join(d.env.python.version.split(".")[:2])
    return [Finding(code="PYTHON_UNSUPPORTED", severity="error",
                    title=f"{inst.name} {inst.version} is not built for Python {py}",
                    evidence=[f"supported: {', '.join(inst.release.python)}"],
                    fix=f"use Python {inst.release.python[-1]}, or a {inst.name} release built for {py}")
            for inst in d.installed if inst.release is not None and inst.release.python and
            py not in inst.release.python]


def summary_exit(findings: list[Finding]) -> int:
    return 1 if any(f.severity == "error" for f in findings) else 0


# --- the registries, in the order their findings are listed (within a severity) ----------------------------

# the solver's rule id -> the Finding of a build that breaks it
REASON_FINDINGS: dict[str, Callable[[str, rules.Reason], Finding]] = {
    "driver_floor": driver_too_old,
    "arch": arch_unsupported,
    "cudnn_gpu": cudnn_unsupported_gpu,
}

BUILD_FINDINGS: list[BuildCheck] = [not_in_matrix, cpu_only_build, broken_rules, unknown_facts]

FINDINGS: list[FindingCheck] = [
    no_driver, driver_library_mismatch, no_device_visible, gpu_unusable, stub_libcuda, gpu_unsupported_by_driver,
    framework_builds, python_unsupported,
    loads.library_shadowed, loads.cudnn_mapped,
    wheels.nvidia_wheel_drift, wheels.framework_conflict, wheels.file_clobber, wheels.torchvision_mismatch,
    extensions.extension_abi_mismatch, extensions.extension_pin_mismatch, extensions.extension_cuda_mismatch,
    findlinks.find_links_mismatch,
    extensions.extension_variant_clash, extensions.jax_plugin_mismatch, extensions.extension_arch_unsupported,
    host.gpu_memory_busy, host.unsafe_library_path, host.low_disk, host.low_host_memory, host.known_bad,
    host.toolkit_newer_than_driver,
]
