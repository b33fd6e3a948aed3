"""The shipped data files as bytes, with one key of extensions.json replaced: what a user's --data folder holding a
changed extensions.json gives the validator (tests/matrix)."""
from __future__ import annotations

import json

from cudamatrix.matrix.data import FILES, OPTIONAL, default_data_dir

DATA = default_data_dir()


def shipped_rows(key: str):
    """The shipped extensions.json's ``key``."""
    return json.loads((DATA / "extensions.json").read_text())[key]


def raws_with(key: str, value) -> dict[str, bytes]:
    """{file name: bytes} of the shipped data, extensions.json's ``key`` set to ``value``."""
    raws = {n: (DATA / f"{n}.json").read_bytes() for n in FILES if n not in OPTIONAL}
    doc = json.loads((DATA / "extensions.json").read_text())
    doc[key] = value
    raws["extensions"] = json.dumps(doc).encode()
    return raws
