"""A fleet's node files: a folder of saved environments (``detect --json``), as ``fleet gather`` writes it with its
index ``fleet.json``, or any folder of ``*.json`` files. Reads the folder and the index (bounded: a FIFO or device
refused); the caller loads the node files."""
from __future__ import annotations

import os
from pathlib import Path

from cudamatrix.errors import UsageError

FLEET_INDEX = "fleet.json"  # written by `fleet gather` beside the node files; not itself an environment


def env_paths(env_files: list[Path]) -> list[Path]:
    """``--env`` values with every folder replaced by its node files: the files ``fleet.json`` lists when it
    is there (a `fleet gather` output), otherwise every ``*.json`` in it, sorted. Raises UsageError for a
    folder without node files or a ``fleet.json`` naming a file outside its folder."""
    out: list[Path] = []
    for path in env_files:
        path = Path(path)
        if not path.is_dir():
            out.append(path)
            continue
        index = path / FLEET_INDEX
        found = _listed_nodes(path, index) if os.path.lexists(index) else \
            [path / name for name in sorted(n for n in os.listdir(path) if n.endswith(".json") and n != FLEET_INDEX)]
        out += found
        if not found:
            raise UsageError(f"--env {path}: no node files (*.json) in this folder",
                             hint="gather them with: cudamatrix fleet gather -o DIR")
    return out


FLEET_INDEX_LIMIT = 64 * 1024 * 1024  # 100,000 nodes at ~600 bytes each fit well inside
FLEET_INDEX_DEPTH = 16  # fleet gather writes 4 levels


def _listed_nodes(folder: Path, index: Path) -> list[Path]:
    from cudamatrix.safe.files import parse_json, read_bytes

    hint = "regenerate it with `cudamatrix fleet gather`, or remove it to read every *.json"
    raw = read_bytes(index, limit=FLEET_INDEX_LIMIT, what="fleet index")  # bounded; a FIFO or device refused
    try:
        doc = parse_json(raw, max_depth=FLEET_INDEX_DEPTH)
        files = [node["file"] for node in doc["nodes"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{index}: not a fleet index ({type(exc).__name__}: {exc})", hint=hint) from None
    out = []
    for name in files:
        # only plain file names: an index must not point outside its folder
        if not isinstance(name, str) or Path(name).name != name or name in ("", ".", ".."):
            raise UsageError(f"{index}: nodes[].file {name!r} is not a file name in {folder}")
        out.append(folder / name)
    return out
