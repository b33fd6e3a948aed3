"""The opened half of the loader model: which libraries a CUDA library opens itself, under which names.

``data/loaders.json`` (written by ``scripts/probe_loaders.py`` from the wheels of every release) says, per
library family and release range, which libraries an opener dlopens at run time and how it forms their names:
cuDNN 9's ``libcudnn.so.9`` opens ``libcudnn_graph.so.9`` and the other sub-libraries, trying
``libcudnn_graph.so.9.19.0``, ``.so.9.19``, ``.so.9`` then ``.so``; ``libcudnn_graph.so.9`` opens the engine
libraries the same way; cuDNN 8's ``libcudnn.so.8`` opens ``libcudnn_ops_infer.so.8`` and its siblings by their
exact names; NVRTC opens ``libnvrtc-builtins.so.X.Y``. Where ld.so looks for them is not data: the opener's own
DT_RPATH/DT_RUNPATH, read from the file on the machine by the loader model, decides (cuDNN 9.21.1 moved the
shim's ``$ORIGIN`` from DT_RUNPATH, searched after LD_LIBRARY_PATH, to DT_RPATH, searched before it).

A release outside every row is unknown: its opened libraries are not predicted, and a note says so.
"""
from __future__ import annotations

import json
import os
import re
from typing import NamedTuple

_TABLE: list[dict] = []


class Opening(NamedTuple):
    """One library an opener dlopens: the SONAME it answers to and the names tried, first found wins (a plain
    tuple: made on the hot path of every detect)."""

    soname: str
    names: tuple[str, ...]
    family: str
    row: str  # "cudnn9 >=9.0.0,<=9.21.0": the data row it comes from


def data_file() -> str:
    """``loaders.json`` inside an installed wheel (``cudamatrix/data``), or ``data/`` of a checkout."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    packaged = os.path.join(package, "data", "loaders.json")
    return packaged if os.path.exists(packaged) else os.path.join(os.path.dirname(package), "data", "loaders.json")


def table() -> list[dict]:
    """The openers of the shipped data (read once per process; trusted like the shipped matrix)."""
    if not _TABLE:
        with open(data_file(), encoding="utf-8") as fh:
            _TABLE.extend(o for o in json.load(fh)["openers"] if o.get("modelled") and _generic(o))
    return _TABLE


def _generic(opener: dict) -> bool:
    """Openers named by a SONAME (the frameworks' own openers are the recipes of :mod:`.libpaths`)."""
    return opener["opener"].startswith("lib")


def version_tuple(version: str | None) -> tuple[int, ...] | None:
    """"9.19.0.56" -> (9, 19, 0): the library release (a wheel's build number dropped); None if unreadable."""
    m = re.match(r"^(\d+(?:\.\d+)*)", version or "")
    return tuple(int(p) for p in m.group(1).split(".")[:3]) if m else None


def _in_range(spec: str, version: tuple[int, ...]) -> bool:
    """``spec`` is ">=A,<=B" (the form the data is written in)."""
    low, high = (version_tuple(part[2:]) for part in spec.split(","))
    return low is not None and high is not None and low <= version <= high


def _matches(opener: dict, row: dict, soname: str) -> bool:
    name = row.get("opener", opener["opener"])
    return soname == name


_OPENERS: set[str] = set()


def is_opener(soname: str | None) -> bool:
    """Does the data know ``soname`` as an opener (of any release)? (asked for every object of every link map)"""
    if not _OPENERS:
        _OPENERS.update(r.get("opener", o["opener"]) for o in table() for r in o["rows"])
    return bool(soname) and soname in _OPENERS


def openings(soname: str, version: str | None) -> tuple[list[Opening], str | None]:
    """What the opener ``soname`` of release ``version`` dlopens, in order; or ([], why not) when unknown."""
    rows = [(o, r) for o in table() for r in o["rows"] if _matches(o, r, soname)]
    if not rows:
        return [], None
    have = version_tuple(version)
    if have is None:
        return [], f"{soname}: its version is unknown, so the libraries it opens are not predicted"
    for opener, row in rows:
        if _in_range(row["versions"], have):
            tag = f"{opener['family']} {row['versions']}"
            return [Opening(t, _names(t, row["names"], have), opener["family"], tag) for t in row["opens"]], None
    return [], (f"{soname} {version}: how this release opens its libraries is not in data/loaders.json; "
                "the libraries it opens are not predicted")


def _names(target: str, how: str, version: tuple[int, ...]) -> tuple[str, ...]:
    """The names tried for ``target``: cuDNN 9's ``%s.%d.%d.%d``, ``%s.%d.%d``, ``%s.%d``, ``%s`` on the base name."""
    if how != "versioned":
        return (target,)
    base = target[:target.index(".so") + 3]
    return tuple(".".join([base] + [str(p) for p in version[:n]]) for n in (3, 2, 1)) + (base,)


def answers_version(soname: str) -> str | None:
    """The sub-library whose answer a ``cudnnGetVersion()`` call through ``soname`` returns (cuDNN's shims)."""
    return next((o.get("answers_version") for o in table() if o["opener"] == soname), None)


def family_of(soname: str) -> str | None:
    """The family an opener or one of its opened libraries belongs to ("cudnn9", "cudnn8", "nvrtc")."""
    for opener in table():
        for row in opener["rows"]:
            if soname == row.get("opener", opener["opener"]) or soname in row["opens"]:
                return opener["family"].split("-")[0]
    return None


def soname_guess(filename: str) -> str:
    """"libcudnn_graph.so.9.14.0" -> "libcudnn_graph.so.9": the SONAME cuDNN's and NVRTC's files carry (name and
    major), for a file that cannot be read (a replayed report)."""
    m = re.match(r"^(lib[\w.+-]*?\.so\.\d+)(?:\.\d+)*$", filename)
    return m.group(1) if m else filename
