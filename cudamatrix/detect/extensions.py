"""The installed distributions built against a framework or CUDA (torch extensions such as xformers, flash-attn,
torchvision or the PyG wheels; CUDA extensions such as onnxruntime-gpu or cupy): what they declare, the torch their
build records name, what their shared objects link, and the torch symbols they need that the installed torch does
not define. Read from files (METADATA, RECORD, ELF): nothing is imported or loaded.

A shared object whose DT_NEEDED names ``libc10.so`` or a ``libtorch*.so`` is a torch extension, whatever its
package. Its global undefined dynamic symbols of torch's namespaces (mangled ``c10::``, ``at::``, ``torch::``;
torch's stable C interface ``aoti_torch_*``) are looked up in the installed torch's own libraries
(``torch/lib``) through their GNU hash tables (:mod:`cudamatrix.detect.elfsyms`): one that none defines is the
``undefined symbol`` the import would fail with (Python opens extensions with RTLD_NOW). The answer is kept across
runs in the user cache under the object's stat stamp and those of the libraries it was checked against.
"""
from __future__ import annotations

import json
import os
import re

from cudamatrix import proc
from cudamatrix.detect import elf, elfcache, elfsyms
from cudamatrix.detect.python_env import Candidate
from cudamatrix.models import Extension, ExtensionObject

TORCH_LIB = re.compile(r"^lib(?:c10|torch)(?:_[a-z0-9_]+)?\.so$")  # libc10.so, libtorch_cpu.so, libc10_cuda.so
# a CUDA library the loader looks up by name (a copy a wheel bundles under a hashed name is its own: not these)
CUDA_LIB = re.compile(r"^lib(?:cudart|cublasLt|cublas|cufft|curand|cusparse|cusolver|cudnn|nvrtc|nvJitLink|nccl|cupti"
                      r"|cufile|nvjpeg)\.so\.\d+(?:\.\d+)*$")
TORCH_SYMBOL = re.compile(r"_Z(?:T[VIS])?N[rVKRO]*(?:3c10|2at|5torch)\d|aoti_torch_")
MAX_MISSING = 20
_VERSION = re.compile(r"[0-9][0-9A-Za-z.+!_-]{0,63}")  # a version as a build record writes it ("2.6.0+cu124")
_KEY = "resolved:"  # the user cache's key prefix for an object's answer
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
    """The Extension facts of ``candidates``: those that declare a framework, or whose shared objects link torch's
    or CUDA's libraries (others are left out)."""
    libs = torch_libraries(site_packages)
    stamps = [_stamp(lib) for lib in libs]
    against = [[lib, *st] for lib, st in zip(libs, stamps, strict=True) if st is not None]
    out = []
    fresh: list[tuple[ExtensionObject, os.stat_result]] = []  # answers made now: kept once demangled
    for cand in candidates:
        objects = [o for o in (_object(path, libs, against, fresh) for path in cand.objects) if o is not None]
        if not objects and not cand.declares:
            continue
        built_for, source = _built_for(cand, objects)
        out.append(Extension(name=cand.name, version=cand.version, declares=list(cand.declares),
                             built_for=built_for, built_for_source=source, objects=objects))
    _demangle([o for o, _st in fresh if o.missing], timeout)
    for o, st in fresh:
        elfcache.remember(_KEY + o.path, st, {"against": against, "symbols": o.torch_symbols, "missing": o.missing,
                                              "count": o.missing_count, "demangled": o.demangled})
    return out


def _stamp(path: str) -> list[int] | None:
    try:
        return elfcache.stamp(os.stat(path))
    except OSError:
        return None


def _object(path: str, libs: list[str], against: list[list], fresh: list) -> ExtensionObject | None:
    """The facts of one shared object; None when it links neither torch nor CUDA (or is no readable ELF). An
    object whose symbols were resolved now (not recalled) is added to ``fresh`` with its stat."""
    dyn = elf.try_read(path)
    if dyn is None:
        return None
    torch_needed = [n for n in dyn.needed if TORCH_LIB.match(n)]
    needed = torch_needed + [n for n in dyn.needed if CUDA_LIB.match(n)]
    if not needed:
        return None
    obj = ExtensionObject(path=path, needed=needed)
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
    need = [n for n in elfsyms.undefined(path) if TORCH_SYMBOL.match(n)]
    found, unread = elfsyms.defined(libs, need)
    if unread:
        raise elf.ElfError("torch's libraries could not be read: " + "; ".join(unread[:2]))
    missing = [n for n in need if n not in found]
    return len(need), missing[:MAX_MISSING], len(missing)


def _built_for(cand: Candidate, objects: list[ExtensionObject]) -> tuple[str | None, str | None]:
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
    for text in cand.declares:
        m = re.match(r"^\s*torch\s*\(?\s*===?\s*([^\s;)]+)\s*\)?\s*(?:;|$)", text)
        if m and _VERSION.fullmatch(m.group(1)) and "extra" not in text.partition(";")[2]:
            return m.group(1), "Requires-Dist"
    return None, None


def _demangle(objects: list[ExtensionObject], timeout: float) -> None:
    """Fill each object's ``demangled`` with c++filt's reading of its missing symbols (left empty without it)."""
    names = [n for o in objects for n in o.missing]
    tool = proc.which("c++filt") if names else None
    if tool is None:
        return
    result = proc.run([tool], input="\n".join(names) + "\n", timeout=timeout)
    lines = result.stdout.splitlines() if result.ok else []
    if len(lines) != len(names):
        return
    at = 0
    for o in objects:
        o.demangled = lines[at:at + len(o.missing)]
        at += len(o.missing)
