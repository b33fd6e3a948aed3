"""The matrix a command reads: the shipped data with the user's overlay on top, or a folder the user names.

Above :mod:`.data` (the files and their rows) and :mod:`.overlay` (what ``matrix update`` kept), which it joins;
neither imports this module.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from cudamatrix.matrix import overlay
from cudamatrix.matrix.data import Matrix, default_data_dir, load_matrix_from


@lru_cache(maxsize=4)
def load_matrix(data_dir: str | None = None) -> Matrix:
    """The shipped matrix (trusted, built without validation) with the user's overlay on top (cached per
    process); or the user's folder ``data_dir``, validated."""
    if data_dir:
        return load_matrix_from(Path(data_dir))
    return overlay.apply(load_matrix_from(default_data_dir(), trusted=True))
