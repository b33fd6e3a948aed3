#!/usr/bin/env python3
"""Add to gpus.json the names people type for a GPU (``4090``, ``rtx4090``, ``RTX 4090``, ``1080 Ti``), derived from
each row's own name (the name on NVIDIA's "CUDA GPU Compute Capability" page) by one written rule; idempotent.

    python scripts/gpu_aliases.py [--data DIR] [--write]

Rule: for a GeForce, TITAN, Quadro or RTX card, the name without its vendor words ("NVIDIA", "GeForce") is the
series and the model ("RTX 4070 Ti"); the aliases are that text, its compact spelling ("rtx4070ti"), the model
alone ("4070 Ti") and the compact model ("4070ti"). A data-center or Jetson name gets none: a bare "a100",
"h100", "t4" already finds its row (``query.find_gpu`` matches a name's first words when every model it can stand
for has one compute capability). An alias two rows would share is given
to neither (``matrix validate`` refuses a name that belongs to two rows), as is one that is already another
row's name or alias, and a bare model number that is a word of the name of a GPU of another compute capability
("4000": Quadro RTX 4000 is 7.5, RTX 4000 Ada 8.9; "3090" stays with the RTX 3090, the 3090 Ti being 8.6 too). The row's cuda-gpus record says the aliases come from this rule.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERIES = re.compile(r"^(?:NVIDIA\s+)?(?:GeForce\s+)?((?:RTX|GTX|GT|TITAN|Quadro)\b.*)$", re.I)
NOTE = "aliases: the model number and compact spellings of this name (scripts/gpu_aliases.py)"


def compact(text: str) -> str:
    return re.sub(r"[\s\-_()]+", "", text).lower()


def candidates(name: str) -> list[str]:
    """The aliases the rule gives one name."""
    m = SERIES.match(name.strip())
    if not m:
        return []
    text = m.group(1).strip()
    out = [text, compact(text)]
    model = re.sub(r"^(?:RTX|GTX|GT|Quadro(?:\s+RTX)?)\s+", "", text, flags=re.I)
    if model != text and re.match(r"^\d{3,4}\b", model):  # "4090", "1080 Ti": not "A6000" or "TITAN V"
        out += [model, compact(model)]
    return list(dict.fromkeys(out))


def _names_another(alias: str, others: list[str]) -> bool:
    """A bare model number ("4000") that is also a word of the name of a GPU of another compute capability
    ("RTX 4000 Ada" beside "Quadro RTX 4000") names neither."""
    if not alias[0].isdigit():
        return False
    words = re.escape(alias.lower())
    return any(re.search(rf"(^|\s){words}(\s|$)", other) for other in others)


def apply(doc: dict) -> list[str]:
    """Add the aliases to ``doc`` in place; one line per row changed."""
    taken = {n.lower() for g in doc["gpus"] for n in (g["name"], *g.get("aliases", []))}
    wanted = {g["name"]: [a for a in candidates(g["name"]) if a.lower() not in taken] for g in doc["gpus"]}
    counts = Counter(a.lower() for names in wanted.values() for a in names)
    lines = []
    for g in doc["gpus"]:
        others = [o["name"].lower() for o in doc["gpus"] if o["compute_capability"] != g["compute_capability"]]
        new = [a for a in wanted[g["name"]] if counts[a.lower()] == 1 and not _names_another(a, others)]
        if not new:
            continue
        g["aliases"] = g.get("aliases", []) + new
        for rec in g["source"]:
            if rec.get("url") == "https://developer.nvidia.com/cuda-gpus" and NOTE not in rec["states"]:
                rec["states"] += f"; {NOTE}"
        lines.append(f"{g['name']}: + {', '.join(new)}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT / "data")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args(argv)
    path = args.data / "gpus.json"
    doc = json.loads(path.read_text())
    for line in apply(doc):
        print(line)
    if args.write:
        path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
