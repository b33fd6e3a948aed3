"""Host headroom in doctor: /proc/meminfo and statvfs read by detect, LOW_DISK / LOW_HOST_MEMORY by diagnose."""
from __future__ import annotations

import os

from cudamatrix.detect import resources
from cudamatrix.diagnose.findings import diagnose
from cudamatrix.matrix.load import load_matrix
from cudamatrix.models import DiskSpace, Environment, HostResources

# the first lines of /proc/meminfo as proc(5) documents them (values in kB)
MEMINFO = "MemTotal:       24683852 kB\nMemFree:          512000 kB\nMemAvailable:    1048576 kB\nBuffers: 1 kB\n"


def test_meminfo_and_statvfs_from_a_fake_root(tmp_path):
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "meminfo").write_text(MEMINFO)
    site = tmp_path / "site"
    site.mkdir()
    host = resources.probe([str(site)], {"PIP_CACHE_DIR": str(tmp_path / "cache")}, root=str(tmp_path))
    assert (host.memory_total_mib, host.memory_available_mib) == (24683852 // 1024, 1024)
    st = os.statvfs(site)
    assert host.disks[0].purpose == "site-packages"
    assert abs(host.disks[0].free_mib - st.f_bavail * st.f_frsize // 2 ** 20) <= 64  # the same disk, moments apart
    assert len({d.path for d in host.disks}) == len(host.disks)  # one entry per file system


def test_low_disk_and_low_memory_findings():
    matrix = load_matrix()
    tight = Environment(host=HostResources(memory_total_mib=24000, memory_available_mib=1024,
                                           disks=[DiskSpace("site-packages", "/venv/lib", 3000, 100000)]))
    codes = {f.code: f for f in diagnose(tight, matrix)}
    assert codes["LOW_DISK"].severity == "warning" and "2.9 GiB" in codes["LOW_DISK"].title
    assert "1024 MiB of 24000 MiB" in codes["LOW_HOST_MEMORY"].title
    roomy = Environment(host=HostResources(memory_total_mib=24000, memory_available_mib=20000,
                                           disks=[DiskSpace("site-packages", "/venv/lib", 50000, 100000)]))
    assert not {"LOW_DISK", "LOW_HOST_MEMORY"} & {f.code for f in diagnose(roomy, matrix)}
    assert not {"LOW_DISK", "LOW_HOST_MEMORY"} & {f.code for f in diagnose(Environment(), matrix)}  # unread: silent
