#!/usr/bin/env python3
"""Read, from the wheels themselves, how each CUDA library family opens the libraries it does not link, and
print (or write) ``data/loaders.json``.

For every release of the cuDNN wheels (``nvidia-cudnn-cu11/12/13``) and of the NVRTC wheels on the index, the
opener's file is read out of the wheel by HTTP range requests (no wheel is downloaded whole) and its dynamic
section and strings give: the search path its own ``dlopen`` calls use (DT_RPATH or DT_RUNPATH, and what it
says), the names it opens, and whether it forms versioned names (cuDNN 9 tries ``name.so.X.Y.Z``,
``name.so.X.Y``, ``name.so.X`` then ``name.so``: the ``%s.%d.%d.%d`` formats next to the names). Releases with
the same facts are grouped into one row, which lists every release read (``checked``). Families read from one
installed wheel (``--site``, a site-packages holding the nvidia-* wheels torch installs) and framework files
named on the command line complete the table; experiments that loaded two real copies are cited from the
tests that repeat them.

    python scripts/probe_loaders.py [--index-url URL] [--cache DIR] [--site SITE ...] [--write]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from packaging.version import Version  # noqa: E402

from cudamatrix.ldso import elf  # noqa: E402
from cudamatrix.matrix import discover  # noqa: E402
from cudamatrix.matrix.index import IndexClient, IndexReadError, pip_default_index  # noqa: E402

# the order a framework's first calls open them: cudnnGetVersion opens the graph library, every other
# sub-library needs it (DT_NEEDED), so it comes first (see tests/ldso/test_openers.py)
ORDER = ["graph", "ops", "cnn", "adv", "ext", "heuristic", "engines_precompiled", "engines_runtime_compiled",
         "engines_tensor_ir", "ops_infer", "ops_train", "cnn_infer", "cnn_train", "adv_infer", "adv_train"]
FORMATS = re.compile(rb"%s\.%d(?:\.%d){0,2}\x00")

# experiments with two real copies (ctypes, /proc/self/maps); each is repeated by the named test
EXPERIMENTS = {
    ("cudnn9", "9.19.0"): "ctypes: this release's libcudnn.so.9 with the 9.24.0.43 wheel's lib folder on "
                          "LD_LIBRARY_PATH: cudnnGetVersion() answers 92400 and maps hold the other folder's "
                          "libcudnn_graph.so.9; LD_DEBUG=libs shows the names tried in order, LD_LIBRARY_PATH first "
                          "(tests/ldso/test_openers.py)",
    ("cudnn9", "9.24.0"): "ctypes: this release's libcudnn.so.9 with the 9.19.0.56 wheel's lib folder on "
                          "LD_LIBRARY_PATH: cudnnGetVersion() answers 92400 and maps hold its own "
                          "libcudnn_graph.so.9 (DT_RPATH wins) (tests/ldso/test_openers.py)",
    ("cudnn9-graph", "9.24.0"): "ctypes: after cudnnGetVersion, cudnn::graph::LibraryLoader::loadLibraries_() "
                                "(the loader a convolution runs) of this release's libcudnn_graph.so.9 with the "
                                "9.19.0.56 wheel's folder on LD_LIBRARY_PATH maps that folder's "
                                "libcudnn_engines_precompiled.so.9 and fails on its "
                                "libcudnn_engines_runtime_compiled.so.9 (tests/ldso/test_openers.py)",
    ("cudnn9-graph", "9.19.0"): "ctypes: cudnn::graph::LibraryLoader::loadLibraries_() of this release's "
                                "libcudnn_graph.so.9, opened from another folder by LD_LIBRARY_PATH, maps "
                                "the heuristic and engine libraries of that folder (tests/ldso/test_openers.py)",
    ("cudnn8", "8.9.7"): "ctypes: this release's libcudnn.so.8 with a copy of its libcudnn_ops_infer.so.8 in a "
                         "folder on LD_LIBRARY_PATH: cudnnGetVersion() maps the copy (tests/ldso/test_openers.py)",
    ("nvrtc", "13.0.88"): "ctypes: libnvrtc.so.13 opened by path, nvrtcCompileProgram() dlopens "
                          "libnvrtc-builtins.so.13.0 by name: found only through LD_LIBRARY_PATH (or the RPATH "
                          "of what loaded libnvrtc), never its own folder (tests/ldso/test_openers.py)",
}


def search_of(dyn: elf.Dynamic | None, first_only: bool = False) -> str:
    """"DT_RPATH $ORIGIN" / "DT_RUNPATH $ORIGIN:..." / "none": the path the object's own dlopen searches.

    ``first_only``: the tag and its first entry, then "..." when more follow (the cu12 and cu13 builds of one
    cuDNN release differ only in the entries after ``$ORIGIN``)."""
    if dyn is None:
        return "unreadable"
    kind, value = ("DT_RUNPATH", dyn.runpath) if dyn.runpath is not None else ("DT_RPATH", dyn.rpath)
    if value is None:
        return "none"
    if first_only and ":" in value:
        return f"{kind} {value.split(':', 1)[0]}:..."
    return f"{kind} {value}"


def opened_names(blob: bytes, prefix: str, soname_major: str | None, own: str | None) -> tuple[list[str], str]:
    """(the sub-library names in ``blob``'s strings other than its own soname ``own``, "versioned" | "exact")."""
    found = {m.decode() for m in re.findall(rb"(?<=\x00)(" + re.escape(prefix.encode()) + rb"[a-z_]+\.so(?:\.[0-9]+)*)(?=\x00)",
                                            blob)}
    found.discard(own or "")
    versioned = bool(FORMATS.search(blob)) and any(n.endswith(".so") for n in found)
    names = sorted({(n + "." + soname_major) if versioned and n.endswith(".so") and soname_major else n
                    for n in found}, key=_order)
    return names, "versioned" if versioned else "exact"


def _order(name: str) -> tuple[int, str]:
    stem = name.split(".so")[0].split("_", 1)[-1]
    return (ORDER.index(stem) if stem in ORDER else len(ORDER), name)


class Reader:
    """Members of remote wheels, cached on disk (``cache/<wheel file>/<member basename>``)."""

    def __init__(self, client: IndexClient, cache: Path, max_mb: int, log) -> None:
        self.client, self.cache, self.max_mb, self.log = client, cache, max_mb, log

    def wheels(self, dist: str) -> list[tuple[Version, Any]]:
        rel = discover.releases(self.client.project(dist))
        out = []
        for version in sorted(rel):
            f = discover.pick(rel[version])
            if f is not None:
                out.append((version, f))
        return out

    def member(self, f, suffix: str) -> tuple[str, bytes] | None:
        target = self.cache / f.filename / suffix.replace("/", "_")
        if target.exists():
            return suffix, target.read_bytes()
        try:
            got = self.client.member(f, suffix, max_bytes=self.max_mb << 20)
        except IndexReadError as exc:
            self.log(f"{f.filename}: {exc.message}")
            return None
        if got is None:
            return None
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(got[1])
        return got


def analyse(path: Path, blob: bytes, prefix: str, major: str | None) -> dict[str, Any]:
    """The facts of one opener file."""
    dyn = elf.try_read(str(path))
    names, how = opened_names(blob, prefix, major, dyn.soname if dyn else None)
    return {"search": search_of(dyn, first_only=True), "names": how, "opens": names}


CUDNN_DISTS = ("nvidia-cudnn-cu11", "nvidia-cudnn-cu12", "nvidia-cudnn-cu13")


def probe_cudnn(reader: Reader, family: str, member: str, major: int, only_dists: tuple[str, ...]) -> list[dict]:
    """One fact set per release of cuDNN ``major`` (the first dist that has it is read)."""
    seen: dict[str, dict] = {}
    for dist in only_dists:
        for version, f in reader.wheels(dist):
            if version.major != major:
                continue
            lib_version = ".".join(str(p) for p in version.release[:3])
            got = reader.member(f, member)
            if got is None:
                continue
            path = reader.cache / f.filename / member.replace("/", "_")
            facts = analyse(path, got[1], "libcudnn_", str(major))
            key = lib_version
            row = seen.setdefault(key, {"version": lib_version, "facts": facts, "checked": []})
            row["checked"].append(f"{dist}=={version}")
            if row["facts"] != facts:
                row["differs"] = f"{dist}=={version}: {facts}"
            reader.log(f"{family} {dist}=={version}: {facts['search']} {facts['names']} {facts['opens']}")
    return sorted(seen.values(), key=lambda r: Version(r["version"]))


def probe_nvrtc(reader: Reader) -> list[dict]:
    out = []
    for dist in ("nvidia-cuda-nvrtc-cu11", "nvidia-cuda-nvrtc-cu12", "nvidia-cuda-nvrtc"):
        for version, f in reader.wheels(dist):
            major = version.release[0]
            member = "lib/libnvrtc.so." + ("11.2" if major == 11 else str(major))
            got = reader.member(f, member)
            if got is None:
                continue
            path = reader.cache / f.filename / member.replace("/", "_")
            names = sorted({m.decode() for m in re.findall(rb"(?<=\x00)(libnvrtc-builtins\.so\.[0-9.]+)(?=\x00)", got[1])})
            facts = {"search": search_of(elf.try_read(str(path))), "names": "exact", "opens": names,
                     "opener": member.rsplit("/", 1)[1]}
            out.append({"version": str(version), "facts": facts, "checked": [f"{dist}=={version}"]})
            reader.log(f"nvrtc {dist}=={version}: {facts}")
    return sorted(out, key=lambda r: Version(r["version"]))


def group(rows: list[dict], family: str) -> list[dict]:
    """Consecutive releases with the same facts -> one row (versions from the first to the last read)."""
    out: list[dict] = []
    for r in rows:
        if out and out[-1]["_facts"] == r["facts"]:
            out[-1]["_last"] = r["version"]
            out[-1]["checked"] += r["checked"]
            if (family, r["version"]) in EXPERIMENTS:
                out[-1]["experiments"].append(EXPERIMENTS[(family, r["version"])])
            continue
        out.append({"_facts": r["facts"], "_first": r["version"], "_last": r["version"], "checked": list(r["checked"]),
                    "experiments": [EXPERIMENTS[(family, r["version"])]] if (family, r["version"]) in EXPERIMENTS
                    else []})
    return [_row(g) for g in out]


def _row(g: dict) -> dict:
    facts = g["_facts"]
    row = {"versions": f">={g['_first']},<={g['_last']}", "search": facts["search"], "names": facts["names"],
           "opens": facts["opens"]}
    if "opener" in facts:
        row["opener"] = facts["opener"]
    row["checked"] = g["checked"]
    row["evidence"] = ("artifact: the opener file of each checked wheel, read from the default package index "
                       "(member range reads): its dynamic section (search) and its strings (opens"
                       + (", and the %s.%d.%d.%d / %s.%d.%d / %s.%d name formats" if facts["names"] == "versioned"
                          else "") + ")")
    if g["experiments"]:
        row["experiments"] = g["experiments"]
    return row


def installed_facts(site: Path, rel: str, prefix: str) -> dict[str, Any] | None:
    """Facts of one file of an installed wheel (``site/rel``), with the distribution that installed it."""
    path = site / rel
    if not path.exists():
        return None
    blob = path.read_bytes()
    dyn = elf.try_read(str(path))
    names = sorted({m.decode() for m in re.findall(rb"(?<=\x00)(" + re.escape(prefix.encode()) + rb"[A-Za-z_-]*(?:\.so[.0-9]*)?)(?=\x00)",
                                                   blob)})
    return {"file": rel, "distribution": _owner(site, rel), "search": search_of(dyn),
            "needed": [n for n in (dyn.needed if dyn else ()) if n.startswith("lib" + prefix[3:4])],
            "strings": names}


def _owner(site: Path, rel: str) -> str | None:
    for record in site.glob("*.dist-info/RECORD"):
        if any(line.startswith(rel + ",") for line in record.read_text(errors="replace").splitlines()):
            return record.parent.name[:-len(".dist-info")].replace("_", "-")
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index-url")
    ap.add_argument("--cache", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "cudamatrix-probe-loaders")
    ap.add_argument("--max-mb", type=int, default=120, help="largest member read, compressed (MB)")
    ap.add_argument("--site", type=Path, action="append", default=[],
                    help="a site-packages with the nvidia-* wheels torch installs (the linked families)")
    ap.add_argument("--write", action="store_true", help="write data/loaders.json (keeps its hand-written rows)")
    args = ap.parse_args(argv)
    reader = Reader(IndexClient(args.index_url or pip_default_index(), member_max=2 << 30), args.cache, args.max_mb,
                    lambda m: print(m, file=sys.stderr))
    path = ROOT / "data" / "loaders.json"
    doc = json.loads(path.read_text()) if path.exists() else {"schema_version": 1, "openers": []}
    probed = {
        "cudnn9": group(probe_cudnn(reader, "cudnn9", "lib/libcudnn.so.9", 9, CUDNN_DISTS), "cudnn9"),
        "cudnn9-graph": group(probe_cudnn(reader, "cudnn9-graph", "lib/libcudnn_graph.so.9", 9, CUDNN_DISTS),
                              "cudnn9-graph"),
        "cudnn8": group(probe_cudnn(reader, "cudnn8", "lib/libcudnn.so.8", 8, CUDNN_DISTS), "cudnn8"),
        "nvrtc": group(probe_nvrtc(reader), "nvrtc"),
    }
    for opener in doc["openers"]:
        if opener["family"] in probed:
            opener["rows"] = probed[opener["family"]]
    linked = [installed_facts(site, rel, prefix) for site in args.site for rel, prefix in (
        ("nvidia/cu13/lib/libcublas.so.13", "libcublas"), ("nvidia/cu13/lib/libcusparse.so.12", "libnvJitLink"),
        ("nvidia/cu13/lib/libcufft.so.12", "libnvJitLink"), ("nvidia/nccl/lib/libnccl.so.2", "libnccl-"))]
    if linked:
        doc["installed_facts"] = [x for x in linked if x]
    text = json.dumps(doc, indent=1, ensure_ascii=False) + "\n"
    if args.write:
        path.write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
