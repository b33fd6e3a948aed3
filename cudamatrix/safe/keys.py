"""The per-user key: a random secret in the user's cache folder (0600 in a 0700 folder, never leaving it) that
signs what the tool keeps there, so that a file planted or edited by anyone without the key proves nothing.

The verification memory signs each entry with it (:mod:`cudamatrix.verify.memory`); the matrix overlay signs
its document (:mod:`cudamatrix.matrix.overlay`). A hash kept in the same file as what it protects is no
protection (whoever edits the file recomputes it); an HMAC needs the key.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from cudamatrix.safe.files import read_private, write_private

KEY_FILE = "verify.key"  # its name since the verification memory introduced it; the overlay shares it


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/cudamatrix``, else ``~/.cache/cudamatrix``: where the key and what it signs live."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "cudamatrix"


def user_key(create: bool) -> tuple[bytes | None, str | None]:
    """(this user's key, None), creating it when ``create``; (None, None) when there is none yet; (None, why)
    when it cannot be trusted (not this user's, open to others, a link) or cannot be written."""
    import secrets

    path = cache_dir() / KEY_FILE
    raw, note = read_private(path, limit=4096)
    if note:
        return None, note
    if raw is not None and len(raw) >= 32:
        return raw, None
    if not create:
        return None, None
    raw = secrets.token_bytes(32)
    note = write_private(path, raw)
    return (None, note) if note else (raw, None)


def sign(key: bytes, value: Any) -> str:
    """The HMAC-SHA256 of ``value`` in a canonical JSON form (sorted keys)."""
    import hashlib  # on first use: OpenSSL costs memory and milliseconds on every doctor otherwise
    import hmac

    body = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hmac.new(key, body.encode(), hashlib.sha256).hexdigest()


def signed(key: bytes, value: Any, mac: Any) -> bool:
    """Whether ``mac`` is :func:`sign` of ``value`` with ``key`` (compared in constant time)."""
    import hmac

    return isinstance(mac, str) and hmac.compare_digest(mac, sign(key, value))
