"""Validation and serialisation of the package's records.

The models are records (:mod:`cudamatrix.schema.records`: dataclasses built without importing
:mod:`dataclasses`), so that the hot path (``detect``, ``doctor``, ``fix`` on a healthy environment) never
imports pydantic, nor even ``dataclasses`` and ``inspect``. Validation of untrusted input (a data file, a
saved environment) builds a pydantic ``TypeAdapter`` over the same classes on demand: unknown keys are
refused, and an error names the file and the dotted path of the bad value. The special field types (``Ver``,
``Spec``, ``CC``, ``Req``) are ``Annotated`` types (:mod:`cudamatrix.schema.annotated`) whose metadata tells
pydantic how to check them; :func:`build` turns trusted JSON (the shipped matrix) into the same classes
without pydantic.
"""
from __future__ import annotations

import types
import typing
from typing import Annotated, Any, Callable, Literal, TypeVar, Union

from cudamatrix.errors import CudamatrixError, DataError
from cudamatrix.schema.records import field, field_names, is_record, maker, record, replace
from cudamatrix.schema.values import HTTP_ALLOWED, cc_key, http_allowed, normalize_cc

__all__ = ["record", "field", "field_names", "replace", "validate", "build", "to_dict", "HTTP_ALLOWED", "cc_key",
           "http_allowed", "normalize_cc"]

T = TypeVar("T")

# class attribute read by pydantic for standard-library dataclasses
FORBID = {"extra": "forbid", "arbitrary_types_allowed": True}

def __getattr__(name: str) -> Any:
    """The annotated field types (``Ver``, ``CC``, ``Spec``, ``Req``) live in
    :mod:`cudamatrix.schema.annotated`, loaded when first asked: defining them loads ``packaging``."""
    if name in ("Ver", "CC", "Spec", "Req", "IndexUrl", "Name", "Label", "Local", "VersionText", "Driver"):
        # lazy: `detect --from` would load 5 ms more (python -X importtime; the hoisting's budget per command is 3% of its run): packaging.version, cudamatrix.schema.annotated, cudamatrix.safe.text
        from cudamatrix.schema import annotated

        return getattr(annotated, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_ADAPTERS: dict[type, Any] = {}


def _adapter(cls: type) -> Any:
    if cls not in _ADAPTERS:
        from pydantic import TypeAdapter

        _ADAPTERS[cls] = TypeAdapter(cls)
    return _ADAPTERS[cls]


def dotted(loc: tuple) -> str:
    """("releases", 3, "variants", 0, "cuda") -> "releases[3].variants[0].cuda"."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def validate(cls: type[T], data: Any, where: str | None, error: type[CudamatrixError] = DataError) -> T:
    """Validate ``data`` into ``cls``; on failure raise ``error`` naming ``where`` and each dotted path.

    ``where=None``: ``data`` maps file stems to their contents, and each problem names its own file
    (``torch.json: releases[2].version: ...``)."""
    from pydantic import ValidationError

    try:
        return _adapter(cls).validate_python(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            msg = err["msg"]
            if err["type"] == "unexpected_keyword_argument":
                msg = "unknown key"
            loc = tuple(err["loc"])
            place = where
            if where is None and loc:
                place, loc = f"{loc[0]}.json", loc[1:]
            problems.append(f"{place}: {dotted(loc) or '(top level)'}: {msg}")
        raise error("\n".join(problems[:20]), detail=problems) from None


def to_dict(obj: Any, records: bool = False) -> Any:
    """A JSON-ready copy of a dataclass tree (versions become strings).

    ``records``: a str that carries records (a matrix row's sources) is written as its records, as the data
    files hold them (``matrix show``, the overlay); otherwise as its text, as the models that quote a row
    (a Solution's ``matrix_source``, the journal) hold it."""
    if obj is None or isinstance(obj, (str, int, float)):
        if records and isinstance(obj, str) and type(obj) is not str and hasattr(obj, "as_json"):
            return obj.as_json()
        return obj
    if is_record(obj) and not isinstance(obj, type):
        return {name: to_dict(getattr(obj, name), records) for name in field_names(obj)}
    if isinstance(obj, dict):
        return {str(k): to_dict(v, records) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v, records) for v in obj]
    kind = type(obj)  # packaging's Version, told by name: this module does not load packaging
    if kind.__name__ == "Version" and kind.__module__ == "packaging.version":
        return str(obj)
    if hasattr(kind, "__dataclass_fields__"):  # a standard dataclass: its module is loaded already
        import dataclasses

        return {f.name: to_dict(getattr(obj, f.name), records) for f in dataclasses.fields(obj)}
    return obj


# --- building trusted data without validation -----------------------------------------------------

def _identity(value: Any) -> Any:
    return value


def _annotated_converter(tp: Any) -> Callable[[Any], Any]:
    """``Annotated[X, ...]``: the ``build`` of a metadata item that builds its own value from JSON (a row's
    sources), else the converter of ``X``."""
    base, *meta = typing.get_args(tp)
    for item in meta:
        if getattr(item, "build", None) is not None:
            return item.build
    return _converter(base)


def _converter(tp: Any) -> Callable[[Any], Any]:
    """A function turning JSON for type ``tp`` into the value the dataclass holds."""
    # lazy: `detect --from` would load 5 ms more (python -X importtime; the hoisting's budget per command is 3% of its run): packaging.version, cudamatrix.schema.annotated, cudamatrix.safe.text
    from cudamatrix.schema.annotated import Version, parse_version

    origin = typing.get_origin(tp)
    if origin is Annotated:
        return _annotated_converter(tp)
    if tp is Version:
        return parse_version
    if is_record(tp):
        return lambda value: build(tp, value)
    if origin is list:
        item = _converter(typing.get_args(tp)[0])
        if item is _identity:
            return _identity  # a fresh list from the JSON parser: kept
        return lambda value: [item(v) for v in value]
    if origin is dict:
        item = _converter(typing.get_args(tp)[1])
        if item is _identity:
            return _identity
        return lambda value: {k: item(v) for k, v in value.items()}
    if origin in (Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(inner) == 1:
            conv = _converter(inner[0])
            if conv is _identity:
                return conv
            return lambda value: None if value is None else conv(value)
        return _identity
    if origin is Literal or tp in (str, int, float, bool, Any):
        return _identity
    return _identity


_PLANS: dict[type, tuple[dict[str, Callable[[Any], Any] | None], Callable[[dict[str, Any]], Any]]] = {}


def _plan(cls: type) -> tuple[dict[str, Callable[[Any], Any] | None], Callable[[dict[str, Any]], Any]]:
    """Per init field of the dataclass ``cls``: the converter of its JSON value, None where the JSON value is
    kept as it is; and the function making an instance of the fields (:func:`~cudamatrix.schema.records.maker`).
    Worked out once per class."""
    if cls not in _PLANS:
        specs: dict[str, Any] = vars(cls)["__record_specs__"]
        if any(isinstance(s.type, str) for s in specs.values()):  # string annotations: evaluate them (slower)
            hints = typing.get_type_hints(cls, include_extras=True)
        else:
            hints = {name: s.type for name, s in specs.items()}
        plan: dict[str, Callable[[Any], Any] | None] = {}
        for name, spec in specs.items():
            if not spec.init:
                continue
            own = next((vars(k)[name] for k in cls.__mro__ if name in vars(k)), None)  # as stored, not as read
            # a field that builds its value on first read (matrix.sources.LazySource) keeps the JSON value
            conv = _identity if getattr(own, "takes_json", False) else _converter(hints[name])
            plan[name] = None if conv is _identity else conv
        _PLANS[cls] = plan, maker(cls)
    return _PLANS[cls]


def build(cls: type[T], data: Any) -> T:
    """Build the dataclass ``cls`` from trusted JSON (the shipped matrix) without validating it.

    Versions are parsed, nested dataclasses built; nothing else is checked, so use :func:`validate`
    for anything a user supplied. The tests check that both give the same result on the shipped data.
    Raises TypeError or ValueError on data of the wrong shape."""
    if not isinstance(data, dict):
        raise TypeError(f"{cls.__name__}: an object is needed, got {type(data).__name__}")
    plan, make = _plan(cls)
    kwargs = {}
    for key, value in data.items():
        try:
            conv = plan[key]
        except KeyError:
            raise TypeError(f"{cls.__name__}: unknown key {key!r}") from None
        kwargs[key] = value if conv is None else conv(value)
    obj: T = make(kwargs)
    return obj
