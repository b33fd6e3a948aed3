"""cudamatrix.ldso.elfsyms' list of undefined symbols, on objects written byte by byte here: its column work in C
(issue #39) must pick exactly the entries without a section (both bytes of st_shndx zero), of global binding, with
a name, in table order, and nothing that only looks like that when the table is read a byte off."""
from __future__ import annotations

import struct

import pytest

from cudamatrix.ldso import elf, elfsyms

GLOBAL_FUNC, GLOBAL_NOTYPE, WEAK_FUNC, LOCAL_FUNC = 0x12, 0x10, 0x22, 0x02


def _object(symbols: list[tuple[bytes | int, int, int]]) -> bytes:
    """A 64-bit little-endian shared object: an ELF header, one program header, ``.dynstr``, ``.dynsym`` (the null
    symbol, then ``symbols``: (name, or a raw st_name offset; st_info; st_shndx)) and a table of three sections."""
    strings, names = b"\0", []
    for name, _info, _shndx in symbols:
        if isinstance(name, int):
            names.append(name)
        elif name:
            names.append(len(strings))
            strings += name + b"\0"
        else:
            names.append(0)
    dynsym = bytes(24) + b"".join(struct.pack("<IBBHQQ", n, info, 0, shndx, 0, 0)
                                  for n, (_name, info, shndx) in zip(names, symbols, strict=True))
    dynstr_at = 64 + 56
    dynsym_at = (dynstr_at + len(strings) + 7) // 8 * 8
    shoff = dynsym_at + len(dynsym)
    header = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9) + struct.pack(
        "<HHIQQQIHHHHHH", 3, 62, 1, 0, 64, shoff, 0, 64, 56, 1, 64, 3, 0)
    program = struct.pack("<IIQQQQQQ", 1, 4, 0, 0, 0, shoff, shoff, 0x1000)
    sections = bytes(64) + struct.pack("<IIQQQQIIQQ", 0, elfsyms.SHT_DYNSYM, 2, dynsym_at, dynsym_at, len(dynsym), 2,
                                       1, 8, 24) + \
        struct.pack("<IIQQQQIIQQ", 0, elfsyms.SHT_STRTAB, 2, dynstr_at, dynstr_at, len(strings), 0, 0, 1, 0)
    body = header + program + strings
    return body + bytes(dynsym_at - len(body)) + dynsym + sections


@pytest.fixture(autouse=True)
def fresh():
    elfsyms.forget()
    yield
    elfsyms.forget()


def test_only_global_named_entries_without_a_section_are_undefined_in_table_order(tmp_path):
    path = tmp_path / "libuse.so"
    path.write_bytes(_object([
        (b"_ZN3c103oneEv", GLOBAL_FUNC, 0),
        (b"maybe", WEAK_FUNC, 0),  # a missing weak symbol is no error
        (b"hidden", LOCAL_FUNC, 0),
        (b"", GLOBAL_FUNC, 0),  # no name: no symbol to look up
        (b"in_section_1", GLOBAL_FUNC, 1),  # bytes 01 00, then the next entry's 00 01: a zero pair a byte off
        (b"in_section_256", GLOBAL_FUNC, 0x100),  # its low byte is zero, its high byte not
        (b"absolute", GLOBAL_FUNC, 0xFFF1),  # SHN_ABS
        (b"_ZN2at5threeEv", GLOBAL_FUNC, 0),  # undefined again after defined ones: a second run
        (b"aoti_torch_x", GLOBAL_NOTYPE, 0),
        (b"in_section_65280", GLOBAL_FUNC, 0xFF00),
    ]))
    assert elfsyms.undefined(str(path)) == ("_ZN3c103oneEv", "_ZN2at5threeEv", "aoti_torch_x")


def test_a_table_with_no_undefined_entry_and_one_of_only_undefined_entries(tmp_path):
    none = tmp_path / "libnone.so"
    none.write_bytes(_object([(b"a", GLOBAL_FUNC, 7), (b"b", GLOBAL_FUNC, 0x700)]))
    assert elfsyms.undefined(str(none)) == ()
    every = tmp_path / "libevery.so"
    names = [b"s%d" % i for i in range(300)]
    every.write_bytes(_object([(n, GLOBAL_FUNC, 0) for n in names]))
    assert elfsyms.undefined(str(every)) == tuple(n.decode() for n in names)


def test_a_name_past_the_string_table_is_an_elf_error(tmp_path):
    path = tmp_path / "libbad.so"
    path.write_bytes(_object([(b"fine", GLOBAL_FUNC, 0), (4096, GLOBAL_FUNC, 0)]))
    with pytest.raises(elf.ElfError, match="past the string table"):
        elfsyms.undefined(str(path))
    ok = tmp_path / "libok.so"
    ok.write_bytes(_object([(b"fine", GLOBAL_FUNC, 0), (4096, GLOBAL_FUNC, 3)]))  # a defined one is not read
    assert elfsyms.undefined(str(ok)) == ("fine",)
