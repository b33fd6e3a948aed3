"""What the library scan and the loader model read from ELF files, kept across runs in the user cache (issue #29).

The facts of one file (:class:`cudamatrix.ldso.elf.Dynamic`, as :mod:`cudamatrix.ldso.elf` encodes it: machine, soname, DT_NEEDED, RPATH, RUNPATH,
NODEFLIB, interpreter, or why it is not readable) are kept under its path with the stat stamp they were read
at: size, modification time, change time, inode and device. A stamp that differs in any of them means the
file may have changed, and it is read again; the change time cannot be set back by a user, so a file
rewritten and its modification time restored is still read again. Nothing else is trusted: an entry whose
fields are not exactly of their types is ignored, the file is JSON (never code, never executed), private
(0600 in a 0700 folder of this user, :func:`cudamatrix.safe.files.read_private` refuses anything else),
bounded (:data:`MAX_ENTRIES` files, :data:`LIMIT` bytes) and safe to delete: without it every file is read.
"""
from __future__ import annotations

import json
import os
from typing import Any, Callable

from cudamatrix.safe.files import parse_json, read_private, write_private
from cudamatrix.safe.keys import cache_dir

FILE = "elf-facts.json"
VERSION = 1
MAX_ENTRIES = 1024  # the loader model of a torch + JAX install reads about 300 objects
LIMIT = 1 << 20

_entries: dict[str, Any] | None = None
_fresh: dict[str, list] = {}
_used: set[str] = set()


def _path() -> str:
    return os.path.join(cache_dir(), FILE)


def _load() -> dict[str, Any]:
    global _entries
    if _entries is None:
        found: dict[str, Any] = {}
        raw, _note = read_private(_path(), limit=LIMIT)
        if raw is not None:
            try:
                doc = parse_json(raw, max_depth=6)
                if isinstance(doc, dict) and doc.get("version") == VERSION and isinstance(doc.get("files"), dict):
                    found = doc["files"]
            except ValueError:
                pass  # a broken cache is no cache
        _entries = found
    return _entries


def stamp(st: os.stat_result) -> list[int]:
    """What proves a file unchanged since it was read."""
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def recall(path: str, st: os.stat_result, decode: Callable[[Any], Any]) -> Any:
    """The kept facts of ``path`` when its stamp is still ``st``'s, as ``decode`` makes them from the kept JSON
    value (None: a value of the wrong shape, read again), else None."""
    row = _load().get(path)
    if not isinstance(row, list) or len(row) != 2 or row[0] != stamp(st):
        return None
    value = decode(row[1])
    if value is not None:
        _used.add(path)
    return value


def remember(path: str, st: os.stat_result, encoded: Any) -> None:
    """Keep the JSON value of what was just read from ``path`` (written by :func:`save`); None keeps nothing."""
    if encoded is not None:
        _fresh[path] = [stamp(st), encoded]


def save() -> str | None:
    """Write the cache when this run read files it did not hold: the files read now first, then those recalled,
    then older ones, up to :data:`MAX_ENTRIES`. Returns None, or a note saying why it was not written."""
    global _entries
    if not _fresh:
        return None
    old = _load()
    files = dict(list(_fresh.items())[:MAX_ENTRIES])
    for group in ([p for p in old if p in _used], list(old)):
        for p in group:
            if len(files) >= MAX_ENTRIES:
                break
            files.setdefault(p, old[p])
    text = json.dumps({"version": VERSION, "files": files}, separators=(",", ":"))
    if len(text) > LIMIT:
        files = dict(list(files.items())[:len(_fresh)])
        text = json.dumps({"version": VERSION, "files": files}, separators=(",", ":"))
    _fresh.clear()
    _entries = files
    return write_private(_path(), text) if len(text) <= LIMIT else "too many facts to keep"


def forget() -> None:
    """Drop what this process loaded and read (tests; a cache file removed by hand is read again)."""
    global _entries
    _entries = None
    _fresh.clear()
    _used.clear()
