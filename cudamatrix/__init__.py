"""cudamatrix: make GPU deep-learning environments consistent.

Public API (each a stage of the pipeline; heavy work is imported lazily)::

    detect() -> Environment
    solve(targets, request, matrix, *, installed=None) -> Solution
    fix() -> result of detect, solve, apply and verify (for notebooks)
"""
from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "detect", "solve", "fix", "load_matrix"]


def __getattr__(name: str):
    if name == "detect":
        from cudamatrix.detect import detect

        return detect
    if name == "solve":
        from cudamatrix.solve.solver import solve

        return solve
    if name == "fix":
        from cudamatrix.fix import fix

        return fix
    if name == "load_matrix":
        from cudamatrix.matrix.load import load_matrix

        return load_matrix
    raise AttributeError(name)
