"""What several commands need before they render: the matrix a command reads, the targets solved for a
request (a name the matrix does not know asked of the indexes first), and the words of "no consistent set".
Shared by the command modules (:mod:`.solve_cmd`, :mod:`.lock_cmd`, :mod:`.fix_cmd`, :mod:`.fleetviews`), so
that none of them imports another."""
from __future__ import annotations

import os
from pathlib import Path

from cudamatrix import render
from cudamatrix.cli.common import Done, check_target_flags
from cudamatrix.cli.targets import resolve
from cudamatrix.errors import Exit, NoSolution, UsageError
from cudamatrix.matrix.load import load_matrix
from cudamatrix.names import canonical
from cudamatrix.solve.indexes import with_mirror
from cudamatrix.solve.known import NameCheck, check_names, matrix_names, per_thread


def matrix_of(data_dir: Path | None):
    return load_matrix(str(data_dir) if data_dir else None)


def solve_request(command: str, as_json: bool, matrix, requirements, env, driver, gpu, python, platform, cuda_toolkit,
                  mirror=None, from_=None):
    """Resolve the targets, parse the request and solve; "no solution" ends the command with exit 3."""
    # lazy: `doctor` would load 56 ms more (python -X importtime; the hoisting's budget per command is 3% of its run): packaging._tokenizer, packaging.specifiers, cudamatrix.solve.assemble
    from cudamatrix.solve.solver import parse_request, solve

    check_target_flags(driver, gpu)
    resolved = resolve(matrix, env_files=env or [], from_files=from_ or [], driver=driver, gpus=gpu or [],
                       python=python, platform=platform, cuda_toolkit=cuda_toolkit)
    request = parse_request(requirements or [], resolved.installed)
    names = check_names_on_index(matrix, [r.name for r in request.passthrough])
    names.raise_unknown()
    try:
        solution = with_mirror(solve(resolved.targets, request, matrix, installed=resolved.installed), mirror)
    except NoSolution as exc:
        no_solution(command, exc, as_json)
    solution.unchecked = names.sentences()
    return resolved, request, solution


def check_names_on_index(matrix, names: list[str], file=None):
    """The names the matrix does not know, asked of the indexes pip would read (a requirements file's own index
    lines over pip's configuration): :class:`cudamatrix.solve.known.NameCheck`. No index I/O when every name
    is known. pip's configuration takes a subprocess (a second or more): the index known without it (the file's
    own ``--index-url``, else ``PIP_INDEX_URL``, which pip puts above its configuration) is asked meanwhile, and
    the other indexes only about the names it does not list."""
    known = matrix_names(matrix, names)  # a request of framework names only reads no pin of the matrix
    todo = [n for n in names if canonical(n) not in known]
    if not todo:
        return NameCheck()
    # the index client and a thread pool only when a name is unknown (measured reason: importing the index client
    # is 20-40 ms of every solve and check whose names the matrix knows; solve of four frameworks 1.15x, check
    # 1.23x before this, paired with farm-bench against c2c50be)
    from concurrent.futures import ThreadPoolExecutor

    client = _index()
    if file is not None and file.no_index:  # pip reads the file's find-links alone: local folders are read here
        return _ask_sources(todo, known, [], list(file.find_links),
                            "the file says --no-index, and its find-links pages on the web are not read")
    first = (file.index_url if file is not None else None) or os.environ.get("PIP_INDEX_URL") or None
    with ThreadPoolExecutor(max_workers=1) as pool:
        sources = pool.submit(client.pip_sources)
        early = _ask_sources(todo, known, [first], [], "") if first else None
        try:
            index, extra, links = sources.result()
        except client.IndexReadError:
            return check_names(todo, known, None, "pip could not be asked which index it uses")
    if file is not None:
        index, extra, links = file.index_url or index, extra + file.extra_index_urls, links + file.find_links
    urls = [index, *extra]
    why = f"no index could say whether it exists (asked: {', '.join(client.redact(u) for u in urls + links)})"
    if early is None:
        return _ask_sources(todo, known, urls, links, why)
    return _then_the_others(early, known, [u for u in urls if u != first], links, why)


def _ask_sources(todo: list[str], known: set[str], urls: list[str], links: list[str], why: str):
    """check_names over these index URLs and find-links, each worker thread with its own clients (connections are
    not shared between threads); an index URL that is not http(s) or a local folder leaves every name unchecked."""
    client = _index()  # a name is unknown (above)

    try:
        client.index_lookup(urls, links)  # refuses such a URL, asking nothing
    except client.IndexReadError as exc:
        return check_names(todo, known, None, f"{exc.message}")
    return check_names(todo, known, per_thread(lambda: client.index_lookup(urls, links)), why)


def _then_the_others(early, known: set[str], urls: list[str], links: list[str], why: str):
    """The first index's answers completed by the other sources: a name it did not list is asked of them; listed
    there, it is settled; unknown there, it stays unknown only if the first index said so too."""
    first_unknown = {name: close for name, close in early.unknown}
    left = [*first_unknown, *early.unchecked]
    if not left or not (urls or links):
        early.why_unchecked = why
        return early
    later = _ask_sources(left, known, urls, links, why)
    out = NameCheck(why_unchecked=later.why_unchecked)
    for name, close in later.unknown:
        if name in first_unknown:
            out.unknown.append((name, close))
        else:
            out.unchecked.append(name)
    out.unchecked += later.unchecked
    return out


def no_solution(command: str, exc: NoSolution, as_json: bool) -> None:
    if as_json:
        render.print_json(command, Exit.NO_SOLUTION, exc.detail, [exc.as_dict()])
        raise Done(Exit.NO_SOLUTION)
    from rich.markup import escape

    c = render.console(stderr=True)
    c.print("[bold red]no consistent set[/]")
    for cause in exc.causes:
        machines = f" [dim](blocks: {escape(', '.join(cause.machines))})[/]" if cause.machines else ""
        c.print(f"  - {escape(cause.message)}{machines}")
    if exc.ways_out:
        c.print("ways out:")
        for way in exc.ways_out:
            c.print(f"  → {escape(way.message)}")
    raise Done(Exit.NO_SOLUTION)


def no_target_flags(**flags) -> None:
    """A fleet folder describes each node: target flags beside it are refused."""
    given = [f"--{k.replace('_', '-')}" for k, v in flags.items() if v]
    if given:
        raise UsageError(f"{', '.join(given)} cannot be combined with a fleet folder",
                         hint="each node's saved environment describes that node")


def _index():
    """The index client (:mod:`cudamatrix.matrix.index`), loaded on the first unknown name only."""
    # lazy: `doctor` would load 31 ms more (python -X importtime; the hoisting's budget per command is 3% of its run): _hashlib, logging, packaging._manylinux
    from cudamatrix.matrix import index

    return index
