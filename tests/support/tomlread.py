"""Read back a TOML text a lock writer wrote (every written TOML is read back in the tests): tomllib, or its
predecessor tomli on Python 3.10 (the test extra installs it there)."""
from __future__ import annotations

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib


def loads(text: str) -> dict:
    return tomllib.loads(text)
