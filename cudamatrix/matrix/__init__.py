"""Stage 0, the Matrix: the compatibility data in ``data/``, loaded (:mod:`.data`) and queried (:mod:`.query`)."""
from __future__ import annotations

from cudamatrix.matrix.data import Matrix, default_data_dir, load_matrix_from
from cudamatrix.matrix.load import load_matrix

__all__ = ["Matrix", "default_data_dir", "load_matrix", "load_matrix_from"]
