"""Host memory and disk headroom: ``/proc/meminfo`` (MemTotal, MemAvailable: the kernel's estimate of memory
available without swapping, proc(5)) and ``statvfs`` of the places an install writes to (site-packages, the
temp folder, pip's cache). Two file reads and a few system calls: well under a millisecond."""
from __future__ import annotations

import os

from cudamatrix.models import DiskSpace, HostResources


def read_meminfo(text: str) -> tuple[int | None, int | None]:
    """(MemTotal, MemAvailable) in MiB from the text of /proc/meminfo (values are in kB)."""
    values = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            values[key.strip()] = int(parts[0]) // 1024
    return values.get("MemTotal"), values.get("MemAvailable")


def probe(site_packages: list[str], environ: dict[str, str], root: str = "/") -> HostResources:
    """Memory and the free space where an install writes; each unreadable part stays empty."""
    host = HostResources()
    try:
        with open(os.path.join(root, "proc", "meminfo")) as fh:
            host.memory_total_mib, host.memory_available_mib = read_meminfo(fh.read())
    except OSError:
        pass
    xdg = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    places = [("site-packages", site_packages[-1] if site_packages else None), ("temp", _temp_dir(environ)),
              ("pip cache", environ.get("PIP_CACHE_DIR") or os.path.join(xdg, "pip"))]
    seen: set[int] = set()
    for purpose, path in places:
        if not path:
            continue
        where = os.path.abspath(path)
        while not os.path.exists(where) and os.path.dirname(where) != where:
            where = os.path.dirname(where)
        try:
            st, dev = os.statvfs(where), os.stat(where).st_dev
        except OSError:
            continue
        if dev in seen:  # one file system: reported once, under its first purpose
            continue
        seen.add(dev)
        host.disks.append(DiskSpace(purpose=purpose, path=path, free_mib=st.f_bavail * st.f_frsize // 2 ** 20,
                                    total_mib=st.f_blocks * st.f_frsize // 2 ** 20))
    return host


def _temp_dir(environ: dict[str, str]) -> str:
    """The folder tempfile would pick first (TMPDIR, TEMP, TMP, then /tmp), without importing tempfile (which
    costs start-up time and creates a file to test each candidate)."""
    for var in ("TMPDIR", "TEMP", "TMP"):
        if environ.get(var):
            return environ[var]
    return "/tmp"
