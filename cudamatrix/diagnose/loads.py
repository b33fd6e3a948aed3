"""Findings about which library copy a framework will map: LIBRARY_SHADOWED, LIBRARY_PRELOADED and CUDNN_MISMATCH,
from the loader model's prediction (:mod:`cudamatrix.ldso.libpaths`) against the framework's own copy.

Each finding names the file that wins, the folder (or LD_PRELOAD entry, or earlier load) that makes it win, and
the change that stops it, for every library a framework maps: those its import loads and those its libraries
open themselves later (cuDNN's sub-libraries, NVRTC's builtins: :mod:`cudamatrix.ldso.openers`). Loads that go
wrong for one reason, from one folder, are one finding. No I/O.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from cudamatrix.diagnose.context import Diagnosis, Installed
from cudamatrix.ldso import libpaths, openers
from cudamatrix.ldso.libpaths import winner_folder
from cudamatrix.ldso.openers import version_tuple
from cudamatrix.models import Environment, Finding, LibraryLoad, Severity
from cudamatrix.safe.shells import Said, tool

if TYPE_CHECKING:
    from packaging.version import Version

    from cudamatrix.ldso.libpaths import WrongLoad

# torch's rule (torch/backends/cudnn/__init__.py): the same major, and a runtime minor no lower than the compiled one
_CUDNN_RULE = "torch needs the same major and a minor at least the compiled one"


def library_shadowed(d: Diagnosis) -> list[Finding]:
    """LIBRARY_SHADOWED and LIBRARY_PRELOADED: only where the loader model (ldso.libpaths, glibc's search
    order as ld.so(8) documents it, and how each library opens its sub-libraries: data/loaders.json) predicts that
    a framework maps a wrong file; one finding per framework, cause and winning folder (or preloaded file), naming
    the file, the folder that makes it win and the change that stops it. Without a prediction (a paste, an older
    saved environment): the search-order view only."""
    if not d.env.library_loads:
        return unmodelled(d.env)
    return [_shadow_finding(d.env, group) for group in libpaths.grouped(libpaths.wrong_loads(d.env))]


def _shadow_finding(env: Environment, group: list[WrongLoad]) -> Finding:
    first = group[0].load
    severity: Severity = "error" if any(w.known_different for w in group) or group[0].cause == "LD_PRELOAD" \
        else "warning"
    evidence = [_evidence(w) for w in group] + _mixed(env, group)
    if group[0].cause == "LD_PRELOAD":
        return Finding(code="LIBRARY_PRELOADED", severity=severity,
                       title=f"LD_PRELOAD puts {first.path} in place of {first.framework}'s {first.soname} "
                             f"({_versions(group[0])})",
                       evidence=evidence, fix=fix_for(group[0]))
    if len(group) == 1:
        title = f"{first.framework} will map {first.path} for {first.soname}, not its own copy ({_versions(group[0])})"
    else:
        names = ", ".join(w.load.soname for w in group[:3]) + (f" and {len(group) - 3} more" if len(group) > 3 else "")
        title = (f"{first.framework} will map {names} from {winner_folder(first)} ({first.rule}), not its own "
                 f"copies ({_versions(group[0])})")
    return Finding(code="LIBRARY_SHADOWED", severity=severity, title=title, evidence=evidence, fix=fix_for(group[0]))


def _versions(w: WrongLoad) -> str:
    return (f"{w.version or 'version unknown'} where the framework's own copy is "
            f"{w.expected_version or 'of unknown version'}")


def _evidence(w: WrongLoad) -> str:
    load = w.load
    when = " at first use" if load.when == "first use" else ""
    return (f"{load.framework} maps {load.path} for {load.soname} ({load.rule}; {load.how} from "
            f"{load.requested_by or 'the program'}{when}), {w.version or 'version unknown'}; its own copy: "
            f"{load.expected} ({load.expected_rule}), {w.expected_version or 'version unknown'}")


def _mixed(env: Environment, group: list[WrongLoad]) -> list[str]:
    """A line when the object that opens these libraries is the framework's own copy: the library is mixed."""
    own = {x.path for x in env.library_loads if x.framework == group[0].load.framework and not x.expected}
    openers = sorted({w.load.requested_by for w in group
                      if w.load.how == "dlopen" and w.load.requested_by and w.load.requested_by in own})
    return [f"a mixed load: {opener} is the framework's own copy, but the libraries it opens come from "
            f"{winner_folder(group[0].load)}" for opener in openers]


def fix_for(w: WrongLoad) -> str:
    """The change that stops a wrong load: an LD_LIBRARY_PATH edit, an LD_PRELOAD removal, or a restart."""
    if w.cause == "LD_LIBRARY_PATH":
        return Said(f"remove {winner_folder(w.load)} from LD_LIBRARY_PATH (", tool("env"), " prints the export)")
    if w.cause == "LD_PRELOAD":
        return Said("remove it from LD_PRELOAD (", tool("env"), " prints the change); a running notebook kernel "
                    "keeps it until it is restarted without it")
    if w.cause == "loaded earlier":
        return "restart the kernel, and import the framework before what loaded the other copy"
    return f"the copy in {winner_folder(w.load)} wins by {w.load.rule}: take it off the loader's path"


def unmodelled(env: Environment) -> list[Finding]:
    """A pasted or older saved environment carries no loader prediction: the search-order view only, as a
    warning, since a framework's DT_RPATH (torch's wheels have one) can still win over LD_LIBRARY_PATH."""
    out = []
    by_soname: dict[str, list] = {}
    for lib in env.libraries:
        by_soname.setdefault(lib.soname, []).append(lib)
    for soname, copies in by_soname.items():
        first = next((c for c in copies if c.loaded_first), None)
        wheels = [c for c in copies if c.origin.startswith("wheel:")]
        if first is None or first.origin != "LD_LIBRARY_PATH" or not wheels:
            continue
        differs = [w for w in wheels if w.version != first.version]
        if differs:
            out.append(Finding(
                code="LIBRARY_SHADOWED", severity="warning",
                title=f"{soname} on LD_LIBRARY_PATH ({first.version or 'version unknown'}) may win over the wheel's "
                      f"copy ({differs[0].version or 'version unknown'})",
                evidence=[f"first on LD_LIBRARY_PATH: {first.path}"] + [f"wheel copy: {w.path}" for w in differs] +
                         ["no loader prediction in this environment (pasted or saved by an older version): whether "
                          "the framework's DT_RPATH wins is unknown; run doctor on the machine"],
                fix=Said("run ", tool("doctor"), " on the machine itself")))
    return out


def cudnn_mapped(d: Diagnosis) -> list[Finding]:
    """CUDNN_MISMATCH, from the loader model: the cuDNN a framework will run (the library that answers its
    version call: cuDNN 9's graph library, cuDNN 8's ops_infer, else the shim) is another major, or an older
    minor, than the one it was built with. torch's rule (torch/backends/cudnn/__init__.py): the same major, and
    a runtime minor no lower than the compiled one. The fix stops what made the file win; a reinstall only where
    the framework's own copy is the wrong version."""
    if not d.env.library_loads:
        return []
    found = (_cudnn_finding(d.env, inst) for inst in d.installed)
    return [f for f in found if f is not None]


def answering_load(env: Environment, framework: str) -> LibraryLoad | None:
    """The predicted load whose library answers the framework's cuDNN version call: cuDNN 9's graph library,
    cuDNN 8's ops_infer, else the shim itself (``libcudnn.so.N``)."""
    shim = libpaths.cudnn_mapped(env, framework)
    if shim is None:
        return None
    answers = openers.answers_version(shim.soname)
    sub = next((x for x in env.library_loads if x.framework == framework and x.soname == answers and x.path), None)
    return sub or shim


def _cudnn_finding(env: Environment, inst: Installed) -> Finding | None:
    built = inst.variant.cudnn if inst.variant is not None else None
    load = answering_load(env, inst.name) if built is not None else None
    if load is None or built is None:
        return None
    have = libpaths.load_version(env, load)
    hv = version_tuple(have)
    major = int(load.soname.split(".so.")[1].split(".")[0])
    if major == built.major and (hv is None or (hv[0] == built.major and hv[1:2] >= (built.minor,))):
        return None
    answers = f" ({load.soname} answers cudnnGetVersion)" if not load.soname.startswith("libcudnn.so") else ""
    return Finding(code="CUDNN_MISMATCH", severity="error",
                   title=f"{inst.name} {inst.version} was built with cuDNN {built} but will run cuDNN "
                         f"{have or load.soname} from {load.path}{answers}",
                   evidence=[f"{load.soname}: {load.path} ({load.rule}; found as {load.found_as or load.path})",
                             _CUDNN_RULE],
                   fix=_cudnn_fix(env, load, built, inst))


def _cudnn_fix(env: Environment, load: LibraryLoad, built: Version, inst: Installed) -> str:
    wrong = next((w for w in libpaths.wrong_loads(env) if w.load is load), None)
    cause = wrong.cause if wrong is not None else libpaths.cause_of(load.rule)
    if cause != "other":  # the file wins by a variable or an earlier load: stop that, whatever its own copy is
        return fix_for(wrong or libpaths.WrongLoad(load, cause, None, None))
    if wrong is not None:
        return fix_for(wrong)
    # the framework's own copy is that version: its wheel was overwritten (another cuDNN wheel of the same files)
    return Said(f"reinstall the cuDNN wheel {inst.name} declares (cuDNN {built}): ", tool("fix"))
