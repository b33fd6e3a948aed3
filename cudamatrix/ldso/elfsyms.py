"""The dynamic symbols of an ELF shared object: those it needs from other objects (undefined in ``.dynsym``) and
whether it defines a given name (its GNU hash table), read without loading it.

The sibling of :mod:`cudamatrix.ldso.elf` (which reads the dynamic section) for the extension checks: an
extension's undefined symbols are resolved against the framework's own libraries as ld.so would, through each
library's ``.gnu.hash`` (bloom filter, buckets, chains; the layout of glibc's ``dl-lookup.c`` and the GNU hash
section of the "ELF gABI" extensions), so a library of 400 MB costs a few reads per name, not a read of its
100,000 symbols. Layouts: System V ABI, "Object Files" (section header, symbol table entry); 64-bit
little-endian objects only, as :mod:`cudamatrix.ldso.elf`.

Each library's table is read once per process (cached by path, size, mtime and inode); so is each object's list
of undefined symbols and each answer (what is kept across runs is the answer per extension object:
:mod:`cudamatrix.detect.extensions`). Reads are bounded: at most 4096 sections, a symbol table and its strings of
at most 64 MiB each, a hash table of at most 64 MiB.
"""
from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from itertools import repeat

from cudamatrix.ldso import elf
from cudamatrix.safe.text import lazy
from cudamatrix.schema import record

SHT_STRTAB, SHT_DYNSYM, SHT_GNU_HASH = 3, 11, 0x6FFFFFF6
SHN_UNDEF = 0
STB_GLOBAL, STB_WEAK = 1, 2
_SYM = struct.Struct("<IBBHQQ")  # Elf64_Sym: name, info, other, shndx, value, size
_SHDR = struct.Struct("<IIQQQQIIQQ")  # Elf64_Shdr: name, type, flags, addr, offset, size, link, info, align, entsize
_MAX_SECTIONS = 4096
_MAX_TABLE = 64 << 20
_ZEROS = lazy(b"\\0+")  # a run of entries without a section


@record(frozen=True)
class _Section:
    type: int
    offset: int
    size: int
    link: int


def _sections(fh, size: int) -> list[_Section]:
    """The section headers of the open ELF file ``fh`` (checked as :func:`cudamatrix.ldso.elf.read_dynamic`
    checks it); ElfError when it has none or they lie past the end of the file."""
    elf._header(fh)  # 64-bit little-endian ELF, or ElfError saying what it is instead
    fh.seek(0)
    head = fh.read(64)
    (shoff,) = struct.unpack_from("<Q", head, 40)
    shentsize, shnum = struct.unpack_from("<HH", head, 58)
    if shoff == 0 or shnum == 0 or shentsize < _SHDR.size:
        raise elf.ElfError("no section headers (a stripped section table)")
    if shnum > _MAX_SECTIONS:
        raise elf.ElfError(f"{shnum} sections: more than {_MAX_SECTIONS}")
    if shoff + shentsize * shnum > size:
        raise elf.ElfError("section headers lie past the end of the file")
    fh.seek(shoff)
    table = fh.read(shentsize * shnum)
    out = []
    for i in range(shnum):
        _n, kind, _f, _a, off, sz, link, _i, _al, _es = _SHDR.unpack_from(table, i * shentsize)
        out.append(_Section(kind, off, sz, link))
    return out


def _table(sections: list[_Section], kind: int, size: int) -> tuple[_Section, _Section]:
    """The section of ``kind`` (the first) and the string table its ``sh_link`` names; ElfError when either is
    missing, larger than the bound or past the end of the file."""
    sec = next((s for s in sections if s.type == kind), None)
    if sec is None:
        raise elf.ElfError("no .dynsym" if kind == SHT_DYNSYM else "no .gnu.hash")
    link = sections[sec.link] if sec.link < len(sections) else None
    for s in (sec, link):
        if s is None or (kind == SHT_DYNSYM and s is link and s.type != SHT_STRTAB):
            raise elf.ElfError("a symbol table without its string table")
        if s.size > _MAX_TABLE:
            raise elf.ElfError(f"a table of {s.size} bytes: more than {_MAX_TABLE}")
        if s.offset + s.size > size:
            raise elf.ElfError("a table lies past the end of the file")
    assert link is not None
    return sec, link


def _undefined_of(path: str, size: int) -> tuple[str, ...]:
    """The names of the global (not weak) undefined symbols of ``path``'s ``.dynsym``, in table order."""
    with open(path, "rb") as fh:
        dynsym, strtab = _table(_sections(fh, size), SHT_DYNSYM, size)
        fd = fh.fileno()  # positioned reads of the two tables only (no buffer filled and copied on the way)
        syms = os.pread(fd, dynsym.size - dynsym.size % _SYM.size, dynsym.offset)
        strings = os.pread(fd, strtab.size, strtab.offset)
    # Python code runs for the undefined entries only (a few hundred of xformers' 4,922), everything else in C
    # (issue #39: the loop over every entry and the name of each undefined one cost 0.5 ms an object, this 0.3):
    # st_shndx's two bytes (offsets 6 and 7 of each 24-byte entry) as two columns, OR-ed as two integers, leave a
    # byte per entry that is zero where the symbol has no section; st_info is byte 4, st_name the first word
    # (little-endian: checked), read for those entries alone
    count = len(syms) // _SYM.size
    no_section = (int.from_bytes(syms[6::_SYM.size], "little") |
                  int.from_bytes(syms[7::_SYM.size], "little")).to_bytes(count, "little")
    info = syms[4::_SYM.size]
    # a missing weak one is no error: global binding only; a symbol without a name is no symbol
    offsets = [name for run in _ZEROS.finditer(no_section) for i in range(run.start(), run.end())
               if info[i] >> 4 == STB_GLOBAL
               and (name := int.from_bytes(syms[i * _SYM.size:i * _SYM.size + 4], "little"))]
    ends = list(map(strings.find, repeat(b"\0"), offsets))
    if -1 in ends:
        raise elf.ElfError("a symbol name runs past the string table")
    return tuple(map(bytes.decode, map(strings.__getitem__, map(slice, offsets, ends)), repeat("utf-8"),
                     repeat("surrogateescape")))  # UTF-8, bytes kept as they are


_UNDEFINED: dict[tuple, tuple[str, ...] | elf.ElfError] = {}


def undefined(path: str) -> tuple[str, ...]:
    """The global undefined dynamic symbols of ``path`` (what ``nm -D --undefined-only`` lists as ``U``, without
    the weak ones and without version suffixes); ElfError or OSError when it cannot be read. Cached in this
    process by the file's path, mtime, size and inode."""
    return elf.per_file(_UNDEFINED, path, lambda p, st: _undefined_of(p, st.st_size),
                        "truncated or malformed symbol table")


def gnu_hash(name: bytes) -> int:
    """The GNU hash of a symbol name (Daniel J. Bernstein's h * 33 + c, 32 bits)."""
    h = 5381
    for c in name:
        h = (h * 33 + c) & 0xFFFFFFFF
    return h


class _HashTable:
    """One library's GNU hash table, read once; :meth:`defines` answers a name with a few positioned reads."""

    def __init__(self, path: str, size: int) -> None:
        self.path = path
        with open(path, "rb") as fh:
            sections = _sections(fh, size)
            ghash, dynsym = _table(sections, SHT_GNU_HASH, size)
            self.dynsym = dynsym.offset
            _sym, strtab = _table(sections, SHT_DYNSYM, size)
            self.strtab, self.strsz = strtab.offset, strtab.size
            fh.seek(ghash.offset)
            data = fh.read(ghash.size)
        if len(data) < 16:
            raise elf.ElfError("a truncated .gnu.hash")
        self.nbuckets, self.symoffset, nbloom, self.shift = struct.unpack_from("<IIII", data, 0)
        bloom_end = 16 + 8 * nbloom
        bucket_end = bloom_end + 4 * self.nbuckets
        if self.nbuckets == 0 or nbloom == 0 or bucket_end > len(data):
            raise elf.ElfError("a .gnu.hash whose header does not fit its section")
        self.bloom = memoryview(data)[16:bloom_end].cast("Q")
        self.buckets = memoryview(data)[bloom_end:bucket_end].cast("I")
        chain_end = bucket_end + (len(data) - bucket_end) // 4 * 4
        self.chains = memoryview(data)[bucket_end:chain_end].cast("I")

    def defines(self, names: Iterable[tuple[str, bytes, int]]) -> set[str]:
        """Of ``names`` ((name, its bytes, its GNU hash)), those this library defines (a symbol of its
        ``.dynsym`` with a section)."""
        out: set[str] = set()
        fd = os.open(self.path, os.O_RDONLY)
        try:
            for name, raw, h in names:
                if self._lookup(fd, raw, h):
                    out.add(name)
        finally:
            os.close(fd)
        return out

    def _lookup(self, fd: int, name: bytes, h: int) -> bool:
        word = self.bloom[(h // 64) % len(self.bloom)]
        mask = (1 << (h % 64)) | (1 << ((h >> self.shift) % 64))
        if word & mask != mask:
            return False
        index = self.buckets[h % self.nbuckets]
        if index < self.symoffset:
            return False
        want = name + b"\0"
        while 0 <= index - self.symoffset < len(self.chains):
            chained = self.chains[index - self.symoffset]
            if (chained | 1) == (h | 1):
                entry = os.pread(fd, _SYM.size, self.dynsym + index * _SYM.size)
                if len(entry) < _SYM.size:
                    return False
                st_name, _info, _other, shndx, _v, _s = _SYM.unpack(entry)
                if st_name < self.strsz and os.pread(fd, len(want), self.strtab + st_name) == want:
                    return shndx != SHN_UNDEF
            if chained & 1:
                return False
            index += 1
        return False


_TABLES: dict[tuple, _HashTable | elf.ElfError] = {}


def _hash_table(path: str) -> _HashTable | elf.ElfError:
    try:
        return elf.per_file(_TABLES, path, lambda p, st: _HashTable(p, st.st_size), "a malformed .gnu.hash")
    except elf.ElfError as exc:
        return exc


_HASHES: dict[str, tuple[str, bytes, int]] = {}


def _hashed(name: str) -> tuple[str, bytes, int]:
    hit = _HASHES.get(name)
    if hit is None:
        raw = name.encode(errors="surrogateescape")
        hit = _HASHES[name] = (name, raw, gnu_hash(raw))
    return hit


_BY_SET: dict[tuple[str, ...], dict[str, bool]] = {}


def defined(libraries: Iterable[str], names: Iterable[str]) -> tuple[set[str], list[str]]:
    """(the ``names`` some of ``libraries`` define, the libraries that could not be read with why). Each library's
    table is read once per process and each name answered once per set of libraries."""
    libs = tuple(libraries)
    known = _BY_SET.setdefault(libs, {})
    distinct = dict.fromkeys(names)
    wanted = [n for n in distinct if n not in known]
    if not wanted:  # every name answered before (another extension needed it): nothing to read
        return {n for n in distinct if known[n]}, []
    found: set[str] = set()
    unread: list[str] = []
    for lib in libs:
        ask = [n for n in wanted if n not in found]
        if not ask:
            break
        try:
            table = _hash_table(lib)
        except OSError as exc:
            unread.append(f"{lib}: {exc.strerror or exc}")
            continue
        if isinstance(table, elf.ElfError):
            unread.append(f"{lib}: {table}")
            continue
        try:
            found |= table.defines([_hashed(n) for n in ask])
        except OSError as exc:
            unread.append(f"{lib}: {exc.strerror or exc}")
    if not unread:  # an answer made without every library is not kept
        known.update((n, n in found) for n in wanted)
    return found | {n for n in distinct if known.get(n)}, unread


def forget() -> None:
    """Drop this process's tables and answers (tests)."""
    _UNDEFINED.clear()
    _TABLES.clear()
    _BY_SET.clear()
    _HASHES.clear()
