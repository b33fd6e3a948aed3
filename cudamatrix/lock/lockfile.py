"""Write a Solution down as files people use (requirements.txt, uv project configuration); ``check`` reads
requirements files back with :mod:`cudamatrix.solve.requirements`. No I/O beyond the text handed in and returned."""
from __future__ import annotations

from collections.abc import Sequence
from contextlib import suppress

from packaging.requirements import InvalidRequirement, Requirement

from cudamatrix.errors import UsageError
from cudamatrix.lock import toml
from cudamatrix.lock.closure import Closure, is_local
from cudamatrix.matrix.data import Matrix
from cudamatrix.models import Solution
from cudamatrix.names import canonical
from cudamatrix.safe.files import write_atomic
from cudamatrix.safe.text import file_lines
from cudamatrix.solve import findlinks
from cudamatrix.solve.indexes import dedupe, index_layout
from cudamatrix.solve.target import Target


def write_lock(path, text: str) -> str:
    """Write a lock file atomically (a device, FIFO or folder at ``path`` is refused, the mode of an
    existing file kept: :func:`cudamatrix.safe.files.write_atomic`). Raises UsageError."""
    return write_atomic(path, text)


ALLOW_LOCAL = "--allow-local-files"


def local_sources(solution: Solution, closure: Closure | None = None) -> list[str]:
    """The index URLs and files a lock of ``solution`` (and of its ``closure``) would name that are paths of this
    machine (``file:`` URLs, plain paths), each once: pip follows whatever index it is configured with."""
    urls = [p.index_url for p in solution.packages if p.index_url]
    urls += [f.location for p in (closure.packages if closure else []) for f in p.files]
    return dedupe([u for u in urls if is_local(u)])


def refuse_local(sources: Sequence[str]) -> None:
    """Raise UsageError (exit 2) when a lock would name paths of this machine and that was not asked for."""
    if sources:
        more = f" and {len(sources) - 1} more" if len(sources) > 1 else ""
        raise UsageError(f"the lock would name a path of this machine ({sources[0]}{more}): a lock is committed and "
                         "installed elsewhere, where the path does not exist; no lock was written",
                         hint=f"lock against an index on the network (--mirror URL, PIP_INDEX_URL), or pass "
                              f"{ALLOW_LOCAL} to write it anyway (the lock then says so)")


def local_note(sources: Sequence[str]) -> list[str]:
    """The header line of a lock that names paths of this machine (written with ``--allow-local-files``)."""
    if not sources:
        return []
    shown = ", ".join(sources[:3]) + (f" and {len(sources) - 3} more" if len(sources) > 3 else "")
    return [f"local files ({ALLOW_LOCAL}): this lock names paths of the machine it was written on, which other "
            f"machines may lack: {shown}"]


def lock_header(solution: Solution, targets: list[Target], local: Sequence[str] = ()) -> list[str]:
    """The comment lines (without "# ") a lock starts with: the matrix, the targets, the request, the builds, and
    the paths of this machine it names (``local``)."""
    lines = [f"written by cudamatrix lock from matrix {solution.matrix_version}"]
    for t in targets[:20]:
        # a machine described by flags is named "target": "target target: ..." said it twice
        text = t.describe()
        lines.append(f"target {text[len('target: '):] if text.startswith('target: ') else text}")
    if len(targets) > 20:
        lines.append(f"... and {len(targets) - 20} more targets")
    lines.append(f"request: {' '.join(solution.request)}")
    for fw in solution.frameworks:
        bits = fw.label()
        lines.append(f"{fw.name} {fw.version} {fw.variant}: {bits}")
    return lines + local_note(local)


PINS_ONLY = ("pins only (--pins-only): the frameworks and their nvidia-* wheels, no hashes; pip resolves their "
             "other dependencies when it installs, so this is not a complete lock")


def closure_header(closure: Closure, name: str) -> list[str]:
    """What a complete lock holds (which interpreters, what was assumed) and how to install it."""
    lines = [f"complete: {len(closure.packages)} distributions, every file hashed, resolved by "
             f"{closure.resolver} for " + "; ".join(s.describe() for s in closure.specs)]
    lines += [a for s in closure.specs for a in s.assumed]
    if name.endswith(".toml"):
        return lines + [f"install: uv pip sync {name} (or: uv pip install -r {name})"]
    return lines + [f"install: pip install --require-hashes -r {name} (or: uv pip sync {name})"]


def requirements_txt(solution: Solution, targets: list[Target], passthrough: Sequence[str] = (),
                     closure: Closure | None = None, name: str = "requirements.txt", local: Sequence[str] = (),
                     find_links: Sequence[str] = ()) -> str:
    """A requirements file that `pip install -r` and `uv pip install -r` accept: with ``closure``, every
    distribution of the complete set pinned with its ``--hash`` options (``pip install --require-hashes``,
    ``uv pip sync``); without, the solved pins and the requirements passed through. ``local``: the paths of
    this machine it names (:func:`local_sources`), said in the header; ``find_links``: the pages of the wheels
    passed through pinned (PyG's), one ``--find-links`` line each."""
    index_url, extra = index_layout(solution.packages, bool(passthrough))  # the indexes the closure came from
    head = lock_header(solution, targets, local) + (closure_header(closure, name) if closure else [PINS_ONLY])
    lines = ["# " + h for h in head]
    if index_url:
        lines.append(f"--index-url {index_url}")
    for url in extra:
        lines.append(f"--extra-index-url {url}")
    lines += [f"--find-links {url}" for url in find_links]
    if closure is None:
        return file_lines(lines + [p.requirement() for p in solution.packages] + list(passthrough))
    for p in closure.packages:
        hashes = sorted({f.sha256 for f in p.files})
        lines.append(p.pin() + " \\")
        lines += [f"    --hash=sha256:{h}" + (" \\" if i < len(hashes) - 1 else "") for i, h in enumerate(hashes)]
    return file_lines(lines)  # a value that would add a line is refused


def uv_project(solution: Solution, targets: list[Target], passthrough: Sequence[str] = (),
               local: Sequence[str] = (), find_links: Sequence[str] = ()) -> str:
    """The uv project configuration: dependencies, [[tool.uv.index]], [tool.uv.sources] and, for the pages of
    wheels passed through pinned, [tool.uv] find-links; every value written by the one TOML writer
    (:mod:`cudamatrix.lock.toml`)."""
    lines = ["# " + h for h in lock_header(solution, targets, local)]  # TOML comments are the same "# " lines
    lines.append("# merge into pyproject.toml")
    deps = []
    for p in solution.packages:
        base = p.version.split("+")[0]  # the explicit index serves the local build for this version
        extras = f"[{','.join(p.extras)}]" if p.extras else ""
        deps.append(f"{p.name}{extras}=={base}")
    deps += list(passthrough)
    lines.append("[project]")
    lines.append("dependencies = [")
    lines += [f"    {toml.string(d)}," for d in deps]
    lines.append("]")
    names: dict[str, str] = {}
    for p in solution.packages:
        if p.index_url and p.index_url not in names:
            names[p.index_url] = "pytorch-" + p.index_url.rstrip("/").rsplit("/", 1)[-1]
    for url, name in names.items():
        lines += ["", "[[tool.uv.index]]", toml.assign("name", name), toml.assign("url", url), "explicit = true"]
    if names:
        lines += ["", "[tool.uv.sources]"]
        for p in solution.packages:
            if p.index_url:
                lines.append(f"{toml.key(p.name)} = [{toml.inline_table({'index': names[p.index_url]})}]")
    if find_links:
        lines += ["", "[tool.uv]", f"find-links = {toml.array(find_links)}"]
    return file_lines(lines)  # a value that would add a line is refused


def passed_through(passthrough: list[Requirement], pip_args: list[str], matrix: Matrix) -> tuple[list[str], list[str]]:
    """What a lock writes for the requirements passed through: each as the solution resolved it where it did (a
    package of find-links pages pinned to its page's wheel, flash-attn's release file by URL: the solution's pip
    argument of the same name), the others as given; and the pages the lock names as ``--find-links``."""
    names = {w.name for w in findlinks.requested(passthrough, matrix)}
    solved: dict[str, str] = {}
    for arg in pip_args:
        if arg.startswith("-"):
            continue
        with suppress(InvalidRequirement):
            parsed = Requirement(arg)
            if parsed.url or any(s.operator == "==" for s in parsed.specifier):  # a pin or a file, nothing else
                solved.setdefault(canonical(parsed.name), arg)
    out = [str(r) if str(r) in pip_args else solved.get(canonical(r.name), str(r)) for r in passthrough]
    return out, findlinks.pages_in(pip_args) if names else []
