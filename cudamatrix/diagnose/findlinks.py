"""Findings about wheels installed from find-links pages (PyG's torch-scatter, torch-sparse, torch-cluster,
torch-spline-conv, pyg-lib): each page's wheel carries the torch release and CUDA variant it was built for in its
local version tag (``2.1.2+pt24cu121``: the pages' ``local`` pattern in data/extensions.json ``find_links``), so the
installed version alone says whether it matches the installed torch build. No I/O.
"""
from __future__ import annotations

import re
from functools import lru_cache

from cudamatrix.diagnose.context import Diagnosis, base_version
from cudamatrix.matrix.data import FindLinks, FindLinksBuild
from cudamatrix.models import Finding
from cudamatrix.names import canonical

_VARIANT = re.compile(r"^(?:cpu|cu\d{3})$")
_CUDA = re.compile(r"^(\d{2})\.(\d)$")  # a torch build's CUDA ("12.8") -> its variant ("cu128")


@lru_cache(maxsize=16)
def tag_pattern(local: str) -> re.Pattern[str]:
    """The regular expression of a local tag pattern (``+pt{torch}{variant}``): ``torch`` is the release's major
    and minor without the dot, ``variant`` ``cpu`` or ``cuNNN``."""
    parts = re.split(r"(\{torch\}|\{variant\})", local.lstrip("+"))
    groups = {"{torch}": r"(?P<torch>\d{2,4})", "{variant}": r"(?P<variant>cpu|cu\d{3})"}
    return re.compile("^" + "".join(groups.get(p, re.escape(p)) for p in parts) + "$")


def _torch_build(d: Diagnosis) -> tuple[str, str, str | None] | None:
    """(installed torch version, its major and minor without the dot, its variant where known) or None."""
    fw = next((f for f in d.env.frameworks if f.name == "torch"), None)
    if fw is None:
        return None
    parts = base_version(fw.version).split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:2]):
        return None
    variant = fw.variant if fw.variant and _VARIANT.match(fw.variant) else None
    cuda = _CUDA.match(fw.cuda or "")
    if variant is None and cuda:
        variant = f"cu{cuda.group(1)}{cuda.group(2)}"
    return fw.version, f"{int(parts[0])}{int(parts[1])}", variant


_TORCH_OWN = {"torch", "torchvision", "torchaudio"}  # their local tags are torch's variant, never a page's


def _installed(d: Diagnosis) -> list[tuple[str, str, FindLinks]]:
    """(distribution, version, its pages) of each installed package some find-links pages carry. Only a version
    with a local tag can name a page's build: with none installed (but torch's own) the extensions' file is not read
    (built on first use: doctor on a machine without PyG)."""
    if not any("+" in v for n, v in d.env.packages.items() if canonical(n) not in _TORCH_OWN):
        return []
    owner = {canonical(b.name): pages for pages in d.matrix.extensions.find_links for b in pages.builds}
    broken = {canonical(e.name) for e in d.env.extensions if any(o.missing_count for o in e.objects)}
    return [(canonical(n), v, owner[canonical(n)]) for n, v in sorted(d.env.packages.items())
            if canonical(n) in owner and canonical(n) not in broken]  # undefined symbols: EXTENSION_ABI_MISMATCH


def _right_wheel(pages: FindLinks, name: str, minor: str, variant: str) -> tuple[FindLinksBuild, str] | None:
    """The newest build row of ``name`` for this torch major.minor and variant, and its page's URL."""
    rows = [b for b in pages.builds if canonical(b.name) == name and f"{b.torch.major}{b.torch.minor}" == minor
            and variant in b.variants]
    if not rows:
        return None
    best = max(rows, key=lambda b: b.version)
    return best, pages.page(str(best.torch), variant)


def _fix(pages: FindLinks, name: str, torch: tuple[str, str, str | None]) -> tuple[str, list[list[str]]]:
    """The fix: the page's wheel for the installed torch build where the data holds one, else a solve."""
    variant = torch[2]
    found = _right_wheel(pages, name, torch[1], variant) if variant else None
    if found is None or variant is None:
        return (f"cudamatrix solve torch=={base_version(torch[0])} {name} (no {pages.name} page in the data carries "
                f"{name} for this torch build; the answer names the nearest torch that has one)"), []
    build, url = found
    wheel = f"{name}=={build.version}{pages.tag(torch[1], variant)}"
    return (f"pip install --find-links {url} '{wheel}' (the wheel of the {pages.name} page for the installed torch; "
            f"source: {build.source})"), [["pip", "install", "--find-links", url, wheel]]


def _torch_words(minor: str) -> str:
    return f"{minor[0]}.{minor[1:]}"


def find_links_mismatch(d: Diagnosis) -> list[Finding]:
    """EXTENSION_PIN_MISMATCH / EXTENSION_CUDA_MISMATCH from a find-links wheel's local tag: an installed PyG
    wheel (``torch_scatter 2.1.2+pt24cu121``) whose tag names another torch major.minor than the installed torch
    (PIN), or the same torch and another variant (CUDA: ``cu121`` beside torch's ``cu124``, ``cpu`` beside a CUDA
    build); PyG's installation page says to take the page of the torch release and CUDA torch was installed with.
    A version without such a tag (a source build) is not judged, nor a torch whose variant no fact states (the
    CUDA half)."""
    torch = _torch_build(d)
    if torch is None:
        return []
    out = []
    for name, version, pages in _installed(d):
        _public, _plus, local = version.partition("+")
        tag = tag_pattern(pages.local).match(local)
        if tag is None:
            continue
        built_torch, built_variant = tag.group("torch"), tag.group("variant")
        evidence = [f"{name} {version}: its local tag +{local} names torch {_torch_words(built_torch)} and "
                    f"{built_variant} (the {pages.name} pages' wheels are tagged {pages.local})",
                    f"torch {torch[0]} is installed ({torch[2] or 'its variant is not known'})"]
        fix, commands = _fix(pages, name, torch)
        if built_torch != torch[1]:
            out.append(Finding(code="EXTENSION_PIN_MISMATCH", severity="error",
                               title=f"{name} {version} is built for torch {_torch_words(built_torch)}; torch "
                                     f"{torch[0]} is installed", evidence=evidence, fix=fix, fix_commands=commands))
        elif torch[2] is not None and built_variant != torch[2]:
            out.append(Finding(code="EXTENSION_CUDA_MISMATCH", severity="error",
                               title=f"{name} {version} is built for {built_variant}; torch {torch[0]} is the "
                                     f"{torch[2]} build", evidence=evidence, fix=fix, fix_commands=commands))
    return out
