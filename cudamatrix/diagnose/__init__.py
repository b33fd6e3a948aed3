"""Stage 2b, diagnose: an Environment and the Matrix in, Findings out (``cudamatrix doctor``)."""
from __future__ import annotations

from cudamatrix.diagnose.findings import diagnose, summary_exit

__all__ = ["diagnose", "summary_exit"]
