"""Library-path questions: which file each framework will map, which of those loads are wrong, what stops them.

The one home for "what shadows what". ``predict_loads`` runs the loader model (:mod:`.loader`) over each
installed framework the way its import does it, once as the process will run and once without
LD_PRELOAD, LD_LIBRARY_PATH and earlier loads (the framework's own choice, ``expected``). ``wrong_loads``
compares the two; doctor's LIBRARY_SHADOWED / LIBRARY_PRELOADED / CUDNN_MISMATCH, ``env``, ``solve``'s
environment changes and ``fix``'s notebook decision all ask here.

How each framework loads is :mod:`.recipes`; what the libraries it loads open themselves is :mod:`.openers`.

Not modelled: ``cuda.pathfinder``'s own search (already loaded, site-packages, conda, CUDA_HOME): torch 2.14.1
depends on it but does not call it while importing (its installed sources do not name it); glibc-hwcaps
subfolders.
"""
from __future__ import annotations

import os
import re
from collections.abc import Sequence

from cudamatrix.ldso import elf, openers
from cudamatrix.ldso.ldcache import run_ldconfig
from cudamatrix.ldso.linkmap import LinkMap, Resolution, system_search
from cudamatrix.ldso.openers import version_tuple
from cudamatrix.ldso.paths import read_text, realpath
from cudamatrix.ldso.recipes import RECIPES, forget_listings, listed
from cudamatrix.models import Environment, Framework, LibraryLoad, Note
from cudamatrix.safe.text import lazy
from cudamatrix.schema import record

# the CUDA stack's libraries (what the findings and the verification compare)
CUDA_LIB = re.compile(r"^lib(cuda|cudart|cudnn\w*|cublas\w*|nvrtc[\w.-]*|nvJitLink|cufft\w*|curand|cusparse\w*|"
                      r"cusolver\w*|nccl|cupti|nvshmem\w*|cufile\w*|nvToolsExt|nvidia-ml|caffe2_nvrtc)\.so")


def predict_loads(frameworks: list[Framework], site_packages: list[str], executable: str | None,
                  environ: dict[str, str], ld_entries: list, cwd: str | None = None,
                  mapped: Sequence[str] = (), notes: list | None = None) -> list[LibraryLoad]:
    """The file each installed framework maps for every CUDA-stack SONAME, with the rule that chose it: what
    its import loads, and what the libraries it loads open themselves on first use (:mod:`.openers`).

    ``mapped``: files already mapped into the process that will import the framework (a notebook kernel).
    ``notes``: receives a :class:`~cudamatrix.models.Note` for each opener whose opened libraries are unknown.
    Reads ELF headers only; never loads anything.
    """
    forget_listings()  # folder listings live for one prediction: a later call may follow an install
    versions = wheel_versions(site_packages)
    fits: dict[str, bool] = {}  # shared by every link map of this prediction, as are the folders' names
    listings: dict[str, frozenset[str] | None] = {}
    out: list[LibraryLoad] = []
    unknown: dict[str, None] = {}
    clean_environ = {k: v for k, v in environ.items() if k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}
    for fw in frameworks:
        actual = _simulate(fw, site_packages, environ, ld_entries, executable, cwd, mapped, versions, unknown, fits,
                           listings)
        if actual is None:
            continue  # not modelled, or the framework's files are not there (a report, or another layout)
        if mapped or actual.environment_took_part():
            clean = _simulate(fw, site_packages, clean_environ, ld_entries, executable, cwd, (), versions, {},
                              fits, listings) or actual
        else:  # nothing shadowed: the framework's own choice is the prediction itself
            clean = actual
        out += _loads(fw.name, _decisive(actual), _decisive(clean), versions)
    if notes is not None:
        notes += [Note("loader", why, "warning") for why in unknown]
    return out


def _simulate(fw: Framework, site_packages: list[str], environ: dict[str, str], ld_entries: list,
              executable: str | None, cwd: str | None, mapped: Sequence[str], versions: dict[str, str],
              unknown: dict[str, None], fits: dict[str, bool], listings: dict[str, frozenset[str] | None]):
    """The link map of importing ``fw`` and using its libraries once, or None when it is not modelled here."""
    if fw.name not in RECIPES:
        return None
    lm = LinkMap(system_search(environ, ld_entries, executable, cwd), mapped, fits, listings)
    if not RECIPES[fw.name](lm, site_packages, fw):
        return None
    open_libraries(lm, versions, unknown)
    return lm


def _loads(framework: str, actual: dict, own: dict, versions: dict[str, str]) -> list[LibraryLoad]:
    out = []
    for soname, (res, when) in actual.items():
        exp = own.get(soname)
        other = exp[0] if exp is not None and exp[0].path != res.path else None
        out.append(LibraryLoad(
            framework=framework, soname=soname, path=res.path, rule=res.rule, requested_by=res.requested_by,
            how=res.how, found_as=res.found_as, when=when, version=file_version(res.path, versions),
            expected=other.path if other is not None else None, expected_rule=other.rule if other is not None else None,
            expected_version=file_version(other.path, versions) if other is not None else None))
    return out


def open_libraries(lm, versions: dict[str, str], unknown: dict[str, None]) -> None:
    """Every object in ``lm`` that the data knows as an opener opens its libraries (first use), in load order;
    what those open in turn follows (cuDNN's graph library opens the engine libraries)."""
    i = 0
    while i < len(lm.objects):  # each object once: the list only grows, by the objects the openers load
        obj = lm.objects[i]
        i += 1
        soname = obj.dyn.soname if obj.dyn is not None else None
        if soname is None or not openers.is_opener(soname):
            continue
        todo, why = openers.openings(soname, file_version(obj.real, versions))
        if why:
            unknown.setdefault(why, None)
        for opening in todo:
            lm.load_first(opening.names, obj, opening.soname)


_VERSIONED_NAME = lazy(r"\.so\.(\d+\.\d+(?:\.\d+)*)$")


def file_version(path: str | None, versions: dict[str, str]) -> str | None:
    """The version of a library file: its real name (``libcudnn_graph.so.9.14.0``), else the version of the
    nvidia-* wheel whose RECORD lists it (``versions``, from :func:`wheel_versions`)."""
    if not path:
        return None
    m = _VERSIONED_NAME.search(os.path.basename(path))  # the model's paths are real paths already
    return m.group(1) if m else versions.get(path)


def wheel_versions(site_packages: list[str]) -> dict[str, str]:
    """Real path -> version of every shared library an nvidia-* wheel installed in ``site_packages``."""
    out: dict[str, str] = {}
    for sp in site_packages:
        real = os.path.realpath(sp)  # a wheel's files are plain files: one realpath per folder is enough
        records = [os.path.join(d, "RECORD") for d in listed(sp, "nvidia_*.dist-info")]  # lexists: folders only
        for record_file in sorted(r for r in records if os.path.lexists(r)):
            version = os.path.basename(os.path.dirname(record_file))[:-len(".dist-info")].rpartition("-")[2]
            for line in read_text(record_file, 1 << 22).splitlines():
                rel = line.partition(",")[0]
                if ".so" in rel and not rel.startswith(".."):
                    out.setdefault(os.path.join(real, rel), version)
    return out


def _decisive(lm) -> dict[str, tuple]:
    """soname -> (the resolution that decided it, when). A request by name (DT_NEEDED, dlopen of a soname) is
    what the framework's own code gets; a by-path load (torch's preloads) decides only where no request by
    name was made, since a second file of the same soname is mapped beside the first but never used."""
    by_name: dict[str, Resolution] = {}
    by_path: dict[str, Resolution] = {}
    for res in lm.resolutions:
        if "/" in res.name:
            key = _soname(res.path) or os.path.basename(res.name)
            table = by_path
        else:
            key, table = res.soname or res.name, by_name
        if not CUDA_LIB.match(key):
            continue
        if key not in table or (table[key].path is None and res.path is not None):
            table[key] = res
    merged = {**by_path, **{k: v for k, v in by_name.items() if v.path is not None or k not in by_path}}
    return {k: (v, v.when) for k, v in merged.items()}


def _soname(path: str | None) -> str | None:
    dyn = elf.try_read(path) if path else None
    return dyn.soname if dyn and dyn.soname else (os.path.basename(path) if path else None)


# --- the questions the other stages ask (no I/O) ------------------------------------------------------------

@record
class WrongLoad:
    """A load the model predicts goes to another file than the framework's own copy."""

    load: LibraryLoad
    cause: str  # "LD_PRELOAD" | "LD_LIBRARY_PATH" | "loaded earlier" | "other"
    version: str | None  # of the file that will be mapped
    expected_version: str | None

    @property
    def known_different(self) -> bool:
        return bool(self.version and self.expected_version and not same_release(self.version, self.expected_version))


def same_release(a: str | None, b: str | None) -> bool:
    """Both versions known and of one library release ("9.19.0" and the wheel's "9.19.0.56" are)."""
    ta, tb = version_tuple(a), version_tuple(b)
    return ta is not None and tb is not None and ta[:len(tb)] == tb[:len(ta)]


def version_of(env: Environment, path: str | None) -> str | None:
    """The detected version of the file at ``path`` (matched by real path), or None."""
    if not path:
        return None
    for lib in env.libraries:
        if lib.path == path or realpath(lib.path) == path:
            return lib.version
    return None


def fill_versions(env: Environment) -> None:
    """Give each predicted load (and its framework's own copy) the version detect knows for that file: the copy
    of the library list, else, for a library a cuDNN shim opens, that folder's cuDNN version. Inference rule:
    cuDNN's sub-libraries are one release with the shim of their folder, whose version detect read by loading it
    after that folder's own answering sub-library (:func:`cudamatrix.detect.loader.own_answerer`)."""
    folders = {os.path.dirname(realpath(lib.path)) + "|" + lib.soname: lib.version
               for lib in env.libraries if lib.name == "cudnn" and lib.version}

    def known(path: str | None, soname: str) -> str | None:
        family = openers.family_of(soname) or ""
        shim = f"libcudnn.so.{family[len('cudnn'):]}" if family.startswith("cudnn") else ""
        return version_of(env, path) or (folders.get(os.path.dirname(path) + "|" + shim) if path and shim else None)

    for load in env.library_loads:
        load.version = load.version or known(load.path, load.soname)
        if load.expected:
            load.expected_version = load.expected_version or known(load.expected, load.soname)


def load_version(env: Environment, load: LibraryLoad, expected: bool = False) -> str | None:
    """The version of the file a load maps (``expected``: of the framework's own copy)."""
    if expected:
        return load.expected_version or version_of(env, load.expected)
    return load.version or version_of(env, load.path)


def cause_of(rule: str) -> str:
    """What made a file win, as a fix sees it: "LD_PRELOAD" | "LD_LIBRARY_PATH" | "loaded earlier" | "other"."""
    return ("LD_PRELOAD" if "LD_PRELOAD" in rule else "LD_LIBRARY_PATH" if rule == "LD_LIBRARY_PATH"
            else "loaded earlier" if rule.startswith("already loaded") else "other")


def wrong_loads(env: Environment, loads: list[LibraryLoad] | None = None) -> list[WrongLoad]:
    """Predicted loads (``env.library_loads``, or ``loads``) that map another file than the framework's own
    choice, except where both files are known to be the same version (one per framework and soname)."""
    out = []
    for load in env.library_loads if loads is None else loads:
        if not load.expected or load.path is None or load.path == load.expected:
            continue
        have, want = load_version(env, load), load_version(env, load, expected=True)
        if same_release(have, want):
            continue
        out.append(WrongLoad(load, cause_of(load.rule), have, want))
    return out


def winner_folder(load: LibraryLoad) -> str:
    """The folder whose entry made ``load``'s file win (the path as the search found it, before symlinks)."""
    return os.path.dirname(load.found_as or load.path or "")


def grouped(wrong: list[WrongLoad]) -> list[list[WrongLoad]]:
    """Wrong loads by framework, cause and what wins (the folder, or the preloaded file), in first-seen order."""
    groups: dict[tuple[str, str, str | None], list[WrongLoad]] = {}
    for w in wrong:
        where = w.load.path if w.cause == "LD_PRELOAD" else winner_folder(w.load)
        groups.setdefault((w.load.framework, w.cause, where), []).append(w)
    return list(groups.values())


def after_change(env: Environment, changes: dict[str, str]) -> list[WrongLoad] | None:
    """The wrong loads left once ``changes`` (variable -> value, "" unsets) apply to this process's environment,
    predicted again for ``env``'s interpreter; None when ``env`` was not detected here (a saved or pasted one)."""
    if env.origin != "live" or not env.python.site_packages:
        return None
    environ = {k: v for k, v in os.environ.items() if changes.get(k, v) != ""}
    environ.update({k: v for k, v in changes.items() if v != ""})
    entries, _note = run_ldconfig(10.0)
    loads = predict_loads(env.frameworks, env.python.site_packages, env.python.executable, environ, entries)
    return wrong_loads(env, loads)


def cudnn_mapped(env: Environment, framework: str) -> LibraryLoad | None:
    """The predicted load of ``libcudnn.so.N`` for a framework (None when the model has none)."""
    return next((x for x in env.library_loads if x.framework == framework and re.match(r"^libcudnn\.so\.\d+$", x.soname)
                 and x.path), None)


def library_path_fix(env: Environment) -> dict[str, str]:
    """Environment changes that stop the wrong loads: LD_LIBRARY_PATH without the folders that win over a
    framework's own copy, LD_PRELOAD without the files that replace one ("" = unset). {} when none."""
    changes: dict[str, str] = {}
    wrong = wrong_loads(env)
    bad_dirs = {os.path.normpath(winner_folder(w.load)) for w in wrong if w.cause == "LD_LIBRARY_PATH"}
    value = _without_folders(env.context.env.get("LD_LIBRARY_PATH"), bad_dirs)
    if value is not None:
        changes["LD_LIBRARY_PATH"] = value
    value = _without_files(env.context.env.get("LD_PRELOAD"), {w.load.path for w in wrong if w.cause == "LD_PRELOAD"})
    if value is not None:
        changes["LD_PRELOAD"] = value
    return changes


def _without_folders(current: str | None, bad_dirs: set[str]) -> str | None:
    """LD_LIBRARY_PATH less ``bad_dirs``, or None when none of them is in it. ld.so splits on colons and
    semicolons (ld.so(8)); the kept entries keep the separator that followed them."""
    if not current or not bad_dirs:
        return None
    pairs = re.findall(r"([^:;]*)([:;]?)", current)  # (entry, the separator after it); "" after the last
    kept = [(e, sep) for e, sep in pairs if e and os.path.normpath(e) not in bad_dirs]
    if len(kept) == len([e for e, _ in pairs if e]):
        return None
    return "".join(e + sep for e, sep in kept[:-1]) + (kept[-1][0] if kept else "")


def _without_files(preload: str | None, bad_files: set[str | None]) -> str | None:
    """LD_PRELOAD less the entries that are ``bad_files`` (as written or resolved), or None when none is."""
    if not preload or not bad_files:
        return None
    items = [p for p in re.split(r"[:\s]+", preload) if p]
    kept = [p for p in items if os.path.realpath(p) not in bad_files and p not in bad_files]
    return " ".join(kept) if len(kept) != len(items) else None


def in_process_loads(env: Environment, maps_text: str | None = None) -> list[LibraryLoad]:
    """The predictions again, for an import into *this* process: what its /proc/self/maps already holds
    answers first (a notebook kernel where another import mapped a copy). Reads the ld.so cache again."""
    if maps_text is None:
        try:
            with open("/proc/self/maps") as fh:
                maps_text = fh.read()
        except OSError:
            maps_text = ""
    rows = [line.split(None, 5) for line in maps_text.splitlines()]
    mapped = dict.fromkeys(p[5].strip() for p in rows if len(p) == 6 and p[5].startswith("/") and ".so" in p[5])
    entries, _note = run_ldconfig(5.0)
    return predict_loads(env.frameworks, env.python.site_packages, env.python.executable, dict(os.environ),
                         entries, mapped=list(mapped))


def reconcile_notes(notes: list, loads: list[LibraryLoad]) -> list:
    """The search-order notes of :func:`cudamatrix.detect.libraries.loader_view` ("X is loaded first and shadows
    Y") for a SONAME that a framework loads are replaced by what the model says that framework maps."""
    covered: dict[str, list[LibraryLoad]] = {}
    for load in loads:
        covered.setdefault(load.soname, []).append(load)
    out = []
    for note in notes:
        soname = note.message.partition(":")[0] if note.probe == "loader" else None
        if soname in covered:
            for load in covered.pop(soname):
                out.append(Note("loader", f"{soname}: {load.framework} maps {load.path or 'nothing (not found)'} "
                                          f"({load.rule})"))  # level "info", Note's default
            continue
        if soname is None or soname not in {x.soname for x in loads}:
            out.append(note)
    return out
