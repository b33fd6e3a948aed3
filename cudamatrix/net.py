"""Bounded HTTP reads: every hop's scheme checked, the time and the bytes of every answer limited.

:func:`fetch` is the one way the package reads a URL over the network. It follows redirects itself, one hop at
a time, and checks each ``Location`` before asking: with ``allow_http=False`` every hop must be ``https`` (a
redirect to ``http://`` is refused, never followed), with ``allow_http=True`` (the user asked for plain http)
``http`` is accepted too; no other scheme ever is.

Time is bounded per request, not per socket read: a request gets ``grace_s`` seconds (connection, TLS handshake,
status line and headers included) plus one second for every ``min_rate`` bytes of body it has received. A
watchdog thread shuts the request's sockets down the moment that budget is spent, so a server that drips one byte
a second, in its headers or in its body, is cut off after ``grace_s`` seconds. Bytes are bounded by streaming the
body and stopping at ``max_bytes`` (a ``Content-Length`` over it is refused before anything is read). The
longest a request can take is therefore ``grace_s + max_bytes / min_rate``; a caller that needs one total deadline
for the whole exchange (redirects, headers and body) gives ``deadline_s``, which caps that budget; the caller then
waits for the exchange no longer than that (a name lookup the system resolver holds is left to end on its own).

An HTTP error status is an answer: it comes back (its body unread unless ``read_body`` names it), the caller decides.
A ``HEAD`` request (``method="HEAD"``) is bounded and checked the same way; its body is never read. TLS trusts the
environment's CA settings, as requests reads them, or the CA bundle a :func:`session` is given (``verify``).

``requests`` is imported on first use: nothing on the CLI's hot path loads it.
"""
from __future__ import annotations

import socket
import threading
import time
from functools import lru_cache
from typing import Any
from urllib.parse import urljoin, urlsplit

from cudamatrix.errors import CudamatrixError
from cudamatrix.schema import field, record

GRACE_S = 10.0  # seconds every request gets before its first byte of body
MIN_RATE = 256 * 1024  # bytes per second of body that buy one more second
MAX_REDIRECTS = 10
CHUNK = 16 * 1024
REDIRECTS = (301, 302, 303, 307, 308)


class NetError(CudamatrixError):
    """A URL could not be read within its bounds (network, a refused redirect, too slow, too large)."""

    exit_code = 2


@record(frozen=True)
class Answer:
    """The final answer to :func:`fetch`: the URL that gave it (after redirects), its status, headers and body."""

    url: str
    status: int
    headers: dict[str, str] = field(default_factory=dict)  # names in lower case
    body: bytes = b""
    hops: tuple[str, ...] = ()  # the URLs asked before ``url`` (redirects followed)

    def header(self, name: str, default: str = "") -> str:
        return self.headers.get(name.lower(), default)


def redact(url: str) -> str:
    """A URL with any user:password part removed, for messages and sources."""
    try:
        parts = urlsplit(url)
        if parts.username or parts.password:
            host = parts.hostname or ""
            if parts.port:
                host += f":{parts.port}"
            return parts._replace(netloc=host).geturl()
    except ValueError:  # an unparsable netloc (a bad port, a bracket left open): show no part of it
        return "<an unparsable URL>"
    return url


def size_text(n: float) -> str:
    """Bytes in words: "512 bytes", "16 KiB", "32 MiB"."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{int(n)} bytes"


def check_hop(url: str, allow_http: bool, came_from: str | None = None) -> str:
    """``url`` when its scheme may be read (https; http with ``allow_http``), else NetError naming the hop."""
    try:
        scheme = urlsplit(url).scheme.lower()
    except ValueError:
        scheme = ""
    if scheme == "https" or (scheme == "http" and allow_http):
        return url
    want = "an https or http URL" if allow_http else "an https URL"
    if came_from is None:
        raise NetError(f"{redact(url)}: not {want}")
    raise NetError(f"{redact(came_from)} redirects to {redact(url)}: not {want}; the redirect is not followed",
                   hint=None if allow_http else "an index is read over https only, on every redirect")


class _Watch:
    """The time budget of one request: ``grace_s`` plus a second per ``min_rate`` bytes received. When it is spent,
    every socket the request opened is shut down (a blocked read then returns at once)."""

    def __init__(self, grace_s: float, min_rate: float, deadline_s: float | None = None) -> None:
        self.start = time.monotonic()
        self.grace_s, self.min_rate, self.deadline_s = grace_s, min_rate, deadline_s
        self.received = 0
        self.spent: str | None = None  # why the request was cut off
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cudamatrix-net-watch", daemon=True)
        self._thread.start()

    def watch(self, sock: Any) -> None:
        if not isinstance(sock, socket.socket):
            return
        with self._lock:
            if all(s is not sock for s in self._sockets):
                self._sockets.append(sock)
            cut = self.spent is not None
        if cut:
            _shut(sock)

    def budget(self) -> float:
        """Seconds this request may take, given what it has received so far."""
        earned = self.grace_s + self.received / self.min_rate
        return earned if self.deadline_s is None else min(earned, self.deadline_s)

    def _run(self) -> None:
        while True:
            left = self.start + self.budget() - time.monotonic()
            if left <= 0:
                break
            if self._done.wait(left):
                return
        elapsed = time.monotonic() - self.start
        got = f"{size_text(self.received)} in" if self.received else "no complete answer within"
        total = self.deadline_s is not None and self.budget() >= self.deadline_s
        why = (f"the whole exchange gets {self.deadline_s:g} s" if total else
               f"every request gets {self.grace_s:g} s and one more per {size_text(self.min_rate)} received")
        with self._lock:
            self.spent = f"{got} {elapsed:.0f} s ({why}): cut off"
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)

    def close(self) -> None:
        self._done.set()
        self._thread.join(timeout=1)


def _shut(sock: socket.socket) -> None:
    try:  # the plain socket's shutdown, also for a TLS socket: its reader in the other thread sees the end
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass


_current = threading.local()  # the _Watch of the request this thread is making


def _watch_socket(sock: Any) -> None:
    watch = getattr(_current, "watch", None)
    if watch is not None:
        watch.watch(sock)


@lru_cache(maxsize=1)
def _adapter_class() -> type:
    """A requests adapter whose connections hand their socket to the current request's watch, when the TCP
    connection is made (before any TLS handshake) and again before each answer is read (a kept-alive one)."""
    import requests.adapters
    import urllib3
    from urllib3.connection import HTTPConnection, HTTPSConnection

    class Watched:
        sock: Any

        def _new_conn(self):
            sock = super()._new_conn()  # type: ignore[misc]
            _watch_socket(sock)
            return sock

        def getresponse(self, *args, **kwargs):
            _watch_socket(getattr(self, "sock", None))
            return super().getresponse(*args, **kwargs)  # type: ignore[misc]

    class Conn(Watched, HTTPConnection):
        pass

    class TLSConn(Watched, HTTPSConnection):
        pass

    class Pool(urllib3.HTTPConnectionPool):
        ConnectionCls = Conn

    class TLSPool(urllib3.HTTPSConnectionPool):
        ConnectionCls = TLSConn

    def watched(manager: Any) -> Any:
        classes = getattr(manager, "pool_classes_by_scheme", None)
        if isinstance(classes, dict) and classes.get("http") is urllib3.HTTPConnectionPool \
                and classes.get("https") is urllib3.HTTPSConnectionPool:  # a SOCKS proxy's pools are left alone
            manager.pool_classes_by_scheme = {"http": Pool, "https": TLSPool}
        return manager

    class Adapter(requests.adapters.HTTPAdapter):
        def init_poolmanager(self, *args, **kwargs):
            super().init_poolmanager(*args, **kwargs)
            watched(self.poolmanager)

        def proxy_manager_for(self, *args, **kwargs):
            return watched(super().proxy_manager_for(*args, **kwargs))

    return Adapter


def session(user_agent: str = "cudamatrix", verify: bool | str = True) -> Any:
    """A ``requests.Session`` whose connections :func:`fetch` can cut off (its proxies and CA settings are the
    environment's, as requests reads them). ``verify``: True (those CA settings) or a CA bundle file to trust
    instead (pip's ``cert``)."""
    import requests

    s = requests.Session()
    adapter = _adapter_class()
    s.mount("https://", adapter())
    s.mount("http://", adapter())
    s.headers["User-Agent"] = user_agent
    if verify is not True:
        s.verify = verify
    return s


def fetch(url: str, *, client: Any = None, method: str = "GET", headers: dict[str, str] | None = None,
          allow_http: bool = False, max_bytes: int = 32 << 20, grace_s: float = GRACE_S, min_rate: float = MIN_RATE,
          deadline_s: float | None = None, read_body: Any = (200, 206), max_redirects: int = MAX_REDIRECTS) -> Answer:
    """``method`` (GET or HEAD) ``url`` within bounds: every hop's scheme checked (:func:`check_hop`), redirects
    followed here (at most ``max_redirects``), the request cut off when its time budget is spent (module docstring;
    ``deadline_s``: one total deadline for the whole exchange), the body streamed and refused past ``max_bytes``.
    The body is read for the statuses in ``read_body`` only (others, an HTTP error among them, come back with an
    empty body, unread; a HEAD's never is). ``client``: a :func:`session` (one is made when None).

    Raises NetError with a message naming the URL (its credentials masked)."""
    current = check_hop(url, allow_http)
    s = client if client is not None else session()
    watch = _Watch(grace_s, min_rate, deadline_s)

    def exchange() -> Answer:
        return _exchange(s, method, current, headers or {}, allow_http, watch, max_bytes, read_body, max_redirects)

    if deadline_s is None:
        return exchange()
    return _within(exchange, url, deadline_s)


def _within(exchange: Any, url: str, deadline_s: float) -> Answer:
    """``exchange()`` in a worker thread that the caller waits for until ``deadline_s`` (and a second for the
    watch's own report): the watch cuts every socket at the deadline, and a name lookup that the system resolver
    holds, which no socket shutdown wakes, is left to end in the worker's own time."""
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["answer"] = exchange()
        except BaseException as exc:  # handed to the caller
            box["error"] = exc

    worker = threading.Thread(target=work, name="cudamatrix-net-fetch", daemon=True)
    worker.start()
    worker.join(deadline_s + 1.0)
    if "answer" in box:
        return box["answer"]
    if "error" in box:
        raise box["error"]
    raise NetError(f"{redact(url)}: no connection within {deadline_s:g} s (the whole exchange gets "
                   f"{deadline_s:g} s; the host name's lookup did not end): cut off")


def _exchange(s: Any, method: str, current: str, headers: dict[str, str], allow_http: bool, watch: _Watch,
              max_bytes: int, read_body: Any, max_redirects: int) -> Answer:
    """The requests of one :func:`fetch`, redirects followed, on this thread under ``watch``."""
    first = current
    _current.watch = watch
    hops: list[str] = []
    try:
        for _ in range(max_redirects + 1):
            resp = _ask(s, method, current, headers, watch)
            target = resp.headers.get("Location") if resp.status_code in REDIRECTS else None
            if target is None:
                wanted = method != "HEAD" and resp.status_code in read_body
                body = _body(resp, current, watch, max_bytes) if wanted else b""
                resp.close()
                return Answer(url=current, status=resp.status_code, body=body, hops=tuple(hops),
                              headers={k.lower(): v for k, v in resp.headers.items()})
            resp.close()
            hops.append(current)
            try:
                nxt = urljoin(current, target)
            except ValueError:
                raise NetError(f"{redact(current)} redirects to a location that is not a URL") from None
            current = check_hop(nxt, allow_http, came_from=current)
        raise NetError(f"{redact(first)}: more than {max_redirects} redirects")
    finally:
        _current.watch = None
        watch.close()


def _ask(s: Any, method: str, url: str, headers: dict[str, str], watch: _Watch) -> Any:
    import requests

    wait = watch.budget()  # per socket operation; the watch bounds the whole
    try:
        return s.request(method, url, headers=headers, stream=True, allow_redirects=False, timeout=(wait, wait))
    except (requests.RequestException, OSError, ValueError) as exc:  # ValueError: a URL requests cannot parse
        if watch.spent:
            raise NetError(f"{redact(url)}: {watch.spent}") from None
        raise NetError(f"{redact(url)}: {type(exc).__name__}: {_short(exc)}") from None


def _body(resp: Any, url: str, watch: _Watch, max_bytes: int) -> bytes:
    """The body, streamed: refused past ``max_bytes`` (or a Content-Length over it) and when the time runs out."""
    import requests

    length = resp.headers.get("Content-Length", "")
    if length.isdigit() and len(length) < 20 and int(length) > max_bytes:
        raise NetError(f"{redact(url)}: the answer is {size_text(int(length))}, over the {size_text(max_bytes)} "
                       "this read allows")
    buf = bytearray()
    try:
        for chunk in resp.iter_content(CHUNK):
            buf += chunk
            watch.received = len(buf)
            if len(buf) > max_bytes:
                raise NetError(f"{redact(url)}: the answer is over the {size_text(max_bytes)} this read allows; "
                               "not read further")
    except (requests.RequestException, OSError) as exc:
        if watch.spent:
            raise NetError(f"{redact(url)}: {watch.spent}") from None
        raise NetError(f"{redact(url)}: the answer broke off ({type(exc).__name__}: {_short(exc)})") from None
    if watch.spent:  # the end of the stream came from the watch's shutdown, not from the server
        raise NetError(f"{redact(url)}: {watch.spent}")
    return bytes(buf)


def _short(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) <= 300 else text[:300] + "..."
