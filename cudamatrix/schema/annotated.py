"""The annotated field types of the matrix rows (``Ver``, ``CC``, ``Spec``, ``Req``): what each holds at run
time, and what validation checks. Loaded only by the matrix and by validation (defining them loads
``packaging``); the start-up path of a command never needs them."""
from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Any, Callable

from packaging.version import Version

from cudamatrix.safe.text import lazy
from cudamatrix.schema.values import HTTP_ALLOWED, normalize_cc


@lru_cache(maxsize=4096)
def _normalize_cc(value: str) -> str:
    return normalize_cc(value)


def _version(value: Any) -> Version:
    if isinstance(value, Version):
        return value
    if not isinstance(value, str):
        raise ValueError('versions are strings, never numbers (write "12.1", not 12.1)')
    return parse_version(value)


@lru_cache(maxsize=8192)
def parse_version(value: str) -> Version:
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


_URL_UNSAFE = lazy(r"[\s\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\"'<>\\`]")


def _index_url(value: str) -> str:
    """An index URL as pip and uv read it on one line of a requirements file: https (http only with
    ``--allow-http``), a host, no credentials, and no space, quote or control character (a line break would
    add a line: ``--trusted-host evil.example``)."""
    from urllib.parse import urlsplit

    if _URL_UNSAFE.search(value):
        raise ValueError("an index URL holds no space, quote, backslash, line break or control character")
    try:
        url = urlsplit(value)
        netloc, port = url.netloc, url.port  # a port that is not a number raises here
    except ValueError as exc:
        raise ValueError(f"not a URL ({exc})") from None
    if url.scheme not in ("https", "http") or not url.hostname or not netloc:
        raise ValueError("an index URL is https://HOST/PATH")
    if url.scheme == "http" and not HTTP_ALLOWED[0]:
        raise ValueError("not https (an http index lets anyone on the path replace the wheels; --allow-http "
                         "accepts it on a trusted network)")
    if "@" in netloc:
        raise ValueError("credentials do not belong in the matrix (pip reads them from ~/.netrc or a keyring)")
    del port
    return value


def _matching(pattern: str, what: str) -> Callable[[str], str]:
    """A check that a text matches ``pattern`` whole (``\\Z``: no trailing line break slips through)."""
    compiled = lazy(pattern + r"\Z")

    def check(value: str) -> str:
        if not compiled.match(value):
            raise ValueError(f"not {what}: {value!r}")
        return value

    return check


_name = _matching(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?", "a PEP 508 name")
_token = _matching(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}", "a label (letters, digits and . _ + -)")
_local = _matching(r"\+[A-Za-z0-9]+(?:[._-][A-Za-z0-9]+)*", "a local version label (+cu121)")  # PEP 440, with "+"
_driver = _matching(r"[0-9]{1,4}(?:\.[0-9]{1,4}){0,3}", "a driver version (535.104.05)")


def _version_text(value: str) -> str:
    parse_version(value)  # raises ValueError naming it
    if value != value.strip():
        raise ValueError(f"not a version: {value!r}")
    return value


def _iso_date(value: str) -> str:
    from datetime import date

    try:
        if len(value) != 10:
            raise ValueError
        date.fromisoformat(value)
    except ValueError:
        raise ValueError(f"not an ISO date (YYYY-MM-DD): {value!r}") from None
    return value


def _url(value: str) -> str:
    if not value.startswith("https://") or any(c.isspace() for c in value) or len(value) <= len("https://"):
        raise ValueError(f"not an https URL: {value!r}")
    return value


def _text(value: str) -> str:
    if not value.strip():
        raise ValueError("empty text")
    return value


class _Check:
    """Validation metadata for ``Annotated[...]`` fields, read by pydantic only when it validates.

    It implements pydantic's ``__get_pydantic_core_schema__`` hook itself, so that defining the annotated
    types below imports nothing from pydantic: the run-time path builds the dataclasses without it."""

    def __init__(self, func: Callable[[Any], Any], plain: bool) -> None:
        self.func = func
        self.plain = plain  # True: the function alone parses the value; False: after the str check

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        if self.plain:
            return core_schema.no_info_plain_validator_function(self.func)
        return core_schema.no_info_after_validator_function(self.func, handler(source))


# The annotated types of the matrix rows: what they hold at run time, and what validation checks.
Ver = Annotated[Version, _Check(_version, plain=True)]  # a version string, parsed
CC = Annotated[str, _Check(_normalize_cc, plain=False)]  # a compute capability, normalised to "7.5"
Spec = Annotated[str, _Check(_specifier, plain=False)]  # a PEP 440 specifier set
Req = Annotated[str, _Check(_requirement, plain=False)]  # a PEP 508 requirement
IndexUrl = Annotated[str, _Check(_index_url, plain=False)]  # a package index URL, one line, https
Name = Annotated[str, _Check(_name, plain=False)]  # a PEP 508 name (distribution, extra)
Label = Annotated[str, _Check(_token, plain=False)]  # one word: a variant name ("cu121"), a soname
Local = Annotated[str, _Check(_local, plain=False)]  # a PEP 440 local version label with its "+"
VersionText = Annotated[str, _Check(_version_text, plain=False)]  # a PEP 440 version kept as text ("3.10")
Driver = Annotated[str, _Check(_driver, plain=False)]  # a driver version ("535.104.05", "452.39")
IsoDate = Annotated[str, _Check(_iso_date, plain=False)]  # "2026-11-26"
Url = Annotated[str, _Check(_url, plain=False)]  # an https URL without spaces
Text = Annotated[str, _Check(_text, plain=False)]  # non-empty text
