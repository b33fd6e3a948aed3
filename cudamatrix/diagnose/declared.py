"""What installed distributions declare: the ``Requires-Dist`` requirements of their METADATA that apply to an
Environment (its Python, platform and installed extras). Read by the Diagnosis (each distribution's declared
requirements, once) and by the wheel findings (:mod:`cudamatrix.diagnose.wheels`)."""
from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, cast

from cudamatrix.models import Environment
from cudamatrix.names import canonical, requirement
from cudamatrix.schema import pep508
from cudamatrix.solve import rules
from cudamatrix.solve.target import Target

if TYPE_CHECKING:
    from packaging.requirements import Requirement


def applicable_requirements(env: Environment, texts: list[str]) -> list[Requirement]:
    """The requirements a distribution declares (its METADATA ``Requires-Dist``) that apply here; unparseable
    ones are left out. The common shapes are read without packaging (:mod:`cudamatrix.schema.pep508`: the
    same answers, without the import that cost doctor about 70 ms on the GPU machine); the rest by packaging."""
    envs = _marker_envs(".".join((env.python.version or "3.11").split(".")[:2]), env.python.platform or "linux_x86_64")
    verdicts: dict[str, tuple[bool, bool]] = {}  # marker text -> (applies, applies under a CUDA extra)
    reqs = []
    for t in texts:
        lite = pep508.parse(t)
        if lite is not None:
            try:
                here, extra = _verdict(lite, envs, verdicts)
            except pep508.Unanswered:
                pass  # a marker outside the plain shape: packaging answers
            else:
                if here or (extra and canonical(lite.name) in env.packages):
                    reqs.append(cast("Requirement", lite))  # the same attributes the findings read
                continue
        r = _full(t)
        if r is not None and (r.marker is None or _marker_ok(r, env, envs)):
            reqs.append(r)
    return reqs


def _full(text: str) -> Requirement | None:
    """packaging's parse of a requirement, None when it is invalid."""
    from packaging.requirements import InvalidRequirement  # on first use: see names.requirement

    try:
        return requirement(text)
    except InvalidRequirement:
        return None


_EXTRAS = ("and-cuda", "with-cuda", "cuda", "cuda12", "cuda13")  # the frameworks' CUDA extras


@lru_cache(maxsize=16)
def _marker_envs(python: str, platform: str) -> tuple[dict[str, str], tuple[dict[str, str], ...]]:
    """The marker environment of this machine, and the same under each CUDA extra (read, never changed)."""
    target = Target(name="m", python=python, platform=platform)
    return rules.marker_env(target, None), tuple(rules.marker_env(target, e) for e in _EXTRAS)


def _verdict(lite: pep508.Requirement, envs, verdicts: dict[str, tuple[bool, bool]]) -> tuple[bool, bool]:
    """(the marker applies, it applies under a CUDA extra), worked out once per marker text. Raises
    pep508.Unanswered."""
    key = lite.text.partition(";")[2]
    hit = verdicts.get(key)
    if hit is None:
        base, extras = envs
        here = lite.applies(base)
        hit = verdicts[key] = (here, not here and any([lite.applies(e) for e in extras]))
    return hit


def _marker_ok(req: Requirement, env: Environment, envs) -> bool:
    """Whether a declared requirement's marker applies here. One behind an extra (``extra == "and-cuda"``)
    applies when its distribution is installed: that extra was asked for. A marker packaging cannot evaluate
    applies."""
    assert req.marker is not None  # the caller asks only about requirements with a marker
    base, extras = envs
    try:
        if req.marker.evaluate(base):
            return True
        applies = [e for e in extras if req.marker.evaluate(e)]
    except Exception:
        return True
    return bool(applies) and canonical(req.name) in env.packages
