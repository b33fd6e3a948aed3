"""Ctrl-C from inside a plan's step, sent only once the parent is ready for it.

A step that signals its parent at once can do so before the parent has recorded it (on a loaded machine the
child may run first): :data:`WHEN_RECORDED` is Python for the start of such a step, which waits until the
journal names this process as the running installer (the parent writes that just before it waits on it), then
goes on. It waits at most two minutes, then goes on anyway (the test then fails on what it checks)."""
from __future__ import annotations

WHEN_RECORDED = """
import glob, json, os, time
_root = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
_deadline = time.monotonic() + 120
def _recorded():
    for name in glob.glob(os.path.join(_root, "cudamatrix", "journal", "*", "journal.json")):
        try:
            if json.load(open(name)).get("child_pgid") == os.getpgrp():
                return True
        except (OSError, ValueError):
            pass
    return False
while not _recorded() and time.monotonic() < _deadline:
    time.sleep(0.05)
"""
