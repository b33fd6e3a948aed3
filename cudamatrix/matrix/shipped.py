"""The matrix files as JSON, before any record is built: the shipped data's folder, a file read (bounded) and parsed,
and a row's sources as one line of text (:mod:`.data` builds its records from what is read here).

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


def present(path: str | os.PathLike) -> Any:
    """``path``, or a DataError when the data folder lacks it."""
    if not os.path.exists(path) and not os.path.islink(path):
        name, folder = os.path.basename(path), os.path.dirname(path)
        raise DataError(f"{name}: missing from the matrix data folder {folder}")
    return path


def read(path: str | os.PathLike) -> bytes:
    """A matrix file's bytes, bounded; a FIFO or device in the data folder is refused before it is read (it would
    hang). Raises DataError."""
    present(path)
    return read_bytes(path, limit=16 * 1024 * 1024, what="matrix file", error=DataError)


def parse(name: str, raw: bytes) -> Any:
    """A matrix file's JSON; a DataError naming ``name`` and where it is not JSON."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise DataError(f"{name}: not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except UnicodeDecodeError:
        raise DataError(f"{name}: not UTF-8 text") from None
    except RecursionError:
        raise DataError(f"{name}: nested too deeply") from None
    except ValueError as exc:  # an integer past Python's digit limit
        raise DataError(f"{name}: {exc}") from None


def rows(name: str) -> Any:
    """The parsed JSON of the shipped file ``name`` (``"gpus"``: gpus.json). Raises DataError when it is missing or
    is not JSON (a broken installation)."""
    return parse(f"{name}.json", read(os.path.join(data_dir(), f"{name}.json")))


def line(rec: dict[str, Any]) -> str:
    """One source record as text: ``URL (what it states)``, or ``artifact: what was read`` without a URL."""
    url, states = rec.get("url"), rec.get("states") or ""
    if url:
        return f"{url} ({states})" if states else url
    return f"artifact: {states}" if rec.get("kind") == "artifact" else states


def source_line(records: list[dict[str, Any]]) -> str:
    """A row's sources as the one line a row's ``source`` reads as (:class:`~.sources.SourceText`)."""
    return "; ".join(line(rec) for rec in records)
