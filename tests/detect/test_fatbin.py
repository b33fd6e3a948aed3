"""cudamatrix.detect.fatbin: the SASS and PTX architectures of a shared object's ``.nv_fatbin``, from the
fatbinary headers. Objects built here with gcc and given a ``.nv_fatbin`` section with objcopy (the layout
scripts/read_wheel_archs.py reads and checks against cuobjdump in tests/scripts/test_read_wheel_archs.py), and the
real xformers 0.0.29.post3 ``_C.so`` read by both readers."""
from __future__ import annotations

import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from support.realwheels import CACHE

from cudamatrix.detect import fatbin
from cudamatrix.ldso import elf, elfcache

REPO = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPO / "scripts"))
import hostile_inputs  # noqa: E402
import read_wheel_archs  # noqa: E402

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not (shutil.which("gcc") and shutil.which("objcopy")), reason="needs gcc, objcopy")]

MAGIC = struct.pack("<I", 0xBA55ED50)


def _entry(kind: int, sm: int, payload: bytes = b"\0" * 24) -> bytes:
    return struct.pack("<HHIQIIII", kind, 1, 64, len(payload), 0, 0, 0, sm) + bytes(32) + payload


def _fatbin(*entries: bytes) -> bytes:
    body = b"".join(entries)
    return MAGIC + struct.pack("<HHQ", 1, 16, len(body)) + body


@pytest.fixture(autouse=True)
def fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    elfcache.forget()
    fatbin.forget()
    yield
    elfcache.forget()
    fatbin.forget()


def _object(tmp_path: Path, name: str, section: bytes | None) -> str:
    (tmp_path / "e.c").write_text("int use(void) { return 1; }\n")
    plain = tmp_path / "plain.so"
    if not plain.exists():
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(plain), str(tmp_path / "e.c")], check=True, timeout=120)
    if section is None:
        return str(plain)
    (tmp_path / f"{name}.bin").write_bytes(section)
    subprocess.run(["objcopy", "--add-section", f".nv_fatbin={tmp_path / name}.bin", str(plain),
                    str(tmp_path / f"{name}.so")], check=True, timeout=120)
    return str(tmp_path / f"{name}.so")


def test_the_architectures_of_each_fatbinary_and_the_padding_between(tmp_path):
    # two fatbinaries, 8 bytes of alignment padding between: SASS sm_80 sm_90 and sm_120, PTX compute_90
    section = _fatbin(_entry(2, 80), _entry(2, 90), _entry(1, 90)) + b"\0" * 8 + _fatbin(_entry(2, 120))
    path = _object(tmp_path, "two", section)
    assert fatbin.archs(path) == (["8.0", "9.0", "12.0"], ["9.0"])
    assert read_wheel_archs.fatbin_archs(Path(path)) == ({"8.0", "9.0", "12.0"}, {"9.0"})  # the script agrees
    assert fatbin.archs(_object(tmp_path, "none", None)) == ([], [])  # no device code


def test_hostile_fatbinaries_are_refused_or_read_within_bounds(tmp_path):
    for i, (label, blob) in enumerate(hostile_inputs._fatbin_blobs().items()):
        path = _object(tmp_path, f"h{i}", blob)
        try:
            sass, ptx = fatbin.archs(path)
        except elf.ElfError:
            continue
        assert all(isinstance(a, str) and len(a) <= 4 for a in sass + ptx), label
    with pytest.raises(elf.ElfError):
        fatbin.archs(str(tmp_path / "h0.bin"))  # not an ELF object


def test_the_real_xformers_object_reads_as_the_script_reads_it():
    so = CACHE / "xformers-0.0.29.post3" / "_C.so"
    if not so.exists():
        pytest.skip(f"{so} is not cached (tests/pastes/test_extensions.py fetches it)")
    assert fatbin.archs(str(so)) == (["6.0", "7.0", "7.5", "8.0", "9.0"], ["6.0", "8.0"])
    assert read_wheel_archs.fatbin_archs(so) == ({"6.0", "7.0", "7.5", "8.0", "9.0"}, {"6.0", "8.0"})
