#!/usr/bin/env python3
"""Fill the empty ``cudnn`` and ``archs`` of non-default torch variants by a written-down rule, never silently.

Rules, in order; the variant records ``inferred[field]`` naming the neighbour row and the rule:

1. cudnn: the exact ``nvidia-cudnn-cuNN`` pin of a variant of the same release and the same CUDA major whose
   pins a source gives (the default-index wheel). PyTorch's build matrix script pins one cuDNN wheel for
   every CUDA minor of a major (its PYTORCH_EXTRA_INSTALL_REQUIREMENTS on the main branch between 2.10 and
   2.11 lists nvidia-cudnn-cu12==9.17.1.4 for 12.6, 12.8 and 12.9 alike). Applied from 2.8 on only: the
   2.7-era copy of that script pinned 9.5.1.17 for 12.6 but 9.8.0.87 for 12.8.
2. cudnn and archs: the value of the same variant (``cu126`` ...) in the nearest torch release that has it
   from a source (not itself inferred), an older release first on a tie: PyTorch carries a variant's cuDNN
   pin and ``TORCH_CUDA_ARCH_LIST`` from release to release until it changes them.

A variant with no such neighbour stays empty.
Idempotent: fields already filled (sourced or inferred) are left alone. ``--write`` writes data/torch.json.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
FIELDS = ("cudnn", "archs")


def infer(doc: dict) -> list[str]:
    """Fill ``doc`` in place; return one line per filled field."""
    rels = sorted(doc["releases"], key=lambda r: Version(r["version"]))
    sourced: dict[tuple[str, str], list[tuple[Version, object]]] = {}
    for rel in rels:
        for var in rel["variants"]:
            for key in FIELDS:
                if var.get(key) and key not in var.get("inferred", {}):
                    sourced.setdefault((var["name"], key), []).append((Version(rel["version"]), var[key]))
    lines = []
    for rel in rels:
        v = Version(rel["version"])
        for var in rel["variants"]:
            if var["name"] == "cpu" or not var.get("cuda"):
                continue
            if not var.get("cudnn") and v >= Version("2.8"):
                major = str(var["cuda"]).split(".")[0]
                for sib in rel["variants"]:
                    pin = next((p for p in sib.get("nvidia_pins", []) if p.startswith(f"nvidia-cudnn-cu{major}==")), None)
                    if sib is var or "cudnn" in sib.get("inferred", {}) or pin is None:
                        continue
                    var["cudnn"] = pin.split("==")[1].split(";")[0].strip()
                    var.setdefault("inferred", {})["cudnn"] = (
                        f"the nvidia-cudnn-cu{major} pin of torch {rel['version']} {sib['name']} (same release, same "
                        f"CUDA major): PyTorch's build matrix pins one cuDNN wheel for every CUDA minor of a major")
                    lines.append(f"torch {rel['version']} {var['name']}.cudnn <- {sib['name']}: {var['cudnn']}")
                    break
            for key in FIELDS:
                if var.get(key):
                    continue
                cands = sourced.get((var["name"], key), [])
                if not cands:
                    continue
                # nearest by release order; an older neighbour wins a tie
                order = [r for r in rels]
                idx = {Version(r["version"]): i for i, r in enumerate(order)}
                best = min(cands, key=lambda c: (abs(idx[c[0]] - idx[v]), c[0] > v))
                var[key] = best[1]
                var.setdefault("inferred", {})[key] = (
                    f"copied from torch {best[0]} {var['name']}, the nearest release whose {var['name']} {key} "
                    f"a source gives: PyTorch keeps a variant's {'cuDNN pin' if key == 'cudnn' else 'TORCH_CUDA_ARCH_LIST'}"
                    f" across releases until it changes it")
                lines.append(f"torch {rel['version']} {var['name']}.{key} <- torch {best[0]}: {best[1]}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT / "data")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args(argv)
    path = args.data / "torch.json"
    doc = json.loads(path.read_text())
    for line in infer(doc):
        print(line)
    if args.write:
        path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
