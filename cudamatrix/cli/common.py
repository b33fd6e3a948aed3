"""Shared pieces of the command modules: the error boundary and JSON/human switching. No typer here:
the hot commands (detect, doctor, fix) run without importing it."""
from __future__ import annotations

import functools
from typing import Any, Callable

from cudamatrix import render
from cudamatrix.errors import CudamatrixError


class Done(Exception):
    """A command finished with this exit code (caught by :func:`cudamatrix.cli.main`)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = int(code)


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
                if as_json:
                    render.print_json(command, exc.exit_code, {}, [exc.as_dict()])
                else:
                    render.error_text(exc.message, exc.hint)
                raise Done(int(exc.exit_code)) from None

        return wrapper

    return deco


def echo(text: str = "", nl: bool = True) -> None:
    import sys

    sys.stdout.write(text + ("\n" if nl else ""))
    sys.stdout.flush()
