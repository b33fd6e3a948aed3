"""Resolve a solved set to its complete closure of files: which wheel (URL, sha256) each package and each of its
dependencies comes from, for each target's platform, Python and glibc, asked of the real index by pip
(``pip install --dry-run --ignore-installed --only-binary=:all: --python-version --platform --report``, pip's
installation report). Feeds :mod:`cudamatrix.lock.lockfile` and :mod:`cudamatrix.lock.pylock`.

An index that cannot be read, a file without a hash, or a dependency marker that pip answered for this
interpreter and not for the target ends the lock with a UsageError: no partial lock is ever written."""
from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Sequence

from cudamatrix import proc
from cudamatrix.errors import UsageError
from cudamatrix.install.explain import explain
from cudamatrix.lock.closure import Closure, LockSpec, check_glibc, diverging_markers, from_report, glibc_of, merge
from cudamatrix.models import Environment, Solution
from cudamatrix.safe.files import parse_json
from cudamatrix.solve.indexes import index_args, index_layout
from cudamatrix.solve.target import Target

RESOLVE_TIMEOUT_S = 900.0


def host_glibc() -> str | None:
    """This machine's glibc ("2.36"), or None off glibc."""
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (AttributeError, ValueError, OSError):
        return None
    parts = text.split()
    return parts[1] if len(parts) == 2 and parts[0] == "glibc" else None


def lock_specs(targets: list[Target], environments: list[Environment | None], glibc: str | None = None) -> list[LockSpec]:
    """One LockSpec per distinct interpreter among ``targets`` (``environments``: the saved or live ones they came
    from, same order, or none for a target described by flags). A fact the target leaves open is taken from this
    machine and said so: Python (this interpreter's minor), glibc (``--glibc``, else the environment's manylinux
    tag, else this machine's). Raises UsageError for a Linux target whose glibc cannot be known."""
    glibc = check_glibc(glibc)
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    specs: list[LockSpec] = []
    for i, target in enumerate(targets):
        env = environments[i] if i < len(environments) else None
        assumed = []
        python = target.python
        if python is None:
            python = here
            assumed.append(f"Python {here} assumed (the target leaves it open; pass --python to choose)")
        libc = None
        if target.platform.startswith("linux_"):
            libc = glibc or (glibc_of(env.python.tags) if env is not None else None)
            if libc is None:
                libc = host_glibc()
                if libc is None:
                    raise UsageError(f"the glibc of {target.name} is not known and this machine has none to assume",
                                     hint="pass --glibc 2.35 (the target's `ldd --version`)")
                assumed.append(f"glibc {libc} assumed (this machine's; the target leaves it open; pass --glibc)")
        spec = LockSpec(target.platform, python, libc, tuple(assumed))
        if all((s.platform, s.python, s.glibc) != (spec.platform, spec.python, spec.glibc) for s in specs):
            specs.append(spec)
    return specs


def lock_closure(solution: Solution, passthrough: list[str], specs: list[LockSpec],
                 environ: dict[str, str] | None = None, find_links: Sequence[str] = ()) -> Closure:
    """The complete set of ``solution`` (and the requirements passed through) for every LockSpec, with the
    indexes a lock of it names; ``find_links``: pages pip reads besides (a PyG wheel's). Raises UsageError when
    pip cannot resolve it, a file has no hash, a marker answers differently on a target than here, or the targets
    need different versions."""
    index_url, extra = index_layout(solution.packages, bool(passthrough))
    args = index_args(index_url, extra)
    requirements = [p.requirement() for p in solution.packages] + list(passthrough)
    env = os.environ if environ is None else environ
    indexes = [a for a in args if "://" in a]
    args += [a for url in find_links for a in ("--find-links", url)]  # a page, not an index the lock names
    indexes += [u for v in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL") for u in env.get(v, "").split()]
    resolved = []
    resolver = "pip"
    for spec in specs:
        report = locked_report(requirements, args, spec, environ=environ)
        resolver = f"pip {report.get('pip_version') or ''}".strip()
        differ = diverging_markers(report, requirements, spec)
        if differ:
            raise UsageError(f"cannot lock for {spec.describe()} from Python {sys.version.split()[0]}: pip answers "
                             "these environment markers for the interpreter it runs under, and the target's answer "
                             "differs or is unknown: " + "; ".join(differ[:5]) + ("; ..." if len(differ) > 5 else ""),
                             hint=f"run cudamatrix lock under Python {spec.python} on {spec.platform}, or lock "
                                  "with --pins-only")
        resolved.append((spec, from_report(report, indexes)))
    return merge(resolved, resolver)


def locked_report(requirements: list[str], index_args: list[str], spec: LockSpec,
                  environ: dict[str, str] | None = None) -> dict:
    """pip's installation report for ``requirements`` on ``spec``'s platform tags and Python (wheels only).
    Raises UsageError with the installer's root cause when pip cannot resolve them (no index, no file)."""
    tags = spec.tags()
    with tempfile.TemporaryDirectory(prefix="cudamatrix-lock-") as target:
        argv = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--report", "-",
                "--only-binary=:all:", "--python-version", spec.python, "--target", target]
        for tag in tags:
            argv += ["--platform", tag]
        r = proc.run(argv + index_args + requirements, timeout=RESOLVE_TIMEOUT_S, env=environ)
    if not r.ok:
        cause = explain(f"{r.error or ''}\n{r.stderr}\n{r.stdout}", command="lock")
        raise UsageError(f"cannot lock the solved set to files for {spec.describe()}: "
                         + (f"{cause.kind}: {cause.line}" if cause else (r.error or r.stderr.strip()[-300:])),
                         hint=(cause.way_out if cause else "check the index") + "; a complete lock names each file "
                              "and its sha256, so the index must be reachable (or: lock --pins-only)")

    try:
        return parse_json(r.stdout)
    except ValueError:
        raise UsageError("pip printed no installation report", hint="pip >= 22.2 is needed for --report") from None
