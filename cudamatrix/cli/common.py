"""Shared pieces of the command modules: the error boundary and JSON/human switching. No typer here:
the hot commands (detect, doctor, fix) run without importing it."""
from __future__ import annotations

import functools
import os
from typing import Any, Callable

from cudamatrix import render
from cudamatrix.errors import CudamatrixError, UsageError


class Done(Exception):
    """A command finished with this exit code (caught by :func:`cudamatrix.cli.main`)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = int(code)


def has_folder(env: list | None) -> bool:
    """Whether an ``--env`` value names a folder of node files (the fleet form of doctor and check). Here, not
    in :mod:`.fleet_cmd`, so that a plain doctor does not import the fleet code to ask."""
    return any(os.path.isdir(p) for p in env or [])


def finish(command: str, exit_code: int, data: Any, as_json: bool, human: Callable[[], None] | None = None) -> None:
    """Print the result (envelope or human text) and end the command with ``exit_code``."""
    if as_json:
        render.print_json(command, exit_code, data)
    elif human is not None:
        human()
    raise Done(int(exit_code))


def guarded(command: str):
    """Decorator: turn a CudamatrixError into its message (or JSON envelope) and exit code.

    The wrapped function must take ``as_json`` as a keyword argument.
    """

    def deco(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            as_json = bool(kwargs.get("as_json"))
            try:
                return fn(*args, **kwargs)
            except CudamatrixError as exc:
                _report(command, exc, as_json)
            except ValueError as exc:
                if not _is_digit_limit(exc):
                    raise  # anything else is a bug and keeps its traceback

                _report(command, UsageError("the input holds a number longer than Python converts (4300 digits)",
                                            hint="check the version numbers in the arguments and files given"),
                        as_json)

        return wrapper

    return deco


def _report(command: str, exc: CudamatrixError, as_json: bool) -> None:
    if as_json:
        render.print_json(command, exc.exit_code, {}, [exc.as_dict()])
    else:
        render.error_text(exc.message, exc.hint)
    raise Done(int(exc.exit_code)) from None


def _is_digit_limit(exc: ValueError) -> bool:
    """Python's int-from-text limit (sys.set_int_max_str_digits): user text such as "torch==" followed by
    5000 nines reaches ``int()`` inside packaging's version parser."""
    return "integer string conversion" in str(exc)


def check_timeout(value: float, option: str = "--timeout") -> float:
    """A timeout must be a finite number of seconds above zero (nan and inf would never end a wait)."""
    import math

    if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0 or value > 86400:
        raise UsageError(f"{option} {value!r} is not a number of seconds", hint=f"e.g. {option} 30 (0 < seconds <= 86400)")
    return float(value)


def python_path(value: str | None) -> str | None:
    """``--python PATH`` as every command reads it: relative to the current folder, made absolute (not resolved:
    a venv's ``bin/python`` is a link whose own folder names the environment), and an executable file.
    Raises UsageError otherwise."""
    import os

    if value is None:
        return None
    if not (value and os.path.isfile(value) and os.access(value, os.X_OK)):
        raise UsageError(f"no Python interpreter at {value}", hint="give the path of an executable, e.g. .venv/bin/python")
    return os.path.abspath(value)


def check_target_flags(driver: str | None, gpus: list[str] | None) -> None:
    """An empty --driver or --gpu is a mistake (an unset shell variable), not "no target given"."""
    if driver is not None and not driver.strip():
        raise UsageError("--driver is empty", hint="give a driver version, e.g. --driver 535.104.05")
    if any(not (g or "").strip() for g in gpus or []):
        raise UsageError("--gpu is empty", hint='give a GPU name, sm_XX or X.Y, e.g. --gpu "Tesla T4"')


def echo(text: str = "", nl: bool = True) -> None:
    """Print plain text (a lock file, export lines) on stdout, :func:`cudamatrix.render.inert`."""
    import sys

    sys.stdout.write(render.inert(text) + ("\n" if nl else ""))
    sys.stdout.flush()
