#!/usr/bin/env python3
"""Read cuDNN releases out of their ``nvidia-cudnn-cuXX`` wheels on the index and print (or write) cudnn.json rows.

For each ``DIST==VERSION``, without downloading the wheel whole (HTTP range requests, one member each):

* ``cudnn_version.h`` gives the version; ``libcudnn.so.9`` with ``libcudnn_graph.so.9`` (about 50 MB) is loaded with ctypes: ``cudnnGetVersion()`` and
  ``cudnnGetCudartVersion()`` give the version and the CUDA runtime it was built against;
* ``libcudnn_ops.so.9`` (about 35 MB compressed) is run through ``cuobjdump --list-elf/--list-ptx``: its
  SASS and PTX architectures are the compute capabilities. Members larger than ``--max-mb`` are skipped
  and the row says so (``libcudnn_adv.so.9`` and ``libcudnn_engines_precompiled.so.9`` are 100-200 MB).

The CUDA line (``>=13.0,<14``) comes from the distribution name; the Linux driver floor is the floor of that
CUDA line's first release in cuda.json (the rule the cuDNN 9.17 support matrix follows: >=580.65.06 for the
CUDA 13 line, >=525.60.13 for CUDA 12), and the row says it is that rule.
The index is pip's (``--index-url`` else pip's configuration); cuobjdump comes from ``--cuobjdump`` (the
``nvidia-cuda-cuobjdump`` wheel carries one).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from packaging.version import Version  # noqa: E402

from cudamatrix.matrix import discover  # noqa: E402
from cudamatrix.matrix.index import IndexClient, IndexReadError, pip_default_index  # noqa: E402
from cudamatrix.matrix.sources import source_record  # noqa: E402


def archs_of(listing: str) -> list[str]:
    """Compute capabilities from ``cuobjdump --list-elf`` ("sm_90") or ``--list-ptx`` ("sm_120") output."""
    ccs = {discover.cc_of(m) for m in re.findall(r"\.(sm_\d+[af]?)\.", listing)}
    ccs = {c.rstrip("af") for c in ccs}
    return sorted(ccs, key=lambda c: tuple(int(x) for x in c.split(".")))


def probe(client: IndexClient, dist: str, version: str, cuobjdump: str, max_mb: int, cuda_doc: dict) -> dict:
    files = discover.releases(client.project(dist)).get(Version(version), [])
    f = discover.pick(files)
    if f is None:
        raise SystemExit(f"{dist}=={version}: no linux x86_64 wheel on the index")
    notes = []
    with tempfile.TemporaryDirectory() as tmp:
        _n, header = client.member(f, "include/cudnn_version.h")
        nums = dict(re.findall(r"#define CUDNN_(MAJOR|MINOR|PATCHLEVEL)\s+(\d+)", header.decode()))
        got = int(nums["MAJOR"]) * 10000 + int(nums["MINOR"]) * 100 + int(nums["PATCHLEVEL"])
        notes.append(f"cudnn_version.h says {nums['MAJOR']}.{nums['MINOR']}.{nums['PATCHLEVEL']}")
        # the shim resolves cudnnGetVersion in libcudnn_graph.so.9, so both are needed for the ctypes call
        for member in ("lib/libcudnn.so.9", "lib/libcudnn_graph.so.9"):
            _n, blob = client.member(f, member, max_bytes=max_mb * 2**20)
            (Path(tmp) / member.rsplit("/", 1)[1]).write_bytes(blob)
        ctypes.CDLL(str(Path(tmp) / "libcudnn_graph.so.9"), mode=ctypes.RTLD_GLOBAL)
        dll = ctypes.CDLL(str(Path(tmp) / "libcudnn.so.9"))
        called = int(dll.cudnnGetVersion())
        if called != got:
            raise SystemExit(f"{f.filename}: cudnnGetVersion()={called} but cudnn_version.h says {got}")
        cudart = int(dll.cudnnGetCudartVersion())
        try:
            name, ops = client.member(f, "lib/libcudnn_ops.so.9", max_bytes=max_mb * 2**20)
            target = Path(tmp) / "ops.so"
            target.write_bytes(ops)
            elf = subprocess.run([cuobjdump, "--list-elf", str(target)], capture_output=True, text=True,
                                 timeout=300).stdout
            ptx = subprocess.run([cuobjdump, "--list-ptx", str(target)], capture_output=True, text=True,
                                 timeout=300).stdout
            sass, virt = archs_of(elf), archs_of(ptx)
            notes.append(f"cuobjdump of {name}: SASS {' '.join('sm_' + c.replace('.', '') for c in sass)}, "
                         f"PTX {' '.join('compute_' + c.replace('.', '') for c in virt) or 'none'}")
        except IndexReadError as exc:
            sass, virt = [], []
            notes.append(f"compute capabilities not read: {exc.message}")
    # SASS for X.Y also runs on X.Z with Z > Y (CUDA C++ Programming Guide, "Binary Compatibility")
    known = {c.rstrip("af") for a in json.loads((ROOT / "data" / "gpus.json").read_text())["architectures"]
             for c in a["compute_capabilities"]}
    runs = set(sass) | set(virt)
    for cc in known:
        maj, mnr = cc.split(".")
        if any(s.split(".")[0] == maj and int(s.split(".")[1]) <= int(mnr) for s in sass):
            runs.add(cc)
    if runs != set(sass) | set(virt):
        notes.append("binary-compatible minors of the SASS majors added: "
                     + " ".join(sorted(runs - set(sass) - set(virt), key=lambda c: tuple(map(int, c.split("."))))))
    major = int(dist.rsplit("cu", 1)[1])
    first = min((r for r in cuda_doc["releases"] if Version(r["version"]).major == major),
                key=lambda r: Version(r["version"]))
    ver = f"{got // 10000}.{got % 10000 // 100}.{got % 100}"
    return {
        "version": ver, "cuda_versions": [f">={major}.0,<{major + 1}"],
        "compute_capabilities": sorted(runs, key=lambda c: tuple(int(x) for x in c.split("."))),
        "soname": "libcudnn.so.9", "linux_min_driver": first["linux_min_driver"],
        "source": [source_record(
            f"{f.filename} on the default package index (member reads); ctypes cudnnGetVersion()={got}, "
            f"cudnnGetCudartVersion()={cudart}; " + "; ".join(notes) + f"; linux_min_driver: the CUDA {major}.0 "
            f"floor from cuda.json (inferred: the cuDNN 9.17 support matrix gives that floor for its CUDA "
            f"{major} line)")],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("wheels", nargs="+", help="DIST==VERSION, e.g. nvidia-cudnn-cu13==9.26.0.51")
    ap.add_argument("--index-url")
    ap.add_argument("--cuobjdump", default="cuobjdump")
    ap.add_argument("--max-mb", type=int, default=60, help="largest member read, compressed (MB)")
    ap.add_argument("--data", type=Path, default=ROOT / "data")
    ap.add_argument("--write", action="store_true", help="add or replace the rows in cudnn.json")
    args = ap.parse_args(argv)
    client = IndexClient(args.index_url or pip_default_index(), member_max=2 << 30)  # cuDNN's libraries
    cuda_doc = json.loads((args.data / "cuda.json").read_text())
    rows = []
    for spec in args.wheels:
        dist, version = spec.split("==")
        rows.append(probe(client, dist, version, args.cuobjdump, args.max_mb, cuda_doc))
        print(json.dumps(rows[-1]))
    if args.write:
        path = args.data / "cudnn.json"
        doc = json.loads(path.read_text())
        by = {r["version"]: r for r in doc["releases"]}
        for row in rows:
            by[row["version"]] = row
        doc["releases"] = sorted(by.values(), key=lambda r: Version(r["version"]))
        path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
