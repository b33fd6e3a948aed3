#!/usr/bin/env python3
"""The loader self-test on a real GPU machine: the system-cuDNN case of issue #22, kept as replayable fixtures.

For each setting -- ``plain`` (the machine's environment as it is) and ``system`` (the folder of a system cuDNN,
``/lib/x86_64-linux-gnu`` by default, put first on LD_LIBRARY_PATH) -- it saves, under ``OUTDIR/<setting>/``:

* ``doctor.json``: ``cudamatrix doctor --json`` (the environment with the loader model's predictions, and the
  findings); ``env.json`` and ``env.txt``: ``cudamatrix env --json`` and its human output (exports on stdout,
  the advice on stderr);
* ``verify.json``: ``cudamatrix verify --framework all --json`` (each framework's child compares its maps after
  the convolution with the model);
* ``maps-<framework>.txt``: the ``/proc/self/maps`` lines of libcudnn* files of a child that ran one cuDNN
  convolution (torch: conv2d on cuda:0; jax: lax.conv on the GPU), and ``lddebug-<framework>.txt``: the
  loader's own account of each libcudnn search (``LD_DEBUG=libs`` lines that name libcudnn).

A child without a GPU runs the framework's cuDNN version check instead (torch) or nothing (jax), and says so in
its first line. ``OUTDIR/summary.json`` has each step's exit status and seconds. cudamatrix runs from the
interpreter's path (``python -m cudamatrix``, PYTHONPATH as the caller set it). Every step has a timeout and the
whole run a deadline (default 200 s): a step that would start after it is skipped and listed.

    python scripts/gpu_loader_case.py OUTDIR [--python PY] [--system-dir DIR] [--deadline S]

Standard library only: it runs where cudamatrix's dependencies may be missing.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import time

PROBE = r"""
import os, sys
fw = sys.argv[1]
said = []
try:
    if fw == "torch":
        import torch
        if torch.cuda.is_available():
            x = torch.rand(8, 16, 32, 32, device="cuda")
            w = torch.rand(32, 16, 3, 3, device="cuda")
            torch.nn.functional.conv2d(x, w, padding=1).sum().item()
            said.append("ran torch.nn.functional.conv2d on %s, cuDNN %s" % (
                torch.cuda.get_device_name(0), torch.backends.cudnn.version()))
        else:
            said.append("no GPU: torch.backends.cudnn.version() = %s" % torch.backends.cudnn.version())
    else:
        import jax
        gpus = [d for d in jax.devices() if d.platform == "gpu"]
        if gpus:
            x = jax.random.uniform(jax.random.PRNGKey(0), (8, 16, 32, 32))
            w = jax.random.uniform(jax.random.PRNGKey(1), (32, 16, 3, 3))
            jax.lax.conv(jax.device_put(x, gpus[0]), jax.device_put(w, gpus[0]), (1, 1), "SAME").block_until_ready()
            said.append("ran jax.lax.conv on %s" % gpus[0].device_kind)
        else:
            said.append("no GPU: nothing run")
except BaseException as exc:
    said.append("failed: %s: %s" % (type(exc).__name__, str(exc).splitlines()[0] if str(exc) else ""))
print("# " + "; ".join(said))
seen = set()
for line in open("/proc/self/maps"):
    parts = line.split(None, 5)
    if len(parts) == 6 and "libcudnn" in parts[5] and parts[5].strip() not in seen:
        seen.add(parts[5].strip())
        print(line.rstrip("\n"))
"""


class Run:
    """Runs the steps under one deadline and records each one's exit status and time."""

    def __init__(self, out: str, deadline: float) -> None:
        self.out, self.end, self.summary = out, time.monotonic() + deadline, {"steps": [], "skipped": []}

    def step(self, name: str, argv: list[str], env: dict[str, str], timeout: float, stdout: str,
             stderr: str | None = None) -> int | None:
        left = self.end - time.monotonic()
        if left < 5:
            self.summary["skipped"].append(name)
            return None
        start = time.monotonic()
        with open(stdout, "w") as out, open(stderr or os.devnull, "w") as err:
            try:
                rc: int | None = subprocess.run(argv, env=env, stdout=out, stderr=err, timeout=min(timeout, left),
                                                cwd="/").returncode
            except subprocess.TimeoutExpired:
                rc = None
        self.summary["steps"].append({"step": name, "rc": rc, "seconds": round(time.monotonic() - start, 2)})
        return rc


def settings(system_dir: str) -> dict[str, dict[str, str]]:
    """The two environments: as it is, and with the system cuDNN's folder first on LD_LIBRARY_PATH."""
    plain = dict(os.environ)
    old = plain.get("LD_LIBRARY_PATH")
    system = dict(plain, LD_LIBRARY_PATH=system_dir + (":" + old if old else ""))
    return {"plain": plain, "system": system}


def installed(python: str, module: str) -> bool:
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec(sys.argv[1]) is None)"
    return subprocess.run([python, "-c", probe, module], capture_output=True, timeout=60).returncode == 0


def probe(run: Run, python: str, fw: str, folder: str, env: dict[str, str]) -> None:
    """One convolution in a fresh child: its libcudnn maps lines, and ld.so's own trace of the libcudnn searches."""
    trace = os.path.join(folder, f".lddebug-{fw}")
    run.step(f"maps {fw}", [python, "-c", PROBE, fw], dict(env, LD_DEBUG="libs", LD_DEBUG_OUTPUT=trace), 120,
             os.path.join(folder, f"maps-{fw}.txt"))
    with open(os.path.join(folder, f"lddebug-{fw}.txt"), "w") as out:
        for path in sorted(glob.glob(trace + ".*")):
            with open(path, errors="replace") as fh:
                out.writelines(line for line in fh if "libcudnn" in line)
            os.unlink(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir")
    ap.add_argument("--python", default=sys.executable, help="the interpreter with the frameworks (and cudamatrix)")
    ap.add_argument("--system-dir", default="/lib/x86_64-linux-gnu")
    ap.add_argument("--deadline", type=float, default=200.0)
    args = ap.parse_args(argv)
    run = Run(args.outdir, args.deadline)
    frameworks = [fw for fw in ("torch", "jax") if installed(args.python, fw)]
    run.summary.update(python=args.python, system_dir=args.system_dir,
                       system_dir_real=os.path.realpath(args.system_dir),  # /lib -> usr/lib on merged-/usr systems
                       frameworks=frameworks,
                       system_cudnn=sorted(os.path.basename(p) for p in glob.glob(os.path.join(args.system_dir,
                                                                                               "libcudnn*.so*"))))
    cm = [args.python, "-m", "cudamatrix"]
    for setting, env in settings(args.system_dir).items():
        folder = os.path.join(args.outdir, setting)
        os.makedirs(folder, exist_ok=True)
        run.step(f"{setting} doctor", cm + ["doctor", "--json"], env, 90, os.path.join(folder, "doctor.json"))
        run.step(f"{setting} env --json", cm + ["env", "--json"], env, 90, os.path.join(folder, "env.json"))
        run.step(f"{setting} env", cm + ["env"], env, 90, os.path.join(folder, "env.txt"),
                 os.path.join(folder, "env.stderr.txt"))
        for fw in frameworks:
            probe(run, args.python, fw, folder, env)
        run.step(f"{setting} verify", cm + ["verify", "--framework", "all", "--json", "--timeout", "120"], env, 150,
                 os.path.join(folder, "verify.json"), os.path.join(folder, "verify.stderr.txt"))
    with open(os.path.join(args.outdir, "summary.json"), "w") as fh:
        json.dump(run.summary, fh, indent=1)
    print(json.dumps(run.summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
