"""The GPU architectures compiled into a shared object: the SASS (cubins) and PTX of its ``.nv_fatbin`` section,
read from the fatbinary headers without cuobjdump and without reading the kernels themselves.

The layout is the one ``scripts/read_wheel_archs.py`` reads (and checks against cuobjdump's listing in its
tests): the section holds fatbinaries one after the other, each a 16-byte header (magic ``0xBA55ED50``, version,
header size, size of its entries) followed by entries, each with its own header (kind: 1 PTX, 2 SASS cubin;
header size; payload size; at offset 28 the ``sm_XX`` it is for). Only the headers are read, by seeking past the
payloads: the 18 MB fatbin of xformers' ``_C.so`` costs about 130 small reads. Reads are bounded
(:data:`MAX_FATBINS`, :data:`MAX_ENTRIES`, a section name table of at most 1 MiB, nothing past the section).

Answers are cached in this process by (path, mtime, size, inode) and kept across runs in the user cache under the
file's stat stamp (:mod:`cudamatrix.ldso.elfcache`).
"""
from __future__ import annotations

import os
import struct
from typing import Any

from cudamatrix.ldso import elf, elfcache

MAGIC = 0xBA55ED50
_MAGIC = struct.pack("<I", MAGIC)
_SHDR = struct.Struct("<IIQQQQIIQQ")  # Elf64_Shdr
_FATBIN = struct.Struct("<IHHQ")  # a fatbinary's header: magic, version, header size, size of its entries
_ENTRY = struct.Struct("<HHIQIIII")  # an entry's header: kind, _, header size, payload size, _, _, _, sm
MAX_FATBINS = 1 << 16
MAX_ENTRIES = 1 << 18
_MAX_SECTIONS = 4096
_MAX_NAMES = 1 << 20
_GAP = 4096  # how far past a fatbinary the next one's magic is looked for (alignment padding)
_KEY = "fatbin:"

_CACHE: dict[tuple, tuple[list[str], list[str]] | elf.ElfError] = {}


def cc(sm: int) -> str:
    """``90`` -> ``"9.0"``, ``120`` -> ``"12.0"`` (the last digit is the minor)."""
    return f"{sm // 10}.{sm % 10}"


def _section(fd: int, size: int, name: bytes) -> tuple[int, int] | None:
    """(offset, size) of the section called ``name`` in the open file ``fd``; None when the object has none."""
    head = os.pread(fd, 64, 0)
    elf.check_header(head)
    (shoff,) = struct.unpack_from("<Q", head, 40)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", head, 58)
    if shoff == 0 or shnum == 0 or shentsize < _SHDR.size or shstrndx >= shnum:
        return None
    if shnum > _MAX_SECTIONS or shoff + shentsize * shnum > size:
        raise elf.ElfError("section headers out of bounds")
    table = os.pread(fd, shentsize * shnum, shoff)
    headers = [_SHDR.unpack_from(table, i * shentsize) for i in range(shnum)]
    names = headers[shstrndx]
    if names[5] > _MAX_NAMES or names[4] + names[5] > size:
        raise elf.ElfError("section name table out of bounds")
    strings = os.pread(fd, names[5], names[4])
    want = name + b"\0"
    for h in headers:
        if strings.startswith(want, h[0]):
            if h[4] + h[5] > size:
                raise elf.ElfError(f"{name.decode()} lies past the end of the file")
            return h[4], h[5]
    return None


def _next(fd: int, at: int, end: int) -> int:
    """The offset of the next fatbinary at or after ``at`` (within :data:`_GAP` bytes), or -1."""
    found = os.pread(fd, min(_GAP, end - at), at).find(_MAGIC)
    return at + found if found >= 0 else -1


def _read(path: str, size: int) -> tuple[list[str], list[str]]:
    """The architectures of ``path``'s fatbinaries, read with positioned reads of the headers alone (os.pread:
    about 150 reads of 16 or 32 bytes for xformers' ``_C.so``; through a buffered file each filled and copied a
    4 KiB buffer, 2.5 times the time, issue #39)."""
    sass: set[int] = set()
    ptx: set[int] = set()
    fd = os.open(path, os.O_RDONLY)
    try:
        where = _section(fd, size, b".nv_fatbin")
        if where is None:
            return [], []
        start, end = where[0], where[0] + where[1]
        at, fatbins, entries = _next(fd, start, end), 0, 0
        while at >= 0 and at + 16 <= end:
            fatbins += 1
            if fatbins > MAX_FATBINS:
                raise elf.ElfError(f"more than {MAX_FATBINS} fatbinaries")
            _magic, _version, header, length = _FATBIN.unpack(os.pread(fd, 16, at))
            entry, stop = at + header, min(at + header + length, end)
            while entry + 32 <= stop:
                entries += 1
                if entries > MAX_ENTRIES:
                    raise elf.ElfError(f"more than {MAX_ENTRIES} fatbinary entries")
                kind, _u, entry_header, entry_size, _c, _u2, _ver, sm = _ENTRY.unpack(os.pread(fd, 32, entry))
                if entry_header == 0:
                    raise elf.ElfError("a fatbinary entry of no size")
                if kind in (1, 2) and 10 <= sm < 1000:
                    (ptx if kind == 1 else sass).add(sm)
                entry += entry_header + entry_size
            at = _next(fd, stop, end) if stop + 16 <= end else -1
    finally:
        os.close(fd)
    return [cc(sm) for sm in sorted(sass)], [cc(sm) for sm in sorted(ptx)]


def _decode(doc: Any) -> tuple[list[str], list[str]] | None:
    if isinstance(doc, list) and len(doc) == 2 and all(
            isinstance(x, list) and all(isinstance(s, str) for s in x) for x in doc):
        return doc[0], doc[1]
    return None


def archs(path: str) -> tuple[list[str], list[str]]:
    """(SASS architectures, PTX architectures) of ``path``'s fatbinaries as compute capabilities ("8.0"),
    lowest first; ([], []) for an object without device code. ElfError or OSError when it cannot be read."""
    return elf.per_file(_CACHE, path, _remembered, "truncated or malformed fatbinary")


def _remembered(path: str, st: os.stat_result) -> Any:
    """The architectures kept in the user cache for this file, else read and kept there."""
    hit = elfcache.recall(_KEY + path, st, _decode)
    if hit is None:
        hit = _read(path, st.st_size)
        elfcache.remember(_KEY + path, st, [hit[0], hit[1]])
    return hit


def forget() -> None:
    """Drop what this process read (tests)."""
    _CACHE.clear()
