"""Benchmark: `cudamatrix verify --framework torch` against a bare script that imports torch and runs the
same convolution (target: verify adds at most 20%). Side by side, alternating, median of N runs.
On a machine without a GPU both run on the CPU (verify: the CPU path and its reference check).

    python scripts/bench_verify.py [-n 7] [--python PATH]
"""
from __future__ import annotations

import os as _os

# Measure what users get: Python writes bytecode caches by default. A shell that sets
# PYTHONDONTWRITEBYTECODE would make every run compile every module again (tens of ms).
_os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from bench_gpu import TORCH_CONV as BARE  # noqa: E402  (the same script: import torch, one convolution)


def _time(argv: list[str]) -> tuple[float, int]:
    t = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
    return (time.perf_counter() - t) * 1000, r.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-n", type=int, default=7)
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args()
    verify = [sys.executable, "-m", "cudamatrix", "verify", "--framework", "torch", "--python", args.python]
    bare = [args.python, "-c", BARE]
    _time(bare), _time(verify)  # warm the page cache
    v, b, codes = [], [], set()
    for _ in range(args.n):
        ms, code = _time(bare)
        b.append(ms)
        ms, code = _time(verify)
        v.append(ms)
        codes.add(code)
    mv, mb = statistics.median(v), statistics.median(b)
    over = (mv / mb - 1) * 100
    print(f"bare import torch + conv2d:  median {mb:.0f} ms")
    print(f"cudamatrix verify (exit {sorted(codes)}): median {mv:.0f} ms  (+{over:.1f}%)")
    print("PASS" if over <= 20 else "FAIL", "(target: at most +20%)")
    return 0 if over <= 20 else 1


if __name__ == "__main__":
    sys.exit(main())
