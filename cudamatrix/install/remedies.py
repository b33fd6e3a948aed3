"""What a plan must remove or reinstall beyond the solved set, and how it answers each error finding.

Pure functions of values (no I/O). Rules, written down:

- A JAX CUDA plugin (``jax-cudaNN-plugin`` / ``-pjrt``) of another CUDA major than the chosen JAX variant is
  uninstalled: the plugin, not jaxlib, decides which CUDA JAX uses (JAX installation guide: the
  ``jax[cudaNN]`` extras install exactly these plugin wheels).
- An installed ``nvidia-*-cuNN`` wheel whose CUDA major no framework of the solved set uses, and which no
  remaining distribution declares, is a leftover and is uninstalled. The same holds for a wheel that shares
  files with a wheel the solved set keeps (a file clash): two wheels owning one path overwrite each other,
  and ``pip uninstall`` of either deletes the shared file, so the survivor is reinstalled afterwards.
- Every error finding maps to the step that touches a distribution it names, by name or by a file path inside
  its folder (an ``nvidia-<lib>-cuNN`` wheel installs under ``site-packages/nvidia/<lib>/``: a CUDNN_MISMATCH
  naming ``.../nvidia/cudnn/lib/libcudnn_graph.so.9`` is answered by the step that installs
  ``nvidia-cudnn-cu12``, so no plan calls a finding "not fixable here" and then fixes it); findings about the host
  (driver, GPU, Python version, resources) are "not fixable here", with the finding's own fix as what to do.
- A ``cupy-cudaNNx`` variant whose CUDA major no framework of the solved set uses is uninstalled when a variant of
  a major it uses is installed or being installed (CuPy's installation guide: exactly one cupy-cudaNNx package);
  the kept variant, installed before, is reinstalled afterwards (the two wrote the same files).
"""
from __future__ import annotations

import re
from typing import Literal

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from cudamatrix.models import Environment, Finding, Pin, Plan, Remedy, Removal, Solution
from cudamatrix.names import named_in
from cudamatrix.safe.shells import Said, tool
from cudamatrix.safe.text import lazy

_JAX_PLUGIN = lazy(r"jax-cuda(\d+)-(?:plugin|pjrt)$")
_CUDA_SUFFIX = re.compile(r"^nvidia-.+-cu(\d+)$")
_CUPY = re.compile(r"^cupy-cuda(\d+)x$")

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
    out: dict[str, Removal] = _jax_plugins(env, solution, wanted)
    changing = {_canon(p.name) for p in solution.to_install}
    remaining = {n for n in env.packages if n not in out and n not in changing}
    declared = _declared(env, remaining) | wanted
    if solution.frameworks:
        out.update(_leftover_cuda_wheels(env, solution, declared))
    _clash_partners(env, declared, out)
    out.update(_cupy_variants(env, solution))
    return [out[n] for n in sorted(out)]


def _cupy_variants(env: Environment, solution: Solution) -> dict[str, Removal]:
    """An installed cupy-cudaNNx of a CUDA major the solved set does not use, beside (or replaced by) a variant of
    a major it uses."""
    majors = _cuda_majors(solution)
    names = set(env.packages) | {_canon(p.name) for p in solution.packages}
    kept = [n for n in names if (m := _CUPY.match(n)) and m.group(1) in majors]
    if not kept:
        return {}
    return {n: Removal(n, env.packages[n], f"CUDA {m.group(1)} variant of cupy beside {sorted(kept)[0]}, the "
                                           f"variant of the CUDA {', '.join(sorted(majors))} the solved set uses")
            for n in sorted(env.packages) if (m := _CUPY.match(n)) and m.group(1) not in majors}


def _jax_plugins(env: Environment, solution: Solution, wanted: set[str]) -> dict[str, Removal]:
    """A JAX CUDA plugin of another CUDA major than the chosen JAX variant (JAX installation guide)."""
    out: dict[str, Removal] = {}
    jax = next((f for f in solution.frameworks if f.name == "jax"), None)
    if jax is None:
        return out
    for name, version in env.packages.items():
        m = _JAX_PLUGIN.match(name)
        if m and f"cuda{m.group(1)}" != jax.variant and name not in wanted:
            out[name] = Removal(name, version, f"jax {jax.version} {jax.variant} does not use the cuda{m.group(1)} "
                                               "plugin; left installed it would load its own CUDA libraries")
    return out


def _leftover_cuda_wheels(env: Environment, solution: Solution, declared: set[str]) -> dict[str, Removal]:
    """An nvidia-*-cuNN wheel of a CUDA major no framework of the solved set uses, which nothing declares."""
    majors = _cuda_majors(solution)
    out: dict[str, Removal] = {}
    for name, version in env.packages.items():
        m = _CUDA_SUFFIX.match(name)
        if m and name not in declared and m.group(1) not in majors:
            out[name] = Removal(name, version, f"CUDA {m.group(1)} wheel no framework of the solved set uses "
                                               f"(it uses CUDA {', '.join(sorted(majors)) or 'none'})")
    return out


def _clash_partners(env: Environment, declared: set[str], out: dict[str, Removal]) -> None:
    """A distribution that installs a file over a kept distribution's copy, and that nothing needs (added to
    ``out``)."""
    for conflict in env.file_conflicts:
        names = [_canon(d.split("==")[0]) for d in conflict.distributions]
        kept = [n for n in names if n in declared and n not in out]
        for n in names:
            if kept and n not in kept and n not in declared and n not in out:
                out[n] = Removal(n, env.packages.get(n), f"installs {conflict.path} over {kept[0]}'s copy, and "
                                                          "nothing in the solved set needs it")


def reinstalls(env: Environment, solution: Solution, removed: list[Removal], pins: list[Pin]) -> list[tuple[str, str]]:
    """(name, version) of clash survivors to reinstall: a removed partner took the shared files with it, and the
    install step does not rewrite them (it leaves that distribution at its version)."""
    gone = {r.name for r in removed}
    rewritten = {_canon(p.name) for p in pins}
    out: dict[str, str] = {}
    if any(_CUPY.match(n) for n in gone):  # the variants wrote the same files: the kept one is written again
        out.update({n: v for n, v in env.packages.items() if _CUPY.match(n) and n not in gone and n not in rewritten})
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
    return named_in(text, names)


_NVIDIA_WHEEL = lazy(r"^nvidia-(.+)-cu\d+$")


def _owned(text: str, names) -> set[str]:
    """``nvidia-<lib>-cuNN`` names whose install folder (``site-packages/nvidia/<lib>/``, the wheels' layout with
    ``-`` as ``_``) holds a path ``text`` names."""
    out = set()
    for n in names:
        m = _NVIDIA_WHEEL.match(n)
        if m and f"/nvidia/{m.group(1).replace('-', '_')}/" in text:
            out.add(n)
    return out


def remedies(findings: list[Finding], plan: Plan, env: Environment) -> list[Remedy]:
    """One Remedy per error finding: the step that fixes it, or "not fixable here: <fix> (<why>)"."""
    effects = _Effects(plan, env)
    return [_remedy(f, effects, env) for f in findings if f.severity == "error"]


class _Effects:
    """What a plan does: each distribution it touches (the action and a few words), the versions it installs,
    its environment step."""

    ORDER = ("uninstall", "reinstall", "install")

    def __init__(self, plan: Plan, env: Environment) -> None:
        self.touched: dict[str, tuple[Literal["uninstall", "reinstall", "install"], str]] = {}
        for r in plan.to_remove:
            self.touched[r.name] = ("uninstall", f"uninstall {r.name} {r.version or ''}".rstrip())
        self.changing: dict[str, str] = {}
        for step in plan.steps:
            if step.kind == "install" and plan.solution is not None:
                self.changing.update({_canon(p.name): p.version for p in plan.solution.to_install
                                      if env.packages.get(_canon(p.name)) != p.version})
            if step.kind == "reinstall":
                self._reinstalled(step.argv)
        for name, version in self.changing.items():
            self.touched.setdefault(name, ("install", f"install {name} {version}"))
        self.env_step = next((s for s in plan.steps if s.kind == "env"), None)
        self.framework_change = any(n in FRAMEWORK_DISTS for n in self.changing)

    def _reinstalled(self, argv: list[str]) -> None:
        for arg in argv:
            name, eq, version = arg.partition("==")
            if eq:
                self.touched.setdefault(_canon(name), ("reinstall", f"reinstall {_canon(name)} {version}"))


def _remedy(f: Finding, effects: _Effects, env: Environment) -> Remedy:
    """The host's findings are not fixable here; else the plan's steps on the distributions the finding names,
    its environment step for a library-path finding, its framework install for a finding about the build."""
    if f.code in HOST:
        return Remedy(f.code, f.title, "not_fixable", Said("not fixable here: ", f.fix or "see doctor",
                                                           f" ({HOST[f.code]})"))
    text = " ".join([f.title, *f.evidence])
    touched = effects.touched
    hits = sorted((_named(text, set(env.packages) | set(touched)) | _owned(text, touched)) & set(touched))
    if hits:
        actions = [touched[n] for n in hits]
        action = min((a for a, _ in actions), key=_Effects.ORDER.index)
        return Remedy(f.code, f.title, action, "; ".join(d for _, d in actions))
    if f.code in PATH_CODES and effects.env_step is not None:
        return Remedy(f.code, f.title, "env", Said("set " + ", ".join(effects.env_step.env) + " (", tool("env"),
                                                   ", or fix --write-activation)"))
    if f.code in BUILD_CODES and effects.framework_change:
        return Remedy(f.code, f.title, "install", "install " + ", ".join(
            f"{n} {v}" for n, v in effects.changing.items() if n in FRAMEWORK_DISTS))
    why = "the solved set leaves " + (", ".join(sorted(_named(text, env.packages))) or "it") + " as it is"
    if f.code in PATH_CODES:
        why = "the library search path is set outside this environment"
    return Remedy(f.code, f.title, "not_fixable", Said("not fixable here: ", f.fix or "see doctor", f" ({why})"))
