"""Targets the hard rules cannot tell apart, so that a fleet costs one check per class of targets, not per node.

The rules read a target's driver in three ways only: compared with a driver version the matrix states (a CUDA
release's minimum driver, minor-version compatibility, an architecture's first driver, a cuDNN or framework
floor, a Jetson driver), its branch (the first number: which CUDA it reports at most), and quoted in a message.
Two drivers of one branch that fall between the same two stated versions, and equal none of them, therefore get
the same verdicts from every rule: 580.82.07 and 580.95.05 are alike, both above every floor of the R580 rows
(issue #29: a fleet of 10,000 nodes with 2,000 driver patch levels). The stated versions are every text the
matrix holds under a field that names a driver, read from the matrix itself, so a floor added to the data moves
the classes with it. A verdict whose words quote the driver is shared with the target's own driver put where the
rule quoted it (:attr:`cudamatrix.solve.rules.Reason.around_driver`: a fact substituted, no sentence searched)
when both are desktop driver versions (a branch of three digits or more, dotted); otherwise that target is
checked itself.
"""
from __future__ import annotations

from bisect import bisect_right
from typing import Any

from cudamatrix.matrix.data import FrameworkRelease, Matrix, Variant
from cudamatrix.matrix.query import driver_version
from cudamatrix.safe.text import lazy
from cudamatrix.schema import to_dict
from cudamatrix.solve import rules
from cudamatrix.solve.target import Target

MIN_TARGETS = 16  # fewer targets than this: each is checked itself (reading the floors costs ~20 ms)
DESKTOP = lazy(r"\d{3,}(?:\.\d+)+")  # 580.65.06, 470.86: what a desktop driver reports


def stated_drivers(matrix: Matrix) -> list[tuple[int, ...]]:
    """Every driver version the matrix states anywhere (any field whose name has "driver"), sorted."""
    found: set[tuple[int, ...]] = set()
    todo: list[tuple[object, bool]] = [(to_dict(matrix), False)]
    while todo:
        value, under = todo.pop()
        if isinstance(value, dict):
            todo += [(v, under or "driver" in str(k)) for k, v in value.items()]
        elif isinstance(value, list):
            todo += [(v, under) for v in value]
        elif under and isinstance(value, (str, int)) and not isinstance(value, bool):
            try:
                found.add(driver_version(str(value)))
            except ValueError:
                continue
    return sorted(found)


def driver_class(driver: str | None, floors: list[tuple[int, ...]]) -> tuple:
    """The class of a driver among the stated versions: (branch, interval) when it equals none of them, else
    the driver itself (as for an empty or unreadable one)."""
    if not driver:
        return ("none", driver)
    try:
        have = driver_version(driver)
    except ValueError:
        return ("text", driver)
    at = bisect_right(floors, have)
    if at and floors[at - 1] == have:
        return ("stated", driver)
    return ("between", have[0], at)


class SharedChecks:
    """:func:`cudamatrix.solve.rules.check` for a fleet's targets, once per class of targets: the targets are
    grouped once (:attr:`of`: each target's class, :attr:`reps`: each class's first target), a build is checked
    on each class's first target (:meth:`on_classes`), and a member takes its class's verdict with its own
    driver where the words quote the driver (:meth:`member`). ``memo`` may be shared by the screens of one solve: it is keyed by
    the build and the class's facts, not by the targets."""

    def __init__(self, matrix: Matrix, targets: list[Target], memo: Memo | None = None) -> None:
        self.matrix = matrix
        self.targets = targets
        self.keys: dict[int, int] | None = None  # id(target) -> its class's number (None: each its own class)
        floors = floors_of(matrix) if len(targets) >= MIN_TARGETS else None
        classes: dict[tuple, int] = {}
        self.of = [classes.setdefault(class_key(t, floors), len(classes)) for t in targets]
        self.class_keys = list(classes)
        first: dict[int, Target] = {}
        for t, c in zip(targets, self.of, strict=True):
            first.setdefault(c, t)
        self.reps = [first[c] for c in range(len(classes))]
        if floors is not None:
            self.keys = {id(t): c for t, c in zip(targets, self.of, strict=True)}
        self.memo = Memo() if memo is None else memo
        self.failed = [0] * len(self.reps)  # per class: how many builds failed there (first_only)

    def on_class(self, release: FrameworkRelease, variant: Variant, number: int) -> Shared:
        """The verdict on class ``number``'s first target (checked once per build and class)."""
        slot = (id(release), id(variant), self.class_keys[number])
        hit = self.memo.verdicts.get(slot)
        if hit is None:
            rep = self.reps[number]
            found = rules.check(self.matrix, release, variant, rep)
            hit = self.memo.verdicts[slot] = Shared(found, rep.driver, _quotes(found, rep.driver))
        return hit

    def on_classes(self, release: FrameworkRelease, variant: Variant, first_only: bool = False
                   ) -> dict[int, Shared]:
        """The classes where the build breaks a rule, with the verdict there (``first_only``: only the first such
        class found, with the reasons found first: enough to know that the build does not fit)."""
        if first_only:
            return self._first_failing(release, variant)
        out: dict[int, Shared] = {}
        for number in range(len(self.reps)):
            hit = self.on_class(release, variant, number)
            if hit.reasons:
                out[number] = hit
                self.memo.failed_at.setdefault((id(release), id(variant)), _but_python(self.class_keys[number]))
        return out

    def _first_failing(self, release: FrameworkRelease, variant: Variant) -> dict[int, Shared]:
        """One class where the build breaks a rule (none: it fits): the rules every build is asked first
        (platform, Python) on every class, as they are cheap; then every rule, first on the class where the build
        failed in an earlier screen of the solve (but for the Python: a way out that changes it), then where the
        most builds failed so far. The order changes only how soon a failing class is found."""
        for number, rep in enumerate(self.reps):
            build = rules.Build(self.matrix, release, variant, rep)
            found = [r for rule in rules.BUILD_RULES for r in rule(build)]
            if found:
                return {number: Shared(found, rep.driver, None)}
        before = self.memo.failed_at.get((id(release), id(variant)))  # another screen of this solve: try there first
        for number in sorted(range(len(self.reps)), reverse=True,
                             key=lambda n: (_but_python(self.class_keys[n]) == before, self.failed[n])):
            hit = self.on_class(release, variant, number)
            if hit.reasons:
                self.failed[number] += 1
                self.memo.failed_at[(id(release), id(variant))] = _but_python(self.class_keys[number])
                return {number: hit}
        return {}

    def member(self, release: FrameworkRelease, variant: Variant, hit: Shared, target: Target
               ) -> list[rules.Reason]:
        """The reasons for ``target``, a member of the class ``hit`` is the verdict of: the class's own list when
        its words do not quote the driver or the driver is the same (do not change it), else a new list with the
        target's driver where the words quote it, or the target's own check when either driver is not a desktop
        one."""
        if hit.quotes is None or target.driver == hit.driver:
            return hit.reasons
        driver = target.driver
        if hit.quotes and driver and DESKTOP.fullmatch(driver):
            return [r.for_driver(driver) for r in hit.reasons]
        return rules.check(self.matrix, release, variant, target)  # another kind of driver

    def check(self, release: FrameworkRelease, variant: Variant, target: Target) -> list[rules.Reason]:
        """The reasons the build does not fit ``target``, one of the targets grouped (a new list)."""
        number = self.keys.get(id(target)) if self.keys is not None else None
        if number is None:
            return rules.check(self.matrix, release, variant, target)
        return list(self.member(release, variant, self.on_class(release, variant, number), target))


class Memo:
    """What the screens of one solve share: each build's verdict per class (by the build and the class's facts,
    not by the targets), the class where each build failed first (without its Python), each build's problems
    with a request (by the build and the request's text: the ways out re-screen the same request), and each
    build's candidate (its version text made once)."""

    def __init__(self) -> None:
        self.verdicts: dict[tuple, Shared] = {}
        self.failed_at: dict[tuple, tuple] = {}
        self.requested: dict[tuple, list[str]] = {}
        self.candidates: dict[tuple, Any] = {}  # (id(release), id(variant)) -> search.Candidate


class Shared:
    """A class's verdict on one build: its first target's reasons and driver, and whether the words quote that
    driver (:func:`_quotes`: None no, True yes, False yes but the driver is not a desktop one)."""

    __slots__ = ("reasons", "driver", "quotes")

    def __init__(self, reasons: list[rules.Reason], driver: str | None, quotes: bool | None) -> None:
        self.reasons, self.driver, self.quotes = reasons, driver, quotes


def _quotes(reasons: list[rules.Reason], driver: str | None) -> bool | None:
    """None when no reason quotes the target's driver; else whether a member's driver may be put in its place
    (True for a desktop driver; False: each member is then checked itself)."""
    if not driver or all(r.around_driver is None for r in reasons):
        return None
    return DESKTOP.fullmatch(driver) is not None


def class_key(target: Target, floors: list[tuple[int, ...]] | None) -> tuple:
    """What the rules read of a target, its driver as its class among the stated versions (``floors``; None: the
    driver itself), and the names of its GPUs (messages quote them)."""
    driver = driver_class(target.driver, floors) if floors is not None else ("exact", target.driver)
    return driver, target.key()[1:], tuple(sorted({(g.name or "", g.compute_capability) for g in target.gpus}))


def _but_python(key: tuple) -> tuple:
    """A class key (:func:`class_key`) without the target's Python."""
    driver, rest, gpus = key
    return driver, rest[:1] + rest[2:], gpus


_FLOORS: list[tuple[Matrix, list[tuple[int, ...]]]] = []  # the last matrix read, and its stated drivers


def floors_of(matrix: Matrix) -> list[tuple[int, ...]]:
    """:func:`stated_drivers` of the matrix, read once per matrix (a solve screens several times)."""
    if not _FLOORS or _FLOORS[0][0] is not matrix:
        _FLOORS[:] = [(matrix, stated_drivers(matrix))]
    return _FLOORS[0][1]
