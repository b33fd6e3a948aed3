"""The installed distributions built against a framework or CUDA (torch extensions such as xformers, flash-attn,
torchvision or the PyG wheels; CUDA extensions such as onnxruntime-gpu or cupy): what they declare, the torch their
build records name, what their shared objects link, and the torch symbols they need that the installed torch does
not define. Read from files (METADATA, RECORD, ELF): nothing is imported or loaded.

A shared object whose DT_NEEDED names ``libc10.so`` or a ``libtorch*.so`` is a torch extension, whatever its
package. Its global undefined dynamic symbols of torch's namespaces (mangled ``c10::``, ``at::``, ``torch::``;
torch's stable C interface ``aoti_torch_*``) are looked up in the installed torch's own libraries
(``torch/lib``) through their GNU hash tables (:mod:`cudamatrix.ldso.elfsyms`): one that none defines is the
``undefined symbol`` the import would fail with (Python opens extensions with RTLD_NOW). The answer is kept across
runs in the user cache under the object's stat stamp and those of the libraries it was checked against. The GPU
architectures of each such object's kernels (SASS and PTX) are read from its fatbinary headers
(:mod:`cudamatrix.detect.fatbin`), kept the same way.
"""
from __future__ import annotations

import json
import os
import re
from functools import lru_cache

from cudamatrix.detect import _pyprobe, cxxfilt, fatbin
from cudamatrix.detect.python_env import Candidate
from cudamatrix.ldso import elf, elfcache, elfsyms
from cudamatrix.models import Extension, ExtensionObject
from cudamatrix.names import canonical
from cudamatrix.safe.text import lazy

TORCH_LIB = lazy(r"^lib(?:c10|torch)(?:_[a-z0-9_]+)?\.so$")  # libc10.so, libtorch_cpu.so, libc10_cuda.so
# a CUDA library the loader looks up by name (a copy a wheel bundles under a hashed name is its own: not these)
CUDA_LIB = lazy(r"^lib(?:cudart|cublasLt|cublas|cufft|curand|cusparse|cusolver|cudnn|nvrtc|nvJitLink|nccl|cupti"
                      r"|cufile|nvjpeg)\.so\.\d+(?:\.\d+)*$")
TORCH_SYMBOL = lazy(r"_Z(?:T[VIS])?N[rVKRO]*(?:3c10|2at|5torch)\d|aoti_torch_")
MAX_MISSING = 20
_VERSION = lazy(r"[0-9][0-9A-Za-z.+!_-]{0,63}")  # a version as a build record writes it ("2.6.0+cu124")
_KEY = "resolved:"  # the user cache's key prefix for an object's answer
_DIST_KEY = "dist:"  # ... and for what a distribution declares and installed
DECLARED = {"torch", "jax", "jaxlib", "tensorflow"}  # a Requires-Dist naming one of these is kept
MAX_RECORD = 32 << 20  # torch's own RECORD is 1.5 MB
_FIRST_READ = 64 << 10
_OBJECT = lazy(r'[^,\n"]*\.so(?:\.\d+)*$')  # the path of a shared object: libX.so, libX.so.12.4.1
_NAME = lazy(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_FIRST = ("libtorch_cpu.so", "libc10.so", "libtorch_python.so", "libtorch_cuda.so", "libc10_cuda.so")


def torch_libraries(site_packages: list[str]) -> list[str]:
    """The shared objects of the first ``torch/lib`` folder of ``site_packages`` (the installed torch's own
    libraries), the big five first; [] when none has one."""
    for sp in site_packages:
        folder = os.path.join(sp, "torch", "lib")
        try:
            names = sorted(n for n in os.listdir(folder) if ".so" in n)
        except OSError:
            continue
        names.sort(key=lambda n: _FIRST.index(n) if n in _FIRST else len(_FIRST))
        return [os.path.join(folder, n) for n in names if os.path.isfile(os.path.join(folder, n))]
    return []


def scan(candidates: list[Candidate], site_packages: list[str], timeout: float = 5.0) -> list[Extension]:
    """The Extension facts of ``candidates``: those that declare a framework (not only behind an extra), or whose
    shared objects link torch's or CUDA's libraries (others are left out)."""
    libs = torch_libraries(site_packages)
    stamps = [_stamp(lib) for lib in libs]
    against = [[lib, *st] for lib, st in zip(libs, stamps, strict=True) if st is not None]
    out = []
    fresh: list[tuple[ExtensionObject, os.stat_result]] = []  # answers made now: kept once demangled
    for cand in candidates:
        declares, paths, known = read_distribution(cand.meta)
        objects = [o for o in (_object(path, libs, against, fresh, known) for path in paths) if o is not None]
        if not known:
            keep_distribution(cand.meta, declares, [o.path for o in objects])
        if not objects and all("extra" in d.partition(";")[2] for d in declares):
            continue  # no object links torch or CUDA, and torch only behind an extra (a test extra): no extension
        built_for, source = _built_for(declares, objects)
        out.append(Extension(name=cand.name, version=cand.version, declares=declares, built_for=built_for,
                             built_for_source=source, objects=objects))
    _demangle([o for o, _st in fresh if o.missing], timeout)
    for o, st in fresh:
        elfcache.remember(_KEY + o.path, st, {"against": against, "symbols": o.torch_symbols, "missing": o.missing,
                                              "count": o.missing_count, "demangled": o.demangled})
    return out


def read_distribution(meta: str) -> tuple[list[str], list[str], bool]:
    """(its Requires-Dist naming a framework, as written; the absolute paths of shared objects a platform wheel
    installed, from its RECORD; whether those are only the ones that link torch or CUDA, as a former run found) of
    the distribution whose metadata folder is ``meta``. What a run finds is kept in the user cache
    (:func:`keep_distribution`) while neither its RECORD nor its METADATA changes: pip rewrites RECORD with every
    file it installs, so a warm run reads no object of a distribution that links neither."""
    record, metadata = os.path.join(meta, "RECORD"), os.path.join(meta, "METADATA")
    try:
        st_record, st_meta = os.stat(record), os.stat(metadata)
    except OSError:
        return [], [], False
    location = os.path.dirname(meta)

    def decode(doc):
        if not (isinstance(doc, dict) and doc.get("metadata") == elfcache.stamp(st_meta)):
            return None
        lists = (doc.get("declares"), doc.get("linked"))
        if all(isinstance(x, list) and all(isinstance(s, str) for s in x) for x in lists):
            return lists
        return None

    hit = elfcache.recall(_DIST_KEY + meta, st_record, decode)
    if hit is not None:
        return list(hit[0]), [os.path.normpath(os.path.join(location, rel)) for rel in hit[1]], True
    return _declares(metadata), [os.path.normpath(os.path.join(location, rel)) for rel in _objects(meta)], False


def keep_distribution(meta: str, declares: list[str], linked: list[str]) -> None:
    """Keep what :func:`read_distribution` read and which of its objects link torch or CUDA (absolute paths)."""
    try:
        st_record, st_meta = os.stat(os.path.join(meta, "RECORD")), os.stat(os.path.join(meta, "METADATA"))
    except OSError:
        return
    location = os.path.dirname(meta)
    elfcache.remember(_DIST_KEY + meta, st_record, {"metadata": elfcache.stamp(st_meta), "declares": declares,
                                                   "linked": [os.path.relpath(p, location) for p in linked]})


def _declares(metadata: str) -> list[str]:
    """The METADATA's requirements naming a framework (:data:`DECLARED`), as written."""
    try:
        with open(metadata, encoding="utf-8", errors="replace") as fh:
            text = fh.read(16384)  # the headers: the README after them is not read
            if len(text) == 16384 and "\n\n" not in text:
                text += fh.read(262144 - 16384)
    except OSError:
        return []
    out = []
    for r in _pyprobe._headers(text)["Requires-Dist"]:
        if r.lstrip()[:3].lower() not in ("tor", "jax", "ten"):
            continue  # most requirements: no regular expression needed
        m = _NAME.match(r)
        if m and canonical(m.group(1)) in DECLARED:
            out.append(r)
    return out


def _objects(meta: str) -> list[str]:
    """The shared objects a platform wheel installed (its RECORD rows named .so / .so.N), relative to its
    site-packages; [] for a pure-Python wheel."""
    try:
        with open(os.path.join(meta, "WHEEL"), encoding="utf-8", errors="replace") as fh:
            wheel = fh.read(4096)
        if not re.search(r"^Root-Is-Purelib:\s*false", wheel, re.M | re.I):
            return []
        with open(os.path.join(meta, "RECORD"), "rb") as fh:
            # a small read first: most RECORDs are a few KB, and a read of MAX_RECORD bytes allocates (and gives
            # back) that much memory for each (35 us of the 130 this function took, issue #39)
            data = fh.read(_FIRST_READ)
            if len(data) == _FIRST_READ:
                data += fh.read(MAX_RECORD - _FIRST_READ)
            return shared_objects(data)
    except OSError:
        return []


def shared_objects(data: bytes) -> list[str]:
    """The paths of RECORD rows that name a shared object, found by their ".so" (a RECORD of 400 KB is searched
    in under a millisecond: a regular expression over every row took ten); none outside site-packages."""
    out = []
    at = data.find(b".so")
    while at >= 0:
        start, end = data.rfind(b"\n", 0, at) + 1, data.find(b",", at)
        if end < 0:
            break
        path = data[start:end].strip(b'"\r').decode("utf-8", "replace")
        if _OBJECT.match(path) and not path.startswith(("..", "/")) and "/../" not in path:
            out.append(path)
        line_end = data.find(b"\n", at)
        if line_end < 0:
            break
        at = data.find(b".so", line_end)
    return out


def _stamp(path: str) -> list[int] | None:
    try:
        return elfcache.stamp(os.stat(path))
    except OSError:
        return None


def _object(path: str, libs: list[str], against: list[list], fresh: list, linked: bool) -> ExtensionObject | None:
    """The facts of one shared object; None when it links neither torch nor CUDA (or is no readable ELF). An
    object whose symbols were resolved now (not recalled) is added to ``fresh`` with its stat."""
    # kept for the next run only when known to link torch or CUDA: a warm run reads no other (keep_distribution)
    dyn = elf.try_read(path, keep=linked)
    if dyn is None:
        return None
    torch_needed = [n for n in dyn.needed if TORCH_LIB.match(n)]
    needed = torch_needed + [n for n in dyn.needed if CUDA_LIB.match(n)]
    if not needed:
        return None
    obj = ExtensionObject(path=path, needed=needed)
    try:
        obj.sass, obj.ptx = fatbin.archs(path)
    except (OSError, elf.ElfError):
        pass  # no arch list: nothing is said of its kernels
    if not torch_needed:
        return obj
    if not libs:
        obj.unchecked = "no torch/lib folder in site-packages"
        return obj
    try:
        st = os.stat(path)
        hit = _recall(path, st, against)
        if hit is None:
            obj.torch_symbols, obj.missing, obj.missing_count = _resolve(path, libs)
            fresh.append((obj, st))
        else:
            obj.torch_symbols, obj.missing, obj.missing_count, obj.demangled = hit
    except (OSError, elf.ElfError) as exc:
        obj.unchecked = f"its symbols could not be read: {exc}"
    return obj


def _recall(path: str, st: os.stat_result, against: list[list]) -> tuple[int, list[str], int, list[str]] | None:
    """The answer kept in the user cache for ``path`` while neither it nor any of torch's libraries changed."""

    def decode(doc):
        if not (isinstance(doc, dict) and doc.get("against") == against):
            return None
        n, missing, count, demangled = doc.get("symbols"), doc.get("missing"), doc.get("count"), doc.get("demangled")
        lists = (missing, demangled)
        if type(n) is int and type(count) is int and all(
                isinstance(x, list) and all(isinstance(s, str) for s in x) for x in lists):
            return n, missing, count, demangled
        return None

    return elfcache.recall(_KEY + path, st, decode)


def _resolve(path: str, libs: list[str]) -> tuple[int, list[str], int]:
    """(the torch symbols ``path`` needs, the first :data:`MAX_MISSING` no library of ``libs`` defines, how many
    are missing)."""
    need = [n for n in elfsyms.undefined(path) if _is_torch_symbol(n)]
    found, unread = elfsyms.defined(libs, need)
    if unread:
        raise elf.ElfError("torch's libraries could not be read: " + "; ".join(unread[:2]))
    missing = [n for n in need if n not in found]
    return len(need), missing[:MAX_MISSING], len(missing)


@lru_cache(maxsize=65536)
def _is_torch_symbol(name: str) -> bool:
    """:data:`TORCH_SYMBOL`'s answer for a name, worked out once per process: extensions need mostly the same
    names (libc's, CUDA's, torch's), so 40 of them ask about 13,000 names and 600 distinct ones."""
    return TORCH_SYMBOL.match(name) is not None


def _built_for(declares: list[str], objects: list[ExtensionObject]) -> tuple[str | None, str | None]:
    """The torch the distribution was built for, as its files say: a ``cpp_lib.json`` beside one of its objects
    (xFormers' build record: ``version.torch``), else an exact ``torch==`` pin of its Requires-Dist (not one behind
    an extra); text that is no version is not taken."""
    for folder in dict.fromkeys(os.path.dirname(o.path) for o in objects):
        record_path = os.path.join(folder, "cpp_lib.json")
        try:
            with open(record_path, encoding="utf-8") as fh:
                doc = json.loads(fh.read(65536))
        except (OSError, ValueError, RecursionError):
            continue
        torch = doc.get("version", {}).get("torch") if isinstance(doc, dict) and isinstance(
            doc.get("version"), dict) else None
        if isinstance(torch, str) and _VERSION.fullmatch(torch):
            return torch, f"{os.path.basename(folder)}/cpp_lib.json"
    for text in declares:
        m = re.match(r"^\s*torch\s*\(?\s*===?\s*([^\s;)]+)\s*\)?\s*(?:;|$)", text)
        if m and _VERSION.fullmatch(m.group(1)) and "extra" not in text.partition(";")[2]:
            return m.group(1), "Requires-Dist"
    return None, None


def _demangle(objects: list[ExtensionObject], timeout: float) -> None:
    """Fill each object's ``demangled`` with c++filt's reading of its missing symbols (left empty without it)."""
    lines = cxxfilt.demangled([n for o in objects for n in o.missing], timeout)
    if lines is None:
        return
    at = 0
    for o in objects:
        o.demangled = lines[at:at + len(o.missing)]
        at += len(o.missing)
