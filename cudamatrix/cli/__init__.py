"""The command line. A command parses options, calls one or two stages, renders, and picks an exit code.
Only :class:`cudamatrix.errors.CudamatrixError` is caught (in :mod:`cudamatrix.cli.common`); anything else
is a bug and keeps its traceback. This package imports no typer: the hot commands start without it."""
from __future__ import annotations

import io
import sys
from types import ModuleType
from typing import cast

from cudamatrix import render
from cudamatrix.cli.common import Done
from cudamatrix.cli.fast import fast_main
from cudamatrix.errors import CudamatrixError, UsageError


def _app():
    """The typer app's module, every command registered on it."""
    # typer and the command declarations only when the typer-free parser (cli/fast.py, 19 ms to import) hands a
    # command over: importing cli/commands.py is 92 ms, paid by --help and the rare commands alone
    # lazy: `--version` would load 241 ms more, `detect --from` 45 ms (python -X importtime; the hoisting's budget per command is 3% of its run): cudamatrix.pastes.fields, cudamatrix.pastes.messages, cudamatrix.fix, typer._coercion
    from cudamatrix.cli import app, commands, matrix_cmd  # noqa: F401  (each adds its commands)

    return app


def _register():
    """The typer app, every command registered."""
    return _app().app


def _command():
    """The click command tree of the typer app, every command registered, with plain help metavars."""
    import typer.main

    module = _app()
    return module.plain_help(typer.main.get_command(module.app))


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point. Returns the exit code (documented table: docs/reference.md).

    With ``--json`` anywhere in the arguments, a usage error found by the option parser is one JSON
    envelope too (status ``usage_error``, exit 2), not typer's usage box."""

    args = list(sys.argv[1:] if argv is None else argv)
    _tolerant_output()
    as_json = "--json" in (args[:args.index("--")] if "--" in args else args)  # after "--" it is an argument
    try:
        code = fast_main(args)
        if code is not None:
            return code
        command = _command()
        missing = _missing_value(command, args) if as_json else None
        if missing is not None:
            return _usage_envelope(args, missing)
        try:
            command.main(args=args, prog_name="cudamatrix", standalone_mode=not as_json)
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
        except Exception as exc:  # only reached with --json (standalone_mode off)
            return _usage_envelope(args, exc)
    except Done as done:
        return done.code
    return 0


def _missing_value(command, args: list[str]) -> Exception | None:
    """With ``--json``, an option that takes a value followed by ``--json`` itself (``detect --from --json``):
    the parser would take "--json" for the file name and answer in plain text; it is the value that is missing.
    Returns the usage error to report, or None."""
    words = args[:args.index("--")] if "--" in args else args
    after = {w for i, w in enumerate(words[:-1]) if w.startswith("-") and words[i + 1] == "--json"}
    if not after:
        return None
    for word in words:  # the command path: matrix show, fleet gather
        sub = getattr(command, "commands", {}).get(word)
        if sub is None:
            break
        command = sub
    for param in getattr(command, "params", []):
        if getattr(param, "param_type_name", "") == "option" and not getattr(param, "is_flag", False) \
                and not getattr(param, "count", False):
            taken = [o for o in param.opts + param.secondary_opts if o in after]
            if taken:
                return UsageError(f"option {taken[0]} needs a value (the next word is --json, an option)")
    return None


def _usage_envelope(args: list[str], exc: Exception) -> int:
    clickx: ModuleType
    try:  # recent typer vendors click as typer._click; older ones depend on click
        from typer._click import exceptions as clickx
    except ImportError:
        from click import exceptions as clickx

    exit_code = getattr(exc, "exit_code", None)
    if type(exc).__name__ == "Exit" and isinstance(exit_code, int):
        return int(exit_code)
    if type(exc).__name__ == "Abort":
        return 1
    if not isinstance(exc, (clickx.ClickException, CudamatrixError)):
        raise exc
    words = [a for a in args[:2] if not a.startswith("-")]
    command = " ".join(words[:2]) if words[:1] in (["matrix"], ["fleet"]) else (words[0] if words else "cudamatrix")
    message = exc.message if isinstance(exc, CudamatrixError) else exc.format_message()
    error = {"type": "UsageError", "message": message}
    render.print_json(command, 2, {}, [error])
    return 2


def _tolerant_output() -> None:
    """Text that cannot be encoded for this terminal (non-ASCII under LC_ALL=C, undecodable bytes in
    arguments) is shown escaped instead of ending the command with UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        try:
            # a replaced stream may lack reconfigure: the AttributeError below covers it
            cast(io.TextIOWrapper, stream).reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError):
            pass


# the commands that detect this machine, and the options under which they do not (or may not)
_DETECTING = frozenset({"detect", "doctor", "fix", "env", "solve", "check"})
_NOT_LIVE = frozenset({"--from", "--env", "--help", "-h", "--undo", "--rollback", "--resume"})
# solve and check with target flags describe a machine the command is not on: nothing is detected (targets.resolve)
_TARGET_FLAGS = frozenset({"--driver", "--gpu", "--python", "--platform", "--cuda-toolkit"})


def _options(argv: list[str]) -> set[str]:
    """The options named in ``argv``, without their ``=value``."""
    return {a.partition("=")[0] for a in argv if a.startswith("-")}


def detects_this_machine(argv: list[str]) -> bool:
    """Does ``argv`` name a command that detects the live machine (no --from, --env, help, undo; for solve and
    check, no target flag)? Decided before anything of the detect stage is imported."""
    if not argv or argv[0] not in _DETECTING:
        return False
    options = _options(argv[1:])
    if argv[0] in ("solve", "check") and options & _TARGET_FLAGS:
        return False
    return not options & _NOT_LIVE


def run() -> None:
    """The console script and ``python -m cudamatrix``: a command that detects this machine forks its loader
    children first (:mod:`cudamatrix.detect.early`), while this process has one thread and little imported."""
    import gc

    # a command is one short process: the cyclic collector runs after 50,000 new container objects, not 700
    # (its generation-0 default). Every command makes fewer or about that many, and the collector's 40-50 passes
    # walked them again, 7-14 ms of solve and check (gc.callbacks, medians); the few cycles wait to the end.
    gc.set_threshold(50_000, *gc.get_threshold()[1:])
    args = sys.argv[1:]
    if detects_this_machine(args):
        # lazy: `--version` would load 22 ms more (python -X importtime; the hoisting's budget per command is 3% of its run): cudamatrix.detect, cudamatrix.models, cudamatrix.detect.libraries
        from cudamatrix.detect.early import start

        start(python_probe="--python" not in _options(args))
    code = main()
    # the interpreter's last collections at exit walk every object the command made and imported: 10-35 ms of each
    # command's run, once its output is written (fix --dry-run 0.85 of the wall time, doctor 0.84, --version 0.87
    # frozen against not, paired runs, medians of 30). Frozen objects are left out of them; the exit is otherwise the
    # usual one (atexit, the streams flushed, threads joined).
    gc.freeze()
    sys.exit(code)
