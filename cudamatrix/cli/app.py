"""The typer application. Command modules register on it; the hot commands' bodies live in typer-free
modules (see :mod:`cudamatrix.cli.fast`)."""
from __future__ import annotations

import typer

app = typer.Typer(
    name="cudamatrix",
    help="Make GPU deep-learning environments consistent: detect, solve, fix, verify.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
