"""`cudamatrix matrix show|validate|update`."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from cudamatrix import render
from cudamatrix.cli.app import app
from cudamatrix.cli.common import Done, finish, guarded
from cudamatrix.errors import UsageError
from cudamatrix.matrix import overlay
from cudamatrix.matrix.data import default_data_dir, load_matrix_from
from cudamatrix.matrix.index import IndexClient, IndexReadError, pip_default_index, redact
from cudamatrix.matrix.load import load_matrix
from cudamatrix.matrix.query import lint, rows_for
from cudamatrix.names import FAMILY_NAMES
from cudamatrix.schema import http_allowed, to_dict

matrix_app = typer.Typer(help="Show, validate or update the compatibility matrix.", no_args_is_help=True)
app.add_typer(matrix_app, name="matrix")

FAMILIES = (*FAMILY_NAMES, "cuda", "cudnn", "gpu")


@matrix_app.command("show")
@guarded("matrix show")
def show(
    family: Optional[str] = typer.Argument(None, help="torch | tensorflow | jax | cuda | cudnn | gpu", metavar="FAMILY"),
    key: Optional[str] = typer.Argument(None, help="A version (2.5.1, 12.4) or a GPU name / alias / sm_XX.", metavar="KEY"),
    as_json: bool = typer.Option(False, "--json", help="Print the JSON envelope."),
    data_dir: Optional[Path] = typer.Option(None, "--data", help="Read the matrix from this folder.", metavar="DIR"),
) -> None:
    """Print matrix rows as tables, or as JSON (data.rows)."""
    matrix = load_matrix(str(data_dir) if data_dir else None)
    extra = overlay.info(matrix)
    over = extra.as_dict() if extra else None
    if family is None:  # the families and their row counts
        data = {"meta": to_dict(matrix.meta), "families": list(FAMILIES),
                "counts": {f: len(rows_for(matrix, f, None)) for f in FAMILIES}, "overlay": over}
        finish("matrix show", 0, data, as_json, lambda: _human_summary(data))
    if family not in FAMILIES:
        raise UsageError(f"unknown matrix family {family!r}", hint=f"choose one of: {', '.join(FAMILIES)}")
    rows = rows_for(matrix, family, key)
    added = set((extra.releases.get(family) or []) if extra and not extra.ignored else [])
    for row in rows:  # rows the user's overlay added carry its date
        if extra is not None and row.get("version") in added:  # added is empty without an overlay
            row["overlay"] = extra.created
    data = {"family": family, "key": key, "matrix_version": matrix.meta.data_version, "rows": rows,
            "overlay": over}
    finish("matrix show", 0, data, as_json, lambda: _human_rows(family, rows, over))


@matrix_app.command("validate")
@guarded("matrix validate")
def validate(
    path: Optional[Path] = typer.Argument(None, help="A data folder (default: the shipped matrix).", metavar="PATH"),
    as_json: bool = typer.Option(False, "--json", help="Print the JSON envelope."),
    allow_http: bool = typer.Option(False, "--allow-http", help="Accept plain-http index URLs (trusted networks)."),
) -> None:
    """Validate the shipped data or the data folder at PATH; exit 2 with precise messages on bad data."""
    folder = path or default_data_dir()
    with http_allowed(allow_http):
        matrix = load_matrix_from(folder)
    problems = lint(matrix)
    if problems:
        data: dict[str, Any] = {"path": str(folder), "problems": problems}
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


@matrix_app.command("update")
@guarded("matrix update")
def update(
    mirror: Optional[str] = typer.Option(None, "--mirror", help="Read this index (https) instead of pip's.", metavar="URL"),
    as_json: bool = typer.Option(False, "--json", help="Print the JSON envelope."),
) -> None:
    """Read releases newer than the shipped matrix from the index pip uses; keep them as your overlay."""
    shipped = load_matrix_from(default_data_dir())
    url = mirror or pip_default_index()
    client = IndexClient(url, https_only=True)
    try:
        log = (lambda m: None) if as_json else (lambda m: render.console(stderr=True).print(m, markup=False))
        doc = overlay.build(client, shipped, redact(url), log)
    except IndexReadError as exc:  # a refused redirect keeps its own hint (https only, on every hop)
        exc.hint = (f"{exc.hint or 'offline or the index failed'}: the shipped matrix {shipped.meta.data_version} "
                    "(and any earlier overlay) stays in use")
        raise
    path = overlay.write(doc, shipped)
    added = {f: [r["version"] for r in rows] for f, rows in doc["families"].items()}
    data = {"path": str(path), "index": doc["index"], "created": doc["created"],
            "matrix_version": shipped.meta.data_version, "added": added}
    finish("matrix update", 0, data, as_json, lambda: render.console().print(
        _update_line(added, shipped.meta.data_version, doc["index"], path), markup=False))


def _update_line(added: dict[str, list[str]], shipped: str, index: str, path) -> str:
    """What `matrix update` added, in words ("no release ..." rather than "0 release(s) ...: none")."""
    total = sum(len(v) for v in added.values())
    if total == 0:
        return f"{index} has no release newer than the shipped matrix {shipped}\nwritten to {path} (no rows)"
    found = "; ".join(f"{f} {', '.join(v)}" for f, v in added.items() if v)
    return (f"{total} release{'s' if total > 1 else ''} newer than the shipped matrix {shipped} from {index}: {found}"
            f"\nwritten to {path}")


def _overlay_line(over: dict | None) -> str:
    if over is None:
        return "shipped data only (no overlay; `cudamatrix matrix update` reads newer releases from your index)"
    if over.get("ignored"):
        return f"overlay {over['path']} ignored: {over['ignored']}"
    added = ", ".join(f"{f} {len(v)}" for f, v in over["releases"].items() if v) or "no releases"
    return f"overlay of {over['created']} from {over['index']}: {added} (rows marked 'overlay')"


def _human_summary(data: dict) -> None:
    c = render.console()
    meta = data["meta"]
    c.print(f"cudamatrix matrix {meta['data_version']} ({meta['date']}, schema {meta['schema_version']})")
    c.print(_overlay_line(data.get("overlay")))
    c.print(render.table(None, ["family", "rows"], [[k, v] for k, v in data["counts"].items()]))


def _human_rows(family: str, rows: list[dict], over: dict | None = None) -> None:
    c = render.console()
    if over is not None:
        c.print(_overlay_line(over))
    if not rows:
        c.print(render.escape(f"no {family} rows match"))
        return
    if family in FAMILY_NAMES:
        for row in rows:
            title = f"{row['name']} {row['version']}  python {', '.join(row['python'])}"
            if row.get("overlay"):
                title += f"  (overlay {row['overlay']})"
            if row.get("companions"):
                title += "  " + " ".join(f"{k} {v}" for k, v in row["companions"].items())
            c.print(render.table(render.escape(title), ["variant", "cuda", "cudnn", "archs (SASS)", "ptx", "pypi", "index"], [
                [v["name"], v["cuda"], v["cudnn"], " ".join(v["archs"]), " ".join(v["ptx"]),
                 "yes" if v["pypi_default"] else "", v["index_url"] or "PyPI"] for v in row["variants"]],
                optional=("pypi", "ptx"), paths=("index",)))
            for line in _platform_lines(row):
                c.print(render.escape(line))
        return
    cols = {
        "cuda": ["version", "linux_min_driver", "windows_min_driver"],
        "cudnn": ["version", "cuda_versions", "compute_capabilities", "soname"],
        "gpu": ["name", "compute_capability", "architecture", "last_driver_branch", "aliases"],
    }[family]
    c.print(render.table(None, cols, [[_cell(r.get(k)) for k in cols] for r in rows]))


def _platform_lines(row: dict) -> list[str]:
    """One line per variant and platform whose wheels differ from the variant's own fields (per_platform)."""
    out = []
    for v in row["variants"]:
        for platform, f in (v.get("per_platform") or {}).items():
            facts = ["the default-index wheel"] if f.get("pypi_default") else []
            facts += [f"{k} {' '.join(f[k]) or 'none'}" for k in ("archs", "ptx", "python") if f.get(k) is not None]
            facts += [f"cuda {f['cuda']}"] if f.get("cuda") else []
            out.append(f"  {v['name']} on {platform}: {'; '.join(facts)}")
    return out


def _cell(value) -> str:
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return "" if value is None else str(value)
