"""Are the names of a request real distributions? No I/O: the caller passes the index lookup.

A name the matrix knows (a framework, its companions and plugins, the ``nvidia-*`` wheels its builds pin) is
known. Any other name is asked of the index pip would use: listed, it is passed to the installer as given; not
listed by any index, it is an input error with a did-you-mean (``torhc`` -> ``torch``); when no index could
answer (offline, an index that is not http(s), a ``--find-links`` source the tool does not read) it is
unchecked, and said so, never counted as fitting.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from cudamatrix.errors import UsageError
from cudamatrix.matrix.data import Matrix
from cudamatrix.names import EXTENSIONS, FAMILIES, canonical, requirement
from cudamatrix.safe.text import lazy
from cudamatrix.schema import field, record

SHOWN = 10  # names a message lists; the others are counted

# name -> True (an index lists it), False (every index answered and none lists it), None (no answer)
Lookup = Callable[[str], "bool | None"]


@record
class NameCheck:
    """The names asked about: those no index lists (with close known names), and those no index could answer."""

    unknown: list[tuple[str, list[str]]] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)
    why_unchecked: str = ""

    def raise_unknown(self, where: str = "") -> None:
        """UsageError (exit 2) naming every unknown name and what it may have meant."""
        if not self.unknown:
            return
        parts = [f"{name!r}" + (f" (did you mean {' or '.join(repr(s) for s in close)}?)" if close else "")
                 for name, close in self.unknown[:SHOWN]]
        if len(self.unknown) > SHOWN:
            parts.append(f"and {len(self.unknown) - SHOWN} more")
        raise UsageError(f"{where}no distribution named {', '.join(parts)}: the matrix does not know "
                         f"{'it' if len(parts) == 1 else 'them'} and the index does not list "
                         f"{'it' if len(parts) == 1 else 'them'}",
                         hint="check the spelling; a package from another index needs that index "
                              "(--extra-index-url in the file, or PIP_EXTRA_INDEX_URL)")

    def raise_unchecked(self, where: str = "") -> None:
        """UsageError (exit 2) naming every name no index could answer for: a gate that cannot check a name
        does not pass it."""
        if not self.unchecked:
            return
        shown = ", ".join(repr(n) for n in self.unchecked[:SHOWN]) + \
            (f" and {len(self.unchecked) - SHOWN} more" if len(self.unchecked) > SHOWN else "")
        raise UsageError(f"{where}cannot check {shown}: not a distribution the matrix knows, and "
                         f"{self.why_unchecked}; a name that cannot be checked does not pass",
                         hint="make the index reachable (the file's --index-url, PIP_INDEX_URL), or fix the name")

    def sentences(self) -> list[str]:
        """One line per unchecked name, for people."""
        return [f"{name}: unchecked: not a distribution the matrix knows, and {self.why_unchecked}"
                for name in self.unchecked]


def family_names() -> set[str]:
    """The families' own distribution names and aliases, and the extensions solved with them (no matrix read):
    most requests name only these."""
    return {name for family in FAMILIES.values() for name in (*family.distributions, *family.aliases)} | EXTENSIONS


# a PEP 508 requirement's name is its leading run of letters, digits and ``-_.`` (not ending in ``-_.``)
_LEADING_NAME = lazy(r"\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")


def requirement_name(text: str) -> str:
    """The distribution name a requirement starts with (``"nvidia-cudnn-cu12==9.1.0.70; sys_platform ==
    'linux'"`` -> ``nvidia-cudnn-cu12``), read without parsing the rest: the matrix's 1,268 pins parsed by
    ``packaging.requirements`` cost ``lock`` and ``check`` 20 % of their time. A text that starts with no name
    goes through packaging, which raises ``InvalidRequirement``."""
    m = _LEADING_NAME.match(text)
    return m.group(1) if m else requirement(text).name


def matrix_names(matrix: Matrix, wanted: Iterable[str] | None = None) -> set[str]:
    """Every distribution name the matrix knows: the families' distributions, aliases and plugins, the
    names of the wheels its builds pin or bring, and the packages of its find-links pages. ``wanted``: the names asked about; the families' rows are read
    one family at a time until every one of them is found (framework names alone read none; a torch lock file's
    ``nvidia-*`` names are all in torch's rows: TensorFlow's and JAX's are then never built), and all of them when
    one is not or when ``wanted`` is None."""
    names = family_names()
    asked = None if wanted is None else {canonical(n) for n in wanted}
    for family in FAMILIES.values():
        if asked is not None and asked <= names:
            break
        for release in matrix.frameworks(family.name):
            names.update(release.companions)
            for v in release.variants:
                for text in (*v.nvidia_pins, *v.extra_packages):
                    names.add(canonical(requirement_name(text)))
    if asked is None or not asked <= names:  # the packages of find-links pages (pyg-lib is on no index)
        names.update(canonical(b.name) for pages in matrix.extensions.find_links for b in pages.builds)
    return names


def suggestions(name: str, known: Iterable[str]) -> list[str]:
    """Known names close to a mistyped one (difflib's ratio of at least 0.75: ``torhc`` -> ``torch``,
    ``torchvison`` -> ``torchvision``), best first."""
    import difflib  # on first use: only a name that is not known asks

    return difflib.get_close_matches(canonical(name), sorted(set(known)), n=3, cutoff=0.75)


# names asked of the index at once, and the bound on the time all of them may take together
LOOKUP_WORKERS = 32
LOOKUP_DEADLINE_S = 120.0


def per_thread(make: Callable[[], Lookup]) -> Lookup:
    """A Lookup that builds its own ``make()`` in each thread that asks (an index client's connections are not
    shared between threads)."""
    mine = threading.local()

    def lookup(name: str) -> bool | None:
        if not hasattr(mine, "ask"):
            mine.ask = make()
        return mine.ask(name)

    return lookup


def ask_all(keys: list[str], lookup: Lookup, workers: int = LOOKUP_WORKERS,
            deadline_s: float = LOOKUP_DEADLINE_S) -> dict[str, bool | None]:
    """``lookup`` of every key, ``workers`` at a time; a key with no answer within ``deadline_s`` of the start
    (all keys together) is None, as is one whose lookup raised. The workers are daemon threads that take no key
    after the deadline: a lookup that never returns holds neither the answer nor the end of the process."""
    answers: dict[str, bool | None] = dict.fromkeys(keys)
    if len(keys) <= 1 or workers <= 1:
        return {k: _ask(lookup, k) for k in keys}
    todo = iter(keys)
    lock = threading.Lock()
    finished = threading.Event()
    left = [len(keys)]

    def work() -> None:
        while True:
            with lock:
                key = next(todo, None)
            if key is None or finished.is_set():
                return
            answer = _ask(lookup, key)
            with lock:
                if not finished.is_set():
                    answers[key] = answer
                    left[0] -= 1
                    if left[0] == 0:
                        finished.set()

    for _ in range(min(workers, len(keys))):
        threading.Thread(target=work, name="cudamatrix-names", daemon=True).start()
    finished.wait(deadline_s)
    with lock:
        finished.set()  # the deadline: what is not answered now stays None (unchecked)
        return dict(answers)


def _ask(lookup: Lookup, key: str) -> bool | None:
    try:
        return lookup(key)
    except Exception:  # a lookup that fails leaves the name unchecked, never fitting
        return None


def check_names(names: Iterable[str], known: set[str], lookup: Lookup | None, why_unchecked: str = "",
                workers: int = LOOKUP_WORKERS, deadline_s: float = LOOKUP_DEADLINE_S) -> NameCheck:
    """The names neither the matrix nor the index knows, and those that could not be asked. ``lookup`` None:
    no index to ask at all. Each distinct name is asked once, ``workers`` at a time (``lookup`` must then be
    safe to call from several threads: :func:`per_thread`), all within ``deadline_s``."""
    out = NameCheck(why_unchecked=why_unchecked or "no package index could be asked whether it exists")
    first: dict[str, str] = {}  # canonical name -> the name as first written
    for name in names:
        key = canonical(name)
        if key not in known:
            first.setdefault(key, name)
    answers = ask_all(list(first), lookup, workers, deadline_s) if lookup is not None else dict.fromkeys(first)
    for key, name in first.items():
        if answers[key] is False:  # the close names of those a message shows (difflib reads every known name)
            out.unknown.append((name, suggestions(key, known) if len(out.unknown) < SHOWN else []))
        elif answers[key] is None:
            out.unchecked.append(name)
    return out
