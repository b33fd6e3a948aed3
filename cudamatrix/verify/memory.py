"""The verification memory: the last result per environment fingerprint, in the user's cache folder
(``$XDG_CACHE_HOME/cudamatrix`` or ``~/.cache/cudamatrix``).

The memory is data, never code: one JSON file, written 0600 through an exclusively created temporary
file in a 0700 folder (:mod:`cudamatrix.safe.files`), read only when this user owns it and nobody else can
write it. Each entry carries an HMAC made with a secret that never leaves this user's cache folder, so a
``verify.json`` copied from elsewhere or planted without the secret proves nothing. Anything off (owner,
mode, size, bad JSON, a bad MAC, values of the wrong shape) is ignored with a note, and the memory is
rebuilt by the next write.

What a result depends on, and so what the key covers:

- the machine: host name and machine id, the driver (version, status, CUDA version), every GPU (UUID,
  name, compute capability);
- the environment: the interpreter, the installed distributions, every CUDA library copy found (path,
  version, which copy the loader takes, and the file's size and modification time), the variables that
  steer the loader;
- for a remembered "already consistent" answer of ``fix`` (:func:`fix_key`): also the request, the
  target flags (``--driver``, ``--gpu``), the installer and mirror, and the matrix files' contents.

A remembered report must also agree with the environment it is recalled for: a GPU result is not
recalled on a machine without a GPU or with other GPUs, nor for another framework version, and the
libraries the verification saw mapped must still be the same files. Every result is kept except a hang
(VERIFY_TIMEOUT), which may not happen again; ``--no-cache`` verifies again.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import time
from pathlib import Path

from cudamatrix.matrix import shipped
from cudamatrix.models import TOOL_VERSION, Environment, FrameworkReport, Report
from cudamatrix.safe.files import parse_json, read_private, write_private
from cudamatrix.safe.keys import cache_dir as folder
from cudamatrix.safe.keys import user_key

CACHE_FILE = "verify.json"
SECRET_FILE = "verify.key"  # the per-user key (cudamatrix.safe.keys)
FORMAT = 2  # the memory file's layout; another value is ignored and rebuilt
KEEP = 32  # fingerprints remembered
MAX_BYTES = 4 * 1024 * 1024
_ENV_KEYS = ("LD_LIBRARY_PATH", "LD_PRELOAD", "CUDA_VISIBLE_DEVICES", "CUDA_HOME")
_REPORT_STATUS = {"verified", "failed", "not_possible"}
_FW_STATUS = {"verified", "failed", "not_possible", "not_installed"}
_FW_PACKAGES = {"torch": ("torch",), "tensorflow": ("tensorflow", "tensorflow-cpu", "tf-nightly"), "jax": ("jax",)}


def cache_dir() -> Path:
    return folder()


def _file_identity(path: str | None) -> list:
    """(real path, size, mtime) of a file: a library replaced in place is a new environment. A file that
    cannot be read is (path, None, None): no real file has a null size."""
    if path:
        try:
            real = os.path.realpath(path)
            st = os.stat(real)
            return [real, st.st_size, st.st_mtime_ns]
        except OSError:
            pass
    return [path, None, None]


def _machine_id() -> str:
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            with open(path, "rb") as fh:
                return fh.read(64).decode("ascii", "replace").strip()
        except OSError:
            continue
    return ""


def fingerprint(environment: Environment, frameworks: str | list[str] = "all",
                extra_env: dict[str, str] | None = None) -> str:
    """A stable hash of what a verification result depends on (machine, driver, GPUs, packages, library files).

    The hashed structure is a list in a fixed order, its unordered parts (GPUs, libraries) sorted by their JSON
    text; every value is JSON-native (None for unknown), so nothing but the values themselves is hashed."""
    extra = {k: v for k, v in (extra_env or {}).items() if k in _ENV_KEYS}
    d = environment.driver
    data = [
        TOOL_VERSION,
        os.uname().nodename if hasattr(os, "uname") else "", _machine_id(),
        [d.version, d.status, d.cuda_version],
        sorted(json.dumps([g.uuid, g.name, g.compute_capability]) for g in environment.gpus),
        environment.python.executable,
        sorted(environment.packages.items()),
        sorted(json.dumps([lib.path, lib.version, lib.loaded_first, *_file_identity(lib.path)[1:]])
               for lib in environment.libraries),
        [extra.get(k, os.environ.get(k, "")) for k in _ENV_KEYS],
        frameworks if isinstance(frameworks, str) else sorted(frameworks),
    ]
    return hashlib.sha256(json.dumps(data).encode()).hexdigest()


def data_stamp(data_dir: str | None = None) -> str:
    """A hash of the matrix files' names and contents: a changed matrix (another data version) is a new
    answer (the shipped data's folder by default, found without loading the Matrix)."""
    if data_dir is None:
        data_dir = shipped.data_dir()
    digest = hashlib.sha256(os.path.abspath(data_dir).encode())
    try:
        names = sorted(e.name for e in os.scandir(data_dir) if e.is_file() and e.name.endswith(".json"))
    except OSError:
        names = []
    for name in names:
        digest.update(name.encode() + b"\0")
        try:
            with open(os.path.join(data_dir, name), "rb") as fh:
                digest.update(hashlib.sha256(fh.read(MAX_BYTES)).digest())
        except OSError:
            digest.update(b"unreadable")
    return digest.hexdigest()[:24]


def fix_key(fingerprint_: str, request: list[str], data_dir: str | None = None, *, driver: str | None = None,
            gpus: list[str] | None = None, installer: str | None = None, mirror: str | None = None) -> str:
    """The key of a remembered "already consistent" answer: the environment, the request, the target
    flags (another --driver/--gpu is another question), installer and mirror, and the matrix files."""
    parts = [fingerprint_, sorted(request), data_stamp(data_dir), driver, sorted(gpus or []), installer, mirror]
    return "fix:" + hashlib.sha256(json.dumps(parts).encode()).hexdigest()


# the file: read and write with checks

def _path() -> Path:
    return cache_dir() / CACHE_FILE


def _secret(create: bool, notes: list[str] | None) -> bytes | None:
    """This user's key (created on first write, 0600): :func:`cudamatrix.safe.keys.user_key`."""
    key, note = user_key(create)
    if note:
        _note(notes, f"verification memory: {note}" + ("" if create else "; not used"))
    return key


def _mac(secret: bytes, key: str, entry: dict) -> str:
    # JSON-native values only: the entry is written with json.dumps as it is (store)
    body = json.dumps([key, {k: v for k, v in entry.items() if k != "mac"}], sort_keys=True)
    return hmac.new(secret, body.encode(), hashlib.sha256).hexdigest()


def _note(notes: list[str] | None, text: str) -> None:
    if notes is not None and text not in notes:
        notes.append(text)


def _read(notes: list[str] | None = None) -> dict:
    """The entries whose MAC checks out; a note for anything ignored."""
    raw, note = read_private(_path(), limit=MAX_BYTES)
    if note:
        _note(notes, f"verification memory ignored ({note}); it is rebuilt")
        return {}
    if raw is None:
        return {}
    try:
        data = parse_json(raw)
    except ValueError as exc:
        _note(notes, f"verification memory ignored (not valid JSON: {str(exc)[:80]}); it is rebuilt")
        return {}
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("entries"), dict):
        _note(notes, "verification memory ignored (not in this version's format); it is rebuilt")
        return {}
    secret = _secret(False, notes)
    if secret is None:
        _note(notes, "verification memory ignored (no secret to check it with); it is rebuilt")
        return {}
    good = {}
    for key, entry in data["entries"].items():
        if isinstance(entry, dict) and isinstance(entry.get("mac"), str) and \
                hmac.compare_digest(entry["mac"], _mac(secret, key, entry)):
            good[key] = entry
        else:
            _note(notes, "verification memory: an entry not written by this user's cudamatrix was ignored")
    return good


def _report_from(entry: dict) -> Report | None:
    """A Report from a stored entry, or None when any value has the wrong shape."""
    try:
        raw, at = entry["report"], entry["at"]
        if not isinstance(raw, dict) or not isinstance(at, str) or raw.get("status") not in _REPORT_STATUS:
            return None
        frameworks = []
        for f in raw.get("frameworks", []):
            if not isinstance(f, dict) or f.get("status") not in _FW_STATUS or not isinstance(f.get("framework"), str):
                return None
            libs = f.get("mapped_libraries", [])
            if not isinstance(libs, list) or not all(isinstance(x, dict) for x in libs):
                return None
            frameworks.append(FrameworkReport(**f))
        return Report(status=raw["status"], frameworks=frameworks, cached_at=at)
    except (KeyError, TypeError, AttributeError):
        return None


def _agrees(report: Report, entry: dict, environment: Environment | None) -> bool:
    """A remembered report may be shown only for an environment it can be about."""
    for ident in entry.get("mapped", []):
        if not isinstance(ident, list) or len(ident) != 3 or _file_identity(ident[0]) != ident:
            return False  # a library the verification had mapped changed since (or is gone)
    if environment is None:
        return True
    return all(_framework_agrees(fw, environment) for fw in report.frameworks)


def _framework_agrees(fw: FrameworkReport, environment: Environment) -> bool:
    """A verified framework needs a GPU, of the name it ran on; its version must be the installed one."""
    names = {g.name for g in environment.gpus if g.name}
    if fw.status == "verified" and (not environment.gpus or (fw.device_name and names and
                                                              fw.device_name not in names)):
        return False
    installed = [v for v in (environment.packages.get(p) for p in _FW_PACKAGES.get(fw.framework, (fw.framework,)))
                 if v]
    return not (fw.version and installed and fw.version.split("+")[0] not in {v.split("+")[0] for v in installed})


def load(key: str, environment: Environment | None = None, notes: list[str] | None = None) -> Report | None:
    """The remembered Report for ``key`` with ``cached_at`` set, or None (with a note in ``notes`` when
    something was ignored). With ``environment``, a report that cannot be about it is not recalled."""
    entry = _read(notes).get(key)
    if not isinstance(entry, dict):
        return None
    report = _report_from(entry)
    if report is None:
        _note(notes, "verification memory: a malformed entry was ignored")
        return None
    if not _agrees(report, entry, environment):
        _note(notes, "verification memory: the remembered result does not match this machine any more; "
                     "verifying again")
        return None
    return report


def recall_consistent(key: str, environment: Environment | None = None,
                      notes: list[str] | None = None) -> tuple[Report, dict[str, str]] | None:
    """(the remembered Report, the library-path changes) when this environment was found consistent."""
    report = load(key, environment, notes)
    if report is None:
        return None
    env = _read(None).get(key, {}).get("env") or {}
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        return None
    return report, dict(env)


def store(key: str, report: Report, *, at: str | None = None, env: dict[str, str] | None = None,
          notes: list[str] | None = None) -> bool:
    """Remember ``report`` (not a hang). Returns whether it was written; a read-only home is no error.
    ``at``: when it was obtained (default: now); ``env``: library-path changes kept with a fix answer."""
    if any(f.finding_code == "VERIFY_TIMEOUT" for f in report.frameworks):
        return False
    secret = _secret(True, notes)
    if secret is None:
        return False
    data = _read(None)
    data.pop(key, None)
    mapped = sorted({lib["path"] for fw in report.frameworks for lib in fw.mapped_libraries
                     if isinstance(lib.get("path"), str)})
    entry = {"at": at or time.strftime("%Y-%m-%dT%H:%M:%S%z"), "report": report.to_dict(), "env": env or {},
             "mapped": [_file_identity(p) for p in mapped]}
    entry["mac"] = _mac(secret, key, entry)
    data[key] = entry
    while len(data) > KEEP:
        data.pop(next(iter(data)))
    note = write_private(_path(), json.dumps({"format": FORMAT, "entries": data}))
    if note:
        _note(notes, f"verification memory not written: {note}")
        return False
    return True
