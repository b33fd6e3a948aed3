"""Read-side helpers over the Matrix: rows for ``matrix show``, look-ups used by the solver, and lint."""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Callable

from packaging.version import VERSION_PATTERN, InvalidVersion, Version

from cudamatrix.matrix.data import (
    Advisory,
    Architecture,
    CudaRelease,
    CudnnGpuFloor,
    CudnnRelease,
    FrameworkRelease,
    Gpu,
    JetPack,
    Matrix,
    PlatformFacts,
    Variant,
)
from cudamatrix.matrix.gpunames import Names, norm
from cudamatrix.matrix.sources import all_third_party, records_of
from cudamatrix.names import FAMILY_NAMES, name_and_specifier, requirement
from cudamatrix.safe.text import lazy
from cudamatrix.schema import normalize_cc, to_dict


@lru_cache(maxsize=8)  # per matrix: a matrix is a frozen record, hashed by identity
def gpu_names(matrix: Matrix) -> Names:
    """The matrix's GPU models by every name and alias (:class:`~cudamatrix.matrix.gpunames.Names`)."""
    return Names(matrix.gpus.gpus, lambda g: (g.name, *g.aliases), lambda g: g.compute_capability)


def find_gpu(matrix: Matrix, name: str) -> Gpu | None:
    """The GPU model for a name as nvidia-smi / NVML print it, or a canonical name (cut short or with a board
    suffix: :meth:`~cudamatrix.matrix.gpunames.Names.find`). None if unknown."""
    return gpu_names(matrix).find(name)


def lookup_gpu(matrix: Matrix, text: str) -> Gpu | None:
    """The GPU model a person names as they type it ("4090", "rtx4090", "a100", "Tesla T4": a model number, a
    compact or spaced name, a family), from the names and aliases in gpus.json; None when the text names no model
    or models of different compute capabilities (:meth:`~cudamatrix.matrix.gpunames.Names.lookup`)."""
    return gpu_names(matrix).lookup(text)


def suggest_gpus(matrix: Matrix, name: str, n: int = 3) -> list[str]:
    names = [g.name for g in matrix.gpus.gpus] + [a for g in matrix.gpus.gpus for a in g.aliases]
    import difflib  # on first use: only a name that is not known asks

    return difflib.get_close_matches(name, names, n=n, cutoff=0.4) or \
        [g.name for g in matrix.gpus.gpus if norm(name).split(" ")[-1] in norm(g.name)][:n]


@lru_cache(maxsize=256)  # per (matrix, compute capability): a matrix is a frozen record, hashed by identity
def architecture(matrix: Matrix, cc: str) -> Architecture | None:
    cc = normalize_cc(cc)
    base = cc.rstrip("af")
    for arch in matrix.gpus.architectures:
        if base in [c.rstrip("af") for c in arch.compute_capabilities]:
            return arch
    return None


@lru_cache(maxsize=256)  # per (matrix, version), as architecture
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


@lru_cache(maxsize=4096)  # a fleet's thousands of drivers, each compared with every floor
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
        return [to_dict(r, records=True) for r in versioned
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
            row = to_dict(g, records=True)
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


def _lint_driver_fields(where: str, rel: CudaRelease) -> list[str]:
    out = []
    for field_name in ("linux_min_driver", "windows_min_driver"):
        value = getattr(rel, field_name)
        if value is not None:
            try:
                driver_version(value)
            except ValueError:
                out.append(f"{where}: {field_name}: not a driver version: {value!r}")
    return out


def _lint_floors_rise(rels: list[CudaRelease], field_name: str, major: int) -> list[str]:
    """A major's driver floors never decrease from one minor to the next."""
    out, last = [], None
    for rel in rels:
        value = getattr(rel, field_name)
        try:
            v = driver_version(value) if value is not None else None
        except ValueError:
            v = None
        if v is None:
            continue
        if last and v < last[1]:
            out.append(f"cuda.json: {field_name} decreases within CUDA {major}: "
                       f"{last[0]} needs {'.'.join(map(str, last[1]))}, {rel.version} needs {value}")
        last = (rel.version, v)
    return out


def _lint_cuda(matrix: Matrix) -> list[str]:
    """cuda.json: one row per CUDA version; each driver floor a driver version that rises with the minor
    within a major (NVIDIA's table only ever raises it); each JetPack line's driver a driver version and its CUDA
    a row of the table."""
    problems: list[str] = []
    seen: set[str] = set()
    for i, rel in enumerate(matrix.cuda.releases):
        where = f"cuda.json: releases[{i}]"
        if str(rel.version) in seen:
            problems.append(f"{where}: version: duplicate row {rel.version}")
        seen.add(str(rel.version))
        problems += _lint_driver_fields(where, rel)
    for major in {r.version.major for r in matrix.cuda.releases}:
        rels = sorted((r for r in matrix.cuda.releases if r.version.major == major), key=lambda r: r.version)
        for field_name in ("linux_min_driver", "windows_min_driver"):
            problems += _lint_floors_rise(rels, field_name, major)
    cuda_versions = {r.version.release[:2] for r in matrix.cuda.releases}
    for i, jp in enumerate(matrix.cuda.jetpack):
        where = f"cuda.json: jetpack[{i}]"
        try:
            driver_version(jp.driver)
        except ValueError:
            problems.append(f"{where}: driver: not a driver version: {jp.driver!r}")
        if jp.cuda.release[:2] not in cuda_versions:
            problems.append(f"{where}: cuda: {jp.cuda} is not in the CUDA table")
    return problems


def _lint_gpus(matrix: Matrix) -> list[str]:
    """gpus.json: every name and alias means one GPU; every GPU's architecture is a row; every compute
    capability is one some CUDA release targets (CUDA Toolkit release notes)."""
    problems: list[str] = []
    toolkit_ccs = {c.rstrip("af") for r in matrix.cuda.releases for c in r.compute_capabilities}
    names: dict[str, str] = {}
    arch_names = {a.name for a in matrix.gpus.architectures}
    for i, gpu in enumerate(matrix.gpus.gpus):
        where = f"gpus.json: gpus[{i}]"
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


def _lint_cudnn(matrix: Matrix) -> list[str]:
    """cudnn.json: one row per cuDNN version; every GPU floor cites NVIDIA's document and the binaries read."""
    problems: list[str] = []
    seen: set[str] = set()
    for i, cudnn_rel in enumerate(matrix.cudnn.releases):
        if str(cudnn_rel.version) in seen:
            problems.append(f"cudnn.json: releases[{i}]: version: duplicate row {cudnn_rel.version}")
        seen.add(str(cudnn_rel.version))

    for i, cap in enumerate(matrix.cudnn.gpu_floors):  # a cap from the GPU: the document and the binaries
        kinds = {r.kind for r in records_of(cap.source)}
        if not {"first_party", "artifact"} <= kinds:
            problems.append(f"cudnn.json: gpu_floors[{i}]: source: needs NVIDIA's document (first_party) and the "
                            f"binaries (artifact), has {', '.join(sorted(kinds)) or 'none'}")
    return problems


def _lint_extension_floors(matrix: Matrix) -> list[str]:
    """extensions.json: every GPU floor cites the package's own words (first_party: its README or docs at a tag)."""
    return [f"extensions.json: gpu_floors[{i}]: source: needs the package's own README or documentation "
            f"(first_party), has {', '.join(sorted({r.kind for r in records_of(floor.source)})) or 'none'}"
            for i, floor in enumerate(matrix.extensions.gpu_floors)
            if "first_party" not in {r.kind for r in records_of(floor.source)}]


def _lint_library_choices(matrix: Matrix) -> list[str]:
    """extensions.json: every per-CUDA library rule cites the package's own loader code (first_party, at a tag) and,
    for the files its releases carry, the wheels (artifact)."""
    out = []
    for i, row in enumerate(matrix.extensions.library_choices):
        kinds = {r.kind for r in records_of(row.source)}
        if "first_party" not in kinds or (row.carried and "artifact" not in kinds):
            out.append(f"extensions.json: library_choices[{i}]: source: needs the package's own code (first_party)"
                       f"{' and its wheels (artifact)' if row.carried else ''}, has {', '.join(sorted(kinds)) or 'none'}")
    return out


def _lint_release_file_sets(matrix: Matrix) -> list[str]:
    """extensions.json: every release's file set names a package with a file-name rule, cites the package's own
    release workflow (first_party), and excludes only values its own matrix lists (else the workflow was misread)."""
    rules = {r.name for r in matrix.extensions.release_files}
    problems = []
    for i, row in enumerate(matrix.extensions.release_file_sets):
        where = f"extensions.json: release_file_sets[{i}]"
        if row.name not in rules:
            problems.append(f"{where}: name: {row.name} has no release_files rule to name its files")
        if "first_party" not in {r.kind for r in records_of(row.source)}:
            problems.append(f"{where}: source: needs the package's own release workflow (first_party)")
        for k, ex in enumerate(row.exclude):
            for key in ("python", "torch", "cuda", "cxx11_abi"):
                value = getattr(ex, key)
                if value is not None and value not in getattr(row, key):
                    problems.append(f"{where}.exclude[{k}].{key}: {value} is not in the release's {key} list")
    return problems


def _lint_find_links(matrix: Matrix) -> list[str]:
    """extensions.json: find-links pages name ``{torch}`` and ``{variant}`` in their URL and local tag, every build
    cites the package's own build workflow (first_party), names its variants as a torch build does (``cpu``,
    ``cuNNN``) and is listed once per (package, torch release)."""
    problems: list[str] = []
    for i, pages in enumerate(matrix.extensions.find_links):
        where = f"extensions.json: find_links[{i}]"
        for key in ("url", "local"):
            if not all(part in getattr(pages, key) for part in ("{torch}", "{variant}")):
                problems.append(f"{where}: {key}: names no {{torch}} or no {{variant}}")
        seen: set[tuple[str, Version]] = set()
        for j, b in enumerate(pages.builds):
            if "first_party" not in {r.kind for r in records_of(b.source)}:
                problems.append(f"{where}.builds[{j}]: source: needs the package's own build workflow (first_party)")
            if any(not FIND_LINKS_VARIANT.fullmatch(v) for v in b.variants) or not b.variants:
                problems.append(f"{where}.builds[{j}]: variants: {b.variants} are not cpu or cuNNN")
            if (b.name, b.torch) in seen:
                problems.append(f"{where}.builds[{j}]: duplicate row {b.name} for torch {b.torch}")
            seen.add((b.name, b.torch))
    return problems


def _lint_variant(where: str, var: Variant, release: FrameworkRelease, cuda_versions: set) -> list[str]:
    problems = []
    if var.cuda is not None and var.cuda.release[:2] not in cuda_versions:
        problems.append(f"{where}: cuda: {var.cuda} is not in the CUDA table")
    for k, pin in enumerate(var.nvidia_pins):
        from packaging.requirements import InvalidRequirement  # on first use: see names.requirement

        try:
            requirement(pin)
        except InvalidRequirement:
            problems.append(f"{where}.nvidia_pins[{k}]: does not parse: {pin!r}")
    for platform, facts in var.per_platform.items():
        if release.platforms and platform not in release.platforms:
            problems.append(f"{where}.per_platform.{platform}: the release has no {platform} wheels "
                            f"({', '.join(release.platforms)})")
        if facts.cuda is not None and facts.cuda.release[:2] not in cuda_versions:
            problems.append(f"{where}.per_platform.{platform}: cuda: {facts.cuda} is not in the CUDA table")
    return problems


def _lint_defaults(where: str, release: FrameworkRelease) -> list[str]:
    """At most one variant is the default-index wheel of a platform (``pypi_default`` means linux_x86_64)."""
    defaults: dict[str, list[str]] = {}
    for var in release.variants:
        if var.pypi_default:
            defaults.setdefault("linux_x86_64", []).append(var.name)
        for platform, facts in var.per_platform.items():
            if facts.pypi_default and not (platform == "linux_x86_64" and var.pypi_default):
                defaults.setdefault(platform, []).append(var.name)
    if len(defaults.get("linux_x86_64", [])) > 1:
        return [f"{where}: more than one variant is pypi_default"]
    return [f"{where}: more than one variant is the default-index wheel on {p} ({', '.join(names)})"
            for p, names in defaults.items() if len(names) > 1]


def _lint_frameworks(matrix: Matrix) -> list[str]:
    """torch.json, tensorflow.json, jax.json: each row of its own family, one per version; each variant's CUDA a
    row of the CUDA table, its nvidia pins PEP 508 requirements, its per-platform facts for platforms the release
    has wheels for."""
    problems: list[str] = []
    cuda_versions = {r.version.release[:2] for r in matrix.cuda.releases}
    for family in FAMILY_NAMES:
        seen: set[str] = set()
        for i, fw_rel in enumerate(matrix.frameworks(family)):
            where = f"{family}.json: releases[{i}]"
            if fw_rel.name != family:
                problems.append(f"{where}: name: {fw_rel.name!r} in {family}.json")
            if str(fw_rel.version) in seen:
                problems.append(f"{where}: version: duplicate row {fw_rel.version}")
            seen.add(str(fw_rel.version))
            problems += [f"{where}: python: not a version: {p!r}" for p in fw_rel.python
                         if not re.fullmatch(VERSION_PATTERN, p, re.VERBOSE | re.IGNORECASE)]
            names = [v.name for v in fw_rel.variants]
            problems += [f"{where}.variants[{j}]: name: duplicate variant {n}" for j, n in enumerate(names)
                         if n in names[:j]]
            for j, var in enumerate(fw_rel.variants):
                problems += _lint_variant(f"{where}.variants[{j}]", var, fw_rel, cuda_versions)
            problems += _lint_defaults(where, fw_rel)
    return problems


def _lint_advisories(matrix: Matrix) -> list[str]:
    """advisories.json: every advisory has its own id."""
    problems: list[str] = []
    seen: set[str] = set()
    for i, adv in enumerate(matrix.advisories.advisories):
        if adv.id in seen:
            problems.append(f"advisories.json: advisories[{i}]: id: duplicate {adv.id}")
        seen.add(adv.id)
    return problems


def sourced_rows(matrix: Matrix) -> list[tuple[str, str]]:
    """(where, source) of every row of the matrix that carries sources, with its file and dotted path."""
    rows: list[tuple[str, str]] = []
    cuda, gpus = matrix.cuda, matrix.gpus
    tables: tuple[tuple[str, list[Any]], ...] = (("cuda.json: releases", cuda.releases), ("cuda.json: minor_compat", cuda.minor_compat),
                        ("cuda.json: driver_branches", cuda.driver_branches),
                        ("cuda.json: metapackages", cuda.metapackages), ("cuda.json: jetpack", cuda.jetpack),
                        ("gpus.json: architectures", gpus.architectures), ("gpus.json: gpus", gpus.gpus),
                        ("cudnn.json: releases", matrix.cudnn.releases),
                        ("cudnn.json: gpu_floors", matrix.cudnn.gpu_floors),
                        ("extensions.json: gpu_floors", matrix.extensions.gpu_floors),
                        ("extensions.json: find_links", matrix.extensions.find_links),
                        ("extensions.json: library_choices", matrix.extensions.library_choices),
                        ("advisories.json: advisories", matrix.advisories.advisories))
    for name, items in tables:
        rows += [(f"{name}[{i}]", row.source) for i, row in enumerate(items)]
    rows += [(f"extensions.json: find_links[{i}].builds[{j}]", b.source)
             for i, pages in enumerate(matrix.extensions.find_links) for j, b in enumerate(pages.builds)]
    rows += [(f"gpus.json: architectures[{i}].min_driver_source", a.min_driver_source)
             for i, a in enumerate(gpus.architectures) if a.min_driver_source is not None]
    for family in FAMILY_NAMES:
        for i, rel in enumerate(matrix.frameworks(family)):
            where = f"{family}.json: releases[{i}]"
            rows.append((where, rel.source))
            for j, var in enumerate(rel.variants):
                rows.append((f"{where}.variants[{j}]", var.source))
                rows += [(f"{where}.variants[{j}].per_platform.{p}", f.source) for p, f in var.per_platform.items()]
    return rows


def _lint_sources(matrix: Matrix) -> list[str]:
    """Every row has a source; none rests on third-party records alone (a table on a moving branch, a paste)."""
    problems = []
    for where, source in sourced_rows(matrix):
        if not source or not source.strip():
            problems.append(f"{where}: source: empty")
        elif all_third_party(source):
            problems.append(f"{where}: source: only third-party records; add the first-party document or the "
                            f"artifact that states the same")
    return problems


# the checks :func:`lint` asks, in the order their problems are listed
LINTS: list[Callable[[Matrix], list[str]]] = [_lint_cuda, _lint_gpus, _lint_cudnn, _lint_frameworks, _lint_advisories,
                                              _lint_extension_floors, _lint_release_file_sets, _lint_find_links,
                                              _lint_library_choices, _lint_sources]
FIND_LINKS_VARIANT = lazy(r"cpu|cu\d{3}")


def is_version(text: str) -> bool:
    """Whether ``text`` is a PEP 440 version (as :class:`packaging.version.Version` reads it)."""
    try:
        Version(text)
    except InvalidVersion:
        return False
    return True


def jetpack_for_driver(matrix: Matrix, driver: str) -> JetPack | None:
    """The JetPack line whose Jetson boards report ``driver`` (nvidia-smi's "Driver Version" on the board:
    "540.4.0" is JetPack 6.1/6.2, whose driver reports CUDA 12.6 where the desktop R540 would not exist), or
    None. Matched on the driver's first two numbers ("540.4"): a Jetson Linux line keeps them."""
    try:
        key = driver_version(driver)[:2]
    except ValueError:
        return None
    return next((jp for jp in matrix.cuda.jetpack if driver_version(jp.driver)[:2] == key), None)


def cudnn_gpu_floor(matrix: Matrix, version: str | Version) -> CudnnGpuFloor | None:
    """The cap cuDNN ``version`` puts on the GPU (its kernels start at a compute capability: 7.5 from 9.11 on),
    with its sources; None when no recorded floor covers the version."""
    from packaging.specifiers import SpecifierSet

    v = Version(str(version))
    return next((f for f in matrix.cudnn.gpu_floors if SpecifierSet(f.versions).contains(v, prereleases=True)),
                None)


def on_platform(variant: Variant, platform: str) -> PlatformFacts:
    """What ``variant`` is on ``platform``: its per-platform facts where its wheels for that platform differ
    (PyPI's aarch64 torch: other SASS, no PTX; PyPI's Windows torch: the CPU build), its own fields elsewhere.
    ``pypi_default`` says whether the plain default-index wheel of that platform is this variant."""
    facts = variant.per_platform.get(platform)  # type: ignore[call-overload]
    own_default = variant.pypi_default and platform == "linux_x86_64"
    if facts is None:
        return PlatformFacts(source=variant.source, pypi_default=own_default, cuda=variant.cuda,
                             archs=variant.archs, ptx=variant.ptx, python=None)
    return PlatformFacts(source=facts.source, pypi_default=facts.pypi_default or own_default,
                         cuda=facts.cuda if facts.cuda is not None else variant.cuda,
                         archs=facts.archs if facts.archs is not None else variant.archs,
                         ptx=facts.ptx if facts.ptx is not None else variant.ptx, python=facts.python)


def default_variant(release: FrameworkRelease, platform: str) -> Variant | None:
    """The variant the plain default-index wheel of ``release`` is on ``platform`` (None: not recorded)."""
    return next((v for v in release.variants if on_platform(v, platform).pypi_default), None)


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
