"""The common shapes of a declared requirement, read without importing ``packaging`` (issue #29).

``packaging.requirements`` pulls in its specifiers, markers, tags, sysconfig and logging: on the GPU machine,
where the image's own ``packaging`` has no bytecode, that import alone cost doctor about 70 ms, for the
``Requires-Dist`` lines of torch and cuda-toolkit, which all have one shape: ``name[extras]==1.2.3.*,<14 ;
(sys_platform == 'linux' and ...) and extra == 'all'``. :func:`parse` reads exactly that shape: plain release
versions (digits and dots) under ``== != < <= > >=`` (``.*`` after ``==``/``!=``), and markers that are
``and``/``or``/parentheses over ``variable op "string"``. Anything else returns None, and so does every
question this module cannot answer exactly the way PEP 440 and PEP 508 do (a version with a pre-release,
local or epoch part, ``~=``, ``in``, a variable the environment does not hold): the caller asks ``packaging``
then, so an answer never differs from packaging's. Text for people (``str()``) is always packaging's own.
Re-run after the package's rooms were redrawn (issue #41): ``doctor --json`` on a torch venv with every question
sent to packaging instead takes 24 % more CPU time (15 paired runs, median ratio 0.81), so this reader stays.
"""
from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

from cudamatrix.names import canonical
from cudamatrix.safe.text import lazy

_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_RELEASE = lazy(r"\d+(?:\.\d+)*")
_INSTALLED = re.compile(r"(\d+(?:\.\d+)*)(?:\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?", re.IGNORECASE)  # release[+local]
_CLAUSE = re.compile(r"\s*(==|!=|<=|>=|<|>)\s*(\d+(?:\.\d+)*)(\.\*)?\s*")
_HEAD = lazy(rf"\s*({_NAME})\s*(?:\[\s*((?:{_NAME}\s*,\s*)*{_NAME})?\s*\])?\s*([^;]*?)\s*(?:;(.*))?")
_TOKEN = lazy(r"\s*(?:(\()|(\))|(and|or)\b|([a-z_]+)|(==|!=|<=|>=|<|>)|'([^']*)'|\"([^\"]*)\")")
_VERSION_VARS = ("python_version", "python_full_version")  # compared as versions (PEP 508)
# compared as strings by every packaging release (the environment doctor builds holds them all)
_STRING_VARS = ("sys_platform", "platform_system", "platform_machine", "os_name", "implementation_name",
                "platform_python_implementation", "extra")
_VERSION_LIKE = lazy(r"\s*[vV]?\d")  # a literal packaging might read as a version: not decided here


class Unanswered(Exception):
    """A question outside the shapes this module answers exactly (the caller asks packaging)."""


def _key(version: str) -> tuple[int, ...]:
    """A plain release's comparison key: PEP 440 ignores trailing zeros (1.0 == 1)."""
    parts = [int(x) for x in version.split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def _compare(have: str, op: str, want: str, prefix: bool = False) -> bool:
    """``have op want`` for two plain releases, as PEP 440 orders them (``prefix``: ``want.*``)."""
    if prefix:
        got = [int(x) for x in have.split(".")]
        need = [int(x) for x in want.split(".")]
        got += [0] * (len(need) - len(got))
        same = got[:len(need)] == need
        return same if op == "==" else not same
    a, b = _key(have), _key(want)
    return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


class Clause:
    """One ``op version`` of a specifier set (``operator``/``version`` as packaging's ``Specifier`` has them)."""

    __slots__ = ("operator", "version", "_prefix")

    def __init__(self, operator: str, version: str, prefix: bool) -> None:
        self.operator, self._prefix = operator, prefix
        self.version = version + (".*" if prefix else "")

    def matches(self, have: str) -> bool:
        return _compare(have, self.operator, self.version[:-2] if self._prefix else self.version, self._prefix)

    def __str__(self) -> str:
        return self.operator + self.version


class Specifiers:
    """A specifier set of plain releases; ``contains`` answers for a plain release and asks packaging otherwise."""

    def __init__(self, text: str, clauses: list[Clause]) -> None:
        self._text, self._clauses = text, clauses

    def __iter__(self) -> Iterator[Clause]:
        return iter(self._clauses)

    def __len__(self) -> int:
        return len(self._clauses)

    def contains(self, item: Any, prereleases: bool | None = None) -> bool:
        """Whether ``item`` satisfies every clause (a plain release has no pre-release to admit or refuse). A
        local label (``2.9.1+cu128``, the PyTorch index's builds) does not count against clauses without one,
        which are all there are here: PEP 440 compares the public part (``>V`` refuses V's own local builds,
        and so does the public comparison)."""
        m = _INSTALLED.fullmatch(item) if isinstance(item, str) else None
        if m is not None:
            return all(c.matches(m.group(1)) for c in self._clauses)
        return self.packaging().contains(item, prereleases=prereleases)

    def packaging(self):
        from packaging.specifiers import SpecifierSet

        return SpecifierSet(self._text)

    def __str__(self) -> str:
        return _specifier_text(self._text)


class Requirement:
    """A requirement of the common shape: ``name``, ``extras``, ``specifier`` as packaging's; the marker is
    evaluated here (:meth:`applies`), and ``marker``/``str()`` are packaging's (imported then)."""

    url = None

    def __init__(self, text: str, name: str, extras: set[str], specifier: Specifiers, marker: list | None) -> None:
        self.text, self.name, self.extras, self.specifier = text, name, extras, specifier
        self._marker = marker

    @property
    def marker(self):
        from packaging.markers import Marker

        return None if self._marker is None else Marker(self.text.split(";", 1)[1])

    def applies(self, environment: Mapping[str, str]) -> bool:
        """The marker's value in ``environment`` (True without one); raises Unanswered outside the shapes here."""
        return True if self._marker is None else _evaluate(self._marker, environment)

    def __str__(self) -> str:
        return _requirement_text(self.text)


# packaging's text for people, made once per text: forty extensions pinning torch==2.6.0 say it forty times
@lru_cache(maxsize=1024)
def _specifier_text(text: str) -> str:
    from packaging.specifiers import SpecifierSet

    return str(SpecifierSet(text))


@lru_cache(maxsize=1024)
def _requirement_text(text: str) -> str:
    from packaging.requirements import Requirement as Full

    return str(Full(text))


def parse(text: str) -> Requirement | None:
    """The requirement, when ``text`` has the common shape (see the module's note); None otherwise."""
    m = _HEAD.fullmatch(text)
    if m is None:
        return None
    name, extras, spec, marker_text = m.groups()
    specifier = specifiers(spec or "")
    if specifier is None:
        return None
    marker = None
    if marker_text is not None:
        marker = _parse_marker(marker_text)
        if marker is None:
            return None
    names = {e.strip() for e in extras.split(",")} if extras else set()
    return Requirement(text, name, names, specifier, marker)


def specifiers(text: str) -> Specifiers | None:
    """A bare specifier set (``">=2.5,<2.6"``) of plain releases, None otherwise (see the module's note)."""
    clauses: list[Clause] = []
    for part in text.split(",") if text.strip() else []:
        c = _CLAUSE.fullmatch(part)
        if c is None or (c.group(3) and c.group(1) not in ("==", "!=")):
            return None
        clauses.append(Clause(c.group(1), c.group(2), bool(c.group(3))))
    return Specifiers(text, clauses)


_KINDS = ("", "(", ")", "logic", "var", "op", "str", "str")  # by the group of _TOKEN that matched


@lru_cache(maxsize=256)
def _parse_marker(text: str) -> list | None:
    """``[atom, "and"|"or", atom, ...]`` with an atom ``(variable, op, value)`` or a nested list; None when
    the text is not of the plain shape. One per text (a metapackage repeats one marker on every line; the
    answer is only read)."""
    tokens: list[tuple[str, str]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        t = _TOKEN.match(text, pos)
        if t is None or t.lastindex is None:
            return None
        pos = t.end()
        tokens.append((_KINDS[t.lastindex], t.group(t.lastindex)))
    try:
        expr, end = _expr(tokens, 0)
    except (IndexError, ValueError):
        return None
    return expr if end == len(tokens) else None


def _expr(tokens: list[tuple[str, str]], i: int) -> tuple[list, int]:
    out: list = []
    while True:
        kind, value = tokens[i]
        if kind == "(":
            inner, i = _expr(tokens, i + 1)
            if tokens[i][0] != ")":
                raise ValueError("unbalanced")
            out.append(inner)
            i += 1
        elif kind == "var" and tokens[i + 1][0] == "op" and tokens[i + 2][0] == "str" and \
                _plain(value, tokens[i + 1][1], tokens[i + 2][1]):
            out.append((value, tokens[i + 1][1], tokens[i + 2][1]))
            i += 3
        else:
            raise ValueError("not a plain comparison")
        if i < len(tokens) and tokens[i][0] == "logic":
            out.append(tokens[i][1])
            i += 1
            continue
        return out, i


def _plain(var: str, op: str, value: str) -> bool:
    """A comparison answered here: a version variable against a plain release, or a string variable tested
    for (in)equality with a literal no packaging release could read as a version."""
    if var in _VERSION_VARS:
        return bool(_RELEASE.fullmatch(value))
    return var in _STRING_VARS and op in ("==", "!=") and not _VERSION_LIKE.match(value)


def _evaluate(expr: list, environment: Mapping[str, str]) -> bool:
    """PEP 508: ``and`` binds tighter than ``or``."""
    groups: list[list[bool]] = [[]]
    for item in expr:
        if item == "or":
            groups.append([])
        elif item != "and":
            groups[-1].append(_evaluate(item, environment) if isinstance(item, list) else _atom(item, environment))
    return any(all(g) for g in groups)


def _atom(atom: tuple[str, str, str], environment: Mapping[str, str]) -> bool:
    var, op, value = atom
    have = environment.get(var)
    if not isinstance(have, str):
        raise Unanswered(var)
    if var in _VERSION_VARS:
        if not _RELEASE.fullmatch(have):
            raise Unanswered(have)
        return _compare(have, op, value)
    if var == "extra":  # PEP 685: extra names compare normalised

        have, value = canonical(have), canonical(value)
    return (have == value) if op == "==" else (have != value)
