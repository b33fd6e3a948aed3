"""`cudamatrix matrix show|validate`."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from cudamatrix import render
from cudamatrix.errors import UsageError
from cudamatrix.cli.app import app
from cudamatrix.cli.common import Done, finish, guarded

matrix_app = typer.Typer(help="Show or validate the compatibility matrix.", no_args_is_help=True)
app.add_typer(matrix_app, name="matrix")

FAMILIES = ("torch", "tensorflow", "jax", "cuda", "cudnn", "gpu")


@matrix_app.command("show")
@guarded("matrix show")
def show(
    family: Optional[str] = typer.Argument(None, help="torch | tensorflow | jax | cuda | cudnn | gpu"),
    key: Optional[str] = typer.Argument(None, help="A version (2.5.1, 12.4) or a GPU name / alias / sm_XX."),
    as_json: bool = typer.Option(False, "--json", help="Print the JSON envelope."),
    data_dir: Optional[Path] = typer.Option(None, "--data", help="Read the matrix from this folder."),
) -> None:
    """Print matrix rows as tables, or as JSON (data.rows)."""
    from cudamatrix.matrix.data import load_matrix
    from cudamatrix.matrix.query import rows_for

    matrix = load_matrix(str(data_dir) if data_dir else None)
    if family is None:
        data = {"meta": matrix.meta.model_dump(mode="json"),
                "counts": {f: len(rows_for(matrix, f, None)) for f in FAMILIES}}
        finish("matrix show", 0, data, as_json, lambda: _human_summary(data))
    if family not in FAMILIES:
        raise UsageError(f"unknown matrix family {family!r}", hint=f"choose one of: {', '.join(FAMILIES)}")
    rows = rows_for(matrix, family, key)
    data = {"family": family, "key": key, "matrix_version": matrix.meta.data_version, "rows": rows}
    finish("matrix show", 0, data, as_json, lambda: _human_rows(family, rows))


@matrix_app.command("validate")
@guarded("matrix validate")
def validate(
    path: Optional[Path] = typer.Argument(None, help="A data folder (default: the shipped matrix)."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Validate the shipped data or the data folder at PATH; exit 2 with precise messages on bad data."""
    from cudamatrix.matrix.data import default_data_dir, load_matrix_from
    from cudamatrix.matrix.query import lint, rows_for

    folder = path or default_data_dir()
    matrix = load_matrix_from(folder)
    problems = lint(matrix)
    if problems:
        data = {"path": str(folder), "problems": problems}
        if as_json:
            render.print_json("matrix validate", 2, data, [{"type": "DataError", "message": p} for p in problems])
            raise Done(2)
        for p in problems:
            render.error_text(p)
        raise Done(2)
    counts = {f: len(rows_for(matrix, f, None)) for f in FAMILIES}
    data = {"path": str(folder), "matrix_version": matrix.meta.data_version, "counts": counts, "problems": []}
    finish("matrix validate", 0, data, as_json,
           lambda: render.console().print(render.escape(f"matrix {matrix.meta.data_version} at {folder}: valid "
                                          + ", ".join(f"{n} {f}" for f, n in counts.items()))))


def _human_summary(data: dict) -> None:
    c = render.console()
    meta = data["meta"]
    c.print(f"cudamatrix matrix {meta['data_version']} ({meta['date']}, schema {meta['schema_version']})")
    c.print(render.table(None, ["family", "rows"], [[k, v] for k, v in data["counts"].items()]))


def _human_rows(family: str, rows: list[dict]) -> None:
    c = render.console()
    if not rows:
        c.print(render.escape(f"no {family} rows match"))
        return
    if family in ("torch", "tensorflow", "jax"):
        for row in rows:
            title = f"{row['name']} {row['version']}  python {', '.join(row['python'])}"
            if row.get("companions"):
                title += "  " + " ".join(f"{k} {v}" for k, v in row["companions"].items())
            c.print(render.table(render.escape(title), ["variant", "cuda", "cudnn", "archs (SASS)", "ptx", "pypi", "index"], [
                [v["name"], v["cuda"], v["cudnn"], " ".join(v["archs"]), " ".join(v["ptx"]),
                 "yes" if v["pypi_default"] else "", v["index_url"] or "PyPI"] for v in row["variants"]]))
        return
    cols = {
        "cuda": ["version", "linux_min_driver", "windows_min_driver"],
        "cudnn": ["version", "cuda_versions", "compute_capabilities", "soname"],
        "gpu": ["name", "compute_capability", "architecture", "last_driver_branch", "aliases"],
    }[family]
    c.print(render.table(None, cols, [[_cell(r.get(k)) for k in cols] for r in rows]))


def _cell(value) -> str:
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return "" if value is None else str(value)
