"""The search: candidates per family, screened by the hard rules, ordered by a named preference, then
combined so that co-installed frameworks share one consistent set of ``nvidia-*`` wheels. No I/O.

Every function returns what it found (candidates, verdicts, rejections, trace lines); nothing is
passed in to be filled.
"""
from __future__ import annotations

from collections.abc import Iterator
from functools import cached_property
from typing import NamedTuple

from packaging.requirements import Requirement
from packaging.version import InvalidVersion, Version

from cudamatrix.matrix.data import FrameworkRelease, Matrix, Variant
from cudamatrix.models import Rejection
from cudamatrix.names import FAMILIES, canonical
from cudamatrix.schema import field, record
from cudamatrix.solve import rules
from cudamatrix.solve.driverclass import Memo, Shared, SharedChecks
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

    @cached_property
    def _version(self) -> str:
        """The release's version as text, made once per candidate (packaging's ``Version.__str__`` builds it
        from its parts at every call, and a screen asks three times a candidate)."""
        return str(self.release.version)

    @property
    def label(self) -> str:
        return f"{self.release.name} {self._version} {self.variant.name}"

    def version_text(self, base_only: bool = False) -> str:
        local = self.variant.local_version or ""
        return self._version if base_only or not local else f"{self._version}{local}"


class Verdict(NamedTuple):
    """Why a candidate was turned down: its reasons (each once), and per target (by key) the reasons there."""

    candidate: Candidate
    reasons: list[rules.Reason]
    failing: dict[tuple, list[rules.Reason]]


class Preference(NamedTuple):
    """The sort key of a candidate, most important first; higher is better (docs/rules.md, "Preferences")."""

    keeps_installed: bool  # the installed build, when it is consistent: minimal change
    build_as_wanted: bool  # a GPU build for a GPU target, a CPU build for a CPU one
    facts_known: bool  # it rests only on known facts, not on inferred ones (docs/rules.md, "known / inferred")
    version: Version  # newest release
    cuda_major: int  # the newest CUDA major that runs as if fully supported (SASS for every GPU: no PTX JIT)
    full_driver_support: bool  # over minor-version compatibility
    cuda: Version  # newest CUDA
    pypi_default: bool  # the default index's own wheel


@record
class Screened:
    """One family's candidates after the hard rules: those that fit, in preference order, and the rest."""

    fitting: list[Candidate]
    verdicts: list[Verdict]  # with ``explain=False``, those of the request and the CPU builds only
    rejected: list[Rejection] = field(default_factory=list)
    candidates: int = 0  # how many there were


@record
class SearchResult:
    """The chosen candidates (one per family; None: no combination fits), with the rejections and trace."""

    choice: list[Candidate] | None
    rejected: list[Rejection] = field(default_factory=list)
    trace: list[str] = field(default_factory=list)


def build_extras(matrix_extras: set[str] | frozenset[str], extras: set[str]) -> set[str]:
    """The requested extras that name a build (``cuda12``, ``cuda13``, ``and-cuda``, ``cpu``): the extras of the
    family's GPU variants in the matrix, any ``cudaNN``-style extra (JAX's installation guide names its CUDA
    builds by extra), and ``cpu``."""
    import re

    return {e for e in extras if e in matrix_extras or e == "cpu" or re.fullmatch(r"cuda\d+(?:[_-]\w+)?", e)}


def extra_problems(cand: Candidate, req: Requirement, matrix_extras: set[str] | frozenset[str]) -> list[str]:
    """Why the candidate is not the build the requirement's extras name (``jax[cuda13]`` is the CUDA 13 plugin
    build, never the CUDA 12 one; ``jax[cpu]`` the CPU build): pip installs exactly the extra asked for."""
    if not req.extras:  # the common case, and no extra names no build
        return []
    wanted = build_extras(matrix_extras, {canonical(e) for e in req.extras})
    if not wanted:
        return []
    have = cand.variant.pip_extra
    if have in wanted or (cand.variant.cuda is None and wanted == {"cpu"}):
        return []
    offered = ", ".join(sorted({v.pip_extra or "cpu" for v in cand.release.variants}))
    asked = ",".join(sorted(wanted))
    return [f"{cand.label}: the request asks for {req.name}[{asked}], and this build is "
            f"{'[' + have + ']' if have else 'the ' + ('CPU build' if cand.variant.cuda is None else 'plain one')}"
            f" ({cand.family} {cand.release.version} builds in the matrix: {offered})"]


def matches_request(cand: Candidate, reqs: list[Requirement], matrix_extras: frozenset[str] | set[str] = frozenset()
                    ) -> list[str]:
    """Reasons the candidate does not meet the requested specifiers and build extras (empty: it does); a yanked
    release (PEP 592) meets only a requirement that pins it exactly, as pip installs it only then."""
    out = [] if not cand.release.yanked or _pinned_exactly(cand, reqs) else \
        [f"{cand.label}: {cand.release.name} {cand.release.version} is yanked ({cand.release.yanked}); pip installs "
         f"it only when pinned exactly ({cand.release.name}=={cand.release.version})"]
    family = FAMILIES[cand.family]
    for req in reqs:
        name = canonical(req.name)
        if name == cand.family:
            out += extra_problems(cand, req, matrix_extras)
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
        # a build whose wheels carry no local version is named by its variant (check -r: torch==2.5.1+cu118)
        # (with a local version, that name is the full version: two texts to try, not three)
        texts = (version, full, f"{version}+{cand.variant.name}") if not cand.variant.local_version else \
            (version, full)
        if req.specifier and not any(_meets(req, v) for v in texts):
            out.append(f"{cand.label}: {name} {full} does not satisfy {_text(req)}")
    return out


_TEXTS: dict[int, tuple[Requirement, str, str]] = {}  # id -> (the requirement, kept alive so the id stays its,
#                                                        its text, its specifiers' text)


def _texts(req: Requirement) -> tuple[Requirement, str, str]:
    hit = _TEXTS.get(id(req))
    if hit is None or hit[0] is not req:
        if len(_TEXTS) >= 1024:
            _TEXTS.clear()
        hit = _TEXTS[id(req)] = (req, str(req), str(req.specifier))
    return hit


def _text(req: Requirement) -> str:
    """``str(req)``, made once per requirement (packaging rebuilds it from its parts at every call, and every
    candidate a pin turns down quotes it)."""
    return _texts(req)[1]


_VERSIONS: dict[str, Version | None] = {}  # a version text -> its Version (None: not a version); matrix-bounded
_MET: dict[tuple[str, str], bool] = {}  # (specifiers' text, version text) -> whether the version meets them


def _meets(req: Requirement, text: str) -> bool:
    """``req.specifier.contains(text, prereleases=True)``, each answer worked out once per process: a ``check``
    screens every candidate against several requests (its ways out, its index advice), two or three version
    texts a candidate, and packaging parses the specifier's version and the candidate's public version again
    at each call (those parses were a quarter of ``check``'s time). The same specifiers' text means the same
    specifiers. A text that is no version meets no specifier, as in packaging."""
    key = (_texts(req)[2], text)
    met = _MET.get(key)
    if met is None:
        if text not in _VERSIONS:
            try:
                _VERSIONS[text] = Version(text)
            except InvalidVersion:
                _VERSIONS[text] = None
        version = _VERSIONS[text]
        if len(_MET) >= 65536:
            _MET.clear()
        met = _MET[key] = version is not None and req.specifier.contains(version, prereleases=True)
    return met


def _pinned_exactly(cand: Candidate, reqs: list[Requirement]) -> bool:
    """A requirement of the family's main distribution pins this release with ``==`` (PEP 592)."""
    return any(canonical(r.name) == cand.family and s.operator in ("==", "===") and "*" not in s.version and
               s.contains(cand.version_text(True), prereleases=True) for r in reqs for s in r.specifier)


def preference(c: Candidate, targets: list[Target], installed: tuple[str, str | None] | None,
               wants_gpu: bool, matrix: Matrix) -> Preference:
    """The candidate's :class:`Preference` for these targets and this installed build (version, variant)."""
    gpu_build = c.variant.cuda is not None
    full = [rules.full_support(matrix, c.variant, t) for t in targets]  # once: both fields below read it
    return Preference(
        keeps_installed=installed is not None and installed[0] == str(c.release.version)
        and installed[1] == c.variant.name,
        build_as_wanted=gpu_build == wants_gpu,
        facts_known=not any(rules.inferred_facts(c.release, c.variant, t) for t in targets),
        version=c.release.version,
        cuda_major=c.variant.cuda.major if c.variant.cuda is not None and all(
            f or rules.runs_as_fully_supported(matrix, c.variant, t) for f, t in zip(full, targets, strict=True))
        else 0,
        full_driver_support=all(full),
        cuda=c.variant.cuda or Version("0"),
        pypi_default=all(rules.platform_variant(c.variant, t.platform).pypi_default for t in targets),
    )


def _on_targets(shared: SharedChecks, cand: Candidate, keys: list[tuple], failing_classes: dict[int, Shared]
                ) -> tuple[list[rules.Reason], dict[tuple, list[rules.Reason]]]:
    """The hard rules on every target, from the verdicts on the classes where the build fails: all the reasons
    (each once, in the order of the targets) and the reasons per target (by key) where it fails."""
    reasons: dict[tuple, rules.Reason] = {}
    failing: dict[tuple, list[rules.Reason]] = {}
    seen: set[int] = set()  # the lists already added (a class's list, shared by its members)
    release, variant, member, hit_of = cand.release, cand.variant, shared.member, failing_classes.get
    for target, key, number in zip(shared.targets, keys, shared.of, strict=True):
        hit = hit_of(number)
        if hit is None:
            continue
        # the class's own list where its words do not quote the driver (SharedChecks.member's first case, inline:
        # a fleet asks this once per node and failing build)
        found = hit.reasons if hit.quotes is None else member(release, variant, hit, target)
        if not found:
            continue
        failing[key] = found
        if id(found) not in seen:  # each list is kept in ``failing``: its id is not reused meanwhile
            seen.add(id(found))
            for r in found:
                reasons.setdefault((r.rule, r.message, r.row, r.need_driver), r)
    return list(reasons.values()), failing


def _asks_cpu_build(reqs: list[Requirement]) -> bool:
    """The request names a CPU build (``torch==2.5.1+cpu``, ``jax[cpu]``)."""
    return any(str(s.version).endswith("+cpu") for r in reqs for s in r.specifier) or \
        any("cpu" in r.extras for r in reqs)


def _on_rules(shared: SharedChecks, cand: Candidate, keys: list[tuple], explain: bool) -> Verdict | None:
    """The candidate's verdict from the hard rules (None: it fits every target); without ``explain``, an empty
    one when it does not fit (whether is all that is asked)."""
    failing_classes = shared.on_classes(cand.release, cand.variant, first_only=not explain)
    if not failing_classes:
        return None
    if not explain:
        return Verdict(cand, [], {})
    return Verdict(cand, *_on_targets(shared, cand, keys, failing_classes))


def screen(family: str, reqs: list[Requirement], matrix: Matrix, targets: list[Target], wants_gpu: bool,
           installed: tuple[str, str | None] | None, *, explain: bool = True, memo: Memo | None = None) -> Screened:
    """Every candidate of one family against the request and the hard rules on every target, checked once per
    class of targets (:class:`SharedChecks`; ``memo``: its verdicts, shared by the screens of one solve).
    ``explain=False``: only which candidates fit (the verdicts and rejections of the rules are left out)."""
    gpu_wanted = wants_gpu and not _asks_cpu_build(reqs)
    shared = SharedChecks(matrix, targets, memo)  # a fleet: one check per class of targets, not per node
    keys = [t.key() for t in targets] if explain else []
    ok: list[Candidate] = []
    verdicts: list[Verdict] = []
    rejected: list[Rejection] = []
    total = 0
    for cand, req_problems in _candidates(family, reqs, matrix, shared.memo):
        total += 1
        if req_problems:
            verdicts.append(Verdict(cand, [rules.Reason("request", p) for p in req_problems], {}))
        elif explain or not (gpu_wanted and cand.variant.cuda is None):  # else turned down below (_gpu_builds_only)
            verdict = _on_rules(shared, cand, keys, explain)
            if verdict is None:
                ok.append(cand)
            elif verdict.reasons:
                verdicts.append(verdict)
                reasons = verdict.reasons
                rejected.append(Rejection(candidate=cand.label, reasons=dedupe([r.words() for r in reasons]),
                                          rules=dedupe([r.rule for r in reasons])))
    if gpu_wanted:
        ok = _gpu_builds_only(family, ok, verdicts, rejected)
    ok.sort(key=lambda c: preference(c, targets, installed, gpu_wanted, matrix), reverse=True)
    return Screened(ok, verdicts, rejected, total)


def _candidates(family: str, reqs: list[Requirement], matrix: Matrix,
                memo: Memo) -> Iterator[tuple[Candidate, list[str]]]:
    """Each build of the family as a candidate, with its problems with the request (:func:`matches_request`):
    both made once per ``memo`` (the screens of one solve and of its ways out ask again)."""
    extras = {v.pip_extra for r in matrix.frameworks(family) for v in r.variants if v.pip_extra}
    mine = _concerning(family, reqs, matrix)
    asked = tuple(_text(r) for r in mine)  # the request as the memo knows it: a build's problems with it are its own
    for release in matrix.frameworks(family):
        for variant in release.variants:
            build = (id(release), id(variant))  # a matrix built in code may share a variant between releases
            cand = memo.candidates.get(build)
            if cand is None:
                cand = memo.candidates[build] = Candidate(release, variant)
            problems = memo.requested.get((build, asked))
            if problems is None:
                problems = memo.requested[(build, asked)] = matches_request(cand, mine, extras)
            yield cand, problems


def _concerning(family: str, reqs: list[Requirement], matrix: Matrix) -> list[Requirement]:
    """The requirements :func:`matches_request` reads for this family's candidates: those naming the family, one
    of its aliases or a companion of one of its releases (the rest it passes over), in their order."""
    fam = FAMILIES[family]
    names = {family, *fam.aliases, *fam.companions}
    names.update(name for release in matrix.frameworks(family) for name in release.companions)
    return [r for r in reqs if canonical(r.name) in names]


def _gpu_builds_only(family: str, ok: list[Candidate], verdicts: list[Verdict],
                     rejected: list[Rejection]) -> list[Candidate]:
    """A CPU build on a GPU machine is the CPU_ONLY_BUILD problem, never a silent answer: each is turned down
    (added to ``verdicts`` and ``rejected``) and the GPU builds are returned."""
    for c in (c for c in ok if c.variant.cuda is None):
        reason = rules.Reason("gpu_wanted", f"{c.label} is a CPU build and the target has a GPU "
                                            f"(ask for it explicitly, e.g. {family}=={c.version_text()})")
        verdicts.append(Verdict(c, [reason], {}))
        rejected.append(Rejection(candidate=c.label, reasons=[reason.message], rules=["gpu_wanted"]))
    return [c for c in ok if c.variant.cuda is not None]


class _Pairs:
    """The nvidia-* requirements of each candidate on the targets, and the problems of each pair of candidates
    installed together, each worked out once."""

    def __init__(self, targets: list[Target], matrix: Matrix | None, implied: bool = False) -> None:
        """``implied``: a build whose declared nvidia-* pins the matrix lacks is judged by the pins its known CUDA
        and cuDNN imply (:func:`rules.implied_pins`), instead of being refused as unknown."""
        self.targets, self.matrix, self.implied = targets, matrix, implied
        self._pins: dict[Candidate, list[Requirement]] = {}
        self._pairs: dict[tuple[Candidate, Candidate], list[str]] = {}

    def pins(self, c: Candidate) -> list[Requirement]:
        if c not in self._pins:
            seen: dict[str, Requirement] = {}
            for t in self.targets:
                for r in (rules.conflict_pins(self.matrix, c.release, c.variant, t) if self.matrix is not None
                          else rules.pins_for(c.variant, t)):
                    seen.setdefault(str(r), r)
            self._pins[c] = list(seen.values())
        return self._pins[c]

    def problems(self, a: Candidate, b: Candidate) -> list[str]:
        """Why ``a`` and ``b`` cannot share one environment (empty: they can)."""
        k = (a, b)
        if k not in self._pairs:
            self._pairs[k] = rules.pin_conflicts(self.pins(a), self.pins(b), a.label, b.label) or \
                self._two_majors(a, b) or [m for c in (a, b) for m in [unknown_pins(c, self.targets)]
                                           if m and not (self.implied and self.pins(c))]
        return self._pairs[k]

    def _two_majors(self, a: Candidate, b: Candidate) -> list[str]:
        """Both bring CUDA libraries as nvidia-* wheels, of two CUDA majors: they install the same files."""
        if not (a.variant.cuda and b.variant.cuda and a.variant.cuda.major != b.variant.cuda.major):
            return []
        if not any(rules.bundles_nvidia_wheels(a.release, a.variant, t) and
                   rules.bundles_nvidia_wheels(b.release, b.variant, t) for t in self.targets):
            return []
        return [f"{a.label} brings CUDA {a.variant.cuda.major} libraries as nvidia-* wheels, "
                f"{b.label} CUDA {b.variant.cuda.major} ones: two CUDA majors of one library "
                f"install the same files"]


def _combine(families: list[str], lists: dict[str, list[Candidate]], pairs: _Pairs) -> list[Candidate] | None:
    """The first combination, one candidate per family in preference order, whose pairs all share one set of
    nvidia-* wheels; None when there is none or the search runs past MAX_COMBINATIONS."""
    budget = MAX_COMBINATIONS

    def go(i: int, chosen: list[Candidate]) -> list[Candidate] | None:
        nonlocal budget
        if i == len(families):
            return list(chosen)
        for c in lists[families[i]]:
            budget -= 1
            if budget < 0:
                return None
            if any(pairs.problems(prev, c) for prev in chosen):
                continue
            chosen.append(c)
            found = go(i + 1, chosen)
            if found:
                return found
            chosen.pop()
        return None

    return go(0, [])


def _beside_fixed(candidates: list[Candidate], fixed: list[tuple[str, list[Requirement]]], pairs: _Pairs,
                  targets: list[Target], rejected: list[Rejection]) -> list[Candidate]:
    """The candidates that share one set of nvidia-* wheels with the installed frameworks left in place; the
    others are added to ``rejected`` (rule ``co_installed``, or ``unknown`` when their pins are not known)."""
    keep = []
    for c in candidates:
        problems = [p for label, reqs in fixed for p in rules.pin_conflicts(reqs, pairs.pins(c), label, c.label)]
        unknown = unknown_pins(c, targets) if fixed and not problems else None
        if problems or unknown:
            rejected.append(Rejection(candidate=c.label, reasons=problems or [unknown or ""],
                                      rules=["co_installed" if problems else "unknown"]))
        else:
            keep.append(c)
    return keep


def search(per_family: dict[str, list[Candidate]], targets: list[Target],
           fixed: list[tuple[str, list[Requirement]]], matrix: Matrix | None = None) -> SearchResult:
    """Lexicographic search in preference order; pairwise checks of shared nvidia-* wheels.

    ``fixed``: (label, nvidia-* requirements) of installed frameworks the request leaves in place."""
    families = list(per_family)
    result = SearchResult(None)
    pairs = _Pairs(targets, matrix)
    options = {fam: _beside_fixed(per_family[fam], fixed, pairs, targets, result.rejected) for fam in families}
    if any(not options[f] for f in families):
        return result
    choice = _choose(families, options, pairs, targets)
    if choice and len(choice) > 1:
        result.trace.append("frameworks share one consistent set of nvidia-* wheels: "
                            + ", ".join(c.label for c in choice))
    if choice is None and len(families) > 1:
        result.rejected += _shared_rejections([options[f][0] for f in families], pairs)
    result.choice = choice
    return result


def _choose(families: list[str], options: dict[str, list[Candidate]], pairs: _Pairs,
            targets: list[Target]) -> list[Candidate] | None:
    """The combination to install. First pass: builds that bring their own CUDA libraries (nvidia-* wheels) only;
    builds that rely on a system CUDA/cuDNN install are a fallback, since the target would need those installed
    as well."""
    if len(families) > 1:
        bundled = {f: [c for c in options[f] if any(rules.bundles_nvidia_wheels(c.release, c.variant, t)
                                                     for t in targets) or c.variant.cuda is None] for f in families}
        if all(bundled[f] for f in families):
            choice = _combine(families, bundled, pairs)
            if choice is not None:
                return choice
    choice = _combine(families, options, pairs)
    if choice is None and len(families) > 1 and pairs.matrix is not None:
        # no set rests on declared pins alone: judge builds whose pins the matrix lacks by the pins their known
        # CUDA and cuDNN imply (the answer then lists those pins as inferred: assemble's ``unverified``)
        choice = _combine(families, options, _Pairs(targets, pairs.matrix, implied=True))
    return choice


def _shared_rejections(first: list[Candidate], pairs: _Pairs) -> list[Rejection]:
    """Why the families' first choices do not go together: one rejection per problem of each pair."""
    return [Rejection(candidate=f"{a.label} + {b.label}", reasons=[p], rules=["shared_nvidia"])
            for a_i, a in enumerate(first) for b in first[a_i + 1:] for p in pairs.problems(a, b)]


def implied_basis(c: Candidate, others: list[Candidate], targets: list[Target], matrix: Matrix) -> str | None:
    """For a build chosen beside other frameworks whose declared nvidia-* pins the matrix lacks: the basis of
    the inference that they share one set (the pins its known CUDA and cuDNN imply, which the others' pins
    admit); None when its pins are known or nothing else brings nvidia-* wheels."""
    sharing = [o for o in others if any(rules.bundles_nvidia_wheels(o.release, o.variant, t) for t in targets)]
    if not sharing or unknown_pins(c, targets) is None:
        return None
    implied = dedupe([str(r) for t in targets for r in rules.conflict_pins(matrix, c.release, c.variant, t)])
    return (f"its declared nvidia-* pins are not in the matrix: judged by the pins its known CUDA "
            f"{c.variant.cuda} and cuDNN {c.variant.cudnn or 'unknown'} imply ({', '.join(implied)}), which "
            f"{', '.join(o.label for o in sharing)} admit{'s' if len(sharing) == 1 else ''}; its other nvidia-* "
            f"wheels are not checked against them")


def unknown_pins(c: Candidate, targets: list[Target]) -> str | None:
    """A build that brings nvidia-* wheels whose declared pins the matrix does not hold (neither read nor
    inferred) cannot be shown to share one set of them with another framework."""
    v = c.variant
    if v.nvidia_pins or "nvidia_pins" in v.inferred or \
            not any(rules.bundles_nvidia_wheels(c.release, v, t) for t in targets):
        return None
    return (f"the nvidia-* wheels {c.label} pins are not in the matrix, so whether it shares one set of them "
            f"with another framework is unknown")
