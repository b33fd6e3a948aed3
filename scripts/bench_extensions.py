"""Benchmark: `cudamatrix doctor` on an environment with 40 installed torch extensions against the same
environment without them (issue #39: within 1.3x). Paired runs, medians. Not a timed test: run it by hand.

    python scripts/bench_extensions.py --torch-python PY --extension SO [--extension SO ...] [-n 15] [--cold]

Two throwaway venvs (no pip) see the same real torch (its folder and dist-info linked into their site-packages);
the second also holds 40 extension distributions ``bench-ext-NN``, each a platform wheel's metadata (METADATA
declaring an exact torch, WHEEL, RECORD) and one real extension object linked from the ``--extension`` files in
turn (e.g. xformers' ``_C.so``, torchvision's ``_C_stable.so``): 40 objects whose torch symbols are resolved
against torch's libraries. Each pair runs ``doctor --python`` on both, in alternating order; the figure is the
median of each side and the median of the per-pair ratios. ``--cold`` removes the user cache before every run
(the first doctor after an install); without it the cache is kept, as users run doctor again.

Figures (issue #39, 2026-12-04, a shared 2-core machine; torch 2.14.1's CUDA 13 wheel; the objects in turn
xformers 0.0.29.post3's ``_C.so`` and torchvision 0.21.0's ``_C.so``). This script, n=15, cold: 1.57x at 81dbf2a
(452 ms against 274), 1.27x after the cold-path work (338 against 258); warm 1.06x and 1.05x. Whole-process
figures of the same two doctors (paired, interleaved, 20 pairs, medians of the per-pair ratios), with over
without, at the final commit (an earlier run, before the loader model waited for the scan: cold 1.22 wall, 1.40 cpu):

    user cache   81dbf2a: wall  cpu     after: wall  cpu
    cold                  1.49  1.52           1.15  1.34
    warm                  1.15  1.13           1.09  1.11

What the cold path does now: the probe's list of candidates is guessed and scanned while the probe runs
(:func:`cudamatrix.detect.python_env.early_guess`, checked against the probe's own first line), the loader model
runs after that scan rather than beside it, undefined symbols are picked by C-level column work, fatbinary headers
read with small positioned reads, RECORDs 64 KiB first, c++filt given the names as arguments, the matrix's
extension releases indexed by name. The CPU time is still 1.3-1.4x: the scan reads each object (about 1 ms of
Python an object, 40 of them); the wall time is not, because most of it now runs while the probe's interpreter
starts. Unchanged elsewhere (branch over 81dbf2a, 15 pairs, wall and cpu): ``doctor --json`` 0.98, 0.99; ``fix
--dry-run`` 1.01, 1.02; ``solve torch tensorflow jax`` with bench_solve.py's target 1.00, 1.00.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COUNT = 40


def make_venv(where: Path, torch_site: Path, extensions: list[Path], count: int) -> Path:
    """A venv at ``where`` whose site-packages links the real torch, and ``count`` extension distributions."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    site = Path(subprocess.run([str(where / "bin" / "python"), "-c",
                                "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    for name in os.listdir(torch_site):
        if name == "torch" or (name.startswith("torch-") and name.endswith(".dist-info")):
            os.symlink(torch_site / name, site / name)
    for i in range(count):
        pkg, meta = f"bench_ext_{i:02d}", site / f"bench_ext_{i:02d}-1.0.dist-info"
        (site / pkg).mkdir()
        os.symlink(extensions[i % len(extensions)], site / pkg / "_C.so")
        meta.mkdir()
        (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: bench-ext-{i:02d}\nVersion: 1.0\n"
                                       "Requires-Dist: torch==2.6.0\n\n")
        (meta / "WHEEL").write_text("Wheel-Version: 1.0\nRoot-Is-Purelib: false\n")
        (meta / "RECORD").write_text(f"{pkg}/_C.so,,\n{meta.name}/METADATA,,\n{meta.name}/RECORD,,\n")
    return where / "bin" / "python"


def run_ms(python: Path, env: dict[str, str], cache: Path, cold: bool) -> tuple[float, int]:
    if cold:
        shutil.rmtree(cache, ignore_errors=True)
    argv = [sys.executable, "-m", "cudamatrix", "doctor", "--json", "--python", str(python)]
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return (time.perf_counter() - start) * 1000.0, done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch-python", required=True, help="an interpreter with a real torch installed")
    parser.add_argument("--extension", action="append", required=True, type=Path,
                        help="a real torch extension object (repeatable; used in turn)")
    parser.add_argument("-n", type=int, default=15, help="pairs of runs (median)")
    parser.add_argument("--cold", action="store_true", help="remove the user cache before every run")
    args = parser.parse_args()
    torch_site = Path(subprocess.run([args.torch_python, "-c", "import sysconfig; print(sysconfig.get_paths()"
                                      "['purelib'])"], capture_output=True, text=True, check=True).stdout.strip())
    with tempfile.TemporaryDirectory(prefix="bench-ext-") as tmp:
        base = make_venv(Path(tmp) / "without", torch_site, args.extension, 0)
        full = make_venv(Path(tmp) / "with", torch_site, [p.resolve() for p in args.extension], COUNT)
        cache = Path(tmp) / "xdg"
        env = dict(os.environ, PYTHONPATH=str(REPO), XDG_CACHE_HOME=str(cache))
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        run_ms(base, env, cache, args.cold)  # warm-up: bytecode, page cache, the user cache of both
        run_ms(full, env, cache, args.cold)
        without, with_, ratios, codes = [], [], [], set()
        for i in range(args.n):
            order = [(base, without), (full, with_)] if i % 2 == 0 else [(full, with_), (base, without)]
            got = {}
            for python, into in order:
                ms, code = run_ms(python, env, cache, args.cold)
                into.append(ms)
                got[python] = ms
                codes.add(code)
            ratios.append(got[full] / got[base])
    sys.stdout.write(f"doctor without extensions: {statistics.median(without):8.1f} ms (median of {args.n})\n"
                     f"doctor with {COUNT} extensions: {statistics.median(with_):8.1f} ms\n"
                     f"paired ratio (median): {statistics.median(ratios):.2f}x "
                     f"({'cold user cache' if args.cold else 'warm user cache'}; exit codes {sorted(codes)})\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
