"""The search: candidates per family, screened by the hard rules, ordered by a named preference, then
combined so that co-installed frameworks share one consistent set of ``nvidia-*`` wheels. No I/O.

Every function returns what it found (candidates, verdicts, rejections, trace lines); nothing is
passed in to be filled.
"""
from __future__ import annotations

from typing import NamedTuple

from packaging.requirements import Requirement
from packaging.version import Version

from cudamatrix.matrix.data import FrameworkRelease, Matrix, Variant
from cudamatrix.models import Rejection
from cudamatrix.names import FAMILIES, canonical
from cudamatrix.schema import field, record
from cudamatrix.solve import rules
from cudamatrix.solve.driverclass import SharedChecks
from cudamatrix.solve.indexes import dedupe
from cudamatrix.solve.target import Target

MAX_COMBINATIONS = 200_000


@record(frozen=True, eq=False)
class Candidate:
    """One framework release × one variant of it (``torch 2.5.1 cu121``)."""

    release: FrameworkRelease
    variant: Variant

    @property
    def family(self) -> str:
        return self.release.name

    @property
    def label(self) -> str:
        return f"{self.release.name} {self.release.version} {self.variant.name}"

    def version_text(self, base_only: bool = False) -> str:
        local = self.variant.local_version or ""
        return str(self.release.version) if base_only or not local else f"{self.release.version}{local}"


class Verdict(NamedTuple):
    """Why a candidate was turned down: its reasons, and per target (by key) the reasons there."""

    candidate: Candidate
    reasons: list[rules.Reason]
    failing: dict[tuple, list[rules.Reason]]


class Preference(NamedTuple):
    """The sort key of a candidate, most important first; higher is better (README, "Preferences")."""

    keeps_installed: bool  # the installed build, when it is consistent: minimal change
    build_as_wanted: bool  # a GPU build for a GPU target, a CPU build for a CPU one
    facts_known: bool  # it rests only on known facts, not on inferred ones (README, "known / inferred")
    version: Version  # newest release
    full_driver_support: bool  # over minor-version compatibility
    cuda: Version  # newest CUDA
    pypi_default: bool  # the default index's own wheel


@record
class Screened:
    """One family's candidates after the hard rules: those that fit, in preference order, and the rest."""

    fitting: list[Candidate]
    verdicts: list[Verdict]
    rejected: list[Rejection] = field(default_factory=list)


@record
class SearchResult:
    """The chosen candidates (one per family; None: no combination fits), with the rejections and trace."""

    choice: list[Candidate] | None
    rejected: list[Rejection] = field(default_factory=list)
    trace: list[str] = field(default_factory=list)


def matches_request(cand: Candidate, reqs: list[Requirement]) -> list[str]:
    """Reasons the candidate does not meet the requested specifiers (empty: it does)."""
    out = []
    family = FAMILIES[cand.family]
    for req in reqs:
        name = canonical(req.name)
        # tensorflow-gpu releases carry tensorflow's versions; tensorflow-cpu is left unconstrained, as before
        if name == cand.family or (name in family.aliases and name.endswith("-gpu")):
            version, full = cand.version_text(True), cand.version_text()
        elif name in cand.release.companions:
            comp = cand.release.companions[name]
            version, full = comp, comp + (cand.variant.local_version or "")
        elif name in family.companions:
            out.append(f"{cand.label}: the matching {name} version is not in the matrix")
            continue
        else:
            continue
        if req.specifier and not (req.specifier.contains(version, prereleases=True)
                                  or req.specifier.contains(full, prereleases=True)):
            out.append(f"{cand.label}: {name} {full} does not satisfy {req}")
    return out


def preference(c: Candidate, targets: list[Target], installed: tuple[str, str | None] | None,
               wants_gpu: bool, matrix: Matrix) -> Preference:
    """The candidate's :class:`Preference` for these targets and this installed build (version, variant)."""
    gpu_build = c.variant.cuda is not None
    return Preference(
        keeps_installed=installed is not None and installed[0] == str(c.release.version)
        and installed[1] == c.variant.name,
        build_as_wanted=gpu_build == wants_gpu,
        facts_known=not any(rules.inferred_facts(c.release, c.variant, t) for t in targets),
        version=c.release.version,
        full_driver_support=all(rules.full_support(matrix, c.variant, t) for t in targets),
        cuda=c.variant.cuda or Version("0"),
        pypi_default=c.variant.pypi_default,
    )


def screen(family: str, reqs: list[Requirement], matrix: Matrix, targets: list[Target], wants_gpu: bool,
           installed: tuple[str, str | None] | None) -> Screened:
    """Every candidate of one family against the request and the hard rules on every target."""
    wants_cpu_variant = any(str(s.version).endswith("+cpu") for r in reqs for s in r.specifier)
    shared = SharedChecks(matrix, targets)  # a fleet: one check per driver class, not per node
    ok: list[Candidate] = []
    verdicts: list[Verdict] = []
    rejected: list[Rejection] = []
    for release in matrix.frameworks(family):
        for variant in release.variants:
            cand = Candidate(release, variant)
            req_problems = matches_request(cand, reqs)
            if req_problems:
                verdicts.append(Verdict(cand, [rules.Reason("request", p) for p in req_problems], {}))
                continue
            reasons: list[rules.Reason] = []
            failing: dict[tuple, list[rules.Reason]] = {}
            for target in targets:
                found = shared.check(release, variant, target)
                if found:
                    reasons.extend(found)
                    failing[target.key()] = found
            if reasons:
                verdicts.append(Verdict(cand, reasons, failing))
                rejected.append(Rejection(candidate=cand.label, reasons=dedupe([r.message for r in reasons]),
                                          rules=dedupe([r.rule for r in reasons])))
            else:
                ok.append(cand)
    gpu_wanted = wants_gpu and not wants_cpu_variant
    if gpu_wanted:
        # a CPU build on a GPU machine is the CPU_ONLY_BUILD problem, never a silent answer
        for c in (c for c in ok if c.variant.cuda is None):
            reason = rules.Reason("gpu_wanted", f"{c.label} is a CPU build and the target has a GPU "
                                                f"(ask for it explicitly, e.g. {family}=={c.version_text()})")
            verdicts.append(Verdict(c, [reason], {}))
            rejected.append(Rejection(candidate=c.label, reasons=[reason.message], rules=["gpu_wanted"]))
        ok = [c for c in ok if c.variant.cuda is not None]
    ok.sort(key=lambda c: preference(c, targets, installed, gpu_wanted, matrix), reverse=True)
    return Screened(ok, verdicts, rejected)


def search(per_family: dict[str, list[Candidate]], targets: list[Target],
           fixed: list[tuple[str, list[Requirement]]], matrix: Matrix | None = None) -> SearchResult:
    """Lexicographic search in preference order; pairwise checks of shared nvidia-* wheels.

    ``fixed``: (label, nvidia-* requirements) of installed frameworks the request leaves in place."""
    families = list(per_family)
    result = SearchResult(None)
    pin_cache: dict[Candidate, list[Requirement]] = {}
    pair_cache: dict[tuple[Candidate, Candidate], list[str]] = {}

    def pins(c: Candidate) -> list[Requirement]:
        if c not in pin_cache:
            seen: dict[str, Requirement] = {}
            for t in targets:
                for r in (rules.conflict_pins(matrix, c.release, c.variant, t) if matrix is not None
                          else rules.pins_for(c.variant, t)):
                    seen.setdefault(str(r), r)
            pin_cache[c] = list(seen.values())
        return pin_cache[c]

    def pair(a: Candidate, b: Candidate) -> list[str]:
        k = (a, b)
        if k not in pair_cache:
            problems = rules.pin_conflicts(pins(a), pins(b), a.label, b.label)
            if not problems and a.variant.cuda and b.variant.cuda and a.variant.cuda.major != b.variant.cuda.major \
                    and any(rules.bundles_nvidia_wheels(a.release, a.variant, t) and
                            rules.bundles_nvidia_wheels(b.release, b.variant, t) for t in targets):
                problems = [f"{a.label} brings CUDA {a.variant.cuda.major} libraries as nvidia-* wheels, "
                            f"{b.label} CUDA {b.variant.cuda.major} ones: two CUDA majors of one library "
                            f"install the same files"]
            if not problems:
                problems = [m for m in (unknown_pins(a, targets), unknown_pins(b, targets)) if m]
            pair_cache[k] = problems
        return pair_cache[k]

    options: dict[str, list[Candidate]] = {}
    for fam in families:
        keep = []
        for c in per_family[fam]:
            problems = [p for label, reqs in fixed for p in rules.pin_conflicts(reqs, pins(c), label, c.label)]
            unknown = unknown_pins(c, targets) if fixed and not problems else None
            if problems or unknown:
                result.rejected.append(Rejection(candidate=c.label, reasons=problems or [unknown or ""],
                                                 rules=["co_installed" if problems else "unknown"]))
            else:
                keep.append(c)
        options[fam] = keep
    if any(not options[f] for f in families):
        return result

    def combine(lists: dict[str, list[Candidate]]) -> list[Candidate] | None:
        budget = MAX_COMBINATIONS

        def go(i: int, chosen: list[Candidate]) -> list[Candidate] | None:
            nonlocal budget
            if i == len(families):
                return list(chosen)
            for c in lists[families[i]]:
                budget -= 1
                if budget < 0:
                    return None
                if any(pair(prev, c) for prev in chosen):
                    continue
                chosen.append(c)
                found = go(i + 1, chosen)
                if found:
                    return found
                chosen.pop()
            return None

        return go(0, [])

    # first pass: builds that bring their own CUDA libraries (nvidia-* wheels) only; builds that rely on a
    # system CUDA/cuDNN install are a fallback, since the target would need those installed as well
    choice = None
    if len(families) > 1:
        bundled = {f: [c for c in options[f] if any(rules.bundles_nvidia_wheels(c.release, c.variant, t)
                                                     for t in targets) or c.variant.cuda is None] for f in families}
        if all(bundled[f] for f in families):
            choice = combine(bundled)
    if choice is None:
        choice = combine(options)
    if choice and len(choice) > 1:
        result.trace.append("frameworks share one consistent set of nvidia-* wheels: "
                            + ", ".join(c.label for c in choice))
    if choice is None and len(families) > 1:
        first = [options[f][0] for f in families]
        for a_i, a in enumerate(first):
            for b in first[a_i + 1:]:
                for p in pair(a, b):
                    result.rejected.append(Rejection(candidate=f"{a.label} + {b.label}", reasons=[p],
                                                     rules=["shared_nvidia"]))
    result.choice = choice
    return result


def unknown_pins(c: Candidate, targets: list[Target]) -> str | None:
    """A build that brings nvidia-* wheels whose declared pins the matrix does not hold (neither read nor
    inferred) cannot be shown to share one set of them with another framework."""
    v = c.variant
    if v.nvidia_pins or "nvidia_pins" in v.inferred or \
            not any(rules.bundles_nvidia_wheels(c.release, v, t) for t in targets):
        return None
    return (f"the nvidia-* wheels {c.label} pins are not in the matrix, so whether it shares one set of them "
            f"with another framework is unknown")
