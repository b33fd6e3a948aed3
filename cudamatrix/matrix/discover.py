"""Discovery: framework, cuDNN and CUDA releases read from a package index, as matrix rows.

The index lists every wheel (:mod:`cudamatrix.matrix.index`); the wheel names give each release's
Python versions and platforms, and the wheels' METADATA gives the CUDA pins (``nvidia-*``,
``cuda-toolkit[...]``, ``cuda-bindings``), the companion pairing and the JAX plugin floors. Rows are
plain dicts in the shape of ``data/*.json``; the refresh script merges them into the shipped data and
``cudamatrix matrix update`` keeps the releases the shipped data lacks as the user's overlay.

The pure functions come first (tested on hand-made listings), then one builder per family that takes
an object with ``project(name)`` and ``metadata(file)`` (an :class:`~cudamatrix.matrix.index.IndexClient`).
"""
from __future__ import annotations

import re
from typing import AbstractSet, Any, Callable, Iterable, Protocol

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from cudamatrix.matrix.index import IndexFile, Metadata
from cudamatrix.matrix.sources import source_record

PYTHONS = ("3.6", "3.7", "3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.14", "3.15")
# the distributions whose pins decide which CUDA user-space a framework wheel loads
CUDA_DISTS = re.compile(r"^(nvidia-.*|cuda-toolkit|cuda-bindings)$")

Log = Callable[[str], None]


class Index(Protocol):
    def project(self, name: str) -> list[IndexFile]: ...

    def metadata(self, f: IndexFile) -> Metadata: ...


# --- wheel tags -------------------------------------------------------------------------------------

def platform_of(tag: str) -> list[str]:
    """A wheel platform tag -> the matrix's platform names (empty for ones the matrix does not model)."""
    if tag == "any":
        return []
    if tag.endswith("x86_64") and ("linux" in tag):
        return ["linux_x86_64"]
    if tag.endswith("aarch64") and "linux" in tag:
        return ["linux_aarch64"]
    if tag == "win_amd64":
        return ["win_amd64"]
    if tag.startswith("macosx_"):
        if tag.endswith("universal2"):
            return ["macos_arm64", "macos_x86_64"]
        if tag.endswith("arm64"):
            return ["macos_arm64"]
        if tag.endswith("x86_64") or tag.endswith("intel"):
            return ["macos_x86_64"]
    return []


def pythons_of(f: IndexFile) -> set[str]:
    """Python versions a wheel installs on: its ``cpXY`` tags, or its Requires-Python for abi3/py3 wheels."""
    out: set[str] = set()
    generic = False
    for tag in f.pythons:
        m = re.fullmatch(r"cp(\d)(\d+)", tag)
        if m and "abi3" not in f.abis:
            out.add(f"{m.group(1)}.{m.group(2)}")
        else:
            generic = True
    if generic:
        spec = _spec(f.requires_python)
        floor = min((Version(f"{m.group(1)}.{m.group(2)}") for t in f.pythons
                     if (m := re.fullmatch(r"cp(\d)(\d+)", t))), default=Version("3.0"))
        out.update(p for p in PYTHONS if Version(p) >= floor and (spec is None or spec.contains(p + ".0")))
    return out


def _spec(text: str | None) -> SpecifierSet | None:
    try:
        return SpecifierSet(text) if text else None
    except InvalidSpecifier:
        return None


def releases(files: Iterable[IndexFile], final_only: bool = True) -> dict[Version, list[IndexFile]]:
    """Wheels grouped by release: yanked files and (by default) pre-, dev- and local releases left out."""
    out: dict[Version, list[IndexFile]] = {}
    for f in files:
        if f.yanked or (final_only and (f.version.is_prerelease or f.version.is_devrelease or f.version.local)):
            continue
        out.setdefault(f.version, []).append(f)
    return out


def support(files: Iterable[IndexFile]) -> tuple[list[str], list[str]]:
    """(Python versions, platforms) of one release, sorted."""
    files = list(files)
    pys = set().union(*(pythons_of(f) for f in files)) if files else set()
    plats = {p for f in files for tag in f.platforms for p in platform_of(tag)}
    return sorted(pys, key=Version), sorted(plats)


def pick(files: Iterable[IndexFile], platform: str = "linux_x86_64") -> IndexFile | None:
    """The wheel whose METADATA stands for the release on ``platform``: the newest regular CPython build
    (free-threaded ``cp3XXt`` builds last), or a pure wheel."""
    best = None
    for f in files:
        plats = {p for tag in f.platforms for p in platform_of(tag)}
        if platform not in plats and "any" not in f.platforms:
            continue
        free = any(a.endswith("t") and a.startswith("cp") for a in f.abis)
        py = max((Version(p) for p in pythons_of(f)), default=Version("0"))
        key = (not free, "any" not in f.platforms, py)
        if best is None or key > best[0]:
            best = (key, f)
    return best[1] if best else None


# --- Requires-Dist ----------------------------------------------------------------------------------

def _extra_re(extra: str) -> re.Pattern:
    return re.compile(r"extra\s*==\s*['\"]" + re.escape(extra) + r"['\"]")


def drop_extra(marker: str, extra: str) -> str:
    """The marker without its ``extra == "x"`` clause (the environment part kept)."""
    clause = _extra_re(extra).pattern
    out = re.sub(r"\s+and\s+" + clause, "", marker)
    out = re.sub(clause + r"\s+and\s+", "", out)
    out = re.sub(clause, "", out).strip()
    if out.startswith("(") and out.endswith(")") and out.count("(") == 1:
        out = out[1:-1].strip()
    return "" if out in ("", "()") else out


def cuda_pins(requires_dist: Iterable[str], extra: str | None = None) -> list[str]:
    """Every CUDA requirement of a wheel (``nvidia-*``, ``cuda-toolkit[...]``, ``cuda-bindings``) as PEP 508
    text with its marker; with ``extra``, that extra's lines without the extra clause, else no extra's lines."""
    out = []
    for line in requires_dist:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if not CUDA_DISTS.match(req.name.lower()):
            continue
        marker = str(req.marker) if req.marker else ""
        in_extra = re.search(r"\bextra\s*==", marker) is not None
        if extra is None and in_extra:
            continue
        if extra is not None:
            if not _extra_re(extra).search(marker):
                continue
            marker = drop_extra(marker, extra)
        extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
        text = f"{req.name}{extras}{req.specifier}"
        out.append(f"{text}; {marker}" if marker else text)
    return out


def _version_of(req: Requirement) -> tuple[str, str] | None:
    """('==' or '>=', version) of a requirement's exact pin or floor."""
    for op in ("==", "===", ">="):
        for s in req.specifier:
            if s.operator == op:
                return ("==" if op != ">=" else ">="), s.version.rstrip(".*")
    return None


def cuda_of(pins: Iterable[str]) -> str | None:
    """The CUDA "major.minor" a pin set means: the runtime's (or cuda-toolkit's) exact version or floor."""
    for pin in pins:
        req = Requirement(pin)
        if re.fullmatch(r"nvidia-cuda-runtime(-cu\d+)?|cuda-toolkit", req.name.lower()):
            got = _version_of(req)
            if got:
                return ".".join(got[1].split(".")[:2])
    return None


def cudnn_of(pins: Iterable[str]) -> str | None:
    """The cuDNN version of an ``nvidia-cudnn-cuXX`` pin (exact) or its floor."""
    for pin in pins:
        req = Requirement(pin)
        if re.fullmatch(r"nvidia-cudnn-cu\d+", req.name.lower()):
            got = _version_of(req)
            if got:
                return got[1]
    return None


def requirement_of(requires_dist: Iterable[str], name: str) -> SpecifierSet | None:
    """The specifier of the unconditional requirement on ``name`` (None when the wheel names none)."""
    for line in requires_dist:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.name.lower() == name.lower() and not (req.marker and "extra" in str(req.marker)):
            return req.specifier
    return None


def pair(parents: Iterable[str], companions: dict[str, SpecifierSet | None]) -> dict[str, tuple[str, str]]:
    """{parent version: (companion version, rule)} by each companion's own requirement on the parent.

    The newest companion whose specifier admits the parent wins. A companion that names no requirement on
    the parent is paired with the parent of the same version only (the rule every earlier torchaudio 2.x
    follows by pinning ``torch==`` its own version), and the rule says so.
    """
    out: dict[str, tuple[str, str]] = {}
    ordered = sorted(companions, key=Version, reverse=True)
    for parent in parents:
        for comp in ordered:
            spec = companions[comp]
            if spec is not None and len(spec) and spec.contains(parent, prereleases=True):
                out[parent] = (comp, f"its Requires-Dist admits torch {parent} ({spec})")
                break
        else:
            if parent in companions and not ((own := companions[parent]) is not None and len(own)):
                out[parent] = (parent, "it declares no torch requirement; paired by equal version, the rule "
                                       "every earlier release of it follows with a torch==<own version> pin")
    return out


# --- builders ---------------------------------------------------------------------------------------

def _src(meta: Metadata, what: str = "") -> list[dict[str, Any]]:
    return [source_record(f"index listing and wheel METADATA ({meta.source}){what}")]


def torch_rows(index: Index, log: Log, read_version_py: Callable[[IndexFile], str | None] | None = None,
               only: set[str] | None = None, skip_companions: AbstractSet[str] = frozenset()) -> list[dict[str, Any]]:
    """torch releases with their default-index variant and torchvision/torchaudio pairings.

    ``only``: just these torch releases. ``skip_companions``: companion releases already paired elsewhere
    (their METADATA is not read again)."""
    rels = releases(index.project("torch"))
    versions = [str(v) for v in sorted(rels, reverse=True) if only is None or str(v) in only]
    comps: dict[str, dict[str, tuple[str, str]]] = {}
    for comp in ("torchvision", "torchaudio"):
        specs: dict[str, SpecifierSet | None] = {}
        for cv, cfiles in releases(index.project(comp)).items():
            if str(cv) in skip_companions:
                continue
            f = pick(cfiles)
            if f is not None:
                specs[str(cv)] = requirement_of(index.metadata(f).requires_dist, "torch")
        comps[comp] = pair(versions, specs)
        log(f"  {comp}: {len(specs)} releases, {len(comps[comp])} pairings")
    rows = []
    for v in versions:
        files = rels[Version(v)]
        pys, plats = support(files)
        row: dict[str, Any] = {"name": "torch", "version": v, "python": pys, "platforms": plats,
                               "source": [source_record("index listing of torch (wheel tags)")], "notes": []}
        pairing = {c: comps[c][v] for c in comps if v in comps[c]}
        if pairing:
            row["companions"] = {c: p[0] for c, p in pairing.items()}
            row["notes"] += [f"{c} {p[0]} pairs with torch {v}: {p[1]}" for c, p in pairing.items()]
        f = pick(files)
        if f is not None:
            meta = index.metadata(f)
            pins = cuda_pins(meta.requires_dist)
            cuda = cuda_of(pins)
            source = _src(meta)
            if cuda is None and read_version_py is not None:
                cuda = parse_torch_version_py(read_version_py(f) or "")["cuda"]
                source.append(source_record(f"torch/version.py read from {f.filename}"))
            if cuda:
                tag = "cu" + cuda.replace(".", "")
                row["default"] = {"name": tag, "cuda": cuda, "cudnn": cudnn_of(pins), "nvidia_pins": pins,
                                  "local_version": "+" + tag, "source": source}
        log(f"  torch {v}: python {pys} default {row.get('default', {}).get('name')}")
        rows.append(row)
    return rows


def parse_torch_version_py(text: str) -> dict[str, str | None]:
    """``torch/version.py`` -> {"version": "2.5.1+cu124", "cuda": "12.4"} (cuda None for CPU builds)."""
    out: dict[str, str | None] = {}
    for key, name in (("version", "__version__"), ("cuda", "cuda")):
        m = re.search(rf"^{name}\s*(?::\s*[^=]+)?=\s*['\"]([^'\"]+)['\"]", text, re.M)
        out[key] = m.group(1) if m else None
    return out


def tensorflow_rows(index: Index, log: Log, read_build_info: Callable[[IndexFile], str | None] | None = None,
                    only: set[str] | None = None) -> list[dict[str, Any]]:
    """tensorflow releases: Pythons, platforms, the ``and-cuda`` pins, build_info's CUDA/archs, tensorflow-cpu."""
    rels = releases(index.project("tensorflow"))
    cpu = {str(v) for v in releases(index.project("tensorflow-cpu"))}
    rows = []
    for ver in sorted(rels, reverse=True):
        v = str(ver)
        if only is not None and v not in only:
            continue
        pys, plats = support(rels[ver])
        row: dict[str, Any] = {"name": "tensorflow", "version": v, "python": pys, "platforms": plats,
                               "source": [source_record("index listing of tensorflow (wheel tags)")]}
        if v in cpu:
            row["companions"] = {"tensorflow-cpu": v}
        f = pick(rels[ver])
        if f is not None:
            meta = index.metadata(f)
            pins = cuda_pins(meta.requires_dist, extra="and-cuda")
            variant: dict[str, Any] = {"name": "and-cuda" if pins else "gpu", "source": _src(meta),
                                       "nvidia_pins": pins, "cudnn": cudnn_of(pins), "cuda": cuda_of(pins),
                                       "pip_extra": "and-cuda" if pins else None}
            if read_build_info is not None:
                info = parse_tf_build_info(read_build_info(f) or "")
                if info["cuda"]:
                    variant.update(cuda=info["cuda"], archs=info["archs"], ptx=info["ptx"])
                    # build_info names the cuDNN major only ("8"): a published "8.1" is not replaced by it
                    if not variant["cudnn"] and info["cudnn"] and "." in info["cudnn"]:
                        variant["cudnn"] = info["cudnn"]
                    variant["source"].append(
                        source_record(f"tensorflow/python/platform/build_info.py read from {f.filename}"))
            if variant["cuda"] or pins:
                row["variants"] = [variant]
        log(f"  tensorflow {v}: python {pys} cuda {row.get('variants', [{}])[0].get('cuda')}")
        rows.append(row)
    return rows


def parse_tf_build_info(text: str) -> dict[str, Any]:
    """TensorFlow's ``build_info.py`` -> {"cuda", "cudnn", "archs" (sm_XX), "ptx" (compute_XX)}."""
    def field_(key: str) -> str | None:
        m = re.search(rf"['\"]{key}['\"]\s*,\s*['\"]([^'\"]*)['\"]", text)
        return m.group(1) if m and m.group(1) else None

    caps: list[str] = []
    m = re.search(r"['\"]cuda_compute_capabilities['\"]\s*,\s*\[([^\]]*)\]", text)
    if m:
        caps = re.findall(r"['\"]([^'\"]+)['\"]", m.group(1))
    caps = [c for c in caps if re.fullmatch(r"(sm_|compute_)?\d{2,3}[af]?", c)]  # a wheel's text: other forms left out
    return {"cuda": field_("cuda_version"), "cudnn": field_("cudnn_version"),
            "archs": [cc_of(c) for c in caps if not c.startswith("compute_")],
            "ptx": [cc_of(c) for c in caps if c.startswith("compute_")]}


def cc_of(tag: str) -> str:
    """"sm_90a" / "compute_80" / "90" -> "9.0a" / "8.0" / "9.0"."""
    digits = re.sub(r"^(sm_|compute_)", "", tag)
    suffix = digits[-1] if digits[-1] in "af" else ""
    digits = digits.rstrip("af")
    return f"{digits[:-1]}.{digits[-1]}{suffix}"


def jax_rows(index: Index, log: Log, only: set[str] | None = None) -> list[dict[str, Any]]:
    """jax releases: jaxlib pairing from jax's own pin, the cuda12/cuda13 plugin variants and their pins."""
    rels = releases(index.project("jax"))
    jaxlib = releases(index.project("jaxlib"))
    plugins = {m: releases(index.project(f"jax-cuda{m}-plugin")) for m in ("12", "13")}
    rows = []
    for ver in sorted(rels, reverse=True):
        v = str(ver)
        if only is not None and v not in only:
            continue
        pys, plats = support(jaxlib.get(ver, []) or rels[ver])
        row: dict[str, Any] = {"name": "jax", "version": v, "python": pys, "platforms": plats,
                               "source": [source_record("index listing of jaxlib (wheel tags)")],
                               "variants": [{"name": "cpu", "source": [source_record(
                                   "jaxlib wheels on the index (the default jaxlib is the CPU build)")]}]}
        companion = _jaxlib_of(index, rels[ver], ver, jaxlib)
        if companion:
            row["companions"] = {"jaxlib": companion}
        for major, rel in plugins.items():
            variant = _jax_plugin_variant(index, major, rel.get(ver, []), v)
            if variant is not None:
                row["variants"].append(variant)
        log(f"  jax {v}: {[x['name'] for x in row['variants']]}")
        rows.append(row)
    return rows


def _jaxlib_of(index: Index, files: list, ver, jaxlib: dict) -> str | None:
    """The jaxlib a jax release pairs with: its own version when jax's pin admits it, else the newest jaxlib the
    pin admits (jax's METADATA); None without a jax wheel or a matching jaxlib."""
    f = pick(files)
    if f is None:
        return None
    spec = requirement_of(index.metadata(f).requires_dist, "jaxlib")
    if ver in jaxlib and (spec is None or spec.contains(ver)):
        return str(ver)
    libs = [str(x) for x in sorted(jaxlib, reverse=True) if spec is None or spec.contains(x)]
    return libs[0] if libs else None


def _jax_plugin_variant(index: Index, major: str, files: list, v: str) -> dict[str, Any] | None:
    """The cudaNN variant of a jax release from its jax-cudaNN-plugin wheel: the with-cuda extra's nvidia-* pins
    (cuda and cudnn are their floors), the plugin and pjrt wheels to install; None without a plugin wheel."""
    pf = pick(files)
    if pf is None:
        return None
    meta = index.metadata(pf)
    pins = cuda_pins(meta.requires_dist, extra="with-cuda")
    pjrt = requirement_of(meta.requires_dist, f"jax-cuda{major}-pjrt")
    extra = [f"jax-cuda{major}-plugin=={v}"]
    exact = [s.version for s in (pjrt or []) if s.operator == "=="]
    if exact:
        extra.append(f"jax-cuda{major}-pjrt=={exact[0]}")
    return {"name": f"cuda{major}", "pip_extra": f"cuda{major}", "nvidia_pins": pins,
            "cuda": cuda_of(pins), "cudnn": cudnn_of(pins), "extra_packages": extra,
            "platforms": sorted({p for f in files for t in f.platforms for p in platform_of(t)}),
            "source": _src(meta, " (the with-cuda extra; cuda and cudnn are its floors)")}


def cudnn_releases(index: Index) -> dict[str, dict[str, list[str]]]:
    """{cuDNN "major.minor.patch": {"nvidia-cudnn-cu12": [wheel versions], ...}} of final releases."""
    out: dict[str, dict[str, list[str]]] = {}
    for dist in ("nvidia-cudnn-cu11", "nvidia-cudnn-cu12", "nvidia-cudnn-cu13"):
        for v in releases(index.project(dist)):
            key = ".".join(str(x) for x in v.release[:3])
            out.setdefault(key, {}).setdefault(dist, []).append(str(v))
    return out


def cuda_minors(index: Index) -> dict[str, list[str]]:
    """{CUDA "major.minor": [versions]} from nvidia-cuda-runtime(-cu12) and cuda-toolkit."""
    out: dict[str, list[str]] = {}
    for dist in ("nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime", "cuda-toolkit"):
        for v in releases(index.project(dist)):
            out.setdefault(f"{v.major}.{v.minor}", []).append(f"{dist}=={v}")
    return out
