"""Package index URLs the matrix names, and moving them to a mirror (a corporate or loopback one)."""
from __future__ import annotations

PYTORCH_INDEX_PREFIX = "https://download.pytorch.org/whl"


def mirror_url(url: str | None, mirror: str | None) -> str | None:
    """``url`` with the PyTorch index prefix replaced by ``mirror``; other URLs unchanged."""
    if url and mirror and (url == PYTORCH_INDEX_PREFIX or url.startswith(PYTORCH_INDEX_PREFIX + "/")):
        return mirror.rstrip("/") + url[len(PYTORCH_INDEX_PREFIX):]
    return url
