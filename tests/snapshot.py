"""The frozen matrix snapshot the scenario and solver tests run against.

``tests/data/matrix_snapshot/`` is a copy of ``data/*.json`` taken when the scenarios' expectations were
written (its ``meta.json`` names the data version). Refreshing ``data/`` does not change what these tests
expect; to move them to newer data, copy the files again and re-derive each expectation from its source.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from cudamatrix.matrix.data import Matrix, load_matrix_from

SNAPSHOT = Path(__file__).resolve().parent / "data" / "matrix_snapshot"


@lru_cache(maxsize=1)
def snapshot_matrix() -> Matrix:
    """The snapshot, validated with pydantic (the path user-supplied data takes)."""
    return load_matrix_from(SNAPSHOT)
