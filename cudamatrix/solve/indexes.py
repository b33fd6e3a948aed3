"""Package index URLs the matrix names, and moving them to a mirror (a corporate or loopback one)."""
from __future__ import annotations

from typing import overload

from cudamatrix.models import Pin, Solution
from cudamatrix.schema import replace

PYTORCH_INDEX_PREFIX = "https://download.pytorch.org/whl"


@overload
def mirror_url(url: str, mirror: str | None) -> str: ...
@overload
def mirror_url(url: str | None, mirror: str | None) -> str | None: ...


def mirror_url(url: str | None, mirror: str | None) -> str | None:
    """``url`` with the PyTorch index prefix replaced by ``mirror``; other URLs unchanged."""
    if url and mirror and (url == PYTORCH_INDEX_PREFIX or url.startswith(PYTORCH_INDEX_PREFIX + "/")):
        return mirror.rstrip("/") + url[len(PYTORCH_INDEX_PREFIX):]
    return url


def dedupe(items: list) -> list:
    """The items in their first order, each once."""
    return list(dict.fromkeys(items))


def index_layout(pins: list[Pin], default_needed: bool = False) -> tuple[str | None, list[str]]:
    """(index_url, extra_index_urls) for a set of pins: one framework index alone replaces the default
    index (as the framework documents); a mix keeps the default index and adds the others."""
    indexes = dedupe([p.index_url for p in pins if p.index_url])
    if len(indexes) == 1 and not default_needed and all(p.index_url for p in pins):
        return indexes[0], []
    return None, indexes


def index_args(index_url: str | None, extra: list[str]) -> list[str]:
    args = ["--index-url", index_url] if index_url else []
    for url in extra:
        args += ["--extra-index-url", url]
    return args


def with_mirror(solution: Solution, mirror: str | None) -> Solution:
    """The solution with every PyTorch index URL moved to ``mirror``."""
    if not mirror:
        return solution

    def swap(url: str | None) -> str | None:
        return mirror_url(url, mirror)

    def pins(items: list[Pin]) -> list[Pin]:
        return [Pin(name=p.name, version=p.version, extras=p.extras, index_url=swap(p.index_url)) for p in items]

    args = [mirror_url(a, mirror) if a.startswith(PYTORCH_INDEX_PREFIX) else a for a in solution.pip_args]
    return replace(solution, packages=pins(solution.packages), to_install=pins(solution.to_install),
                   index_url=swap(solution.index_url),
                   extra_index_urls=[mirror_url(u, mirror) for u in solution.extra_index_urls],
                   pip_args=args,
                   frameworks=[replace(f, index_url=swap(f.index_url)) for f in solution.frameworks])
