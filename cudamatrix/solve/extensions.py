"""Extensions: packages built against one framework build, solved with the framework instead of passed through.

vllm, xformers and sglang declare an exact torch (their METADATA's ``torch==X``), and their kernels link one CUDA
major; onnxruntime-gpu and cupy-cudaNNx are built for one CUDA major (data/extensions.json, read from their wheels).
After the hard rules have screened the framework's builds (driver, GPU, Python), an extension narrows them: the
newest release of it whose torch requirement and CUDA major some build that runs on the target meets is chosen, and
the framework's candidates become the builds that meet it. An extension with no framework in the request (``solve
onnxruntime-gpu``) is chosen by the CUDA major the driver runs. No I/O.
"""
from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache

from packaging.requirements import Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from cudamatrix.errors import NoSolution
from cudamatrix.matrix.data import ExtensionRelease, Matrix
from cudamatrix.models import Cause, Pin, WayOut
from cudamatrix.names import canonical
from cudamatrix.schema import record
from cudamatrix.solve import rules
from cudamatrix.solve.search import Candidate, Verdict
from cudamatrix.solve.target import Target

CUPY = "cupy"  # the name that stands for the cupy-cudaNNx build of the framework's CUDA major


@record(frozen=True, eq=False)
class Chosen:
    """The release chosen for one requested extension, the family it was solved with, and why, in a sentence."""

    requirement: Requirement
    release: ExtensionRelease
    family: str | None  # None: no framework in the request (chosen by the CUDA major the driver runs)
    why: str

    @property
    def label(self) -> str:
        return f"{self.release.name} {self.release.version}"

    def said(self, builds: dict[str, str]) -> str:
        """Why this release, and the framework build (family -> its label) chosen with it."""
        build = builds.get(self.family or "")
        return f"{self.why}: {build} chosen for it" if build else self.why

    def pin(self) -> Pin:
        return Pin(name=canonical(self.release.name), version=str(self.release.version),
                   index_url=self.release.index_url)


def releases_for(req: Requirement, matrix: Matrix, with_specifier: bool = True) -> list[ExtensionRelease]:
    """The matrix's releases of the requirement's distribution that meet its specifiers, newest first (``cupy``:
    every cupy-cudaNNx, newest CUDA major first among one version)."""
    name = canonical(req.name)
    rows = [r for r in matrix.extensions.releases
            if canonical(r.name) == name or (name == CUPY and canonical(r.name).startswith("cupy-cuda"))]
    if with_specifier and req.specifier:
        rows = [r for r in rows if req.specifier.contains(r.version, prereleases=True)]
    return sorted(rows, key=lambda r: (r.version, r.cuda_major or 0), reverse=True)


@lru_cache(maxsize=1024)
def _spec(text: str) -> SpecifierSet | None:
    """The specifiers of a row's requirement, parsed once per process (a screen asks per release and build)."""
    try:
        return SpecifierSet(text)
    except InvalidSpecifier:
        return None


def attached_family(rel: ExtensionRelease, families: list[str]) -> str | None:
    """The requested family an extension release is solved with: the framework it requires (torch), else, for a
    build of one CUDA major, torch when requested, else the first requested family; None: no family in the
    request (or no fact to solve it by)."""
    if "torch" in rel.requires:
        return "torch"
    if rel.cuda_major is None or not families:
        return None
    return "torch" if "torch" in families else families[0]


def build_problem(rel: ExtensionRelease, cand: Candidate) -> str | None:
    """Why ``cand`` cannot carry the extension release (its declared requirement on the framework, or the CUDA
    major its libraries link); None: it can."""
    spec = _spec(rel.requires.get(cand.family, ""))
    if spec and not spec.contains(cand.version_text(True), prereleases=True):
        return f"{rel.name} {rel.version} requires {cand.family}{spec} (its METADATA), not {cand.family} " \
               f"{cand.version_text(True)}"
    if rel.cuda_major is None:
        return None
    if cand.variant.cuda is None:
        return f"{rel.name} {rel.version} is built for CUDA {rel.cuda_major}; {cand.label} is a CPU build"
    if cand.variant.cuda.major != rel.cuda_major:
        return f"{rel.name} {rel.version} is built for CUDA {rel.cuda_major}; {cand.label} is a CUDA " \
               f"{cand.variant.cuda.major} build"
    return None


def target_problem(rel: ExtensionRelease, targets: list[Target]) -> str | None:
    """Why a release has no wheel for a target (its Python or platform); None: it has one for each."""
    for t in targets:
        if t.python and rel.python and t.python not in rel.python:
            return f"{rel.name} {rel.version} has no wheel for Python {t.python} ({', '.join(rel.python)})"
        if rel.platforms and t.platform not in rel.platforms:
            return f"{rel.name} {rel.version} has no wheel for {t.platform}"
    return None


def driver_problem(rel: ExtensionRelease, targets: list[Target], matrix: Matrix) -> tuple[str, str] | None:
    """(why, the driver floor) when a target's driver does not run the release's CUDA major (the major's
    minor-version compatibility floor, cuda.json); None when each runs it or says no driver."""
    floor = next((m.linux_min_driver for m in matrix.cuda.minor_compat if m.cuda_major == rel.cuda_major), None)
    if rel.cuda_major is None or floor is None:
        return None
    for t in targets:
        if t.driver and not _at_least(t.driver, floor):
            return (f"{rel.name} {rel.version} is built for CUDA {rel.cuda_major}, which needs driver >= {floor}; "
                    f"{t.name} has {t.driver}"), floor
    return None


def _at_least(driver: str, floor: str) -> bool:
    try:
        return rules.driver_version(driver) >= rules.driver_version(floor)
    except ValueError:
        return True  # a driver text that is no version: the framework's own rules judge it


def _pairs_with(rel: ExtensionRelease, chosen: list[Chosen]) -> str | None:
    """Why ``rel`` cannot be installed beside the extensions already chosen (one requires the other at another
    version, as vllm 0.11.0 requires xformers==0.0.32.post1); None: it can."""
    for prev in chosen:
        for a, b in ((prev.release, rel), (rel, prev.release)):
            spec = _spec(a.requires.get(canonical(b.name), ""))
            if spec and not spec.contains(b.version, prereleases=True):
                return f"{a.name} {a.version} requires {canonical(b.name)}{spec}, not {b.version}"
    return None


def needs(rel: ExtensionRelease, family: str | None) -> str:
    """What a release needs of its framework build, in words ("torch==2.10.0 and a CUDA 12 build")."""
    need = [f"{family}{rel.requires[family]}"] if family and rel.requires.get(family) else []
    if rel.cuda_major is not None:
        need.append(f"a CUDA {rel.cuda_major} build" if family else f"a driver that runs CUDA {rel.cuda_major}")
    return " and ".join(need)


def _why(rel: ExtensionRelease, family: str | None, installed: bool = False) -> str:
    if installed:
        return f"{rel.name} {rel.version}: the installed release, tried first" + \
            (f", that a {family} build running on the target carries (it needs {needs(rel, family)}, as its wheel "
             "states)" if family else f", whose CUDA {rel.cuda_major} the driver runs")
    if family is None:
        return f"{rel.name} {rel.version}: the newest release the request admits whose CUDA {rel.cuda_major} the " \
               f"driver runs"
    return f"{rel.name} {rel.version}: the newest release the request admits that a {family} build running on the " \
           f"target carries (it needs {needs(rel, family)}, as its wheel states)"


def choose(reqs: list[Requirement], per_family: dict[str, list[Candidate]], targets: list[Target], matrix: Matrix,
           chosen: list[Chosen] | None = None) -> tuple[list[Chosen], dict[str, list[Candidate]]] | None:
    """One release per requested extension, newest first, each narrowing its family's candidates to the builds
    that carry it (depth first: a later extension that fits none of them sends the search back to an older
    release of the earlier one). Returns (the choices, the families' candidates left), or None."""
    return next(alternatives(reqs, per_family, targets, matrix, chosen), None)


def installed_first(rels: list[ExtensionRelease], installed: str, per_family: dict[str, list[Candidate]]
                    ) -> list[ExtensionRelease]:
    """An implicit request's order for an installed extension: the releases the framework's best build carries
    first (torch kept: the extension moves, one distribution, rather than torch and everything built on it), the
    installed release first among them (a set that works stays), newest first otherwise."""
    families = list(per_family)

    def keeps(rel: ExtensionRelease) -> bool:
        best = per_family.get(attached_family(rel, families) or "", [])
        return bool(best) and build_problem(rel, best[0]) is None

    return sorted(rels, key=lambda r: (not keeps(r), str(r.version) != installed))


def alternatives(reqs: list[Requirement], per_family: dict[str, list[Candidate]], targets: list[Target],
                 matrix: Matrix, chosen: list[Chosen] | None = None, carried: dict[str, str] | None = None
                 ) -> Iterator[tuple[list[Chosen], dict[str, list[Candidate]]]]:
    """Every choice :func:`choose` could make, best first (its first is :func:`choose`'s answer): the solver
    takes the next one when the frameworks the first narrows to do not go together (vllm's CUDA 13 torch beside
    TensorFlow's CUDA 12 builds). ``carried``: installed versions tried first (an implicit request). Lazy: nothing
    past the one asked for is worked out."""
    chosen = list(chosen or [])
    if not reqs:
        yield chosen, per_family
        return
    req, rest = reqs[0], reqs[1:]
    families = list(per_family)
    have = (carried or {}).get(canonical(req.name), "").split("+")[0]
    rels = releases_for(req, matrix)
    for rel in installed_first(rels, have, per_family) if have else rels:
        mine = str(rel.version) == have
        family = attached_family(rel, families)
        if target_problem(rel, targets) or _pairs_with(rel, chosen):
            continue
        if family is None:
            if rel.cuda_major is None or families or driver_problem(rel, targets, matrix):
                continue  # nothing says what it needs (no torch requirement, no CUDA major): not chosen blind
            yield from alternatives(rest, per_family, targets, matrix,
                                    chosen + [Chosen(req, rel, None, _why(rel, None, mine))], carried)
            continue
        ok = [c for c in per_family.get(family, []) if build_problem(rel, c) is None]
        if ok:
            yield from alternatives(rest, {**per_family, family: ok}, targets, matrix,
                                    chosen + [Chosen(req, rel, family, _why(rel, family, mine))], carried)


# --- no solution ---------------------------------------------------------------------------------------------------

def no_solution(reqs: list[Requirement], per_family: dict[str, list[Candidate]], verdicts: dict[str, list[Verdict]],
                targets: list[Target], matrix: Matrix) -> NoSolution:
    """Why no release of a requested extension fits the framework builds that run on the target (or the
    extensions asked for together), with the ways out: another release of the extension, the framework the
    extension pins, or the driver its builds need."""
    causes: list[Cause] = []
    ways: list[WayOut] = []
    for req in reqs:
        if choose([req], per_family, targets, matrix) is not None:
            continue
        cause, found = _one(req, per_family, verdicts, targets, matrix)
        causes.append(cause)
        ways += found
    if not causes:  # each fits alone, not together
        causes.append(Cause(rule="extension_pair", message=f"{', '.join(str(r) for r in reqs)} fit one by one but "
                                                           f"not together: one requires the other at another version"))
    return NoSolution("no consistent set: " + "; ".join(c.message for c in causes), causes=causes, ways_out=ways)


def _one(req: Requirement, per_family: dict[str, list[Candidate]], verdicts: dict[str, list[Verdict]],
         targets: list[Target], matrix: Matrix) -> tuple[Cause, list[WayOut]]:
    name = canonical(req.name)
    rels = releases_for(req, matrix)
    if not rels:
        known = releases_for(req, matrix, with_specifier=False)
        have = f" (it has {', '.join(str(r.version) for r in known[:3])}{' ...' if len(known) > 3 else ''})" \
            if known else ""
        return Cause(rule="extension_unknown",
                     message=f"no release of {name} in matrix {matrix.meta.data_version} meets {req}{have}"), []
    newest = rels[0]
    family = attached_family(newest, list(per_family))
    blocked = target_problem(newest, targets) or (driver_problem(newest, targets, matrix) or ("", ""))[0]
    if family is not None and not blocked:
        fitting = per_family.get(family, [])
        builds = ", ".join(sorted({c.version_text(True) for c in fitting}, reverse=True)[:4]) or "none"
        blocked = (f"{build_problem(newest, fitting[0]) if fitting else newest.name + ' has no build to pair'}; the "
                   f"{family} releases whose builds run on the target: {builds}")
        blocked += _why_not_run(newest, verdicts.get(family, []))
    message = f"no release of {name} that {req} admits fits: {blocked}" if blocked else \
        f"no release of {name} that {req} admits fits the target"
    return Cause(rule="extension_build", message=message), _ways(req, newest, family, verdicts.get(family or "", []),
                                                                  per_family, targets, matrix)


def _carriers(rel: ExtensionRelease, verdicts: list[Verdict]) -> list[Verdict]:
    """The turned-down framework builds that would carry ``rel``, newest first."""
    return [v for v in verdicts if build_problem(rel, v.candidate) is None and
            not any(r.rule == "request" for r in v.reasons)]


def _why_not_run(rel: ExtensionRelease, verdicts: list[Verdict]) -> str:
    """The first reason the builds ``rel`` needs do not run on the target ("" when none was turned down)."""
    carriers = _carriers(rel, verdicts)
    if not carriers:
        return ""
    v = carriers[0]
    return f"; the builds it needs do not run here ({v.reasons[0].message})"


def _ways(req: Requirement, newest: ExtensionRelease, family: str | None, verdicts: list[Verdict],
          per_family: dict[str, list[Candidate]], targets: list[Target], matrix: Matrix) -> list[WayOut]:
    name = canonical(req.name)
    ways: list[WayOut] = []
    floors = [r.need_driver for v in _carriers(newest, verdicts) for r in v.reasons if r.need_driver]
    floor = driver_problem(newest, targets, matrix)
    if floor is not None:
        floors.append(floor[1])
    if floors:
        lowest = min(floors, key=rules.driver_version)
        runs = "runs" if family is None else "and the build it needs run"
        ways.append(WayOut(kind="upgrade_driver", message=f"upgrade the driver to >= {lowest} ({newest.name} "
                                                          f"{newest.version} then {runs})",
                           change={"driver": lowest}))
    older = choose([Requirement(name)], per_family, targets, matrix)
    if older is not None:
        rel = older[0][0].release
        ways.append(WayOut(kind="pin_older", message=f"ask for {rel.name}=={rel.version} instead of {req} (it "
                                                     f"needs {needs(rel, older[0][0].family)}, which runs here)",
                           change={"extension": name, "requirement": f"{rel.name}=={rel.version}"}))
    spec = newest.requires.get(family or "")
    asked_away = [v for v in verdicts if build_problem(newest, v.candidate) is None and
                  all(r.rule == "request" for r in v.reasons)]  # builds that carry it, turned down by the request
    if family is not None and spec and asked_away and not any(build_problem(newest, c) is None
                                                              for c in per_family.get(family, [])):
        ways.append(WayOut(kind="other", message=f"ask for {family}{spec} instead ({newest.name} {newest.version} "
                                                 f"requires it)",
                           change={"family": family, "requirement": f"{family}{spec}"}))
    return ways
