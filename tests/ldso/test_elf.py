"""ldso.elf, the reader of the ELF dynamic section, against gcc-built objects and readelf (binutils) as the
judge; damaged copies are made by rewriting one field of a real object (located by this file's own struct code
after the System V ABI layouts, never by the reader under test)."""
from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from cudamatrix.ldso import elf, elfcache

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("readelf") is None,
                                reason="needs gcc and readelf")

LONG_RUNPATH = ":".join(f"/nonexistent/folder-{i:04d}" for i in range(200)) + ":$ORIGIN/../lib"  # > 4 KiB
PHDR = "<IIQQQQQQ"  # Elf64_Phdr: type, flags, offset, vaddr, paddr, filesz, memsz, align
DT_DEBUG = 21  # a tag the reader does not use


def _gcc(args: list[str], cwd: Path) -> None:
    subprocess.run(["gcc", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def objs(tmp_path_factory) -> dict[str, Path]:
    """A shared library with DT_RPATH, three DT_NEEDED and DF_1_NODEFLIB; one with a DT_RUNPATH over 4 KiB; a
    dynamic executable; a static one."""
    t = tmp_path_factory.mktemp("elf")
    (t / "lib.c").write_text("int one(void) { return 1; }\n")
    (t / "prog.c").write_text("int main(void) { return 0; }\n")
    (t / "start.c").write_text("void _start(void) { for (;;) ; }\n")
    needs = ["-Wl,--no-as-needed", "-lm", "-lgcc_s"]
    _gcc(["-shared", "-fPIC", "-Wl,-soname,libelf_rpath.so.1", "-Wl,--disable-new-dtags,-rpath,$ORIGIN/../a:/opt/x",
          "-Wl,-z,nodefaultlib", "-o", "libelf_rpath.so", "lib.c", *needs], t)
    _gcc(["-shared", "-fPIC", "-Wl,-soname,libelf_runpath.so.2", f"-Wl,--enable-new-dtags,-rpath,{LONG_RUNPATH}",
          "-o", "libelf_runpath.so", "lib.c", *needs], t)
    _gcc(["-o", "prog", "prog.c"], t)
    _gcc(["-nostdlib", "-static", "-o", "static", "start.c"], t)
    return {name: t / name for name in ("libelf_rpath.so", "libelf_runpath.so", "prog", "static")}


@pytest.fixture(autouse=True)
def fresh(tmp_path, monkeypatch):
    """No facts kept from another test, in memory or in the user cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    elfcache.forget()
    elf._CACHE.clear()
    yield
    elfcache.forget()
    elf._CACHE.clear()


def readelf(path: Path) -> elf.Dynamic:
    """What binutils' readelf says of ``path``, as the reader's record."""
    dyn = subprocess.run(["readelf", "-dW", str(path)], capture_output=True, text=True, check=True).stdout
    seg = subprocess.run(["readelf", "-lW", str(path)], capture_output=True, text=True, check=True).stdout

    def one(kind: str) -> str | None:
        found = re.findall(rf"\({kind}\)\s+Library {kind.lower()}: \[(.*)\]", dyn)
        return found[-1] if found else None

    interp = re.search(r"\[Requesting program interpreter: (.*)\]", seg)
    return elf.Dynamic(machine="x86_64", soname=one("SONAME"),
                       needed=tuple(re.findall(r"\(NEEDED\)\s+Shared library: \[(.*)\]", dyn)),
                       rpath=one("RPATH"), runpath=one("RUNPATH"),
                       nodeflib=bool(re.search(r"\(FLAGS_1\)\s+Flags:.*\bNODEFLIB\b", dyn)),
                       interp=interp.group(1) if interp else None)


# --- this file's own view of the layouts (System V ABI, "Object Files") -----------------------------------------

def phdrs(raw: bytes | bytearray) -> list[list[int]]:
    (phoff,) = struct.unpack_from("<Q", raw, 32)
    phentsize, phnum = struct.unpack_from("<HH", raw, 54)
    return [list(struct.unpack_from(PHDR, raw, phoff + i * phentsize)) for i in range(phnum)]


def set_phdr(raw: bytearray, index: int, values: list[int]) -> None:
    (phoff,) = struct.unpack_from("<Q", raw, 32)
    (phentsize,) = struct.unpack_from("<H", raw, 54)
    struct.pack_into(PHDR, raw, phoff + index * phentsize, *values)


def dynamic(raw: bytes | bytearray) -> list[tuple[int, int, int]]:
    """(file position, tag, value) of every dynamic entry up to DT_NULL."""
    seg = next(p for p in phdrs(raw) if p[0] == elf.PT_DYNAMIC)
    out = []
    for pos in range(seg[2], seg[2] + seg[5], 16):
        tag, val = struct.unpack_from("<qQ", raw, pos)
        if tag == 0:
            break
        out.append((pos, tag, val))
    return out


def entry(raw: bytearray, tag: int, nth: int = 0) -> tuple[int, int]:
    """(file position, value) of the nth entry tagged ``tag``."""
    pos, _, val = [e for e in dynamic(raw) if e[1] == tag][nth]
    return pos, val


def retag(raw: bytearray, tag: int, new: int, nth: int = 0) -> None:
    pos, _ = entry(raw, tag, nth)
    struct.pack_into("<q", raw, pos, new)


def revalue(raw: bytearray, tag: int, value: int) -> None:
    pos, _ = entry(raw, tag)
    struct.pack_into("<Q", raw, pos + 8, value)


def strtab_offset(raw: bytearray) -> int:
    """The file offset of the dynamic string table (shared objects map it at its own file offset)."""
    return entry(raw, elf.DT_STRTAB)[1]


def string_at(raw: bytearray, tag: int) -> tuple[int, str]:
    """(table offset, text) of the string the first ``tag`` entry names."""
    off = entry(raw, tag)[1]
    start = strtab_offset(raw) + off
    return off, bytes(raw[start:raw.index(b"\0", start)]).decode()


def write(tmp_path: Path, raw: bytes | bytearray, name: str = "libdamaged.so") -> str:
    path = tmp_path / name
    path.write_bytes(bytes(raw))
    return str(path)


def copy(objs, key: str) -> bytearray:
    return bytearray(objs[key].read_bytes())


# --- what the linker wrote ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("key", ["libelf_rpath.so", "libelf_runpath.so", "prog"])
def test_reads_what_readelf_reads(objs, key):
    assert elf.read_dynamic(str(objs[key])) == readelf(objs[key])


def test_a_library_s_facts_are_exact(objs):
    d = elf.read_dynamic(str(objs["libelf_rpath.so"]))
    assert d == elf.Dynamic(machine="x86_64", soname="libelf_rpath.so.1",
                            needed=("libm.so.6", "libgcc_s.so.1", "libc.so.6"), rpath="$ORIGIN/../a:/opt/x",
                            runpath=None, nodeflib=True, interp=None, notes=())
    assert d.effective_rpath == "$ORIGIN/../a:/opt/x"
    d = elf.read_dynamic(str(objs["libelf_runpath.so"]))
    assert (d.soname, d.rpath, d.runpath, d.nodeflib, d.effective_rpath) == (
        "libelf_runpath.so.2", None, LONG_RUNPATH, False, None)


def test_a_static_executable_has_no_dynamic_segment(objs):
    assert elf.read_dynamic(str(objs["static"])) == elf.Dynamic(
        machine="x86_64", interp=None, notes=("no dynamic segment (statically linked)",))


def test_an_executable_without_a_dynamic_segment_still_names_its_interpreter(objs, tmp_path):
    raw = copy(objs, "prog")
    i = next(i for i, p in enumerate(phdrs(raw)) if p[0] == elf.PT_DYNAMIC)
    p = phdrs(raw)[i]
    p[0] = 0  # PT_NULL
    set_phdr(raw, i, p)
    assert elf.read_dynamic(write(tmp_path, raw)) == elf.Dynamic(
        machine="x86_64", interp=readelf(objs["prog"]).interp, notes=("no dynamic segment (statically linked)",))


def test_an_executable_names_its_interpreter(objs):
    d = elf.read_dynamic(str(objs["prog"]))
    assert d.interp and d.interp == readelf(objs["prog"]).interp and d.interp.startswith("/")
    assert d.needed == ("libc.so.6",) and d.soname is None


def test_several_rpath_and_soname_entries(objs, tmp_path):
    """Two DT_RPATH entries are joined with ":" in their order; the last DT_SONAME wins."""
    raw = copy(objs, "libelf_rpath.so")
    _, soname = string_at(raw, elf.DT_SONAME)
    retag(raw, elf.DT_SONAME, elf.DT_RPATH)  # the SONAME entry precedes the RPATH one
    retag(raw, elf.DT_NEEDED, elf.DT_SONAME, nth=2)  # libc.so.6, before the SONAME entry
    d = elf.read_dynamic(write(tmp_path, raw))
    assert d.rpath == f"{soname}:$ORIGIN/../a:/opt/x" and d.runpath is None
    assert d.soname == "libc.so.6" and d.needed == ("libm.so.6", "libgcc_s.so.1")
    raw = copy(objs, "libelf_runpath.so")
    retag(raw, elf.DT_SONAME, elf.DT_RUNPATH)
    retag(raw, elf.DT_NEEDED, elf.DT_SONAME, nth=0)
    d = elf.read_dynamic(write(tmp_path, raw, "librun.so"))
    assert d.runpath == f"libelf_runpath.so.2:{LONG_RUNPATH}" and d.rpath is None and d.soname == "libm.so.6"


# --- the header ---------------------------------------------------------------------------------------------------

def test_a_32_bit_object_is_refused(objs, tmp_path):
    """A real i386 object (gcc -m32 -c, ld -m elf_i386), where the multilib compiler can make one."""
    (tmp_path / "x.c").write_text("int one(void) { return 1; }\n")
    try:
        _gcc(["-m32", "-fPIC", "-c", "x.c", "-o", "x.o"], tmp_path)
        subprocess.run(["ld", "-m", "elf_i386", "-shared", "-o", "lib32.so", "x.o"], cwd=tmp_path, check=True,
                       capture_output=True, timeout=60)
        path = tmp_path / "lib32.so"
    except (subprocess.CalledProcessError, OSError):
        raw = copy(objs, "libelf_rpath.so")
        raw[4] = 1
        path = Path(write(tmp_path, raw))
    with pytest.raises(elf.ElfError, match=r"^32-bit ELF objects are not read \(64-bit only\)$"):
        elf.read_dynamic(str(path))


@pytest.mark.parametrize("cut,message", [
    (0, "not an ELF file"), (4, "not an ELF file"), (15, "not an ELF file"),
    (16, "truncated ELF header"), (63, "truncated ELF header"),
    (64, "program headers lie past the end of the file"),
])
def test_a_short_file_is_refused_by_what_it_lacks(objs, tmp_path, cut, message):
    with pytest.raises(elf.ElfError, match=f"^{message}$"):
        elf.read_dynamic(write(tmp_path, objs["libelf_rpath.so"].read_bytes()[:cut]))


@pytest.mark.parametrize("offset,byte,message", [
    (0, 0x7E, "not an ELF file"), (3, ord("f"), "not an ELF file"),
    (4, 1, r"32-bit ELF objects are not read \(64-bit only\)"), (4, 3, r"32-bit ELF objects are not read"),
    (5, 2, r"big-endian ELF objects are not read \(little-endian only\)"), (5, 0, "big-endian"),
])
def test_a_wrong_identification_byte_is_named(objs, tmp_path, offset, byte, message):
    raw = copy(objs, "libelf_rpath.so")
    raw[offset] = byte
    with pytest.raises(elf.ElfError, match=f"^{message}"):
        elf.read_dynamic(write(tmp_path, raw))


@pytest.mark.parametrize("number,machine", [(183, "aarch64"), (62, "x86_64"), (40, "em:40"), (0, "em:0"),
                                            (0xBEEF, "em:48879")])  # e_machine is unsigned (Elf64_Half)
def test_the_machine_is_named(objs, tmp_path, number, machine):
    raw = copy(objs, "libelf_rpath.so")
    struct.pack_into("<H", raw, 18, number)
    assert elf.read_dynamic(write(tmp_path, raw)).machine == machine


def _moved_table(raw: bytearray, phnum: int, phentsize: int = 56) -> bytearray:
    """The same object with its program headers copied to the end of the file, each ``phentsize`` bytes, padded
    with PT_NULL entries to ``phnum``."""
    real = phdrs(raw)
    table = b"".join(struct.pack(PHDR, *p).ljust(phentsize, b"\0") for p in real)
    table = table.ljust(phentsize * phnum, b"\0")
    out = bytearray(raw) + table
    struct.pack_into("<Q", out, 32, len(raw))
    struct.pack_into("<HH", out, 54, phentsize, phnum)
    return out


def test_program_headers_are_read_where_the_header_says_and_as_wide(objs, tmp_path):
    raw = copy(objs, "libelf_rpath.so")
    want = elf.read_dynamic(str(objs["libelf_rpath.so"]))
    assert elf.read_dynamic(write(tmp_path, _moved_table(raw, 256), "a.so")) == want  # the bound itself
    assert elf.read_dynamic(write(tmp_path, _moved_table(raw, 12, phentsize=64), "b.so")) == want  # wider entries
    with pytest.raises(elf.ElfError, match=r"^257 program headers: more than 256$"):
        elf.read_dynamic(write(tmp_path, _moved_table(raw, 257), "c.so"))


def test_the_program_header_table_must_end_within_the_file(objs, tmp_path):
    moved = _moved_table(copy(objs, "libelf_rpath.so"), 20)
    assert elf.read_dynamic(write(tmp_path, moved, "whole.so")).soname == "libelf_rpath.so.1"  # ends at the end
    with pytest.raises(elf.ElfError, match="^program headers lie past the end of the file$"):
        elf.read_dynamic(write(tmp_path, moved[:-1], "short.so"))


def test_header_fields_are_unsigned(objs, tmp_path):
    """e_phoff, e_phentsize and e_phnum are unsigned (Elf64_Off, Elf64_Half): their largest values are large."""
    raw = copy(objs, "libelf_rpath.so")
    struct.pack_into("<Q", raw, 32, (1 << 64) - 8)
    with pytest.raises(elf.ElfError, match="^program headers lie past the end of the file$"):
        elf.read_dynamic(write(tmp_path, raw, "off.so"))
    raw = copy(objs, "libelf_rpath.so")
    struct.pack_into("<H", raw, 56, 0xFFFF)
    with pytest.raises(elf.ElfError, match=r"^65535 program headers: more than 256$"):
        elf.read_dynamic(write(tmp_path, raw, "num.so"))
    raw = copy(objs, "libelf_rpath.so")
    struct.pack_into("<H", raw, 54, 0xFFFF)
    with pytest.raises(elf.ElfError, match="^program headers lie past the end of the file$"):
        elf.read_dynamic(write(tmp_path, raw, "size.so"))


@pytest.mark.parametrize("phentsize,phnum", [(55, 9), (0, 9), (56, 0)])
def test_no_usable_program_headers_is_refused(objs, tmp_path, phentsize, phnum):
    raw = copy(objs, "libelf_rpath.so")
    struct.pack_into("<HH", raw, 54, phentsize, phnum)
    with pytest.raises(elf.ElfError, match=r"^no program headers \(not a loadable object\)$"):
        elf.read_dynamic(write(tmp_path, raw))


# --- segments -----------------------------------------------------------------------------------------------------

def _interp_index(raw: bytearray) -> int:
    return next(i for i, p in enumerate(phdrs(raw)) if p[0] == elf.PT_INTERP)


def test_the_interpreter_string_is_bounded_and_may_be_empty_or_odd(objs, tmp_path):
    raw = copy(objs, "prog")
    want = elf.read_dynamic(str(objs["prog"])).interp
    i = _interp_index(raw)
    p = phdrs(raw)[i]
    p[5] = 1 << 40  # a length no file has: read up to the bound, cut at the NUL
    set_phdr(raw, i, p)
    assert elf.read_dynamic(write(tmp_path, raw, "long")).interp == want
    raw[p[2] + 1] = 0xFF  # not UTF-8: replaced, not refused
    assert elf.read_dynamic(write(tmp_path, raw, "odd")).interp == "/\ufffd" + want[2:]
    p[5] = 5  # the segment ends before the string's NUL: its bytes, no further
    set_phdr(raw, i, p)
    assert elf.read_dynamic(write(tmp_path, raw, "cut")).interp == "/\ufffd" + want[2:5]
    raw[p[2]] = 0
    assert elf.read_dynamic(write(tmp_path, raw, "empty")).interp is None


def test_a_dynamic_segment_over_the_bound_is_refused(objs, tmp_path):
    raw = copy(objs, "libelf_rpath.so")
    i = next(i for i, p in enumerate(phdrs(raw)) if p[0] == elf.PT_DYNAMIC)
    p = phdrs(raw)[i]
    want = elf.read_dynamic(str(objs["libelf_rpath.so"]))
    p[5] = 1 << 20  # the bound itself: read to the end of the file, up to DT_NULL
    set_phdr(raw, i, p)
    assert elf.read_dynamic(write(tmp_path, raw, "at.so")) == want
    p[5] = (1 << 20) + 1
    set_phdr(raw, i, p)
    with pytest.raises(elf.ElfError, match=r"^dynamic segment of 1048577 bytes: more than 1048576$"):
        elf.read_dynamic(write(tmp_path, raw, "over.so"))


def test_a_dynamic_segment_of_a_partial_entry_keeps_the_whole_ones(objs, tmp_path):
    raw = copy(objs, "libelf_rpath.so")
    i = next(i for i, p in enumerate(phdrs(raw)) if p[0] == elf.PT_DYNAMIC)
    p = phdrs(raw)[i]
    last = dynamic(raw)[-1][0]
    p[5] = last + 16 - p[2] + 8  # every entry before DT_NULL, then half an entry
    set_phdr(raw, i, p)
    assert elf.read_dynamic(write(tmp_path, raw)) == elf.read_dynamic(str(objs["libelf_rpath.so"]))


def test_entries_past_the_dynamic_segment_s_size_are_not_read(objs, tmp_path):
    raw = copy(objs, "libelf_rpath.so")
    i = next(i for i, p in enumerate(phdrs(raw)) if p[0] == elf.PT_DYNAMIC)
    p = phdrs(raw)[i]
    p[5] = entry(raw, elf.DT_SONAME)[0] - p[2]  # the three DT_NEEDED only
    set_phdr(raw, i, p)
    assert elf.read_dynamic(write(tmp_path, raw)) == elf.Dynamic(
        machine="x86_64", notes=("dynamic segment without a string table",))


def test_entries_after_dt_null_are_not_read(objs, tmp_path):
    raw = copy(objs, "libelf_rpath.so")
    retag(raw, elf.DT_SONAME, 0)  # after the three DT_NEEDED, before DT_RPATH, DT_STRTAB and DT_FLAGS_1
    d = elf.read_dynamic(write(tmp_path, raw))
    assert d == elf.Dynamic(machine="x86_64", nodeflib=False, notes=("dynamic segment without a string table",))


def test_a_dynamic_segment_without_a_string_table(objs, tmp_path):
    raw = copy(objs, "libelf_rpath.so")
    retag(raw, elf.DT_STRTAB, DT_DEBUG)
    assert elf.read_dynamic(write(tmp_path, raw)) == elf.Dynamic(
        machine="x86_64", nodeflib=True, notes=("dynamic segment without a string table",))
    raw = copy(objs, "prog")
    retag(raw, elf.DT_STRTAB, DT_DEBUG)
    d = elf.read_dynamic(write(tmp_path, raw, "prog"))
    assert (d.interp, d.nodeflib, d.needed) == (readelf(objs["prog"]).interp, False, ())


def test_flags_1_without_nodeflib_is_not_nodeflib(objs, tmp_path):
    raw = copy(objs, "libelf_rpath.so")
    pos, val = entry(raw, elf.DT_FLAGS_1)
    assert val & elf.DF_1_NODEFLIB
    revalue(raw, elf.DT_FLAGS_1, val & ~elf.DF_1_NODEFLIB | 0x1)  # DF_1_NOW only
    assert elf.read_dynamic(write(tmp_path, raw)).nodeflib is False


def test_a_string_table_outside_every_loadable_segment_is_refused(objs, tmp_path):
    raw = copy(objs, "libelf_rpath.so")
    end = max(p[3] + p[5] for p in phdrs(raw) if p[0] == elf.PT_LOAD)
    revalue(raw, elf.DT_STRTAB, end)  # just past the last one
    with pytest.raises(elf.ElfError, match="^the dynamic string table lies outside every loadable segment$"):
        elf.read_dynamic(write(tmp_path, raw))


def test_the_string_table_address_is_translated_by_its_own_segment(objs, tmp_path):
    """A segment whose address differs from its file offset holds the string table, and starts exactly at it;
    another, listed first, ends exactly where it starts (with another translation)."""
    raw = copy(objs, "libelf_rpath.so")
    want = elf.read_dynamic(str(objs["libelf_rpath.so"]))
    table = phdrs(raw)
    first = next(i for i, p in enumerate(table) if p[0] == elf.PT_LOAD)
    spare = next(i for i, p in enumerate(table) if p[0] == 0x6474E551)  # PT_GNU_STACK: nothing to lose
    strtab = strtab_offset(raw)
    _, strsz = entry(raw, elf.DT_STRSZ)
    vaddr = 0x50000
    revalue(raw, elf.DT_STRTAB, vaddr)
    set_phdr(raw, first, [elf.PT_LOAD, 4, 0x40, vaddr - 0x100, vaddr - 0x100, 0x100, 0x100, 0x1000])
    set_phdr(raw, spare, [elf.PT_LOAD, 4, strtab, vaddr, vaddr, strsz, strsz, 0x1000])
    assert elf.read_dynamic(write(tmp_path, raw)) == want


# --- strings ------------------------------------------------------------------------------------------------------

def test_a_string_offset_at_the_table_s_end_is_refused(objs, tmp_path):
    raw = copy(objs, "libelf_rpath.so")
    first = min(val for _, tag, val in dynamic(raw) if tag in (elf.DT_NEEDED, elf.DT_SONAME, elf.DT_RPATH))
    revalue(raw, elf.DT_STRSZ, first)
    with pytest.raises(elf.ElfError, match=rf"^a dynamic string offset \({first}\) lies past the string table$"):
        elf.read_dynamic(write(tmp_path, raw))
    revalue(raw, elf.DT_STRSZ, max(val for _, tag, val in dynamic(raw) if tag == elf.DT_RPATH) + 20)
    assert elf.read_dynamic(write(tmp_path, raw, "ok.so")).rpath == "$ORIGIN/../a:/opt/x"


def test_a_long_string_is_read_to_the_table_s_end_and_no_further(objs, tmp_path):
    raw = copy(objs, "libelf_runpath.so")
    off, text = string_at(raw, elf.DT_RUNPATH)
    assert text == LONG_RUNPATH and len(text) > 4096
    revalue(raw, elf.DT_STRSZ, off + len(text) + 1)  # the string ends the table
    assert elf.read_dynamic(write(tmp_path, raw, "end.so")).runpath == LONG_RUNPATH
    revalue(raw, elf.DT_STRSZ, off + 300)  # the table ends inside the string
    with pytest.raises(elf.ElfError, match="^a dynamic string is unterminated or longer than the string table allows$"):
        elf.read_dynamic(write(tmp_path, raw, "cut.so"))


def test_a_short_string_that_crosses_the_table_s_end_is_refused(objs, tmp_path):
    raw = copy(objs, "libelf_rpath.so")
    first = next(val for _, tag, val in dynamic(raw) if tag == elf.DT_NEEDED)  # the first string read
    revalue(raw, elf.DT_STRSZ, first + 3)  # "lib" of "libm.so.6" in the table, the rest past its end
    with pytest.raises(elf.ElfError, match="^a dynamic string is unterminated or longer than the string table allows$"):
        elf.read_dynamic(write(tmp_path, raw))


def test_a_string_of_256_bytes_is_read_whole_and_only_within_the_table(objs, tmp_path):
    """256 bytes is the first read's size: the NUL right after it is found by the second read, inside the table."""
    raw = copy(objs, "libelf_runpath.so")
    off, _ = string_at(raw, elf.DT_RUNPATH)
    raw[strtab_offset(raw) + off + 256] = 0  # the DT_RUNPATH string is now 256 bytes long
    revalue(raw, elf.DT_STRSZ, off + 257)  # its NUL ends the table
    assert elf.read_dynamic(write(tmp_path, raw, "in.so")).runpath == LONG_RUNPATH[:256]
    revalue(raw, elf.DT_STRSZ, off + 256)  # its NUL lies just past the table
    with pytest.raises(elf.ElfError, match="unterminated or longer"):
        elf.read_dynamic(write(tmp_path, raw, "out.so"))


def test_the_second_read_of_a_long_string_stops_at_the_table_s_end(objs, tmp_path):
    raw = copy(objs, "libelf_runpath.so")
    off, _ = string_at(raw, elf.DT_RUNPATH)
    raw[strtab_offset(raw) + off + 300] = 0  # a 300-byte string: the first read (256) does not reach its NUL
    revalue(raw, elf.DT_STRSZ, off + 301)
    assert elf.read_dynamic(write(tmp_path, raw, "in.so")).runpath == LONG_RUNPATH[:300]
    revalue(raw, elf.DT_STRSZ, off + 300)  # the NUL is the first byte past the table
    with pytest.raises(elf.ElfError, match="unterminated or longer"):
        elf.read_dynamic(write(tmp_path, raw, "out.so"))


def test_a_string_offset_no_table_has_is_refused(objs, tmp_path):
    raw = copy(objs, "libelf_rpath.so")
    revalue(raw, elf.DT_SONAME, (1 << 64) - 1)  # an unsigned value (Elf64_Xword): never a negative offset
    with pytest.raises(elf.ElfError, match=r"^a dynamic string offset \(18446744073709551615\) lies past"):
        elf.read_dynamic(write(tmp_path, raw))


def test_without_dt_strsz_a_string_is_bounded(objs, tmp_path):
    raw = copy(objs, "libelf_rpath.so")
    retag(raw, elf.DT_STRSZ, DT_DEBUG)
    assert elf.read_dynamic(write(tmp_path, raw)) == elf.read_dynamic(str(objs["libelf_rpath.so"]))
    raw = copy(objs, "libelf_runpath.so")
    retag(raw, elf.DT_STRSZ, DT_DEBUG)
    with pytest.raises(elf.ElfError, match="unterminated or longer"):  # over 4 KiB with no table size
        elf.read_dynamic(write(tmp_path, raw, "long.so"))


def test_a_path_that_is_not_utf8_keeps_its_bytes(objs, tmp_path):
    raw = copy(objs, "libelf_rpath.so")
    off, text = string_at(raw, elf.DT_RPATH)
    raw[strtab_offset(raw) + off + len(text) - 1] = 0xFF  # "/opt/x" -> "/opt/\xff"
    d = elf.read_dynamic(write(tmp_path, raw))
    assert d.rpath == "$ORIGIN/../a:/opt/\udcff" and os.fsencode(d.rpath).endswith(b"/opt/\xff")


# --- read_dynamic: errors and the cache -------------------------------------------------------------------------

def test_offsets_no_file_can_have_are_refused(objs, tmp_path):
    raw = copy(objs, "libelf_rpath.so")
    i = next(i for i, p in enumerate(phdrs(raw)) if p[0] == elf.PT_DYNAMIC)
    p = phdrs(raw)[i]
    p[2] = 1 << 63
    set_phdr(raw, i, p)
    path = write(tmp_path, raw)
    with pytest.raises(elf.ElfError, match=r"^an offset past the end of any file \(.+\)$"):
        elf.read_dynamic(path)
    assert elf.try_read(path) is None


def test_a_file_cut_while_it_is_read_is_refused(objs, tmp_path, monkeypatch):
    """The file shrinks between the stat and the read (another process rewriting it)."""
    path = write(tmp_path, copy(objs, "libelf_rpath.so"))
    real = elfcache.recall

    def recall(p, st, decode):
        os.truncate(p, 64)
        return real(p, st, decode)

    monkeypatch.setattr(elfcache, "recall", recall)
    with pytest.raises(elf.ElfError, match=r"^truncated or malformed ELF structure \(.+\)$"):
        elf.read_dynamic(path)


def test_try_read_answers_none_for_what_it_cannot_read(objs, tmp_path):
    assert elf.try_read(str(tmp_path / "missing.so")) is None
    with pytest.raises(FileNotFoundError):
        elf.read_dynamic(str(tmp_path / "missing.so"))
    assert elf.try_read(write(tmp_path, b"#!/bin/sh\n")) is None
    assert elf.try_read(str(objs["libelf_rpath.so"])) == readelf(objs["libelf_rpath.so"])


def test_a_refusal_is_remembered_and_raised_again(objs, tmp_path, monkeypatch):
    path = write(tmp_path, b"\x7fELF" + b"\2\1" + b"\0" * 20)
    with pytest.raises(elf.ElfError, match="truncated ELF header"):
        elf.read_dynamic(path)
    monkeypatch.setattr(elf, "_parse", lambda fh, size: pytest.fail("read again"))
    with pytest.raises(elf.ElfError, match="truncated ELF header"):
        elf.read_dynamic(path)


def test_reads_are_kept_by_file_identity(objs, tmp_path, monkeypatch):
    path = write(tmp_path, copy(objs, "libelf_rpath.so"))
    first = elf.read_dynamic(path)
    calls = []
    real = elf._parse
    monkeypatch.setattr(elf, "_parse", lambda fh, size: calls.append(size) or real(fh, size))
    monkeypatch.setattr(elfcache, "recall", lambda p, st, decode: None)  # only the in-memory cache answers
    assert elf.read_dynamic(path) is first and calls == []
    shutil.copy(objs["libelf_runpath.so"], path)  # the same path, another file
    assert elf.read_dynamic(path).runpath == LONG_RUNPATH and calls == [objs["libelf_runpath.so"].stat().st_size]


@pytest.mark.parametrize("held,after", [(4096, 4097), (4097, 1)])
def test_the_in_memory_cache_is_bounded(objs, held, after):
    elf._CACHE.update({("/nowhere", i, 0, 0): elf.Dynamic(machine="x86_64") for i in range(held)})
    elf.read_dynamic(str(objs["libelf_rpath.so"]))
    assert len(elf._CACHE) == after


@pytest.mark.parametrize("how", ["rewritten in place, another mtime", "replaced by rename, the same mtime"])
def test_a_changed_file_of_the_same_size_is_read_again(objs, tmp_path, monkeypatch, how):
    """The in-memory key is (path, mtime, size, inode): a file rewritten in place (new mtime) or renamed over
    (new inode) with the same size is another object."""
    monkeypatch.setattr(elfcache, "recall", lambda p, st, decode: None)  # only the in-memory cache could answer
    path = write(tmp_path, copy(objs, "libelf_rpath.so"))
    before = os.stat(path)
    assert elf.read_dynamic(path).soname == "libelf_rpath.so.1"
    raw = copy(objs, "libelf_rpath.so")
    off, _ = string_at(raw, elf.DT_SONAME)
    raw[strtab_offset(raw) + off + 3] = ord("X")  # "libXlf_rpath.so.1": the same size
    if how.startswith("rewritten"):
        with open(path, "r+b") as fh:
            fh.write(bytes(raw))
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 10**9))
    else:
        other = write(tmp_path, raw, "other.so")
        os.utime(other, ns=(before.st_atime_ns, before.st_mtime_ns))
        os.replace(other, path)
    assert os.stat(path).st_size == before.st_size
    assert elf.read_dynamic(path).soname == "libXlf_rpath.so.1"
