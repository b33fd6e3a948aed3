#!/usr/bin/env python3
"""Where users are: interleaved medians of cudamatrix's hot commands next to Python's own start-up (issue #29).

Each round runs every command once, in turn (A B C ... A B C ...), so a machine whose speed drifts moves all
of them alike; the median of the rounds is reported. Measured (``PY`` is ``--python``, cudamatrix importable
from it, e.g. through PYTHONPATH):

* ``pass``: ``PY -c pass``; ``pass_S``: ``PY -S -c pass`` (start-up without site-packages);
* ``detect``, ``doctor``, ``fix_dry_run``: ``PY -m cudamatrix detect --json`` / ``doctor --json`` /
  ``fix --dry-run --json`` (wall time, start-up included);
* ``fix_noop``: a fresh interpreter running ``import cudamatrix; cudamatrix.fix()`` (the notebook call), timed
  inside the process from before the import to the return (``fix_noop_in_process``) and from outside (wall).
  A first, untimed call runs the GPU check once and remembers it (a user's second kernel). ``fix`` is never
  allowed to change the machine: its ``confirm`` answers no, so an environment that is not consistent is
  reported as such (``fix_noop_status``), nothing installed;
* ``child_floor``: ``PY -I -S -c "import ctypes, json"``, the loader child's start-up and imports; detect's
  own ``timings_ms`` of each run (detect's and doctor's) are kept too (``detect_timings_median_ms``: where the NVML
  child's time goes);
* ``verify`` next to ``torch_conv``: ``PY -m cudamatrix verify --framework torch --json`` and a bare script
  importing torch and running one convolution (on the GPU when there is one), fewer rounds (``--verify-runs``).

Also saved into OUTDIR: ``importtime-doctor.txt`` (``-X importtime``), ``doctor.prof`` and
``doctor-profile.txt`` (cProfile of doctor; from Python 3.12 on it sees the scan's threads too), and
``bench.json`` with every run, the medians and the issue's targets checked. A deadline bounds the whole run:
rounds that would start after it are skipped (the report says how many ran).

    python scripts/bench_gpu.py OUTDIR [--python PY] [-n 11] [--verify-runs 5] [--deadline 170]

Standard library only. Not a timed test: run it by hand or from scripts/gpu_selftest.sh.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

FIX_NOOP = r"""
import json, sys, time
t = time.perf_counter()
import cudamatrix
try:
    r = cudamatrix.fix(confirm=lambda plan: False)
    out = {"status": r.status, "from_cache": r.from_cache, "exit_code": int(r.exit_code)}
except BaseException as exc:
    out = {"status": "error", "error": "%s: %s" % (type(exc).__name__, exc)}
out["ms"] = (time.perf_counter() - t) * 1000.0
sys.stdout.write(json.dumps(out))
"""

TORCH_CONV = r"""
import torch
import torch.nn.functional as F
dev = "cuda" if torch.cuda.is_available() else "cpu"
g = torch.Generator().manual_seed(0)
x = torch.rand(8, 16, 32, 32, generator=g).to(dev)
w = torch.rand(32, 16, 3, 3, generator=g).to(dev)
y = F.conv2d(x, w, padding=1)
if dev == "cuda":
    torch.cuda.synchronize()
print(dev, float(y.abs().max()))
"""

# the targets on the H100: (name, measured, limit as a function of the medians, what it says)
TARGETS = (
    ("detect", lambda m: m.get("detect"), lambda m: m["pass"] + 60.0, "detect <= python -c pass + 60 ms"),
    ("doctor", lambda m: m.get("doctor"), lambda m: m["pass"] + 100.0, "doctor <= python -c pass + 100 ms"),
    ("fix_noop", lambda m: m.get("fix_noop_in_process"), lambda m: 150.0,
     "cudamatrix.fix() no-op, first call in a fresh interpreter, <= 150 ms in-process"),
    ("verify", lambda m: m.get("verify"), lambda m: 1.3 * m["torch_conv"] if "torch_conv" in m else None,
     "verify <= 1.3 x (import torch + one convolution)"),
)


def timed(argv: list[str], env: dict[str, str], timeout: float) -> tuple[float, int, str]:
    """Wall milliseconds, exit status and standard output of one run."""
    start = time.perf_counter()
    try:
        done = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return (time.perf_counter() - start) * 1000.0, 124, ""
    return (time.perf_counter() - start) * 1000.0, done.returncode, done.stdout


def interleaved(commands: dict[str, list[str]], rounds: int, env: dict[str, str], end: float,
                timeout: float) -> dict[str, list[dict]]:
    """One untimed warm-up run of each command (kept as ``first``), then ``rounds`` rounds in turn."""
    runs: dict[str, list[dict]] = {name: [] for name in commands}
    last = 0.0  # the previous round's seconds: a round that would end past the deadline is not started
    for number in range(rounds + 1):
        if number and time.monotonic() + last > end:
            break
        began = time.monotonic()
        for name, argv in commands.items():
            ms, code, out = timed(argv, env, timeout)
            row = {"ms": round(ms, 1), "exit": code, "out": out[-2000:] if name == "fix_noop" else "",
                   "first": number == 0}
            if name in ("detect", "doctor"):
                row["timings_ms"] = detect_timings(out)
            runs[name].append(row)
        last = time.monotonic() - began
    return runs


def detect_timings(out: str) -> dict:
    """detect's own ``timings_ms`` (each probe, the NVML child's start-up, imports, load, init and queries)."""
    try:
        return json.loads(out)["data"]["environment"]["timings_ms"]
    except (ValueError, KeyError, TypeError):
        return {}


def timing_medians(rows: list[dict]) -> dict[str, float]:
    """The median of each of detect's own timings over the timed runs."""
    keys = sorted({k for r in rows if not r["first"] for k in r.get("timings_ms", {})})
    return {k: round(statistics.median(r["timings_ms"][k] for r in rows if not r["first"] and k in r["timings_ms"]), 2)
            for k in keys}


def medians(runs: dict[str, list[dict]]) -> dict[str, float]:
    """Median wall ms of each command's timed runs, and the in-process median of the fix() runs."""
    result = {}
    for name, rows in runs.items():
        timed_rows = [r for r in rows if not r["first"]]
        if timed_rows:
            result[name] = round(statistics.median(r["ms"] for r in timed_rows), 1)
        if name == "fix_noop":
            inner = [json.loads(r["out"]) for r in timed_rows if r["out"].startswith("{")]
            if inner:
                result["fix_noop_in_process"] = round(statistics.median(i["ms"] for i in inner), 1)
    return result


def fix_status(runs: dict[str, list[dict]]) -> list[str]:
    """What each fix() call answered (status, remembered or not), first call included."""
    said = []
    for row in runs.get("fix_noop", []):
        try:
            said.append(json.dumps(json.loads(row["out"]), sort_keys=True))
        except ValueError:
            said.append(f"exit {row['exit']}, no answer")
    return said


def checked(med: dict[str, float]) -> list[dict]:
    """The targets, each with its measured value, its limit and whether it is met (None: not measured)."""
    rows = []
    for name, value, limit, text in TARGETS:
        got, bound = value(med), limit(med) if "pass" in med else None
        rows.append({"target": name, "rule": text, "ms": got, "limit_ms": None if bound is None else round(bound, 1),
                     "met": None if got is None or bound is None else got <= bound})
    return rows


def keep_profiles(out: str, python: str, env: dict[str, str]) -> None:
    """``-X importtime`` and a cProfile of doctor, kept as fixtures."""
    cm = [python, "-m", "cudamatrix", "doctor", "--json"]
    with open(os.path.join(out, "importtime-doctor.txt"), "w") as err:
        subprocess.run([python, "-X", "importtime", *cm[1:]], env=env, stdout=subprocess.DEVNULL, stderr=err,
                       timeout=120)
    prof = os.path.join(out, "doctor.prof")
    subprocess.run([python, "-m", "cProfile", "-o", prof, *cm[1:]], env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=120)
    dump = ("import pstats, sys; s = pstats.Stats(sys.argv[1], stream=sys.stdout); s.sort_stats('cumulative')"
            ".print_stats(80); s.sort_stats('tottime').print_stats(40)")
    with open(os.path.join(out, "doctor-profile.txt"), "w") as text:
        subprocess.run([python, "-c", dump, prof], env=env, stdout=text, stderr=subprocess.STDOUT, timeout=60)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("-n", type=int, default=11, help="rounds of the start-up, detect, doctor and fix commands")
    ap.add_argument("--verify-runs", type=int, default=5, help="rounds of verify and the bare torch convolution")
    ap.add_argument("--deadline", type=float, default=170.0, help="seconds for the whole run")
    ap.add_argument("--no-verify", action="store_true", help="leave verify and torch out")
    args = ap.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    end = time.monotonic() + args.deadline
    env = dict(os.environ)
    py = args.python
    cm = [py, "-m", "cudamatrix"]
    hot = {"pass": [py, "-c", "pass"], "pass_S": [py, "-S", "-c", "pass"],
           "detect": cm + ["detect", "--json"], "doctor": cm + ["doctor", "--json"],
           "fix_dry_run": cm + ["fix", "--dry-run", "--json"], "fix_noop": [py, "-c", FIX_NOOP],
           # the loader child's own floor: its interpreter and imports, as it is started (-I -S)
           "child_floor": [py, "-I", "-S", "-c", "import ctypes, json"]}
    runs = interleaved(hot, args.n, env, end - 60.0 * (not args.no_verify), timeout=120.0)
    if not args.no_verify:
        heavy = {"torch_conv": [py, "-c", TORCH_CONV], "verify": cm + ["verify", "--framework", "torch", "--json"]}
        runs.update(interleaved(heavy, args.verify_runs, env, end - 15.0, timeout=150.0))
    med = medians(runs)
    report = {"machine": {"node": platform.node(), "cpus": os.cpu_count(), "python": sys.version.split()[0],
                          "interpreter": py, "dont_write_bytecode": env.get("PYTHONDONTWRITEBYTECODE")},
              "rounds": {name: sum(not r["first"] for r in rows) for name, rows in runs.items()},
              "medians_ms": med, "targets": checked(med), "fix_noop_answers": fix_status(runs),
              "detect_timings_median_ms": timing_medians(runs.get("detect", [])),
              "doctor_detect_timings_median_ms": timing_medians(runs.get("doctor", [])), "runs": runs}
    if time.monotonic() < end:
        keep_profiles(args.outdir, py, env)
    with open(os.path.join(args.outdir, "bench.json"), "w") as fh:
        json.dump(report, fh, indent=1)
    sys.stdout.write(json.dumps({"medians_ms": med, "targets": report["targets"], "rounds": report["rounds"],
                                 "detect_timings_median_ms": report["detect_timings_median_ms"]}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
