"""A fleet's node files: a folder of saved environments (``detect --json``), as ``fleet gather`` writes it with its
index ``fleet.json``, or any folder of ``*.json`` files. Reads the folder and the index (bounded: a FIFO or device
refused), and the node files (:func:`load_nodes`: files alike but for what differs per node are validated once)."""
from __future__ import annotations

import marshal
import os
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from cudamatrix.errors import UsageError
from cudamatrix.proc import PausedGc
from cudamatrix.safe.files import parse_json, read_bytes
from cudamatrix.safe.text import lazy

if TYPE_CHECKING:
    from cudamatrix.models import Environment

T = TypeVar("T")
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
    hint = "regenerate it with `cudamatrix fleet gather`, or remove it to read every *.json"
    raw = read_bytes(index, limit=FLEET_INDEX_LIMIT, what="fleet index")  # bounded; a FIFO or device refused
    try:
        doc = parse_json(raw, max_depth=FLEET_INDEX_DEPTH)
        files = [node["file"] for node in doc["nodes"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{index}: not a fleet index ({type(exc).__name__}: {exc})", hint=hint) from None
    out = []
    for name in files:
        # only plain file names: an index must not point outside its folder ("." fails the name test:
        # pathlib drops single-dot components, so Path(".").name is "")
        if not isinstance(name, str) or Path(name).name != name or name in ("", ".."):
            raise UsageError(f"{index}: nodes[].file {name!r} is not a file name in {folder}")
        out.append(folder / name)
    return out


PER_NODE = ("hostname", "captured_at", "timings_ms", "child_stderr")  # what differs between the node files of one class
_DOTTED = lazy(r"[0-9]+(?:\.[0-9]+)*")  # a driver version validation keeps as it is, and reads as a version


def load_nodes(paths: list[Path]) -> tuple[list[Environment], list[int]]:
    """Every node file's Environment, and for each the number of the first file alike (itself when it is the
    first). Files alike but for :data:`PER_NODE` and their driver's version (the rest compared as a whole: the
    same JSON values, of the same types) are validated once: a later one takes the first one's Environment with
    its own values of those keys, when they are of the types validation keeps as they are (a driver version
    only where both are dotted numbers, like ``535.104.05``: the one form that is read as it is written, and
    read by the Target as its driver alone, see :func:`cudamatrix.fleet.nodetargets.node_targets`); otherwise it is validated whole, so a bad
    file is refused with its own message. Raises UsageError as :func:`cudamatrix.detect.load_environment` does."""
    # lazy: `solve` would load 17 ms more (python -X importtime; the hoisting's budget per command is 3% of its run): cudamatrix.detect, cudamatrix.detect.libraries, cudamatrix.detect.smi
    from cudamatrix.detect import environment_of, read_environment

    firsts: dict[bytes, int] = {}
    envs: list[Environment] = []
    same: list[int] = []
    with PausedGc():  # many objects, no cycle among them: the collector's passes over them find nothing
        for number, path in enumerate(paths):
            obj = read_environment(str(path))
            key, driver = _alike(obj)
            first = firsts.setdefault(key, number) if key is not None else number
            own = _own_values(obj) if first != number else None
            envs.append(environment_of(str(path), obj) if own is None else _take(envs[first], own, driver))
            same.append(first)
    return envs, same


def _alike(obj: dict) -> tuple[bytes | None, str | None]:
    """A node file's values but for :data:`PER_NODE` and a dotted driver version, as bytes that are equal only for
    equal JSON values of the same types (marshal keeps 1, 1.0 and true apart), and that dotted driver version
    (None when the driver's version is not one: it is then part of the key). (None, None) for values marshal
    refuses (nested too deeply): the file is validated whole."""
    rest = {k: v for k, v in obj.items() if k not in PER_NODE}
    driver = rest.get("driver")
    version = driver.get("version") if type(driver) is dict else None
    dotted = type(version) is str and _DOTTED.fullmatch(version) is not None
    if dotted:
        rest["driver"] = {k: v for k, v in driver.items() if k != "version"}  # type: ignore[union-attr]
    try:
        return marshal.dumps((rest, dotted), 2), version if dotted else None
    except ValueError:
        return None, None


def _take(first: Environment, own: tuple[str | None, str | None, dict[str, float], dict[str, str]],
          driver: str | None) -> Environment:
    """The first file's Environment with a later file's :data:`PER_NODE` values and dotted driver version (a
    shallow copy: the values validated once are shared, never changed)."""
    env = clone(first)
    env.hostname, env.captured_at, env.timings_ms, env.child_stderr = own
    if driver is not None and driver != first.driver.version:
        env.driver = clone(first.driver)
        env.driver.version = driver
    return env


def clone(obj: T) -> T:
    """A shallow copy of a record (what ``copy.copy`` makes of it, without its generic protocol)."""
    new = object.__new__(type(obj))
    new.__dict__.update(obj.__dict__)
    return new


def _own_values(obj: dict) -> tuple[str | None, str | None, dict[str, float], dict[str, str]] | None:
    """A node file's :data:`PER_NODE` values when they are of the types validation keeps as they are (text or
    null, a map of text to floats, a map of text to text), else None (the whole file is then validated)."""
    host, at, timings = obj.get("hostname"), obj.get("captured_at"), obj.get("timings_ms", {})
    said = obj.get("child_stderr", {})
    if not all(v is None or type(v) is str for v in (host, at)) or type(timings) is not dict or type(said) is not dict:
        return None
    if not all(type(k) is str and type(v) is float for k, v in timings.items()):
        return None
    if not all(type(k) is str and type(v) is str for k, v in said.items()):
        return None
    return host, at, dict(timings), dict(said)
