"""Findings about which library copy a framework will map: the loader model's prediction (detect.libpaths)
against the framework's own copy. No I/O."""
from __future__ import annotations

import os

from packaging.version import InvalidVersion, Version

from cudamatrix.diagnose.context import Diagnosis, Installed
from cudamatrix.models import Environment, Finding, Severity


def library_shadowed(d: Diagnosis) -> list[Finding]:
    """LIBRARY_SHADOWED and LIBRARY_PRELOADED: only where the loader model (detect.libpaths, glibc's search
    order as ld.so(8) documents it) predicts that a framework maps a wrong file, naming that file and the rule
    that made it win. Without a prediction (a paste, an older saved environment): the search-order view only."""
    from cudamatrix.detect import libpaths

    if not d.env.library_loads:
        return _unmodelled(d.env)
    return [_wrong_load(w) for w in libpaths.wrong_loads(d.env)]


def _wrong_load(w) -> Finding:
    load = w.load
    versions = (f"{w.version or 'version unknown'} where the framework's own copy is "
                f"{w.expected_version or 'of unknown version'}")
    evidence = [f"{load.framework} maps {load.path} for {load.soname} ({load.rule}; "
                f"{load.how} from {load.requested_by or 'the program'})",
                f"its own copy: {load.expected} ({load.expected_rule})"]
    severity: Severity = "error" if w.known_different or w.cause == "LD_PRELOAD" else "warning"
    if w.cause == "LD_PRELOAD":
        return Finding(code="LIBRARY_PRELOADED", severity=severity,
                       title=f"LD_PRELOAD puts {load.path} in place of {load.framework}'s {load.soname} "
                             f"({versions})",
                       evidence=evidence,
                       fix="remove it from LD_PRELOAD (cudamatrix env prints the change); a running notebook "
                           "kernel keeps it until it is restarted without it")
    fix = ("remove " + os.path.dirname(load.found_as or load.path or "") + " from LD_LIBRARY_PATH (cudamatrix env "
           "prints the export)" if w.cause == "LD_LIBRARY_PATH" else
           "restart the kernel, and import the framework before what loaded the other copy"
           if w.cause == "loaded earlier" else "remove the other copy from the loader's path")
    return Finding(code="LIBRARY_SHADOWED", severity=severity,
                   title=f"{load.framework} will map {load.path} for {load.soname}, not its own copy "
                         f"({versions})",
                   evidence=evidence, fix=fix)


def _unmodelled(env: Environment) -> list[Finding]:
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
                fix="run cudamatrix doctor on the machine itself"))
    return out


def cudnn_mapped(d: Diagnosis) -> list[Finding]:
    """CUDNN_MISMATCH, from the loader model: the cuDNN the framework will map is another major, or an older
    minor, than the one it was built with. torch's rule (torch/backends/cudnn/__init__.py): the same major, and
    a runtime minor no lower than the compiled one."""
    if not d.env.library_loads:
        return []
    found = (_cudnn_finding(d.env, inst) for inst in d.installed)
    return [f for f in found if f is not None]


def _cudnn_finding(env: Environment, inst: Installed) -> Finding | None:
    from cudamatrix.detect import libpaths

    if inst.variant is None or inst.variant.cudnn is None:
        return None
    load = libpaths.cudnn_mapped(env, inst.name)
    if load is None:
        return None
    built = inst.variant.cudnn
    have = libpaths.version_of(env, load.path)
    try:
        hv = Version(have) if have else None
    except InvalidVersion:
        hv = None
    major = int(load.soname.rsplit(".", 1)[1])
    if major == built.major and (hv is None or (hv.major == built.major and hv.minor >= built.minor)):
        return None
    return Finding(code="CUDNN_MISMATCH", severity="error",
                   title=f"{inst.name} {inst.version} was built with cuDNN {built} but will map cuDNN "
                         f"{have or load.soname} from {load.path}",
                   evidence=[f"{load.soname}: {load.path} ({load.rule})",
                             "torch needs the same major and a minor at least the compiled one"],
                   fix=_cudnn_fix(load, built, inst))


def _cudnn_fix(load, built, inst: Installed) -> str:
    if load.rule == "LD_LIBRARY_PATH":
        return f"remove {os.path.dirname(load.found_as or load.path)} from LD_LIBRARY_PATH (cudamatrix env)"
    if "LD_PRELOAD" in load.rule:
        return "remove it from LD_PRELOAD (cudamatrix env)"
    return f"reinstall the cuDNN wheel {inst.name} declares (cuDNN {built}): cudamatrix fix"
