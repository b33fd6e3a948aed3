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
    # The public API's names are loaded on first use (PEP 562), each with its own stage only: `import cudamatrix`
    # is 0.3 ms, where importing fix alone is 34 ms; the console script and `python -m cudamatrix` import this
    # package before every command, and a command loads only the stages it runs.
    if name == "detect":
        # lazy: `import cudamatrix` would load 30 ms more (python -X importtime; the hoisting's budget per command is 3% of its run): cudamatrix.detect, cudamatrix.models, cudamatrix.detect.libraries
        from cudamatrix.detect import detect

        return detect
    if name == "solve":
        # lazy: `import cudamatrix` would load 103 ms more (python -X importtime; the hoisting's budget per command is 3% of its run): cudamatrix.matrix.data, packaging._tokenizer, typing
        from cudamatrix.solve.solver import solve

        return solve
    if name == "fix":
        # lazy: `import cudamatrix` would load 34 ms more (python -X importtime; the hoisting's budget per command is 3% of its run): cudamatrix.fix, cudamatrix.install, cudamatrix.verify
        from cudamatrix.fix import fix

        return fix
    if name == "load_matrix":
        # lazy: `import cudamatrix` would load 27 ms more (python -X importtime; the hoisting's budget per command is 3% of its run): cudamatrix.matrix.data, packaging.version, typing
        from cudamatrix.matrix.load import load_matrix

        return load_matrix
    raise AttributeError(name)
