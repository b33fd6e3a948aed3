"""Packages whose compiled wheels live on find-links pages, one per (torch release, CUDA variant), not on the
package index (PyG's torch-scatter, torch-sparse, torch-cluster, torch-spline-conv, pyg-lib): solved with torch
from data/extensions.json ``find_links``.

Rules, written down:

- A torch build carries the package when a build row of it names the build's torch major.minor (a page of torch
  2.8.0 serves every 2.8.x) and its variant (``cpu``, ``cu128``): the page's wheel is ``VERSION`` plus the pages'
  local tag (``2.1.2+pt28cu128``). The requirement's specifiers are matched against that whole version, so
  ``torch-scatter==2.1.2+pt28cu128`` asks for that page's wheel and ``==2.1.2`` for any page's.
- A row that names Pythons or platforms carries no wheel for a target outside them.
- The newest torch build that runs on the target and carries it is chosen (the search's own order among the
  builds left); the answer pins the wheel, names the page as ``--find-links`` and says which page and why that
  torch.
- When no torch build that runs on the target carries it (a torch pin without a page): no solution (exit 3), the
  cause, and the nearest torch releases with a page as ways out (each re-solved before it is printed).
The pages themselves are not read (the pages' ``unread``). No I/O.
"""
from __future__ import annotations

import re

from packaging.requirements import Requirement
from packaging.version import Version

from cudamatrix.errors import NoSolution
from cudamatrix.matrix.data import FindLinks, FindLinksBuild, Matrix
from cudamatrix.models import Cause, WayOut
from cudamatrix.names import canonical
from cudamatrix.schema import record
from cudamatrix.solve.request import Request
from cudamatrix.solve.search import Candidate
from cudamatrix.solve.target import Target

RULE = "find_links"


@record(frozen=True, eq=False)
class Wanted:
    """A requested package that lives on find-links pages, with the pages that carry it."""

    requirement: Requirement
    pages: FindLinks

    @property
    def name(self) -> str:
        return canonical(self.requirement.name)

    def builds(self) -> list[FindLinksBuild]:
        """This package's build rows, newest torch first."""
        return sorted((b for b in self.pages.builds if canonical(b.name) == self.name),
                      key=lambda b: (b.torch, b.version), reverse=True)


def requested(passthrough: list[Requirement], matrix: Matrix) -> list[Wanted]:
    """The requirements (not by URL) of a package some find-links pages carry (none passed through: the extensions'
    file is not read)."""
    if not passthrough:
        return []
    owner = {canonical(b.name): pages for pages in matrix.extensions.find_links for b in pages.builds}
    return [Wanted(req, owner[canonical(req.name)]) for req in passthrough
            if canonical(req.name) in owner and not req.url]


def with_torch(request: Request, wanted: list[Wanted]) -> Request:
    """The request with torch in it when such a package is asked for (its wheels are built against torch)."""
    if not wanted or "torch" in request.families:
        return request
    out = request.copy()
    out.families["torch"] = [Requirement("torch")]
    return out


def minor(version: Version) -> tuple[int, int]:
    return version.major, version.minor


def local(pages: FindLinks, cand: Candidate) -> str:
    """The local tag of the pages' wheels for this torch build (``+pt28cu128``)."""
    v = cand.release.version
    return pages.tag(f"{v.major}{v.minor}", cand.variant.name)


def page(pages: FindLinks, build: FindLinksBuild, cand: Candidate) -> str:
    """The page's URL for this build row and torch build."""
    return pages.page(str(build.torch), cand.variant.name)


def fits_target(build: FindLinksBuild, targets: list[Target]) -> bool:
    """Whether the row's wheels are built for each target's Python and platform (a row naming none: any)."""
    return all((not build.python or not t.python or t.python in build.python) and
               (not build.platforms or t.platform in build.platforms) for t in targets)


def carrying(w: Wanted, cand: Candidate, targets: list[Target]) -> FindLinksBuild | None:
    """The newest build row of ``w`` whose page for this torch build carries a wheel the requirement admits on
    every target; None: no page does."""
    for b in w.builds():
        if minor(b.torch) != minor(cand.release.version) or cand.variant.name not in b.variants:
            continue
        if fits_target(b, targets) and w.requirement.specifier.contains(f"{b.version}{local(w.pages, cand)}",
                                                                         prereleases=True):
            return b
    return None


def narrow(wanted: list[Wanted], per_family: dict[str, list[Candidate]], targets: list[Target],
           matrix: Matrix) -> dict[str, list[Candidate]]:
    """The torch candidates whose pages carry each requested package. Raises NoSolution (the cause and the
    nearest torch releases with a page) when none does."""
    torch = per_family.get("torch", [])
    for w in wanted:
        ok = [c for c in torch if carrying(w, c, targets) is not None]
        if not ok:
            raise _no_page(w, torch, targets)
        torch = ok
    return {**per_family, "torch": torch} if wanted else per_family


def _admitted(w: Wanted, b: FindLinksBuild) -> bool:
    """Whether the requirement admits the row's wheel on any of its pages (the whole version, local tag and all)."""
    tag = f"{b.torch.major}{b.torch.minor}"
    return any(w.requirement.specifier.contains(f"{b.version}{w.pages.tag(tag, v)}",
                                                prereleases=True) for v in b.variants)


def _no_page(w: Wanted, torch: list[Candidate], targets: list[Target]) -> NoSolution:
    builds = [b for b in w.builds() if _admitted(w, b)]
    if not builds:
        known = ", ".join(sorted({str(b.version) for b in w.builds()}))
        message = f"no build of {w.name} on the {w.pages.name} pages meets {w.requirement} (the data holds {known})"
        return NoSolution(f"no consistent set: {message}", causes=[Cause(rule=RULE, message=message)], ways_out=[])
    runs = ", ".join(sorted({f"{c.release.version.major}.{c.release.version.minor}" for c in torch},
                            key=Version, reverse=True)[:4]) or "none"
    have = ", ".join(sorted({f"{b.torch.major}.{b.torch.minor}" for b in builds}, key=Version, reverse=True))
    fit = [b for b in builds if fits_target(b, targets)]
    why = "" if fit else f"; no page carries a wheel for {_target_words(targets)}"
    message = (f"no {w.pages.name} page carries {w.name} for a torch build that the request admits and that runs "
               f"on the target (torch {runs}); its pages are for torch {have}{why}")
    return NoSolution(f"no consistent set: {message}", causes=[Cause(rule=RULE, message=message)],
                      ways_out=_nearest(w, fit, torch))


def _target_words(targets: list[Target]) -> str:
    t = targets[0]
    return f"Python {t.python} on {t.platform}" if t.python else t.platform


def _nearest(w: Wanted, builds: list[FindLinksBuild], torch: list[Candidate]) -> list[WayOut]:
    """The torch releases with a page of ``w`` nearest the newest build that runs here (or the newest page), up to
    two; each is re-solved on the target before it is printed."""
    if not builds:
        return []
    here = torch[0].release.version if torch else builds[0].torch
    rows = {minor(b.torch): b for b in reversed(builds)}  # the newest build row per torch release

    def distance(key: tuple[int, int]) -> tuple:
        return abs(key[0] - here.major), abs(key[1] - here.minor), -key[1]

    out = []
    for key in sorted(rows, key=distance)[:2]:
        b = rows[key]
        out.append(WayOut(kind="other", message=f"ask for torch=={key[0]}.{key[1]}.* instead: its {w.pages.name} "
                                                f"pages ({', '.join(b.variants)}) carry {w.name} {b.version}",
                          change={"family": "torch", "requirement": f"torch=={key[0]}.{key[1]}.*"}))
    return out


def resolved(request: Request, wanted: list[Wanted], choice: list[Candidate], targets: list[Target],
             runs: list[Candidate]) -> tuple[Request, list[str], list[str]]:
    """The request with each such package pinned to its page's wheel (``torch-scatter==2.1.2+pt28cu128``), a
    note each (which page, why that torch, the row's source, what is not read), and the pages to pass as
    ``--find-links``. ``runs``: the torch builds that ran on the target before the pages narrowed them."""
    cand = next((c for c in choice if c.family == "torch"), None)
    if cand is None or not wanted:
        return request, [], []
    pinned: dict[str, Requirement] = {}
    notes: list[str] = []
    links: list[str] = []
    for w in wanted:
        b = carrying(w, cand, targets)
        if b is None:  # narrowed to carriers: cannot happen
            continue
        version = f"{b.version}{local(w.pages, cand)}"
        url = page(w.pages, b, cand)
        req = w.requirement
        extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
        pinned[w.name] = Requirement(f"{w.name}{extras}=={version}" + (f"; {req.marker}" if req.marker else ""))
        links += [url] if url not in links else []
        notes.append(f"{w.name} {version}: the wheel on the {w.pages.name} page for torch {b.torch.major}."
                     f"{b.torch.minor} {cand.variant.name} ({url}); {_why_torch(w, cand, runs, targets)}; build: {b.source}; "
                     f"not read here: {w.pages.unread}")
    out = request.copy()
    out.passthrough = [pinned.get(canonical(r.name), r) for r in request.passthrough]
    return out, notes, links


def _why_torch(w: Wanted, cand: Candidate, runs: list[Candidate], targets: list[Target]) -> str:
    """Why this torch: the newest release that runs here with a page carrying the package (or chosen among
    those), and the newer releases that run here without one."""
    mine = minor(cand.release.version)
    newest = max((minor(c.release.version) for c in runs if carrying(w, c, targets) is not None), default=mine)
    said = f"torch {cand.version_text()} is the newest release that runs on the target with a page carrying " \
           f"{w.name}" if newest == mine else f"{cand.label} was chosen among the torch builds with such a page"
    newer = sorted({minor(c.release.version) for c in runs if minor(c.release.version) > mine})
    if newer:
        span = f"{newer[0][0]}.{newer[0][1]}" + (f" to {newer[-1][0]}.{newer[-1][1]}" if len(newer) > 1 else "")
        said += f" (torch {span} {'run' if len(newer) > 1 else 'runs'} here too, with no such page in the data)"
    return said


def pages_in(pip_args: list[str]) -> list[str]:
    """The find-links pages a solution's pip arguments name (each value of ``--find-links``)."""
    return [pip_args[i + 1] for i, a in enumerate(pip_args[:-1]) if a == "--find-links"]


def is_page(url: str, matrix: Matrix) -> bool:
    """Whether ``url`` is one of the find-links pages the data knows (its URL pattern, any torch and variant):
    such a page carries the packages of its build rows and no torch."""
    return any(_page_pattern(pages.url).match(url) for pages in matrix.extensions.find_links)


def _page_pattern(pattern: str) -> re.Pattern[str]:
    parts = re.split(r"(\{torch\}|\{variant\})", pattern)
    groups = {"{torch}": r"\d+\.\d+\.\d+", "{variant}": r"(?:cpu|cu\d{3})"}
    return re.compile("^" + "".join(groups.get(p, re.escape(p)) for p in parts) + "$")
