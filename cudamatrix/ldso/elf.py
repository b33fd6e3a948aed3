"""A small reader of the ELF dynamic section: DT_NEEDED, DT_RPATH, DT_RUNPATH, DT_SONAME, DF_1_NODEFLIB.

Only what the loader model needs, from 64-bit little-endian objects (x86-64, AArch64); anything else is
refused with a reason. Reads are bounded (header, at most 256 program headers, a dynamic segment of at most
1 MiB, strings within the string table and at most 1 MiB) and nothing is executed or mapped: the file is read with ``open``/``read``.
Field layouts are those of the System V ABI, "Object Files" chapter (ELF header, program header, dynamic
section); tag values from its table "Dynamic Array Tags" and glibc's ``elf.h`` (DT_RUNPATH 29, DT_FLAGS_1).

Results are cached by (path, mtime, size, inode), so a detect that reads the same library twice pays once, and
kept across runs in the user cache by their stat stamp (:mod:`cudamatrix.ldso.elfcache`).
"""
from __future__ import annotations

import os
import struct
from typing import Any, Callable, TypeVar

from cudamatrix.ldso import elfcache
from cudamatrix.schema import field, record

PT_LOAD, PT_DYNAMIC, PT_INTERP = 1, 2, 3
DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ, DT_SONAME, DT_RPATH, DT_RUNPATH = 0, 1, 5, 10, 14, 15, 29
DT_FLAGS_1 = 0x6FFFFFFB
DF_1_NODEFLIB = 0x800
MACHINES = {62: "x86_64", 183: "aarch64"}

_WANTED = {DT_NEEDED, DT_STRTAB, DT_STRSZ, DT_SONAME, DT_RPATH, DT_RUNPATH, DT_FLAGS_1}
_MAX_PHNUM = 256
_MAX_DYNAMIC = 1 << 20
_MAX_STRING = 4096


class ElfError(ValueError):
    """The file is not an ELF object this reader handles; the message says why."""


@record(frozen=True)
class Dynamic:
    """The loader-relevant part of one ELF object."""

    machine: str  # "x86_64" / "aarch64" / "em:<number>"
    soname: str | None = None
    needed: tuple[str, ...] = ()
    rpath: str | None = None  # DT_RPATH, unexpanded ("$ORIGIN/../lib:/opt/x")
    runpath: str | None = None  # DT_RUNPATH, unexpanded
    nodeflib: bool = False  # DF_1_NODEFLIB: skip the ld.so cache and the default folders
    interp: str | None = None  # PT_INTERP (executables): the dynamic loader's path
    notes: tuple[str, ...] = field(default=())

    @property
    def effective_rpath(self) -> str | None:
        """DT_RPATH as ld.so uses it: ignored when the object also has DT_RUNPATH (glibc, get-dynamic-info.h)."""
        return None if self.runpath is not None else self.rpath



_TEXT = ("machine", "soname", "rpath", "runpath", "interp")


def _encode(value: Any) -> dict | None:
    """The JSON value :mod:`cudamatrix.ldso.elfcache` keeps for a Dynamic or an ElfError."""
    if isinstance(value, ElfError):
        return {"error": str(value)}
    if isinstance(value, Dynamic):
        return {"machine": value.machine, "soname": value.soname, "needed": list(value.needed),
                "rpath": value.rpath, "runpath": value.runpath, "nodeflib": value.nodeflib, "interp": value.interp,
                "notes": list(value.notes)}
    return None


def _decode(doc: Any) -> Any:
    """A kept JSON value back as a Dynamic or an ElfError; None when any field is not exactly of its type."""
    if not isinstance(doc, dict):
        return None
    if set(doc) == {"error"}:
        return ElfError(doc["error"]) if isinstance(doc["error"], str) else None
    if set(doc) != {*_TEXT, "needed", "nodeflib", "notes"} or not isinstance(doc["machine"], str):
        return None
    if not all(doc[k] is None or isinstance(doc[k], str) for k in _TEXT) or type(doc["nodeflib"]) is not bool:
        return None
    lists = (doc["needed"], doc["notes"])
    if not all(isinstance(x, list) and all(isinstance(s, str) for s in x) for x in lists):
        return None
    return Dynamic(machine=doc["machine"], soname=doc["soname"], needed=tuple(doc["needed"]), rpath=doc["rpath"],
                   runpath=doc["runpath"], nodeflib=doc["nodeflib"], interp=doc["interp"], notes=tuple(doc["notes"]))


_T = TypeVar("_T")


def per_file(cache: dict, path: str, make: Callable[[str, os.stat_result], _T], malformed: str) -> _T:
    """``make(path, stat)`` once per file in this process (``cache`` keyed by path, mtime, size and inode); a
    failure is kept as well and raised again: ElfError as it came, a struct or number error as an ElfError
    saying ``malformed``. OSError when the file cannot be stat'ed."""
    st = os.stat(path)
    key = (path, st.st_mtime_ns, st.st_size, st.st_ino)
    hit = cache.get(key)
    if hit is None:
        try:
            hit = make(path, st)
        except ElfError as exc:
            hit = exc
        except (struct.error, ValueError, TypeError, OverflowError) as exc:
            hit = ElfError(f"{malformed} ({exc})")
        cache[key] = hit
    if isinstance(hit, ElfError):
        raise hit
    return hit


_CACHE: dict[tuple, Dynamic | ElfError] = {}


def read_dynamic(path: str, keep: bool = True) -> Dynamic:
    """The dynamic-section facts of ``path``; raises ElfError (not ELF, 32-bit, big-endian, truncated)
    and OSError (unreadable). Cached by (path, mtime, size, inode); ``keep``: also in the user cache for the next
    run (the extension scan keeps its own, smaller answer instead)."""
    st = os.stat(path)
    key = (path, st.st_mtime_ns, st.st_size, st.st_ino)
    hit = _CACHE.get(key)
    if hit is None:
        hit = elfcache.recall(path, st, _decode)
    if hit is None:
        try:
            with open(path, "rb") as fh:
                hit = _parse(fh, st.st_size)
        except ElfError as exc:
            hit = exc
        except struct.error as exc:
            hit = ElfError(f"truncated or malformed ELF structure ({exc})")
        except (ValueError, OverflowError) as exc:  # an offset no file can have: seek refuses it
            hit = ElfError(f"an offset past the end of any file ({exc})")
        if keep:
            elfcache.remember(path, st, _encode(hit))
    if key not in _CACHE:
        if len(_CACHE) > 4096:
            _CACHE.clear()
        _CACHE[key] = hit
    if isinstance(hit, ElfError):
        raise hit
    return hit


def try_read(path: str, keep: bool = True) -> Dynamic | None:
    """``read_dynamic`` that returns None for anything it cannot read."""
    try:
        return read_dynamic(path, keep)
    except (OSError, ElfError):
        return None


def _parse(fh, size: int) -> Dynamic:
    """The dynamic-section facts of the open ELF file ``fh`` of ``size`` bytes; raises ElfError."""
    e_machine, phoff, phentsize, phnum = _header(fh)
    loads, dynamic, interp = _segments(fh, size, phoff, phentsize, phnum)
    machine = MACHINES.get(e_machine, f"em:{e_machine}")
    interp_path = _interp_path(fh, interp)
    if dynamic is None:
        return Dynamic(machine=machine, interp=interp_path, notes=("no dynamic segment (statically linked)",))
    entries = _dynamic_entries(fh, dynamic)
    strtab = next((v for t, v in entries if t == DT_STRTAB), None)
    strsz = next((v for t, v in entries if t == DT_STRSZ), None)
    flags_1 = next((v for t, v in entries if t == DT_FLAGS_1), 0)
    if strtab is None:
        return Dynamic(machine=machine, interp=interp_path, nodeflib=bool(flags_1 & DF_1_NODEFLIB),
                       notes=("dynamic segment without a string table",))
    base = _file_offset(loads, strtab)
    if base is None:
        raise ElfError("the dynamic string table lies outside every loadable segment")
    string = _string_reader(fh, base, strsz)
    needed, soname, rpath, runpath = _named_entries(entries, string)
    return Dynamic(machine=machine, soname=soname, needed=tuple(needed), rpath=rpath, runpath=runpath,
                   nodeflib=bool(flags_1 & DF_1_NODEFLIB), interp=interp_path)


def _header(fh) -> tuple[int, int, int, int]:
    """Whether the file is a 64-bit little-endian ELF object with program headers: its (e_machine, phoff,
    phentsize, phnum), or ElfError saying what it is instead."""
    return check_header(fh.read(64))


def check_header(head: bytes) -> tuple[int, int, int, int]:
    """:func:`_header` of the file's first 64 bytes ``head`` (for readers that use positioned reads)."""
    if len(head) < 16 or head[:4] != b"\x7fELF":
        raise ElfError("not an ELF file")
    if head[4] != 2:
        raise ElfError("32-bit ELF objects are not read (64-bit only)")
    if head[5] != 1:
        raise ElfError("big-endian ELF objects are not read (little-endian only)")
    if len(head) < 64:
        raise ElfError("truncated ELF header")
    (e_machine,) = struct.unpack_from("<H", head, 18)
    (phoff,) = struct.unpack_from("<Q", head, 32)
    phentsize, phnum = struct.unpack_from("<HH", head, 54)
    if phentsize < 56 or phnum == 0:
        raise ElfError("no program headers (not a loadable object)")
    if phnum > _MAX_PHNUM:
        raise ElfError(f"{phnum} program headers: more than {_MAX_PHNUM}")
    return e_machine, phoff, phentsize, phnum


def _segments(fh, size: int, phoff: int, phentsize: int, phnum: int) -> tuple[
        list[tuple[int, int, int]], tuple[int, int] | None, tuple[int, int] | None]:
    """Which program headers matter: the loadable segments (vaddr, offset, filesz), the dynamic segment
    (offset, filesz) and the interpreter string (offset, length), the last two None when absent."""
    if phoff + phentsize * phnum > size:
        raise ElfError("program headers lie past the end of the file")
    fh.seek(phoff)
    table = fh.read(phentsize * phnum)
    loads, dynamic, interp = [], None, None
    for i in range(phnum):
        p_type, _flags, off, vaddr, _paddr, filesz = struct.unpack_from("<IIQQQQ", table, i * phentsize)
        if p_type == PT_LOAD:
            loads.append((vaddr, off, filesz))
        elif p_type == PT_DYNAMIC:
            dynamic = (off, filesz)
        elif p_type == PT_INTERP:
            interp = (off, min(filesz, _MAX_STRING))
    return loads, dynamic, interp


def _interp_path(fh, interp: tuple[int, int] | None) -> str | None:
    """The dynamic loader's path PT_INTERP names (executables), None without one or when it is empty."""
    if interp is None:
        return None
    fh.seek(interp[0])
    return fh.read(interp[1]).partition(b"\0")[0].decode(errors="replace") or None  # UTF-8


def _dynamic_entries(fh, dynamic: tuple[int, int]) -> list[tuple[int, int]]:
    """The (tag, value) entries of the dynamic segment this reader uses, in order, up to DT_NULL; ElfError
    when the segment is larger than the bound."""
    if dynamic[1] > _MAX_DYNAMIC:
        raise ElfError(f"dynamic segment of {dynamic[1]} bytes: more than {_MAX_DYNAMIC}")
    fh.seek(dynamic[0])
    data = fh.read(dynamic[1])
    entries: list[tuple[int, int]] = []
    for tag, val in struct.iter_unpack("<qQ", data[:len(data) - len(data) % 16]):
        if tag == DT_NULL:
            break
        if tag in _WANTED:
            entries.append((tag, val))
    return entries


def _string_reader(fh, base: int, strsz: int | None):
    """A reader of the NUL-terminated string at an offset of the dynamic string table (file offset ``base``),
    which refuses offsets past DT_STRSZ and strings longer than the table or the bound."""

    def string(offset: int) -> str:
        if strsz is not None and offset >= strsz:
            raise ElfError(f"a dynamic string offset ({offset}) lies past the string table")
        # a DT_RUNPATH can be long (TensorFlow 2.20's libtensorflow_framework.so.2: over 4 KiB of nvidia/*
        # folders); ld.so has no limit, this reader stops at the string table's end or 1 MiB
        limit = min(strsz - offset, _MAX_DYNAMIC) if strsz is not None else _MAX_STRING
        fh.seek(base + offset)
        raw = fh.read(min(limit, 256))  # sonames and paths are short; read more only when they are not
        if b"\0" not in raw and limit > 256:
            raw += fh.read(limit - 256)
        if b"\0" not in raw:
            raise ElfError("a dynamic string is unterminated or longer than the string table allows")
        return raw.partition(b"\0")[0].decode(errors="surrogateescape")  # UTF-8, bytes kept as they are

    return string


def _named_entries(entries: list[tuple[int, int]], string) -> tuple[list[str], str | None, str | None, str | None]:
    """The strings the entries name: DT_NEEDED in order, DT_SONAME (the last one), DT_RPATH and DT_RUNPATH
    (each joined with ":" when the object has several)."""
    needed: list[str] = []
    soname, rpath, runpath = None, None, None
    for tag, val in entries:
        if tag == DT_NEEDED:
            needed.append(string(val))
        elif tag == DT_SONAME:
            soname = string(val)
        elif tag == DT_RPATH:
            rpath = string(val) if rpath is None else rpath + ":" + string(val)
        elif tag == DT_RUNPATH:
            runpath = string(val) if runpath is None else runpath + ":" + string(val)
    return needed, soname, rpath, runpath


def _file_offset(loads: list[tuple[int, int, int]], vaddr: int) -> int | None:
    for start, off, filesz in loads:
        if start <= vaddr < start + filesz:
            return vaddr - start + off
    return None
