"""What a plan must remove or reinstall beyond the solved set, and how it answers each error finding.

Pure functions of values (no I/O). Rules, written down:

- A JAX CUDA plugin (``jax-cudaNN-plugin`` / ``-pjrt``) of another CUDA major than the chosen JAX variant is
  uninstalled: the plugin, not jaxlib, decides which CUDA JAX uses (JAX installation guide: the
  ``jax[cudaNN]`` extras install exactly these plugin wheels).
- An installed ``nvidia-*-cuNN`` wheel whose CUDA major no framework of the solved set uses, and which no
  remaining distribution declares, is a leftover and is uninstalled. The same holds for a wheel that shares
  files with a wheel the solved set keeps (a file clash): two wheels owning one path overwrite each other,
  and ``pip uninstall`` of either deletes the shared file, so the survivor is reinstalled afterwards.
- Every error finding maps to the step that touches a distribution it names; findings about the host
  (driver, GPU, Python version, resources) are "not fixable here", with the finding's own fix as what to do.
"""
from __future__ import annotations

import re
from typing import Literal

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from cudamatrix.models import Environment, Finding, Pin, Plan, Remedy, Removal, Solution

_JAX_PLUGIN = re.compile(r"jax-cuda(\d+)-(?:plugin|pjrt)$")
_CUDA_SUFFIX = re.compile(r"^nvidia-.+-cu(\d+)$")

# findings no package change can fix: why, in a few words (what to do is the finding's own fix)
HOST = {
    "NO_DRIVER": "the NVIDIA driver belongs to the host, not to this Python environment",
    "DRIVER_LIBRARY_MISMATCH": "the kernel module and the user-space driver belong to the host",
    "NO_DEVICE_VISIBLE": "which GPUs a process sees is decided by the host or the container runtime",
    "GPU_UNUSABLE": "a GPU error is a hardware or driver state of the host",
    "GPU_UNSUPPORTED_BY_DRIVER": "the driver branch belongs to the host",
    "PYTHON_UNSUPPORTED": "the interpreter is the environment being fixed; a new one needs a new environment",
    "GPU_MEMORY_BUSY": "other processes hold the memory; cudamatrix does not stop them",
    "LOW_DISK": "free space is a property of the file system",
    "LOW_HOST_MEMORY": "host memory is used by other processes",
}
# findings about the library search path: answered by the solution's environment change when it has one
PATH_CODES = ("LIBRARY_SHADOWED", "STUB_LIBCUDA", "CUDNN_MISMATCH")
# findings about the framework build itself: a plan that installs another build of the framework answers them
BUILD_CODES = ("CPU_ONLY_BUILD", "ARCH_UNSUPPORTED", "DRIVER_TOO_OLD", "CUDNN_MISMATCH", "KNOWN_BAD",
               "TORCHVISION_MISMATCH")
FRAMEWORK_DISTS = ("torch", "torchvision", "torchaudio", "tensorflow", "jax", "jaxlib")


def _canon(name: str) -> str:
    return str(canonicalize_name(name))


def _declared(env: Environment, dists: set[str]) -> set[str]:
    """Names the given installed distributions declare (extras markers included: they were asked for)."""
    out: set[str] = set()
    for dist in dists:
        for text in env.requirements.get(dist, []):
            try:
                out.add(_canon(Requirement(text).name))
            except InvalidRequirement:
                continue
    return out


def _cuda_majors(solution: Solution) -> set[str]:
    majors = set()
    for fw in solution.frameworks:
        if fw.cuda:
            majors.add(fw.cuda.split(".")[0])
    for pin in solution.packages:
        m = _CUDA_SUFFIX.match(pin.name)
        if m:
            majors.add(m.group(1))
    return majors


def removals(env: Environment, solution: Solution) -> list[Removal]:
    """The installed distributions the plan uninstalls (see the module's rules), sorted by name."""
    wanted = {_canon(p.name) for p in solution.packages}
    out: dict[str, Removal] = {}
    jax = next((f for f in solution.frameworks if f.name == "jax"), None)
    for name, version in env.packages.items():
        m = _JAX_PLUGIN.match(name)
        if jax is not None and m and f"cuda{m.group(1)}" != jax.variant and name not in wanted:
            out[name] = Removal(name, version, f"jax {jax.version} {jax.variant} does not use the cuda{m.group(1)} "
                                               "plugin; left installed it would load its own CUDA libraries")
    changing = {_canon(p.name) for p in solution.to_install}
    remaining = {n for n in env.packages if n not in out and n not in changing}
    declared = _declared(env, remaining) | wanted
    majors = _cuda_majors(solution)
    if solution.frameworks:
        for name, version in env.packages.items():
            m = _CUDA_SUFFIX.match(name)
            if m and name not in declared and m.group(1) not in majors:
                out[name] = Removal(name, version, f"CUDA {m.group(1)} wheel no framework of the solved set uses "
                                                   f"(it uses CUDA {', '.join(sorted(majors)) or 'none'})")
    for conflict in env.file_conflicts:
        names = [_canon(d.split("==")[0]) for d in conflict.distributions]
        kept = [n for n in names if n in declared and n not in out]
        for n in names:
            if kept and n not in kept and n not in declared and n not in out:
                out[n] = Removal(n, env.packages.get(n), f"installs {conflict.path} over {kept[0]}'s copy, and "
                                                          "nothing in the solved set needs it")
    return [out[n] for n in sorted(out)]


def reinstalls(env: Environment, solution: Solution, removed: list[Removal], pins: list[Pin]) -> list[tuple[str, str]]:
    """(name, version) of clash survivors to reinstall: a removed partner took the shared files with it, and the
    install step does not rewrite them (it leaves that distribution at its version)."""
    gone = {r.name for r in removed}
    rewritten = {_canon(p.name) for p in pins}
    out: dict[str, str] = {}
    for conflict in env.file_conflicts:
        names = [_canon(d.split("==")[0]) for d in conflict.distributions]
        if not any(n in gone for n in names):
            continue
        for n in names:
            if n not in gone and n not in rewritten and n in env.packages:
                out[n] = env.packages[n]
    return sorted(out.items())


def _named(text: str, names) -> set[str]:
    """Installed distribution names that appear as whole names in ``text`` (``jax`` is not in ``jax-cuda12``)."""
    return {n for n in names if re.search(rf"(?<![\w.-]){re.escape(n)}(?![\w-])", text, re.I)}


def remedies(findings: list[Finding], plan: Plan, env: Environment) -> list[Remedy]:
    """One Remedy per error finding: the step that fixes it, or "not fixable here: <fix> (<why>)"."""
    # distribution -> (action, what the plan does to it)
    touched: dict[str, tuple[Literal["uninstall", "reinstall", "install"], str]] = {}
    for r in plan.to_remove:
        touched[r.name] = ("uninstall", f"uninstall {r.name} {r.version or ''}".rstrip())
    solution = plan.solution
    changing = {}
    for step in plan.steps:
        if step.kind == "install" and solution is not None:
            for p in solution.to_install:
                if env.packages.get(_canon(p.name)) != p.version:
                    changing[_canon(p.name)] = p.version
        if step.kind == "reinstall":
            for arg in step.argv:
                name, eq, version = arg.partition("==")
                if eq:
                    touched.setdefault(_canon(name), ("reinstall", f"reinstall {_canon(name)} {version}"))
    for name, version in changing.items():
        touched.setdefault(name, ("install", f"install {name} {version}"))
    env_step = next((s for s in plan.steps if s.kind == "env"), None)
    framework_change = any(n in FRAMEWORK_DISTS for n in changing)
    out = []
    for f in findings:
        if f.severity != "error":
            continue
        text = " ".join([f.title, *f.evidence])
        if f.code in HOST:
            out.append(Remedy(f.code, f.title, "not_fixable", f"not fixable here: {f.fix or 'see doctor'} "
                                                              f"({HOST[f.code]})"))
            continue
        hits = sorted(_named(text, set(env.packages) | set(touched)) & set(touched))
        if hits:
            actions = [touched[n] for n in hits]
            order = ("uninstall", "reinstall", "install")
            action = min((a for a, _ in actions), key=order.index)
            out.append(Remedy(f.code, f.title, action, "; ".join(d for _, d in actions)))
        elif f.code in PATH_CODES and env_step is not None:
            out.append(Remedy(f.code, f.title, "env", "set " + ", ".join(env_step.env) + " (cudamatrix env, or "
                                                                                          "fix --write-activation)"))
        elif f.code in BUILD_CODES and framework_change:
            out.append(Remedy(f.code, f.title, "install", "install " + ", ".join(
                f"{n} {v}" for n, v in changing.items() if n in FRAMEWORK_DISTS)))
        else:
            why = "the solved set leaves " + (", ".join(sorted(_named(text, env.packages))) or "it") + " as it is"
            if f.code in PATH_CODES:
                why = "the library search path is set outside this environment"
            out.append(Remedy(f.code, f.title, "not_fixable", f"not fixable here: {f.fix or 'see doctor'} ({why})"))
    return out
