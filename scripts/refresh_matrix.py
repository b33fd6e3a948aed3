#!/usr/bin/env python3
"""Discover releases on the package index and merge them into the matrix (data/torch.json, tensorflow.json,
jax.json); list the cuDNN and CUDA releases the matrix lacks.

Everything is read from the index pip uses (``--index-url``, else ``PIP_INDEX_URL`` / pip.conf as
``pip config list`` prints them, else pip's built-in default), through :mod:`cudamatrix.matrix.index`:

* the releases and their wheels: the JSON Simple API (PEP 691); Python versions and platforms from the
  wheel tags;
* Requires-Dist (every CUDA pin: ``nvidia-*``, ``cuda-toolkit[...]``, ``cuda-bindings``; torchvision's and
  torchaudio's own torch requirement; jax's jaxlib pin; the JAX plugins' ``with-cuda`` floors): the PEP 658
  metadata file where the index publishes one, else the wheel's METADATA by HTTP range requests;
* the default torch wheel's CUDA where no pin says it: ``torch/version.py``; TensorFlow's CUDA and compute
  capabilities: ``tensorflow/python/platform/build_info.py`` (single members, range requests).

Facts that only published tables carry (non-default torch variants, their archs and cuDNN, JAX's documented
driver floors) are kept from data/ as they are. Modes: without flags, print what would change (exit 1 if
anything would); ``--check``: list releases on the index the matrix lacks (exit 1 if any, 0 if none);
``--write``: merge, validate the result with the matrix's pydantic models, then write. Exit 2: the index
failed or the merged data does not validate (nothing written).

The index client and the row builders live in the package (cudamatrix/matrix/index.py, discover.py), shared
with ``cudamatrix matrix update``; this script merges, diffs and writes. Pure functions first (tested in
tests/scripts/test_refresh_matrix.py), then the I/O (every request has a timeout), then the CLI.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Iterable

from packaging.version import InvalidVersion, Version

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

from cudamatrix.matrix import discover  # noqa: E402
from cudamatrix.matrix.index import IndexClient, IndexReadError, pip_default_index, redact  # noqa: E402
from cudamatrix.matrix.merge import inherit, merge_release  # noqa: E402,F401  (tested here)

DATA = ROOT / "data"


# --- merging (pure) ------------------------------------------------------------------------------

def merge_file(old: dict[str, Any], rows: list[dict[str, Any]], keep_unlisted: bool = True) -> dict[str, Any]:
    """Merge artifact rows into a whole ``{"releases": [...]}`` document, newest release first."""
    by_version = {r["version"]: r for r in old.get("releases", [])}
    out = dict(by_version) if keep_unlisted else {}
    for art in rows:
        known = by_version.get(art["version"])
        out[art["version"]] = merge_release(known, art)
        if known is None:
            out[art["version"]] = inherit(out[art["version"]], by_version.values())
    return {"releases": sorted(out.values(), key=lambda r: _vkey(r["version"]), reverse=True)}


def _vkey(v: str) -> Version:
    try:
        return Version(v)
    except InvalidVersion:
        return Version("0")


def diff_files(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Human-readable changes between two framework documents: "+ 2.6.0", "~ 2.5.1 cu124.nvidia_pins"."""
    lines: list[str] = []
    a = {r["version"]: r for r in old.get("releases", [])}
    b = {r["version"]: r for r in new.get("releases", [])}
    for v in sorted(set(a) | set(b), key=_vkey):
        if v not in a:
            lines.append(f"+ {v} (new release)")
        elif v not in b:
            lines.append(f"- {v} (gone)")
        else:
            lines.extend(f"~ {v} {path}: {x!r} -> {y!r}" for path, x, y in _walk(a[v], b[v], ""))
    return lines


def _walk(x: Any, y: Any, path: str) -> Iterable[tuple[str, Any, Any]]:
    if isinstance(x, dict) and isinstance(y, dict):
        for k in sorted(set(x) | set(y)):
            yield from _walk(x.get(k), y.get(k), f"{path}.{k}" if path else k)
    elif (isinstance(x, list) and isinstance(y, list) and x and y
          and all(isinstance(i, dict) and "name" in i for i in x + y)):
        xa, ya = {i["name"]: i for i in x}, {i["name"]: i for i in y}
        for k in list(xa) + [k for k in ya if k not in xa]:
            yield from _walk(xa.get(k), ya.get(k), f"{path}[{k}]")
    elif x != y:
        yield path, x, y


# --- the index -----------------------------------------------------------------------------------

def _members(client):
    """Readers of single wheel members (range requests), for torch/version.py and build_info.py."""
    def read(f, suffix):
        try:
            got = client.member(f, suffix)
        except IndexReadError:
            return None
        return got[1].decode("utf-8", "replace") if got else None
    return (lambda f: read(f, "torch/version.py"),
            lambda f: read(f, "tensorflow/python/platform/build_info.py"))


def discovered_versions(client, fw: str) -> list[str]:
    """Final releases of one framework on the index (jax: those with a jaxlib build)."""
    if fw == "jax":
        have = {str(v) for v in discover.releases(client.project("jaxlib"))}
        return [str(v) for v in discover.releases(client.project("jax")) if str(v) in have]
    return [str(v) for v in discover.releases(client.project(fw))]


def missing_releases(in_matrix: Iterable[str], on_index: Iterable[str]) -> list[str]:
    """Releases on the index that the matrix lacks, newest first; releases older than the matrix's oldest
    row are out of its scope and not listed."""
    have = {Version(v) for v in in_matrix}
    floor = min(have, default=Version("0"))
    return [str(v) for v in sorted({Version(v) for v in on_index}, reverse=True) if v not in have and v >= floor]


def _mm(version: str) -> str:
    return ".".join(version.split(".")[:2])


def missing_cudnn(cudnn_doc: dict[str, Any], on_index: Iterable[str], pinned: Iterable[str]) -> list[str]:
    """cuDNN releases without a row (rows stand for their major.minor): those the framework rows pin, and
    those on the index newer than the newest row."""
    rows = [r["version"] for r in cudnn_doc.get("releases", [])]
    have = {_mm(v) for v in rows}
    newest = max((Version(v) for v in rows), default=Version("0"))
    want = {v for v in on_index if Version(v) > newest and _mm(v) not in have}
    want |= {".".join(v.split(".")[:3]) for v in pinned if _mm(v) not in have}
    newest_per_minor: dict[str, str] = {}
    for v in sorted(want, key=Version):
        newest_per_minor[_mm(v)] = v
    return sorted(newest_per_minor.values(), key=Version, reverse=True)


def pinned_cudnn(docs: Iterable[dict[str, Any]]) -> set[str]:
    """Every exact cuDNN version a framework variant names (its ``cudnn`` field with 3+ parts)."""
    return {v["cudnn"] for d in docs for r in d.get("releases", []) for v in r.get("variants", [])
            if v.get("cudnn") and len(v["cudnn"].split(".")) >= 3}


def missing_cuda(cuda_doc: dict[str, Any], on_index: dict[str, list[str]]) -> list[str]:
    """CUDA minors on the index without a row, or whose row lacks a Linux driver floor."""
    rows = {".".join(r["version"].split(".")[:2]): r for r in cuda_doc.get("releases", [])}
    return sorted((m for m in on_index if m not in rows or not rows[m].get("linux_min_driver")),
                  key=Version, reverse=True)


def validate_docs(data: Path, new: dict[str, dict[str, Any]]) -> list[str]:
    """Validate the whole matrix with ``new`` documents in place of their files. Returns problems."""
    from cudamatrix.errors import DataError
    from cudamatrix.matrix.data import FILES, validate_files
    from cudamatrix.matrix.query import lint

    raws = {n: (json.dumps(new[n]).encode() if n in new else (data / f"{n}.json").read_bytes()) for n in FILES}
    try:
        matrix = validate_files(raws)
    except DataError as exc:
        return [exc.message]
    return lint(matrix)


def build(client, fw: str, only: set[str] | None, log) -> list[dict[str, Any]]:
    version_py, build_info = _members(client)
    if fw == "torch":
        return discover.torch_rows(client, log, version_py, only)
    if fw == "tensorflow":
        return discover.tensorflow_rows(client, log, build_info, only)
    return discover.jax_rows(client, log, only)


FAMILIES = ("torch", "tensorflow", "jax")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("frameworks", nargs="*", choices=[*FAMILIES, []], help="default: all three")
    ap.add_argument("--index-url", help="the index (default: the one pip is configured with)")
    ap.add_argument("--versions", nargs="*", help="only these releases (default: every release on the index)")
    ap.add_argument("--data", type=Path, default=DATA)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="list releases on the index the matrix lacks")
    mode.add_argument("--write", action="store_true", help="write the merged files (after validation)")
    args = ap.parse_args(argv)
    args.frameworks = args.frameworks or list(FAMILIES)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    try:
        url = args.index_url or pip_default_index()
        client = IndexClient(url)
        log(f"index: {redact(url)}")
        if args.check:
            return check(client, args.data, args.frameworks)
        return refresh(client, args, log)
    except IndexReadError as exc:
        log(f"the index failed: {exc.message}")
        return 2


def check(client, data: Path, frameworks: list[str]) -> int:
    """Print the releases on the index that data/ lacks; 1 if there are any."""
    lacking = 0
    for fw in frameworks:
        doc = json.loads((data / f"{fw}.json").read_text())
        gone = missing_releases([r["version"] for r in doc["releases"]], discovered_versions(client, fw))
        lacking += len(gone)
        print(f"{fw}: {len(gone)} release(s) on the index not in the matrix" + (": " + ", ".join(gone) if gone else ""))
    docs = [json.loads((data / f"{fw}.json").read_text()) for fw in FAMILIES]
    cudnn = missing_cudnn(json.loads((data / "cudnn.json").read_text()), discover.cudnn_releases(client),
                          pinned_cudnn(docs))
    cuda = missing_cuda(json.loads((data / "cuda.json").read_text()), discover.cuda_minors(client))
    print(f"cudnn: {len(cudnn)} release(s) not in the matrix" + (": " + ", ".join(cudnn) if cudnn else ""))
    print(f"cuda: {len(cuda)} minor release(s) without a row or a driver floor" + (": " + ", ".join(cuda) if cuda else ""))
    return 1 if lacking or cudnn or cuda else 0


def refresh(client, args, log) -> int:
    new_docs: dict[str, dict[str, Any]] = {}
    changed = False
    for fw in args.frameworks:
        path = args.data / f"{fw}.json"
        old = json.loads(path.read_text()) if path.exists() else {"releases": []}
        if args.versions:
            only = set(args.versions)
        else:  # the matrix's scope: its oldest release and everything newer on the index
            floor = min((Version(r["version"]) for r in old["releases"]), default=Version("0"))
            only = {v for v in discovered_versions(client, fw) if Version(v) >= floor}
        rows = build(client, fw, only, log)
        new = merge_file(old, rows)
        lines = diff_files(old, new)
        print(f"--- {fw}.json: {len(lines)} change(s)")
        for line in lines:
            print(line)
        if lines:
            changed = True
            new_docs[fw] = new
    if args.write and new_docs:
        problems = validate_docs(args.data, new_docs)
        if problems:
            for p in problems:
                log(f"invalid: {p}")
            log("nothing written")
            return 2
        for fw, doc in new_docs.items():
            (args.data / f"{fw}.json").write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    return 0 if args.write or not changed else 1


if __name__ == "__main__":
    sys.exit(main())
