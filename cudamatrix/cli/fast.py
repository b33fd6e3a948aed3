"""A fast path for plain invocations: typer's option processing imports pydantic (~80-100 ms here), which
would double the cost of `detect`, `doctor`, `fix` (at the top of every notebook) and `solve`.

The options are declared once, in :mod:`cudamatrix.cli.options`, which the typer declarations read too.
An invocation made only of those options is parsed here and calls the very same command function with the
same values typer would pass (``tests/cli/test_options.py`` checks it for every option); anything else
(--help, an unknown option, a missing or malformed value) returns None and goes through typer, which gives
the usual help and usage errors."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cudamatrix.cli.options import COMMANDS, Command
from cudamatrix.errors import DataError
from cudamatrix.matrix import shipped

if TYPE_CHECKING:
    from pathlib import Path


def _path(value: str) -> Path:
    from pathlib import Path  # on first use: pathlib (with urllib.parse, ipaddress) costs a few ms at start-up

    return Path(value)


class _Unparsed(Exception):
    """The invocation is not a plain one: typer parses it."""


def parse(command: Command, argv: list[str]) -> dict[str, Any] | None:
    """The keyword arguments of ``command``'s function for ``argv`` (defaults filled in); None: leave it
    to typer."""
    spec = {flag: opt for opt in command.options for flag in opt.flags}
    given: dict[str, Any] = {}
    i = 0
    try:
        while i < len(argv):
            i = _take(command, spec, argv, i, given)
    except _Unparsed:
        return None
    out: dict[str, Any] = {}
    if command.positional is not None:
        out[command.positional.param] = given.get(command.positional.param)
    for opt in command.options:
        default = opt.default  # a fresh list for a list option: a command may append to it
        out[opt.param] = given[opt.param] if opt.param in given else (list(default) if isinstance(default, list) else default)
    return out


def _take(command: Command, spec: dict, argv: list[str], i: int, given: dict[str, Any]) -> int:
    """Read the argument at ``i`` (and its value) into ``given``; the index of the next one. Raises _Unparsed."""
    arg = argv[i]
    if not arg.startswith("-") or arg == "-":
        if command.positional is None:
            raise _Unparsed
        given.setdefault(command.positional.param, []).append(arg)
        return i + 1
    flag, eq, inline = arg.partition("=")
    opt = spec.get(flag)
    if opt is None or (eq and not flag.startswith("--")):
        raise _Unparsed  # "-o=x" means the value "=x" to click: leave such spellings to typer
    if opt.kind == "flag":
        if eq:
            raise _Unparsed
        given[opt.param] = True
        return i + 1
    if eq:
        value = inline
    elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
        i += 1
        value = argv[i]
    else:
        raise _Unparsed
    _store(opt, value, given)
    return i + 1


def _store(opt, value: str, given: dict[str, Any]) -> None:
    """An option's value, as typer converts it for the option's kind."""
    if opt.kind == "value":
        given[opt.param] = value
    elif opt.kind == "float":
        try:
            given[opt.param] = float(value)
        except ValueError:
            raise _Unparsed from None
    elif opt.kind == "path":
        given[opt.param] = _path(value)
    else:
        given.setdefault(opt.param, []).append(_path(value) if opt.kind == "paths" else value)


def fast_main(argv: list[str]) -> int | None:
    """Run a plain invocation without typer's parsing; None when typer must handle ``argv``.

    The command ends by raising :class:`cudamatrix.cli.common.Done`, which :func:`cudamatrix.cli.main`
    turns into the exit code."""
    if argv in (["--version"], ["-V"]):
        return _version()
    if not argv or argv[0] not in COMMANDS:
        return None
    command = COMMANDS[argv[0]]
    given = parse(command, argv[1:])
    if given is None:
        return None
    import importlib

    func = getattr(importlib.import_module(f"{__package__}.{command.module}"), command.function)
    func(**given)
    return 0


def _version() -> int:
    """``cudamatrix --version``: the package version and the matrix data version it ships."""
    import sys
    from importlib import metadata

    try:
        version = metadata.version("cudamatrix")
    except metadata.PackageNotFoundError:
        version = "unknown (not installed)"
    try:
        meta = shipped.rows("meta")
        data = f"matrix {meta.get('data_version')} (schema {meta.get('schema_version')})"
    except DataError:  # missing, unreadable or not JSON
        data = "matrix data not found"
    sys.stdout.write(f"cudamatrix {version}, {data}\n")
    return 0
