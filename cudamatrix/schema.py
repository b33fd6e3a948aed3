"""Validation and serialisation of the package's dataclasses.

The models are plain standard-library dataclasses, so that the hot path (``detect``, ``doctor``,
``fix`` on a healthy environment) never imports pydantic. Validation of untrusted input
(a data file, a saved environment) builds a pydantic ``TypeAdapter`` over the same dataclasses on
demand: unknown keys are refused, and an error names the file and the dotted path of the bad value.
Field annotations are strings (``from __future__ import annotations``); the special names used in
them (``Ver``, ``Spec``, ``CC``, ``Req``) are bound to pydantic validators only when validating.
"""
from __future__ import annotations

import dataclasses
import sys
from functools import lru_cache
from typing import Any, TypeVar

from packaging.version import Version

from cudamatrix.errors import DataError

T = TypeVar("T")

# class attribute read by pydantic for standard-library dataclasses
FORBID = {"extra": "forbid", "arbitrary_types_allowed": True}


@lru_cache(maxsize=4096)
def _normalize_cc(value: str) -> str:
    return normalize_cc(value)


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


def cc_key(cc: str) -> tuple[int, int]:
    """Sort key of a compute capability ("8.6" -> (8, 6)), ignoring an a/f suffix."""
    major, _, minor = cc.rstrip("af").partition(".")
    return int(major), int(minor or 0)


def _version(value: Any) -> Version:
    if isinstance(value, Version):
        return value
    if not isinstance(value, str):
        raise ValueError('versions are strings, never numbers (write "12.1", not 12.1)')
    return _parse_version(value)


@lru_cache(maxsize=8192)
def _parse_version(value: str) -> Version:
    from packaging.version import InvalidVersion

    try:
        return Version(value)
    except InvalidVersion:
        raise ValueError(f"not a version: {value!r}") from None


def _specifier(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("a version specifier string is needed")
    return _check_specifier(value)


@lru_cache(maxsize=4096)
def _check_specifier(value: str) -> str:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        SpecifierSet(value)
    except InvalidSpecifier:
        raise ValueError(f"not a version specifier: {value!r}") from None
    return value


def _requirement(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("a requirement string is needed")
    return _check_requirement(value)


@lru_cache(maxsize=8192)
def _check_requirement(value: str) -> str:
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        Requirement(value)
    except InvalidRequirement as exc:
        raise ValueError(f"not a requirement: {value!r} ({exc})") from None
    return value


def _bind_validator_names() -> None:
    """Bind the annotation names to pydantic validators in every module that defines models."""
    from typing import Annotated

    from pydantic import AfterValidator, PlainValidator

    names = {
        "Ver": Annotated[Version, PlainValidator(_version)],
        "Spec": Annotated[str, AfterValidator(_specifier)],
        "CC": Annotated[str, AfterValidator(_normalize_cc)],
        "Req": Annotated[str, AfterValidator(_requirement)],
    }
    for modname in ("cudamatrix.matrix.data", "cudamatrix.models"):
        module = sys.modules.get(modname)
        if module is not None:
            for key, value in names.items():
                module.__dict__.setdefault(key, value)


@lru_cache(maxsize=None)
def _adapter(cls: type):
    import importlib

    importlib.import_module(cls.__module__)
    _bind_validator_names()
    from pydantic import TypeAdapter

    return TypeAdapter(cls)


def dotted(loc: tuple) -> str:
    """("releases", 3, "variants", 0, "cuda") -> "releases[3].variants[0].cuda"."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def validate(cls: type[T], data: Any, where: str | None, error: type[Exception] = DataError) -> T:
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


def to_dict(obj: Any) -> Any:
    """A JSON-ready copy of a dataclass tree (versions become strings)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): to_dict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, Version):
        return str(obj)
    return obj
