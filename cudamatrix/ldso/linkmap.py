"""The ld.so model: which file glibc's loader maps for each name a framework asks for (:class:`LinkMap`, its
search steps, :func:`system_search` for the process-wide inputs). Pure: reads ELF headers and folders, runs
nothing."""
from __future__ import annotations

import os
import re as _re
import stat as _stat
from collections.abc import Sequence

from cudamatrix.ldso import elf as _elf
from cudamatrix.ldso.paths import realpath
from cudamatrix.schema import field, record

# --- the loader model: which file ld.so maps for a SONAME ------------------------------------------------
#
# glibc's search order for a name without a slash (ld.so(8) "Shared object dependencies", dlopen(3); glibc
# elf/dl-load.c ``_dl_map_object``): an object already loaded whose DT_SONAME (or the name it was loaded
# under) matches wins; then DT_RPATH of the requesting object and of the objects that loaded it, up the
# chain, and the executable's (skipped when the requesting object has DT_RUNPATH; an object that has both
# ignores its DT_RPATH); LD_LIBRARY_PATH; DT_RUNPATH of the requesting object only; /etc/ld.so.cache; the
# default folders (the last two skipped for DF_1_NODEFLIB). A name with a slash is opened as a path, and an
# object with the same device and inode already loaded is reused. A candidate of another ELF class or
# machine is skipped and the search goes on. Dependencies are mapped breadth-first. glibc-hwcaps
# subfolders are not modelled.


@record
class Obj:
    """One object in the simulated link map."""

    path: str  # as ld.so found it (before symlinks are resolved; $ORIGIN is its folder)
    real: str  # what /proc/self/maps shows
    dyn: _elf.Dynamic | None
    loader: Obj | None = None
    names: set[str] = field(default_factory=set)
    ident: tuple[int, int] | None = None  # (st_dev, st_ino)
    how: str = ""  # how it came to be mapped: "LD_PRELOAD", "preload", "dlopen", "DT_NEEDED", "mapped"


@record
class Resolution:
    """The model's answer for one request: the file that will be mapped and the rule that made it win."""

    name: str  # the requested name (a SONAME, or a path)
    path: str | None  # real path of the mapped file; None: not found (the load fails)
    rule: str  # "already loaded (LD_PRELOAD)", "DT_RPATH of libtorch_cuda.so", "LD_LIBRARY_PATH", ...
    requested_by: str | None  # real path of the requesting object (None: LD_PRELOAD)
    how: str  # "DT_NEEDED", "dlopen", "LD_PRELOAD", "preload"
    error: str | None = None  # why the load fails (not found, not an ELF object)
    found_as: str | None = None  # the path the search found (its folder is the one that won)
    when: str = "import"
    soname: str | None = None  # the SONAME a load under several names answers for (libcudnn_graph.so.9)


@record
class Search:
    """The process-wide inputs of the search: environment, cache, default folders, token values."""

    ld_library_path: str | None = None
    ld_preload: str | None = None
    cwd: str = "/"
    cache: dict[str, str] = field(default_factory=dict)  # soname -> path, first matching ld.so.cache entry
    default_dirs: list[str] = field(default_factory=list)
    lib_token: str = "lib"  # what $LIB expands to
    platform: str = ""  # what $PLATFORM expands to
    machine: str = ""  # the ELF machine of the process (x86_64 / aarch64)
    executable: str | None = None  # the program's file (its DT_RPATH is searched last among RPATHs)


# the ld.so cache flag of this machine's own objects (ldconfig -p prints it); another machine's cache is read whole
_CACHE_FLAGS = {"x86_64": "x86-64", "aarch64": "AArch64"}

# $PLATFORM is glibc's GLRO(dl_platform): the kernel's AT_PLATFORM, except on x86-64 from glibc 2.26 on, where
# init_cpu_features (sysdeps/x86/cpu-features.c) renames it on an Intel CPU ("GenuineIntel": arch_kind_intel)
# whose usable features name a legacy platform: "xeon_phi" (AVX512CD, AVX512ER and AVX512PF), else "haswell"
# (AVX2, FMA, BMI1, BMI2, LZCNT, MOVBE, POPCNT). AMD, Hygon, Zhaoxin and other vendors keep "x86_64". (glibc 2.37
# dropped the legacy hwcaps subfolder search, not this renaming: the token still expands to "haswell" there.)
# Feature names as /proc/cpuinfo lists them (the kernel calls LZCNT's CPUID bit "abm").
XEON_PHI_FLAGS = frozenset({"avx512cd", "avx512er", "avx512pf"})
HASWELL_FLAGS = frozenset({"avx2", "fma", "bmi1", "bmi2", "abm", "movbe", "popcnt"})
FIRST_NAMING_GLIBC = (2, 26)


def dl_platform(machine: str, glibc: tuple[int, int] | None, vendor: str | None, flags: frozenset[str]) -> str:
    """What glibc's ld.so expands $PLATFORM to in a process on ``machine`` (the kernel's name, AT_PLATFORM) with
    glibc ``glibc`` (None: not glibc) on a CPU of ``vendor`` (cpuinfo's vendor_id) with the feature ``flags``."""
    if machine != "x86_64" or glibc is None or glibc < FIRST_NAMING_GLIBC or vendor != "GenuineIntel":
        return machine
    if XEON_PHI_FLAGS <= flags:
        return "xeon_phi"
    if HASWELL_FLAGS <= flags:
        return "haswell"
    return machine


def host_platform(machine: str) -> str:
    """:func:`dl_platform` for this machine: its glibc (``confstr``) and its first CPU's vendor and flags."""
    return dl_platform(machine, _host_glibc(), *_host_cpu())


def _host_glibc() -> tuple[int, int] | None:
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (AttributeError, ValueError, OSError):
        return None
    m = _re.match(r"glibc (\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _host_cpu(path: str = "/proc/cpuinfo") -> tuple[str | None, frozenset[str]]:
    """The first processor's vendor_id and flags in ``path`` ((None, {}) when unreadable)."""
    try:
        with open(path, "rb") as f:
            text = f.read(1 << 16).decode("ascii", "replace")
    except OSError:
        return None, frozenset()
    fields: dict[str, str] = {}
    for line in text.split("\n\n", 1)[0].splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    return fields.get("vendor_id"), frozenset(fields.get("flags", "").split())


def system_search(environ: dict[str, str], ld_entries: list, executable: str | None, cwd: str | None = None,
                  root: str = "/") -> Search:
    """The Search of a process started with ``environ`` running ``executable``.

    Inference rules (glibc compiles these in; they are read from where its loader lives): the ELF
    interpreter's real folder is glibc's slibdir; "…/lib64" -> $LIB "lib64" and default folders /lib64,
    /usr/lib64 (Fedora, RHEL, SUSE); "…/lib/<triplet>" -> $LIB "lib/<triplet>" and default folders
    /lib/<triplet>, /usr/lib/<triplet>, /lib, /usr/lib (Debian, Ubuntu multiarch); else "lib", /lib, /usr/lib.
    $PLATFORM is glibc's platform name (:func:`dl_platform`): the kernel's machine name, or "haswell" /
    "xeon_phi" on an Intel x86-64 CPU with those features.
    """
    machine = os.uname().machine if hasattr(os, "uname") else ""
    exe_dyn = _elf.try_read(executable) if executable else None
    interp = os.path.realpath(exe_dyn.interp) if exe_dyn and exe_dyn.interp else ""
    folder = os.path.dirname(interp)
    m = _re.search(r"/lib/([a-z0-9_]+-linux-gnu[a-z0-9_]*)$", folder)
    if m:
        lib_token = "lib/" + m.group(1)
        defaults = [f"/lib/{m.group(1)}", f"/usr/lib/{m.group(1)}", "/lib", "/usr/lib"]
    elif folder.endswith("lib64"):
        lib_token, defaults = "lib64", ["/lib64", "/usr/lib64"]
    else:
        lib_token, defaults = "lib", ["/lib", "/usr/lib"]
    flag = _CACHE_FLAGS.get(machine)
    cache: dict[str, str] = {}
    for e in ld_entries:
        if flag and flag not in e.flags:
            continue  # another word size or machine: ld.so skips these entries
        cache.setdefault(e.soname, e.path)
    return Search(ld_library_path=environ.get("LD_LIBRARY_PATH"), ld_preload=environ.get("LD_PRELOAD"),
                  cwd=cwd or os.getcwd(), cache=cache, default_dirs=[os.path.join(root, d.lstrip("/"))
                                                                     for d in defaults],
                  lib_token=lib_token, platform=host_platform(machine), machine=machine,
                  executable=os.path.realpath(executable) if executable else None)


class LinkMap:
    """A simulated ld.so namespace. Load objects the way a process does; every answer is recorded."""

    def __init__(self, search: Search, mapped: Sequence[str] = (), fits: dict[str, bool] | None = None,
                 listings: dict[str, frozenset[str] | None] | None = None) -> None:
        """``fits`` and ``listings``: answers of :meth:`_fits` and the folders' names, to share between link maps
        of one machine state (files do not change while a prediction runs)."""
        self.search = search
        self._listings: dict[str, frozenset[str] | None] = {} if listings is None else listings
        self.objects: list[Obj] = []
        self._by_name: dict[str, Obj] = {}  # name -> the first object answering to it (glibc walks in load order)
        self._by_ident: dict[tuple[int, int], Obj] = {}  # (st_dev, st_ino) -> the object mapped from that file
        self._fits_cache: dict[str, bool] = {} if fits is None else fits
        self._expanded: dict[tuple[int, str], list[str]] = {}  # (id(object), DT_RPATH/DT_RUNPATH value) -> folders
        # objects whose DT_NEEDED closure a successful load mapped: every name in it now answers by name, so a
        # later load that reaches one need not walk it again (the answers are the same; 1,700 -> 200 lookups)
        self._walked: set[int] = set()
        # whether an LD_LIBRARY_PATH folder decided a search (a file found there, or one ld.so refuses there):
        # until one does, the same link map without LD_LIBRARY_PATH is this one (every search ends the same)
        self.ld_library_path_decided = False
        self.resolutions: list[Resolution] = []
        self.exe: Obj | None = None
        if search.executable:
            self.exe = self._new(search.executable, search.executable, None, set())
        # LD_PRELOAD objects come right after the program in the link map
        for entry in _split_preload(search.ld_preload):
            self.load(entry, None, how="LD_PRELOAD")
        # a running process (a notebook kernel): what is mapped already answers by SONAME and by file
        known = {o.real for o in self.objects}
        for path in mapped:
            if realpath(path) not in known:
                known.add(self._new(path, path, None, set(), mapped=True).real)

    # -- public ---------------------------------------------------------------------------------------------
    def load(self, name: str, caller: Obj | None, how: str = "dlopen", when: str = "import") -> Obj | None:
        """dlopen(name) from ``caller`` (None: the program itself): the object and its DT_NEEDED closure.

        A dependency that is not found fails the whole call and unmaps what it mapped, as dlopen does;
        then None is returned and only the failure is kept in ``resolutions``."""
        n_obj, n_res = len(self.objects), len(self.resolutions)
        obj = self._map(name, caller, how)
        walked = self._deps(obj) if obj is not None else set()
        failed = next((r for r in self.resolutions[n_res:] if r.path is None), None)
        if failed is None:
            self._walked |= walked
        else:
            for gone in self.objects[n_obj:]:
                for n in gone.names:
                    if self._by_name.get(n) is gone:
                        del self._by_name[n]
            for gone in self.objects[n_obj:]:
                if gone.ident is not None and self._by_ident.get(gone.ident) is gone:
                    del self._by_ident[gone.ident]
            del self.objects[n_obj:]
            del self.resolutions[n_res:]
            self.resolutions.append(failed)
            obj = None
        for r in self.resolutions[n_res:]:
            r.when = when
        return obj

    def load_first(self, names: Sequence[str], caller: Obj | None, soname: str, how: str = "dlopen",
                   when: str = "first use") -> Obj | None:
        """dlopen of each name in turn until one loads, as cuDNN's shims do (``libcudnn_graph.so.9.19.0``, then
        ``.so.9.19``, ``.so.9``, ``.so``). The kept resolution answers for ``soname``; when none loads, the
        last failure is kept."""
        failure = None
        for name in names:
            n_res = len(self.resolutions)
            obj = self.load(name, caller, how=how, when=when)
            if obj is not None:
                self.resolutions[n_res].soname = soname
                return obj
            failure = self.resolutions.pop(n_res)
        if failure is not None:
            failure.soname = soname
            self.resolutions.append(failure)
        return None

    def environment_took_part(self) -> bool:
        """Whether LD_PRELOAD or LD_LIBRARY_PATH took part in this link map: an object preloaded, or a search an
        LD_LIBRARY_PATH folder decided. Otherwise the link map of the same loads without them is this one (every
        search ends where it ended): LD_LIBRARY_PATH set by a container (/usr/local/nvidia/lib64) and holding
        none of a framework's libraries changes nothing it maps."""
        return bool(_split_preload(self.search.ld_preload)) or self.ld_library_path_decided

    def search_folders(self, obj: Obj) -> list[str]:
        """The folders of ``obj``'s own DT_RUNPATH, else DT_RPATH, expanded ($ORIGIN ...)."""
        value = obj.dyn.runpath if obj.dyn is not None and obj.dyn.runpath is not None else \
            (obj.dyn.rpath if obj.dyn is not None else None)
        return self._expand(value, obj) if value else []

    def find(self, real: str) -> Obj | None:
        return next((o for o in self.objects if o.real == real), None)

    # -- internals --------------------------------------------------------------------------------------------
    def _new(self, path: str, found_as: str, loader: Obj | None, names: set[str], mapped: bool = False,
             real: str | None = None, ident: tuple[int, int] | None = None) -> Obj:
        """A new object; ``real`` and ``ident``, when the caller has them already, spare a realpath and a stat."""
        if real is None:
            real = realpath(path)
            ident = _ident(real)
        dyn = _elf.try_read(real)
        obj = Obj(path=found_as, real=real, dyn=dyn, loader=loader, names=set(names) | {found_as}, ident=ident)
        if dyn is not None and dyn.soname:
            obj.names.add(dyn.soname)
        if mapped:
            obj.how = "mapped"
        self.objects.append(obj)
        if ident is not None and (self.exe is not None or not self.search.executable):  # not the program itself
            self._by_ident.setdefault(ident, obj)
        if self.exe is not None or not self.search.executable:  # the program answers to no name here
            for n in obj.names:
                self._by_name.setdefault(n, obj)
        return obj

    def _deps(self, first: Obj) -> set[int]:
        """Map ``first``'s DT_NEEDED closure; the objects walked."""
        queue = [first]
        done: set[int] = set()
        while queue:  # breadth-first, as _dl_map_object_deps does
            obj = queue.pop(0)
            if id(obj) in done or obj.dyn is None:
                continue
            done.add(id(obj))
            if id(obj) in self._walked:
                continue  # its closure is mapped and answers by name (see __init__)
            for needed in obj.dyn.needed:
                dep = self._map(needed, obj, "DT_NEEDED")
                if dep is not None:
                    queue.append(dep)
        return done

    def _map(self, name: str, caller: Obj | None, how: str) -> Obj | None:
        requester = caller.real if caller else None
        if "/" not in name:
            obj = self._by_name.get(name)
            if obj is not None:
                rule = "already loaded (" + _ALREADY.get(obj.how, "loaded earlier") + ")"
                self.resolutions.append(Resolution(name, obj.real, rule, requester, how, found_as=obj.path))
                return obj
            path, rule, error = self._search(name, caller)
        else:
            path = name if os.path.isabs(name) else os.path.join(self.search.cwd, name)
            rule, error = "path", None
            if not os.path.exists(path):
                path, error = None, "no such file"
            elif not self._fits(path):
                path, error = None, "not an ELF object of this machine"
        if path is None:
            self.resolutions.append(Resolution(name, None, "not found", requester, how, error or "not found"))
            return None
        real = realpath(path)
        ident = _ident(real)
        same = self._by_ident.get(ident) if ident is not None else None
        if same is not None:  # the same file under another name: reused, and it answers to this name too
            same.names.add(name)
            self._by_name.setdefault(name, same)
            self.resolutions.append(Resolution(name, same.real, rule, requester, how, found_as=path))
            return same
        obj = self._new(path, path, caller, {name}, real=real, ident=ident)
        obj.how = how
        self.resolutions.append(Resolution(name, obj.real, rule, requester, how, found_as=path))
        return obj

    def _search(self, name: str, caller: Obj | None) -> tuple[str | None, str, str | None]:
        """The file ld.so maps for the SONAME ``name`` that ``caller`` requests, and the rule that found it:
        (path, rule, None), or (None, "not found", None)."""
        rpath_first = caller is None or caller.dyn is None or caller.dyn.runpath is None
        try:
            found = (rpath_first and self._search_rpath(name, caller)) or self._search_ld_library_path(name) \
                or self._search_runpath(name, caller) or self._search_system(name, caller)
        except _Refused as refused:
            return None, "not found", f"{refused.args[0]}: no ELF object (ld.so fails the load there)"
        if found:
            return found[0], found[1], None
        return None, "not found", None

    def _search_rpath(self, name: str, caller: Obj | None) -> tuple[str, str] | None:
        """(path, rule) found in DT_RPATH of the requesting object and of the objects that loaded it, up the
        chain, then in the program's when the chain did not reach it; None when none holds ``name``."""
        chain, seen_exe = caller, False
        while chain is not None:
            rpath = chain.dyn.effective_rpath if chain.dyn else None
            if rpath:
                hit = self._in_dirs(name, self._expand(rpath, chain))
                if hit:
                    return hit, f"DT_RPATH of {os.path.basename(chain.real)}"
            seen_exe = seen_exe or chain is self.exe
            chain = chain.loader
        if not seen_exe and self.exe is not None and self.exe.dyn and self.exe.dyn.effective_rpath:
            hit = self._in_dirs(name, self._expand(self.exe.dyn.effective_rpath, self.exe))
            if hit:
                return hit, f"DT_RPATH of {os.path.basename(self.exe.real)} (the program)"
        return None

    def _search_ld_library_path(self, name: str) -> tuple[str, str] | None:
        """(path, rule) found in LD_LIBRARY_PATH (an empty entry is the current folder; set but empty counts as
        unset, glibc _dl_init_paths); None when it does not hold ``name``."""
        s = self.search
        if s.ld_library_path:
            dirs = [d if d else "." for d in _re.split(r"[:;]", s.ld_library_path)]
            try:
                hit = self._in_dirs(name, [os.path.join(s.cwd, d) for d in dirs])
            except _Refused:
                self.ld_library_path_decided = True
                raise
            if hit:
                self.ld_library_path_decided = True
                return hit, "LD_LIBRARY_PATH"
        return None

    def _search_runpath(self, name: str, caller: Obj | None) -> tuple[str, str] | None:
        """(path, rule) found in the requesting object's own DT_RUNPATH; None when it has none or it does not
        hold ``name``."""
        if caller is not None and caller.dyn is not None and caller.dyn.runpath:
            hit = self._in_dirs(name, self._expand(caller.dyn.runpath, caller))
            if hit:
                return hit, f"DT_RUNPATH of {os.path.basename(caller.real)}"
        return None

    def _search_system(self, name: str, caller: Obj | None) -> tuple[str, str] | None:
        """(path, rule) found in the ld.so cache, then the default folders, both skipped when the requesting
        object has DF_1_NODEFLIB; None when neither holds ``name``."""
        nodeflib = caller is not None and caller.dyn is not None and caller.dyn.nodeflib
        if not nodeflib:
            cached = self.search.cache.get(name)
            if cached and self._fits(cached):
                return cached, "ld.so cache"
            if cached and _no_elf_object(cached):
                raise _Refused(cached)
            hit = self._in_dirs(name, self.search.default_dirs)
            if hit:
                return hit, "default folder"
        return None

    def _expand(self, value: str, obj: Obj) -> list[str]:
        """Split a DT_RPATH/DT_RUNPATH value and expand $ORIGIN, $LIB, $PLATFORM (braced or not); once per object
        and value (an opener searches its path for every name it tries)."""
        key = (id(obj), value)
        hit = self._expanded.get(key)
        if hit is None:
            hit = self._expanded[key] = self._expand_now(value, obj)
        return hit

    def _expand_now(self, value: str, obj: Obj) -> list[str]:
        if obj is self.exe:
            origin = os.path.dirname(obj.real)  # the program's origin comes from /proc/self/exe (resolved)
        else:  # a relative path is the current folder's; os.path.join keeps an absolute path as it is
            origin = os.path.dirname(os.path.join(self.search.cwd, obj.path))
        out = []
        for part in value.split(":"):
            if "$" in part:
                for token, text in (("ORIGIN", origin), ("LIB", self.search.lib_token),
                                    ("PLATFORM", self.search.platform)):
                    part = part.replace("${" + token + "}", text).replace("$" + token, text)
            out.append(os.path.join(self.search.cwd, part or "."))
        return out

    def _in_dirs(self, name: str, dirs: list[str]) -> str | None:
        """The first ``d/name`` that is an ELF object of this machine; one of another class or machine is passed
        over. Raises :class:`_Refused` at a file there that is no ELF object at all (see there)."""
        for d in dirs:
            names = self._names(d)
            if names is not None and name not in names:
                continue  # not in the folder: neither a fit nor a refusal, and no stat asked (most names miss)
            path = os.path.join(d, name)
            if self._fits(path):
                return path
            if _no_elf_object(path):
                raise _Refused(path)
        return None

    def _names(self, folder: str) -> frozenset[str] | None:
        """The names in ``folder``, read once: empty when it does not exist or is no folder; None when it cannot
        be listed (search permission without read permission still lets ld.so open a file there by name, so
        each candidate is then checked by its path)."""
        if folder in self._listings:
            return self._listings[folder]
        try:
            names: frozenset[str] | None = frozenset(os.listdir(folder))
        except (FileNotFoundError, NotADirectoryError):
            names = frozenset()
        except (OSError, ValueError):  # ValueError: a NUL in the folder's name (from LD_LIBRARY_PATH, say)
            names = None
        self._listings[folder] = names
        return names

    def _fits(self, path: str) -> bool:
        """An existing regular file that is an ELF object of this machine (ld.so skips others)."""
        hit = self._fits_cache.get(path)
        if hit is None:
            hit = self._fits_cache[path] = self._check(path)
        return hit

    def _check(self, path: str) -> bool:
        try:
            if not _stat.S_ISREG(os.stat(path).st_mode):
                return False
        except OSError:
            return False
        dyn = _elf.try_read(path)
        return dyn is not None and (not self.search.machine or dyn.machine == self.search.machine)


_ALREADY = {"mapped": "mapped in this process", "LD_PRELOAD": "LD_PRELOAD", "preload": "the framework's preload by path",
            "dlopen": "opened earlier", "DT_NEEDED": "a dependency loaded earlier"}


def _ident(real: str) -> tuple[int, int] | None:
    """(st_dev, st_ino) of a file, None when it cannot be stat'ed."""
    try:
        st = os.stat(real)
    except OSError:
        return None
    return st.st_dev, st.st_ino


class _Refused(Exception):
    """A candidate ld.so opens and refuses as no ELF object: the whole load fails there, wherever the search found
    it (glibc elf/dl-load.c: open_verify signals the error; only a missing or denied file, or an object of another
    class or machine, lets the search go on). ``args[0]``: its path."""


def _no_elf_object(path: str) -> bool:
    """A folder, or a regular file with no ELF header (under the 64 bytes of an ELF64 header, or no ELF magic):
    what ld.so opens and refuses. A device or a pipe is not opened here (reading one could block)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    if _stat.S_ISDIR(mode):
        return True
    if not _stat.S_ISREG(mode):
        return False
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
    except OSError:
        return False
    return len(head) < 64 or not head.startswith(b"\x7fELF")


def _split_preload(value: str | None) -> list[str]:
    """LD_PRELOAD: names separated by spaces or colons (ld.so(8); glibc rtld.c splits on " :" only, so a tab or a
    newline is part of a name)."""
    return [p for p in _re.split(r"[: ]+", value or "") if p]
