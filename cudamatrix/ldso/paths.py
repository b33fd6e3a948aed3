"""Real paths for the library scan and the loader model, each folder resolved once per detection.

``os.path.realpath`` walks every component of a path with one ``lstat`` each: a file ten folders deep costs
ten system calls, and the scan asks about the same few folders (``site-packages/nvidia/*/lib``, the ldconfig
folders) hundreds of times; on a container's overlay file system that was a third of doctor's time on the GPU
machine (issue #29). Here a folder's real path is remembered, so a file costs one ``lstat``, and a symbolic
link is followed through the same memory. The answers are those of ``os.path.realpath`` (non-strict: a name
that does not exist stays as joined). :func:`forget` starts afresh: detect calls it once per run, so a
long-lived process (a notebook kernel that runs ``fix()`` twice) never sees a folder's old answer.
"""
from __future__ import annotations

import os
import stat

_FOLDERS: dict[str, str] = {}
_MAX_LINKS = 40  # the kernel's own limit on links followed in one lookup (path_resolution(7))


def forget() -> None:
    """Drop every remembered folder (start of a detection)."""
    _FOLDERS.clear()


def _folder(path: str) -> str:
    real = _FOLDERS.get(path)
    if real is None:
        real = _FOLDERS[path] = os.path.realpath(path)
    return real


def realpath(path: str) -> str:
    """``os.path.realpath(path)``, with the real path of each folder remembered."""
    for _ in range(_MAX_LINKS):
        if ".." in path.split(os.sep):  # "link/.." is the link's target's parent: never collapsed by name
            return os.path.realpath(path)
        folder, name = os.path.split(os.path.abspath(path))
        if not name:
            return os.path.realpath(path)
        candidate = os.path.join(_folder(folder), name)
        try:
            if not stat.S_ISLNK(os.lstat(candidate).st_mode):
                return candidate
            target = os.readlink(candidate)
        except OSError:
            return candidate
        path = os.path.join(os.path.dirname(candidate), target)
    return os.path.realpath(path)  # a loop, or a very long chain: the standard answer, whatever it is


def matching(names: list[str], pattern: str) -> list[str]:
    """``fnmatch.filter(names, pattern)`` as on POSIX (case-sensitive), names starting with "." left out as glob
    leaves them. A pattern of literal text and ``*`` (``_C.*.so``), with at most one closing class
    (``libcublas.so.*[0-9]``), is matched with string methods: fnmatch compiles a regular expression per
    pattern, about half a millisecond each in a cold interpreter, and the loader model asks some twenty
    (issue #29). Any other pattern goes to fnmatch."""
    names = [n for n in names if not n.startswith(".")]
    body, last = pattern, None
    if pattern.endswith("]") and "[" in pattern:
        body, _, cls = pattern[:-1].rpartition("[")
        last = _char_class(cls)
        if last is None:
            body = pattern
    if any(c in body for c in "?[]"):
        import fnmatch

        return fnmatch.filter(names, pattern)
    if last is None:
        return [n for n in names if _star(n, body)]
    return [n for n in names if n and last(n[-1]) and _star(n[:-1], body)]


def _char_class(cls: str):
    """A test for one character of ``[cls]`` when it is plain characters and ``a-b`` ranges; None otherwise."""
    if not cls or cls[0] in "!^]" or any(c in cls for c in "[]\\"):
        return None
    ranges, i = [], 0
    while i < len(cls):
        if i + 2 < len(cls) and cls[i + 1] == "-":
            ranges.append((cls[i], cls[i + 2]))
            i += 3
        elif cls[i] == "-":
            return None  # a dash at an end means itself: fnmatch's reading
        else:
            ranges.append((cls[i], cls[i]))
            i += 1
    return lambda c: any(a <= c <= b for a, b in ranges)


def _star(name: str, pattern: str) -> bool:
    """``name`` matches ``pattern`` of literal text and ``*`` (any run of characters, "/" and "." included)."""
    parts = pattern.split("*")
    if len(parts) == 1:
        return name == pattern
    head, tail = parts[0], parts[-1]
    if len(name) < len(head) + len(tail) or not name.startswith(head) or not name.endswith(tail):
        return False
    pos, end = len(head), len(name) - len(tail)
    for part in parts[1:-1]:
        found = name.find(part, pos, end)
        if found < 0:
            return False
        pos = found + len(part)
    return True


def glob_one(folder: str, pattern: str, dirs: bool = False, names: list[str] | None = None) -> list[str]:
    """``glob.glob(os.path.join(folder, pattern))`` for a pattern without "/", in the folder's order (``dirs``:
    only folders, as glob keeps for a pattern that goes on below them; ``names``: the folder's listing, when the
    caller has read it already)."""
    if names is None:
        try:
            names = os.listdir(folder)
        except OSError:
            return []
    out = [os.path.join(folder, n) for n in matching(names, pattern)]
    return [p for p in out if os.path.isdir(p)] if dirs else out


def read_text(path: str, limit: int = 1 << 20) -> str:
    """A text file's first ``limit`` characters, "" when it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(limit)
    except OSError:
        return ""
