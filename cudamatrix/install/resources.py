"""Will the plan fit on disk? Download sizes from the index, an unpacked estimate, and the free space of every
file system the install writes to (site-packages, the installer's cache, the temp folder, the journal).

Sizes: a PEP 691 JSON index answers each file's ``size``; a PEP 503 HTML index lists the files, whose
``Content-Length`` a HEAD request gives. A file whose size nothing tells stays unknown: the check then says
so and does not refuse (unknown is not a pass, nor a reason to stop the user).

Inference rule for the unpacked size (written down, not measured per file): a wheel is a zip archive; the
CUDA libraries that dominate these wheels compress about 2:1 to 3:1, so the unpacked size is estimated as
``UNPACK_FACTOR`` x the download. The journal's saved wheels are stored uncompressed: their size is the sum of
the installed files' sizes that RECORD lists.
"""
from __future__ import annotations

import csv
import io
import os
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from typing import Callable
from urllib.parse import urljoin, urlsplit

from cudamatrix.errors import InstallFailed
from cudamatrix.models import Environment, Plan
from cudamatrix.names import canonical
from cudamatrix.safe.files import parse_json
from cudamatrix.schema import field, record

UNPACK_FACTOR = 3.0
MARGIN = 1.1  # 10 % on top: metadata, byte-code, the installer's own temporary files
HTTP_TIMEOUT_S = 5.0
STATVFS: Callable[[str], os.statvfs_result] = os.statvfs  # tests replace it (a disk that is nearly full)


@record
class Need:
    """Bytes the plan writes to one place."""

    where: str  # "site-packages", "installer cache", "temp", "journal"
    path: str
    nbytes: int


@record
class SpaceCheck:
    needs: list[Need] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # packages whose size nothing told
    short: list[str] = field(default_factory=list)  # "site-packages (/x): 5.1 GB needed, 1.2 GB free"


def gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            href = dict(attrs).get("href")
            if href:
                self.links.append(href)


def _get(url: str, *, head: bool = False, accept: str | None = None):
    import urllib.request

    req = urllib.request.Request(url, method="HEAD" if head else "GET",
                                 headers={"Accept": accept} if accept else {})
    return urllib.request.urlopen(req, timeout=HTTP_TIMEOUT_S)  # noqa: S310 (index URLs are checked by plan)


def file_size(index: str, name: str, version: str, tags: list[str], dead: set[str] | None = None) -> int | None:
    """The size in bytes of the wheel of ``name==version`` on ``index`` best matching ``tags``, or None.
    ``dead``: indexes that did not answer (not asked again)."""
    dead = set() if dead is None else dead
    if index in dead:
        return None
    project = canonical(name)
    url = index.rstrip("/") + f"/{project}/"
    try:
        with _get(url, accept="application/vnd.pypi.simple.v1+json, text/html;q=0.1") as r:
            body, ctype = r.read(), r.headers.get("Content-Type", "")
    except (OSError, ValueError) as exc:
        if getattr(exc, "code", None) is None:  # no HTTP answer at all (an HTTP 404 is an answer)
            dead.add(index)
        return None
    prefix = canonical(name).replace("-", "_") + "-" + version.lower() + "-"  # a wheel file name (PEP 427)
    files: list[tuple[str, str, int | None]] = []
    if "json" in ctype:
        try:
            for f in parse_json(body).get("files", []):
                files.append((f["filename"], urljoin(url, f["url"]), f.get("size")))
        except (ValueError, KeyError, AttributeError):
            return None
    else:
        parser = _Links()
        parser.feed(body.decode("utf-8", "replace"))
        for href in parser.links:
            full = urljoin(url, href)
            files.append((os.path.basename(urlsplit(full).path), full, None))
    wheels = [f for f in files if f[0].lower().replace("%2b", "+").startswith(prefix) and f[0].endswith(".whl")]
    if not wheels:
        return None
    rank = {t: i for i, t in enumerate(tags)}

    def score(f):
        tag = f[0][:-4].split("-", 2)[-1] if f[0].count("-") >= 4 else ""
        parts = tag.split("-")[-3:] if tag else []
        best = len(rank) + 1
        if len(parts) == 3:
            for py in parts[0].split("."):
                for abi in parts[1].split("."):
                    for plat in parts[2].split("."):
                        best = min(best, rank.get(f"{py}-{abi}-{plat}", best))
        return best

    chosen = min(wheels, key=score)
    if chosen[2] is not None:
        return int(chosen[2])
    try:
        with _get(chosen[1], head=True) as r:
            length = r.headers.get("Content-Length")
    except (OSError, ValueError):
        return None
    return int(length) if length and length.isdigit() else None


def installed_size(dist_info: str | None) -> int:
    """Bytes of an installed distribution's files, from the sizes its RECORD lists (0 when unknown)."""
    if not dist_info:
        return 0
    try:
        text = (Path(dist_info) / "RECORD").read_text()
    except OSError:
        return 0
    total = 0
    for row in csv.reader(io.StringIO(text)):
        if len(row) >= 3 and row[2].isdigit():
            total += int(row[2])
    return total


def _indexes(argv: list[str], environ: dict[str, str]) -> list[str]:
    out = []
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if name in ("--index-url", "-i", "--extra-index-url"):
            out.append(value if eq else (argv[i + 1] if i + 1 < len(argv) else ""))
    for var in ("PIP_INDEX_URL", "UV_INDEX_URL", "UV_DEFAULT_INDEX", "PIP_EXTRA_INDEX_URL", "UV_EXTRA_INDEX_URL"):
        out += environ.get(var, "").split()
    return [u for u in dict.fromkeys(out) if u.startswith(("http://", "https://"))]


def cache_dir(tool: str, environ: dict[str, str]) -> str:
    """Where the installer keeps its cache (pip: PIP_CACHE_DIR or ~/.cache/pip; uv: UV_CACHE_DIR or ~/.cache/uv)."""
    var = "UV_CACHE_DIR" if tool == "uv" else "PIP_CACHE_DIR"
    xdg = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return environ.get(var) or os.path.join(xdg, "uv" if tool == "uv" else "pip")


def _existing(path: str) -> str:
    p = os.path.abspath(path)
    while not os.path.exists(p) and os.path.dirname(p) != p:
        p = os.path.dirname(p)
    return p


def measure(plan: Plan, environment: Environment, environ: dict[str, str] | None = None) -> SpaceCheck:
    """The bytes the plan writes where, and whether each file system has them free."""
    from cudamatrix.install.journal import state_root

    environ = dict(os.environ if environ is None else environ)
    check = SpaceCheck()
    steps = [s for s in plan.steps if s.kind in ("install", "reinstall")]
    if not steps and not plan.to_remove:
        return check
    touched: set[str] = {r.name for r in plan.to_remove}
    download = _download(steps, environment, environ, touched, check.unknown)
    tool = "uv" if steps and steps[0].argv[:1] == ["uv"] else "pip"
    site = (environment.python.site_packages or [tempfile.gettempdir()])[-1]
    journal = sum(installed_size(d) for d in _dist_infos(environment, touched))
    check.needs = [Need("site-packages", site, int(download * UNPACK_FACTOR * MARGIN)),
                   Need("installer cache", cache_dir(tool, environ), int(download * MARGIN)),
                   Need("temp", tempfile.gettempdir(), int(download * MARGIN)),
                   Need("journal", str(state_root()), int(journal * MARGIN))]
    check.short = _short(check.needs)
    return check


def _download(steps: list, environment: Environment, environ: dict[str, str], touched: set[str],
              unknown: list[str]) -> int:
    """The bytes the install steps download (the index's file sizes); the installed distributions they replace
    are added to ``touched``, the pins whose size the index does not tell to ``unknown``."""
    download = 0
    tags = list(environment.python.tags)
    installed = set(environment.packages)
    dead: set[str] = set()
    for step in steps:
        indexes = _indexes(step.argv, environ)
        for arg in step.argv:
            name, eq, version = arg.partition("==")
            if not eq or arg.startswith("-"):
                continue
            name = canonical(name.split("[")[0])
            if name in installed:
                touched.add(name)
            size = next((s for s in (file_size(i, name, version, tags, dead) for i in indexes) if s is not None), None)
            if size is None:
                unknown.append(f"{name}=={version}")
            else:
                download += size
    return download


def _short(needs: list[Need]) -> list[str]:
    """One sentence per file system that has less free space than the needs on it add up to."""
    by_fs: dict[int, list[Need]] = {}
    free: dict[int, int] = {}
    for need in needs:
        where = _existing(need.path)
        try:
            st = STATVFS(where)
            dev = os.stat(where).st_dev
        except OSError:
            continue
        by_fs.setdefault(dev, []).append(need)
        free[dev] = st.f_bavail * st.f_frsize
    out = []
    for dev, on_fs in by_fs.items():
        total = sum(n.nbytes for n in on_fs)
        if total > free[dev]:
            places = ", ".join(f"{n.where} {n.path} ({gb(n.nbytes)})" for n in on_fs if n.nbytes)
            out.append(f"{gb(total)} needed on one file system, {gb(free[dev])} free: {places}")
    return out


def _dist_infos(environment: Environment, names: set[str]) -> list[str]:
    """The .dist-info folders of installed distributions, found in the environment's site-packages."""
    out = []
    for site in environment.python.site_packages:
        try:
            entries = os.listdir(site)
        except OSError:
            continue
        for entry in entries:
            if entry.endswith(".dist-info") and not entry.startswith("~"):
                name = canonical(entry[:-10].rsplit("-", 1)[0])
                if name in names:
                    out.append(os.path.join(site, entry))
    return out


def check_space(plan: Plan, environment: Environment) -> str | None:
    """Refuse a plan that will not fit (InstallFailed, nothing changed) with the numbers; else a note on what
    could not be sized, or None."""
    check = measure(plan, environment)
    if check.short:
        raise InstallFailed("not enough free disk space for this plan: " + "; ".join(check.short),
                            hint="free space there, or point TMPDIR, PIP_CACHE_DIR / UV_CACHE_DIR and "
                                 "XDG_STATE_HOME at a larger disk; nothing was changed",
                            detail={"needs": [n.__dict__ for n in check.needs], "short": check.short})
    if check.unknown:
        return ("disk space: the index did not tell the size of " + ", ".join(check.unknown[:5])
                + ("..." if len(check.unknown) > 5 else "") + "; free space was not compared for them")
    return None
