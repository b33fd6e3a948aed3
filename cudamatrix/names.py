"""Distribution names: the one table of framework families and the one PEP 503 name normaliser.

A family is one framework the matrix knows (``torch``, ``tensorflow``, ``jax``): its main distribution,
the companions released in lock-step with it (recorded in the matrix row's ``companions``), other
distributions of the same framework, and the prefixes of its plugin distributions. Every stage asks
this table instead of spelling the names again.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from cudamatrix.safe.text import lazy
from cudamatrix.schema import record

if TYPE_CHECKING:
    from packaging.requirements import Requirement

_SEPARATORS = re.compile(r"[-_.]+")


_CANONICAL: dict[str, str] = {}  # name as written -> canonical; bounded by _CANONICAL_LIMIT
_CANONICAL_LIMIT = 4096


def canonical(name: str) -> str:
    """The PEP 503 normalised form of a distribution name ("Torch_Vision" -> "torch-vision").

    The rule of ``packaging.utils.canonicalize_name`` (runs of ``-_.`` become one ``-``, lower case;
    ``tests/test_names.py`` holds them equal); spelled here so that ``detect`` does not import
    ``packaging.tags`` (about 6 ms) for it. Each name is worked out once per process (the first 4,096): one
    solve of four frameworks asks about 3,000 times, for a few dozen names."""
    try:
        return _CANONICAL[name]
    except KeyError:
        pass
    out = _SEPARATORS.sub("-", name).lower()
    if len(_CANONICAL) < _CANONICAL_LIMIT:
        _CANONICAL[name] = out
    return out


def requirement(text: str) -> Requirement:
    """``packaging.requirements.Requirement(text)``, imported on first use: its import (markers, tags,
    sysconfig, logging: about 20 ms) costs more than a whole ``doctor`` on a machine without a framework,
    which never parses one. Raises ``InvalidRequirement`` as packaging does."""
    from packaging.requirements import Requirement

    return Requirement(text)


_SIMPLE_REQUIREMENT = lazy(r"\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*((?:[<>=!~]=?=?\s*[A-Za-z0-9.*+!_-]+\s*,?\s*)*)")


def name_and_specifier(text: str) -> tuple[str, str]:
    """The distribution name and the version specifier of a requirement (``"torch>=2.11,<2.12"`` ->
    ``("torch", ">=2.11,<2.12")``). A plain ``name specifiers`` text is split here; anything else (extras,
    markers, URLs) goes through :func:`requirement`. Raises ``InvalidRequirement`` as packaging does.

    Kept beside packaging because it pays: doctor reads the advisories' requirements with it, and parsing them
    with ``packaging.requirements`` instead made doctor 11 % slower in CPU and 15 % in wall time (paired runs,
    medians of 15: the import of markers, tags and sysconfig it spares)."""
    m = _SIMPLE_REQUIREMENT.fullmatch(text)
    if m:
        return m.group(1), m.group(2).replace(" ", "").rstrip(",")
    req = requirement(text)
    return req.name, str(req.specifier)


@record(frozen=True)
class Family:
    """One framework family and the distributions that belong to it."""

    name: str  # the family, also its main distribution: "torch"
    companions: tuple[str, ...] = ()  # versioned with the main one, listed in the matrix row ("torchvision")
    aliases: tuple[str, ...] = ()  # other distributions of the same framework ("tensorflow-gpu")
    plugin_prefixes: tuple[str, ...] = ()  # plugin distributions ("jax-cuda12-plugin")
    variant_on: str | None = None  # the companion detect records the build's variant on, when the main has none

    @property
    def distributions(self) -> tuple[str, ...]:
        """The main distribution and its companions, in that order."""
        return (self.name, *self.companions)


FAMILIES: dict[str, Family] = {
    "torch": Family("torch", companions=("torchvision", "torchaudio")),
    # tensorflow-gpu/-cpu are the old names of the same package (TensorFlow "pip install" guide)
    "tensorflow": Family("tensorflow", aliases=("tensorflow-cpu", "tensorflow-gpu")),
    # jax-cuda12-plugin / jax-cuda12-pjrt (and cuda13) carry the CUDA kernels since jax 0.4.26
    # one jax wheel serves every variant: detect records JAX's CUDA variant on jaxlib (from its plugin)
    "jax": Family("jax", companions=("jaxlib",), plugin_prefixes=("jax-cuda",), variant_on="jaxlib"),
}

FAMILY_NAMES: tuple[str, ...] = tuple(FAMILIES)  # in the solver's order


def stated_variant(frameworks: Iterable[Any], name: str) -> str | None:
    """The build variant the environment states for the installed framework ``name`` (among ``frameworks``, detect's
    Framework records): its own, else the one recorded on its family's ``variant_on`` companion of the same version
    (jax 0.11.2 beside jaxlib 0.11.2 "cuda13" is the cuda13 build). None when neither states one."""
    found = {fw.name: fw for fw in frameworks}
    fw = found.get(name)
    if fw is None:
        return None
    on = FAMILIES[name].variant_on if name in FAMILIES else None
    companion = found.get(on) if fw.variant is None and on else None
    if companion is not None and companion.version == fw.version:
        return companion.variant
    return fw.variant

# main distributions and companions of every family: "torch", "torchvision", ..., "jaxlib"
FRAMEWORK_DISTS: tuple[str, ...] = tuple(d for f in FAMILIES.values() for d in f.distributions)

# ... and their other names: every distribution the families' detection reads
KNOWN_DISTS: tuple[str, ...] = tuple(d for f in FAMILIES.values() for d in (*f.distributions, *f.aliases))


def family_of(distribution: str) -> str | None:
    """The family a distribution belongs to ("torchvision" -> "torch", "jax-cuda12-plugin" -> "jax"), or None."""
    name = canonical(distribution)
    for family in FAMILIES.values():
        if name in family.distributions or name in family.aliases or name.startswith(family.plugin_prefixes):
            return family.name
    return None


# distributions built against one framework build, solved with it from data/extensions.json (never passed through
# to the installer as given); ``cupy`` stands for the cupy-cudaNNx build of the framework's CUDA major
EXTENSIONS = frozenset({"vllm", "xformers", "sglang", "onnxruntime-gpu", "cupy", "cupy-cuda11x", "cupy-cuda12x",
                        "cupy-cuda13x"})
EXTENSIONS_ON_TORCH = frozenset({"vllm", "xformers", "sglang"})  # their wheels require torch: asking for one solves it


def named_in(text: str, names) -> set[str]:
    """The distribution names of ``names`` that appear as whole names in ``text`` (``jax`` is not in
    ``jax-cuda12``), whatever their case."""
    return {n for n in names if re.search(rf"(?<![\w.-]){re.escape(n)}(?![\w-])", text, re.I)}
