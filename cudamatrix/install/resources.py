"""Can the plan finish? Before the first change: every file it pins is listed by an index it installs from
(and every such index answers), and it fits on disk: download sizes from the index, an unpacked estimate,
and the free space of every file system the install writes to (site-packages, the installer's cache, the
temp folder, the journal).

The indexes are those the installer of each step reads, chosen as it chooses them (:func:`sources`): the
step's own options, the environment's PIP_* / UV_* variables, pip's configuration files (``pip config list``
of the target interpreter) and, when none names one, pip's built-in default index (named by that pip's own
help: no host name is written here).

Sizes: a PEP 691 JSON index answers each file's ``size`` (a value that is no whole number of bytes is
unknown); a PEP 503 HTML index lists the files, whose ``Content-Length`` a HEAD request gives. A file whose
size nothing tells stays unknown: the check then says so and does not refuse (unknown is not a pass, nor a
reason to stop the user). Every read is bounded in time (one deadline for the whole exchange) and bytes, and an
https index is read over https on every redirect (:mod:`cudamatrix.net`).

Inference rule for the unpacked size (written down, not measured per file): a wheel is a zip archive; the
CUDA libraries that dominate these wheels compress about 2:1 to 3:1, so the unpacked size is estimated as
``UNPACK_FACTOR`` x the download. The journal's saved wheels are stored uncompressed: their size is the sum of
the installed files' sizes that RECORD lists.
"""
from __future__ import annotations

import csv
import io
import os
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Callable
from urllib.parse import unquote, urljoin, urlsplit

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from cudamatrix import net, proc
from cudamatrix.errors import InstallFailed
from cudamatrix.install.journal import state_root
from cudamatrix.matrix import index as pipindex
from cudamatrix.models import Environment, Plan
from cudamatrix.names import canonical
from cudamatrix.safe.files import parse_json
from cudamatrix.safe.text import redact_urls
from cudamatrix.schema import field, record

UNPACK_FACTOR = 3.0
MARGIN = 1.1  # 10 % on top: metadata, byte-code, the installer's own temporary files
HTTP_TIMEOUT_S = 20.0  # one whole exchange with an index (a listing, a HEAD): a total deadline, not per read
LISTING_MAX_BYTES = 64 * 1024 * 1024  # a project listing above this is not read (the largest are a few MB)
MAX_FILE_BYTES = 1 << 50  # a file size above a petabyte is no size
PIP_ASK_S = 30.0
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
    missing: list[str] = field(default_factory=list)  # pins no index lists: "torch==2.5.1 (index, ...)"
    dead: list[str] = field(default_factory=list)  # indexes the plan installs from that gave no answer


def gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


@record
class Found:
    """What one index says of one pinned file."""

    answered: bool = True  # the index gave a usable HTTP answer (False: down, too slow, too large: not asked again)
    listed: bool = False  # a file of that exact version is listed (and answers a HEAD, when one is asked)
    size: int | None = None  # its size in bytes, when the index tells it


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            href = dict(attrs).get("href")
            if href:
                self.links.append(href)


def _get(url: str, client: Any, method: str = "GET", headers: dict[str, str] | None = None) -> net.Answer:
    """One bounded exchange with an index: HTTP_TIMEOUT_S for the whole of it, LISTING_MAX_BYTES of body, http
    read only where the URL asked is http (an https one is refused a redirect to http). Raises NetError."""
    return net.fetch(url, client=client, method=method, headers=headers, max_bytes=LISTING_MAX_BYTES,
                     allow_http=urlsplit(url).scheme.lower() == "http", grace_s=HTTP_TIMEOUT_S,
                     deadline_s=HTTP_TIMEOUT_S, read_body=(200,))


def _size(value: object) -> int | None:
    """A PEP 691 ``size``: a whole number of bytes, else unknown (text, a list, a bool, negative, not finite)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():  # finite and whole: 1e3
        value = int(value)
    return value if isinstance(value, int) and 0 <= value < MAX_FILE_BYTES else None


def _listed(body: bytes, ctype: str, url: str) -> list[tuple[str, str, int | None]]:
    """(file name, URL, size or None) of every file a listing names (PEP 691 JSON or PEP 503 HTML); entries of
    the wrong shape are skipped. Raises ValueError for JSON that does not parse."""
    files: list[tuple[str, str, int | None]] = []
    if "json" in ctype:
        doc = parse_json(body)
        items = doc.get("files") if isinstance(doc, dict) else None
        for f in items if isinstance(items, list) else []:
            if isinstance(f, dict) and isinstance(f.get("filename"), str) and isinstance(f.get("url"), str):
                files.append((f["filename"], urljoin(url, f["url"]), _size(f.get("size"))))
        return files
    parser = _Links()
    parser.feed(body.decode("utf-8", "replace"))
    for href in parser.links:
        full = urljoin(url, href)
        files.append((unquote(os.path.basename(urlsplit(full).path)), full, None))
    return files


def _of_version(filename: str, project: str, version: Version):
    """The tags of a wheel of ``project`` ``version`` named ``filename`` (an sdist: an empty set), or None when the
    file is another project's or version's."""
    try:
        if filename.endswith(".whl"):
            name, ver, _build, tags = parse_wheel_filename(filename)
        else:
            name, ver = parse_sdist_filename(filename)
            tags = frozenset()
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion, ValueError):
        return None
    return tags if name == project and ver == version else None


def find(index: str, name: str, version: str, tags: list[str], dead: set[str] | None = None,
         client: Any = None) -> Found:
    """What ``index`` says of ``name==version``: listed or not, and the size of the file best matching ``tags``
    (a wheel; an sdist only when no wheel of that version is listed). Every read is bounded in time and
    bytes (:mod:`cudamatrix.net`). ``client``: a :func:`cudamatrix.net.session` (one is made when None). ``dead``: indexes that gave no answer (not asked again; one that
    gives none is added)."""
    dead = set() if dead is None else dead
    if index in dead:
        return Found(answered=False)
    try:
        wanted = Version(version)
    except InvalidVersion:
        return Found()
    project = canonicalize_name(name)
    url = index.rstrip("/") + f"/{project}/"
    client = client if client is not None else net.session()
    try:
        got = _get(url, client, headers={"Accept": "application/vnd.pypi.simple.v1+json, text/html;q=0.1"})
    except net.NetError:  # no answer, none in time, one past the size limit, a redirect refused: none to use
        dead.add(index)
        return Found(answered=False)
    if got.status != 200:
        return Found()  # an HTTP 404 is an answer: not listed
    try:
        files = _listed(got.body, got.headers.get("content-type", ""), got.url)
    except ValueError:
        return Found()
    matching = [(f, t) for f in files if (t := _of_version(f[0], project, wanted)) is not None]
    if not matching:
        return Found()
    rank = {t: i for i, t in enumerate(tags)}
    wheels = [m for m in matching if m[1]] or matching

    def score(item) -> int:
        return min((rank.get(str(t), len(rank) + 1) for t in item[1]), default=len(rank) + 1)

    chosen = min(wheels, key=score)[0]  # min keeps the first of equals: the order the index lists them
    if chosen[2] is not None:
        return Found(listed=True, size=chosen[2])
    return _head(chosen[1], client)


def _head(url: str, client: Any) -> Found:
    """A listed file's size from a HEAD request's Content-Length; a file that does not answer is not served."""
    try:
        got = _get(url, client, method="HEAD")
    except net.NetError:
        return Found(listed=False)
    if got.status in (404, 410):  # gone; another refusal of HEAD (405) says nothing of a GET
        return Found(listed=False)
    length = got.headers.get("content-length", "")
    return Found(listed=True, size=int(length) if length.isdigit() and len(length) < 16 else None)


def file_size(index: str, name: str, version: str, tags: list[str], dead: set[str] | None = None) -> int | None:
    """The size in bytes of the wheel of ``name==version`` on ``index`` best matching ``tags``, or None.
    ``dead``: indexes that did not answer (not asked again)."""
    return find(index, name, version, tags, dead).size


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


@record
class Sources:
    """Where the installer of one step looks: the index URLs it reads (http(s)), and whether it also reads
    sources this check cannot list (a local folder, ``--find-links``, a ``file:`` index)."""

    indexes: list[str] = field(default_factory=list)
    other: bool = False


@record
class Configured:
    """pip's own configuration for the target interpreter (``pip config list``) and its built-in default index."""

    index_url: str | None = None
    extra: list[str] = field(default_factory=list)
    find_links: list[str] = field(default_factory=list)
    default: str | None = None
    cert: str | None = None  # the CA bundle pip verifies the index with


_DEFAULTS: dict[str, str | None] = {}  # interpreter -> the default index its pip names (pip's version decides)


def configured(python: str) -> Configured:
    """What the pip of ``python`` reads from its configuration files, and its built-in default index (asked of
    that pip, else of this interpreter's: uv's default is the same index). The PIP_* variables are not read
    here: :func:`sources` reads them from the environment it is given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k == "PIP_CONFIG_FILE"}
    r = proc.run([python, "-m", "pip", "config", "list"], timeout=PIP_ASK_S, env=env, cwd="/")
    listed = "\n".join(ln for ln in r.stdout.splitlines() if not ln.startswith(":env:")) if r.ok else ""
    out = Configured(index_url=pipindex.parse_pip_config(listed),
                     extra=pipindex.parse_pip_config_list(listed, "extra-index-url"),
                     find_links=pipindex.parse_pip_config_list(listed, "find-links"),
                     cert=next(reversed(pipindex.parse_pip_config_list(listed, "cert")), None))
    for interp in dict.fromkeys([python, sys.executable]):
        if interp not in _DEFAULTS:
            bare = {k: v for k, v in env.items() if not k.startswith("PIP_")}  # the help shows a configured one
            res = proc.run([interp, "-m", "pip", "install", "--help"], timeout=PIP_ASK_S, cwd="/",
                           env={**bare, "PIP_CONFIG_FILE": os.devnull, "COLUMNS": "200"})
            _DEFAULTS[interp] = pipindex.parse_pip_help_default(res.stdout) if res.ok else None
        if _DEFAULTS[interp]:
            out.default = _DEFAULTS[interp]
            break
    return out


def _options(argv: list[str], names: tuple[str, ...]) -> list[str]:
    """The values of the options ``names`` in ``argv``, as ``--opt=value`` or ``--opt value`` (a flag last on the
    line names nothing)."""
    out = []
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if name in names and (eq or i + 1 < len(argv)):
            out.append(value if eq else argv[i + 1])
    return out


def sources(argv: list[str], environ: dict[str, str], conf: Configured | None = None) -> Sources:
    """The indexes the installer of ``argv`` reads, as it chooses them: its ``--index-url`` (the last one), else
    the environment's (``PIP_INDEX_URL``; uv: ``UV_DEFAULT_INDEX``, ``UV_INDEX_URL``), else the configuration's
    (pip only: uv reads no pip.conf), else the built-in default; then every extra index of the command line,
    the environment (``PIP_EXTRA_INDEX_URL``; uv: ``UV_EXTRA_INDEX_URL``, ``UV_INDEX``) or the configuration.
    ``--no-index`` reads none. Each once, in that order."""
    conf = conf or Configured()
    uv = argv[:1] == ["uv"]
    if "--no-index" in argv:
        return Sources(other=True)
    main = _main_index(argv, environ, conf, uv)
    extra = _options(argv, ("--extra-index-url", "--index"))
    env_extra = [u for v in (("UV_EXTRA_INDEX_URL", "UV_INDEX") if uv else ("PIP_EXTRA_INDEX_URL",))
                 for u in environ.get(v, "").split()]
    extra += env_extra or ([] if uv else conf.extra)
    links = _options(argv, ("--find-links", "-f")) + environ.get("UV_FIND_LINKS" if uv else "PIP_FIND_LINKS",
                                                                 "").split()
    links += [] if uv or links else conf.find_links
    urls = list(dict.fromkeys(u.rpartition("=")[2] if "=" in u.split("://")[0] else u for u in main + extra))
    http = [u for u in urls if u.startswith(("http://", "https://"))]  # uv's UV_INDEX: name=URL
    return Sources(indexes=http, other=bool(links) or len(http) < len(urls) or not main)


def _main_index(argv: list[str], environ: dict[str, str], conf: Configured, uv: bool) -> list[str]:
    """The one index the installer reads first (none when nothing names one)."""
    named = _options(argv, ("--index-url", "-i", "--default-index"))
    if named:
        return named[-1:]
    for var in ("UV_DEFAULT_INDEX", "UV_INDEX_URL") if uv else ("PIP_INDEX_URL",):
        if environ.get(var, "").split():
            return environ[var].split()[-1:]
    if conf.index_url and not uv:
        return [conf.index_url]
    return [conf.default] if conf.default else []


def _indexes(argv: list[str], environ: dict[str, str], conf: Configured | None = None) -> list[str]:
    return sources(argv, environ, conf).indexes


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


def measure(plan: Plan, environment: Environment, environ: dict[str, str] | None = None,
            conf: Configured | None = None, client: Any = None) -> SpaceCheck:
    """The bytes the plan writes where, whether each file system has them free, and whether every pinned file
    can be fetched (``missing``, ``dead``). ``conf``: pip's configuration (default: asked of the plan's
    interpreter when a step installs); ``client``: a :func:`cudamatrix.net.session` (default: one that trusts the CA
    bundle pip does)."""
    environ = dict(os.environ if environ is None else environ)
    check = SpaceCheck()
    steps = [s for s in plan.steps if s.kind in ("install", "reinstall")]
    if not steps and not plan.to_remove:
        return check
    if steps and conf is None:
        conf = configured(plan.python)
    touched: set[str] = {r.name for r in plan.to_remove}
    cert = environ.get("PIP_CERT") or (conf.cert if conf is not None else None)  # the CA bundle pip trusts
    client = client if client is not None else net.session(verify=cert or True)
    download = _download(steps, environment, environ, touched, check, conf, client)
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
              check: SpaceCheck, conf: Configured | None, client: Any) -> int:
    """The bytes the install steps download (the index's file sizes); the installed distributions they replace
    are added to ``touched``; the pins whose size no index tells to ``check.unknown``, those no index lists to
    ``check.missing``, the indexes that gave no answer to ``check.dead``."""
    download = 0
    installed = set(environment.packages)
    dead: set[str] = set()
    for step in steps:
        src = sources(step.argv, {**environ, **(step.env or {})}, conf)
        for name, version in _pins(step.argv):
            if name in installed:
                touched.add(name)
            size = _pin_size(name, version, src, list(environment.python.tags), dead, client, check)
            download += size or 0
        check.dead += [redact_urls(i) for i in src.indexes if i in dead and redact_urls(i) not in check.dead]
    return download


def _pins(argv: list[str]) -> list[tuple[str, str]]:
    """(canonical name, version) of each ``name==version`` argument (not an option, not a URL)."""
    out = []
    for arg in argv:
        name, eq, version = arg.partition("==")
        if eq and not arg.startswith("-") and "://" not in arg:
            out.append((canonical(name.split("[")[0]), version))
    return out


def _pin_size(name: str, version: str, src: Sources, tags: list[str], dead: set[str], client: Any,
              check: SpaceCheck) -> int | None:
    """The size of one pin's file from the first index of ``src`` that lists it; a pin no answering index
    lists, where no other source may hold it, is noted in ``check.missing``."""
    pin = f"{name}=={version}"
    found = next((f for f in (find(i, name, version, tags, dead, client) for i in src.indexes) if f.listed), None)
    if found is None and not src.other and src.indexes and not dead & set(src.indexes):
        check.missing.append(f"{pin} ({', '.join(redact_urls(i) for i in src.indexes)})")
    if found is None or found.size is None:
        check.unknown.append(pin)
        return None
    return found.size


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
    """Before any change: refuse a plan whose files cannot all be fetched (an index that does not answer, a pin
    no index lists) or that will not fit on disk (InstallFailed, exit 4, nothing changed), with the indexes,
    the pins or the numbers; else a note on what could not be sized, or None."""
    check = measure(plan, environment)
    if check.dead or check.missing:
        raise InstallFailed(_unfetchable(check), detail={"unreachable": check.dead, "not_listed": check.missing},
                            hint="check the network, a proxy (HTTPS_PROXY), the index URLs (--mirror, "
                                 "PIP_INDEX_URL, pip.conf), then run fix again; nothing was changed")
    if check.short:
        raise InstallFailed("not enough free disk space for this plan: " + "; ".join(check.short),
                            hint="free space there, or point TMPDIR, PIP_CACHE_DIR / UV_CACHE_DIR and "
                                 "XDG_STATE_HOME at a larger disk; nothing was changed",
                            detail={"needs": [n.__dict__ for n in check.needs], "short": check.short})
    if check.unknown:
        return ("disk space: the index did not tell the size of " + ", ".join(check.unknown[:5])
                + ("..." if len(check.unknown) > 5 else "") + "; free space was not compared for them")
    return None


def _unfetchable(check: SpaceCheck) -> str:
    parts = []
    if check.dead:
        parts.append(f"{'the index' if len(check.dead) == 1 else 'the indexes'} {', '.join(check.dead)} gave no "
                     f"usable answer (none, none within {HTTP_TIMEOUT_S:g} s, or one over "
                     f"{LISTING_MAX_BYTES // 2 ** 20} MiB)")
    if check.missing:
        parts.append("no index lists " + "; ".join(check.missing[:5]) + ("..." if len(check.missing) > 5 else ""))
    return "the plan's files cannot all be fetched: " + "; ".join(parts)
