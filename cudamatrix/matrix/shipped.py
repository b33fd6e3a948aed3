"""The shipped data as JSON, before any record is built: the folder it lies in, one file's rows, and a row's sources
as one line of text.

Standard library only. ``detect --from`` reads the GPU table through here (:mod:`.gpunames`) to name the compute
capability of a pasted GPU: the Matrix (:mod:`.data`, :mod:`.load`) would load pathlib, packaging and the record
classes first (15 ms of a 45 ms run, python -X importtime). The shipped files are this package's own (trusted, as
:func:`~cudamatrix.matrix.data.build_lazily` has them); a user's overlay holds framework releases only, never rows of
the GPU table.
"""
from __future__ import annotations

import json
import os
from typing import Any

from cudamatrix.errors import DataError
from cudamatrix.safe.files import read_bytes


def data_dir() -> str:
    """``cudamatrix/data`` inside an installed wheel, or ``data/`` of a checkout."""
    package = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # cudamatrix/
    packaged = os.path.join(package, "data")
    return packaged if os.path.isdir(packaged) else os.path.join(os.path.dirname(package), "data")


def rows(name: str) -> Any:
    """The parsed JSON of the shipped file ``name`` (``"gpus"``: gpus.json). Raises DataError when it is missing or
    is not JSON (a broken installation)."""
    path = os.path.join(data_dir(), f"{name}.json")
    raw = read_bytes(path, limit=16 * 1024 * 1024, what="matrix file", error=DataError)
    try:
        return json.loads(raw)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError alike
        raise DataError(f"{name}.json: the shipped matrix data is not valid JSON",
                        hint="reinstall cudamatrix") from None


def line(rec: dict[str, Any]) -> str:
    """One source record as text: ``URL (what it states)``, or ``artifact: what was read`` without a URL."""
    url, states = rec.get("url"), rec.get("states") or ""
    if url:
        return f"{url} ({states})" if states else url
    return f"artifact: {states}" if rec.get("kind") == "artifact" else states


def source_line(records: list[dict[str, Any]]) -> str:
    """A row's sources as the one line a row's ``source`` reads as (:class:`~.sources.SourceText`)."""
    return "; ".join(line(rec) for rec in records)
