"""Bounded network reads: every HTTP exchange of the package is limited in time (one total deadline for the
whole exchange, redirects, headers and body included, not only a per-read socket timeout) and in bytes.

``fetch(url)`` / ``Fetcher.fetch(url)`` -> :class:`Fetched` (status, headers, body); :class:`FetchError` (exit 2)
when nothing usable came back in time: ``kind`` is "network" (no HTTP answer), "timeout" (the deadline
passed: a server that drips one byte a second is cut off there), "too large" (more than ``max_bytes`` of body,
decoded) or "redirect" (too many hops, or a hop from https to anything else). An HTTP error status is an
answer: it is returned, the caller decides.

How the deadline holds: the exchange runs in a worker thread that the caller waits for until the deadline;
then every socket the fetcher opened is shut down (which wakes a blocked read), and the caller gets its
"timeout" at once (a name lookup that the system resolver holds is left to end in the worker's own time).
Redirects are followed here, hop by hop, so that each hop's scheme is checked before it is asked.

``requests`` is imported lazily (the one HTTP client of the package; proxies and CA settings from the
environment as requests reads them). URLs in messages have their credentials masked.
"""
from __future__ import annotations

import socket
import threading
import time
import weakref
from typing import Any
from urllib.parse import urljoin, urlsplit

from cudamatrix.errors import CudamatrixError
from cudamatrix.safe.text import redact_urls
from cudamatrix.schema import field, record

DEADLINE_S = 30.0  # the whole exchange
CONNECT_S = 10.0  # one connection attempt (within the deadline)
MAX_BYTES = 32 * 1024 * 1024  # a body above this is refused, unread
MAX_REDIRECTS = 10
CHUNK = 64 * 1024


class FetchError(CudamatrixError):
    """No usable answer: ``kind`` is "network", "timeout", "too large" or "redirect"; ``url`` the URL asked
    (credentials masked)."""

    exit_code = 2

    def __init__(self, kind: str, url: str, message: str) -> None:
        self.kind = kind
        self.url = redact_urls(url)
        super().__init__(redact_urls(message), detail={"kind": kind, "url": self.url})


@record
class Fetched:
    """One HTTP answer, read whole within the bounds."""

    url: str  # the URL that answered (after redirects)
    status: int
    headers: dict[str, str] = field(default_factory=dict)  # names in lower case
    body: bytes = b""

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip().lower()


class Fetcher:
    """A reusable bounded HTTP client (one connection pool; use it from one thread at a time)."""

    def __init__(self, *, deadline_s: float = DEADLINE_S, max_bytes: int = MAX_BYTES, https_only: bool = False,
                 user_agent: str = "cudamatrix", verify: bool | str = True) -> None:
        self.deadline_s = deadline_s
        self.verify = verify  # TLS: True (requests' CA settings), or a CA bundle file (pip's ``cert``)
        self.max_bytes = max_bytes
        self.https_only = https_only
        self.user_agent = user_agent
        self._session: Any = None
        self._conns: weakref.WeakSet = weakref.WeakSet()  # every connection the pool opened

    def fetch(self, url: str, *, method: str = "GET", headers: dict[str, str] | None = None,
              deadline_s: float | None = None, max_bytes: int | None = None) -> Fetched:
        """``method`` ``url`` within the bounds (the fetcher's unless given). Raises FetchError."""
        deadline = time.monotonic() + (self.deadline_s if deadline_s is None else deadline_s)
        limit = self.max_bytes if max_bytes is None else max_bytes
        box: dict[str, Any] = {}

        def work() -> None:
            try:
                box["value"] = self._exchange(url, method, headers or {}, deadline, limit)
            except BaseException as exc:  # handed to the caller
                box["error"] = exc

        worker = threading.Thread(target=work, name="cudamatrix-fetch", daemon=True)
        worker.start()
        cut = False
        try:
            worker.join(max(0.0, deadline - time.monotonic()))
        finally:
            if worker.is_alive():
                cut = True
                self._cut()
                worker.join(1.0)
        if "value" in box and not cut:
            return box["value"]
        error = box.get("error")
        if cut or error is None:  # still running at the deadline, or woken by the cut
            raise FetchError("timeout", url, f"{url}: no whole answer within {self._seconds(deadline_s)} s")
        raise error

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None

    def _seconds(self, deadline_s: float | None) -> str:
        return f"{self.deadline_s if deadline_s is None else deadline_s:g}"

    def _cut(self) -> None:
        """Shut down every socket of the pool: a read blocked on one of them returns at once."""
        for conn in list(self._conns):
            sock = getattr(conn, "sock", None)
            if sock is None:
                continue
            try:
                socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the plain socket's: also under TLS
            except (OSError, TypeError, ValueError):
                continue

    def session(self):
        if self._session is None:
            self._session = _session(self._conns, self.user_agent)
            if self.verify is not True:
                self._session.verify = self.verify
        return self._session

    def _exchange(self, url: str, method: str, headers: dict[str, str], deadline: float, limit: int) -> Fetched:
        import requests

        seen_https = False
        for _hop in range(MAX_REDIRECTS + 1):
            scheme = urlsplit(url).scheme.lower()
            if scheme not in ("http", "https"):
                raise FetchError("redirect", url, f"{url}: not an http(s) URL")
            if scheme != "https" and (self.https_only or seen_https):
                raise FetchError("redirect", url, f"{url}: refused, not https"
                                 + (" (a redirect from https)" if seen_https else ""))
            seen_https = seen_https or scheme == "https"
            left = deadline - time.monotonic()
            if left <= 0:
                raise FetchError("timeout", url, f"{url}: the deadline passed")
            try:
                resp = self.session().request(method, url, headers=headers, stream=True, allow_redirects=False,
                                              timeout=(min(CONNECT_S, left), left))
            except (requests.RequestException, OSError, ValueError) as exc:
                raise FetchError("network", url, f"{url}: {type(exc).__name__}: {exc}") from None
            with resp:
                location = resp.headers.get("Location") if resp.is_redirect else None
                if location:
                    url = urljoin(url, location)
                    continue
                body = b"" if method == "HEAD" else _body(resp, url, deadline, limit)
                return Fetched(url=resp.url or url, status=int(resp.status_code),
                               headers={k.lower(): v for k, v in resp.headers.items()}, body=body)
        raise FetchError("redirect", url, f"{url}: more than {MAX_REDIRECTS} redirects")


def _body(resp, url: str, deadline: float, limit: int) -> bytes:
    """The body, decoded, refused past ``limit`` bytes (a Content-Length above it: before reading any)."""
    import requests

    length = resp.headers.get("Content-Length", "")
    if length.isdigit() and len(length) < 20 and int(length) > limit:
        raise FetchError("too large", url, f"{url}: {int(length)} bytes, above the limit of {limit}")
    parts: list[bytes] = []
    total = 0
    try:
        for chunk in resp.iter_content(CHUNK):
            total += len(chunk)
            if total > limit:
                raise FetchError("too large", url, f"{url}: more than {limit} bytes")
            if time.monotonic() > deadline:
                raise FetchError("timeout", url, f"{url}: the deadline passed while reading")
            parts.append(chunk)
    except (requests.RequestException, OSError, ValueError) as exc:
        if time.monotonic() > deadline:
            raise FetchError("timeout", url, f"{url}: the deadline passed while reading") from None
        raise FetchError("network", url, f"{url}: {type(exc).__name__}: {exc}") from None
    return b"".join(parts)


def _session(conns: weakref.WeakSet, user_agent: str):
    """A requests session whose connection pools note every connection they open in ``conns``."""
    import requests
    from requests.adapters import HTTPAdapter
    from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

    def tracked(base: Any) -> Any:
        class Pool(base):
            def _new_conn(self):
                conn = super()._new_conn()
                conns.add(conn)
                return conn
        return Pool

    classes = {"http": tracked(HTTPConnectionPool), "https": tracked(HTTPSConnectionPool)}

    class Adapter(HTTPAdapter):
        def init_poolmanager(self, *args, **kwargs):
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = classes

        def proxy_manager_for(self, proxy, **kwargs):
            manager = super().proxy_manager_for(proxy, **kwargs)
            manager.pool_classes_by_scheme = classes
            return manager

    session = requests.Session()
    session.headers["User-Agent"] = user_agent
    for prefix in ("http://", "https://"):
        session.mount(prefix, Adapter(max_retries=0))
    return session


def fetch(url: str, *, method: str = "GET", headers: dict[str, str] | None = None, deadline_s: float = DEADLINE_S,
          max_bytes: int = MAX_BYTES, https_only: bool = False) -> Fetched:
    """One bounded exchange with a fetcher of its own (see :class:`Fetcher`). Raises FetchError."""
    fetcher = Fetcher(deadline_s=deadline_s, max_bytes=max_bytes, https_only=https_only)
    try:
        return fetcher.fetch(url, method=method, headers=headers)
    finally:
        fetcher.close()
