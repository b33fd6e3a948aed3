"""Benchmark: `cudamatrix fix` on an environment that is already consistent (target: median < 300 ms).

Builds a throwaway venv holding exactly the solver's answer for this machine (stand-in wheels built
locally, nothing downloaded), runs `fix` once to remember the verification, then times N more runs
and checks that none of them imported pydantic, rich or a framework.

    python scripts/bench_fix.py [-n 15]
"""
from __future__ import annotations

import os as _os

# Measure what users get: Python writes bytecode caches by default. A shell that sets
# PYTHONDONTWRITEBYTECODE would make every run compile every module again (tens of ms).
_os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.localindex import build_wheel, make_venv  # noqa: E402

HEAVY = ("pydantic", "rich", "torch", "tensorflow", "jax")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-n", type=int, default=15)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        # this machine's pip configuration off: a constraint there (a cap on torch) would refuse the stand-ins
        env = {**os.environ, "XDG_CACHE_HOME": str(tmp / "xdg"), "PYTHONPATH": str(ROOT), "PIP_CONFIG_FILE": os.devnull}
        py = make_venv(tmp / "venv")
        cmd = [sys.executable, "-m", "cudamatrix"]
        solved = json.loads(subprocess.run(cmd + ["solve", "--python", str(py), "--json"], env=env,
                                           capture_output=True, text=True, check=True).stdout)["data"]["solution"]
        for pin in solved["packages"]:
            wheel = build_wheel(tmp / "wheels", pin["name"], pin["version"])
            subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-index", "--no-deps", str(wheel)], env=env,
                           check=True)
        fix = cmd + ["fix", "--python", str(py), "--yes", "--json"]
        first = json.loads(subprocess.run(fix, env=env, capture_output=True, text=True).stdout)
        assert first["data"]["status"] == "unchanged", first
        times = []
        for _ in range(args.n):
            t = time.perf_counter()
            out = subprocess.run(fix, env=env, capture_output=True, text=True)
            times.append((time.perf_counter() - t) * 1000)
            data = json.loads(out.stdout)["data"]
            assert data["status"] == "unchanged" and data["from_cache"], data
        lib_code = ("import sys, json; from cudamatrix.fix import fix; r = fix(python=sys.argv[1], in_process=False); "
                    "assert r.from_cache; sys.stdout.write(json.dumps(r.to_dict()))")
        lib_times = []
        for _ in range(args.n):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", lib_code, str(py)], env=env, capture_output=True, check=True)
            lib_times.append((time.perf_counter() - t) * 1000)
        imp = subprocess.run([sys.executable, "-X", "importtime", "-m", "cudamatrix", "fix", "--python", str(py),
                              "--yes", "--json"], env=env, capture_output=True, text=True).stderr
        heavy = sorted({ln.split("|")[-1].strip().split(".")[0] for ln in imp.splitlines() if "|" in ln}
                       & set(HEAVY))
        bare = []
        for _ in range(5):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True)
            bare.append((time.perf_counter() - t) * 1000)
    med = statistics.median(times)
    print(f"fix (already consistent, verification remembered): median {med:.0f} ms, "
          f"min {min(times):.0f} ms, max {max(times):.0f} ms over {args.n} runs")
    print(f"same, through the library (python -c 'cudamatrix.fix()', no typer): median "
          f"{statistics.median(lib_times):.0f} ms")
    print(f"python start-up alone: median {statistics.median(bare):.0f} ms")
    print(f"heavy modules imported on that path: {heavy or 'none'}")
    ok = med < 300 and not heavy
    print("PASS" if ok else "FAIL", "(target: median < 300 ms, no pydantic/rich/framework import)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
