"""Plain values the schema's field types check, with no import of the package: compute capabilities (their
normal form and sort key) and whether a plain-http index URL is allowed in data a user names. Below both
:mod:`cudamatrix.schema` and :mod:`cudamatrix.schema.annotated`, which read them."""
from __future__ import annotations

from functools import lru_cache
from typing import Any

# plain-http index URLs in data a user names are data errors unless the command was given --allow-http
HTTP_ALLOWED = [False]


class http_allowed:  # noqa: N801  (used as a ``with`` statement, like contextlib's helpers)
    """``with http_allowed(flag):`` validation accepts ``http://`` index URLs when ``flag`` (``--allow-http``)."""

    def __init__(self, allow: bool) -> None:
        self.allow, self.before = bool(allow), False

    def __enter__(self) -> None:
        self.before, HTTP_ALLOWED[0] = HTTP_ALLOWED[0], self.allow

    def __exit__(self, *exc: object) -> None:
        HTTP_ALLOWED[0] = self.before


def normalize_cc(value: Any) -> str:
    """Normalise "7.5", "sm_75", "75", "compute_90a" to "7.5" / "9.0a". Raises ValueError."""
    if not isinstance(value, str):
        raise ValueError('compute capabilities are strings like "7.5"')
    s = value.strip().lower()
    for prefix in ("sm_", "compute_", "sm"):
        if s.startswith(prefix):
            s = s[len(prefix):]
            break
    suffix = ""
    if s and s[-1] in "af":
        suffix, s = s[-1], s[:-1]
    if "." in s:
        major, _, minor = s.partition(".")
    elif s.isdigit() and len(s) >= 2:
        major, minor = s[:-1], s[-1]
    else:
        raise ValueError(f"not a compute capability: {value!r}")
    if not (major.isdigit() and minor.isdigit()):
        raise ValueError(f"not a compute capability: {value!r}")
    return f"{int(major)}.{int(minor)}{suffix}"


@lru_cache(maxsize=512)  # a pure function of text, asked per rule, GPU and build: a fleet's check asks it millions of times
def cc_key(cc: str) -> tuple[int, int]:
    """Sort key of a compute capability ("8.6" -> (8, 6)), ignoring an a/f suffix."""
    major, _, minor = cc.rstrip("af").partition(".")
    return int(major), int(minor or 0)
