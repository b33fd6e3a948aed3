"""A fleet's node files: a folder of saved environments (``detect --json``), as ``fleet gather`` writes it with its
index ``fleet.json``, or any folder of ``*.json`` files. Reads the folder and the index (bounded: a FIFO or device
refused), and the node files (:func:`load_nodes`: files alike but for what differs per node are validated once)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from cudamatrix.errors import UsageError

if TYPE_CHECKING:
    from cudamatrix.matrix.data import Matrix
    from cudamatrix.models import Environment
    from cudamatrix.solve.target import Target

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


PER_NODE = ("hostname", "captured_at", "timings_ms")  # what differs between the node files of one class


def load_nodes(paths: list[Path]) -> tuple[list[Environment], list[int]]:
    """Every node file's Environment, and for each the number of the first file alike (itself when it is the
    first). Files alike but for :data:`PER_NODE` (the rest compared as a whole) are validated once: a
    later one takes the first one's Environment with its own values of those keys, when they are of the types
    validation keeps as they are; otherwise it is validated whole, so a bad file is refused with its own message.
    Raises UsageError as :func:`cudamatrix.detect.load_environment` does."""
    import copy

    from cudamatrix.detect import environment_of, read_environment

    firsts: dict[str, int] = {}
    envs: list[Environment] = []
    same: list[int] = []
    for number, path in enumerate(paths):
        obj = read_environment(str(path))
        # the rest, spelled out: equal texts are equal JSON values (repr tells 1 from 1.0 and from true)
        first = firsts.setdefault(repr({k: v for k, v in obj.items() if k not in PER_NODE}), number)
        own = _own_values(obj) if first != number else None
        if own is None:  # the first file alike, or values validation would change or refuse: validated whole
            envs.append(environment_of(str(path), obj))
        else:
            env = copy.copy(envs[first])
            env.hostname, env.captured_at, env.timings_ms = own
            envs.append(env)
        same.append(first)
    return envs, same


def _own_values(obj: dict) -> tuple[str | None, str | None, dict[str, float]] | None:
    """A node file's :data:`PER_NODE` values when they are of the types validation keeps as they are (text or
    null, a map of text to floats), else None (the whole file is then validated)."""
    host, at, timings = obj.get("hostname"), obj.get("captured_at"), obj.get("timings_ms", {})
    if not all(v is None or type(v) is str for v in (host, at)) or type(timings) is not dict:
        return None
    if not all(type(k) is str and type(v) is float for k, v in timings.items()):
        return None
    return host, at, dict(timings)


def node_targets(matrix: Matrix, envs: list[Environment], same: list[int], names: list[str]) -> list[Target]:
    """The Targets of the nodes :func:`load_nodes` read: made once per first file alike, named per node."""
    from dataclasses import replace

    from cudamatrix.solve.target import from_environment

    targets: list[Target] = []
    for env, first, name in zip(envs, same, names, strict=True):
        targets.append(from_environment(env, matrix, name=name) if first == len(targets)
                       else replace(targets[first], name=name))
    return targets
