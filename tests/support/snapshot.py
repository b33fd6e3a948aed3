"""The frozen matrix snapshot the scenario and solver tests run against.

``tests/data/matrix_snapshot/`` is a copy of ``data/*.json`` taken when the scenarios' expectations were
written (its ``meta.json`` names the data version). Refreshing ``data/`` does not change what these tests
expect; to move them to newer data, copy the files again and re-derive each expectation from its source.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from cudamatrix.matrix.data import Matrix, load_matrix_from

SNAPSHOT = Path(__file__).resolve().parent.parent / "data" / "matrix_snapshot"


@lru_cache(maxsize=1)
def snapshot_matrix() -> Matrix:
    """The snapshot, validated with pydantic (the path user-supplied data takes)."""
    return load_matrix_from(SNAPSHOT)


# data/ as it was when issue #23's solver half was written (schema 2: per-platform facts, Jetson drivers, cuDNN's
# GPU floors, the rows that issue added): the scenarios that need those facts name it ("snapshot": "issue23")
SNAPSHOTS = {"issue23": Path(__file__).resolve().parent.parent / "data" / "matrix_snapshot_23"}


@lru_cache(maxsize=4)
def named_snapshot(name: str) -> Matrix:
    """A named frozen copy of data/ (:data:`SNAPSHOTS`), validated with pydantic."""
    return load_matrix_from(SNAPSHOTS[name])
