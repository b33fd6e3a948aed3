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
