"""Stage 2, solve: Targets (:mod:`.target`), the hard rules (:mod:`.rules`), the pure solver (:mod:`.solver`:
request parsing in :mod:`.request`, the search in :mod:`.search`, assembly in :mod:`.assemble`), the
no-solution explanation (:mod:`.causes`), index layout (:mod:`.indexes`), lock files (:mod:`.lockfile`) and the
requirement-file gate (:mod:`.checks`). No I/O besides reading the files it is handed."""
from __future__ import annotations

from cudamatrix._callable import callable_module
from cudamatrix.solve.solver import parse_request, solve

__all__ = ["parse_request", "solve"]

callable_module(__name__, "solve")
