"""Shared pieces of the command modules: the error boundary and JSON/human switching."""
from __future__ import annotations

import functools
from typing import Any, Callable

import typer

from .. import render
from ..errors import CudamatrixError


def finish(command: str, exit_code: int, data: Any, as_json: bool, human: Callable[[], None] | None = None) -> None:
    """Print the result (envelope or human text) and exit with ``exit_code``."""
    if as_json:
        render.print_json(command, exit_code, data)
    elif human is not None:
        human()
    raise typer.Exit(int(exit_code))


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
                raise typer.Exit(int(exc.exit_code))

        return wrapper

    return deco
