"""Findings about the installed wheels: what the frameworks declare against what is installed, two frameworks'
nvidia-* pins, files two distributions both install, torch's companions. No I/O."""
from __future__ import annotations

from typing import TYPE_CHECKING

from cudamatrix.diagnose.context import Diagnosis, base_version
from cudamatrix.models import Environment, Finding
from cudamatrix.names import FAMILIES, canonical, family_of
from cudamatrix.safe.shells import Said, pip, tool
from cudamatrix.solve import rules

if TYPE_CHECKING:
    from packaging.requirements import Requirement


def _dist_label(env: Environment, dist: str) -> str:
    """"torch 2.5.1", or "torch" where the version is not known."""
    version = env.packages.get(dist)
    return f"{dist} {version}" if version else dist


def _drift(env: Environment, dist: str, r: Requirement) -> Finding | None:
    name = canonical(r.name)
    have = env.packages.get(name)
    install = pip("install", f"{r.name}{r.specifier}", always_quoted=(1,))  # the fix's words and its argv
    if have is None:
        return Finding(code="NVIDIA_WHEEL_DRIFT", severity="error",
                       title=f"{dist} needs {r.name}{r.specifier}, which is not installed",
                       evidence=[f"{_dist_label(env, dist)} declares {r}"],
                       fix=Said(install), fix_commands=[list(install.argv)])
    if r.specifier and not r.specifier.contains(have, prereleases=True):
        return Finding(code="NVIDIA_WHEEL_DRIFT", severity="error",
                       title=f"{name} {have} is installed; {dist} declares {r.specifier}",
                       evidence=[f"{_dist_label(env, dist)} requires {r}"],
                       fix=Said(install, " (", tool("fix"), " reinstalls only the drifted wheels)"),
                       fix_commands=[list(install.argv)])
    return None


def nvidia_wheel_drift(d: Diagnosis) -> list[Finding]:
    """NVIDIA_WHEEL_DRIFT: a requirement an installed distribution declares (its METADATA) that is missing or
    installed at a version outside the declared specifier (pip's own dependency check, ``pip check``)."""
    found = (_drift(d.env, dist, r) for dist, reqs in d.declared().items() for r in reqs)
    return [f for f in found if f is not None]


def _family(dist: str) -> str:
    return family_of(dist) or dist


def framework_conflict(d: Diagnosis) -> list[Finding]:
    """FRAMEWORK_CONFLICT: two distributions of different families declare nvidia-* requirements no one set of
    wheels meets (:func:`cudamatrix.solve.pins.pin_conflicts`; their METADATA is the source)."""
    parsed = d.declared()
    dists = list(parsed)
    out: list[Finding] = []
    for i, a in enumerate(dists):
        for b in dists[i + 1:]:
            if _family(a) == _family(b):
                continue
            problems = rules.pin_conflicts(parsed[a], parsed[b], a, b)
            if problems:
                out.append(Finding(code="FRAMEWORK_CONFLICT", severity="error",
                                   title=f"{a} and {b} need different nvidia-* wheels",
                                   evidence=problems[:5],
                                   fix=Said(tool("solve", a, b), " for a shared set, or keep them in separate "
                                                                  "environments")))
    return out


def file_clobber(d: Diagnosis) -> list[Finding]:
    """FILE_CLOBBER: one finding per pair of distributions whose RECORD files list the same path (detect's
    file conflicts): installing one overwrote the other's file."""
    by_pair: dict[tuple[str, ...], list[str]] = {}
    for conflict in d.env.file_conflicts:
        by_pair.setdefault(tuple(sorted(conflict.distributions)), []).append(conflict.path)
    out = []
    for pair, paths in by_pair.items():
        paths = sorted(set(paths))
        out.append(Finding(code="FILE_CLOBBER", severity="error",
                           title=f"{' and '.join(pair)} install the same "
                                 + ("file" if len(paths) == 1 else f"{len(paths)} files"),
                           evidence=paths[:20] + ([f"... and {len(paths) - 20} more"] if len(paths) > 20 else []),
                           fix="uninstall one of them (the one the framework does not declare), then reinstall the other"))
    return out


def torchvision_mismatch(d: Diagnosis) -> list[Finding]:
    """TORCHVISION_MISMATCH: a torch companion (torchvision, torchaudio) of another version than the torch
    release's row pairs with it (PyTorch's release compatibility table), or of another local build tag."""
    torch = next((i for i in d.installed if i.name == "torch"), None)
    if torch is None or torch.release is None:
        return []
    out = []
    for comp in FAMILIES["torch"].companions:
        have = d.env.packages.get(comp)
        want = torch.release.companions.get(comp)
        if not have or not want:
            continue
        local_t = torch.version.partition("+")[2]
        local_c = have.partition("+")[2]
        if base_version(have) == want and not (local_t and local_c and local_t != local_c):
            continue
        tag = "+" + local_t if local_t else ""
        out.append(Finding(code="TORCHVISION_MISMATCH", severity="error",
                           title=f"{comp} {have} does not match torch {torch.version} (needs {want}{tag})",
                           evidence=[f"matrix row: {torch.release.source}"],
                           fix=Said(pip("install", f"{comp}=={want}{tag}"), " from the same index as torch")))
    return out
