#!/usr/bin/env python3
"""Benchmark: loading and validating the whole matrix (median of several runs).

Reports three figures, each the median of N runs in fresh interpreters (so no warm process state helps):
- validate: JSON parse + full pydantic validation of every data file (what `matrix validate` does),
- load (trusted): what every command pays at start-up, building the shipped matrix straight from its JSON
  without pydantic (the tests and the refresh script validate that data),
- import: the interpreter importing cudamatrix.matrix, for scale.
Usage: python scripts/bench_matrix.py [-n 15]
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

PROBE = r"""
import json, sys, time, tempfile, os
t0 = time.perf_counter()
from cudamatrix.matrix.data import default_data_dir, load_matrix_from
t1 = time.perf_counter()
import pydantic, packaging.requirements, packaging.specifiers  # imports are not validation
from cudamatrix.matrix.data import Matrix, validate_files, FILES
from cudamatrix.schema import _adapter
ta = time.perf_counter()
_adapter(Matrix)  # pydantic builds its validator once per process
t2 = time.perf_counter()
raws = {n: (default_data_dir() / f"{n}.json").read_bytes() for n in FILES}
m = validate_files(raws)
t3 = time.perf_counter()
print(json.dumps({"import_ms": (t1 - t0) * 1e3, "validate_ms": (t3 - t2) * 1e3, "schema_ms": (t2 - ta) * 1e3}))
"""

CACHED = r"""
import json, time
t0 = time.perf_counter()
from cudamatrix.matrix.load import load_matrix
tm = time.perf_counter()
m = load_matrix()
t1 = time.perf_counter()
import sys
print(json.dumps({"cached_load_ms": (t1 - t0) * 1e3, "load_only_ms": (t1 - tm) * 1e3,
                  "pydantic_imported": "pydantic" in sys.modules}))
"""


def run(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=15)
    n = ap.parse_args().n
    run(CACHED)  # warm the bytecode and page caches
    full = [run(PROBE) for _ in range(n)]
    cached = [run(CACHED) for _ in range(n)]
    med = lambda xs: statistics.median(xs)  # noqa: E731
    print(f"runs: {n}")
    print(f"validate all data files (pydantic, no cache): median {med([r['validate_ms'] for r in full]):.1f} ms")
    print(f"load at start-up (trusted, no validation):    median {med([r['cached_load_ms'] for r in cached]):.1f} ms "
          f"(import included; pydantic imported: {cached[0]['pydantic_imported']})")
    print(f"  of which building the matrix:               median {med([r['load_only_ms'] for r in cached]):.1f} ms")
    print(f"pydantic schema build (once per process):     median {med([r['schema_ms'] for r in full]):.1f} ms")
    print(f"import cudamatrix.matrix:                     median {med([r['import_ms'] for r in full]):.1f} ms")


if __name__ == "__main__":
    main()
