"""ldso.elfcache: the ELF facts kept across runs, trusted only while the file's stat stamp holds."""
from __future__ import annotations

import json
import os
import shutil

import pytest

from cudamatrix.ldso import elf, elfcache


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    elfcache.forget()
    elf._CACHE.clear()
    yield tmp_path / "xdg" / "cudamatrix" / elfcache.FILE
    elfcache.forget()
    elf._CACHE.clear()


@pytest.fixture
def lib(tmp_path):
    """A real ELF object of this machine (the interpreter's own binary), copied so that the test may change it."""
    path = tmp_path / "libreal.so"
    shutil.copyfile(os.path.realpath(shutil.which("true") or "/bin/true"), path)
    return str(path)


def _new_run():
    """What a new process starts with: nothing in memory."""
    elfcache.forget()
    elf._CACHE.clear()


def _refuse_parsing(monkeypatch):
    def parse(fh, size):
        raise AssertionError("the file was read again")
    monkeypatch.setattr(elf, "_parse", parse)


def test_facts_come_back_in_the_next_run_without_reading_the_file(cache, lib, monkeypatch):
    first = elf.read_dynamic(lib)
    assert elfcache.save() is None
    assert oct(cache.stat().st_mode & 0o777) == "0o600" and oct(cache.parent.stat().st_mode & 0o777) == "0o700"
    _new_run()
    _refuse_parsing(monkeypatch)
    assert elf.read_dynamic(lib) == first
    assert elfcache.save() is None and elfcache._fresh == {}  # nothing new: nothing written


def test_a_changed_file_is_read_again(cache, lib, monkeypatch):
    elf.read_dynamic(lib)
    elfcache.save()
    _new_run()
    with open(lib, "ab") as fh:
        fh.write(b"\0")  # size, mtime and ctime change
    calls = []
    real = elf._parse
    monkeypatch.setattr(elf, "_parse", lambda fh, size: calls.append(1) or real(fh, size))
    elf.read_dynamic(lib)
    assert calls == [1]


def test_a_restored_modification_time_does_not_fool_it(cache, lib, monkeypatch):
    """The change time cannot be set back: a file rewritten with its old mtime is read again."""
    elf.read_dynamic(lib)
    elfcache.save()
    _new_run()
    st = os.stat(lib)
    with open(lib, "r+b") as fh:
        fh.seek(st.st_size - 1)
        fh.write(b"\1")
    os.utime(lib, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert elfcache.recall(lib, os.stat(lib), elf._decode) is None


def test_errors_are_kept_too(cache, tmp_path, monkeypatch):
    text = tmp_path / "libtext.so"
    text.write_text("not an ELF object")
    with pytest.raises(elf.ElfError, match="not an ELF file"):
        elf.read_dynamic(str(text))
    elfcache.save()
    _new_run()
    _refuse_parsing(monkeypatch)
    with pytest.raises(elf.ElfError, match="not an ELF file"):
        elf.read_dynamic(str(text))


@pytest.mark.parametrize("entry", [
    {"machine": 1, "soname": None, "needed": [], "rpath": None, "runpath": None, "nodeflib": False, "interp": None,
     "notes": []},
    {"machine": "x86_64", "soname": None, "needed": "libc.so.6", "rpath": None, "runpath": None, "nodeflib": False,
     "interp": None, "notes": []},
    {"machine": "x86_64", "soname": None, "needed": [], "rpath": None, "runpath": None, "nodeflib": 0,
     "interp": None, "notes": []},
    {"machine": "x86_64", "exec": "os.system('x')"},
    {"error": ["x"]},
    "x86_64",
])
def test_an_entry_not_exactly_of_its_types_is_ignored(cache, lib, entry):
    st = os.stat(lib)
    cache.parent.mkdir(parents=True, mode=0o700)
    cache.write_text(json.dumps({"version": 1, "files": {lib: [elfcache.stamp(st), entry]}}))
    os.chmod(cache, 0o600)
    assert elfcache.recall(lib, st, elf._decode) is None
    assert elf.read_dynamic(lib).machine in elf.MACHINES.values()  # read from the file instead


def test_a_cache_others_can_write_or_a_link_is_not_read(cache, lib, tmp_path):
    elf.read_dynamic(lib)
    elfcache.save()
    os.chmod(cache, 0o644)
    _new_run()
    assert elfcache.recall(lib, os.stat(lib), elf._decode) is None
    os.chmod(cache, 0o600)
    moved = tmp_path / "elsewhere.json"
    cache.rename(moved)
    cache.symlink_to(moved)
    _new_run()
    assert elfcache.recall(lib, os.stat(lib), elf._decode) is None


def test_bounded_and_safe_to_delete(cache, lib, tmp_path, monkeypatch):
    monkeypatch.setattr(elfcache, "MAX_ENTRIES", 3)
    copies = []
    for i in range(5):
        copies.append(str(tmp_path / f"lib{i}.so"))
        shutil.copyfile(lib, copies[-1])
        elf.read_dynamic(copies[-1])
    elfcache.save()
    assert len(json.loads(cache.read_text())["files"]) == 3
    _new_run()
    for path in copies[:2]:
        elf.read_dynamic(path)
    shutil.copyfile(lib, tmp_path / "lib9.so")
    elf.read_dynamic(str(tmp_path / "lib9.so"))
    elfcache.save()
    kept = json.loads(cache.read_text())["files"]
    assert len(kept) == 3 and str(tmp_path / "lib9.so") in kept and set(copies[:2]) <= set(kept)
    cache.unlink()
    _new_run()
    assert elf.read_dynamic(copies[0]).machine


def _far_dynamic(lib: str) -> str:
    """The object with its PT_DYNAMIC segment's file offset set to 2**64 - 16: past any file, and past what
    ``seek`` can take (it raises ValueError, not OSError, for such an offset)."""
    import struct

    data = bytearray(open(lib, "rb").read())
    (phoff,) = struct.unpack_from("<Q", data, 32)
    phentsize, phnum = struct.unpack_from("<HH", data, 54)
    for i in range(phnum):
        at = phoff + i * phentsize
        if struct.unpack_from("<I", data, at)[0] == 2:  # PT_DYNAMIC
            struct.pack_into("<Q", data, at + 8, 2**64 - 16)
            break
    else:
        pytest.skip("this machine's /bin/true has no dynamic segment")
    far = lib + ".far"
    open(far, "wb").write(bytes(data))
    return far


def test_a_dynamic_segment_offset_past_any_file_is_an_elf_error_not_a_crash(cache, lib):
    from cudamatrix.detect.libraries import elf_soname

    far = _far_dynamic(lib)
    with pytest.raises(elf.ElfError, match="offset"):
        elf.read_dynamic(far)
    assert elf.try_read(far) is None
    assert elf_soname(far) is None
