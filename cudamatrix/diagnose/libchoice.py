"""Which of its per-CUDA libraries a package loads: bitsandbytes carries one ``libbitsandbytes_cudaNNN.so`` per CUDA
release in one wheel and loads one of them, named by torch's CUDA (its own loader code, data/extensions.json
``library_choices``). The others are never opened, so their CUDA libraries, kernels and symbols say nothing about
this machine; and when the file it would load is not among its files, it has no GPU library here at all. No I/O.
"""
from __future__ import annotations

import os
import re

from packaging.version import Version

from cudamatrix.matrix.data import LibraryChoice, Matrix
from cudamatrix.models import Environment, Extension, ExtensionObject
from cudamatrix.names import canonical
from cudamatrix.schema import pep508, record

Release = tuple[int, int]  # a CUDA release as (major, minor): the file's digits "130" are (13, 0)


@record(frozen=True, eq=False)
class Chosen:
    """What one installed package would load: the rule, the release asked for and who asks for it (torch's CUDA or
    the rule's override variable; None: no CUDA torch, so it loads none of them), the releases its files carry, and
    the one loaded (None: no file it loads)."""

    rule: LibraryChoice
    asked: Release | None
    asked_by: str
    carried: dict[Release, list[ExtensionObject]]
    loaded: Release | None
    overridden: bool = False  # the override variable named the release: that file only

    def file_name(self, release: Release) -> str:
        return f"{self.rule.prefix}{release[0]}{release[1]}"


def rule_for(matrix: Matrix, name: str, version: str) -> LibraryChoice | None:
    """The row whose releases hold ``name`` ``version``; None when no row does (a package of no row, or a release
    newer than every row read: its files are then judged as they are)."""
    for row in matrix.extensions.library_choices:
        if canonical(name) in {canonical(n) for n in row.names} and admits(row.versions, version):
            return row
    return None


def admits(spec: str, version: str) -> bool:
    """Whether a row's specifier admits ``version``: plain releases without packaging
    (:mod:`cudamatrix.schema.pep508`, whose answers are packaging's), the rest by packaging."""
    lite = pep508.specifiers(spec)
    if lite is not None:
        try:
            return lite.contains(version)
        except ValueError:  # a number past the int conversion limit
            return False
    from packaging.specifiers import InvalidSpecifier, SpecifierSet  # on first use: see schema/pep508.py

    try:
        return SpecifierSet(spec).contains(version, prereleases=True)
    except (InvalidSpecifier, ValueError):
        return False


def release_of(digits: str) -> Release | None:
    """"130" -> (13, 0), "118" -> (11, 8): the last digit is the minor (the packages' own reading of their files)."""
    if len(digits) < 2 or not digits.isdigit():
        return None
    return int(digits[:-1]), int(digits[-1])


def per_release(objects: list[ExtensionObject], prefix: str) -> dict[Release, list[ExtensionObject]]:
    """The objects named ``{prefix}{digits}...`` by the release their name carries (``_nocublaslt`` beside the plain
    file: both of one release)."""
    pattern = re.compile(re.escape(prefix) + r"(\d+)")
    out: dict[Release, list[ExtensionObject]] = {}
    for o in objects:
        m = pattern.match(os.path.basename(o.path))
        release = release_of(m.group(1)) if m else None
        if release is not None:
            out.setdefault(release, []).append(o)
    return out


def choose(rule: LibraryChoice, carried: set[Release], asked: Release, overridden: bool) -> Release | None:
    """The release loaded: ``exact`` (and any override) that one only; ``same_major`` that one, else the highest
    of the same major below it, else the lowest above it."""
    if asked in carried:
        return asked
    if overridden or rule.choose == "exact":
        return None
    return nearest(carried, asked)


def nearest(carried: set[Release], asked: Release) -> Release | None:
    """Of the same major as ``asked``: the highest release below it, else the lowest above it; None: no release of
    that major."""
    same = [r for r in carried if r[0] == asked[0]]
    lower = [r for r in same if r < asked]
    return max(lower) if lower else min(same, default=None)


def _asked(env: Environment, rule: LibraryChoice) -> tuple[Release, str, bool] | None:
    """The release asked for, in words, and whether the override variable named it; None without a CUDA torch (the
    package then loads its CPU library, whatever the variable says)."""
    torch = next((f for f in env.frameworks if f.name == "torch" and f.cuda), None)
    parts = torch.cuda.split(".") if torch is not None and torch.cuda else []
    if torch is None or len(parts) < 2 or not (parts[0].isdigit() and parts[1].isdigit()):
        return None
    value = env.context.env.get(rule.override, "").strip() if rule.override else ""
    release = release_of(value) if value else None
    if release is not None:
        return release, f"{rule.override}={value}", True
    return (int(parts[0]), int(parts[1])), f"torch {torch.version}'s CUDA {parts[0]}.{parts[1]}", False


def chosen(matrix: Matrix, env: Environment, ext: Extension) -> Chosen | None:
    """What ``ext`` loads of its per-CUDA libraries; None when no rule covers it or it carries none."""
    rule = rule_for(matrix, ext.name, ext.version)
    if rule is None:
        return None
    carried = per_release(ext.objects, rule.prefix)
    if not carried:
        return None
    asked = _asked(env, rule)
    if asked is None:
        return Chosen(rule=rule, asked=None, asked_by="no CUDA build of torch", carried=carried, loaded=None)
    release, by, overridden = asked
    return Chosen(rule=rule, asked=release, asked_by=by, carried=carried,
                  loaded=choose(rule, set(carried), release, overridden), overridden=overridden)


def release_carrying(matrix: Matrix, name: str, asked: Release) -> tuple[str, Release] | None:
    """The newest release of ``name`` whose wheel's files (a row's ``carried``) its own rule loads one of for
    ``asked``, and the CUDA release of that file; None when no release read has one."""
    found: list[tuple[Version, str, Release]] = []
    for row in matrix.extensions.library_choices:
        if canonical(name) not in {canonical(n) for n in row.names}:
            continue
        for version, cudas in row.carried.items():
            files = {r for c in cudas if (r := release_of(c.replace(".", "")))}
            loaded = choose(row, files, asked, overridden=False)
            if loaded is not None:  # the keys are PEP 440 versions (the schema's VersionText)
                found.append((Version(version), version, loaded))
    if not found:
        return None
    _v, version, loaded = max(found)
    return version, loaded


def judged_objects(ext: Extension, c: Chosen | None) -> list[ExtensionObject]:
    """The objects of ``ext`` that can be opened here: every one, less the per-CUDA libraries it does not load
    (``c``: what :func:`chosen` says of it)."""
    if c is None:
        return list(ext.objects)
    skipped = {id(o) for r, objs in c.carried.items() if r != c.loaded for o in objs}
    return [o for o in ext.objects if id(o) not in skipped]
