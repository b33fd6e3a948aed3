"""A loopback HTTP(S) server that misbehaves on purpose, for the bounded network reads (cudamatrix.net, the index
client): it redirects (to another server, to itself a few times first, in a loop), drips its answer one byte a
second (the headers or the body), sends a body larger than any read allows (with or without its length), or a
JSON document nested 100,000 levels deep. Every answer is to a GET of any path; ``requests`` lists the paths asked.

TLS uses a throwaway self-signed certificate for 127.0.0.1 made by the ``openssl`` command (or the pair ``cert``
names, so that one CA bundle trusts several servers). Used by tests/test_net.py, tests/matrix/test_mirror.py and
scripts/hostile_inputs.py (which puts this folder on sys.path).
"""
from __future__ import annotations

import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

JSON = "application/vnd.pypi.simple.v1+json"
MODES = ("redirect", "loop", "drip-body", "drip-head", "huge", "endless", "nested", "html-bomb", "ok", "ok-then-drip")


def self_signed(folder: Path, name: str = "hostile") -> tuple[Path, Path]:
    """(certificate, key) for 127.0.0.1, valid a day, written into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    cert, key = folder / f"{name}-cert.pem", folder / f"{name}-key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    return cert, key


class HostileServer:
    """``mode`` (one of MODES) on every path. ``target``: the base URL a redirect sends to (the path asked is
    appended), after ``hops`` redirects to this server itself. ``size``: the bytes of a ``huge`` body (sent with
    its Content-Length when ``with_length``). ``ok`` answers an empty PEP 691 listing."""

    def __init__(self, mode: str, *, tls: bool = False, cert: tuple[Path, Path] | None = None,
                 folder: Path | None = None, target: str = "", hops: int = 0, size: int = 40 << 20,
                 with_length: bool = True, status: int = 302) -> None:
        assert mode in MODES, mode
        self.mode, self.tls, self.cert, self.folder = mode, tls, cert, folder
        self.target, self.hops, self.size, self.with_length, self.status = target, hops, size, with_length, status
        self.requests: list[str] = []
        self.stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> HostileServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if server.mode == "ok-then-drip" else "HTTP/1.0"  # keep-alive

            def log_message(self, *args):
                pass

            def do_GET(self):
                server.requests.append(self.path)
                try:
                    getattr(self, "_" + server.mode.replace("-", "_"))()
                except OSError:  # the client hung up: what a bounded reader does
                    self.close_connection = True

            def _head(self, status: int = 200, ctype: str = JSON, length: int | None = None, **more: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                if length is not None:
                    self.send_header("Content-Length", str(length))
                for k, v in more.items():
                    self.send_header(k, v)
                self.end_headers()

            def _redirect(self):
                done = 0
                path = self.path
                if path.startswith("/hop/"):
                    _, _, count, rest = path.split("/", 3)
                    done, path = int(count), "/" + rest
                where = f"{server.url}/hop/{done + 1}{path}" if done < server.hops else server.target + path
                self._head(server.status, "text/html", 0, Location=where)

            def _loop(self):
                self._head(302, "text/html", 0, Location=self.path)

            def _drip(self, data: bytes) -> None:
                for i in range(len(data)):
                    if server.stopping.is_set():
                        return
                    self.wfile.write(data[i:i + 1])
                    self.wfile.flush()
                    time.sleep(1)

            def _drip_body(self):
                body = b'{"meta": {"api-version": "1.1"}, "name": "x", "files": []}' + b" " * 200
                self._head(length=len(body))
                self._drip(body)

            def _drip_head(self):
                self._drip(b"HTTP/1.1 200 OK\r\nContent-Type: " + JSON.encode() + b"\r\nContent-Length: 2\r\n\r\n{}")

            def _huge(self):
                # a valid, empty PEP 691 listing padded with blanks to ``size`` bytes
                head, tail = b'{"meta": {"api-version": "1.1"}, "files": [', b"]}"
                self._head(length=server.size if server.with_length else None)
                self.wfile.write(head)
                left = server.size - len(head) - len(tail)
                block = b" " * (1 << 20)
                while left > 0 and not server.stopping.is_set():
                    self.wfile.write(block[:left])
                    left -= len(block)
                self.wfile.write(tail)

            def _endless(self):
                self._head()
                block = b" " * (1 << 16)
                while not server.stopping.is_set():
                    self.wfile.write(block)

            def _nested(self):
                body = b"[" * 100_000 + b"]" * 100_000
                self._head(length=len(body))
                self.wfile.write(body)

            def _html_bomb(self):
                body = b"<!DOCTYPE html><html><body>" + b"<a " * 30_000 + b"<a" + b" " * 30_000
                self._head(ctype="text/html", length=len(body))
                self.wfile.write(body)

            def _ok_then_drip(self):
                """The first request on a connection answered at once (kept alive), the next one dripped."""
                if getattr(self, "_answered", False):
                    return self._drip_body()
                self._answered = True
                self._ok()

            def _ok(self):
                body = b'{"meta": {"api-version": "1.1"}, "name": "x", "files": []}'
                self._head(length=len(body))
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        if self.tls:
            import ssl

            if self.cert is None:
                assert self.folder is not None, "a TLS server needs a folder for its certificate, or cert="
                self.cert = self_signed(self.folder)
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(str(self.cert[0]), str(self.cert[1]))
            self._server.socket = ctx.wrap_socket(self._server.socket, server_side=True)
        threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True).start()  # shutdown() waits one poll: 20 ms, not 0.5 s
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()


def free_port() -> int:
    """A loopback port nothing listens on (for a URL that must not be reached)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RawServer:
    """Loopback http at the socket level, for answers no HTTP server library writes (a drip in the headers, a
    Content-Length that lies, a connection that never answers): each connection's request is read, then
    ``answer(conn, request)`` writes what it will, in a thread of its own. ``asked`` holds each request line.
    A context manager (``with RawServer(answer) as server: server.url``); entered without leaving, it serves
    for the life of the process (scripts/hostile_inputs.py)."""

    def __init__(self, answer, backlog: int = 16) -> None:
        self.answer, self.asked = answer, []
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(backlog)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def _one(self, conn: socket.socket) -> None:
        try:
            request = conn.recv(65536)
            self.asked.append(request.split(b"\r\n")[0])
            self.answer(conn, request)
        except OSError:
            pass
        finally:
            conn.close()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:  # closed: the server ends
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def __enter__(self) -> RawServer:
        threading.Thread(target=self._serve, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.listener.close()
