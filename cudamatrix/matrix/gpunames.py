"""GPU names matched to the GPU table's models: the names nvidia-smi and NVML print (cut short, or with a board
suffix) and the names people type (a model number, a compact spelling, a family).

Standard library only, over rows of either kind: the Matrix's :class:`~cudamatrix.matrix.data.Gpu` records
(:mod:`.query`'s ``find_gpu`` and ``lookup_gpu``) or the shipped gpus.json's rows as JSON (:func:`shipped`, for
``detect --from``: see :mod:`.shipped`). One set of matching rules for both; a test checks that they give the same
model for every name of the table.
"""
from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

from cudamatrix.matrix import shipped as shipped_data
from cudamatrix.safe.text import lazy

_PREFIXES = ("nvidia ", "geforce ", "tesla ", "quadro ")
# what NVML / nvidia-smi add to a product name: the form factor and memory of a board ("-PCIE-16GB",
# "-SXM2-32GB", " 80GB HBM3"), "Laptop GPU", "with Max-Q Design"; and what the table truncates ("...")
_SUFFIX = lazy(r"(\s+(laptop gpu|with max q design|max q|mobile))+$|"
               r"(\s+(pcie|sxm\d?|nvl|hbm\d?e?|\d+\s?gb))+$")
_SQUEEZE = lazy(r"[\s\-_()]+")


def norm(name: str) -> str:
    """GPU name for matching: lower case, no vendor prefixes, single spaces, '-' '_' and ' ' equal."""
    s = name.strip().lower()
    changed = True
    while changed:
        changed = False
        for prefix in _PREFIXES:
            if s.startswith(prefix):
                s, changed = s[len(prefix):], True
    # '-' and '_' as spaces, then the words joined by one space: what re.sub(r"[\s_\-]+", " ", s).strip() gives,
    # a fifth of its time (every name of the table is normalised when the index is built)
    return " ".join(s.replace("_", " ").replace("-", " ").split())


def _words(text: str) -> str:
    return " " + norm(text) + " "


class Names:
    """The rows of a GPU table by every name and alias, lower-cased and normalised (:func:`norm`); ``names(row)``
    gives a row's name first, then its aliases, ``cc(row)`` its compute capability. A look-up gives a row, or
    None."""

    def __init__(self, rows: Iterable[Any], names: Callable[[Any], tuple[str, ...]],
                 cc: Callable[[Any], str]) -> None:
        self.rows = list(rows)
        self._names, self._cc = names, cc
        index: dict[str, Any] = {}
        for row in self.rows:
            for name in names(row):
                index.setdefault(norm(name), row)
                index.setdefault(name.lower(), row)
        self.index = index
        self._keys: tuple[str, ...] | None = None

    def _sorted_keys(self) -> tuple[str, ...]:
        if self._keys is None:
            self._keys = tuple(sorted(k for k in self.index if k))
        return self._keys

    def _same_cc(self, rows: list[Any]) -> Any:
        """One of ``rows`` when they all share a compute capability (so the answer does not depend on which)."""
        return rows[0] if rows and len({self._cc(r) for r in rows}) == 1 else None

    def find(self, name: str) -> Any:
        """The model for a name as nvidia-smi / NVML print it, or a canonical name. None if unknown.

        Handles the "NVIDIA " / "GeForce " prefixes, the board suffixes NVML adds ("-PCIE-16GB", "-SXM2-32GB",
        " Laptop GPU", " with Max-Q Design"), and names nvidia-smi's table cut short ("GeForce RTX 207...",
        "NVIDIA GeForce RTX 3060 ..."): a cut name matches when every model it can stand for has one compute
        capability. Dictionary look-ups first; the sorted-prefix scan only for suffixed or cut names."""
        index = self.index
        hit = index.get(name.lower()) or index.get(norm(name))
        if hit:
            return hit
        key = norm(name)
        truncated = key.endswith("...") or key.endswith("..") or name.rstrip().endswith("\u2026")
        key = key.rstrip(".\u2026 ")
        if not key:
            return None
        keys = self._sorted_keys()
        if truncated:
            at = bisect_left(keys, key)
            found = []
            while at < len(keys) and keys[at].startswith(key):
                found.append(index[keys[at]])
                at += 1
            return self._same_cc(found)
        base = _SUFFIX.sub("", key).strip()
        if base != key:
            hit = index.get(base)
            if hit:
                return hit
        # a board name the table lacks, with a suffix the regex does not know ("A100-PCIE-40GB" vs "A100 PCIe 40GB")
        for stem in (key, base):
            found = [index[k] for k in keys if k.startswith(stem + " ") or stem.startswith(k + " ")]
            if found:
                longest = max(found, key=lambda r: len(norm(self._names(r)[0])))
                return self._same_cc(found) or longest
        return None

    def lookup(self, text: str) -> Any:
        """The model a person names as they type it: a model number ("4090", "3090"), a compact or spaced name
        ("rtx4090", "RTX 4090"), a family ("a100", "h100", "t4").

        None when the text names no model, or names models of different compute capabilities ("4000": Quadro RTX
        4000 is 7.5, RTX 4000 Ada 8.9). Unlike :meth:`find` (which reads the names nvidia-smi prints, cut or
        suffixed), it never guesses among models that differ. A compute capability ("8.6", "sm_86") is not a
        model: the caller tries that first or after, as its input rules say."""
        text = text.strip()
        if not text:
            return None
        hit = self.index.get(text.lower()) or self.index.get(norm(text))
        if hit:
            return hit
        squeezed = _SQUEEZE.sub("", norm(text))
        named = [r for r in self.rows for n in self._names(r) if _SQUEEZE.sub("", norm(n)) == squeezed]
        if not named:  # a family: every name that has the text as its words ("a100" in "a100 sxm4 40gb")
            words = _words(text)
            named = [r for r in self.rows if any(words in _words(n) for n in self._names(r))]
        return self._same_cc(named)


@lru_cache(maxsize=1)
def shipped() -> Names:
    """The shipped gpus.json's models as JSON rows (``name``, ``compute_capability``, ``aliases``, ``source``: a
    row's sources as one line by :func:`~cudamatrix.matrix.shipped.source_line`). Raises DataError as
    :func:`~cudamatrix.matrix.shipped.rows`."""
    doc = shipped_data.rows("gpus")
    return Names(doc["gpus"], lambda r: (r["name"], *r.get("aliases", ())), lambda r: r["compute_capability"])
