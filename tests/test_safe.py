"""The one safe writer (cudamatrix.safe.files) on its failure paths: a write that fails after its temporary
file exists leaves no temporary file and the target as it was; a short write on a full disk is never renamed
over the target. The full disk is real where this machine allows a private mount (a 64 KiB tmpfs in a child's
own mount namespace), else an os.write that fails after a partial write."""
from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cudamatrix.errors import UsageError
from cudamatrix.safe import files

OLD = b"the old contents\n"
BIG = b"x" * 300_000


def _target(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / "out.json"
    path.write_bytes(OLD)
    path.chmod(0o640)
    return path


def _fails_on_temp(monkeypatch, folder: Path, name: str, after: int | None = None) -> list[int]:
    """Make ``os.<name>`` fail with ENOSPC on a descriptor of a file in ``folder`` (the writer's temporary
    file); for os.write, ``after`` bytes are written first and reported (a short write), then it fails."""
    real = getattr(os, name)
    written: list[int] = []

    def ours(fd: int) -> bool:
        try:
            return os.path.dirname(os.readlink(f"/proc/self/fd/{fd}")) == str(folder)
        except OSError:
            return False

    def fake(fd, *args):
        if not ours(fd):
            return real(fd, *args)
        if name == "write" and after is not None and not written:
            n = real(fd, bytes(args[0][:after]))
            written.append(n)
            return n
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, name, fake)
    return written


def _left(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd (Linux)")


@pytest.mark.parametrize("step", ["fsync", "fchmod"])
def test_a_write_that_fails_after_the_temp_file_exists_removes_it(tmp_path, monkeypatch, step):
    folder = tmp_path / "d"
    path = _target(folder)
    _fails_on_temp(monkeypatch, folder, step)
    with pytest.raises(UsageError, match="cannot be written"):
        files.write_atomic(path, BIG)
    monkeypatch.undo()
    assert path.read_bytes() == OLD and (path.stat().st_mode & 0o777) == 0o640
    assert _left(folder) == ["out.json"]  # no temporary file left behind


def test_a_short_write_on_a_full_disk_is_never_renamed(tmp_path, monkeypatch):
    folder = tmp_path / "d"
    path = _target(folder)
    written = _fails_on_temp(monkeypatch, folder, "write", after=1000)
    with pytest.raises(UsageError, match="No space left on device"):
        files.write_atomic(path, BIG)
    monkeypatch.undo()
    assert written == [1000]  # the partial write happened, and the writer asked for the rest
    assert path.read_bytes() == OLD
    assert _left(folder) == ["out.json"]


def test_short_writes_are_completed(tmp_path, monkeypatch):
    """os.write may write less than asked without failing: the writer writes the rest."""
    folder = tmp_path / "d"
    path = _target(folder)
    real = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real(fd, bytes(data[:4096])))
    files.write_atomic(path, BIG)
    monkeypatch.undo()
    assert path.read_bytes() == BIG and _left(folder) == ["out.json"]


def test_a_private_write_that_fails_returns_a_note_and_keeps_the_old_file(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    path = _target(folder)
    path.chmod(0o600)
    _fails_on_temp(monkeypatch, folder, "write", after=10)
    note = files.write_private(path, BIG)
    monkeypatch.undo()
    assert note and "cannot be written" in note and "No space left" in note
    assert path.read_bytes() == OLD and _left(folder) == ["out.json"]
    assert files.read_private(path) == (OLD, None)


def test_write_atomic_keeps_the_mode_and_replaces_atomically(tmp_path):
    folder = tmp_path / "d"
    path = _target(folder)
    assert files.write_atomic(path, "new") == str(path)
    assert path.read_text() == "new" and (path.stat().st_mode & 0o777) == 0o640 and _left(folder) == ["out.json"]
    fresh = folder / "fresh.txt"
    files.write_atomic(fresh, b"1", mode=0o600)
    assert (fresh.stat().st_mode & 0o777) == 0o600


FULL_DISK = r"""
import json, os, sys
from cudamatrix.errors import UsageError
from cudamatrix.safe import files
mnt = sys.argv[1]
os.makedirs(mnt + "/p", mode=0o700)
out = {}
for name, write in (("atomic", files.write_atomic), ("private", files.write_private)):
    path = os.path.join(mnt, "p" if name == "private" else "", name + ".json")
    with open(path, "wb") as fh:
        fh.write(b"old")
    os.chmod(path, 0o600)
    try:
        out[name] = {"note": write(path, b"x" * 1_000_000)}
    except UsageError as exc:
        out[name] = {"error": exc.message}
    out[name]["content"] = open(path, "rb").read().decode()
    out[name]["left"] = sorted(os.listdir(os.path.dirname(path)))
print(json.dumps(out))
"""


def test_a_real_full_disk_leaves_the_target_and_no_temp_file(tmp_path):
    """A 64 KiB tmpfs in a child's own mount namespace (root only): a 1 MB write fails with ENOSPC part way."""
    if shutil.which("unshare") is None or not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("needs unshare and root (a private tmpfs)")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    script = 'mount -t tmpfs -o size=64k tmpfs "$1" && exec "$2" -c "$3" "$1"'
    out = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", str(mnt),
                          sys.executable, FULL_DISK], capture_output=True, text=True, timeout=120)
    if out.returncode != 0 and "mount" in out.stderr:
        pytest.skip(f"no private mounts here: {out.stderr.strip()[:200]}")
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout)
    assert "No space left on device" in got["atomic"]["error"], got
    assert got["atomic"]["content"] == "old" and got["atomic"]["left"] == ["atomic.json", "p"], got
    assert "No space left on device" in got["private"]["note"], got
    assert got["private"]["content"] == "old" and got["private"]["left"] == ["private.json"], got
