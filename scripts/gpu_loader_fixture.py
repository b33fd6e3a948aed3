#!/usr/bin/env python3
"""Turn the loader case's output (``OUTDIR/loader`` of scripts/gpu_selftest.sh) into a replay fixture:
``tests/data/gpu_loader/<NAME>/`` with each setting's doctor.json, env.json, env.txt, env.stderr.txt,
verify.json, maps-*.txt and lddebug-*.txt, and summary.json, every text with the ``--replace OLD=NEW`` pairs
applied (a machine's private paths), and a README whose first line says where the outputs come from.
tests/e2e/test_gpu_loader_replay.py replays every folder there.

    python scripts/gpu_loader_fixture.py OUTDIR/loader NAME --source "TEXT" [--replace OLD=NEW ...]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FILES = ("doctor.json", "env.json", "env.txt", "env.stderr.txt", "verify.json")


def rewrite(text: str, pairs: list[tuple[str, str]]) -> str:
    for old, new in pairs:
        text = text.replace(old, new)
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source_dir", type=Path)
    ap.add_argument("name")
    ap.add_argument("--source", required=True, help="where the outputs come from (the README's first line)")
    ap.add_argument("--replace", action="append", default=[], metavar="OLD=NEW")
    ap.add_argument("--dest", type=Path, default=ROOT / "tests" / "data" / "gpu_loader")
    args = ap.parse_args(argv)
    pairs = [tuple(p.split("=", 1)) for p in args.replace]
    dest = args.dest / args.name
    summary = json.loads((args.source_dir / "summary.json").read_text())
    for setting in ("plain", "system"):
        src = args.source_dir / setting
        names = list(FILES) + sorted(p.name for p in src.glob("maps-*.txt")) + sorted(p.name for p in src.glob("lddebug-*.txt"))
        (dest / setting).mkdir(parents=True, exist_ok=True)
        for name in names:
            if (src / name).exists():
                (dest / setting / name).write_text(rewrite((src / name).read_text(errors="replace"), pairs))
    (dest / "summary.json").write_text(rewrite(json.dumps(summary, indent=1), pairs) + "\n")
    (dest / "README.md").write_text(
        f"# source: {args.source}\n\nMade by scripts/gpu_loader_fixture.py from the output of "
        "scripts/gpu_loader_case.py (called by scripts/gpu_selftest.sh). "
        + (("Rewritten paths (each stands for one folder of that machine): " + ", ".join(f"`{new}`" for _o, new in pairs))
           if pairs else "No path rewritten") + ".\n")
    print(dest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
