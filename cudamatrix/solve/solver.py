"""The solver: from Targets and a Request, the consistent set — or NoSolution with typed causes and ways out.

A pure function in resolvelib's manner: no I/O, no printing, and nothing it is given is changed (it works
on a copy of the Request); the decision trace and the rejected candidates are part of the Solution it
returns, or of the NoSolution it raises. Three steps, one module each:
:mod:`~cudamatrix.solve.request` (parsing), :mod:`~cudamatrix.solve.search` (candidates, hard rules,
preference order, combination) and :mod:`~cudamatrix.solve.assemble` (pins, minimal change, pip arguments).
Hard rules live in :mod:`cudamatrix.solve.rules`.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import replace

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from cudamatrix.errors import NoSolution, UsageError
from cudamatrix.matrix.data import Matrix, ReleaseFiles
from cudamatrix.models import Environment, FrameworkChoice, Rejection, Solution, WayOut
from cudamatrix.names import FAMILY_NAMES, canonical, family_of, stated_variant
from cudamatrix.proc import PausedGc
from cudamatrix.solve import extensions, findlinks, releasefiles, rules
from cudamatrix.solve.assemble import assemble
from cudamatrix.solve.causes import Verdicts, no_solution
from cudamatrix.solve.driverclass import MIN_TARGETS, Memo, SharedChecks
from cudamatrix.solve.request import Request, parse_request
from cudamatrix.solve.search import MAX_COMBINATIONS, Candidate, Preference, SearchResult, screen, search
from cudamatrix.solve.target import Target

__all__ = ["MAX_COMBINATIONS", "Candidate", "Preference", "Request", "parse_request", "solve"]


def solve(targets: list[Target], request: Request, matrix: Matrix, *,
          installed: Environment | None = None, check_ways: bool = True, memo: Memo | None = None) -> Solution:
    """The chosen set for every target, with its trace and rejections.

    Raises NoSolution (typed causes and ways out) when nothing fits, UsageError without a target; each way out
    is re-solved first, and one that lifts nothing is left out (``check_ways``). Neither ``request`` nor
    ``targets`` nor ``installed`` is changed. ``memo``: what earlier solves of the same matrix worked out (see
    :class:`~cudamatrix.solve.driverclass.Memo`), for a caller that solves several requests."""
    memo = Memo() if memo is None else memo  # the verdicts per build and class, shared with the ways' re-solves
    with PausedGc() if len(targets) >= MIN_TARGETS else contextlib.nullcontext():  # a fleet: see PausedGc
        try:
            return _solve(targets, request, matrix, installed, memo=memo)
        except NoSolution as exc:
            if not check_ways:
                raise
            raise checked_ways(exc, targets, request, matrix, installed, memo) from None


def checked_ways(exc: NoSolution, targets: list[Target], request: Request, matrix: Matrix,
                 installed: Environment | None, memo: Memo | None = None) -> NoSolution:
    """``exc`` with only the ways out that, applied, give a solution (each re-solved); a way out outside
    the matrix (another index, separate environments) is kept as it is. Each class of targets the rules cannot
    tell apart (:class:`~cudamatrix.solve.driverclass.SharedChecks`: the same facts but for a driver between the
    same two stated versions) is re-solved on its first target only: a change of driver or Python applied to
    all of them leaves them alike, and whether a set fits, and which, is the same on each."""
    ways = []
    unique: dict[tuple, Target] = {}
    for t in targets:
        unique.setdefault(t.key(), t)
    targets = SharedChecks(matrix, list(unique.values())).reps
    memo = Memo() if memo is None else memo
    for way in exc.ways_out:
        kept = _lifts(way, targets, request, matrix, installed, memo)
        if kept is not None:
            ways.append(kept)
    exc.ways_out, exc.hint = ways, "; ".join(w.message for w in ways) or None  # the rest as it was, not made again
    return exc


def _lifts(way: WayOut, targets: list[Target], request: Request, matrix: Matrix,
           installed: Environment | None, memo: Memo) -> WayOut | None:
    """The way out when the change it names gives a solution (a change_python way names the newest Python
    that does), else None."""
    change = way.change
    if not change:
        return way
    if "family" in change and change["family"] in request.families:  # the family the way out is for
        request = Request([], {change["family"]: request.families[change["family"]]})
    if "python" in change:
        for py in change["python"].split():
            found = fits([replace(t, python=py) for t in targets], request, matrix, installed, memo)
            if found is not None:
                builds = ", ".join(f"{fw.name} {fw.version} {fw.variant}" for fw in found)
                return WayOut(kind=way.kind, change={"python": py, "family": change.get("family", "")},
                              message=f"use Python {py} ({builds} then fits)")
        return None
    if "driver" in change:
        moved = [replace(t, driver=change["driver"], driver_usable=True) for t in targets]
        return way if fits(moved, request, matrix, installed, memo) is not None else None
    if "extension" in change:
        swapped = request.copy()
        swapped.extensions = [Requirement(change["requirement"]) if canonical(r.name) == change["extension"] else r
                              for r in request.extensions]
        swapped.passthrough = [Requirement(change["requirement"]) if canonical(r.name) == change["extension"] else r
                               for r in request.passthrough]  # a release-file package (flash-attn) is passed through
        return way if fits(targets, swapped, matrix, installed, memo) is not None else None
    if "requirement" in change:
        relaxed = request.without(change["family"])
        relaxed.families[change["family"]] = [Requirement(change["requirement"])]
        return way if fits(targets, relaxed, matrix, installed, memo) is not None else None
    return way


def fits(targets: list[Target], request: Request, matrix: Matrix, installed: Environment | None = None,
         memo: Memo | None = None) -> list[FrameworkChoice] | None:
    """The frameworks chosen when a set fits (without the explanations of a :func:`solve`: no trace, no
    rejection, no cause), else None. Raises UsageError without a target."""
    try:
        return _solve(targets, request, matrix, installed, explain=False, memo=memo).frameworks
    except NoSolution:
        return None


def _solve(targets: list[Target], request: Request, matrix: Matrix, installed: Environment | None, *,
           explain: bool = True, memo: Memo | None = None) -> Solution:
    """:func:`solve` without re-solving the ways out. ``explain=False``: what fits only (a NoSolution without
    causes, a Solution without the rules' rejections)."""
    if not targets:
        raise UsageError("no target to solve for")
    unique: dict[tuple, list[Target]] = {}
    for t in targets:
        unique.setdefault(t.key(), []).append(t)
    reps = [group[0] for group in unique.values()]
    trace: list[str] = [t.as_target() + (f" (+{len(unique[t.key()]) - 1} alike)"
                                         if len(unique[t.key()]) > 1 else "") for t in reps]
    rejected: list[Rejection] = []
    per_family: dict[str, list[Candidate]] = {}
    verdicts: Verdicts = {}
    wants_gpu = any(t.wants_gpu for t in reps)
    files = releasefiles.requested(request.passthrough, matrix)
    request = releasefiles.with_torch(request, files)
    paged = findlinks.requested(request.passthrough, matrix)
    request = findlinks.with_torch(request, paged)
    request, kept, kept_trace = _keep_unknown_installed(request, matrix, installed)
    trace += kept_trace
    request, unknown_carried = _carry_known(request, matrix)

    for family in FAMILY_NAMES:
        if family not in request.families:
            continue
        screened = screen(family, request.families[family], matrix, reps, wants_gpu,
                          _installed_variant(installed, family), explain=explain, memo=memo)
        verdicts[family] = screened.verdicts
        rejected += screened.rejected
        per_family[family] = screened.fitting
        trace.append(f"{family}: {len(screened.fitting)} of {screened.candidates} candidates fit every target")

    missing = [f for f in request.families if not per_family.get(f)]
    if missing and not explain:
        raise NoSolution("no consistent set", causes=[], ways_out=[])
    if missing:
        raise no_solution(matrix, request, reps, unique, verdicts, missing, rejected)

    runs = per_family.get("torch", [])  # the torch builds that run on the targets (find-links notes name them)
    tried = _search_tries(request, files, paged, per_family, verdicts, reps, matrix,
                          _co_installed_requirements(installed, request), explain)
    chosen, per_family, found = tried.best
    rejected += found.rejected
    trace += found.trace
    if found.choice is None and not explain:
        raise NoSolution("no consistent set", causes=[], ways_out=[])
    if found.choice is None:
        raise no_solution(matrix, request, reps, unique, verdicts, [], rejected, combined=True)
    choice = found.choice
    request, file_notes = releasefiles.resolved(request, files, choice, reps, matrix)
    request, page_notes, links = findlinks.resolved(request, paged, choice, reps, runs)
    return assemble(choice, request, reps, matrix, installed, rejected, trace, kept,
                    notes=unknown_carried + _carried_notes(request, chosen) + tried.passed
                    + passed_over(choice, per_family, reps, matrix) + file_notes + page_notes,
                    extensions=chosen, find_links=links)


# the most sets of framework builds the requested extensions' releases narrow to that are searched for one that
# goes together (vllm 0.34.0 and 0.33.0 both narrow torch to 2.14.0's builds: one set); each older set is tried
# only when the newer ones' builds do not install beside the other frameworks (issue #39: torch, TensorFlow and
# vllm, whose newest releases pin a CUDA 13 torch while TensorFlow's wheels are CUDA 12)
MAX_EXTENSION_TRIES = 6
MAX_EXTENSION_CHOICES = 400  # the most choices of releases looked at for those sets (two extensions multiply)


def _search_tries(request: Request, files: list[tuple[Requirement, ReleaseFiles]], paged: list[findlinks.Wanted],
                  per_family: dict[str, list[Candidate]], verdicts: Verdicts,
                  reps: list[Target], matrix: Matrix, fixed: list[tuple[str, list[Requirement]]], explain: bool
                  ) -> _Tried:
    """The families' builds, narrowed by each choice of the requested extensions' releases in turn (and by the
    requested release files), searched until a combination fits or :data:`MAX_EXTENSION_TRIES` sets of builds
    have not."""
    tried = _Tried()
    for chosen, narrowed in _extension_tries(request, per_family, verdicts, reps, matrix, explain):
        if tried.again(chosen, narrowed):
            continue  # the same builds as a choice already passed over: passed over too
        if len(tried.failed) >= MAX_EXTENSION_TRIES:
            break
        narrowed = findlinks.narrow(paged, releasefiles.narrow(files, narrowed, reps, matrix), reps, matrix)
        found = search(narrowed, reps, fixed, matrix) if narrowed else SearchResult([])
        if tried.fits(chosen, narrowed, found):
            break
    return tried


class _Tried:
    """The extension choices searched so far: the first (whose failure is the one explained when none fits), the
    one that fits, and each set of builds passed over with the releases that needed it."""

    def __init__(self) -> None:
        self.first: tuple[list[extensions.Chosen], dict[str, list[Candidate]], SearchResult] | None = None
        self.found: tuple[list[extensions.Chosen], dict[str, list[Candidate]], SearchResult] | None = None
        self.failed: dict[tuple, tuple[list[list[extensions.Chosen]], dict[str, list[Candidate]], SearchResult]] = {}

    @staticmethod
    def _key(narrowed: dict[str, list[Candidate]]) -> tuple:
        return tuple((f, tuple(id(c) for c in cands)) for f, cands in narrowed.items())

    @property
    def best(self) -> tuple[list[extensions.Chosen], dict[str, list[Candidate]], SearchResult]:
        out = self.found or self.first
        assert out is not None  # _extension_tries yields at least once
        return out

    @property
    def passed(self) -> list[str]:
        """A sentence per set of builds passed over (none when the first choice fits)."""
        return [_passed_sentence(choices, narrowed, found) for choices, narrowed, found in self.failed.values()] \
            if self.found is not None else []

    def again(self, chosen: list[extensions.Chosen], narrowed: dict[str, list[Candidate]]) -> bool:
        """Whether the choice narrows to a set already passed over (it is then recorded with that set)."""
        earlier = self.failed.get(self._key(narrowed))
        if earlier is not None:
            earlier[0].append(chosen)
        return earlier is not None

    def fits(self, chosen: list[extensions.Chosen], narrowed: dict[str, list[Candidate]],
             found: SearchResult) -> bool:
        """Records one searched choice; True when it fits."""
        if self.first is None:
            self.first = (chosen, narrowed, found)
        if found.choice is not None:
            self.found = (chosen, narrowed, found)
            return True
        self.failed[self._key(narrowed)] = ([chosen], narrowed, found)
        return False


def _passed_sentence(choices: list[list[extensions.Chosen]], narrowed: dict[str, list[Candidate]],
                     found: SearchResult) -> str:
    """Why some choices of extension releases were passed over: the builds they need do not go with the others."""
    why = next((r for rej in found.rejected for r in rej.reasons), "no combination of the frameworks fits")
    labels = [", ".join(e.label for e in chosen) for chosen in choices]
    also = f" (and {', '.join(labels[1:4])}{' ...' if len(labels) > 4 else ''}, which need the same builds)" \
        if len(labels) > 1 else ""
    needs = "; ".join(f"{e.release.name} needs {extensions.needs(e.release, e.family)}" for e in choices[0]
                      if e.family)
    fams = ", ".join(f"{f} {', '.join(sorted({c.version_text(True) for c in cands}, reverse=True)[:3])}"
                     for f, cands in narrowed.items())
    return f"passed over {labels[0]}{also}: {needs or 'the builds it needs'}, and the builds left ({fams}) do " \
           f"not go together ({why})"


def _carried_notes(request: Request, chosen: list[extensions.Chosen]) -> list[str]:
    """A sentence for each installed extension an implicit request carried and replaced by the release the chosen
    build carries (the installed one pins a torch no build of which is chosen); one kept says so in its own why."""
    out = []
    for c in chosen:
        have = request.carried.get(canonical(c.requirement.name))
        if have is None:
            continue
        if str(c.release.version) != have.split("+")[0]:
            out.append(f"{c.release.name} {have} is installed and built for one torch: solved with it; "
                       f"{c.release.version} in its place, as no torch build it pairs with is chosen")
    return out


def _carry_known(request: Request, matrix: Matrix) -> tuple[Request, list[str]]:
    """The implicit request without the installed extensions whose installed release the matrix does not know
    (newer than its data, or a local build): nothing says which torch they pair with, so they are left as they
    are, and said."""
    unknown = {n: v for n, v in request.carried.items()
               if not any(str(r.version) == v.split("+")[0] for r in extensions.releases_for(Requirement(n), matrix))}
    if not unknown:
        return request, []
    out = request.copy()
    out.extensions = [r for r in out.extensions if canonical(r.name) not in unknown]
    out.requirements = [r for r in out.requirements if canonical(r.name) not in unknown]
    out.carried = {n: v for n, v in out.carried.items() if n not in unknown}
    return out, [f"{n} {v} is installed and matrix {matrix.meta.data_version} does not know that release: not solved "
                 "with torch, left as it is" for n, v in unknown.items()]


def _extension_tries(request: Request, per_family: dict[str, list[Candidate]], verdicts: Verdicts,
                     reps: list[Target], matrix: Matrix, explain: bool
                     ) -> Iterator[tuple[list[extensions.Chosen], dict[str, list[Candidate]]]]:
    """The requested extensions' choices to search, best first (at most :data:`MAX_EXTENSION_CHOICES`); the
    request's families as they are without extensions. NoSolution when no release fits at all (with its causes and ways out when ``explain``)."""
    if not request.extensions:
        yield [], per_family
        return
    any_choice = False
    for n, (chosen, narrowed) in enumerate(extensions.alternatives(request.extensions, per_family, reps, matrix,
                                                                   carried=request.carried)):
        if n >= MAX_EXTENSION_CHOICES:
            return
        any_choice = True
        yield chosen, narrowed
    if any_choice:
        return
    if not explain:
        raise NoSolution("no consistent set", causes=[], ways_out=[])
    raise extensions.no_solution(request.extensions, per_family, verdicts, reps, matrix)


def passed_over(choice: list[Candidate], per_family: dict[str, list[Candidate]], targets: list[Target],
                matrix: Matrix) -> list[str]:
    """For each chosen build, the best build that fits but was passed over because its facts are inferred, not
    read from an artifact (docs/rules.md, "known / inferred"): newer, or of a newer CUDA, yet ranked below. One sentence
    per family, with the inferred facts and their basis."""
    out = []
    for c in choice:
        mine = (c.release.version, c.variant.cuda or Version("0"))
        for other in per_family.get(c.family, []):
            facts = [f for t in targets for f in rules.inferred_facts(other.release, other.variant, t)]
            if facts and (other.release.version, other.variant.cuda or Version("0")) > mine:
                names = "; ".join(f"{fact} ({basis})" for fact, basis in dict(facts).items())
                out.append(f"passed over {other.label}, which also fits: it rests on inferred facts ({names}); "
                           f"{c.label} rests on facts read from its wheels. Ask for {other.family}=="
                           f"{other.version_text()} to take it anyway")
                break
    return out


def _installed_variant(env: Environment | None, family: str) -> tuple[str, str | None] | None:
    if env is None:
        return None
    fw = next((f for f in env.frameworks if f.name == family), None)
    if fw is None:
        return None
    variant = stated_variant(env.frameworks, family)
    try:
        base = Version(fw.version.split("+")[0])
    except InvalidVersion:
        return None  # a version a paste or a broken install states, not PEP 440: no build of the matrix to keep
    return str(base), variant


def _keep_unknown_installed(request: Request, matrix: Matrix, installed: Environment | None
                            ) -> tuple[Request, list[FrameworkChoice], list[str]]:
    """An installed framework newer than the matrix knows, which meets the request, stays as it is:
    minimal change beats a downgrade to what the matrix happens to list. Its family leaves (a copy of)
    the request; its declared nvidia-* requirements still constrain the others (as a co-installed framework).

    Returns (the request left to solve, the frameworks kept, trace lines)."""
    request = request.copy()
    kept: list[FrameworkChoice] = []
    trace: list[str] = []
    if installed is None:
        return request, kept, trace
    for fw in installed.frameworks:
        fam = fw.name
        if fam not in request.families or fam not in FAMILY_NAMES:
            continue
        base = fw.version.split("+")[0]
        try:
            version = Version(base)
        except InvalidVersion:
            continue
        if any(r.version >= version for r in matrix.frameworks(fam)):
            continue  # a release the matrix knows, or older than one it knows: solved as usual
        own = [r for r in request.families[fam] if canonical(r.name) == fam]
        if all(not r.specifier or r.specifier.contains(base, prereleases=True) for r in own):
            request = request.without(fam)
            kept.append(FrameworkChoice(name=fam, version=fw.version, variant=fw.variant or "unknown",
                                        cuda=fw.cuda, cudnn=fw.cudnn))
            trace.append(f"{fam} {fw.version} is installed and newer than matrix {matrix.meta.data_version} "
                         f"knows: kept as it is, unverified by the matrix")
    return request, kept, trace


def _co_installed_requirements(installed: Environment | None, request: Request
                               ) -> list[tuple[str, list[Requirement]]]:
    """Declared nvidia-* requirements of installed frameworks that the request leaves in place."""
    if installed is None:
        return []
    out = []
    for dist, reqs in installed.requirements.items():
        fam = family_of(dist)
        if fam is None or fam in request.families:
            continue
        parsed = []
        for text in reqs:
            try:
                parsed.append(Requirement(text))
            except InvalidRequirement:
                continue
        if parsed:
            out.append((f"installed {dist} {installed.packages.get(dist, '')}".strip(), parsed))
    return out
