"""The verification cache: the last result per environment fingerprint, in the user's cache folder
(``$XDG_CACHE_HOME/cudamatrix`` or ``~/.cache/cudamatrix``).

The fingerprint covers what a verification depends on: the driver, the GPUs, the installed
distributions, the CUDA library files (path and version) and the variables that steer the loader.
Every result is kept except a hang (VERIFY_TIMEOUT), which may not happen again; ``--no-cache``
verifies again.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from cudamatrix.models import Environment, FrameworkReport, Report

CACHE_FILE = "verify.json"
KEEP = 32  # fingerprints remembered
_ENV_KEYS = ("LD_LIBRARY_PATH", "LD_PRELOAD", "CUDA_VISIBLE_DEVICES", "CUDA_HOME")


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "cudamatrix"


def fingerprint(environment: Environment, frameworks: str | list[str] = "all",
                extra_env: dict[str, str] | None = None) -> str:
    """A stable hash of what a verification result depends on."""
    from cudamatrix import __version__

    env_vars = {k: os.environ.get(k, "") for k in _ENV_KEYS}
    env_vars.update({k: v for k, v in (extra_env or {}).items() if k in _ENV_KEYS})
    d = environment.driver
    data = {
        "cudamatrix": __version__,
        "driver": [d.version, d.status, d.cuda_version],
        "gpus": sorted([g.uuid or "", g.name or "", g.compute_capability or ""] for g in environment.gpus),
        "python": environment.python.executable,
        "packages": sorted(environment.packages.items()),
        "libraries": sorted([lib.path, lib.version or "", lib.loaded_first] for lib in environment.libraries),
        "env": env_vars,
        "frameworks": frameworks if isinstance(frameworks, str) else sorted(frameworks),
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def data_stamp(data_dir: str | None = None) -> str:
    """Names, sizes and modification times of the matrix files: a changed matrix is a new answer.
    (Where the shipped data lies follows ``matrix.default_data_dir``, without importing the matrix.)"""
    if data_dir is None:
        here = Path(__file__).resolve().parent
        data_dir = str(here / "data" if (here / "data").is_dir() else here.parent / "data")
    try:
        entries = sorted((e.name, e.stat().st_size, e.stat().st_mtime_ns) for e in os.scandir(data_dir) if e.is_file())
    except OSError:
        entries = []
    return hashlib.sha256(json.dumps([data_dir, entries]).encode()).hexdigest()[:16]


def fix_key(fingerprint_: str, request: list[str], data_dir: str | None = None) -> str:
    """The key of a remembered "already consistent" answer: environment, request and matrix."""
    return "fix:" + hashlib.sha256(json.dumps([fingerprint_, sorted(request), data_stamp(data_dir)]).encode()).hexdigest()


def recall_consistent(key: str) -> tuple[Report, dict[str, str]] | None:
    """(the remembered Report, the library-path changes) when this environment was found consistent."""
    entry = _read().get(key)
    report = load(key)
    if report is None:
        return None
    return report, dict(entry.get("env") or {})


def _path() -> Path:
    return cache_dir() / CACHE_FILE


def _read() -> dict:
    try:
        data = json.loads(_path().read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def load(key: str) -> Report | None:
    """The remembered Report for ``key`` with ``cached_at`` set, or None."""
    entry = _read().get(key)
    if not isinstance(entry, dict):
        return None
    try:
        raw = entry["report"]
        frameworks = [FrameworkReport(**f) for f in raw.get("frameworks", [])]
        return Report(status=raw["status"], frameworks=frameworks, cached_at=entry["at"])
    except (KeyError, TypeError):
        return None


def store(key: str, report: Report, *, at: str | None = None, env: dict[str, str] | None = None) -> bool:
    """Remember ``report`` (not a hang). Returns whether it was written; a read-only home is no error.
    ``at``: when it was obtained (default: now); ``env``: library-path changes kept with a fix answer."""
    if any(f.finding_code == "VERIFY_TIMEOUT" for f in report.frameworks):
        return False
    data = _read()
    data.pop(key, None)
    data[key] = {"at": at or time.strftime("%Y-%m-%dT%H:%M:%S%z"), "report": report.to_dict(), "env": env or {}}
    while len(data) > KEEP:
        data.pop(next(iter(data)))
    path = _path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(path)
    except OSError:
        return False
    return True
