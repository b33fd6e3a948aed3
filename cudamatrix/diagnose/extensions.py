"""Findings about the stack on top of the frameworks: installed extensions (xFormers, flash-attn, vLLM, the PyG
wheels, onnxruntime-gpu, CuPy ...) against the installed framework, from what detect read of their files
(:class:`~cudamatrix.models.Extension`: Requires-Dist, build records, DT_NEEDED, the torch symbols no torch library
defines) and the installed distributions. No I/O.
"""
from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from cudamatrix.diagnose.context import Diagnosis, base_version
from cudamatrix.diagnose.declared import applicable_requirements
from cudamatrix.diagnose.libchoice import admits, nearest, release_carrying
from cudamatrix.matrix.data import ExtensionGpuFloor
from cudamatrix.matrix.sources import records_of
from cudamatrix.models import Extension, Finding
from cudamatrix.names import FAMILIES, canonical
from cudamatrix.safe.text import lazy
from cudamatrix.schema.values import cc_key
from cudamatrix.solve.rules import ptx_covers, sass_covers

if TYPE_CHECKING:
    from packaging.requirements import Requirement

FRAMEWORK_NAMES = ("torch", "jax", "jaxlib", "tensorflow")
SHOWN_SYMBOLS = 3
# CUDA libraries whose soname's major is the CUDA major (libcudart.so.12 in every CUDA 12.x; libnvrtc.so.11.2 in 11.x)
_CUDA_NAMED = lazy(r"^lib(?:cudart|cublasLt|cublas|nvrtc)\.so\.(\d+)")
_SONAME = lazy(r"^lib(?P<base>[A-Za-z_]+)\.so\.(?P<major>\d+)")
_VARIANT = re.compile(r"^(?P<head>.*?)-?cuda(?P<major>\d+)x?(?P<tail>-.*)?$")
_JAX_PLUGIN = lazy(r"^jax-cuda\d+-(?:plugin|pjrt)$")
_CC = lazy(r"^\d{1,2}\.\d$")  # a compute capability as detect.fatbin writes it ("8.0", "12.0")


def _framework(d: Diagnosis, name: str) -> tuple[str, str | None] | None:
    """(installed version, CUDA major of its build or None) of framework ``name``; None when not installed."""
    fw = next((f for f in d.env.frameworks if f.name == name), None)
    if fw is None:
        return None
    return fw.version, fw.cuda.split(".")[0] if fw.cuda else None


def _matching_release(d: Diagnosis, name: str, torch: str) -> str | None:
    """The newest release of ``name`` the matrix holds (data/extensions.json) whose torch requirement the installed
    torch meets, with that requirement ("xformers 0.0.35 declares torch>=2.10"); None when it holds none."""
    have = base_version(torch)
    best = None
    for rel in d.extension_releases(name):
        spec = rel.requires.get("torch")
        if not spec or (best is not None and rel.version <= best.version):
            continue
        if admits(spec, have):
            best = rel
    return f"{best.name} {best.version} declares torch{best.requires['torch']}" if best is not None else None


def _ways_out(d: Diagnosis, ext: Extension, torch: str, want: str | None) -> str:
    """The fix of an extension at odds with the installed torch: the extension's build for this torch (one
    package changes; the matrix's release where it holds one), else torch moved to what the extension needs
    (torch, its nvidia-* wheels and companions)."""
    release = _matching_release(d, ext.name, torch)
    fix = f"cudamatrix solve torch=={base_version(torch)} {ext.name} (the {ext.name} built for the installed torch" + \
        (f": {release})" if release else ")")
    if want:
        fix += f"; or keep {ext.name} {ext.version} and move torch: cudamatrix solve 'torch{want}' {ext.name}=={ext.version}"
    return fix


def _wanted_torch(ext: Extension) -> str | None:
    """The torch the extension asks for, as a specifier: its build record's torch, else its Requires-Dist."""
    if ext.built_for:
        return "==" + base_version(ext.built_for)
    for text in ext.declares:
        m = re.match(r"^\s*torch\s*\(?\s*([<>=!~][^;)]{0,64})\s*\)?\s*(?:;|$)", text)
        if m and "extra" not in text.partition(";")[2]:
            return m.group(1).replace(" ", "")
    return None


def extension_abi_mismatch(d: Diagnosis) -> list[Finding]:
    """EXTENSION_ABI_MISMATCH: an installed torch extension (a shared object whose DT_NEEDED names libc10 or a
    libtorch) needs torch symbols that no library of the installed torch defines (its ``.dynsym`` against their
    GNU hash tables): importing it fails with ``undefined symbol``. The evidence names the torch its files say it
    was built for and the first missing symbols."""
    torch = _framework(d, "torch")
    if torch is None:
        return []
    out = []
    for ext in d.env.extensions:
        broken = [o for o in d.judged_objects(ext) if o.missing_count]
        if not broken:
            continue
        total = sum(o.missing_count for o in broken)
        evidence = [f"built for torch {ext.built_for} ({ext.built_for_source})"] if ext.built_for else []
        for o in broken:
            shown = (o.demangled or o.missing)[:SHOWN_SYMBOLS]
            raw = o.missing[:SHOWN_SYMBOLS]
            names = [s if s == r else f"{s} [{r}]" for s, r in zip(shown, raw, strict=True)]
            evidence.append(f"{os.path.basename(o.path)}: {o.missing_count} of its {o.torch_symbols} torch symbols "
                            f"are undefined in torch {torch[0]}: " + "; ".join(names))
        out.append(Finding(code="EXTENSION_ABI_MISMATCH", severity="error",
                           title=f"{ext.name} {ext.version} was not built for torch {torch[0]}: " +
                                 (f"{total} torch symbols it needs are" if total != 1 else
                                  "a torch symbol it needs is") + " undefined (import fails with \"undefined symbol\")",
                           evidence=evidence, fix=_ways_out(d, ext, torch[0], _wanted_torch(ext))))
    return out


def _declared_frameworks(d: Diagnosis, ext: Extension) -> list[Requirement]:
    """The extension's requirements naming a framework that apply here; one behind an extra is left out."""
    texts = [t for t in ext.declares if "extra" not in t.partition(";")[2]]
    return [r for r in applicable_requirements(d.env, texts) if canonical(r.name) in FRAMEWORK_NAMES]


def _meets(r: Requirement, have: str) -> bool:
    """Whether ``have`` meets the requirement; a version no one can compare (a 5,000-digit number an installed
    METADATA wrote) is taken as met: nothing is said of it."""
    try:
        return bool(r.specifier.contains(have, prereleases=True))
    except ValueError:
        return True


def extension_pin_mismatch(d: Diagnosis) -> list[Finding]:
    """EXTENSION_PIN_MISMATCH: an installed distribution's Requires-Dist names torch, jax, jaxlib or tensorflow
    with a specifier the installed version does not meet (markers evaluated for this interpreter; requirements
    behind an extra ignored). torch's companions are left to TORCHVISION_MISMATCH when the matrix holds the
    installed torch's row."""
    torch = next((i for i in d.installed if i.name == "torch"), None)
    judged = set(FAMILIES["torch"].companions) if torch is not None and torch.release is not None else set()
    out = []
    for ext in d.env.extensions:
        if ext.name in judged:
            continue
        for r in _declared_frameworks(d, ext):
            name = canonical(r.name)
            have = d.env.packages.get(name)
            if not have or not r.specifier or _meets(r, have):
                continue
            fix = (_ways_out(d, ext, have, str(r.specifier)) if name == "torch" else
                   f"cudamatrix solve {name}=={base_version(have)} {ext.name} (the {ext.name} release for the "
                   f"installed {name}); or pip install '{name}{r.specifier}'")
            out.append(Finding(code="EXTENSION_PIN_MISMATCH", severity="error",
                               title=f"{ext.name} {ext.version} requires {name}{r.specifier}; {name} {have} is "
                                     "installed",
                               evidence=[f"{ext.name} {ext.version} declares {r} (its METADATA Requires-Dist)"],
                               fix=fix))
    return out


def _other_cuda(needed: list[str], major: str, framework: str, loads: dict[str, str]) -> list[str]:
    """What an object's CUDA libraries show of another CUDA: a library named by CUDA's major (libcudart.so.12)
    of another major, or a library whose soname differs from the framework's own copy (the loader model's)."""
    out = []
    for soname in needed:
        m = _CUDA_NAMED.match(soname)
        if m:
            if m.group(1) != major:
                out.append(f"needs {soname} (CUDA {m.group(1)})")
            continue
        s = _SONAME.match(soname)
        own = loads.get(s.group("base")) if s else None
        if own and own != soname:
            out.append(f"needs {soname} where {framework} maps {own}")
    return out


def extension_cuda_mismatch(d: Diagnosis) -> list[Finding]:
    """EXTENSION_CUDA_MISMATCH: an extension's shared object links CUDA libraries of another major than the
    framework's build (torch for a torch extension and whenever torch is a CUDA build; else jaxlib or
    tensorflow): ``libcublasLt.so.13: cannot open shared object file`` beside a CUDA 12 torch, or two CUDA
    runtimes in one process. The framework's own copies are those the loader model predicts it maps. Of a package
    with one library per CUDA release (bitsandbytes) only the file it opens is judged, and none to open is this
    finding too (data/extensions.json ``library_choices``, :mod:`cudamatrix.diagnose.libchoice`)."""
    frameworks = [(n, f) for n in ("torch", "jaxlib", "tensorflow") if (f := _framework(d, n)) and f[1]]
    if not frameworks:
        return []
    name, (version, major) = frameworks[0]
    assert major is not None  # frameworks lists CUDA builds only
    loads = {s.group("base"): ld.soname for ld in d.env.library_loads if ld.framework in (name, "jax")
             and (s := _SONAME.match(ld.soname))}
    out = _no_library(d)
    for ext in d.env.extensions:
        evidence = [f"{os.path.basename(o.path)} {words}" for o in d.judged_objects(ext)
                    for words in _other_cuda(o.needed, major, name, loads)]
        if evidence:
            out.append(Finding(code="EXTENSION_CUDA_MISMATCH", severity="error",
                               title=f"{ext.name} {ext.version} links CUDA libraries of another major than "
                                     f"{name} {version} (CUDA {major})",
                               evidence=evidence[:6],
                               fix=f"cudamatrix solve {name}=={base_version(version)} {ext.name} (the {ext.name} "
                                   f"build for CUDA {major})"))
    return out


def _no_library(d: Diagnosis) -> list[Finding]:
    """EXTENSION_CUDA_MISMATCH too: a package with one library per CUDA release (bitsandbytes) has none that its
    own rule loads for torch's CUDA (data/extensions.json ``library_choices``)."""
    out = []
    for ext in d.env.extensions:
        c = d.library_choice(ext)
        if c is None or c.asked is None or c.loaded is not None:
            continue
        carried = sorted(c.carried)
        near = nearest(set(carried), c.asked)
        rule, alone = c.rule, c.overridden or c.rule.choose == "exact"
        evidence = [f"it carries {', '.join(c.file_name(r) for r in carried)}",
                    f"{ext.name} {rule.versions} loads {c.file_name(c.asked)} for {c.asked_by}"
                    + (" and no other file" if alone else ", else the nearest file of the same CUDA major"),
                    f"when that file is missing, {rule.missing} ({records_of(rule.source)[0].url})"]
        ways = ([f"set {rule.override}={near[0]}{near[1]} (it then loads {c.file_name(near)}, which it carries)"]
                if near and rule.override and not c.overridden else [])
        other = release_carrying(d.matrix, ext.name, c.asked)
        ways.append(f"pip install '{ext.name}=={other[0]}' (its wheel carries {c.file_name(other[1])})" if other
                    else f"a {ext.name} release that carries a CUDA {c.asked[0]} library")
        ways.append(f"a torch build of a CUDA release it carries ({', '.join(f'{r[0]}.{r[1]}' for r in carried)})")
        out.append(Finding(code="EXTENSION_CUDA_MISMATCH", severity="error",
                           title=f"{ext.name} {ext.version} has no library for {c.asked_by}: it looks for "
                                 f"{c.file_name(c.asked)}, which is not among its files",
                           evidence=evidence, fix="; or ".join(ways)))
    return out


def _archs(values: list[str]) -> list[str]:
    """The compute capabilities of a list an object states, lowest first; anything else (a saved environment
    file's text) is left out."""
    return sorted((v for v in values if isinstance(v, str) and _CC.match(v)), key=cc_key)


def _kernels(d: Diagnosis, ext: Extension) -> list[tuple[str, list[str], list[str], bool]]:
    """(file name, SASS, PTX, whether it links torch) of each object of ``ext`` that carries device code and can be
    opened here (of per-CUDA libraries, the one it loads)."""
    out = []
    for o in d.judged_objects(ext):
        sass, ptx = _archs(o.sass), _archs(o.ptx)
        if sass or ptx:
            out.append((os.path.basename(o.path), sass, ptx, any(n.startswith(("libc10", "libtorch")) for n in o.needed)))
    return out


def extension_arch_unsupported(d: Diagnosis) -> list[Finding]:
    """EXTENSION_ARCH_UNSUPPORTED: a GPU present (or stated by the target) for which no shared object of an
    installed extension carries a kernel image: SASS of the same major and an equal or lower minor, or PTX of
    an equal or lower architecture for the driver to JIT-compile (the rule ``arch`` of the frameworks' builds,
    :func:`cudamatrix.solve.rules.sass_covers`), read from the fatbinaries of its objects; its CUDA kernels
    fail with "no kernel image is available for execution on the device". An extension whose objects carry
    no device code is not judged; of per-CUDA libraries, only the one the package opens counts. Or a GPU below
    the floor the installed package's own README or documentation states for its release (data/extensions.json ``gpu_floors``: flash-attn 2 needs Ampere, vLLM 7.0), whether
    or not its kernels were read."""
    if not d.target.gpus:
        return []
    out: list[Finding] = []
    judged: set[tuple[str, str]] = set()  # (extension, compute capability) named here: the floor adds nothing
    for ext in d.env.extensions:
        kernels = _kernels(d, ext)
        if not kernels:
            continue
        for gpu in d.target.gpus:
            cc = gpu.compute_capability
            if not _CC.match(cc.rstrip("af")) or any(sass_covers(s, cc) or ptx_covers(p, cc) for _n, s, p, _t in kernels):
                continue
            sm = "sm_" + cc.rstrip("af").replace(".", "")
            judged.add((canonical(ext.name), cc.rstrip("af")))
            evidence = [f"{name}: SASS {' '.join('sm_' + a.replace('.', '') for a in sass) or 'none'}, PTX "
                        f"{' '.join('compute_' + a.replace('.', '') for a in ptx) or 'none'}"
                        for name, sass, ptx, _t in kernels[:6]]
            torch_ext = any(t for *_rest, t in kernels)
            fix = (f"{ext.name} built for {sm}: from source, TORCH_CUDA_ARCH_LIST=\"{cc.rstrip('af')}\" "
                   f"pip install --no-build-isolation --no-binary {ext.name} '{ext.name}=={ext.version}'"
                   if torch_ext else f"{ext.name} built for {sm} (a source build for this GPU)")
            out.append(Finding(code="EXTENSION_ARCH_UNSUPPORTED", severity="error",
                               title=f"{ext.name} {ext.version} has no kernel image for {gpu.name or 'the GPU'} "
                                     f"(compute capability {cc}): \"no kernel image is available\"",
                               evidence=evidence, fix=fix + "; or run it on a GPU whose architecture it carries"))
    return out + _below_floor(d, judged)


def _floor_of(d: Diagnosis, name: str, version: str) -> ExtensionGpuFloor | None:
    """The GPU floor the package's own words state for this release (the highest where rows overlap)."""
    rows = [f for f in d.matrix.extensions.gpu_floors
            if name in (canonical(n) for n in f.names) and admits(f.versions, base_version(version))]
    return max(rows, key=lambda f: cc_key(f.min_compute_capability), default=None)


def _lower_floors(d: Diagnosis, name: str, cc: str) -> list[str]:
    """The releases of ``name`` whose own words admit compute capability ``cc`` ("bitsandbytes>=0.45.0,<0.48.0")."""
    return [f"{name}{f.versions}" for f in d.matrix.extensions.gpu_floors
            if name in (canonical(n) for n in f.names) and cc_key(f.min_compute_capability) <= cc_key(cc)]


def _below_floor(d: Diagnosis, judged: set[tuple[str, str]]) -> list[Finding]:
    """EXTENSION_ARCH_UNSUPPORTED from the floors: each installed distribution with a floor for its release, each
    GPU below it (one the kernel check already named is left to that finding)."""
    installed = {canonical(n): v for n, v in d.env.packages.items()}  # detect's list of the distributions it reads
    for ext in d.env.extensions:  # ... and the others it read as extensions (vllm, bitsandbytes: they declare torch)
        installed.setdefault(canonical(ext.name), ext.version)
    out = []
    for dist, version in sorted(installed.items()):
        floor = _floor_of(d, dist, version) if isinstance(version, str) else None
        if floor is None:
            continue
        for gpu in d.target.gpus:
            cc = (gpu.compute_capability or "").rstrip("af")
            if not _CC.match(cc) or cc_key(cc) >= cc_key(floor.min_compute_capability) or (dist, cc) in judged:
                continue
            states = [f"{r.states} ({r.url})" if r.url else r.states for r in records_of(floor.source)
                      if r.kind == "first_party"]
            older = _lower_floors(d, dist, cc)
            out.append(Finding(code="EXTENSION_ARCH_UNSUPPORTED", severity="error",
                               title=f"{dist} {version} needs a GPU of compute capability "
                                     f"{floor.min_compute_capability} or higher; {gpu.name or 'the GPU'} is {cc}",
                               evidence=[f"{dist} {floor.versions}: its own words: {s}" for s in states[:3]],
                               fix=(f"pip install '{older[-1]}' (a release whose own words admit compute capability "
                                    f"{cc}); or " if older else "") +
                                   f"run {dist} on a GPU of compute capability {floor.min_compute_capability} or "
                                   "higher"))
    return out


def extension_variant_clash(d: Diagnosis) -> list[Finding]:
    """EXTENSION_VARIANT_CLASH: two CUDA-major variants of one package are installed together (cupy-cuda12x and
    cupy-cuda13x; jax-cuda12-plugin and jax-cuda13-plugin): they install the same modules, and the one imported
    is whichever was written last."""
    groups: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for dist in d.env.packages:
        m = _VARIANT.match(dist)
        if m and not dist.startswith("nvidia-"):
            groups.setdefault((m.group("head"), m.group("tail") or ""), []).append((dist, m.group("major")))
    majors = {f[1] for n in ("torch", "jaxlib", "tensorflow") if (f := _framework(d, n)) and f[1]}
    out = []
    for (_head, _tail), dists in sorted(groups.items()):
        if len({m for _n, m in dists}) < 2:
            continue
        drop = [n for n, m in dists if m not in majors] or [n for n, _m in dists[:-1]]
        out.append(Finding(code="EXTENSION_VARIANT_CLASH", severity="error",
                           title=" and ".join(f"{n} {d.env.packages[n]}" for n, _m in dists) +
                                 " are installed together: CUDA " + " and ".join(m for _n, m in dists) +
                                 " variants of one package",
                           evidence=[f"{n}: the CUDA {m} build" for n, m in dists],
                           fix=f"pip uninstall {' '.join(drop)}, then reinstall the one that is kept "
                               "(the two wrote the same files)",
                           fix_commands=[["pip", "uninstall", "-y", *drop]]))
    return out


def jax_plugin_mismatch(d: Diagnosis) -> list[Finding]:
    """JAX_PLUGIN_MISMATCH: jaxlib and its CUDA plugin or PJRT wheel (jax-cudaNN-plugin, jax-cudaNN-pjrt) are
    installed at different versions; JAX releases them together, one version for all three."""
    jaxlib = d.env.packages.get("jaxlib")
    if not jaxlib or any(m.kind == "library_version" and _JAX_PLUGIN.match(m.library or "") for m in d.env.messages):
        return []  # JAX's own words in a paste state it: that finding quotes them (diagnose/implied.py)
    want = base_version(jaxlib)
    off = [(n, v) for n, v in sorted(d.env.packages.items()) if _JAX_PLUGIN.match(n) and base_version(v) != want]
    if not off:
        return []
    return [Finding(code="JAX_PLUGIN_MISMATCH", severity="error",
                    title=f"jaxlib {jaxlib} is installed with " + ", ".join(f"{n} {v}" for n, v in off),
                    evidence=[f"{n} {v} is not jaxlib's version {want}" for n, v in off],
                    fix="pip install " + " ".join(f"'{n}=={want}'" for n, _v in off),
                    fix_commands=[["pip", "install", *(f"{n}=={want}" for n, _v in off)]])]
