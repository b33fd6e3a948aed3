"""Packages whose binary wheels are release files, not index entries (flash-attn): solved with torch from the
file-name rule their own build script states (data/extensions.json ``release_files``).

Rules, written down:

- The rule names one file per (release, torch major.minor, CUDA, C++ ABI, Python, platform). A torch build can
  carry it only when each part is known: a CUDA build (the release files are CUDA builds) whose CUDA major the
  rule maps to a file of that same major (flash-attn's ``setup.py``: CUDA 11 -> the ``cu11`` file, every other
  major -> ``cu12``; a CUDA 13 torch would get a CUDA 12 file, which is not vouched for), whose C++ ABI a torch row
  states (``cxx11_abi``, read from its wheel: never guessed), for a Linux x86_64 target (the ABI read is that
  wheel's).
- Which files each release has is the build matrix of its own release workflow at the tag (``release_file_sets``:
  Python x torch x CUDA x C++ ABI, minus the excludes). A requirement that is not one exact release (``flash-attn``,
  ``flash-attn>=2.8``) takes the newest release it admits with a file for the chosen torch build: its torch
  major.minor (a file built against a torch pre-release, ``2.6.0.dev20241001``, is not vouched for the release),
  its CUDA major, its C++ ABI, the target's Python and platform; the torch builds without such a file are left out,
  so an unpinned torch is the newest build that has one. An exact release older than the sets read keeps the rule
  alone (the answer says which files it has is not read).
- When no torch build that runs on the target carries it: no solution (exit 3), the cause naming what is unknown
  or does not match, and the nearest build that would carry it (or the nearest release that has a file).
No I/O.
"""
from __future__ import annotations

from packaging.requirements import Requirement
from packaging.version import InvalidVersion, Version

from cudamatrix.errors import NoSolution
from cudamatrix.matrix.data import Matrix, ReleaseFiles, ReleaseFileSet
from cudamatrix.models import Cause, WayOut
from cudamatrix.names import canonical
from cudamatrix.solve.request import Request
from cudamatrix.solve.search import Candidate
from cudamatrix.solve.target import Target

PLATFORM = "linux_x86_64"


def requested(passthrough: list[Requirement], matrix: Matrix) -> list[tuple[Requirement, ReleaseFiles]]:
    """The requirements (not by URL) of a package the matrix holds a release-file rule for, with the rule. With
    nothing passed through the extensions' file is not read (built on first use: a solve of frameworks alone)."""
    if not passthrough:
        return []
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


def file_sets(req: Requirement, matrix: Matrix) -> list[ReleaseFileSet]:
    """The releases of the requirement's package whose file sets are read and that it admits, newest first."""
    name = canonical(req.name)
    rows = [r for r in matrix.extensions.release_file_sets if canonical(r.name) == name
            and req.specifier.contains(r.version, prereleases=True)]
    return sorted(rows, key=lambda r: r.version, reverse=True)


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def _excluded(row: ReleaseFileSet, python: str, torch: str, cuda: str, abi: bool) -> bool:
    return any((e.python is None or e.python == python) and (e.torch is None or e.torch == torch)
               and (e.cuda is None or e.cuda == cuda) and (e.cxx11_abi is None or e.cxx11_abi == abi)
               for e in row.exclude)


def has_file(row: ReleaseFileSet, cand: Candidate, targets: list[Target]) -> bool:
    """Whether the release's workflow builds the file this torch build and every target need: the torch
    major.minor (built against a torch release, not a pre-release), the CUDA major the rule maps it to, its C++
    ABI, each target's Python and platform, in no excluded combination."""
    mine = cand.release.version
    abi = bool(cand.variant.cxx11_abi)
    for t in targets:
        if t.platform not in row.platforms or t.python not in row.python or abi not in row.cxx11_abi:
            return False
        fits = [(torch, cuda) for torch in row.torch for cuda in row.cuda
                if (tv := _version(torch)) is not None and not tv.is_prerelease and tv.release[:2] == mine.release[:2]
                and (cv := _version(cuda)) is not None and str(cv.major) == file_cuda(cand)
                and not _excluded(row, t.python or "", torch, cuda, abi)]
        if not fits:
            return False
    return True


def release_for(req: Requirement, matrix: Matrix, cand: Candidate, targets: list[Target]
                ) -> ReleaseFileSet | None:
    """The newest release ``req`` admits whose files include one for ``cand`` on every target (None: none)."""
    return next((row for row in file_sets(req, matrix) if has_file(row, cand, targets)), None)


def _unread_exact(req: Requirement, matrix: Matrix) -> bool:
    """An exact release whose file set is not read: the rule alone names its file."""
    version = exact_version(req)
    return version is not None and not file_sets(req, matrix)


def narrow(files: list[tuple[Requirement, ReleaseFiles]], per_family: dict[str, list[Candidate]],
           targets: list[Target], matrix: Matrix) -> dict[str, list[Candidate]]:
    """The torch candidates that carry each requested release file. Raises NoSolution (the cause and the nearest
    build or release that carries it) when none does."""
    torch = per_family.get("torch", [])
    for req, rule in files:
        name = canonical(req.name)
        if exact_version(req) is None and not file_sets(req, matrix):
            raise NoSolution(f"no build: no release of {name} that {req} admits has its files read here",
                             causes=[Cause(rule="release_file", message=f"no release of {name} that {req} admits "
                                                                        f"has its files read here ({rule.unread})")],
                             ways_out=_other_releases(req, torch, targets, matrix))
        ok = [c for c in torch if build_problem(name, c, targets) is None]
        if not ok:
            first = build_problem(name, torch[0], targets) if torch else "no torch build runs on the target"
            raise NoSolution(f"no build: {first}", causes=[Cause(rule="release_file", message=f"no build of {name} "
                                                                                              f"the rule vouches "
                                                                                              f"for: {first}")],
                             ways_out=_nearest(name, torch, matrix, req, targets))
        if not _unread_exact(req, matrix):
            ok = _with_file(req, ok, torch, targets, matrix)
        torch = ok
    return {**per_family, "torch": torch} if files else per_family


def _with_file(req: Requirement, ok: list[Candidate], torch: list[Candidate], targets: list[Target],
               matrix: Matrix) -> list[Candidate]:
    """The builds of ``ok`` for which a release ``req`` admits has a file; NoSolution when none."""
    carried = [c for c in ok if release_for(req, matrix, c, targets) is not None]
    if carried:
        return carried
    name = canonical(req.name)
    first = ok[0]
    rows = file_sets(req, matrix)
    newest = f"{name} {rows[0].version} has files for torch {', '.join(rows[0].torch)}, CUDA " \
             f"{', '.join(rows[0].cuda)}, Python {', '.join(rows[0].python)} (its release workflow)"
    if any((v := _version(t)) is not None and v.is_prerelease for t in rows[0].torch):
        newest += "; a file built against a torch pre-release is not vouched for that torch's release"
    message = f"no release of {name} that {req} admits has a file for {first.label} ({describe(first, targets)}): " \
              f"{newest}"
    raise NoSolution(f"no build: {message}", causes=[Cause(rule="release_file", message=message)],
                     ways_out=_other_releases(req, torch, targets, matrix) + _nearest(name, torch, matrix, req,
                                                                                      targets))


def describe(cand: Candidate, targets: list[Target]) -> str:
    """The file a build needs, in the rule's words (``cu12torch2.4cxx11abiFALSE, Python 3.11, linux_x86_64``)."""
    v = cand.release.version
    return f"cu{file_cuda(cand)}torch{v.major}.{v.minor}cxx11abi{'TRUE' if cand.variant.cxx11_abi else 'FALSE'}, " \
           f"Python {', '.join(sorted({t.python or '?' for t in targets}))}, " \
           f"{', '.join(sorted({t.platform for t in targets}))}"


def _other_releases(req: Requirement, torch: list[Candidate], targets: list[Target], matrix: Matrix
                    ) -> list[WayOut]:
    """The newest release of the package (whatever ``req`` admits) with a file for the first build that runs here
    and whose files are vouched for, as a way out (re-solved before it is printed)."""
    name = canonical(req.name)
    for cand in torch:
        if build_problem(name, cand, targets) is not None:
            continue
        row = release_for(Requirement(name), matrix, cand, targets)
        if row is not None:
            return [WayOut(kind="pin_older", message=f"ask for {req.name}=={row.version} instead of {req} (it has "
                                                     f"a file for {cand.label}: {describe(cand, targets)})",
                           change={"extension": name, "requirement": f"{req.name}=={row.version}"})]
    return []


def _nearest(name: str, torch: list[Candidate], matrix: Matrix, req: Requirement, targets: list[Target]
             ) -> list[WayOut]:
    """The torch releases nearest the first build that runs here (by version, newer first on a tie) with a build
    the rule vouches for by its own facts (a CUDA 11 or 12 build whose C++ ABI a row states) and, where the
    releases' files are read, a release ``req`` admits with a file for it; up to two; each way out is re-solved
    on the target before it is printed."""
    if not torch:
        return []
    here = torch[0].release.version
    sets = file_sets(req, matrix)
    known = {r.version: v for r in matrix.torch.releases for v in r.variants
             if v.cuda is not None and v.cuda.major in (11, 12) and v.cxx11_abi is not None
             and (not sets or _carried(req, Candidate(r, v), targets, matrix))}

    def distance(version) -> tuple:
        return (abs(version.major - here.major), abs(version.minor - here.minor), -version.minor, -version.micro)

    return [WayOut(kind="other", message=f"ask for torch=={v} instead: its {known[v].name} build's C++ ABI is read "
                                         f"({'C++11' if known[v].cxx11_abi else 'pre-C++11'}), so the rule names "
                                         f"{name}'s file for it",
                   change={"family": "torch", "requirement": f"torch=={v}"})
            for v in sorted(known, key=distance)[:2]]


def _carried(req: Requirement, cand: Candidate, targets: list[Target], matrix: Matrix) -> bool:
    return build_problem(canonical(req.name), cand, targets) is None and \
        release_for(req, matrix, cand, targets) is not None


def url(req: Requirement, rule: ReleaseFiles, cand: Candidate, target: Target, version: str | None = None) -> str:
    """The release file's URL the rule names for this torch build and target (``version``: the release; default
    the one ``req`` names exactly)."""
    version = version or exact_version(req) or ""
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
             targets: list[Target], matrix: Matrix) -> tuple[Request, list[str]]:
    """The request with each requested release file as a requirement by URL (``name @ url``, the user's name,
    extras and markers kept), and a note each: the release, the file, the facts it rests on, and what is not read."""
    cand = next((c for c in choice if c.family == "torch"), None)
    if cand is None or not files:
        return request, []
    linked: dict[str, Requirement] = {}
    notes: list[str] = []
    for req, rule in files:
        name = canonical(req.name)
        row = None if _unread_exact(req, matrix) else release_for(req, matrix, cand, targets)
        version = str(row.version) if row is not None else exact_version(req) or ""
        extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
        marker = f" ; {req.marker}" if req.marker else ""
        linked[name] = Requirement(f"{req.name}{extras} @ {url(req, rule, cand, targets[0], version)}{marker}")
        notes.append(_note(name, version, row, rule, cand, targets))
    out = request.copy()
    out.passthrough = [linked.get(canonical(r.name), r) for r in request.passthrough]
    return out, notes


def _note(name: str, version: str, row: ReleaseFileSet | None, rule: ReleaseFiles, cand: Candidate,
          targets: list[Target]) -> str:
    """Why this release and this file, and what the answer rests on."""
    file = f"the release file {name}'s build script names for {cand.label} ({describe(cand, targets)}; the C++ ABI " \
           f"as data/torch.json reads it)"
    if row is None:
        return f"{name} {version}: {file}; rule: {rule.source}; not read here: {rule.unread}"
    return f"{name} {version}: the newest release the request admits whose release workflow builds a file for " \
           f"{cand.label}: {file}; files: {row.source}; rule: {rule.source}"
