"""Targets the hard rules cannot tell apart, so that a fleet costs one check per class of targets, not per node.

The rules read a target's driver in three ways only: compared with a driver version the matrix states (a CUDA
release's minimum driver, minor-version compatibility, an architecture's first driver, a cuDNN or framework
floor, a Jetson driver), its branch (the first number: which CUDA it reports at most), and quoted in a message.
Two drivers of one branch that fall between the same two stated versions, and equal none of them, therefore get
the same verdicts from every rule: 580.82.07 and 580.95.05 are alike, both above every floor of the R580 rows
(issue #29: a fleet of 10,000 nodes with 2,000 driver patch levels). The stated versions are every text the
matrix holds under a field that names a driver, read from the matrix itself, so a floor added to the data moves
the classes with it. A verdict whose words quote the driver is shared with the words changed to the target's
driver when both are desktop driver versions (a branch of three digits or more, dotted: no CUDA, Python, compute
capability or package version of a message can be equal to one, and a stated version never is: the class
excludes them); otherwise that target is checked itself.
"""
from __future__ import annotations

import re
from bisect import bisect_right

from cudamatrix.matrix.data import FrameworkRelease, Matrix, Variant
from cudamatrix.matrix.query import driver_version
from cudamatrix.solve import rules
from cudamatrix.solve.target import Target

MIN_TARGETS = 16  # fewer targets than this: each is checked itself (reading the floors costs ~20 ms)
_DESKTOP = re.compile(r"\d{3,}(?:\.\d+)+")  # 580.65.06, 470.86: what a desktop driver reports


def stated_drivers(matrix: Matrix) -> list[tuple[int, ...]]:
    """Every driver version the matrix states anywhere (any field whose name has "driver"), sorted."""
    from cudamatrix.schema import to_dict

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
    """:func:`cudamatrix.solve.rules.check` for many targets, its verdict shared within a driver class."""

    def __init__(self, matrix: Matrix, targets: list[Target]) -> None:
        self.matrix = matrix
        self.keys: dict[int, int] | None = None  # id(target) -> its class's number
        if len(targets) >= MIN_TARGETS:
            floors = stated_drivers(matrix)
            classes: dict[tuple, int] = {}
            self.keys = {id(t): classes.setdefault(
                (driver_class(t.driver, floors), t.key()[1:],
                 tuple(sorted({(g.name or "", g.compute_capability) for g in t.gpus}))), len(classes))
                for t in targets}
        self.memo: dict[tuple, tuple[list[rules.Reason], str | None]] = {}
        self.quoted: dict[str, re.Pattern] = {}

    def check(self, release: FrameworkRelease, variant: Variant, target: Target) -> list[rules.Reason]:
        """The reasons the build does not fit ``target`` (the class's, when they do not quote its driver)."""
        key = self.keys.get(id(target)) if self.keys is not None else None
        if key is None:
            return rules.check(self.matrix, release, variant, target)
        slot = (id(release), id(variant), key)
        hit = self.memo.get(slot)
        if hit is None:
            found = rules.check(self.matrix, release, variant, target)
            self.memo[slot] = (found, target.driver)
            return list(found)
        reasons, driver = hit
        if driver == target.driver or not any(driver and driver in r.message for r in reasons):
            return list(reasons)
        if driver and target.driver and _DESKTOP.fullmatch(driver) and _DESKTOP.fullmatch(target.driver):
            quoted = self.quoted.get(driver)
            if quoted is None:
                quoted = self.quoted[driver] = _quoting(driver)
            return [rules.Reason(r.rule, quoted.sub(target.driver, r.message), r.row, r.need_driver)
                    for r in reasons]
        return rules.check(self.matrix, release, variant, target)  # its words name another kind of driver


def _quoting(driver: str) -> re.Pattern:
    """The driver as a whole number in a sentence (580.65.06, not within 580.65.061 or 1580.65.06)."""
    return re.compile(r"(?<![\d.])" + re.escape(driver) + r"(?![\d]|\.\d)")
