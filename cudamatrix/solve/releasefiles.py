"""Packages whose binary wheels are release files, not index entries (flash-attn): solved with torch from the
file-name rule their own build script states (data/extensions.json ``release_files``).

Rules, written down:

- The rule names one file per (release, torch major.minor, CUDA, C++ ABI, Python, platform). A torch build can
  carry it only when each part is known: a CUDA build (the release files are CUDA builds) whose CUDA major the
  rule maps to a file of that same major (flash-attn's ``setup.py``: CUDA 11 -> the ``cu11`` file, every other
  major -> ``cu12``; a CUDA 13 torch would get a CUDA 12 file, which is not vouched for), whose C++ ABI a torch row
  states (``cxx11_abi``, read from its wheel: never guessed), for a Linux x86_64 target (the ABI read is that
  wheel's).
- The release must be named exactly (``flash-attn==2.8.3``): which releases exist, and which files each has, is
  not read here (the rule's ``unread``); the answer says so beside the URL.
- When no torch build that runs on the target carries it: no solution (exit 3), the cause naming what is unknown
  or does not match, and the nearest build that would carry it.
No I/O.
"""
from __future__ import annotations

from packaging.requirements import Requirement

from cudamatrix.errors import NoSolution
from cudamatrix.matrix.data import Matrix, ReleaseFiles
from cudamatrix.models import Cause, WayOut
from cudamatrix.names import canonical
from cudamatrix.solve.request import Request
from cudamatrix.solve.search import Candidate
from cudamatrix.solve.target import Target

PLATFORM = "linux_x86_64"


def requested(passthrough: list[Requirement], matrix: Matrix) -> list[tuple[Requirement, ReleaseFiles]]:
    """The requirements (not by URL) of a package the matrix holds a release-file rule for, with the rule."""
    rules = {canonical(r.name): r for r in matrix.extensions.release_files}
    return [(req, rules[canonical(req.name)]) for req in passthrough if canonical(req.name) in rules and not req.url]


def exact_version(req: Requirement) -> str | None:
    """The release an ``==`` requirement names (no wildcard); None otherwise."""
    specs = list(req.specifier)
    if len(specs) == 1 and specs[0].operator in ("==", "===") and "*" not in specs[0].version:
        return specs[0].version
    return None


def file_cuda(cand: Candidate) -> str | None:
    """The CUDA major of the file the rule names for this build (setup.py: 11 for a CUDA 11 torch, else 12)."""
    if cand.variant.cuda is None:
        return None
    return "11" if cand.variant.cuda.major == 11 else "12"


def build_problem(name: str, cand: Candidate, targets: list[Target]) -> str | None:
    """Why the rule cannot vouch for a file of ``name`` beside ``cand`` (see the module's rules); None: it can."""
    for t in targets:
        if t.platform != PLATFORM:
            return f"{name}'s release files are vouched for on {PLATFORM} only (the C++ ABI read is that wheel's); " \
                   f"{t.name} is {t.platform}"
        if not t.python:
            return f"{t.name} states no Python: the release file's name carries one (solve with --python)"
    if cand.variant.cuda is None:
        return f"{cand.label} is a CPU build; {name}'s release files are CUDA builds"
    if str(cand.variant.cuda.major) != file_cuda(cand):
        return f"{name}'s build script maps CUDA {cand.variant.cuda.major} to its cu{file_cuda(cand)} file, " \
               f"built for another CUDA major than {cand.label}"
    if cand.variant.cxx11_abi is None:
        return f"the C++ ABI of {cand.label} is not read (data/torch.json states no cxx11_abi for it): no file of " \
               f"{name} is vouched for beside it"
    return None


def narrow(files: list[tuple[Requirement, ReleaseFiles]], per_family: dict[str, list[Candidate]],
           targets: list[Target], matrix: Matrix) -> dict[str, list[Candidate]]:
    """The torch candidates that carry each requested release file. Raises NoSolution (the cause and the nearest
    build that carries it) when none does, or the release is not named exactly."""
    torch = per_family.get("torch", [])
    for req, rule in files:
        name = canonical(req.name)
        if exact_version(req) is None:
            raise NoSolution(f"no build: {name}'s releases are not listed here ({rule.unread}); name one",
                             causes=[Cause(rule="release_file", message=f"{req} names no exact release of {name}, "
                                                                        "and which releases exist is not read here")],
                             ways_out=[WayOut(kind="other", message=f"ask for {name}==VERSION (a release of its "
                                                                    "download page)")])
        ok = [c for c in torch if build_problem(name, c, targets) is None]
        if not ok:
            first = build_problem(name, torch[0], targets) if torch else "no torch build runs on the target"
            raise NoSolution(f"no build: {first}", causes=[Cause(rule="release_file", message=f"no build of {name} "
                                                                                              f"the rule vouches "
                                                                                              f"for: {first}")],
                             ways_out=_nearest(name, torch, matrix))
        torch = ok
    return {**per_family, "torch": torch} if files else per_family


def _nearest(name: str, torch: list[Candidate], matrix: Matrix) -> list[WayOut]:
    """The torch releases nearest the first build that runs here (by version, newer first on a tie) with a build
    the rule vouches for by its own facts (a CUDA 11 or 12 build whose C++ ABI a row states), up to two; each way
    out is re-solved on the target before it is printed."""
    if not torch:
        return []
    here = torch[0].release.version
    known = {r.version: v for r in matrix.torch.releases for v in r.variants
             if v.cuda is not None and v.cuda.major in (11, 12) and v.cxx11_abi is not None}

    def distance(version) -> tuple:
        return (abs(version.major - here.major), abs(version.minor - here.minor), -version.minor, -version.micro)

    return [WayOut(kind="other", message=f"ask for torch=={v} instead: its {known[v].name} build's C++ ABI is read "
                                         f"({'C++11' if known[v].cxx11_abi else 'pre-C++11'}), so the rule names "
                                         f"{name}'s file for it",
                   change={"family": "torch", "requirement": f"torch=={v}"})
            for v in sorted(known, key=distance)[:2]]


def url(req: Requirement, rule: ReleaseFiles, cand: Candidate, target: Target) -> str:
    """The release file's URL the rule names for this torch build and target."""
    version = exact_version(req) or ""
    torch = f"{cand.release.version.major}.{cand.release.version.minor}"
    local = rule.local.format(cuda_major=file_cuda(cand), torch=torch,
                              abi="TRUE" if cand.variant.cxx11_abi else "FALSE")
    python = "cp" + (target.python or "").replace(".", "")
    return rule.url.format(version=version, local=local, python=python, platform=PLATFORM)


def with_torch(request: Request, files: list[tuple[Requirement, ReleaseFiles]]) -> Request:
    """The request with torch in it when a release file is asked for (the file is built against torch)."""
    if not files or "torch" in request.families:
        return request
    out = request.copy()
    out.families["torch"] = [Requirement("torch")]
    return out


def resolved(request: Request, files: list[tuple[Requirement, ReleaseFiles]], choice: list[Candidate],
             targets: list[Target]) -> tuple[Request, list[str]]:
    """The request with each requested release file as a requirement by URL (``name @ url``), and a note each:
    the file, the facts it rests on, and what is not read."""
    cand = next((c for c in choice if c.family == "torch"), None)
    if cand is None or not files:
        return request, []
    linked: dict[str, Requirement] = {}
    notes: list[str] = []
    for req, rule in files:
        name = canonical(req.name)
        linked[name] = Requirement(f"{name} @ {url(req, rule, cand, targets[0])}")
        notes.append(f"{name} {exact_version(req)}: the release file {name}'s build script names for {cand.label} "
                     f"(CUDA file cu{file_cuda(cand)}, torch {cand.release.version.major}."
                     f"{cand.release.version.minor}, C++ ABI cxx11abi{'TRUE' if cand.variant.cxx11_abi else 'FALSE'} "
                     f"as data/torch.json reads it); rule: {rule.source}; not read here: {rule.unread}")
    out = request.copy()
    out.passthrough = [linked.get(canonical(r.name), r) for r in request.passthrough]
    return out, notes
