#!/usr/bin/env python3
"""Benchmark the fleet commands over 1,000 node files in 100 node classes (medians of fresh processes, and
the peak resident memory of each process, read from the kernel's rusage of that child via os.wait4).

The node files are varied saved Environments made from tests/scenarios/doctor_*.json (real machines from
public bug reports: T4, K80, P100, H100, RTX 3050/5090 on drivers 470 to 580, with their libraries and
packages), in two fleets of 100 classes: "varied" (node pools: each machine also with 2, 4, 8 GPUs and
Python 3.10-3.12) and "solver-distinct" (the worst case: every class a different target for the solver).
Ten nodes per class, each with its own hostname, capture time and timings (what differs within a class).
A third fleet, "many-drivers" (issue #29: 10,000 node files with 2,000 distinct drivers must solve in <= 2 s):
the scenario machines that have a GPU under driver versions made by raising the scenario drivers' last field
(synthetic patch levels of real branches, never matrix facts), ``--drivers`` of them, over ``--driver-nodes`` nodes;
no set fits it (a P100, driver-470 nodes: the causes and ways out are worked out), and "many-drivers-fitting" is
the same made of the machines one build fits together.
Usage: python scripts/bench_fleet.py [-n 7] [--nodes 1000] [--classes 100] [--drivers 2000]
       [--driver-nodes 10000] [--only many-drivers]
"""
from __future__ import annotations

import os as _os

_os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # measure what users get: bytecode caches are written

import argparse
import copy
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cudamatrix.fleet.classes import class_facts, class_id  # noqa: E402
from cudamatrix.models import Environment  # noqa: E402
from cudamatrix.schema import validate  # noqa: E402


def _bases() -> list[dict]:
    return [json.loads(p.read_text())["environment"]
            for p in sorted((ROOT / "tests" / "scenarios").glob("doctor_*.json"))]


def _take(candidates, count: int, key) -> list[dict]:
    out, seen = [], set()
    for env in candidates:
        k = key(env)
        if k not in seen:
            seen.add(k)
            out.append(env)
        if len(out) == count:
            return out
    raise SystemExit(f"only {len(out)} distinct classes can be made from the scenarios")


def _class(env: dict) -> str:
    return class_id(class_facts(validate(Environment, env, "bench", ValueError)))


def varied(count: int) -> list[dict]:
    """``count`` classes as node pools differ: each scenario machine also with 2, 4 and 8 GPUs and with Python
    3.10, 3.11 and 3.12 (classes that differ only in GPU count are one target for the solver)."""
    def gen():
        for gpus, python, base in itertools.product((1, 2, 4, 8), ("3.11", "3.10", "3.12"), _bases()):
            env = copy.deepcopy(base)
            if env.get("gpus"):
                env["gpus"] = [{**env["gpus"][0], "index": i} for i in range(gpus)]
            elif gpus > 1:
                continue
            env["python"]["version"] = f"{python}.1"
            yield env
    return _take(gen(), count, _class)


def distinct(count: int) -> list[dict]:
    """The worst case: ``count`` classes that are all different targets for the solver, every scenario GPU
    under every scenario driver and Python 3.10-3.12."""
    bases = _bases()
    drivers = {b["driver"]["version"]: b["driver"] for b in bases if b.get("driver", {}).get("version")}

    def gen():
        for python, drv, base in itertools.product(("3.11", "3.10", "3.12"), sorted(drivers), bases):
            if not base.get("gpus"):
                continue
            env = copy.deepcopy(base)
            env["driver"] = copy.deepcopy(drivers[drv])
            env["python"]["version"] = f"{python}.1"
            yield env
    return _take(gen(), count, lambda e: (e["driver"]["version"], e["python"]["version"],
                                          tuple(sorted({g["name"] for g in e["gpus"]}))))


def many_drivers(count: int, fitting: bool = False) -> list[dict]:
    """``count`` machines with distinct driver versions: each scenario machine with a GPU, a working Linux driver
    and its compute capability (a live reading, not a paste's partial one), under patch levels above its own
    (``535.104.05`` -> ``535.104.06``, ...), every machine in turn, all on Python 3.11 (one image for the
    cluster). ``fitting``: only the machines one torch build fits together (the others block: the K80 and P100,
    below every current build's architectures; driver 470, below CUDA 12; the RTX 5090 under a driver older than
    570, which has no CUDA 12.8 for its sm_120)."""
    bases = [b for b in _bases() if b.get("gpus") and all(g.get("compute_capability") for g in b["gpus"])
             and (b.get("driver") or {}).get("status") == "ok" and b["python"].get("platform") == "linux_x86_64"]
    if fitting:
        bases = [b for b in bases if _fits_one_build(b)]
    for b in bases:
        b["python"]["version"] = "3.11.9"
    out, seen = [], set()
    for step in itertools.count():
        for base in bases:
            head, _, last = base["driver"]["version"].rpartition(".")
            version = f"{head}.{int(last) + step:0{len(last)}d}"
            if version in seen:
                continue
            seen.add(version)
            env = copy.deepcopy(base)
            env["driver"]["version"] = version
            out.append(env)
            if len(out) == count:
                return out
    return out


def _fits_one_build(env: dict) -> bool:
    """The scenario machines the many-drivers fleet keeps when it must have a solution (see many_drivers)."""
    cc = min(float(g["compute_capability"]) for g in env["gpus"])
    branch = int(env["driver"]["version"].split(".")[0])
    return cc >= 7.5 and branch >= 525 and not (cc >= 12 and branch < 570)


def write_fleet(folder: Path, nodes: int, kinds: list[dict]) -> None:
    for i in range(nodes):
        env = copy.deepcopy(kinds[i % len(kinds)])
        env["hostname"] = f"node-{i:04d}"
        env["captured_at"] = f"2026-11-26T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}+00:00"
        env["timings_ms"] = {"total": 100.0 + i % 37}
        (folder / f"node-{i:04d}.json").write_text(json.dumps(env, indent=2))


def measure(argv: list[str], n: int) -> tuple[float, float, float, int]:
    """(median wall ms, median CPU ms, peak RSS MB over the runs, exit code): each run a fresh process. CPU time
    (user + system, from the same rusage) says what the wall time would be on an idle machine."""
    samples, cpu, peak, code = [], [], 0, 0
    for i in range(n + 1):
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = _os.wait4(proc.pid, 0)
        elapsed = (time.perf_counter() - start) * 1000
        proc.returncode = code = _os.waitstatus_to_exitcode(status)
        if i:  # the first run warms bytecode and page caches
            samples.append(elapsed)
            cpu.append((usage.ru_utime + usage.ru_stime) * 1000)
            peak = max(peak, usage.ru_maxrss)  # KiB on Linux
    return statistics.median(samples), statistics.median(cpu), peak / 1024, code


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=7)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--classes", type=int, default=100)
    ap.add_argument("--drivers", type=int, default=2000, help="distinct drivers of the many-drivers fleet")
    ap.add_argument("--driver-nodes", type=int, default=10000, help="node files of the many-drivers fleet")
    ap.add_argument("--only", choices=("varied", "solver-distinct", "many-drivers"), help="one fleet only")
    args = ap.parse_args()
    cm = [sys.executable, "-m", "cudamatrix"]
    subprocess.run(cm + ["matrix", "validate"], stdout=subprocess.DEVNULL)  # warm the validated-matrix cache
    rows = [("python -c pass", *measure([sys.executable, "-c", "pass"], args.n))]
    with tempfile.TemporaryDirectory() as tmp:
        lock_file = Path(tmp) / "torch.txt"
        subprocess.run(cm + ["lock", "torch", "--pins-only", "--driver", "580.65.06", "--gpu", "9.0", "--python", "3.11",
                             "-o", str(lock_file)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for label, make in (("varied", varied), ("solver-distinct", distinct)):
            if args.only and args.only != label:
                continue
            kinds = make(args.classes)
            fleet, one = Path(tmp) / label, Path(tmp) / f"{label}-one"
            fleet.mkdir()
            one.mkdir()
            write_fleet(fleet, args.nodes, kinds)
            write_fleet(one, len(kinds), kinds)
            tag = f"{label}: {args.nodes} nodes, {len(kinds)} classes"
            rows.append((f"solve torch --env DIR ({label}: {len(kinds)} nodes, 1 per class)",
                         *measure(cm + ["solve", "torch", "--env", str(one), "--json"], args.n)))
            rows.append((f"solve torch --env DIR ({tag})",
                         *measure(cm + ["solve", "torch", "--env", str(fleet), "--json"], args.n)))
            rows.append((f"lock torch --per-class --env DIR ({tag})",
                         *measure(cm + ["lock", "torch", "--per-class", "--pins-only", "--env", str(fleet), "-o",
                                        str(Path(tmp) / f"{label}-locks"), "--json"], args.n)))
            rows.append((f"check -r LOCK --env DIR ({tag})",
                         *measure(cm + ["check", "-r", str(lock_file), "--env", str(fleet), "--json"], args.n)))
            rows.append((f"doctor --env DIR ({tag})",
                         *measure(cm + ["doctor", "--env", str(fleet), "--json"], args.n)))
        if args.only in (None, "many-drivers"):
            for label, fitting in (("many-drivers", False), ("many-drivers-fitting", True)):
                fleet = Path(tmp) / label
                fleet.mkdir()
                kinds = many_drivers(args.drivers, fitting)
                write_fleet(fleet, args.driver_nodes, kinds)
                tag = (f"{label}: {args.driver_nodes} nodes, {len(kinds)} drivers, "
                       f"{'a set fits' if fitting else 'no set fits'}")
                rows.append((f"solve torch --env DIR ({tag})",
                             *measure(cm + ["solve", "torch", "--env", str(fleet), "--json"], args.n)))
                rows.append((f"lock torch --per-class --env DIR ({tag})",
                             *measure(cm + ["lock", "torch", "--per-class", "--pins-only", "--env", str(fleet), "-o",
                                            str(Path(tmp) / f"{label}-locks"), "--json"], args.n)))
            gpus = [a for k in range(2000) for a in ("--gpu", ("9.0", "8.0", "7.5")[k % 3])]
            rows.append(("solve torch --driver 580.65.06 with 2,000 --gpu flags",
                         *measure(cm + ["solve", "torch", "--driver", "580.65.06", *gpus, "--json"], args.n)))
    width = max(len(r[0]) for r in rows)
    print(f"medians of {args.n} runs (fresh processes): wall time, CPU time (user+system), peak RSS of the process;"
          f" load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for name, ms, cpu_ms, mb, code in rows:
        print(f"  {name:<{width}}  {ms:7.1f} ms wall  {cpu_ms:7.1f} ms CPU  {mb:6.1f} MB  (exit {code})")


if __name__ == "__main__":
    main()
