#!/usr/bin/env python3
"""Benchmark doctor and solve (medians of several runs, each a fresh `python -m cudamatrix` process).

- doctor --json on this machine;
- detect --json, and solve torch torchvision tensorflow jax --json against one target (flags), side by
  side: the solve's cost above detect;
- solve torch with --env given 100 times (a fleet of saved environments of mixed GPUs and drivers).
Usage: python scripts/bench_solve.py [-n 9]
"""
from __future__ import annotations

import os as _os

# Measure what users get: Python writes bytecode caches by default. A shell that sets
# PYTHONDONTWRITEBYTECODE would make every run compile every module again (tens of ms).
_os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FLEET = [  # (driver, GPU name, compute capability): machines a cluster might mix
    ("535.104.05", "Tesla T4", "7.5"), ("550.54.15", "NVIDIA A100-SXM4-80GB", "8.0"),
    ("570.124.04", "NVIDIA L4", "8.9"), ("580.65.06", "NVIDIA H100 80GB HBM3", "9.0"),
    ("575.51.03", "NVIDIA GeForce RTX 4090", "8.9"),
]


def timed(argv: list[str], n: int) -> tuple[float, int]:
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # warm-up: bytecode, page cache
    samples, code = [], 0
    for _ in range(n):
        start = time.perf_counter()
        code = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples), code


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=9)
    n = ap.parse_args().n
    cm = [sys.executable, "-m", "cudamatrix"]
    subprocess.run(cm + ["matrix", "validate"], stdout=subprocess.DEVNULL)  # warm the validated-matrix cache
    target = ["--driver", "550.54.15", "--gpu", "Tesla T4", "--python", "3.11"]
    rows = []
    rows.append(("python -c pass", *timed([sys.executable, "-c", "pass"], n)))
    rows.append(("detect --json", *timed(cm + ["detect", "--json"], n)))
    rows.append(("doctor --json", *timed(cm + ["doctor", "--json"], n)))
    rows.append(("solve torch torchvision tensorflow jax (1 target)",
                 *timed(cm + ["solve", "torch", "torchvision", "tensorflow", "jax", *target, "--json"], n)))
    with tempfile.TemporaryDirectory() as tmp:
        args = []
        for i in range(100):
            driver, name, cc = FLEET[i % len(FLEET)]
            env = {"origin": "file", "driver": {"version": driver, "status": "ok"},
                   "gpus": [{"index": 0, "name": name, "compute_capability": cc}],
                   "python": {"version": "3.11.9", "platform": "linux_x86_64"}}
            path = Path(tmp) / f"node-{i:03d}.json"
            path.write_text(json.dumps(env))
            args += ["--env", str(path)]
        rows.append(("solve torch, 100 saved environments", *timed(cm + ["solve", "torch", *args, "--json"],
                                                                    max(3, n // 3))))
    width = max(len(r[0]) for r in rows)
    print(f"medians of {n} runs (fresh processes)")
    for name, ms, code in rows:
        print(f"  {name:<{width}}  {ms:7.1f} ms  (exit {code})")
    detect = rows[1][1]
    print(f"  solve above detect: {rows[3][1] - detect:+.1f} ms")


if __name__ == "__main__":
    main()
