#!/usr/bin/env python3
"""Count, per family, the releases in the matrix (and on the index with ``--index``) and the empty fields
that a reader could take for a pass: a CUDA variant without cuda / cudnn / archs, a default-index CUDA wheel
without its pins, a release without Python versions, a cuDNN row without compute capabilities, a CUDA row
without a Linux driver floor. Fields filled by a written-down rule (``inferred``) are counted apart.

``--ref REV`` reads data/ as it was at a git revision instead (for before/after notes).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

FAMILIES = ("torch", "tensorflow", "jax")
NEEDS = {"torch": ("cuda", "cudnn", "archs"), "tensorflow": ("cuda", "cudnn", "archs"), "jax": ("cuda", "cudnn")}


def load(name: str, ref: str | None) -> dict:
    if ref is None:
        return json.loads((ROOT / "data" / f"{name}.json").read_text())
    out = subprocess.run(["git", "-C", str(ROOT), "show", f"{ref}:data/{name}.json"], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    return json.loads(out)


def count(ref: str | None) -> dict[str, dict]:
    """{family: {"releases": n, "empty": {field: n}, "inferred": {field: n}}}."""
    out: dict[str, dict] = {}
    for fam in FAMILIES:
        doc = load(fam, ref)
        empty: dict[str, int] = {}
        inferred: dict[str, int] = {}
        for rel in doc["releases"]:
            if not rel.get("python"):
                empty["python"] = empty.get("python", 0) + 1
            for var in rel["variants"]:
                if var["name"] == "cpu" or (fam == "tensorflow" and not var.get("cuda") and not var.get("nvidia_pins")):
                    continue
                for key in NEEDS[fam]:
                    if not var.get(key):
                        empty[key] = empty.get(key, 0) + 1
                if var.get("pypi_default") and var.get("cuda") and not var.get("nvidia_pins") \
                        and not str(rel["version"]).startswith("1."):
                    empty["nvidia_pins (default wheel)"] = empty.get("nvidia_pins (default wheel)", 0) + 1
                for key in var.get("inferred", {}):
                    inferred[key] = inferred.get(key, 0) + 1
        out[fam] = {"releases": len(doc["releases"]), "empty": empty, "inferred": inferred}
    cudnn = load("cudnn", ref)["releases"]
    out["cudnn"] = {"releases": len(cudnn),
                    "empty": {"compute_capabilities": sum(not r.get("compute_capabilities") for r in cudnn),
                              "linux_min_driver": sum(not r.get("linux_min_driver") for r in cudnn)}}
    cuda = load("cuda", ref)["releases"]
    out["cuda"] = {"releases": len(cuda),
                   "empty": {"linux_min_driver": sum(not r.get("linux_min_driver") for r in cuda),
                             "compute_capabilities": sum(not r.get("compute_capabilities") for r in cuda)}}
    gpus = load("gpus", ref)["gpus"]
    out["gpu"] = {"releases": len(gpus), "empty": {}}
    return out


def on_index(url: str | None) -> dict[str, int]:
    """Final releases on the index within each family's matrix scope (its oldest row and newer)."""
    from packaging.version import Version

    from cudamatrix.matrix import discover
    from cudamatrix.matrix.index import IndexClient, pip_default_index

    client = IndexClient(url or pip_default_index())
    out = {}
    for fam in FAMILIES:
        floor = min(Version(r["version"]) for r in load(fam, None)["releases"])
        project = "jaxlib" if fam == "jax" else fam
        versions = {v for v in discover.releases(client.project(project)) if v >= floor}
        if fam == "jax":
            versions &= set(discover.releases(client.project("jax")))
        out[fam] = len(versions)
    out["cudnn"] = len({k for k in discover.cudnn_releases(client)})
    out["cuda"] = len(discover.cuda_minors(client))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ref", help="a git revision: count data/ as it was there")
    ap.add_argument("--index", action="store_true", help="also count the releases on the index (network)")
    ap.add_argument("--index-url")
    args = ap.parse_args(argv)
    counts = count(args.ref)
    index = on_index(args.index_url) if args.index else {}
    for fam, row in counts.items():
        empty = ", ".join(f"{k} {v}" for k, v in row["empty"].items() if v) or "none"
        line = f"{fam:10} matrix {row['releases']:4}"
        if fam in index:
            line += f"  index {index[fam]:4}"
        line += f"  empty: {empty}"
        if row.get("inferred"):
            line += "  inferred: " + ", ".join(f"{k} {v}" for k, v in row["inferred"].items())
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
