"""All human and JSON output. Library code never prints; commands hand values to this module.

``--json`` prints exactly one envelope object on stdout:
``{"schema_version", "command", "status", "exit_code", "data", "errors"}``.
"""
from __future__ import annotations

import json
import sys
from typing import Any

JSON_SCHEMA_VERSION = 1

STATUS_BY_EXIT = {
    0: "ok",
    1: "problems",
    2: "usage_error",
    3: "no_solution",
    4: "install_failed",
    5: "verify_failed",
    6: "verify_not_possible",
}


def _plain(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def envelope(command: str, exit_code: int, data: Any = None, errors: list[dict] | None = None) -> dict:
    """The JSON envelope of one command's result."""
    return {
        "schema_version": JSON_SCHEMA_VERSION,
        "command": command,
        "status": STATUS_BY_EXIT.get(int(exit_code), "error"),
        "exit_code": int(exit_code),
        "data": _plain(data) if data is not None else {},
        "errors": errors or [],
    }


def print_json(command: str, exit_code: int, data: Any = None, errors: list[dict] | None = None) -> None:
    sys.stdout.write(json.dumps(envelope(command, exit_code, data, errors), indent=2) + "\n")
    sys.stdout.flush()


def console(stderr: bool = False):
    """A rich Console (imported lazily: rich costs start-up time)."""
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=False)


def error_text(message: str, hint: str | None = None) -> None:
    """Print an error for people on stderr."""
    c = console(stderr=True)
    c.print(f"[bold red]error:[/] {message}", markup=True)
    if hint:
        c.print(f"[dim]hint:[/] {hint}", markup=True)


def table(title: str | None, columns: list[str], rows: list[list[Any]]):
    from rich.table import Table

    t = Table(title=title, show_lines=False, header_style="bold")
    for col in columns:
        t.add_column(col, overflow="fold")
    for row in rows:
        t.add_row(*["" if v is None else str(v) for v in row])
    return t
