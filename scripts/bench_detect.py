"""Benchmark: median wall time of `cudamatrix detect --json` against `python -m torch.utils.collect_env`.

Not a timed test: run it by hand, on a quiet machine.

    python scripts/bench_detect.py [-n 15] [--python PYTHON]

Three detect figures are printed: the console command as users run it (``python -m cudamatrix detect --json``),
and the detect stage alone (a Python start-up, ``import cudamatrix.detect``, ``detect()``, JSON dump), which is
what the command costs without the CLI layer (typer) on top. Target: detect <= 150 ms, >= 10x faster than
collect_env.
"""
from __future__ import annotations

import os as _os

# Measure what users get: Python writes bytecode caches by default. A shell that sets
# PYTHONDONTWRITEBYTECODE would make every run compile every module again (tens of ms).
_os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

import argparse
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STAGE = ("import json; from cudamatrix.detect import detect; "
         "print(json.dumps(detect().to_dict()))")


def median_ms(argv: list[str], runs: int, env: dict[str, str]) -> tuple[float, int]:
    """Median milliseconds over ``runs`` (after one warm-up run) and the last exit status."""
    times, code = [], 0
    for i in range(runs + 1):
        start = time.perf_counter()
        done = subprocess.run(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if i:
            times.append((time.perf_counter() - start) * 1000.0)
        code = done.returncode
    return statistics.median(times), code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=15, help="runs per command (median)")
    parser.add_argument("--python", default=sys.executable, help="interpreter that runs both commands")
    args = parser.parse_args()
    python = os.path.realpath(args.python)  # not a shim: a pyenv shim alone costs ~100 ms per start
    env = dict(os.environ, PYTHONPATH=str(REPO))
    rows = []
    start_ms, _ = median_ms([python, "-c", "pass"], args.n, env)
    rows.append(("python -c pass (start-up)", start_ms, 0))
    rows.append(("detect stage: import + detect() + json", *median_ms([python, "-c", STAGE], args.n, env)))
    rows.append(("python -m cudamatrix detect --json", *median_ms([python, "-m", "cudamatrix", "detect", "--json"],
                                                               args.n, env)))
    script = shutil.which("cudamatrix", path=str(Path(python).parent))
    if script:
        rows.append(("cudamatrix detect --json (console script)", *median_ms([script, "detect", "--json"], args.n, env)))
    torch_ok = subprocess.run([python, "-c", "import torch"], capture_output=True).returncode == 0 \
        if importlib.util.find_spec("torch") or python != sys.executable else False
    if torch_ok:
        rows.append(("python -m torch.utils.collect_env", *median_ms([python, "-m", "torch.utils.collect_env"],
                                                                      max(3, args.n // 3), env)))
    width = max(len(r[0]) for r in rows)
    for name, ms, code in rows:
        sys.stdout.write(f"{name:<{width}}  {ms:8.1f} ms{'' if code == 0 else f'  (exit {code})'}\n")
    if not torch_ok:
        sys.stdout.write("torch is not importable with this interpreter: no collect_env comparison "
                         "(pip install torch==2.13.0 for a CPU build)\n")
        return 0
    collect = rows[-1][1]
    for name, ms, _ in rows[1:-1]:
        sys.stdout.write(f"collect_env / {name}: {collect / ms:.1f}x\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
