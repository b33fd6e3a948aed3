"""The typer application. Command modules register on it; the hot commands' bodies live in typer-free
modules (see :mod:`cudamatrix.cli.fast`)."""
from __future__ import annotations

from typing import Any

import typer

from cudamatrix.cli.fast import _version as show

app = typer.Typer(
    name="cudamatrix",
    help="Make GPU deep-learning environments consistent: detect, solve, fix, verify.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        show()
        raise typer.Exit(0)


@app.callback()
def _root(version: bool = typer.Option(False, "--version", "-V", is_eager=True, callback=_version,
                                       help="Print the package version and the matrix data version it ships.")
          ) -> None:
    """Make GPU deep-learning environments consistent: detect, solve, fix, verify."""


def _no_type(ctx: Any) -> None:
    return None


def plain_help(command: Any) -> Any:
    """``command`` (typer's click command tree) with plain metavars in its help: a flag shows none, a value its
    declared metavar (VERSION, PATH...), an argument its name alone; typer's own (``<bool>``, ``<list[str]>``)
    name Python types, not what to type."""
    original = command.get_help_option

    def help_option(ctx: Any) -> Any:
        option = original(ctx)
        if option is not None and option.metavar is None:
            option.metavar = ""
        return option

    command.get_help_option = help_option
    for param in getattr(command, "params", []):
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
        elif param.param_type_name == "argument":
            param.display_type_rich = _no_type  # this instance only: the name (FAMILY, REQUIREMENT...) says it
    for sub in getattr(command, "commands", {}).values():
        plain_help(sub)
    return command
