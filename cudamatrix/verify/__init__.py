"""Stage 4, verify: a convolution and a matmul on the GPU in a child interpreter (:mod:`.child`), compared with
the CPU (:mod:`.run`); :mod:`.memory` remembers a proved environment."""
from __future__ import annotations

from cudamatrix.verify.run import exit_code, verify

__all__ = ["exit_code", "verify"]
