"""Command-line options -> Environments: saved (``--env``), pasted (``--from``) or live. Apart from the Targets
(:mod:`.targets`), so that doctor and env, which solve nothing, do not load the solver's target model."""
from __future__ import annotations

import os
from pathlib import Path

from cudamatrix.errors import UsageError
from cudamatrix.models import Environment
from cudamatrix.safe.text import lazy

_VERSIONISH = lazy(r"^\d+(\.\d+){0,2}$")


def split_python(value: str | None) -> tuple[str | None, str | None]:
    """--python takes a version (a target's Python) or a path (an interpreter to inspect)."""
    if value is None:
        return None, None
    if _VERSIONISH.match(value.strip()):
        return value.strip(), None
    return None, os.path.abspath(value) if value else value  # a path: relative to the current folder, as everywhere


def environments(env_files: list[Path], from_files: list[str], interpreter: str | None,
                 all_copies: bool = False) -> list[Environment]:
    """Saved, pasted or live environments. ``--env`` may name folders of node files (see :func:`env_paths`).
    Raises UsageError for contradictory options."""
    # lazy: `solve` would load 17 ms more (python -X importtime; the hoisting's budget per command is 3% of its run): cudamatrix.detect, cudamatrix.detect.libraries, cudamatrix.detect.smi
    from cudamatrix.detect import detect

    if env_files and from_files:
        raise UsageError("--env and --from cannot be combined",
                         hint="--env reads saved `detect --json` files; --from reads pasted tool outputs")
    if env_files:
        # lazy: the node files' reader (0.6 ms of doctor's imports, python -X importtime) only for --env
        from cudamatrix.fleet.nodes import env_paths, load_nodes

        return load_nodes(env_paths(env_files))[0]
    if from_files:
        # lazy: the paste readers (17 ms, python -X importtime) only for --from: doctor and solve on this machine skip them
        from cudamatrix.pastes.reports import from_report_files

        return [from_report_files(from_files)]
    return [detect(python=interpreter, all_copies=all_copies)]
