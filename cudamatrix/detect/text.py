"""Undo what pasting does to a tool's output: quote markers, code fences, Windows line endings, NULs.

Pure functions; every report parser and the live probes' parsers read text through :func:`clean`.
"""
from __future__ import annotations

import re

MAX_BYTES = 4 * 1024 * 1024  # a pasted report is never this long; read at most this much of a file

_FENCE = re.compile(r"^\s*(```|~~~)")
_QUOTE = re.compile(r"^[ \t]*(?:>[ \t]?)+")


def decode(data: bytes) -> tuple[str, bool]:
    """Bytes to text. Returns (text, looks_binary): binary when NULs or undecodable bytes abound."""
    sample = data[:65536]
    bad = sample.count(b"\x00")
    text = data.decode("utf-8", errors="replace")
    bad += text[:65536].count("\ufffd")
    return text, bool(sample) and bad > max(8, len(sample) // 20)


def clean(text: str) -> str:
    """Normalise a paste: LF line endings, no code fences, no leading "> " quote markers, no NULs."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    lines = [ln for ln in text.split("\n") if not _FENCE.match(ln)]
    quoted = [ln for ln in lines if ln.strip()]
    if quoted and sum(1 for ln in quoted if _QUOTE.match(ln)) * 2 >= len(quoted):
        lines = [_QUOTE.sub("", ln, count=1) for ln in lines]
    return "\n".join(lines)


def version_from_int(value: int | None, *, patch: bool = False) -> str | None:
    """CUDA's integer encoding (1000*major + 10*minor [+ patch]) to "12.4"; None for 0 or None."""
    if not value or value < 0:
        return None
    major, rest = divmod(int(value), 1000)
    minor, p = divmod(rest, 10)
    return f"{major}.{minor}.{p}" if patch else f"{major}.{minor}"


def cudnn_version(value: int | None) -> str | None:
    """cudnnGetVersion()'s integer to "9.1.0".

    cuDNN < 9 encodes major*1000 + minor*100 + patch; cuDNN 9 switched to major*10000 + minor*100 + patch
    (cuDNN 9.0.0 release notes, "CUDNN_VERSION" change).
    """
    if not value or value < 0:
        return None
    if value >= 90000:
        major, rest = divmod(value, 10000)
    else:
        major, rest = divmod(value, 1000)
    minor, p = divmod(rest, 100)
    return f"{major}.{minor}.{p}"
