"""Sources as data: every matrix row's ``source`` is a list of records, each naming where a fact can be read
again (``url``), what that source states that the row uses (``states``), when it was read (``read``, an ISO
date) and whose word it is (``kind``):

- ``first_party``: the vendor's own document (NVIDIA, PyTorch, TensorFlow, JAX: release notes, support
  matrices, RELEASE.md, release RFCs, build scripts at a release tag);
- ``artifact``: the package itself (wheel metadata, index listings, binaries read with ``cuobjdump``,
  ``ctypes`` calls into a library);
- ``third_party``: anyone else's table or paste. Such a record never stands alone: a row whose sources are all
  third-party fails the matrix's lint (``matrix validate``) and its tests.

In code a row's ``source`` reads as one line of text (:class:`SourceText`, a ``str``): the solver and doctor
quote it in their sentences as before. Its records are ``source.records``; ``to_dict`` writes them as JSON.
"""
from __future__ import annotations

import typing
from typing import Annotated, Any, Literal

from cudamatrix.schema import FORBID, record
from cudamatrix.schema.annotated import IsoDate, Text, Url
from cudamatrix.schema.records import MISSING

SourceKind = Literal["first_party", "artifact", "third_party"]
KINDS: tuple[str, ...] = ("first_party", "artifact", "third_party")


@record(frozen=True, kw_only=True)
class Source:
    """One source of a row: where it can be read again, what it states that the row uses, when it was read,
    and whose word it is (``first_party``, ``artifact``, ``third_party``)."""

    url: Url | None = None  # None: an artifact read by a command (the states name the file and the tool)
    states: Text
    read: IsoDate
    kind: SourceKind
    __pydantic_config__ = FORBID


class SourceText(str):
    """A row's sources: reads as one line (the records' texts joined by "; "), holds the records.

    Built from the records as JSON dicts (the shipped data, trusted: nothing is checked) or from validated
    :class:`Source` records; ``records`` builds the records on first use, ``as_json()`` gives the public shape."""

    _raw: list[dict[str, Any]]

    def __new__(cls, raw: Any) -> SourceText:
        items = raw if isinstance(raw, list) else list(raw)  # the JSON parser's fresh list is kept as it is
        parts = []
        for rec in items:  # shipped.line(), inlined: every command builds a source for each row of the matrix
            url = rec.get("url")
            if url:
                parts.append(f"{url} ({rec['states']})" if rec.get("states") else url)
            else:
                parts.append("artifact: " + rec["states"] if rec.get("kind") == "artifact" else rec["states"])
        obj = super().__new__(cls, "; ".join(parts))
        obj._raw = items
        return obj

    def __getnewargs__(self) -> tuple[Any, ...]:  # copy and pickle rebuild from the records
        return (list(self._raw),)

    @property
    def records(self) -> tuple[Source, ...]:
        """The records (:class:`Source`), in the order the row lists them."""
        return tuple(Source(**r) for r in self._raw)

    def as_json(self) -> list[dict[str, Any]]:
        """The records as JSON objects (``url``, ``states``, ``read``, ``kind``): the data files' and ``--json``'s
        shape."""
        return [{"url": r.get("url"), "states": r.get("states"), "read": r.get("read"), "kind": r.get("kind")}
                for r in self._raw]

    @classmethod
    def from_records(cls, records: list[Source]) -> SourceText:
        """From validated records (pydantic's path)."""
        return cls({"url": r.url, "states": r.states, "read": r.read, "kind": r.kind} for r in records)


def source_record(states: str, *, kind: str = "artifact", url: str | None = None,
                  read: str | None = None) -> dict[str, Any]:
    """One source record as JSON, read today unless ``read`` says when (what discovery writes into rows)."""
    if read is None:
        from datetime import date

        read = date.today().isoformat()
    rec: dict[str, Any] = {"url": url, "states": states, "read": read, "kind": kind}
    return {k: v for k, v in rec.items() if v is not None}


def merge_sources(old: list[dict[str, Any]] | None, new: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """``old`` with the records of ``new`` it does not carry yet (same url and states), in order."""
    out = list(old or [])
    seen = {(r.get("url"), r.get("states")) for r in out}
    for rec in new or []:
        if (rec.get("url"), rec.get("states")) not in seen:
            out.append(rec)
            seen.add((rec.get("url"), rec.get("states")))
    return out


def records_of(source: str | None) -> tuple[Source, ...]:
    """The records of a row's ``source``; none for a plain string (a row built in code, not read from data)."""
    return source.records if isinstance(source, SourceText) else ()


def all_third_party(source: str | None) -> bool:
    """True when every record of ``source`` is third-party (a table that must never stand alone)."""
    recs = records_of(source)
    return bool(recs) and all(r.kind == "third_party" for r in recs)


class LazySource:
    """The ``source`` field of a row class built from the shipped data (:func:`lazy_sources`): the trusted build
    stores the JSON list as it is, and the first read makes it the :class:`SourceText` (kept). A command reads few
    rows' sources (``solve`` of four frameworks 72 of 743, ``check`` of a lock 8 of 503), and joining them all
    into text took a tenth of the matrix's build and a sixth of its memory.

    A data descriptor: the value lives in the instance's ``__dict__`` under the field's own name, where
    ``__init__``, ``copy``, pickle and pydantic (which sets ``__dict__`` itself) put it."""

    takes_json = True  # schema.build: store the JSON value, do not convert it

    def __init__(self, name: str, default: Any) -> None:
        self.name, self.default = name, default  # the field's default (records.MISSING: none)

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            if self.default is MISSING:
                raise AttributeError(self.name)
            return self.default
        own = obj.__dict__
        try:
            value = own[self.name]
        except KeyError:
            raise AttributeError(self.name) from None
        if type(value) is list:
            value = own[self.name] = SourceText(value)
        return value

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__[self.name] = value

    def __delete__(self, obj: Any) -> None:
        raise AttributeError(f"cannot delete field {self.name!r}")


def lazy_sources(cls: Any) -> Any:
    """Class decorator, above ``@record``: each of the row class's :data:`Sources` fields becomes a
    :class:`LazySource` (its text made on first read)."""
    for name, spec in cls.__record_specs__.items():
        if spec.type is Sources or Sources in typing.get_args(spec.type):
            setattr(cls, name, LazySource(name, spec.default))
    return cls


class _SourcesField:
    """Annotated metadata of the ``source`` fields: pydantic validates a non-empty list of :class:`Source`
    records and wraps it; the trusted build (``schema.build``) calls ``build`` on the JSON list."""

    build = SourceText

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        inner = handler.generate_schema(list[Source])
        checked = core_schema.no_info_after_validator_function(_non_empty, inner)
        wrapped = core_schema.no_info_after_validator_function(SourceText.from_records, checked)
        return core_schema.no_info_before_validator_function(_not_text, wrapped)


# the field type of every row's ``source``: text to code that quotes it, a list of records in the data
Sources = Annotated[str, _SourcesField()]


def _not_text(value: Any) -> Any:
    if isinstance(value, str):
        raise ValueError("a list of source records is needed ({url, states, read, kind}), not text: "
                         "scripts/convert_sources.py converts free-text sources")
    return value


def _non_empty(records: list[Source]) -> list[Source]:
    if not records:
        raise ValueError("a row needs at least one source record (url, states, read, kind)")
    return records
