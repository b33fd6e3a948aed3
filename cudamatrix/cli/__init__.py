"""The command line: a typer app; each command module parses options, calls one or two stages,
renders, and picks an exit code. Only :class:`cudamatrix.errors.CudamatrixError` is caught."""
from __future__ import annotations

import sys

import typer

app = typer.Typer(
    name="cudamatrix",
    help="Make GPU deep-learning environments consistent: detect, solve, fix, verify.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _register() -> None:
    # each module adds its commands to `app`
    from . import matrix_cmd  # noqa: F401
    from . import detect_cmd  # noqa: F401
    from . import solve_cmd  # noqa: F401
    from . import fix_cmd  # noqa: F401


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point. Returns the exit code (documented table in the README)."""
    _register()
    try:
        app(args=argv, prog_name="cudamatrix", standalone_mode=True)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
        return code
    return 0


def run() -> None:
    sys.exit(main())
