"""The ld.so cache as ``ldconfig -p`` prints it: its entries in the cache's order (the order the loader searches
them), read from this machine or from a paste."""
from __future__ import annotations

import os
import re

from cudamatrix import proc
from cudamatrix.schema import record

_LDCONFIG_LINE = re.compile(r"^\s*(?P<soname>\S+)\s+\((?P<flags>[^)]*)\)(?:\s+OS ABI:[^=]*)?\s*=>\s*(?P<path>\S+)")


@record
class LdEntry:
    """One entry of ldconfig -p: SONAME, flags and path."""

    soname: str
    flags: str
    path: str


def parse_ldconfig(text: str) -> list[LdEntry]:
    """Entries of ``ldconfig -p`` output, in the cache's order (the order the loader searches)."""
    out = []
    for line in text.splitlines():
        m = _LDCONFIG_LINE.match(line)
        if m:
            out.append(LdEntry(m.group("soname"), m.group("flags"), m.group("path")))
    return out


def run_ldconfig(timeout: float) -> tuple[list[LdEntry], str | None]:
    """The ldconfig cache (``ldconfig -p``); (entries, note) where note says why it could not be read."""
    exe = proc.which("ldconfig") or next((p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig")
                                            if os.path.exists(p)), None)
    if exe is None:
        return [], "ldconfig not found"
    result = proc.run([exe, "-p"], timeout=timeout)
    if not result.ok:
        return [], f"ldconfig -p failed: {result.error or result.stderr.strip()[:200]}"
    return parse_ldconfig(result.stdout), None
