"""A small client of a Python package index: release lists and wheel metadata, without wheel downloads.

Listings come from the JSON Simple API (PEP 691), with the HTML form (PEP 503) as the fallback for
indexes that only speak that. A wheel's ``METADATA`` comes from the separate metadata file the index
publishes next to it (PEP 658 / PEP 714, ``<wheel-url>.metadata``) where the listing advertises one;
otherwise from the wheel itself with HTTP range requests (a wheel is a zip: only its central directory
and the one member are read). An index that ignores range requests is not read further: no file is ever
downloaded whole.

The index is the one the user's pip uses: ``--index-url``/``--mirror`` given by the caller, else pip's
configuration (``PIP_INDEX_URL``, pip.conf as ``pip config list`` prints it), else pip's own built-in
default, read from the installed pip. No registry host name is written here.

``requests`` is imported lazily: nothing on the CLI's hot path loads it.
"""
from __future__ import annotations

import hashlib
import html
import re
import struct
import sys
import zlib
from collections.abc import Sequence
from email.parser import HeaderParser
from typing import Any
from urllib.parse import urljoin, urlsplit

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from cudamatrix import net, proc
from cudamatrix.errors import CudamatrixError
from cudamatrix.net import redact
from cudamatrix.safe.files import parse_json
from cudamatrix.schema import field, record

JSON_ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
TIMEOUT = net.GRACE_S  # seconds a request gets before its first byte of body (net.fetch)
EOCD_MAX = 65557  # the end-of-central-directory record plus the longest zip comment
LISTING_MAX = 32 << 20  # a project page: the largest real ones (every torch build on one page) are a few MB
METADATA_MAX = 8 << 20  # a PEP 658 METADATA file
RANGE_MAX = 32 << 20  # one range read of a wheel (its central directory, one member)
MEMBER_MAX = 32 << 20  # one zip member, uncompressed
LISTING_DEPTH = 32  # a PEP 691 page nests 4 levels


class IndexReadError(CudamatrixError):
    """The index could not be read (network, HTTP status, a file it will not serve in parts)."""

    exit_code = 2


@record(frozen=True)
class IndexFile:
    """One wheel in a project listing."""

    filename: str
    url: str
    project: str
    version: Version
    pythons: tuple[str, ...]  # interpreter tags: "cp311", "py3"
    abis: tuple[str, ...]
    platforms: tuple[str, ...]  # platform tags: "manylinux_2_28_x86_64"
    requires_python: str | None = None
    yanked: bool = False
    size: int | None = None
    metadata_sha256: str | None = None  # PEP 658/714: set when the index publishes <url>.metadata
    has_metadata: bool = False


@record
class Metadata:
    """The fields of a wheel's METADATA the matrix uses."""

    name: str
    version: str
    requires_python: str | None
    requires_dist: list[str] = field(default_factory=list)
    source: str = ""  # where it was read: "<file>.metadata (PEP 658)" or "<file> (range read)"


# --- pure parsers --------------------------------------------------------------------------------

def parse_metadata(text: str, source: str = "") -> Metadata:
    """A METADATA (email header) document -> Metadata."""
    msg = HeaderParser().parsestr(text)
    return Metadata(name=msg.get("Name", ""), version=msg.get("Version", ""),
                    requires_python=msg.get("Requires-Python"),
                    requires_dist=[str(x) for x in (msg.get_all("Requires-Dist") or [])], source=source)


def _file(project: str, filename: str, url: str, requires_python: str | None, yanked: Any,
          size: int | None, meta: Any) -> IndexFile | None:
    if not filename.endswith(".whl"):
        return None
    try:
        _name, version, _build, tags = parse_wheel_filename(filename)
    except (InvalidWheelFilename, InvalidVersion):
        return None
    sha = meta.get("sha256") if isinstance(meta, dict) and isinstance(meta.get("sha256"), str) else None
    return IndexFile(
        filename=filename, url=url, project=project, version=version,
        pythons=tuple(sorted({t.interpreter for t in tags})), abis=tuple(sorted({t.abi for t in tags})),
        platforms=tuple(sorted({t.platform for t in tags})), requires_python=requires_python or None,
        yanked=bool(yanked), size=size, metadata_sha256=sha, has_metadata=bool(meta))


def parse_json_listing(project: str, doc: dict[str, Any], base: str) -> list[IndexFile]:
    """A PEP 691 project page -> its wheels (``core-metadata`` or, older, ``dist-info-metadata``)."""
    out = []
    files = doc.get("files")
    for f in files if isinstance(files, list) else []:  # any other shape lists nothing
        if not isinstance(f, dict) or not isinstance(f.get("filename"), str) or not isinstance(f.get("url"), str):
            continue
        meta = f.get("core-metadata", f.get("dist-info-metadata"))
        size = f.get("size") if isinstance(f.get("size"), int) and not isinstance(f.get("size"), bool) else None
        requires = f.get("requires-python") if isinstance(f.get("requires-python"), str) else None
        try:
            url = urljoin(base, f["url"])
        except ValueError:  # not a URL (a bracket left open, a bad port): not a file
            continue
        item = _file(project, f["filename"], url, requires, f.get("yanked"), size, meta)
        if item:
            out.append(item)
    return out


# linear in the page: a tag's attributes are at most 8 KB and end at the first < or >, an attribute name starts a
# word, the label ends at the next <; no two parts can trade characters (no backtracking over a hostile page)
_ANCHOR = re.compile(r"<a(\s[^<>]{0,8192})?>([^<]*)</a>", re.I)
_OPENING = re.compile(r"<a[\s>]", re.I)
_ATTR = re.compile(r"""(?<![\w-])([\w-]+)\s*=\s*(?:"([^"]*)"|'([^']*)')""")


def parse_html_listing(project: str, text: str, base: str) -> list[IndexFile]:
    """A PEP 503 project page -> its wheels (``data-core-metadata`` / ``data-dist-info-metadata``).

    Raises IndexReadError when an ``<a`` tag of the page is not a whole anchor (``<a href="...">name</a>``)."""
    out = []
    anchors = _ANCHOR.findall(text)
    opened = len(_OPENING.findall(text))
    if opened > len(anchors):
        raise IndexReadError(f"the HTML listing does not parse: {opened - len(anchors)} of its {opened} "
                             "<a> tags are not whole anchors (<a href=...>name</a>)")
    for attrs_text, label in anchors:
        attrs = {m[0].lower(): html.unescape(m[1] or m[2]) for m in _ATTR.findall(attrs_text)}
        href = attrs.get("href")
        if not href:
            continue
        try:
            url = urljoin(base, href)
        except ValueError:
            continue
        filename = html.unescape(label.strip()) or url.split("#")[0].rsplit("/", 1)[-1]
        meta_attr = attrs.get("data-core-metadata", attrs.get("data-dist-info-metadata"))
        meta: Any = None
        if meta_attr is not None:
            meta = {"sha256": meta_attr.split("=", 1)[1]} if meta_attr.startswith("sha256=") else True
        item = _file(project, filename, url, attrs.get("data-requires-python"), "data-yanked" in attrs,
                     None, meta)
        if item:
            out.append(item)
    return out


def _central_directory(read, total: int, tail: bytes) -> list[tuple[str, int, int, int]]:
    """(name, compression method, compressed size, local header offset) of every zip member.

    ``tail`` is the end of the file (``total`` bytes long); ``read(start, end)`` fetches other bytes."""
    at = tail.rfind(b"PK\x05\x06")
    if at < 0:
        raise IndexReadError("not a zip file (no end of central directory)")
    cd_size, cd_off = struct.unpack("<II", tail[at + 12:at + 20])
    if cd_off == 0xFFFFFFFF or cd_size == 0xFFFFFFFF:  # zip64
        loc = tail.rfind(b"PK\x06\x07")
        if loc < 0:
            raise IndexReadError("zip64 locator missing")
        (eocd64,) = struct.unpack("<Q", tail[loc + 8:loc + 16])
        rec = read(eocd64, eocd64 + 55)
        cd_size, cd_off = struct.unpack("<QQ", rec[40:56])
    tail_start = total - len(tail)
    cd = tail[cd_off - tail_start:cd_off - tail_start + cd_size] if cd_off >= tail_start \
        else read(cd_off, cd_off + cd_size - 1)
    out = []
    pos = 0
    while pos + 46 <= len(cd) and cd[pos:pos + 4] == b"PK\x01\x02":
        (method,) = struct.unpack("<H", cd[pos + 10:pos + 12])
        csize, usize = struct.unpack("<II", cd[pos + 20:pos + 28])
        nlen, elen, clen = struct.unpack("<HHH", cd[pos + 28:pos + 34])
        (off,) = struct.unpack("<I", cd[pos + 42:pos + 46])
        name = cd[pos + 46:pos + 46 + nlen].decode("utf-8", "replace")
        if 0xFFFFFFFF in (off, csize, usize):
            csize, off = _zip64_extra(cd[pos + 46 + nlen:pos + 46 + nlen + elen], usize, csize, off)
        out.append((name, method, csize, off))
        pos += 46 + nlen + elen + clen
    return out


def _read_member(read, name: str, method: int, csize: int, off: int, limit: int = MEMBER_MAX) -> bytes:
    head = read(off, off + 29)
    hn, he = struct.unpack("<HH", head[26:30])
    start = off + 30 + hn + he
    raw = read(start, start + csize - 1) if csize else b""
    if method == 8:
        inflate = zlib.decompressobj(-15)
        out = inflate.decompress(raw, limit)
        if inflate.unconsumed_tail:
            raise IndexReadError(f"{name}: over {limit} bytes uncompressed; not read")
        return out
    if method == 0:
        return raw
    raise IndexReadError(f"{name}: unsupported zip compression method {method}")


def _zip_member(read, total: int, tail: bytes, suffix: str) -> tuple[str, bytes] | None:
    """The first member whose name ends with ``suffix``, read with ``read(start, end)``; None if absent."""
    for name, method, csize, off in _central_directory(read, total, tail):
        if name.endswith(suffix):
            return name, _read_member(read, name, method, csize, off)
    return None


def _zip64_extra(extra: bytes, usize: int, csize: int, off: int) -> tuple[int, int]:
    """(compressed size, local header offset) from a zip64 extra field; each 64-bit value is present
    only where its 32-bit field is full, in the order uncompressed size, compressed size, offset."""
    pos = 0
    while pos + 4 <= len(extra):
        tag, size = struct.unpack("<HH", extra[pos:pos + 4])
        if tag == 1:
            body = extra[pos + 4:pos + 4 + size]
            vals = [struct.unpack("<Q", body[i:i + 8])[0] for i in range(0, len(body) - 7, 8)]
            if usize == 0xFFFFFFFF and vals:
                vals.pop(0)
            if csize == 0xFFFFFFFF and vals:
                csize = vals.pop(0)
            if off == 0xFFFFFFFF and vals:
                off = vals.pop(0)
            return csize, off
        pos += 4 + size
    return csize, off


# --- which index --------------------------------------------------------------------------------

def parse_pip_config(text: str) -> str | None:
    """The index-url from ``pip config list`` output (environment over site over user over global)."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r"^([^=]*?)\.index-url\s*=\s*'?(.*?)'?\s*$", line.strip())
        if m:
            found[m.group(1)] = m.group(2)
    for scope in (":env:", "site", "user", "global"):
        if found.get(scope):
            return found[scope]
    return next(iter(found.values()), None)


# pip's help for --index-url names its built-in default: "Base URL of the Python Package Index (default URL)"
_HELP_DEFAULT = re.compile(r"--index-url <url>[^(]*\(default\s+([^\s)]+)\)")


def parse_pip_help_default(text: str) -> str | None:
    """The default index URL in ``pip install --help`` output (the ``--index-url`` option's help), or None."""
    m = _HELP_DEFAULT.search(text)
    return m.group(1) if m else None


def pip_default_index(python: str | None = None, config_list: str | None = None,
                      install_help: str | None = None) -> str:
    """The index URL the user's pip uses: ``PIP_INDEX_URL``, pip.conf (``pip config list``, or its output
    given as ``config_list``), else the default pip's own help names (pip's public command line, not its
    internals; ``pip install --help``, or its output given as ``install_help``).

    Raises IndexReadError if pip is not there to ask."""
    import os

    if os.environ.get("PIP_INDEX_URL"):
        return os.environ["PIP_INDEX_URL"]

    interp = python or sys.executable
    if config_list is None:
        config_list, install_help = _config_and_help(interp)
    configured = parse_pip_config(config_list)
    if configured:
        return configured
    default = parse_pip_help_default(_pip_help(interp) if install_help is None else install_help)
    if default:
        return default
    raise IndexReadError("cannot tell which index pip uses (pip is not installed for this interpreter)",
                         hint="pass --index-url / --mirror")


def _pip_config(interp: str) -> str:
    """``pip config list``'s output ("" when pip cannot be run)."""
    res = proc.run([interp, "-m", "pip", "config", "list"], timeout=30)
    return res.stdout if res.ok else ""


def _pip_help(interp: str) -> str:
    """``pip install --help``'s output, its lines wide enough to keep a URL on one ("" when pip cannot be run)."""
    import os

    res = proc.run([interp, "-m", "pip", "install", "--help"], timeout=30, env={**os.environ, "COLUMNS": "200"})
    return res.stdout if res.ok else ""


def _config_and_help(interp: str) -> tuple[str, str]:
    """``pip config list`` and ``pip install --help`` at once: each is a start of pip (0.3 s here), asked one after
    the other they made ``check -r`` wait 0.6 s. The help is read only when the configuration names no index (the
    usual case); where it does, its run took the other core for nothing."""
    import threading

    helped: list[str] = []
    beside = threading.Thread(target=lambda: helped.append(_pip_help(interp)), daemon=True)
    beside.start()
    listed = _pip_config(interp)
    beside.join()
    return listed, helped[0] if helped else ""


def parse_pip_config_list(text: str, key: str) -> list[str]:
    """The values of one pip option (``extra-index-url``, ``find-links``) in ``pip config list`` output, every
    scope, each value split on blanks as pip splits a list option."""
    out: list[str] = []
    for line in text.splitlines():
        m = re.match(r"^[^=]*?\." + re.escape(key) + r"\s*=\s*'?(.*?)'?\s*$", line.strip())
        if m:
            out += m.group(1).split()
    return out


def pip_sources(python: str | None = None) -> tuple[str, list[str], list[str]]:
    """(index URL, extra index URLs, find-links) the user's pip reads: ``PIP_*`` variables, then its
    configuration (``pip config list``), the index URL falling back on pip's own default (its install help, asked
    beside the configuration when no ``PIP_INDEX_URL`` names the index).
    Raises IndexReadError if pip is not there to ask."""
    import os

    interp = python or sys.executable
    if os.environ.get("PIP_INDEX_URL"):
        listed, helped = _pip_config(interp), None
    else:
        listed, helped = _config_and_help(interp)
    extra = os.environ.get("PIP_EXTRA_INDEX_URL", "").split() or parse_pip_config_list(listed, "extra-index-url")
    links = os.environ.get("PIP_FIND_LINKS", "").split() or parse_pip_config_list(listed, "find-links")
    return pip_default_index(python, listed, helped), extra, links


def _local_folder(location: str) -> str | None:
    """The folder a ``file://`` URL or a plain path names (pip reads both as local sources); None for others."""
    from urllib.parse import unquote

    parts = urlsplit(location)
    if parts.scheme == "file":
        return unquote(parts.path)
    return location if not parts.scheme else None


def _in_folder_index(folder: str, name: str) -> bool:
    """A local PEP 503 index (``file:///.../simple``) lists a project by its folder."""
    import os

    return os.path.isdir(os.path.join(folder, canonicalize_name(name)))


def _in_find_links(folder: str, name: str) -> bool:
    """A local find-links folder holds a project when one of its wheels or sdists carries the name."""
    import os

    want = canonicalize_name(name)
    try:
        files = os.listdir(folder)
    except OSError:
        return False
    return any(canonicalize_name(re.split(r"-\d", f, maxsplit=1)[0]) == want for f in files)


def index_lookup(urls: list[str], find_links: Sequence[str] = (), timeout: float = 10.0):
    """A name lookup over pip's sources: True when one lists the project, False when every one answered and
    none lists it, None when it cannot be told (an index that did not answer, a find-links web page, which
    is not read). Local indexes and find-links folders are read from disk."""
    clients: list[IndexClient] = []
    folders: list[tuple[str, bool]] = []  # (folder, is a find-links folder)
    partial = False
    for url, flat in [(u, False) for u in urls] + [(f, True) for f in find_links]:
        folder = _local_folder(url)
        if folder is not None:
            folders.append((folder, flat))
        elif flat:
            partial = True  # a find-links page on the web: not read here
        else:
            clients.append(IndexClient(url, timeout=timeout))

    def lookup(name: str) -> bool | None:
        if any((_in_find_links if flat else _in_folder_index)(folder, name) for folder, flat in folders):
            return True
        answered = not partial
        for client in clients:
            try:
                if client.exists(name):
                    return True
            except IndexReadError:
                answered = False
        return False if answered else None

    return lookup


# --- the client ----------------------------------------------------------------------------------

def _zip_error(name: str, exc: BaseException) -> IndexReadError:
    return IndexReadError(f"{name}: not a readable wheel ({type(exc).__name__}: {exc})")


class IndexClient:
    """Read project listings and wheel metadata from one index base URL (``.../simple``).

    Every request is a bounded :func:`cudamatrix.net.fetch` (time, bytes, and the scheme of every redirect):
    with ``https_only`` the base URL and every hop must be https; otherwise an http base URL (the user's
    choice) may be read over http, and an https one is never downgraded by a redirect. ``timeout``: the
    seconds each request gets before its first byte of body (net.GRACE_S). ``member_max``: the largest wheel
    member read, compressed and uncompressed (:data:`MEMBER_MAX`; the maintainer scripts and the tests that read
    CUDA libraries out of real wheels raise it: a cuDNN library is hundreds of MB)."""

    def __init__(self, base_url: str, *, timeout: float = TIMEOUT, https_only: bool = False,
                 session: Any = None, member_max: int | None = None) -> None:
        if https_only and urlsplit(base_url).scheme != "https":
            raise IndexReadError(f"{redact(base_url)}: not an https URL", hint="the matrix is only read over https")
        if urlsplit(base_url).scheme not in ("http", "https"):
            raise IndexReadError(f"{redact(base_url)}: not an http(s) index URL")
        self.base = base_url.rstrip("/") + "/"
        self.timeout = timeout
        self.member_max = MEMBER_MAX if member_max is None else member_max
        self.allow_http = urlsplit(base_url).scheme == "http" and not https_only
        self._session = session
        self.requests_made = 0

    @property
    def session(self):
        if self._session is None:
            self._session = net.session("cudamatrix-matrix-refresh")
        return self._session

    def _get(self, url: str, headers: dict[str, str] | None = None, *, max_bytes: int = LISTING_MAX,
             read_body: tuple[int, ...] = (200,)) -> net.Answer:
        self.requests_made += 1
        try:
            return net.fetch(url, client=self.session, headers=headers, allow_http=self.allow_http,
                             max_bytes=max_bytes, grace_s=self.timeout, read_body=read_body)
        except net.NetError as exc:
            raise IndexReadError(exc.message, hint=exc.hint) from None

    def project(self, name: str) -> list[IndexFile]:
        """Every wheel of project ``name`` (an empty list when the index does not have it)."""
        project = canonicalize_name(name)
        url = urljoin(self.base, project + "/")
        resp = self._get(url, {"Accept": JSON_ACCEPT})
        if resp.status == 404:
            return []
        if resp.status != 200:
            raise IndexReadError(f"{redact(url)}: HTTP {resp.status}")
        ctype, _, params = resp.header("Content-Type").partition(";")
        if ctype.strip().lower().endswith("json"):
            try:
                doc = parse_json(resp.body, max_depth=LISTING_DEPTH)
            except ValueError as exc:
                raise IndexReadError(f"{redact(url)}: the JSON listing does not parse ({exc})") from None
            if not isinstance(doc, dict):
                raise IndexReadError(f"{redact(url)}: the JSON listing is not an object")
            return parse_json_listing(project, doc, resp.url)
        try:
            return parse_html_listing(project, _text(resp.body, params), resp.url)
        except IndexReadError as exc:
            raise IndexReadError(f"{redact(url)}: {exc.message}") from None

    def exists(self, name: str) -> bool:
        """Whether the index lists project ``name`` (its page answers 200; 404: it does not). The listing is not
        read. Raises IndexReadError for any other answer or a network error."""
        url = urljoin(self.base, canonicalize_name(name) + "/")
        resp = self._get(url, {"Accept": JSON_ACCEPT}, read_body=())
        if resp.status in (200, 404):
            return resp.status == 200
        raise IndexReadError(f"{redact(url)}: HTTP {resp.status}")

    def metadata(self, f: IndexFile) -> Metadata:
        """The METADATA of one wheel: its PEP 658 file where published, else read out of the wheel in parts."""
        if f.has_metadata:
            url = f.url.split("#")[0] + ".metadata"
            resp = self._get(url, max_bytes=METADATA_MAX)
            if resp.status == 200:
                body = resp.body
                if f.metadata_sha256 and hashlib.sha256(body).hexdigest() != f.metadata_sha256:
                    raise IndexReadError(f"{f.filename}.metadata: sha256 does not match the listing")
                return parse_metadata(body.decode("utf-8", "replace"), f"{f.filename}.metadata (PEP 658)")
        name, data = self.member(f, ".dist-info/METADATA", max_bytes=METADATA_MAX) or (None, None)
        if data is None:
            raise IndexReadError(f"{f.filename}: no .dist-info/METADATA in the wheel")
        return parse_metadata(data.decode("utf-8", "replace"), f"{f.filename}:{name} (range read)")

    def _range(self, url: str, start: int | None, end: int) -> tuple[bytes, int]:
        """Bytes ``start``..``end`` (inclusive) of ``url``, or its last ``end`` bytes when ``start`` is None; and
        the file's total size (-1 when the server does not say)."""
        length = end if start is None else end - start + 1
        most = max(RANGE_MAX, self.member_max)
        if length <= 0 or length > most:
            raise IndexReadError(f"{redact(url)}: the wheel asks for a read of {length} bytes "
                                 f"(at most {net.size_text(most)} are read at once)")
        spec = f"-{end}" if start is None else f"{start}-{end}"
        # a 200 would be the whole wheel: it is not read (hundreds of MB), and refused below
        resp = self._get(url, {"Range": f"bytes={spec}"}, max_bytes=length, read_body=(206,))
        if resp.status != 206:
            raise IndexReadError(f"{redact(url)}: the server does not answer range requests (HTTP {resp.status})")
        m = re.search(r"/(\d{1,19})$", resp.header("Content-Range"))
        return resp.body, int(m.group(1)) if m else -1

    def _reader(self, url: str):
        return lambda a, b: self._range(url, a, b)[0]

    def member(self, f: IndexFile, suffix: str, max_bytes: int | None = None) -> tuple[str, bytes] | None:
        """(name, bytes) of the first member of the remote wheel whose name ends with ``suffix``, or None.

        ``max_bytes``: refuse (IndexReadError) a member whose compressed size is larger."""
        url = f.url.split("#")[0]
        read = self._reader(url)
        try:
            tail, total = self._range(url, None, EOCD_MAX)
            if total < 0:
                total = f.size or len(tail)
            for name, method, csize, off in _central_directory(read, total, tail):
                if name.endswith(suffix):
                    if max_bytes is not None and csize > max_bytes:
                        raise IndexReadError(f"{f.filename}:{name} is {csize} bytes compressed, over {max_bytes}")
                    return name, _read_member(read, name, method, csize, off, self.member_max)
        except (struct.error, zlib.error, ValueError, IndexError, OverflowError) as exc:
            raise _zip_error(f.filename, exc) from None
        return None

    def members(self, f: IndexFile) -> list[tuple[str, int]]:
        """(name, compressed size) of every member of the remote wheel (its central directory only)."""
        url = f.url.split("#")[0]
        try:
            tail, total = self._range(url, None, EOCD_MAX)
            return [(n, c) for n, _m, c, _o in _central_directory(self._reader(url), total if total >= 0 else len(tail),
                                                                  tail)]
        except (struct.error, zlib.error, ValueError, IndexError, OverflowError) as exc:
            raise _zip_error(f.filename, exc) from None


def _text(body: bytes, content_type_params: str) -> str:
    """An HTML page's text: the charset its Content-Type names (UTF-8 when none or an unknown one)."""
    m = re.search(r"charset\s*=\s*[\"']?([\w.:-]{1,40})", content_type_params, re.I)
    try:
        return body.decode(m.group(1) if m else "utf-8", "replace")
    except LookupError:
        return body.decode("utf-8", "replace")
