"""Parent side of the loader child (:mod:`cudamatrix.detect._loader`): one bounded process that answers
NVML, ``cuDriverGetVersion`` and the ``ctypes`` version calls of every library copy.

A hang or a crash costs at most ``timeout`` and names the step that caused it; the remaining steps are
run again without it (at most two retries), so one broken copy does not hide the others.
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
from dataclasses import dataclass, field

from cudamatrix import proc
from cudamatrix.detect.libraries import safe_environ

_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_loader.py")


@dataclass
class LoaderAnswers:
    nvml: dict | None = None
    libcuda: dict | None = None
    libs: dict[str, dict] = field(default_factory=dict)  # path -> answer
    failed: dict[str, str] = field(default_factory=dict)  # step key -> "hung" / "crashed (signal 11)"
    error: str | None = None  # the child could not run at all


def pynvml_dir() -> str | None:
    """Folder holding the ``pynvml`` module, found without importing it."""
    try:
        spec = importlib.util.find_spec("pynvml")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    return os.path.dirname(spec.origin)


_DEFAULT_DIRS = ("/lib64", "/usr/lib64", "/lib", "/usr/lib", "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
                 "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib/wsl/lib")


def findable(soname: str, environ: dict[str, str]) -> bool:
    """Could dlopen(soname) find a file? LD_LIBRARY_PATH, the ld.so cache (its bytes), default folders.

    Lets detect skip the NVML child on machines without a driver (cheap before expensive).
    """
    dirs = [d for d in environ.get("LD_LIBRARY_PATH", "").split(":") if d] + list(_DEFAULT_DIRS)
    if any(os.path.exists(os.path.join(d, soname)) for d in dirs):
        return True
    try:
        with open("/etc/ld.so.cache", "rb") as fh:
            return soname.encode() + b"\0" in fh.read(16 * 1024 * 1024)
    except OSError:
        return os.name != "posix"  # no cache to read: let the child try


def run_loader(libs: list[tuple[str, str]], nvml: bool, libcuda: bool, timeout: float,
               python: str | None = None) -> LoaderAnswers:
    """Answer NVML (when ``nvml``), libcuda (when ``libcuda``) and each ``(path, name)`` in ``libs``."""
    answers = LoaderAnswers()
    if not (libs or nvml or libcuda):
        return answers
    config = {"nvml": nvml, "libcuda": libcuda, "pynvml_dir": pynvml_dir() if nvml else None,
              "libs": [{"path": p, "name": n} for p, n in libs], "skip": []}
    exe = python or sys.executable
    for _attempt in range(3):
        result = proc.run([exe, "-I", "-S", _SCRIPT, json.dumps(config)], timeout=timeout,
                          env=safe_environ())  # no empty, relative or world-writable LD_LIBRARY_PATH entry
        started = None
        finished = False
        for line in result.stdout.splitlines():
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if "start" in obj:
                started = obj["start"]
            elif obj.get("done"):
                finished = True
            elif obj.get("probe") == "nvml":
                answers.nvml, started = obj, None
            elif obj.get("probe") == "libcuda":
                answers.libcuda, started = obj, None
            elif obj.get("probe") == "lib":
                answers.libs[obj["path"]], started = obj, None
        if finished:
            return answers
        if started is None:  # it did not even start its first step
            answers.error = result.error or (result.stderr.strip()[-300:] or f"exit status {result.returncode}")
            return answers
        if result.timed_out:
            answers.failed[started] = f"hung (no answer within {timeout:g}s)"
        else:
            code = result.returncode
            how = f"signal {-code}" if code is not None and code < 0 else f"exit status {code}"
            answers.failed[started] = f"crashed the process ({how})"
        done = set(answers.libs) | {k for k in ("nvml", "libcuda") if getattr(answers, k) is not None}
        config["skip"] = sorted(set(config["skip"]) | done | {started})
    return answers
