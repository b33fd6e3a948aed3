"""Files read and written safely: every read bounded, every write atomic and exclusive.

Reads open without blocking and look at what was opened before reading it: a FIFO, a device, a socket or a
folder is refused up front (a FIFO would wait for a writer forever, ``/dev/zero`` never ends). Writes go
through a temporary file created with ``O_EXCL`` under a random name in the target's folder, so a planted
``OUT.tmp`` symlink is never followed; the file is synced and renamed over the target, which keeps its mode.
A device, FIFO or folder at the target is never replaced. Private files (the caches) are written 0600 in a
0700 folder, and are read only when the current user owns them and nobody else may write them.

JSON from disk is parsed by :func:`parse_json`, which turns a nesting bomb (RecursionError) and an
integer past Python's digit limit into ``ValueError`` like any other malformed text.
"""
from __future__ import annotations

import json
import os
import stat
from typing import Any

from cudamatrix.errors import CudamatrixError, UsageError

MAX_READ = 4 * 1024 * 1024  # no input file this tool reads is legitimately larger
_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"),
          (stat.S_ISLNK, "a symlink"))


def kind_of(mode: int) -> str | None:
    """What a non-regular file is ("a FIFO (named pipe)", "a folder"...); None for a regular file."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return None if stat.S_ISREG(mode) else "not a regular file"


def read_bytes(path: str | os.PathLike, *, limit: int = MAX_READ, what: str = "file",
               error: type[Exception] = UsageError, truncate: bool = False) -> bytes:
    """At most ``limit`` bytes of the regular file ``path``.

    Raises ``error`` (default UsageError, exit 2) for a missing or unreadable path, anything that is not
    a regular file (checked on the opened descriptor, before any read), or a file over ``limit`` unless
    ``truncate`` (then the first ``limit`` bytes come back)."""
    name = os.fspath(path)
    if name == "":
        raise error(f"{what}: an empty path was given")
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK)  # not inherited by children: PEP 446 (os.open)
    except OSError as exc:
        raise error(f"cannot read {what} {name}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        kind = kind_of(st.st_mode)
        if kind is not None:
            raise error(f"{what} {name} is {kind}, not a regular file")
        if st.st_size > limit and not truncate:
            raise error(f"{what} {name} is larger than {_size(limit)}")
        os.set_blocking(fd, True)
        chunks, left = [], limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise error(f"cannot read {what} {name}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        if not truncate:
            raise error(f"{what} {name} is larger than {_size(limit)}")
        data = data[:limit]
    return data


def read_text(path: str | os.PathLike, *, limit: int = MAX_READ, what: str = "file",
              error: type[Exception] = UsageError) -> str:
    """:func:`read_bytes` decoded as UTF-8 (undecodable bytes replaced)."""
    return read_bytes(path, limit=limit, what=what, error=error).decode(errors="replace")  # UTF-8, the default


def parse_json(text: str | bytes, max_depth: int | None = None) -> Any:
    """``json.loads`` that raises only ValueError: for bad JSON, nesting past the recursion limit (or past
    ``max_depth`` arrays and objects, when given), and integers longer than Python's int conversion limit
    (sys.set_int_max_str_digits)."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text ({exc.reason})") from None
    if max_depth is not None and _deeper(value, max_depth):
        raise ValueError(f"nested more than {max_depth} levels deep")
    return value


def _deeper(value: Any, limit: int) -> bool:
    """Whether ``value`` nests arrays and objects more than ``limit`` deep (iterative: no recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        for child in children:
            if isinstance(child, (dict, list)):
                if depth + 1 > limit:
                    return True
                stack.append((child, depth + 1))
    return False


def _size(n: int) -> str:
    return f"{n // (1024 * 1024)} MB" if n >= 1024 * 1024 else f"{n} bytes"


def write_atomic(path: str | os.PathLike, data: str | bytes, *, mode: int | None = None,
                 error: type[CudamatrixError] = UsageError, follow_links: bool = True) -> str:
    """Replace the regular file ``path`` (or create it) with ``data``, atomically. Returns the path written.

    A symlink at ``path`` is followed to its target (as shell redirection does), or, with
    ``follow_links=False`` (names the tool picks in a folder others may share), replaced itself; a device,
    FIFO, socket or folder there is refused with ``error`` and left as it is. The existing file's mode is kept;
    a new file gets ``mode`` (default 0666 less the umask)."""
    name = os.fspath(path)
    if name == "":
        raise error("an empty output path was given")
    target = os.path.realpath(name) if follow_links else os.path.join(os.path.realpath(os.path.dirname(name) or "."),
                                                                       os.path.basename(name))
    try:
        st = os.stat(target, follow_symlinks=follow_links)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise error(f"{name}: cannot be written ({exc.strerror or exc})") from None
    if st is not None and stat.S_ISLNK(st.st_mode):
        st = None  # not followed: the rename replaces the link itself, its target is never touched
    if st is not None:
        kind = kind_of(st.st_mode)
        if kind is not None:
            raise error(f"{name} is {kind}; it was not replaced", hint="give the path of a regular file")
        keep = stat.S_IMODE(st.st_mode)
    else:
        keep = mode if mode is not None else 0o666 & ~_umask()
    folder = os.path.dirname(target) or "."
    try:
        _replace(folder, target, data, keep)
    except OSError as exc:
        raise error(f"{name}: cannot be written ({exc.strerror or exc})") from None
    _sync_dir(folder)
    return target


def _replace(folder: str, target: str, data: str | bytes, mode: int) -> None:
    """Write ``data`` to an exclusively created temporary file in ``folder`` with ``mode``, then rename it
    over ``target``. Raises OSError; the temporary file is gone either way."""
    raw = data.encode() if isinstance(data, str) else data  # UTF-8, the default
    tmp, fd = exclusive_temp(folder, os.path.basename(target), 0o600)
    try:
        try:
            _write_all(fd, raw)
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except OSError:
        _unlink(tmp)
        raise


def exclusive_temp(folder: str, base: str, mode: int) -> tuple[str, int]:
    """(path, descriptor) of a new file in ``folder`` under a random name made from ``base``, created with
    O_EXCL: a file or link planted at any name is never opened (POSIX open(): with O_CREAT and O_EXCL a symbolic
    link at the name fails with EEXIST, whatever it points to). Not inherited by children (PEP 446). Raises
    OSError."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    for _ in range(16):
        tmp = os.path.join(folder, f".{base[:64]}.{os.urandom(8).hex()}.tmp")
        try:
            return tmp, os.open(tmp, flags, mode)
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name in {folder}")


def _write_all(fd: int, raw: bytes) -> None:
    view = memoryview(raw)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _sync_dir(folder: str) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _umask() -> int:
    current = os.umask(0o022)
    os.umask(current)
    return current


# private files: the caches

def private_dir(path: str | os.PathLike) -> str | None:
    """Create ``path`` (mode 0700) if needed. Returns None when it is a folder owned by this user that
    nobody else can write, else a note saying what is wrong (the caller then does not use it)."""
    name = os.fspath(path)
    try:
        os.makedirs(name, mode=0o700, exist_ok=True)
        st = os.lstat(name)
        if stat.S_ISDIR(st.st_mode) and st.st_mode & 0o077 and (not hasattr(os, "getuid") or st.st_uid == os.getuid()):
            os.chmod(name, 0o700)  # our own folder made by an older version with the umask's mode: close it
            st = os.lstat(name)
    except OSError as exc:
        return f"{name}: cannot be used ({exc.strerror or exc})"
    return _private_problem(name, st, folder=True)


def _private_problem(name: str, st: os.stat_result, folder: bool) -> str | None:
    want = stat.S_ISDIR if folder else stat.S_ISREG
    if not want(st.st_mode):
        return f"{name} is {kind_of(st.st_mode) or 'a regular file'}, not a {'folder' if folder else 'file'}"
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return f"{name} is owned by uid {st.st_uid}, not by this user"
    # a folder others cannot write is safe to read from; a file must be this user's alone
    if st.st_mode & (0o022 if folder else 0o077):
        return f"{name} has mode {stat.S_IMODE(st.st_mode):04o}: others may {'change' if folder else 'read or change'} it"
    return None


def not_owned(path: str | os.PathLike, *, folder: bool = False) -> str | None:
    """Why ``path`` may have been changed by someone else (None: it may not): it is a symlink (never followed),
    not a regular file (``folder``: not a folder), not owned by this user, or group or others may write it.
    Looked at with ``lstat``: the last component only; check each folder on the way for a whole path."""
    name = os.fspath(path)
    try:
        st = os.lstat(name)
    except OSError as exc:
        return f"{name}: cannot be looked at ({exc.strerror or exc})"
    want = stat.S_ISDIR if folder else stat.S_ISREG
    if not want(st.st_mode):
        return f"{name} is {kind_of(st.st_mode) or 'a regular file'}, not a {'folder' if folder else 'regular file'}"
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return f"{name} is owned by uid {st.st_uid}, not by this user"
    if st.st_mode & 0o022:
        return f"{name} has mode {stat.S_IMODE(st.st_mode):04o}: others may change it"
    return None


def read_private(path: str | os.PathLike, *, limit: int = MAX_READ) -> tuple[bytes | None, str | None]:
    """(contents, None) of a private file; (None, note) when it is absent (note None), not a regular
    file, a symlink, not owned by this user, open to others, or too large."""
    name = os.fspath(path)
    try:
        folder_note = _private_problem(os.path.dirname(name) or ".", os.lstat(os.path.dirname(name) or "."),
                                       folder=True)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"{name}: cannot be read ({exc.strerror or exc})"
    if folder_note:
        return None, folder_note
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))  # not inherited: PEP 446
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"{name}: cannot be read ({exc.strerror or exc}; a symlink is not followed)"
    try:
        st = os.fstat(fd)
        problem = _private_problem(name, st, folder=False)
        if problem:
            return None, problem
        if st.st_size > limit:
            return None, f"{name} is larger than {_size(limit)}"
        os.set_blocking(fd, True)
        data = os.read(fd, limit + 1)
        if len(data) > limit:
            return None, f"{name} is larger than {_size(limit)}"
        return data, None
    except OSError as exc:
        return None, f"{name}: cannot be read ({exc.strerror or exc})"
    finally:
        os.close(fd)


def write_private(path: str | os.PathLike, data: str | bytes) -> str | None:
    """Write a private file (0600, in a 0700 folder of this user), atomically. Returns None when written,
    else a note saying why not (a read-only home is not an error)."""
    name = os.fspath(path)
    folder = os.path.dirname(name) or "."
    note = private_dir(folder)
    if note:
        return note
    try:
        st = os.lstat(name)
        if not stat.S_ISREG(st.st_mode):  # a symlink or FIFO planted at the name: do not replace it blindly
            return f"{name} is {kind_of(st.st_mode)}; the cache was not written"  # never None: not regular
    except FileNotFoundError:
        pass
    except OSError as exc:
        return f"{name}: cannot be written ({exc.strerror or exc})"
    try:
        _replace(folder, name, data, 0o600)
    except OSError as exc:
        return f"{name}: cannot be written ({exc.strerror or exc})"
    return None
