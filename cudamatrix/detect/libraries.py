"""Every copy of the CUDA runtime, cuDNN and their siblings on this machine, and the loader's view of them.

Where copies are looked for: the folders a framework's loader can reach -- each LD_LIBRARY_PATH entry, the
``ldconfig -p`` cache, conda prefixes (a conda build's RPATH), the ``nvidia/*/lib`` folders of nvidia-* wheels
(and ``torch/lib``: the frameworks' RUNPATH), and WSL's /usr/lib/wsl/lib -- and, with ``all_copies`` (detect and
doctor ``--all-copies``), the toolkit folders too: CUDA_HOME / CUDA_PATH and /usr/local/cuda* (lib64, lib,
targets/*/lib). A toolkit's copy that the ldconfig cache lists is found either way; the others no loader
reaches, and listing them cost a scan of every toolkit folder on every run (issue #29). Copies are files, told apart by their real path; the soname is read from the
ELF dynamic section. Versions come from the file name (libcudart.so.12.4.127) here and from ctypes calls in
the loader child (:mod:`.loader`).

The loader's view (ld.so(8), "Shared object dependencies"): a framework that dlopens a soname gets the copy
in the first LD_LIBRARY_PATH entry that has it, then the folders of its own RUNPATH (the torch and JAX
wheels name their nvidia/*/lib folders there, so those copies come next), then the ldconfig cache, then the
default folders. Copies outside that order are neither loaded nor shadowed.
"""
from __future__ import annotations

import os
import re
import stat
from collections.abc import Sequence

from cudamatrix.ldso.ldcache import LdEntry, parse_ldconfig, run_ldconfig  # noqa: F401  (its callers' name)
from cudamatrix.ldso.paths import glob_one, realpath
from cudamatrix.models import Library, Note

_NAME = re.compile(r"^lib(?P<base>cudart|cudnn|cublasLt|cublas|nvrtc|nccl|cuda|nvidia-ml)"
                   r"(?:-[0-9a-f]{8})?\.so(?P<suffix>(?:\.\d+)*)$")
NAMES = {"nvidia-ml": "nvml"}  # file base -> Library.name
VERSION_CALLS = {"cudart", "cudnn", "cuda"}  # small libraries whose version call is cheap to load
DEFAULT_DIRS = ["/lib64", "/usr/lib64", "/lib", "/usr/lib", "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
                "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu"]


def library_name(filename: str) -> str | None:
    """"libcudnn.so.9" -> "cudnn"; None for files that are not tracked."""
    m = _NAME.match(filename)
    if not m:
        return None
    return NAMES.get(m.group("base"), m.group("base"))


def version_from_filename(filename: str) -> str | None:
    """"libcudart.so.12.4.127" -> "12.4.127"; needs at least major.minor after .so."""
    m = _NAME.match(filename)
    if m and m.group("suffix").count(".") >= 2:
        return m.group("suffix")[1:]
    return None


def elf_soname(path: str) -> str | None:
    """DT_SONAME of an ELF shared object, read from its dynamic segment; None when absent or unreadable."""
    import struct

    try:
        with open(path, "rb") as fh:
            layout = _elf_layout(fh.read(64))
            if layout is None:
                return None
            is64, end, phoff, phentsize, phnum = layout
            loads, dynamic = _elf_segments(fh, is64, end, phoff, phentsize, phnum)
            if dynamic is None:
                return None
            fh.seek(dynamic[0])
            strtab, soname = _soname_entries(fh.read(min(dynamic[1], 65536)), is64, end)
            if strtab is None or soname is None:
                return None
            for vaddr, off, filesz in loads:
                if vaddr <= strtab < vaddr + filesz:
                    fh.seek(strtab - vaddr + off + soname)
                    return fh.read(256).split(b"\0", 1)[0].decode("ascii", "replace") or None
    except (OSError, struct.error, ValueError, OverflowError):  # ValueError: an offset seek cannot take
        return None
    return None


def _elf_layout(head: bytes) -> tuple[bool, str, int, int, int] | None:
    """Whether the first 64 bytes are an ELF header: (64-bit, struct byte order, phoff, phentsize, phnum),
    None when they are not."""
    import struct

    if len(head) < 52 or head[:4] != b"\x7fELF":
        return None
    is64, end = head[4] == 2, "<" if head[5] == 1 else ">"
    if is64:
        (phoff,) = struct.unpack_from(end + "Q", head, 32)
        phentsize, phnum = struct.unpack_from(end + "HH", head, 54)
    else:
        (phoff,) = struct.unpack_from(end + "I", head, 28)
        phentsize, phnum = struct.unpack_from(end + "HH", head, 42)
    return is64, end, phoff, phentsize, phnum


def _elf_segments(fh, is64: bool, end: str, phoff: int, phentsize: int,
                  phnum: int) -> tuple[list[tuple[int, int, int]], tuple[int, int] | None]:
    """Which of the first 64 program headers matter: the loadable segments (vaddr, offset, filesz) and the
    dynamic segment (offset, filesz), None when there is none."""
    import struct

    fh.seek(phoff)
    table = fh.read(phentsize * min(phnum, 64))
    loads, dynamic = [], None
    for i in range(min(phnum, 64)):
        if is64:
            p_type, _f, off, vaddr, _pa, filesz = struct.unpack_from(end + "IIQQQQ", table, i * phentsize)
        else:
            p_type, off, vaddr, _pa, filesz = struct.unpack_from(end + "IIIII", table, i * phentsize)
        if p_type == 1:
            loads.append((vaddr, off, filesz))
        elif p_type == 2:
            dynamic = (off, filesz)
    return loads, dynamic


def _soname_entries(data: bytes, is64: bool, end: str) -> tuple[int | None, int | None]:
    """The DT_STRTAB address and the DT_SONAME string offset the dynamic entries in ``data`` give (the last
    of each before DT_NULL), None for an absent one."""
    import struct

    size, fmt = (16, end + "qQ") if is64 else (8, end + "iI")
    strtab = soname = None
    for pos in range(0, len(data) - size + 1, size):
        tag, val = struct.unpack_from(fmt, data, pos)
        if tag == 0:
            break
        if tag == 5:
            strtab = val
        elif tag == 14:
            soname = val
    return strtab, soname


def _machine_flag() -> str:
    m = os.uname().machine if hasattr(os, "uname") else ""
    return {"x86_64": "x86-64", "aarch64": "AArch64"}.get(m, m)


def search_dirs(environ: dict[str, str], root: str, site_packages: list[str],
                conda_prefixes: Sequence[str] = (), all_copies: bool = False) -> list[tuple[str, str]]:
    """(folder, origin) pairs to scan, most specific first; LD_LIBRARY_PATH first as the loader does.
    The toolkit folders only with ``all_copies``."""
    dirs: list[tuple[str, str]] = []
    for entry in environ.get("LD_LIBRARY_PATH", "").split(":"):
        if entry:
            dirs.append((entry, "LD_LIBRARY_PATH"))
    if all_copies:
        for var in ("CUDA_HOME", "CUDA_PATH"):
            base = environ.get(var)
            if base:
                dirs += [(d, var) for d in _toolkit_lib_dirs(base)]
        for base in sorted(glob_one(os.path.join(root, "usr/local"), "cuda*")):
            origin = "/" + os.path.relpath(base, root)
            dirs += [(d, origin) for d in _toolkit_lib_dirs(base)]
    for base in [environ.get("CONDA_PREFIX", "")] + list(conda_prefixes):
        if base:
            dirs.append((os.path.join(base, "lib"), "conda"))
    for sp in site_packages:
        nvidia = glob_one(os.path.join(sp, "nvidia"), "*", dirs=True)
        for d in sorted(lib for lib in (os.path.join(n, "lib") for n in nvidia) if os.path.lexists(lib)):
            dirs.append((d, "wheel"))
        dirs.append((os.path.join(sp, "torch", "lib"), "wheel:torch"))
    dirs.append((os.path.join(root, "usr/lib/wsl/lib"), "wsl"))
    return dirs


def _toolkit_lib_dirs(base: str) -> list[str]:
    targets = glob_one(os.path.join(base, "targets"), "*", dirs=True)
    return [os.path.join(base, "lib64"), os.path.join(base, "lib")] + sorted(
        lib for lib in (os.path.join(t, "lib") for t in targets) if os.path.lexists(lib))


def find_copies(environ: dict[str, str], root: str, site_packages: list[str], ld_entries: list[LdEntry],
                wheel_owner: dict[str, str], conda_prefixes: Sequence[str] = (), all_copies: bool = False
                ) -> list[Library]:
    """Every tracked library copy a loader can reach (``all_copies``: and the toolkits' others), one
    :class:`Library` per real file, in discovery order.

    ``wheel_owner`` maps an absolute file path (as RECORD lists it) to its distribution name;
    ``conda_prefixes`` are conda environments to look into besides $CONDA_PREFIX (the probed interpreter's).
    """
    # lazy: `detect --from` would load 9 ms more (python -X importtime; the hoisting's budget per command is 3% of its run): cudamatrix.ldso.elf, ipaddress, urllib.parse
    from cudamatrix.ldso import elf  # here: a pasted report's reading never scans a library

    found: dict[str, Library] = {}
    flag = _machine_flag()

    def add(path: str, origin: str) -> None:
        name = library_name(os.path.basename(path))
        if name is None:
            return
        try:
            real = realpath(path)
            if not os.path.isfile(real):
                return
        except OSError:
            return
        if real in found:
            return
        dyn = elf.try_read(real)  # kept across runs (elfcache); 32-bit and big-endian objects: elf_soname
        soname = (dyn.soname if dyn is not None else elf_soname(real)) or _soname_guess(os.path.basename(path))
        shown = os.path.join(os.path.dirname(path), soname) if os.path.exists(
            os.path.join(os.path.dirname(path), soname)) else path
        if origin == "wheel":
            owner = wheel_owner.get(os.path.normpath(path)) or wheel_owner.get(os.path.normpath(shown))
            origin = f"wheel:{owner}" if owner else "wheel"
        found[real] = Library(name=name, soname=soname, path=shown, origin=origin,
                              version=version_from_filename(os.path.basename(real)),
                              stub=_in_stubs(path) or _in_stubs(real))

    dirs = search_dirs(environ, root, site_packages, conda_prefixes, all_copies)
    ld_first = [d for d in dirs if d[1] == "LD_LIBRARY_PATH"]
    for folder, origin in ld_first:
        _scan(folder, origin, add)
    for entry in ld_entries:
        if flag in ("x86-64", "AArch64") and flag not in entry.flags:
            continue  # another word size or architecture (a 32-bit libcuda.so.1 next to the 64-bit one)
        add(entry.path, "ldconfig")
    for folder, origin in dirs[len(ld_first):]:
        _scan(folder, origin, add)
    return list(found.values())


def _in_stubs(path: str) -> bool:
    """Inside a toolkit's link-time stubs folder (…/lib64/stubs/libcuda.so)."""
    return "stubs" in os.path.dirname(path).split(os.sep)


def _scan(folder: str, origin: str, add) -> None:
    try:
        with os.scandir(folder) as it:
            names = sorted(e.name for e in it if e.name.startswith("lib") and ".so" in e.name)
    except OSError:
        return
    for n in names:
        add(os.path.join(folder, n), origin)


def _soname_guess(filename: str) -> str:
    m = _NAME.match(filename)
    if not m:
        return filename
    parts = m.group("suffix").split(".")[1:2]
    return filename[: filename.index(".so") + 3] + ("." + parts[0] if parts else "")


def loader_view(copies: list[Library], environ: dict[str, str], ld_entries: list[LdEntry]) -> list[Note]:
    """Mark, for each soname, the copy the loader picks (``loaded_first``) and the reachable copies it
    shadows (``shadowed_by``). Returns notes for sonames whose reachable copies disagree on the version."""
    notes: list[Note] = []
    by_soname: dict[str, list[Library]] = {}
    for lib in copies:
        if not lib.stub or lib.origin == "LD_LIBRARY_PATH":
            by_soname.setdefault(lib.soname, []).append(lib)
    cache: dict[str, str] = {}
    for e in ld_entries:
        cache.setdefault(e.soname, e.path)
    ld_dirs = [d for d in environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    for soname, libs in by_soname.items():
        reach = _reachable(_search_order(soname, libs, ld_dirs, cache), libs)
        if reach:
            notes += _mark_winner(soname, reach)
    return notes


def _search_order(soname: str, libs: list[Library], ld_dirs: list[str], cache: dict[str, str]) -> list[str]:
    """The paths the loader tries for ``soname``, in its order: LD_LIBRARY_PATH, the folders of the wheel
    copies (their dependants' RPATH), the ld.so cache, the default folders."""
    order: list[str] = [os.path.join(d, soname) for d in ld_dirs]
    order += [os.path.join(os.path.dirname(x.path), soname) for x in libs if x.origin.startswith("wheel")]
    if soname in cache:
        order.append(cache[soname])
    order += [os.path.join(d, soname) for d in DEFAULT_DIRS]
    return order


def _reachable(order: list[str], libs: list[Library]) -> list[Library]:
    """Which of the found copies ``libs`` the search ``order`` reaches, first reached first (a path that exists
    and is, once links are resolved, one of them)."""
    reach: list[Library] = []
    by_real: dict[str, Library] = {}
    for x in libs:
        by_real.setdefault(realpath(x.path), x)
    for candidate in dict.fromkeys(order):
        if os.path.exists(candidate):
            found = by_real.get(realpath(candidate))
            if found is not None and found not in reach:
                reach.append(found)
    return reach


def _mark_winner(soname: str, reach: list[Library]) -> list[Note]:
    """Mark the first reachable copy loaded and the others shadowed by it; notes when the reachable copies
    disagree on the version (warning) and when the winner is a link-time stub (error)."""
    notes: list[Note] = []
    winner = reach[0]
    winner.loaded_first = True
    for lib in reach[1:]:
        lib.shadowed_by = winner.path
    versions = {x.version for x in reach if x.version}
    if len(reach) > 1 and len(versions) > 1:
        losers = ", ".join(f"{x.path} ({x.version or '?'}, {x.origin})" for x in reach[1:])
        notes.append(Note("loader", f"{soname}: {winner.path} ({winner.version or '?'}, {winner.origin}) "
                          f"is loaded first and shadows {losers}", "warning"))
    if winner.stub:
        notes.append(Note("loader", f"{soname}: the copy loaded first is a link-time stub ({winner.path})", "error"))
    return notes


def loadable(copies: list[Library]) -> list[tuple[str, str]]:
    """(path, name) of the copies whose version the loader child asks through ctypes.

    Loading a library runs its constructors: a copy reached through an unsafe folder (see
    :func:`unsafe_folder`) is never loaded; its version comes from its file name only."""
    return [(lib.path, lib.name) for lib in copies
            if lib.name in VERSION_CALLS and not lib.stub and unsafe_file(lib.path) is None]


# Where loading is unsafe. ld.so(8): an empty LD_LIBRARY_PATH entry (a leading, trailing or doubled colon)
# means the current directory, and a relative entry is resolved against it; anyone who can write to such
# a folder, or to a world-writable folder without the sticky bit, chooses the code that runs on load.
UNSAFE_PROBE = "unsafe library path"


def unsafe_folder(folder: str) -> str | None:
    """Why loading from ``folder`` would be unsafe, or None when it is not."""
    if folder == "":
        return "an empty entry means the current directory"
    if not os.path.isabs(folder):
        return "a relative folder is resolved against the current directory"
    try:
        st = os.stat(folder)
    except OSError:
        return None  # nothing can be loaded from a folder that is not there
    if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
        return "the folder is world-writable"
    return None


def unsafe_file(path: str) -> str | None:
    """Why loading the file ``path`` would be unsafe (its folder, or the file itself), or None."""
    folder = os.path.dirname(path)
    reason = unsafe_folder(folder) if folder or not os.path.isabs(path) else None
    if reason:
        return reason
    try:
        st, fst = os.stat(path), os.stat(folder or ".")
    except OSError:
        return None
    if st.st_mode & stat.S_IWOTH:
        return "the file is world-writable"
    mine = {0, os.getuid()} if hasattr(os, "getuid") else {0}
    if fst.st_mode & stat.S_IWOTH and st.st_uid not in mine:
        return "another user's file in a world-writable folder"
    return None


def unsafe_notes(environ: dict[str, str], copies: list[Library]) -> list[Note]:
    """Notes (probe :data:`UNSAFE_PROBE`) for unsafe LD_LIBRARY_PATH entries and for copies not loaded."""
    notes = []
    value = environ.get("LD_LIBRARY_PATH")
    if value is not None:
        for entry in value.split(":"):
            reason = unsafe_folder(entry)
            if reason:
                shown = entry or "(empty entry)"
                notes.append(Note(UNSAFE_PROBE, f"LD_LIBRARY_PATH entry {shown!r}: {reason}; libraries there are "
                                  "not loaded to ask their version", "warning"))
    for lib in copies:
        reason = unsafe_file(lib.path)
        if reason and lib.name in VERSION_CALLS:
            notes.append(Note(UNSAFE_PROBE, f"{lib.path}: {reason}; not loaded (version from the file name only)",
                              "warning"))
    return notes


def safe_environ(environ: dict[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default: this process's) with the unsafe LD_LIBRARY_PATH entries dropped: the loader
    child resolves sonames (libnvidia-ml.so.1, libcuda.so.1) and its own dependencies through it."""
    env = dict(os.environ if environ is None else environ)
    if "LD_LIBRARY_PATH" in env:
        kept = [e for e in env["LD_LIBRARY_PATH"].split(":") if unsafe_folder(e) is None]
        if kept:
            env["LD_LIBRARY_PATH"] = ":".join(kept)
        else:
            del env["LD_LIBRARY_PATH"]
    return env
