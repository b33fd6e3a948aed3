"""Benchmark: median wall time of `cudamatrix detect --from PASTE --json` on a 1 MB paste, fresh processes.

Not a timed test: run it by hand, on a quiet machine.

    python scripts/bench_reports.py [-n 11] [--size-mb 1]

The paste is built from the corpus of real pastes in tests/data/pastes (each tool's output, quoted, fenced
and prompted as users post them), repeated until it reaches the size asked for. Also printed: an empty-ish
paste (the command's fixed cost), a fixed pure-Python loop (how fast the machine was meanwhile) and the
reader alone in-process. The three commands take turns run after run, so a drift in the speed of a shared
machine touches each of them alike. Target: under 200 ms for 1 MB.
"""
from __future__ import annotations

import os as _os

_os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # measure what users get: bytecode caches on

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "tests" / "data" / "pastes"


def build_paste(size: int) -> str:
    """Real pastes (their source line dropped) one after another until ``size`` bytes."""
    parts = [p.read_text(encoding="utf-8").split("\n", 1)[1] for p in sorted(CORPUS.glob("*.txt"))]
    if not parts:
        raise SystemExit(f"no pastes in {CORPUS}")
    out, total, i = [], 0, 0
    while total < size:
        out.append(parts[i % len(parts)])
        total += len(out[-1].encode()) + 1
        i += 1
    return "\n".join(out)[:size]


def one_run(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU time (user + system, from the child's own accounting) of one fresh process, in ms."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO)
    wall = (time.perf_counter() - start) * 1000.0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode()[-500:]}")
    return wall, (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000.0


def medians(runs: dict[str, list[str]], n: int) -> dict[str, tuple[float, float]]:
    """Medians of wall and CPU time per named command, the commands taking turns run after run: on a machine
    shared with other work its speed drifts, and taking turns puts every command through the same drift
    (the reference loop among them says how fast the machine was meanwhile)."""
    walls: dict[str, list[float]] = {name: [] for name in runs}
    cpus: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(n):
        for name, argv in runs.items():
            wall, cpu = one_run(argv)
            walls[name].append(wall)
            cpus[name].append(cpu)
    return {name: (statistics.median(walls[name]), statistics.median(cpus[name])) for name in runs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=11, help="runs per figure (default 11)")
    ap.add_argument("--size-mb", type=float, default=1.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "paste.txt"
        big.write_text(build_paste(int(args.size_mb * 1024 * 1024)), encoding="utf-8")
        small = Path(tmp) / "nvcc.txt"
        small.write_text("nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 12.4, V12.4.131\n")
        cmd = [sys.executable, "-m", "cudamatrix", "detect", "--json", "--from"]
        medians({"warm": cmd + [str(small)]}, 2)  # warm the bytecode caches
        # a fixed pure-Python workload, to compare figures taken on machines of different speed or load
        got = medians({"fixed": cmd + [str(small)], "full": cmd + [str(big)],
                       "reference": [sys.executable, "-c", "s = 0\nfor i in range(10_000_000): s += i"]}, args.n)
        fixed, full, reference = got["fixed"], got["full"], got["reference"]
        sys.path.insert(0, str(REPO))
        from cudamatrix.pastes.reports import from_reports

        text = big.read_text(encoding="utf-8")
        inproc = []
        for _ in range(args.n):
            start = time.perf_counter()
            from_reports([("paste", text)])
            inproc.append((time.perf_counter() - start) * 1000.0)
        size = big.stat().st_size
    print(f"paste: {size / 1048576:.2f} MB, {text.count(chr(10)) + 1} lines, median of {args.n} runs")
    print(f"load average: {', '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    print(f"reference loop (10^7 additions):          wall {reference[0]:7.1f} ms   cpu {reference[1]:7.1f} ms")
    print(f"detect --from (2-line paste, fixed cost): wall {fixed[0]:7.1f} ms   cpu {fixed[1]:7.1f} ms")
    print(f"detect --from ({args.size_mb:g} MB paste):         wall {full[0]:7.1f} ms   cpu {full[1]:7.1f} ms"
          "   target < 200 ms")
    print(f"reader alone, in-process:                 wall {statistics.median(inproc):7.1f} ms")


if __name__ == "__main__":
    main()
