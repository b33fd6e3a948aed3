"""Read the GPU architectures compiled into a wheel's shared libraries (SASS and PTX), with cuobjdump.

Run by hand when adding a JAX (or any CUDA) release to the matrix; prints one JSON object per wheel:

    python scripts/read_wheel_archs.py [--cuobjdump PATH] WHEEL [WHEEL ...]

Each shared library in the wheel is extracted to a temporary folder (one at a time: the CUDA plugins are
hundreds of MB unpacked) and listed with ``cuobjdump --list-elf`` (SASS: ``sm_XX`` cubins) and ``--list-ptx``
(PTX for JIT). A library without device code is skipped. ``archs``/``ptx`` of the wheel are the intersection
over the libraries that carry device code: a GPU needs a kernel image from every one of them.
``cuobjdump`` comes with the CUDA toolkit, or the ``nvidia-cuda-cuobjdump`` wheel (a test dependency; found
without ``--cuobjdump``). Where cuobjdump refuses a library ("Invalid ELF": jax-cuda12-pjrt 0.4.23 and the
jax-cuda12-plugin kernels of 0.4.22/0.4.23 are such libraries), the headers of its ``.nv_fatbin`` section are
read directly (:func:`fatbin_archs`): each entry names its kind (SASS cubin or PTX) and its ``sm_XX``.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

# cuobjdump names each entry "<file>.<n>.sm_90.cubin" / ".sm_120.ptx"; an arch-specific "sm_90a" is kept apart
_ARCH = re.compile(r"\.sm_(\d+)([af]?)\.(cubin|ptx)\b")


def cc(sm: str) -> str:
    """``"90"`` -> ``"9.0"``, ``"120"`` -> ``"12.0"`` (the last digit is the minor)."""
    return f"{int(sm[:-1])}.{sm[-1]}"


def find_cuobjdump() -> str | None:
    """cuobjdump on PATH, else the one the ``nvidia-cuda-cuobjdump`` wheel installs (``nvidia/cu*/bin``)."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        for cand in sorted(Path(root).glob("cu*/bin/cuobjdump"), reverse=True):
            return str(cand)
    return None


FATBIN_MAGIC = 0xBA55ED50  # each fatbinary in .nv_fatbin starts with it; its entries are cubins (2) or PTX (1)


def _section(so: Path, name: str) -> bytes | None:
    """The bytes of ELF section ``name`` of the 64-bit little-endian library ``so`` (None: no such section)."""
    data = so.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return None
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = headers[shstrndx]
    for sh_name, _type, _flags, _addr, offset, size in headers:
        end = data.index(b"\0", strtab[4] + sh_name)
        if data[strtab[4] + sh_name:end].decode() == name:
            return data[offset:offset + size]
    return None


def fatbin_archs(so: Path) -> tuple[set[str], set[str]]:
    """(SASS archs, PTX archs) read from the fatbinary headers of ``so`` without cuobjdump."""
    data = _section(so, ".nv_fatbin") or b""
    sass: set[str] = set()
    ptx: set[str] = set()
    at = data.find(struct.pack("<I", FATBIN_MAGIC))
    while at >= 0:
        _magic, _version, header, size = struct.unpack_from("<IHHQ", data, at)
        entry, end = at + header, at + header + size
        while entry < end:
            kind, _unused, entry_header, entry_size = struct.unpack_from("<HHIQ", data, entry)
            sm, = struct.unpack_from("<I", data, entry + 28)
            (ptx if kind == 1 else sass).add(cc(str(sm)))
            entry += entry_header + entry_size
        at = data.find(struct.pack("<I", FATBIN_MAGIC), end)
    return sass, ptx


def _list(cuobjdump: str, so: Path, flag: str) -> tuple[set[str], set[str]]:
    """(generic archs, arch-specific archs such as 9.0a) of one listing; empty when there is no device code.
    A library cuobjdump refuses as an invalid ELF is read from its fatbinary headers instead."""
    res = subprocess.run([cuobjdump, flag, str(so)], capture_output=True, text=True, check=False)
    if "Invalid ELF" in res.stderr:
        sass, ptx = fatbin_archs(so)
        return (ptx if flag == "--list-ptx" else sass), set()
    out = res.stdout
    generic: set[str] = set()
    specific: set[str] = set()
    for sm, suffix, _kind in _ARCH.findall(out):
        (specific if suffix else generic).add(cc(sm) + suffix)
    return generic, specific


def _key(c: str) -> tuple[int, int, str]:
    major, minor = c.split(".")
    return int(major), int(minor.rstrip("af")), minor.lstrip("0123456789")


def read_wheel(wheel: Path, cuobjdump: str) -> dict:
    """{"wheel", "libraries": {member: {"sass", "sass_specific", "ptx"}}, "archs", "ptx"} for one wheel."""
    libs: dict[str, dict[str, list[str]]] = {}
    with zipfile.ZipFile(wheel) as zf, tempfile.TemporaryDirectory() as tmp:
        for member in zf.namelist():
            if not re.search(r"\.so(\.\d+)*$", member):
                continue
            path = Path(zf.extract(member, tmp))
            sass, sass_specific = _list(cuobjdump, path, "--list-elf")
            ptx, _ = _list(cuobjdump, path, "--list-ptx")
            path.unlink()  # keep at most one unpacked library on disk
            if sass or ptx or sass_specific:
                libs[member] = {"sass": sorted(sass, key=_key), "sass_specific": sorted(sass_specific, key=_key),
                                "ptx": sorted(ptx, key=_key)}
    archs = set.intersection(*(set(v["sass"]) for v in libs.values())) if libs else set()
    ptx_all = set.intersection(*(set(v["ptx"]) for v in libs.values())) if libs else set()
    return {"wheel": wheel.name, "libraries": libs, "archs": sorted(archs, key=_key),
            "ptx": sorted(ptx_all, key=_key)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cuobjdump", default=None, help="default: on PATH, else the nvidia-cuda-cuobjdump wheel's")
    parser.add_argument("wheels", nargs="+", type=Path)
    args = parser.parse_args(argv)
    tool = args.cuobjdump or find_cuobjdump()
    if tool is None:
        parser.error("cuobjdump not found: install the CUDA toolkit or the nvidia-cuda-cuobjdump wheel")
    for wheel in args.wheels:
        print(json.dumps(read_wheel(wheel, tool)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
