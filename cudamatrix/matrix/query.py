"""Read-side helpers over the Matrix: rows for ``matrix show``, look-ups used by the solver, and lint."""
from __future__ import annotations

import difflib
import re
from functools import lru_cache
from typing import Callable

from packaging.version import InvalidVersion, Version

from cudamatrix.matrix.data import Advisory, Architecture, CudaRelease, CudnnRelease, FrameworkRelease, Gpu, Matrix
from cudamatrix.names import FAMILY_NAMES, name_and_specifier, requirement
from cudamatrix.schema import normalize_cc, to_dict

_PREFIXES = ("nvidia ", "geforce ", "tesla ", "quadro ")
# what NVML / nvidia-smi add to a product name: the form factor and memory of a board ("-PCIE-16GB",
# "-SXM2-32GB", " 80GB HBM3"), "Laptop GPU", "with Max-Q Design"; and what the table truncates ("...")
_SUFFIX = re.compile(r"(\s+(laptop gpu|with max q design|max q|mobile))+$|"
                     r"(\s+(pcie|sxm\d?|nvl|hbm\d?e?|\d+\s?gb))+$")


def _norm_name(name: str) -> str:
    """GPU name for matching: lower case, no vendor prefixes, single spaces, '-' '_' and ' ' equal."""
    s = name.strip().lower()
    changed = True
    while changed:
        changed = False
        for prefix in _PREFIXES:
            if s.startswith(prefix):
                s, changed = s[len(prefix):], True
    s = re.sub(r"[\s_\-]+", " ", s)
    return s.strip()


@lru_cache(maxsize=8)
def _gpu_index(matrix: Matrix) -> dict[str, Gpu]:
    index: dict[str, Gpu] = {}
    for gpu in matrix.gpus.gpus:
        for name in (gpu.name, *gpu.aliases):
            index.setdefault(_norm_name(name), gpu)
            index.setdefault(name.lower(), gpu)
    return index


@lru_cache(maxsize=8)
def _sorted_keys(matrix: Matrix) -> tuple[str, ...]:
    return tuple(sorted(k for k in _gpu_index(matrix) if k))


def _same_cc(gpus: list[Gpu]) -> Gpu | None:
    """One of ``gpus`` when they all share a compute capability (so the answer does not depend on which)."""
    return gpus[0] if gpus and len({g.compute_capability for g in gpus}) == 1 else None


def find_gpu(matrix: Matrix, name: str) -> Gpu | None:
    """The GPU model for a name as nvidia-smi / NVML print it, or a canonical name. None if unknown.

    Handles the "NVIDIA " / "GeForce " prefixes, the board suffixes NVML adds ("-PCIE-16GB", "-SXM2-32GB",
    " Laptop GPU", " with Max-Q Design"), and names nvidia-smi's table cut short ("GeForce RTX 207...",
    "NVIDIA GeForce RTX 3060 ..."): a cut name matches when every model it can stand for has one compute
    capability. Dictionary look-ups first; the sorted-prefix scan only for suffixed or cut names.
    """
    index = _gpu_index(matrix)
    hit = index.get(name.lower()) or index.get(_norm_name(name))
    if hit:
        return hit
    norm = _norm_name(name)
    truncated = norm.endswith("...") or norm.endswith("..") or name.rstrip().endswith("\u2026")
    norm = norm.rstrip(".\u2026 ")
    if not norm:
        return None
    keys = _sorted_keys(matrix)
    if truncated:
        import bisect

        at = bisect.bisect_left(keys, norm)
        found = []
        while at < len(keys) and keys[at].startswith(norm):
            found.append(index[keys[at]])
            at += 1
        return _same_cc(found)
    base = _SUFFIX.sub("", norm).strip()
    if base != norm:
        hit = index.get(base)
        if hit:
            return hit
    # a board name the table lacks, with a suffix the regex does not know ("A100-PCIE-40GB" vs "A100 PCIe 40GB")
    for key in (norm, base):
        found = [index[k] for k in keys if k.startswith(key + " ") or key.startswith(k + " ")]
        if found:
            longest = max(found, key=lambda g: len(_norm_name(g.name)))
            return _same_cc(found) or longest
    return None


def suggest_gpus(matrix: Matrix, name: str, n: int = 3) -> list[str]:
    names = [g.name for g in matrix.gpus.gpus] + [a for g in matrix.gpus.gpus for a in g.aliases]
    return difflib.get_close_matches(name, names, n=n, cutoff=0.4) or \
        [g.name for g in matrix.gpus.gpus if _norm_name(name).split(" ")[-1] in _norm_name(g.name)][:n]


def architecture(matrix: Matrix, cc: str) -> Architecture | None:
    cc = normalize_cc(cc)
    base = cc.rstrip("af")
    for arch in matrix.gpus.architectures:
        if base in [c.rstrip("af") for c in arch.compute_capabilities]:
            return arch
    return None


def cuda_release(matrix: Matrix, version: str | Version) -> CudaRelease | None:
    v = Version(str(version))
    best = None
    for rel in matrix.cuda.releases:
        if rel.version.release[:2] == v.release[:2]:
            if best is None or rel.version > best.version:
                best = rel
    return best


def driver_max_cuda(matrix: Matrix, driver: str) -> Version | None:
    """Highest CUDA version a driver reports, from its branch (e.g. 565.57 -> 12.7)."""
    try:
        branch = int(driver.split(".")[0])
    except ValueError:
        return None
    best = None
    for row in matrix.cuda.driver_branches:
        if row.branch <= branch and (best is None or row.branch > best.branch):
            best = row
    return best.max_cuda if best else None


def driver_version(text: str) -> tuple[int, ...]:
    """'535.104.05' -> (535, 104, 5). Raises ValueError."""
    parts = text.strip().split(".")
    return tuple(int(p) for p in parts)


def rows_for(matrix: Matrix, family: str, key: str | None) -> list[dict]:
    """Rows of one family as plain dicts (the public ``matrix show --json`` shape)."""
    if family in (*FAMILY_NAMES, "cuda", "cudnn"):
        versioned: list[FrameworkRelease] | list[CudaRelease] | list[CudnnRelease] = (
            matrix.cuda.releases if family == "cuda" else
            matrix.cudnn.releases if family == "cudnn" else matrix.frameworks(family))
        return [to_dict(r) for r in versioned
                if not key or str(r.version) == key or _version_prefix(str(r.version), key)]
    if family == "gpu":
        if key:
            gpu = find_gpu(matrix, key)
            gpus = [gpu] if gpu else []
            if not gpus:
                try:
                    cc = normalize_cc(key)
                    gpus = [g for g in matrix.gpus.gpus if g.compute_capability == cc]
                except ValueError:
                    gpus = []
        else:
            gpus = matrix.gpus.gpus
        out = []
        for g in gpus:
            row = to_dict(g)
            arch = architecture(matrix, g.compute_capability)
            row["last_driver_branch"] = arch.last_driver_branch if arch else None
            row["last_cuda"] = str(arch.last_cuda) if arch and arch.last_cuda else None
            out.append(row)
        return out
    return []


def _version_prefix(version: str, key: str) -> bool:
    return version.startswith(key + ".")


def lint(matrix: Matrix) -> list[str]:
    """Consistency problems in the data (beyond what the schema checks). Empty when clean. The checks are the
    functions of :data:`LINTS`, asked in that order."""
    return [problem for check in LINTS for problem in check(matrix)]


def _sourced(where: str, source: str) -> list[str]:
    return [f"{where}: source: empty"] if not source or not source.strip() else []


def _duplicate(where: str, what: str, key: str, seen: set[str]) -> list[str]:
    """"<where>: <what>: duplicate ..." when ``key`` was seen before (it is added to ``seen``)."""
    found = key in seen
    seen.add(key)
    return [f"{where}: {what}"] if found else []


def _cuda_releases(matrix: Matrix) -> list[str]:
    """Every CUDA row sourced, once, its driver floors driver versions."""
    problems: list[str] = []
    seen: set[str] = set()
    for i, rel in enumerate(matrix.cuda.releases):
        where = f"cuda.json: releases[{i}]"
        problems += _sourced(where, rel.source)
        problems += _duplicate(where, f"version: duplicate row {rel.version}", str(rel.version), seen)
        for field_name in ("linux_min_driver", "windows_min_driver"):
            value = getattr(rel, field_name)
            if value is not None and not _is_driver_version(value):
                problems.append(f"{where}: {field_name}: not a driver version: {value!r}")
    return problems


def _is_driver_version(value: str) -> bool:
    try:
        driver_version(value)
    except ValueError:
        return False
    return True


def _cuda_floors_increase(matrix: Matrix) -> list[str]:
    """Within a CUDA major, a newer release never needs an older driver (NVIDIA's release notes table)."""
    problems = []
    for major in {r.version.major for r in matrix.cuda.releases}:
        rels = sorted((r for r in matrix.cuda.releases if r.version.major == major), key=lambda r: r.version)
        for field_name in ("linux_min_driver", "windows_min_driver"):
            problems += _floors_increase(major, rels, field_name)
    return problems


def _floors_increase(major: int, rels: list, field_name: str) -> list[str]:
    problems = []
    last = None
    for rel in rels:
        value = getattr(rel, field_name)
        if value is None or not _is_driver_version(value):
            continue
        v = driver_version(value)
        if last and v < last[1]:
            problems.append(f"cuda.json: {field_name} decreases within CUDA {major}: "
                            f"{last[0]} needs {'.'.join(map(str, last[1]))}, {rel.version} needs {value}")
        last = (rel.version, v)
    return problems


def _cuda_tables_sourced(matrix: Matrix) -> list[str]:
    return [p for i, row in enumerate(matrix.cuda.minor_compat)
            for p in _sourced(f"cuda.json: minor_compat[{i}]", row.source)] + \
        [p for i, branch_row in enumerate(matrix.cuda.driver_branches)
         for p in _sourced(f"cuda.json: driver_branches[{i}]", branch_row.source)]


def _gpus(matrix: Matrix) -> list[str]:
    """Every architecture and GPU sourced; a GPU name or alias names one GPU; its architecture is listed and its
    compute capability known to some CUDA release."""
    problems = [p for i, arch in enumerate(matrix.gpus.architectures)
                for p in _sourced(f"gpus.json: architectures[{i}]", arch.source)]
    toolkit_ccs = {c.rstrip("af") for r in matrix.cuda.releases for c in r.compute_capabilities}
    names: dict[str, str] = {}
    arch_names = {a.name for a in matrix.gpus.architectures}
    for i, gpu in enumerate(matrix.gpus.gpus):
        where = f"gpus.json: gpus[{i}]"
        problems += _sourced(where, gpu.source)
        for name in (gpu.name, *gpu.aliases):
            key = name.lower()
            if key in names and names[key] != gpu.name:
                problems.append(f"{where}: name {name!r} also belongs to {names[key]!r}")
            names[key] = gpu.name
        if gpu.architecture not in arch_names:
            problems.append(f"{where}: architecture: {gpu.architecture!r} is not in architectures")
        if toolkit_ccs and gpu.compute_capability.rstrip("af") not in toolkit_ccs:
            problems.append(f"{where}: compute_capability: {gpu.compute_capability} is known to no CUDA release")
    return problems


def _cudnn(matrix: Matrix) -> list[str]:
    problems: list[str] = []
    seen: set[str] = set()
    for i, cudnn_rel in enumerate(matrix.cudnn.releases):
        where = f"cudnn.json: releases[{i}]"
        problems += _sourced(where, cudnn_rel.source)
        problems += _duplicate(where, f"version: duplicate row {cudnn_rel.version}", str(cudnn_rel.version), seen)
    return problems


def _frameworks(matrix: Matrix) -> list[str]:
    """Every release sourced, in its family's file, once; its Python versions versions; its variants checked."""
    cuda_versions = {r.version.release[:2] for r in matrix.cuda.releases}
    problems: list[str] = []
    for family in FAMILY_NAMES:
        seen: set[str] = set()
        for i, fw_rel in enumerate(matrix.frameworks(family)):
            where = f"{family}.json: releases[{i}]"
            problems += _sourced(where, fw_rel.source)
            if fw_rel.name != family:
                problems.append(f"{where}: name: {fw_rel.name!r} in {family}.json")
            problems += _duplicate(where, f"version: duplicate row {fw_rel.version}", str(fw_rel.version), seen)
            problems += [f"{where}: python: not a version: {p!r}" for p in fw_rel.python if not is_version(p)]
            problems += _variants(where, fw_rel.variants, cuda_versions)
    return problems


def is_version(text: str) -> bool:
    """Whether ``text`` is a PEP 440 version."""
    try:
        Version(text)
    except InvalidVersion:
        return False
    return True


def _variants(where: str, variants: list, cuda_versions: set) -> list[str]:
    """Every variant sourced and named once, of a CUDA the table holds, its nvidia-* pins requirements; at most
    one the default index's build."""
    problems: list[str] = []
    variant_names: set[str] = set()
    for j, var in enumerate(variants):
        vwhere = f"{where}.variants[{j}]"
        problems += _sourced(vwhere, var.source)
        problems += _duplicate(vwhere, f"name: duplicate variant {var.name}", var.name, variant_names)
        if var.cuda is not None and var.cuda.release[:2] not in cuda_versions:
            problems.append(f"{vwhere}: cuda: {var.cuda} is not in the CUDA table")
        for k, pin in enumerate(var.nvidia_pins):
            from packaging.requirements import InvalidRequirement  # on first use: see names.requirement

            try:
                requirement(pin)
            except InvalidRequirement:
                problems.append(f"{vwhere}.nvidia_pins[{k}]: does not parse: {pin!r}")
    if sum(var.pypi_default for var in variants) > 1:
        problems.append(f"{where}: more than one variant is pypi_default")
    return problems


def _advisories(matrix: Matrix) -> list[str]:
    problems: list[str] = []
    seen: set[str] = set()
    for i, adv in enumerate(matrix.advisories.advisories):
        where = f"advisories.json: advisories[{i}]"
        problems += _sourced(where, adv.source)
        problems += _duplicate(where, f"id: duplicate {adv.id}", adv.id, seen)
    return problems


# the checks :func:`lint` asks, in the order their problems are listed
LINTS: list[Callable[[Matrix], list[str]]] = [_cuda_releases, _cuda_floors_increase, _cuda_tables_sourced, _gpus,
                                              _cudnn, _frameworks, _advisories]


def jetpack_only(matrix: Matrix, family: str, cc: str) -> Advisory | None:
    """The advisory that sends a board of compute capability ``cc`` to NVIDIA's JetPack wheels for ``family``
    (Jetson Nano/TX2/Xavier/Orin: PyTorch's own aarch64 builds carry no kernels for them, whatever SASS of the
    same major they ship), or None. For the solver: a candidate from the default or PyTorch index does not fit
    such a target."""
    cc = normalize_cc(cc)
    for adv in matrix.advisories.advisories:
        if cc in adv.gpu_compute_capabilities and "JetPack" in adv.fix and \
                any(name_and_specifier(a)[0] == family for a in adv.affects):
            return adv
    return None
