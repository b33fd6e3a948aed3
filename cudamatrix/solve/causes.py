"""Why nothing fits: structured causes (the rule and the machines it blocks) and the nearest ways out
(upgrade the driver, pin an older release, use the CPU build, change Python, split environments).
No I/O; :func:`cudamatrix.solve.solver.solve` raises the NoSolution this builds.

:func:`no_solution` is a loop over two registries of small functions, each taking one :class:`Failure` (a
requested family with no fitting candidate): :data:`CAUSES` says why, :data:`WAYS_OUT` what would change that.
"""
from __future__ import annotations

from typing import Callable

from packaging.version import Version

from cudamatrix.errors import NoSolution
from cudamatrix.matrix.data import Matrix
from cudamatrix.matrix.query import driver_version
from cudamatrix.models import Cause, Rejection, WayOut
from cudamatrix.safe.shells import Said, pip
from cudamatrix.solve import rules
from cudamatrix.solve.request import Request
from cudamatrix.solve.search import Candidate, Verdict
from cudamatrix.solve.target import Target

Verdicts = dict[str, list[Verdict]]  # family -> why each of its candidates was turned down


class Failure:
    """One requested family with no fitting candidate: every verdict on it, those the request did not turn
    down, and, in a fleet, the machines that alone block a build that fits every other one."""

    def __init__(self, matrix: Matrix, request: Request, reps: list[Target], unique: dict[tuple, list[Target]],
                 family: str, entries: list[Verdict]) -> None:
        self.matrix, self.request, self.reps, self.family = matrix, request, reps, family
        self.entries = entries
        self.in_request = [v for v in entries if not any(r.rule == "request" for r in v.reasons)]
        self.names = {key: [t.name for t in group] for key, group in unique.items()}
        self.blocking = _blocking(self.in_request) if len(unique) > 1 else {}

    def fits_everywhere(self, c: Candidate) -> bool:
        """The build breaks no rule on any target (a build the request turned down was never checked)."""
        return all(not rules.check(self.matrix, c.release, c.variant, t) for t in self.reps)


def _blocking(in_request: list[Verdict]) -> dict[tuple, tuple[Candidate, list[rules.Reason]]]:
    """Machine key -> (the newest build that fails on that machine alone, its reasons there)."""
    blocking: dict[tuple, tuple[Candidate, list[rules.Reason]]] = {}
    for cand, _, failing in in_request:
        if len(failing) == 1:
            (key, found), = failing.items()
            if key not in blocking or cand.release.version > blocking[key][0].release.version:
                blocking[key] = (cand, found)
    return blocking


def no_solution(matrix: Matrix, request: Request, reps: list[Target], unique: dict[tuple, list[Target]],
                verdicts: Verdicts, missing: list[str], rejected: list[Rejection],
                combined: bool = False) -> NoSolution:
    """The NoSolution for families with no fitting candidate (``missing``), or for a request whose
    families fit one by one but not together (``combined``): typed causes, ways out, the rejections."""
    causes: list[Cause] = []
    ways: list[WayOut] = []
    for family in missing:
        entries = verdicts.get(family, [])
        unmatched = _unmatched(request, family, entries)
        if unmatched is not None:
            causes.append(unmatched)
            continue
        failure = Failure(matrix, request, reps, unique, family, entries)
        for cause in CAUSES:
            causes += cause(failure)
        for way_out in WAYS_OUT:
            ways += way_out(failure)
    if combined:
        causes += shared_wheels(rejected, bool(causes))
        ways.append(split_environments(request))
    summary = [piece for i, c in enumerate(causes[:3]) for piece in (("; ", c.message) if i else (c.message,))]
    message = rules.joined_words(f"no consistent set for {' '.join(request.texts)}: ", *summary)
    return NoSolution(message, causes=causes, ways_out=ways, rejected=list(rejected),
                      hint="; ".join(w.message for w in ways) or None)


def _unmatched(request: Request, family: str, entries: list[Verdict]) -> Cause | None:
    """Cause ``request`` when the matrix holds no release of the family, or none the request admits; the family's
    other causes and ways out are then not asked."""
    if not entries:
        return Cause(rule="request", message=f"the matrix has no {family} release")
    if all(any(r.rule == "request" for r in v.reasons) for v in entries):
        asked = " ".join(str(r) for r in request.families[family])
        extra = next((v.reasons[0].message for v in entries  # a release the version admits, of another build
                      if all("the request asks for" in r.message for r in v.reasons)), None)
        why = f": {extra}" if extra else ""
        return Cause(rule="request", message=f"no {family} release in the matrix matches {asked}{why}")
    return None


# --- causes ---------------------------------------------------------------------------------------------------

def blocking_machines(f: Failure) -> list[Cause]:
    """In a fleet, a machine blocks when some build fits every other machine but not it: one cause per such
    machine, with the rule and sentence of the newest such build there."""
    return [Cause(rule=found[0].rule, machines=sorted(f.names[key]),
                  message=rules.joined_words(f"{', '.join(f.names[key])}: ", found[0].words(),
                                             " (it fits every other machine)"))
            for key, (_, found) in f.blocking.items()]


def broken_rules(f: Failure) -> list[Cause]:
    """Without blocking machines: one cause per rule that turned a build down, with the first sentence of it and
    the machines where it failed; a Jetson board rules out every build of the index at once, so it comes first."""
    if f.blocking:
        return []
    by_rule: dict[str, tuple[rules.Reason, set[tuple]]] = {}
    ruled: dict[int, set[str]] = {}  # the rules of each list of reasons (a class's list is shared by its members)
    for _, rs, failing in f.in_request:
        for r in rs:
            by_rule.setdefault(r.rule, (r, set()))
        for key, found in failing.items():  # a rule blocks the machines where it failed, not the others
            names = ruled.get(id(found))  # each list is held by its verdict: its id is not reused meanwhile
            if names is None:
                names = ruled[id(found)] = {r.rule for r in found}
            for rule in names:
                by_rule[rule][1].add(key)
    return [Cause(rule=rule, message=reason.words(), machines=sorted({n for key in keys for n in f.names[key]}))
            for rule, (reason, keys) in sorted(by_rule.items(), key=lambda kv: kv[0] != "jetson")]


def shared_wheels(rejected: list[Rejection], has_causes: bool) -> list[Cause]:
    """Families that fit one by one but not together: the first five combinations turned down for their nvidia-*
    wheels (``shared_nvidia``, ``co_installed``), or one general cause when nothing else was said."""
    shared = [r for r in rejected if "shared_nvidia" in r.rules or "co_installed" in r.rules]
    out = [Cause(rule=rejection.rules[0], message=rejection.reasons[0]) for rejection in shared[:5]]
    if not out and not has_causes:
        out.append(Cause(rule="shared_nvidia", message="no combination of the requested frameworks shares one "
                                                       "consistent set of nvidia-* wheels"))
    return out


# --- ways out ---------------------------------------------------------------------------------------------------

def upgrade_driver(f: Failure) -> list[WayOut]:
    """Builds turned down only by driver floors (``driver_floor``, ``gpu_driver``): each needs the highest of its
    floors; the way out is the lowest such need, naming the newest build it admits and the newest build overall."""
    driver_only = [(c, rs) for c, rs, _ in f.in_request if {r.rule for r in rs} <= {"driver_floor", "gpu_driver"}]
    needs = [(max((r.need_driver for r in rs if r.need_driver), key=driver_version), c)
             for c, rs in driver_only if any(r.need_driver for r in rs)]
    if not needs:
        return []
    low = min(driver_version(n) for n, _ in needs)
    need, first = max(((n, c) for n, c in needs if driver_version(n) == low), key=lambda x: x[1].release.version)
    top_need, best = max(needs, key=lambda x: (x[1].release.version, driver_version(x[0])))
    newest = "" if best is first else f"; the newest, {best.label}, needs >= {top_need}"
    return [WayOut(kind="upgrade_driver", message=f"upgrade the driver to >= {need} ({first.label} then fits{newest})",
                   change={"driver": need, "family": f.family})]


def jetpack(f: Failure) -> list[WayOut]:
    """A Jetson board (rule ``jetson``): no default-index or PyTorch-index build runs on it, whatever the version or
    driver; NVIDIA's JetPack wheels do (NVIDIA's "PyTorch for Jetson" page)."""
    if not any(r.rule == "jetson" for _, rs, _ in f.in_request for r in rs):
        return []
    boards = [b for b in (rules.jetpack_of(f.matrix, t) for t in f.reps) if b is not None]
    if boards and boards[0].index_url:
        b = boards[0]
        return [WayOut(kind="jetpack",
                       message=Said(f"install {f.family} from NVIDIA's JetPack {'/'.join(b.jetpack)} wheels (CUDA "
                                    f"{b.cuda}, Jetson Linux {b.l4t}): ",
                                    pip("install", "--extra-index-url", b.index_url, f.family),
                                    "; no default-index or PyTorch-index build has kernels for the board"))]
    return [WayOut(kind="jetpack",
                   message=f"install {f.family} from NVIDIA's JetPack wheels for the board's JetPack "
                           f"release (NVIDIA's 'PyTorch for Jetson' builds or the jetson-containers "
                           f"images); no default-index or PyTorch-index build has kernels for it")]


def pin_older(f: Failure) -> list[WayOut]:
    """The newest GPU build that only the request turned down and that fits every target. (A GPU build turned
    down by a rule was checked on every target and failed there: only one the request turned down can fit once
    the request is relaxed.)"""
    fits_ignoring_request = [c for c, rs, _ in f.entries if {r.rule for r in rs} == {"request"}]
    ok_older = sorted(fits_ignoring_request, key=lambda c: c.release.version, reverse=True)
    c = next((c for c in ok_older if c.variant.cuda is not None and f.fits_everywhere(c)), None)
    if c is None:
        return []
    extra = f"[{c.variant.pip_extra}]" if c.variant.pip_extra else ""
    return [WayOut(kind="pin_older",
                   message=f"relax the request: {f.family}{extra}=={c.release.version} ({c.variant.name}) fits",
                   change={"family": f.family, "requirement": f"{f.family}{extra}=={c.version_text()}"})]


def cpu_build(f: Failure) -> list[WayOut]:
    """The CPU build of what was asked for (turned down only for being a CPU build on a GPU machine), else the
    newest CPU build of another release that fits every target."""
    cpu = [c for c, rs, _ in f.entries if c.variant.cuda is None and {r.rule for r in rs} == {"gpu_wanted"}]
    cpu = cpu or [c for c, rs, _ in f.entries if c.variant.cuda is None and {r.rule for r in rs} == {"request"}
                  and f.fits_everywhere(c)]
    if not cpu:
        return []
    c = max(cpu, key=lambda c: c.release.version)
    return [WayOut(kind="cpu_build", message=f"use the CPU build: {f.family}=={c.version_text()}",
                   change={"family": f.family, "requirement": f"{f.family}=={c.version_text()}"})]


def change_python(f: Failure) -> list[WayOut]:
    """Builds turned down by rule ``python``: the newest Python any of the family's candidates supports."""
    if not any(r.rule == "python" for _, rs, _ in f.in_request for r in rs):
        return []
    pys = sorted({p for c, _, _ in f.in_request for p in c.release.python}, key=Version)
    if not pys:
        return []
    return [WayOut(kind="change_python", message=f"use Python {pys[-1]} ({f.family} supports {', '.join(pys[-4:])})",
                   change={"python": " ".join(reversed(pys)), "family": f.family})]


def split_environments(request: Request) -> WayOut:
    """Families that cannot share one set of nvidia-* wheels can each have their own environment."""
    return WayOut(kind="split_environments",
                  message="install " + " and ".join(request.families) + " into separate environments"
                  if len(request.families) > 1 else
                  "uninstall the conflicting framework or move it to its own environment")


# --- the registries, in the order their answers are listed ------------------------------------------------------

CAUSES: list[Callable[[Failure], list[Cause]]] = [blocking_machines, broken_rules]
WAYS_OUT: list[Callable[[Failure], list[WayOut]]] = [upgrade_driver, jetpack, pin_older, cpu_build, change_python]
