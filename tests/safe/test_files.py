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


def _fails_on_temp(oswrap, folder: Path, name: str, after: int | None = None) -> list[int]:
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

    oswrap.setattr(os, name, fake)
    return written


def _left(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd (Linux)")


@pytest.fixture
def oswrap():
    """A MonkeyPatch of its own for os.*: its undo() leaves the test's private home (conftest) alone."""
    with pytest.MonkeyPatch.context() as mp:
        yield mp


@pytest.mark.parametrize("step", ["fsync", "fchmod"])
def test_a_write_that_fails_after_the_temp_file_exists_removes_it(tmp_path, oswrap, step):
    folder = tmp_path / "d"
    path = _target(folder)
    _fails_on_temp(oswrap, folder, step)
    with pytest.raises(UsageError, match="cannot be written"):
        files.write_atomic(path, BIG)
    oswrap.undo()
    assert path.read_bytes() == OLD and (path.stat().st_mode & 0o777) == 0o640
    assert _left(folder) == ["out.json"]  # no temporary file left behind


def test_a_short_write_on_a_full_disk_is_never_renamed(tmp_path, oswrap):
    folder = tmp_path / "d"
    path = _target(folder)
    written = _fails_on_temp(oswrap, folder, "write", after=1000)
    with pytest.raises(UsageError, match="No space left on device"):
        files.write_atomic(path, BIG)
    oswrap.undo()
    assert written == [1000]  # the partial write happened, and the writer asked for the rest
    assert path.read_bytes() == OLD
    assert _left(folder) == ["out.json"]


def test_short_writes_are_completed(tmp_path, oswrap):
    """os.write may write less than asked without failing: the writer writes the rest."""
    folder = tmp_path / "d"
    path = _target(folder)
    real = os.write
    oswrap.setattr(os, "write", lambda fd, data: real(fd, bytes(data[:4096])))
    files.write_atomic(path, BIG)
    oswrap.undo()
    assert path.read_bytes() == BIG and _left(folder) == ["out.json"]


def test_a_private_write_that_fails_returns_a_note_and_keeps_the_old_file(tmp_path, oswrap):
    folder = tmp_path / "cache"
    path = _target(folder)
    path.chmod(0o600)
    _fails_on_temp(oswrap, folder, "write", after=10)
    note = files.write_private(path, BIG)
    oswrap.undo()
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


# --- reads: bounded, and only of regular files --------------------------------------------------------------

def test_read_bytes_reads_a_regular_file_up_to_its_limit(tmp_path):
    f = tmp_path / "a.txt"
    f.write_bytes(b"x" * 100)
    assert files.read_bytes(f) == b"x" * 100
    assert files.read_bytes(f, limit=100) == b"x" * 100
    with pytest.raises(UsageError, match=r"^input a\.txt|larger than 99 bytes") as err:
        files.read_bytes(f, limit=99, what="input")
    assert err.value.message == f"input {f} is larger than 99 bytes"
    assert files.read_bytes(f, limit=10, truncate=True) == b"x" * 10
    assert files.read_text(f, limit=100) == "x" * 100
    (tmp_path / "u.txt").write_bytes(b"\xffok")
    assert files.read_text(tmp_path / "u.txt") == "\ufffdok"
    big = tmp_path / "big"
    big.write_bytes(b"y" * (2 * 1024 * 1024))
    with pytest.raises(UsageError, match="is larger than 1 MB"):
        files.read_bytes(big, limit=1024 * 1024)


def test_read_bytes_stops_at_its_limit_when_the_size_lies(tmp_path):
    """A file that grows (or a /proc file whose size says 0) is still read at most limit + 1 bytes."""
    proc = "/proc/self/status"
    if not os.path.exists(proc):
        pytest.skip("needs /proc")
    assert 0 < len(files.read_bytes(proc)) < files.MAX_READ
    with pytest.raises(UsageError, match="larger than 10 bytes"):
        files.read_bytes(proc, limit=10)
    assert len(files.read_bytes(proc, limit=10, truncate=True)) == 10


@pytest.mark.parametrize("kind", ["missing", "empty path", "folder", "fifo", "device"])
def test_read_bytes_refuses_what_is_not_a_regular_file(tmp_path, kind):
    path = {"missing": tmp_path / "nope", "empty path": "", "folder": tmp_path, "fifo": tmp_path / "fifo",
            "device": "/dev/zero"}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    words = {"missing": "cannot read report", "empty path": "report: an empty path was given",
             "folder": "is a folder, not a regular file", "fifo": "is a FIFO (named pipe), not a regular file",
             "device": "is a character device, not a regular file"}[kind]
    with pytest.raises(UsageError) as err:
        files.read_bytes(path, what="report")
    assert words in err.value.message


def test_kind_of_names_every_kind():
    import stat

    assert files.kind_of(stat.S_IFREG | 0o644) is None
    assert files.kind_of(stat.S_IFDIR) == "a folder" and files.kind_of(stat.S_IFIFO) == "a FIFO (named pipe)"
    assert files.kind_of(stat.S_IFCHR) == "a character device" and files.kind_of(stat.S_IFBLK) == "a block device"
    assert files.kind_of(stat.S_IFSOCK) == "a socket" and files.kind_of(stat.S_IFLNK) == "a symlink"
    assert files.kind_of(0) == "not a regular file"


@pytest.mark.parametrize("text,depth,ok", [
    ('{"a": [1, {"b": 2}]}', 3, True), ('{"a": [1, {"b": 2}]}', 2, False), ("[[[]]]", 3, True),
    ("[[[]]]", 2, False), ('{"a": 1, "b": {"c": {}}}', 3, True), ('{"a": 1, "b": {"c": {}}}', 2, False),
    ("[1, 2, 3]", 1, True), ('"x"', 1, True), ("[[], [[]]]", 2, False),
])
def test_parse_json_depth(text, depth, ok):
    if ok:
        assert files.parse_json(text, max_depth=depth) == json.loads(text)
    else:
        with pytest.raises(ValueError, match=f"nested more than {depth} levels deep"):
            files.parse_json(text, max_depth=depth)


def test_parse_json_turns_every_bad_input_into_value_error():
    for bad in ("[" * 100_000 + "]" * 100_000, "{", b"\xff\xfe{", "9" * 5000):
        with pytest.raises(ValueError):
            files.parse_json(bad)
    assert files.parse_json(b'{"a": 1}') == {"a": 1}


# --- writes: links, kinds and modes -----------------------------------------------------------------------

def test_write_atomic_follows_a_link_unless_told_not_to(tmp_path):
    real = tmp_path / "real.txt"
    real.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    assert files.write_atomic(link, "via link") == str(real)
    assert real.read_text() == "via link" and link.is_symlink()
    out = files.write_atomic(link, "replaced", follow_links=False)
    assert out == str(link) and not link.is_symlink() and link.read_text() == "replaced"
    assert real.read_text() == "via link"  # the link's target is never touched


@pytest.mark.parametrize("kind", ["folder", "fifo", "empty path"])
def test_write_atomic_refuses_what_it_must_not_replace(tmp_path, kind):
    path = {"folder": tmp_path / "d", "fifo": tmp_path / "f", "empty path": ""}[kind]
    if kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    with pytest.raises(UsageError) as err:
        files.write_atomic(path, "x")
    assert {"folder": "is a folder; it was not replaced", "fifo": "is a FIFO (named pipe); it was not replaced",
            "empty path": "an empty output path was given"}[kind] in err.value.message
    if kind != "empty path":
        assert err.value.hint == "give the path of a regular file"
        assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no temp file


def test_write_atomic_new_file_mode_follows_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        files.write_atomic(tmp_path / "n.txt", "x")
    finally:
        os.umask(old)
    assert (tmp_path / "n.txt").stat().st_mode & 0o777 == 0o640
    assert os.umask(old) == old  # the umask is as it was


def test_write_atomic_in_a_missing_folder_is_a_clean_error(tmp_path):
    with pytest.raises(UsageError, match="cannot be written"):
        files.write_atomic(tmp_path / "no" / "such" / "x.txt", "x")


def test_private_files_refuse_links_open_modes_and_other_kinds(tmp_path):
    folder = tmp_path / "p"
    assert files.private_dir(folder) is None and folder.stat().st_mode & 0o777 == 0o700
    folder.chmod(0o755)
    assert files.private_dir(folder) is None and folder.stat().st_mode & 0o777 == 0o700  # closed again
    assert files.write_private(folder / "k", b"secret") is None
    assert (folder / "k").stat().st_mode & 0o777 == 0o600 and files.read_private(folder / "k") == (b"secret", None)
    assert files.read_private(folder / "absent") == (None, None)
    assert files.read_private(tmp_path / "nofolder" / "k") == (None, None)
    (folder / "k").chmod(0o640)
    raw, note = files.read_private(folder / "k")
    assert raw is None and "has mode 0640: others may read or change it" in note
    (folder / "k").chmod(0o600)
    (folder / "l").symlink_to(folder / "k")
    raw, note = files.read_private(folder / "l")
    assert raw is None and "a symlink is not followed" in note
    note = files.write_private(folder / "l", b"x")
    assert note and "is a symlink; the cache was not written" in note and (folder / "k").read_bytes() == b"secret"
    os.mkfifo(folder / "f")
    raw, note = files.read_private(folder / "f")
    assert raw is None and "is a FIFO (named pipe), not a file" in note
    (folder / "big").write_bytes(b"z" * 100)
    (folder / "big").chmod(0o600)
    raw, note = files.read_private(folder / "big", limit=99)
    assert raw is None and note
    assert files.read_private(folder / "big", limit=100) == (b"z" * 100, None)
    open_folder = tmp_path / "open"
    open_folder.mkdir(mode=0o777)
    open_folder.chmod(0o777)
    (open_folder / "k").write_bytes(b"x")
    raw, note = files.read_private(open_folder / "k")
    assert raw is None and "has mode 0777: others may change it" in note


# --- the per-user key (cudamatrix.safe.keys) -----------------------------------------------------------------

def test_the_key_folder_is_xdg_cache_home_else_home_dot_cache(monkeypatch, tmp_path):
    from cudamatrix.safe import keys

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert keys.cache_dir() == tmp_path / "xdg" / "cudamatrix"
    monkeypatch.setenv("XDG_CACHE_HOME", "")  # set but empty: the default (XDG Base Directory spec)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert keys.cache_dir() == tmp_path / "home" / ".cache" / "cudamatrix"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert keys.cache_dir() == tmp_path / "home" / ".cache" / "cudamatrix"


def test_sign_is_an_hmac_of_canonical_json():
    import hashlib
    import hmac

    from cudamatrix.safe import keys

    key = b"k" * 32
    value = {"b": [1, 2], "a": "é", "when": Path("/x")}
    body = '{"a":"\\u00e9","b":[1,2],"when":"/x"}'
    assert keys.sign(key, value) == hmac.new(key, body.encode(), hashlib.sha256).hexdigest()
    assert keys.signed(key, value, keys.sign(key, value))
    assert not keys.signed(b"j" * 32, value, keys.sign(key, value))
    assert not keys.signed(key, value, None) and not keys.signed(key, {**value, "b": [2, 1]}, keys.sign(key, value))


def test_the_key_is_created_once_private_and_refused_when_unsafe():
    from cudamatrix.safe import keys

    assert keys.user_key(create=False) == (None, None)  # none yet, none made
    assert not (keys.cache_dir() / keys.KEY_FILE).exists()
    key, note = keys.user_key(create=True)
    path = keys.cache_dir() / keys.KEY_FILE
    assert note is None and len(key) == 32 and path.read_bytes() == key and path.stat().st_mode & 0o777 == 0o600
    assert keys.user_key(create=True) == (key, None) and keys.user_key(create=False) == (key, None)
    path.write_bytes(b"short")  # a truncated key is made again
    again, _ = keys.user_key(create=True)
    assert again != key and len(again) == 32
    path.chmod(0o644)
    got, note = keys.user_key(create=True)
    assert got is None and "others may read or change it" in note
    assert path.stat().st_mode & 0o777 == 0o644  # left as it is


# --- descriptors, temporary names and exact messages (issue #28: the survivors of the mutation run) ----------

@pytest.mark.parametrize("flag", ["O_NOFOLLOW"])
def test_reads_and_writes_work_where_os_lacks_a_flag(tmp_path, oswrap, flag):
    """Windows has no O_NOFOLLOW: the reader and the writer open without it."""
    folder = tmp_path / "p"
    assert files.private_dir(folder) is None
    oswrap.delattr(os, flag)
    assert files.write_private(folder / "k", b"secret") is None
    assert files.read_private(folder / "k") == (b"secret", None)
    assert files.read_bytes(folder / "k") == b"secret"
    assert files.write_atomic(tmp_path / "out.txt", "new") == str(tmp_path / "out.txt")
    oswrap.undo()
    assert (tmp_path / "out.txt").read_text() == "new" and (folder / "k").stat().st_mode & 0o777 == 0o600


def test_the_temporary_file_is_private_while_the_data_is_written(tmp_path, oswrap):
    """The temporary file is 0600 from its creation: a secret being written is never readable by others, not
    even before the final mode is set."""
    folder = tmp_path / "d"
    path = _target(folder)
    real = os.write
    modes: list[int] = []

    def spy(fd, data):
        modes.append(os.fstat(fd).st_mode & 0o777)
        return real(fd, data)

    oswrap.setattr(os, "write", spy)
    files.write_atomic(path, b"new")
    oswrap.undo()
    assert modes == [0o600] and path.read_bytes() == b"new" and path.stat().st_mode & 0o777 == 0o640


def _fixed_random(oswrap, collide: int) -> list[int]:
    """os.urandom gives the same 8 bytes ``collide`` times, then other ones; returns the sizes asked."""
    real = os.urandom
    asked: list[int] = []

    def fake(n):
        asked.append(n)
        return b"\x11" * n if len(asked) <= collide else real(n)

    oswrap.setattr(os, "urandom", fake)
    return asked


def test_a_link_planted_at_the_temporary_name_is_never_followed(tmp_path, oswrap):
    """The temporary file's name is hidden, made from the target's name cut to 64 characters and 16 random hex
    digits; a link planted at that name is never opened: the writer takes the next random name."""
    folder = tmp_path / "d"
    folder.mkdir()
    base = "n" * 80 + ".json"
    victim = tmp_path / "victim"
    victim.write_bytes(b"untouched")
    planted = folder / f".{base[:64]}.{'11' * 8}.tmp"
    planted.symlink_to(victim)
    asked = _fixed_random(oswrap, collide=1)
    files.write_atomic(folder / base, b"data")
    oswrap.undo()
    assert asked == [8, 8]  # 8 random bytes per name, a second name after the collision
    assert victim.read_bytes() == b"untouched" and planted.is_symlink()
    assert (folder / base).read_bytes() == b"data" and sorted(p.name for p in folder.iterdir()) == sorted(
        [base, planted.name])


def test_a_dangling_link_planted_at_the_temporary_name_creates_nothing(tmp_path, oswrap):
    """O_CREAT alone would create the file a dangling link points to; with O_EXCL the name is refused (POSIX
    open()) and the writer takes the next random name."""
    folder = tmp_path / "d"
    folder.mkdir()
    victim = tmp_path / "created-through-the-link"
    planted = folder / f".out.json.{'11' * 8}.tmp"
    planted.symlink_to(victim)
    _fixed_random(oswrap, collide=1)
    files.write_atomic(folder / "out.json", b"data")
    oswrap.undo()
    assert not os.path.lexists(victim) and planted.is_symlink() and (folder / "out.json").read_bytes() == b"data"


def test_descriptors_are_never_inherited_by_children(tmp_path, oswrap):
    """Every descriptor the reader and the writer open is non-inheritable (PEP 446), so a child started while
    one is open (the loader probe, pip) never holds a secret's descriptor."""
    real = os.open
    seen: list[bool] = []

    def spy(*args, **kwargs):
        fd = real(*args, **kwargs)
        seen.append(os.get_inheritable(fd))
        return fd

    folder = tmp_path / "p"
    assert files.private_dir(folder) is None
    oswrap.setattr(os, "open", spy)
    assert files.write_private(folder / "k", b"secret") is None
    assert files.read_private(folder / "k") == (b"secret", None)
    assert files.read_bytes(folder / "k") == b"secret"
    oswrap.undo()
    assert seen == [False, False, False]  # the temporary file, then the two reads


def test_sixteen_taken_temporary_names_end_in_a_clean_error(tmp_path, oswrap):
    folder = tmp_path / "d"
    path = _target(folder)
    (folder / f".out.json.{'11' * 8}.tmp").write_bytes(b"planted")
    asked = _fixed_random(oswrap, collide=1000)
    with pytest.raises(UsageError) as err:
        files.write_atomic(path, b"new")
    oswrap.undo()
    assert len(asked) == 16
    assert err.value.message == f"{path}: cannot be written (no free temporary name in {folder})"
    assert path.read_bytes() == OLD


def test_read_bytes_stops_at_its_limit_on_a_file_that_never_ends(tmp_path, oswrap):
    """A file whose size says nothing (a /proc or FUSE file) and that never ends, read in short pieces: the
    reader stops after limit + 1 bytes and refuses it, or gives the first limit bytes when truncating; pieces
    are joined as they came."""
    f = tmp_path / "endless"
    f.write_bytes(b"")
    real = os.read
    counter = iter(range(10**6))

    def endless(fd, n):
        if os.path.basename(os.readlink(f"/proc/self/fd/{fd}")) != "endless":
            return real(fd, n)
        return bytes([48 + next(counter) % 10]) * min(n, 2)

    oswrap.setattr(os, "read", endless)
    with pytest.raises(UsageError) as err:
        files.read_bytes(f, limit=10, what="input")
    got = files.read_bytes(f, limit=10, truncate=True)
    oswrap.undo()
    assert err.value.message == f"input {f} is larger than 10 bytes"
    assert got == b"6677889900"  # the second read, cut to 10 (the first took pieces 0-5: 11 bytes, the last 1)


def test_read_errors_name_what_was_read_and_why(tmp_path, oswrap):
    f = tmp_path / "a.txt"
    f.write_bytes(b"abc")
    missing = tmp_path / "nope"
    with pytest.raises(UsageError) as err:
        files.read_bytes(missing)
    assert err.value.message == f"cannot read file {missing}: No such file or directory"
    with pytest.raises(UsageError) as err:
        files.read_text(missing)
    assert err.value.message == f"cannot read file {missing}: No such file or directory"
    with pytest.raises(UsageError) as err:
        files.read_text(f, limit=2, what="report")
    assert err.value.message == f"report {f} is larger than 2 bytes"

    class Mine(Exception):
        pass

    with pytest.raises(Mine, match="cannot read report"):
        files.read_text(missing, what="report", error=Mine)
    oswrap.setattr(os, "read", lambda fd, n: (_ for _ in ()).throw(OSError(errno.EIO, os.strerror(errno.EIO))))
    with pytest.raises(UsageError) as err:
        files.read_bytes(f, what="report")
    oswrap.undo()
    assert err.value.message == f"cannot read report {f}: Input/output error"


def test_parse_json_says_why(tmp_path):
    with pytest.raises(ValueError) as err:
        files.parse_json("[" * 100_000 + "]" * 100_000)
    assert str(err.value) == "nested too deeply"
    with pytest.raises(ValueError) as err:
        files.parse_json(b"\xff\xfe{")
    assert str(err.value).startswith("not UTF-8 text (") and "None" not in str(err.value)
    assert files.parse_json("5", max_depth=1) == 5 and files.parse_json("null", max_depth=1) is None


def test_write_errors_are_exact(tmp_path, oswrap):
    with pytest.raises(UsageError) as err:
        files.write_atomic("", "x")
    assert err.value.message == "an empty output path was given"
    plain = tmp_path / "plain"
    plain.write_bytes(b"")
    with pytest.raises(UsageError) as err:
        files.write_atomic(plain / "x.txt", "x")
    assert err.value.message == f"{plain / 'x.txt'}: cannot be written (Not a directory)"
    path = _target(tmp_path / "d")
    _fails_on_temp(oswrap, tmp_path / "d", "write", after=10)
    with pytest.raises(UsageError) as err:
        files.write_atomic(path, BIG)
    oswrap.undo()
    assert err.value.message == f"{path}: cannot be written (No space left on device)"


def test_write_atomic_without_following_a_relative_name_writes_in_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert files.write_atomic("rel.txt", "x", follow_links=False) == str(tmp_path / "rel.txt")
    assert (tmp_path / "rel.txt").read_text() == "x"


def test_a_link_to_a_folder_is_replaced_when_links_are_not_followed(tmp_path):
    """follow_links=False (a name the tool picks in a shared folder): a planted link is replaced, whatever it
    points at (a folder too), and the new file gets a new file's mode, not the link target's."""
    target_dir = tmp_path / "elsewhere"
    target_dir.mkdir()
    target_file = tmp_path / "secret"
    target_file.write_bytes(b"s")
    target_file.chmod(0o600)
    old = os.umask(0o022)
    try:
        for name, to in (("to-folder", target_dir), ("to-file", target_file)):
            link = tmp_path / name
            link.symlink_to(to)
            assert files.write_atomic(link, "mine", follow_links=False) == str(link)
            assert not link.is_symlink() and link.read_text() == "mine" and link.stat().st_mode & 0o777 == 0o644
    finally:
        os.umask(old)
    assert target_dir.is_dir() and target_file.read_bytes() == b"s"


def test_a_new_file_under_an_empty_umask_is_0666(tmp_path):
    old = os.umask(0)
    try:
        files.write_atomic(tmp_path / "n.txt", "x")
    finally:
        os.umask(old)
    assert (tmp_path / "n.txt").stat().st_mode & 0o777 == 0o666


def test_a_new_private_folder_is_never_open(tmp_path, oswrap):
    """The cache folder is created 0700 (not opened by the umask and closed after): no moment when others
    could enter it."""
    real = os.makedirs
    modes: list[int] = []

    def spy(name, mode=0o777, exist_ok=False):
        real(name, mode=mode, exist_ok=exist_ok)
        modes.append(os.lstat(name).st_mode & 0o7777)

    oswrap.setattr(os, "makedirs", spy)
    old = os.umask(0)
    try:
        assert files.private_dir(tmp_path / "new") is None
    finally:
        os.umask(old)
        oswrap.undo()
    assert modes == [0o700]


def test_private_dir_changes_nothing_on_a_folder_that_is_already_private(tmp_path):
    folder = tmp_path / "p"
    folder.mkdir()
    folder.chmod(0o2700)  # setgid: a private folder stays as its owner made it
    assert files.private_dir(folder) is None and folder.stat().st_mode & 0o7777 == 0o2700
    folder.chmod(0o644)  # an open folder without its search bit is closed too
    assert files.private_dir(folder) is None and folder.stat().st_mode & 0o7777 == 0o700


def test_private_dir_never_changes_a_link_or_a_folder_of_another_user(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    link = tmp_path / "link"
    link.symlink_to(shared)
    assert files.private_dir(link) == f"{link} is a symlink, not a folder"
    assert shared.stat().st_mode & 0o777 == 0o755  # the link's target is left as it was
    plain = tmp_path / "plain"
    plain.write_bytes(b"")
    assert files.private_dir(plain / "sub") == f"{plain / 'sub'}: cannot be used (Not a directory)"
    if os.geteuid() != 0:
        pytest.skip("giving a folder to another user needs root")
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    theirs.chmod(0o755)
    os.chown(theirs, 4242, 4242)
    assert files.private_dir(theirs) == f"{theirs} is owned by uid 4242, not by this user"
    assert theirs.stat().st_mode & 0o777 == 0o755
    (theirs / "k").write_bytes(b"x")
    (theirs / "k").chmod(0o600)
    os.chown(theirs, os.getuid(), os.getgid())
    os.chown(theirs / "k", 4242, 4242)
    assert files.read_private(theirs / "k") == (None, f"{theirs / 'k'} is owned by uid 4242, not by this user")


def test_read_private_notes_are_exact(tmp_path, oswrap, monkeypatch):
    folder = tmp_path / "p"
    assert files.private_dir(folder) is None
    k = folder / "k"
    assert files.write_private(k, b"secret") is None
    (folder / "l").symlink_to(k)
    assert files.read_private(folder / "l") == (
        None, f"{folder / 'l'}: cannot be read (Too many levels of symbolic links; a symlink is not followed)")
    k.chmod(0o640)
    assert files.read_private(k) == (None, f"{k} has mode 0640: others may read or change it")
    k.chmod(0o600)
    folder.chmod(0o755)  # a folder others may read but not change is fine to read from
    assert files.read_private(k) == (b"secret", None)
    folder.chmod(0o775)
    assert files.read_private(k) == (None, f"{folder} has mode 0775: others may change it")
    folder.chmod(0o700)
    plain = tmp_path / "plain"
    plain.write_bytes(b"")
    assert files.read_private(plain / "k") == (None, f"{plain} is a regular file, not a folder")
    assert files.read_private(plain / "sub" / "k") == (
        None, f"{plain / 'sub' / 'k'}: cannot be read (Not a directory)")
    monkeypatch.chdir(folder)
    assert files.read_private("k") == (b"secret", None)
    folder.chmod(0o777)
    assert files.read_private("k") == (None, ". has mode 0777: others may change it")
    folder.chmod(0o700)
    oswrap.setattr(os, "read", lambda fd, n: (_ for _ in ()).throw(OSError(errno.EIO, os.strerror(errno.EIO))))
    assert files.read_private(k) == (None, f"{k}: cannot be read (Input/output error)")
    oswrap.setattr(os, "read", lambda fd, n: b"z" * n)  # the file grew after its size was checked
    assert files.read_private(k, limit=100) == (None, f"{k} is larger than 100 bytes")
    oswrap.undo()


def test_write_private_notes_are_exact_and_a_relative_name_stays_where_it_is(tmp_path, oswrap, monkeypatch):
    folder = tmp_path / "p"
    assert files.private_dir(folder) is None
    monkeypatch.chdir(folder)
    assert files.write_private("k", b"v") is None
    assert sorted(os.listdir(folder)) == ["k"] and (folder / "k").read_bytes() == b"v"
    long = folder / ("n" * 300)
    assert files.write_private(long, b"v") == f"{long}: cannot be written (File name too long)"
    _fails_on_temp(oswrap, folder, "write", after=1)
    assert files.write_private(folder / "k", b"w" * 1000) == f"{folder / 'k'}: cannot be written (No space left on device)"
    oswrap.undo()


def test_a_key_file_over_4096_bytes_is_refused_and_a_key_that_cannot_be_written_is_none(oswrap):
    from cudamatrix.safe import keys

    assert files.private_dir(keys.cache_dir()) is None
    path = keys.cache_dir() / keys.KEY_FILE
    for size in (4096, 4097):
        path.write_bytes(b"k" * size)
        path.chmod(0o600)
        got = keys.user_key(create=True)
        assert got == ((b"k" * size, None) if size == 4096 else (None, f"{path} is larger than 4096 bytes")), size
    path.unlink()
    _fails_on_temp(oswrap, keys.cache_dir(), "write", after=1)
    key, note = keys.user_key(create=True)
    oswrap.undo()
    assert key is None and note == f"{path}: cannot be written (No space left on device)"
    assert not path.exists()
