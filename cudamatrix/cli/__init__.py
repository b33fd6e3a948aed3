"""The command line. A command parses options, calls one or two stages, renders, and picks an exit code.
Only :class:`cudamatrix.errors.CudamatrixError` is caught (in :mod:`cudamatrix.cli.common`); anything else
is a bug and keeps its traceback. This package imports no typer: the hot commands start without it."""
from __future__ import annotations

import sys

from cudamatrix.cli.common import Done


def _register():
    from cudamatrix.cli import commands, matrix_cmd  # noqa: F401  (each adds its commands)
    from cudamatrix.cli.app import app

    return app


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point. Returns the exit code (documented table in the README)."""
    from cudamatrix.cli.fast import fast_main

    args = list(sys.argv[1:] if argv is None else argv)
    try:
        code = fast_main(args)
        if code is not None:
            return code
        app = _register()
        try:
            app(args=args, prog_name="cudamatrix", standalone_mode=True)
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except Done as done:
        return done.code
    return 0


def run() -> None:
    sys.exit(main())
