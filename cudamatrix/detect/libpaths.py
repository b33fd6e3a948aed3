"""Library-path questions: which copy of a library shadows another, and what stops it.

The one home for "shadowed wheel copy" decisions (doctor's LIBRARY_SHADOWED, ``env``, ``solve``'s environment
changes and ``fix``'s notebook preloading all ask here).
"""
from __future__ import annotations

import os

from cudamatrix.models import Environment


def library_path_fix(env: Environment) -> dict[str, str]:
    """Environment changes that stop LD_LIBRARY_PATH copies from shadowing the wheels' libraries.

    Returns {} when nothing needs fixing, else {"LD_LIBRARY_PATH": "<new value>"}.
    """
    current = env.context.env.get("LD_LIBRARY_PATH")
    if not current:
        return {}
    bad_dirs = set()
    by_soname: dict[str, list] = {}
    for lib in env.libraries:
        by_soname.setdefault(lib.soname, []).append(lib)
    for copies in by_soname.values():
        first = next((c for c in copies if c.loaded_first), None)
        wheels = [c for c in copies if c.origin.startswith("wheel:")]
        if first is not None and first.origin == "LD_LIBRARY_PATH" and wheels and \
                any(w.version != first.version for w in wheels):
            bad_dirs.add(os.path.normpath(os.path.dirname(first.path)))
    if not bad_dirs:
        return {}
    kept = [p for p in current.split(os.pathsep) if p and os.path.normpath(p) not in bad_dirs]
    return {"LD_LIBRARY_PATH": os.pathsep.join(kept)}
