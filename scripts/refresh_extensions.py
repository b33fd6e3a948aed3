#!/usr/bin/env python3
"""Read the torch extensions' releases from the package index into data/extensions.json (the sibling of
scripts/refresh_matrix.py, through the same index client: cudamatrix/matrix/index.py).

Per release of each package in :data:`PACKAGES` (from its floor on): the Python versions and platforms of its
wheels (their file names, through the JSON Simple API), the requirements its METADATA declares on torch and its
companions (PEP 658 metadata file, else the wheel's own member by HTTP range requests: nothing is downloaded
whole) with the markers of Linux x86_64 applied, and the CUDA major it is built for where the artifact says it:
the name (``cupy-cuda12x``), an ``nvidia-cuda-runtime`` requirement (``onnxruntime-gpu[cuda]``), else the
``libcublasLt.so.N`` / ``libcudart.so.N`` that its CUDA library names in its dynamic string table
(onnxruntime's CUDA provider, vLLM's ``_C``: read from the first MiB of that member, inflated; no more of the
wheel is read). vLLM's wheels are built for the CUDA of the torch build they pin, so a torch build of another
CUDA major does not load them.

Rows the index no longer lists, the ``find_links`` pages (scripts/read_pyg_builds.py), and the hand-sourced
``release_files`` rules (flash-attn), ``gpu_floors`` (the packages' own README and documentation lines) and
``library_choices`` (which per-CUDA library a package loads: its own loader code at tags), are kept
as they are. flash-attn's wheels are release files, not index entries: ``--flash-attn-clone PATH`` (a git clone of its
repository) re-reads ``release_file_sets``, the build matrix of its release workflow at each tag (``flash-attn`` alone
as PACKAGE reads the clone and not the index).
Modes: without flags, print what would change (exit 1 if anything would); ``--write``: validate the whole matrix
with the new file, then write; exit 2 when the index failed or the result does not validate.
"""
from __future__ import annotations

import argparse
import json
import re
import struct
import subprocess
import sys
import zlib
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

from packaging.markers import InvalidMarker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

from cudamatrix.matrix import discover  # noqa: E402
from cudamatrix.matrix.index import (  # noqa: E402
    IndexClient,
    IndexFile,
    IndexReadError,
    Metadata,
    _central_directory,
    pip_default_index,
    redact,
)
from cudamatrix.matrix.sources import source_record  # noqa: E402
from cudamatrix.names import canonical  # noqa: E402

DATA = ROOT / "data"

# package -> the oldest release read: mid-2024 on for vllm and xformers; sglang from its first release whose
# torch requirement is not behind an extra; the CUDA-major packages from their current line's first release
PACKAGES = {"vllm": "0.5.1", "xformers": "0.0.27", "sglang": "0.5.3", "onnxruntime-gpu": "1.18.0",
            "cupy-cuda11x": "13.0.0", "cupy-cuda12x": "13.0.0", "cupy-cuda13x": "13.6.0"}
# the distributions whose requirement a row keeps: the frameworks, their companions, and the extensions
PINNED = ("torch", "torchvision", "torchaudio", "jax", "jaxlib", "tensorflow", *PACKAGES)
# the markers a requirement is read under: the Linux x86_64 wheel, no extra asked
LINUX = {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
         "extra": ""}
# the members whose DT_NEEDED names tell the CUDA major a release is built for, first match first: onnxruntime's
# CUDA provider, vLLM's kernels (``_C``, from 0.3x the torch-stable-ABI ``_C_stable_libtorch``)
LIBRARIES = {"onnxruntime-gpu": (r"libonnxruntime_providers_cuda\.so$",),
             "vllm": (r"^vllm/_C\.[^/]*so$", r"^vllm/_C_stable_libtorch\.[^/]*so$")}
PREFIX = 1 << 20  # compressed bytes read of such a member


# --- pure readers (tested in tests/scripts/test_refresh_extensions.py) ----------------------------------------

def _parsed(requires_dist: list[str]) -> Iterator[tuple[str, Requirement]]:
    """(text, requirement) of the Requires-Dist lines that parse (a malformed one is skipped)."""
    for text in requires_dist:
        try:
            yield text, Requirement(text)
        except InvalidRequirement:
            continue


def requires_of(requires_dist: list[str], python: str) -> dict[str, str]:
    """Distribution -> the specifier its Requires-Dist states for it (``{"torch": "==2.8.0"}``; "" when it names
    no version), for the names in :data:`PINNED`, under the Linux x86_64 markers of ``python`` without extras."""
    out: dict[str, str] = {}
    env = dict(LINUX, python_version=python, python_full_version=python + ".0")
    for _text, req in _parsed(requires_dist):
        name = canonical(req.name)
        if name not in PINNED:
            continue
        try:
            if req.marker is not None and not req.marker.evaluate(env):
                continue
        except (InvalidMarker, ValueError, KeyError):
            continue
        out.setdefault(name, str(req.specifier))
    return out


def cuda_major_of_name(name: str) -> int | None:
    """``cupy-cuda12x`` -> 12; None for a name that states no CUDA major."""
    m = re.fullmatch(r"cupy-cuda(\d+)x", canonical(name))
    return int(m.group(1)) if m else None


def cuda_major_of_requires(requires_dist: list[str]) -> tuple[int, str] | None:
    """The CUDA major of the ``nvidia-cuda-runtime`` requirement (any extra; ``~=13.0`` or the ``-cu12`` name),
    with the requirement's text; None when there is none."""
    for text, req in _parsed(requires_dist):
        name = canonical(req.name)
        if not name.startswith("nvidia-cuda-runtime"):
            continue
        m = re.fullmatch(r"nvidia-cuda-runtime-cu(\d+)", name)
        if m:
            return int(m.group(1)), text
        for spec in req.specifier:
            major = re.match(r"(\d+)", spec.version)
            if major:
                return int(major.group(1)), text
    return None


def cuda_major_of_needed(prefix: bytes) -> int | None:
    """The CUDA major of the ``libcublasLt.so.N`` (else ``libcudart.so.N``) a library's string table names."""
    for lib in (rb"libcublasLt\.so\.(\d+)\x00", rb"libcudart\.so\.(\d+)\x00"):
        found = {int(m) for m in re.findall(lib, prefix)}
        if len(found) == 1:
            return found.pop()
    return None


def extension_row(name: str, version: str, files: list[IndexFile], meta: Metadata,
                  cuda: tuple[int, str] | None = None) -> dict[str, Any]:
    """One release's row: its wheels' Pythons and platforms, its requirements, its CUDA major and their sources.
    ``cuda``: (major, what states it) read by the caller where neither the name nor the METADATA says."""
    pys, plats = discover.support(files)
    records = [source_record(f"wheel file names of {name} {version} on the default index: Python {', '.join(pys)}; "
                             f"platforms {', '.join(plats)}")]
    requires = requires_of(meta.requires_dist, pys[-1] if pys else "3.12")
    said = "; ".join(f"{n}{s}" for n, s in requires.items()) or "no framework requirement"
    records.append(source_record(f"Requires-Dist of {meta.source} under Linux x86_64 markers: {said}"))
    major = cuda_major_of_name(name)
    if major is not None:
        records.append(source_record(f"the distribution name {name} states its CUDA major {major}"))
    elif (found := cuda_major_of_requires(meta.requires_dist)) is not None:
        major = found[0]
        records.append(source_record(f"Requires-Dist of {meta.source}: {found[1]} (CUDA {major})"))
    elif cuda is not None:
        major = cuda[0]
        records.append(source_record(cuda[1]))
    row: dict[str, Any] = {"name": name, "version": version, "python": pys, "platforms": plats}
    if requires:
        row["requires"] = requires
    if major is not None:
        row["cuda_major"] = major
    row["source"] = records
    return row


def merge(old: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The file with ``rows`` in place of the releases they name (read ones replace, unread ones stay), sorted
    by name and newest release first; ``release_files``, ``gpu_floors``, ``find_links`` and ``library_choices``
    kept."""
    keep = {(r["name"], r["version"]): r for r in old.get("releases", [])}
    keep.update({(r["name"], r["version"]): r for r in rows})
    out = dict(old)
    out["releases"] = sorted(keep.values(), key=lambda r: (r["name"], Version(r["version"])), reverse=True)
    out["releases"].sort(key=lambda r: list(PACKAGES).index(r["name"]) if r["name"] in PACKAGES else len(PACKAGES))
    return out


# --- the index -------------------------------------------------------------------------------------------------

def library_major(client: IndexClient, f: IndexFile, patterns: tuple[str, ...]) -> tuple[int, str] | None:
    """The CUDA major the first member matching ``patterns`` names (first MiB of the member, inflated)."""
    url = f.url.split("#")[0]
    read = client._reader(url)
    tail, total = client._range(url, None, 1 << 16)
    members = _central_directory(read, total if total >= 0 else len(tail), tail)
    for pattern in patterns:
        found = next((m for m in members if re.search(pattern, m[0])), None)
        if found is None:
            continue
        member, method, csize, off = found
        head = read(off, off + 29)
        hn, he = struct.unpack("<HH", head[26:30])
        start = off + 30 + hn + he
        raw = read(start, start + min(csize, PREFIX) - 1)
        data = zlib.decompressobj(-15).decompress(raw) if method == 8 else raw
        major = cuda_major_of_needed(data)
        if major is None:
            return None
        return major, (f"dynamic string table of {member} in {f.filename} (first MiB read): needs the CUDA "
                       f"{major} libraries (libcublasLt.so.{major} or libcudart.so.{major})")
    return None


def read_package(client: IndexClient, name: str, floor: str, log) -> list[dict[str, Any]]:
    rows = []
    for version, files in sorted(discover.releases(client.project(name)).items(), reverse=True):
        if version < Version(floor):
            continue
        f = discover.pick(files)
        if f is None:
            continue
        meta = client.metadata(f)
        cuda = None
        if name in LIBRARIES and cuda_major_of_requires(meta.requires_dist) is None:
            cuda = library_major(client, f, LIBRARIES[name])
        rows.append(extension_row(name, str(version), files, meta, cuda))
        log(f"  {name} {version}: {rows[-1].get('requires', {})} cuda {rows[-1].get('cuda_major')}")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("packages", nargs="*", help=f"default: {', '.join(PACKAGES)} (and {FLASH} with --flash-attn-clone)")
    ap.add_argument("--index-url", help="the index (default: the one pip is configured with)")
    ap.add_argument("--flash-attn-clone", type=Path, metavar="PATH",
                    help=f"a git clone of {FLASH_REPO}: re-read {FLASH}'s release files from its release workflow at "
                         f"each tag from v{FLASH_FIRST} on (release_file_sets)")
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--write", action="store_true", help="write data/extensions.json (after validation)")
    args = ap.parse_args(argv)
    unknown = [p for p in args.packages if p not in PACKAGES and p != FLASH]
    if unknown:
        ap.error(f"not a package this script reads: {', '.join(unknown)}")
    if FLASH in args.packages and args.flash_attn_clone is None:
        ap.error(f"{FLASH} is read from a clone of its repository: name it with --flash-attn-clone")

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    path = args.data / "extensions.json"
    old = json.loads(path.read_text()) if path.exists() else {"releases": []}
    indexed = [p for p in (args.packages or PACKAGES) if p in PACKAGES]
    rows: list[dict[str, Any]] = []
    try:
        if indexed:
            url = args.index_url or pip_default_index()
            client = IndexClient(url)
            log(f"index: {redact(url)}")
            rows = [r for p in indexed for r in read_package(client, p, PACKAGES[p], log)]
        sets = read_release_sets(args.flash_attn_clone, date.today().isoformat(), log) \
            if args.flash_attn_clone is not None else None
    except IndexReadError as exc:
        log(f"the index failed: {exc.message}")
        return 2
    except (OSError, subprocess.SubprocessError) as exc:
        log(f"the clone {args.flash_attn_clone} could not be read: {exc}")
        return 2
    new = merge(old, rows)
    if sets:
        new["release_file_sets"] = sets
    changed = new != old
    print(f"--- extensions.json: {'changed' if changed else 'unchanged'} ({len(new['releases'])} releases, "
          f"{len(new.get('release_file_sets', []))} release file sets)")
    if args.write and changed:
        problems = validate(args.data, new)
        if problems:
            for p in problems:
                log(f"invalid: {p}")
            log("nothing written")
            return 2
        path.write_text(dump(new))
    return 0 if args.write or not changed else 1


def dump(doc: dict[str, Any]) -> str:
    """The file's text: one row a line (small, and a refresh's diff is one line per changed release)."""
    def rows(key: str) -> str:
        return ",\n".join(json.dumps(r, ensure_ascii=False) for r in doc.get(key, []))
    floors = f',\n"gpu_floors": [\n{rows("gpu_floors")}\n]' if "gpu_floors" in doc else ""
    sets = f',\n"release_file_sets": [\n{rows("release_file_sets")}\n]' if "release_file_sets" in doc else ""
    choices = f',\n"library_choices": [\n{rows("library_choices")}\n]' if "library_choices" in doc else ""
    return f'{{"releases": [\n{rows("releases")}\n],\n"release_files": [\n{rows("release_files")}\n]{sets}{floors}' \
           f'{_find_links(doc)}{choices}}}\n'


# --- flash-attn's release files: its release workflow at each tag, read from a clone ------------------------------

FLASH = "flash-attn"
FLASH_REPO = "https://github.com/Dao-AILab/flash-attention"
FLASH_FIRST = Version("2.7.0.post2")  # the oldest tag read (the workflow's shape, matrix and excludes, is the same since)
WORKFLOW = ".github/workflows/publish.yml"
# the workflow's matrix keys -> the row's
MATRIX_KEYS = {"python-version": "python", "torch-version": "torch", "cuda-version": "cuda", "cxx11_abi": "cxx11_abi"}


def _value(key: str, text: str) -> Any:
    text = text.strip().strip("'\"")
    return text.upper() == "TRUE" if key == "cxx11_abi" else text


def workflow_matrix(text: str) -> dict[str, Any] | None:
    """The ``build_wheels`` job's strategy matrix of a release workflow: python, torch, cuda (the toolkits the
    wheels are built with), cxx11_abi (booleans) and the excludes (each the keys it names); None when the text
    has no such matrix. Only the flow lists and the exclude entries of that block are read (comments skipped)."""
    block = re.search(r"^( *)build_wheels:\n(.*?)(?=^\1\S|\Z)", text, re.M | re.S)
    matrix = re.search(r"^( *)matrix:\n(.*?)(?=^ *steps:|\Z)", block.group(2), re.M | re.S) if block else None
    if matrix is None:
        return None
    out: dict[str, Any] = {"exclude": []}
    for line in matrix.group(2).splitlines():
        line = line.split("#")[0].rstrip()
        flow = re.fullmatch(r" *([\w-]+): *\[(.*)\]", line)
        item = re.fullmatch(r" *(- )? *([\w-]+): *(\S+)", line)
        if flow and flow.group(1) in MATRIX_KEYS:
            key = MATRIX_KEYS[flow.group(1)]
            out[key] = [_value(key, v) for v in flow.group(2).split(",") if v.strip()]
        elif item and item.group(2) in MATRIX_KEYS:
            if item.group(1) or not out["exclude"]:
                out["exclude"].append({})
            key = MATRIX_KEYS[item.group(2)]
            out["exclude"][-1][key] = _value(key, item.group(3))
    return out if all(k in out for k in MATRIX_KEYS.values()) else None


def release_set_row(version: str, commit: str, matrix: dict[str, Any], read: str) -> dict[str, Any]:
    """One flash-attn release's row: the files its release workflow builds at the tag's commit."""
    said = "; ".join(f"{k} {', '.join(str(v) for v in matrix[k])}" for k in MATRIX_KEYS.values())
    gone = "; ".join(", ".join(f"{k} {v}" for k, v in e.items()) for e in matrix["exclude"]) or "none"
    states = (f"build_wheels matrix (os ubuntu, bdist_wheel: linux_x86_64): {said}; exclude: {gone}; each wheel "
              f"is renamed +cu{{major of cuda}}torch{{major.minor of torch}}cxx11abi{{cxx11_abi}} and uploaded to the "
              f"release v{version}")
    row: dict[str, Any] = {"name": FLASH, "version": version, "python": matrix["python"], "torch": matrix["torch"],
                           "cuda": matrix["cuda"], "cxx11_abi": matrix["cxx11_abi"], "platforms": ["linux_x86_64"]}
    if matrix["exclude"]:
        row["exclude"] = matrix["exclude"]
    row["source"] = [{"url": f"{FLASH_REPO}/blob/{commit}/{WORKFLOW}", "states": states, "read": read,
                      "kind": "first_party"}]
    return row


def _git(clone: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(clone), *args], capture_output=True, text=True, check=True,
                          timeout=60).stdout


def read_release_sets(clone: Path, read: str, log) -> list[dict[str, Any]]:
    """flash-attn's release rows from a clone of its repository: per tag ``vX`` from :data:`FLASH_FIRST` on, the
    release workflow at that tag (a tag whose workflow has no readable matrix is logged and left out)."""
    rows = []
    for tag in _git(clone, "tag", "--list", "v*").split():
        try:
            version = Version(tag[1:])
        except InvalidVersion:
            continue
        if version < FLASH_FIRST:
            continue
        commit = _git(clone, "rev-list", "-n", "1", tag).strip()
        try:
            matrix = workflow_matrix(_git(clone, "show", f"{commit}:{WORKFLOW}"))
        except subprocess.CalledProcessError:
            matrix = None
        if matrix is None:
            log(f"  {FLASH} {tag}: no build matrix in {WORKFLOW}: left out")
            continue
        rows.append(release_set_row(tag[1:], commit, matrix, read))
        log(f"  {FLASH} {tag}: torch {', '.join(matrix['torch'])}; cuda {', '.join(matrix['cuda'])}")
    return sorted(rows, key=lambda r: Version(r["version"]), reverse=True)


def _find_links(doc: dict[str, Any]) -> str:
    """The ``find_links`` key's text (kept as read by scripts/read_pyg_builds.py): each page family on a line,
    its builds one a line; "" when the file has none."""
    if "find_links" not in doc:
        return ""
    parts = []
    for pages in doc["find_links"]:
        head = json.dumps({k: v for k, v in pages.items() if k != "builds"}, ensure_ascii=False)
        builds = ",\n".join(json.dumps(b, ensure_ascii=False) for b in pages.get("builds", []))
        parts.append(f'{head[:-1]}, "builds": [\n{builds}\n]}}')
    return ',\n"find_links": [\n' + ",\n".join(parts) + "\n]"


def validate(data: Path, doc: dict[str, Any]) -> list[str]:
    """Problems of the whole matrix with ``doc`` as its extensions.json (empty: it validates)."""
    from cudamatrix.errors import DataError
    from cudamatrix.matrix.data import FILES, validate_files

    raws = {n: (json.dumps(doc).encode() if n == "extensions" else (data / f"{n}.json").read_bytes()) for n in FILES}
    try:
        validate_files(raws)
    except DataError as exc:
        return [exc.message]
    return []


if __name__ == "__main__":
    sys.exit(main())
