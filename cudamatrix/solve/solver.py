"""The solver: from Targets and a Request, the consistent set — or structured causes and ways out.

No I/O, no printing. Candidates are framework releases × variants from the Matrix. Hard rules live
in :mod:`cudamatrix.solve.rules`; preferences, in order: satisfy the request; keep what is installed when it
is consistent; newest versions; newest CUDA the targets run.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from cudamatrix.solve import rules
from cudamatrix.errors import UsageError
from cudamatrix.solve.causes import no_solution
from cudamatrix.solve.indexes import dedupe as _dedupe, index_args, index_layout
from cudamatrix.matrix.data import FrameworkRelease, Matrix, Variant
from cudamatrix.models import Environment, FrameworkChoice, Pin, Rejection, Solution
from cudamatrix.solve.target import Target

FAMILY_OF = {
    "torch": "torch", "torchvision": "torch", "torchaudio": "torch",
    "tensorflow": "tensorflow", "tensorflow-gpu": "tensorflow", "tensorflow-cpu": "tensorflow",
    "jax": "jax", "jaxlib": "jax",
}
FAMILIES = ("torch", "tensorflow", "jax")
MAX_COMBINATIONS = 200_000


@dataclass
class Request:
    """What the user asked for, grouped by framework family."""

    requirements: list[Requirement]
    families: dict[str, list[Requirement]] = field(default_factory=dict)
    passthrough: list[Requirement] = field(default_factory=list)
    implicit: bool = False  # derived from what is installed, not typed by the user

    @property
    def texts(self) -> list[str]:
        return [str(r) for r in self.requirements]


def parse_request(texts: list[str], installed: Environment | None = None) -> Request:
    """PEP 508 strings -> Request. Empty: what is installed now; nothing installed: torch. Raises UsageError."""
    implicit = False
    if not texts:
        implicit = True
        names = []
        if installed is not None:
            for dist in ("torch", "torchvision", "torchaudio", "tensorflow", "jax"):
                if dist in installed.packages:
                    names.append(dist)
        texts = names or ["torch"]
    reqs = []
    for text in texts:
        try:
            reqs.append(Requirement(text))
        except InvalidRequirement as exc:
            raise UsageError(f"cannot parse requirement {text!r}: {exc}",
                             hint="write PEP 508 requirements, e.g. 'torch>=2.3' 'tensorflow==2.15.*'") from None
    request = Request(reqs, implicit=implicit)
    for req in reqs:
        fam = FAMILY_OF.get(canonicalize_name(req.name))
        if fam is None and canonicalize_name(req.name).startswith(("jax-cuda", "jax-cuda12", "jax-cuda13")):
            fam = "jax"
        if fam:
            request.families.setdefault(fam, []).append(req)
        else:
            request.passthrough.append(req)
    return request


@dataclass(frozen=True, eq=False)
class Candidate:
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


def _matches_request(cand: Candidate, reqs: list[Requirement]) -> list[str]:
    """Reasons the candidate does not meet the requested specifiers (empty: it does)."""
    out = []
    for req in reqs:
        name = canonicalize_name(req.name)
        if name == cand.family or (name == "tensorflow-gpu" and cand.family == "tensorflow"):
            version, full = cand.version_text(True), cand.version_text()
        elif name in cand.release.companions:
            comp = cand.release.companions[name]
            version, full = comp, comp + (cand.variant.local_version or "")
        elif name in ("torchvision", "torchaudio", "jaxlib"):
            out.append(f"{cand.label}: the matching {name} version is not in the matrix")
            continue
        else:
            continue
        if req.specifier and not (req.specifier.contains(version, prereleases=True)
                                  or req.specifier.contains(full, prereleases=True)):
            out.append(f"{cand.label}: {name} {full} does not satisfy {req}")
    return out


def _installed_variant(env: Environment | None, family: str) -> tuple[str, str | None] | None:
    if env is None:
        return None
    for fw in env.frameworks:
        if fw.name == family:
            return str(Version(fw.version.split("+")[0])), fw.variant
    return None


def _order(cands: list[Candidate], targets: list[Target], installed: tuple[str, str | None] | None,
           wants_gpu: bool, matrix: Matrix) -> list[Candidate]:
    def key(c: Candidate):
        keep = installed is not None and installed[0] == str(c.release.version) and installed[1] == c.variant.name
        gpu_build = c.variant.cuda is not None
        full = all(rules.full_support(matrix, c.variant, t) for t in targets)
        # an answer resting only on known facts ranks above one resting on inferred facts
        known = not any(rules.inferred_facts(c.release, c.variant, t) for t in targets)
        return (keep, gpu_build == wants_gpu, known, c.release.version, full, c.variant.cuda or Version("0"),
                c.variant.pypi_default)

    return sorted(cands, key=key, reverse=True)


def solve(targets: list[Target], request: Request, matrix: Matrix, *,
          installed: Environment | None = None) -> Solution:
    """The chosen set for every target. Raises NoSolution with structured causes and ways out."""
    if not targets:
        raise UsageError("no target to solve for")
    unique: dict[tuple, list[Target]] = {}
    for t in targets:
        unique.setdefault(t.key(), []).append(t)
    reps = [group[0] for group in unique.values()]
    trace: list[str] = [f"target {t.describe()}" + (f" (+{len(unique[t.key()]) - 1} alike)"
                                                   if len(unique[t.key()]) > 1 else "") for t in reps]
    rejected: list[Rejection] = []
    per_family: dict[str, list[Candidate]] = {}
    all_reasons: dict[str, list[tuple[Candidate, list[rules.Reason], list[str]]]] = {}
    wants_gpu = all((t.has_gpu or t.driver) and t.driver_usable for t in reps)
    kept = _keep_unknown_installed(request, matrix, installed, trace)

    for family in FAMILIES:
        if family not in request.families:
            continue
        reqs = request.families[family]
        wants_cpu_variant = any(str(s.version).endswith("+cpu") for r in reqs for s in r.specifier)
        ok: list[Candidate] = []
        fam_reasons = all_reasons.setdefault(family, [])
        for release in matrix.frameworks(family):
            for variant in release.variants:
                cand = Candidate(release, variant)
                req_problems = _matches_request(cand, reqs)
                if req_problems:
                    fam_reasons.append((cand, [rules.Reason("request", p) for p in req_problems], {}))
                    continue
                reasons: list[rules.Reason] = []
                failing: dict[tuple, list[rules.Reason]] = {}
                for rep in reps:
                    found = rules.check(matrix, release, variant, rep)
                    if found:
                        reasons.extend(found)
                        failing[rep.key()] = found
                if reasons:
                    fam_reasons.append((cand, reasons, failing))
                    rejected.append(Rejection(candidate=cand.label, reasons=_dedupe([r.message for r in reasons]),
                                              rules=_dedupe([r.rule for r in reasons])))
                else:
                    ok.append(cand)
        if wants_gpu and not wants_cpu_variant:
            # a CPU build on a GPU machine is the CPU_ONLY_BUILD problem, never a silent answer
            cpu = [c for c in ok if c.variant.cuda is None]
            for c in cpu:
                reason = rules.Reason("gpu_wanted", f"{c.label} is a CPU build and the target has a GPU "
                                                    f"(ask for it explicitly, e.g. {family}=={c.version_text()})")
                fam_reasons.append((c, [reason], {}))
                rejected.append(Rejection(candidate=c.label, reasons=[reason.message], rules=["gpu_wanted"]))
            ok = [c for c in ok if c.variant.cuda is not None]
        per_family[family] = _order(ok, reps, _installed_variant(installed, family),
                                    wants_gpu and not wants_cpu_variant, matrix)
        trace.append(f"{family}: {len(ok)} of {len(fam_reasons) + len(ok)} candidates fit every target")

    missing = [f for f in request.families if not per_family.get(f)]
    if missing:
        raise no_solution(matrix, request, reps, unique, all_reasons, per_family, missing, rejected)

    fixed = _co_installed_requirements(installed, request)
    choice = _search(per_family, reps, fixed, rejected, trace, matrix) if per_family else []
    if choice is None:
        raise no_solution(matrix, request, reps, unique, all_reasons, per_family, [], rejected, combined=True)
    return _solution(choice, request, reps, matrix, installed, rejected, trace, kept)


def _keep_unknown_installed(request: Request, matrix: Matrix, installed: Environment | None,
                            trace: list[str]) -> list[FrameworkChoice]:
    """An installed framework newer than the matrix knows, which meets the request, stays as it is:
    minimal change beats a downgrade to what the matrix happens to list. Its family leaves the request;
    its declared nvidia-* requirements still constrain the others (as a co-installed framework)."""
    kept = []
    if installed is None:
        return kept
    for fw in installed.frameworks:
        fam = fw.name
        if fam not in request.families or fam not in FAMILIES:
            continue
        base = fw.version.split("+")[0]
        try:
            known = any(r.version == Version(base) for r in matrix.frameworks(fam))
            newer = all(r.version < Version(base) for r in matrix.frameworks(fam))
        except Exception:
            continue
        if known or not newer:
            continue
        own = [r for r in request.families[fam] if canonicalize_name(r.name) == fam]
        if all(not r.specifier or r.specifier.contains(base, prereleases=True) for r in own):
            del request.families[fam]
            kept.append(FrameworkChoice(name=fam, version=fw.version, variant=fw.variant or "unknown",
                                        cuda=fw.cuda, cudnn=fw.cudnn))
            trace.append(f"{fam} {fw.version} is installed and newer than matrix {matrix.meta.data_version} "
                         f"knows: kept as it is, unverified by the matrix")
    return kept


def _co_installed_requirements(installed: Environment | None, request: Request) -> list[tuple[str, list[Requirement]]]:
    """Declared nvidia-* requirements of installed frameworks that the request leaves in place."""
    if installed is None:
        return []
    out = []
    for dist, reqs in installed.requirements.items():
        fam = FAMILY_OF.get(dist) or ("jax" if dist.startswith("jax-cuda") else None)
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


def _search(per_family: dict[str, list[Candidate]], targets: list[Target],
            fixed: list[tuple[str, list[Requirement]]], rejected: list[Rejection], trace: list[str],
            matrix: Matrix | None = None):
    """Lexicographic search in preference order; pairwise checks of shared nvidia-* wheels."""
    families = list(per_family)
    pin_cache: dict[Candidate, list[Requirement]] = {}
    pair_cache: dict[tuple, list[str]] = {}
    budget = [MAX_COMBINATIONS]

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
                problems = [m for m in (_unknown_pins(a, targets), _unknown_pins(b, targets)) if m]
            pair_cache[k] = problems
        return pair_cache[k]

    for fam in families:
        keep = []
        for c in per_family[fam]:
            problems = [p for label, reqs in fixed for p in rules.pin_conflicts(reqs, pins(c), label, c.label)]
            unknown = _unknown_pins(c, targets) if fixed and not problems else None
            if problems or unknown:
                rejected.append(Rejection(candidate=c.label, reasons=problems or [unknown],
                                          rules=["co_installed" if problems else "unknown"]))
            else:
                keep.append(c)
        per_family[fam] = keep
    if any(not per_family[f] for f in families):
        return None

    def go(i: int, chosen: list[Candidate]):
        if i == len(families):
            return list(chosen)
        for c in per_family[families[i]]:
            budget[0] -= 1
            if budget[0] < 0:
                return None
            if any(pair(prev, c) for prev in chosen):
                continue
            chosen.append(c)
            found = go(i + 1, chosen)
            if found:
                return found
            chosen.pop()
        return None

    # first pass: builds that bring their own CUDA libraries (nvidia-* wheels) only; builds that rely on a
    # system CUDA/cuDNN install are a fallback, since the target would need those installed as well
    result = None
    if len(families) > 1:
        full = dict(per_family)
        bundled = {f: [c for c in full[f] if any(rules.bundles_nvidia_wheels(c.release, c.variant, t)
                                                  for t in targets) or c.variant.cuda is None] for f in families}
        if all(bundled[f] for f in families):
            per_family.update(bundled)
            result = go(0, [])
            per_family.update(full)
    if result is None:
        budget[0] = MAX_COMBINATIONS
        result = go(0, [])
    if result and len(result) > 1:
        trace.append("frameworks share one consistent set of nvidia-* wheels: "
                     + ", ".join(c.label for c in result))
    if result is None and len(families) > 1:
        first = [per_family[f][0] for f in families]
        for a_i, a in enumerate(first):
            for b in first[a_i + 1:]:
                for p in pair(a, b):
                    rejected.append(Rejection(candidate=f"{a.label} + {b.label}", reasons=[p],
                                              rules=["shared_nvidia"]))
    return result


def _unknown_pins(c: Candidate, targets: list[Target]) -> str | None:
    """A build that brings nvidia-* wheels whose declared pins the matrix does not hold (neither read nor
    inferred) cannot be shown to share one set with another framework."""
    v = c.variant
    if v.nvidia_pins or "nvidia_pins" in v.inferred or \
            not any(rules.bundles_nvidia_wheels(c.release, v, t) for t in targets):
        return None
    return (f"the nvidia-* wheels {c.label} pins are not in the matrix, so whether it shares one set of them "
            f"with another framework is unknown")


def _framework_pins(c: Candidate, request: Request, installed: Environment | None, target: Target) -> list[Pin]:
    v = c.variant
    use_index = v.index_url if (v.index_url and not (v.pypi_default and target.platform == "linux_x86_64")) else None
    local = (v.local_version or "") if use_index else ""
    out: list[Pin] = []
    fam_reqs = request.families.get(c.family, [])
    asked = {canonicalize_name(r.name) for r in fam_reqs}
    if c.family == "torch":
        out.append(Pin(name="torch", version=f"{c.release.version}{local}", index_url=use_index))
        for comp in ("torchvision", "torchaudio"):
            wanted = comp in asked or (installed is not None and comp in installed.packages)
            if wanted and comp in c.release.companions:
                out.append(Pin(name=comp, version=f"{c.release.companions[comp]}{local}", index_url=use_index))
    elif c.family == "tensorflow":
        extras = [v.pip_extra] if v.pip_extra else []
        out.append(Pin(name="tensorflow", version=str(c.release.version), extras=extras, index_url=use_index))
    else:
        out.append(Pin(name="jax", version=str(c.release.version), extras=[v.pip_extra] if v.pip_extra else [],
                       index_url=use_index))
        if "jaxlib" in c.release.companions:
            out.append(Pin(name="jaxlib", version=c.release.companions["jaxlib"], index_url=use_index))
        for text in v.extra_packages:
            req = Requirement(text)
            exact = [s.version for s in req.specifier if s.operator == "=="]
            if exact:
                out.append(Pin(name=req.name, version=exact[0], extras=sorted(req.extras)))
    for req in rules.pins_for(v, target):
        exact = [s.version for s in req.specifier if s.operator == "==" and "*" not in s.version]
        if exact:  # keep extras: cuda-toolkit[cublas,...]==X installs nothing of use without them
            out.append(Pin(name=str(canonicalize_name(req.name)), version=exact[0], extras=sorted(req.extras)))
    return out


_FAMILY_DISTS = {"torch": ("torch", "torchvision", "torchaudio"), "tensorflow": ("tensorflow",),
                 "jax": ("jax", "jaxlib")}


def _same_version(installed: str | None, wanted: str, variant: str | None = None) -> bool:
    """Whether the installed version is the wanted build. "2.1.2+cu121" from the framework's index is the
    same build as the default index's "2.1.2" when the chosen variant is cu121."""
    if installed is None:
        return False
    try:
        have, want = Version(installed), Version(wanted)
    except Exception:
        return installed == wanted
    if have == want:
        return True
    return bool(variant) and want.local is None and have.public == want.public and have.local == variant


def _solution(choice: list[Candidate], request: Request, targets: list[Target], matrix: Matrix,
              installed: Environment | None, rejected: list[Rejection], trace: list[str],
              kept: list[FrameworkChoice] = ()) -> Solution:
    target = targets[0]
    pins: dict[str, Pin] = {}
    frameworks = []
    for c in choice:
        for p in _framework_pins(c, request, installed, target):
            pins.setdefault(p.name, p)
        frameworks.append(FrameworkChoice(name=c.family, version=str(c.release.version), variant=c.variant.name,
                                          cuda=str(c.variant.cuda) if c.variant.cuda else None,
                                          cudnn=str(c.variant.cudnn) if c.variant.cudnn else None,
                                          index_url=c.variant.index_url, matrix_source=c.variant.source))
        trace.append(f"chose {c.label}" + (f" (CUDA {c.variant.cuda}, cuDNN {c.variant.cudnn or 'unknown'})"
                                            if c.variant.cuda else " (CPU build)"))
    frameworks.extend(kept)
    for req in request.passthrough:
        trace.append(f"{req} is not a framework the matrix knows: passed to the installer as given")
    packages = list(pins.values())
    have = installed.packages if installed is not None else {}
    variant_of = {n: c.variant.name for c in choice for n in _FAMILY_DISTS[c.family]}
    to_install = [p for p in packages if not _same_version(have.get(p.name), p.version, variant_of.get(p.name))]
    fw_names = {"torch", "torchvision", "torchaudio", "tensorflow", "jax", "jaxlib"}
    if to_install and all(p.name.startswith("nvidia-") for p in to_install):
        trace.append("only nvidia-* wheels differ from the solution: reinstalling those alone")
    elif to_install and any(p.name in fw_names for p in to_install):
        # a framework changes: install its whole set so pip resolves them together
        to_install = [p for p in packages if p.name in fw_names or
                      not _same_version(have.get(p.name), p.version, variant_of.get(p.name))]
    index_url, extra = index_layout(to_install, bool(request.passthrough))
    pip_args = index_args(index_url, extra) + [p.requirement() for p in to_install] + \
        [str(r) for r in request.passthrough]
    env_changes = _env_changes(installed) if installed is not None else {}
    main = next((c for c in choice if c.family == "torch"), choice[0] if choice else None)
    main_fw = next((f for f in frameworks if main is None or f.name == main.family), None)
    return Solution(
        request=request.texts, targets=[t.name for t in targets], frameworks=frameworks, packages=packages,
        variant=main_fw.variant if main_fw else None, cuda=main_fw.cuda if main_fw else None,
        cudnn=main_fw.cudnn if main_fw else None, index_url=index_url,
        extra_index_urls=extra, pip_args=pip_args if to_install or request.passthrough else [],
        env=env_changes, unchanged=not to_install and not env_changes, to_install=to_install, rejected=rejected,
        trace=trace, matrix_version=matrix.meta.data_version, unverified=_unverified(choice, targets, trace))


def _unverified(choice: list[Candidate], targets: list[Target], trace: list[str]) -> list[dict[str, str]]:
    """The inferred facts the answer rests on: [{fact, basis}]."""
    out: dict[str, str] = {}
    for c in choice:
        for t in targets:
            for fact, basis in rules.inferred_facts(c.release, c.variant, t):
                out.setdefault(fact, basis)
    for fact in out:
        trace.append(f"{fact} is inferred, not read from an artifact: {out[fact]}")
    return [{"fact": f, "basis": b} for f, b in out.items()]


def _env_changes(env: Environment) -> dict[str, str]:
    from cudamatrix.detect.libpaths import library_path_fix

    return library_path_fix(env)
