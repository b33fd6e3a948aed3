"""Stage 2, solve: Targets (:mod:`.target`), the hard rules (:mod:`.rules`), the pure solver (:mod:`.solver`:
request parsing in :mod:`.request`, the search in :mod:`.search`, assembly in :mod:`.assemble`), the
no-solution explanation (:mod:`.causes`), index layout (:mod:`.indexes`), lock files (:mod:`.lockfile`) and the
requirement-file gate (:mod:`.checks`). No I/O besides reading the files it is handed.

``solve`` and ``parse_request`` are imported from :mod:`.solver` on first use, so that a stage that needs
only the rules (``doctor``) does not pay for the solver's imports."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cudamatrix._callable import callable_module

if TYPE_CHECKING:
    from cudamatrix.solve.solver import parse_request, solve

__all__ = ["parse_request", "solve"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        # lazy: `doctor` would load 56 ms more (python -X importtime; the hoisting's budget per command is 3% of its run): cudamatrix.matrix.data, packaging._tokenizer, packaging.specifiers
        from cudamatrix.solve import solver

        return getattr(solver, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


callable_module(__name__, "solve")
