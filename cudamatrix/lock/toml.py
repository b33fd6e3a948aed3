"""The one TOML writer of the lock files (``lock --format uv`` and ``--format pylock``): every value a lock
holds (requirements with their markers, index and wheel URLs, names, hashes) goes through :func:`string`, so
that no text of a request, an index or the installer's report can end a string early and add a key or an array
item. Pure, no I/O.

TOML 1.0 "String": a basic string is enclosed in quotation marks; a quotation mark, a backslash and the
control characters (U+0000 to U+001F and U+007F) must be escaped; ``\\uXXXX`` escapes any of them.
"""
from __future__ import annotations

from collections.abc import Iterable

# the short escapes TOML defines; every other control character is written as \\uXXXX
_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
_BARE_KEY = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def _char(c: str) -> str:
    if c in _SHORT:
        return _SHORT[c]
    if ord(c) < 0x20 or ord(c) == 0x7F:
        return f"\\u{ord(c):04X}"
    return c


def string(text: str) -> str:
    """``text`` as a TOML basic string, every character that must be escaped escaped."""
    return '"' + "".join(_char(c) for c in text) + '"'


def key(text: str) -> str:
    """``text`` as a TOML key: bare when it is only letters, digits, ``_`` and ``-``, else quoted."""
    return text if text and set(text) <= _BARE_KEY else string(text)


def array(items: Iterable[str]) -> str:
    """A one-line array of strings."""
    return "[" + ", ".join(string(i) for i in items) + "]"


def inline_table(pairs: dict[str, str]) -> str:
    """A one-line table of string values: ``{ a = "x", b = "y" }``."""
    return "{ " + ", ".join(f"{key(k)} = {string(v)}" for k, v in pairs.items()) + " }"


def assign(name: str, value: str) -> str:
    """The line ``name = "value"``."""
    return f"{key(name)} = {string(value)}"
