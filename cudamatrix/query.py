"""Read-side helpers over the Matrix: rows for ``matrix show``, look-ups used by the solver, and lint."""
from __future__ import annotations
