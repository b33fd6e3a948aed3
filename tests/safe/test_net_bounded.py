"""cudamatrix.safe.net: the bounded HTTP helper, against real loopback servers: a total deadline that a
dripping server cannot stretch, a byte limit that a huge or endless body cannot pass, redirects followed hop by
hop (a loop, a scheme that is not http(s), http where https is required), an HTTP error returned as an answer."""
from __future__ import annotations

import contextlib
import socket
import threading
import time

import pytest

from cudamatrix.safe import net


@contextlib.contextmanager
def _server(answer):
    """Loopback: each connection's request is read, then ``answer(conn, request)`` writes what it will."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return

            def one(conn=conn) -> None:
                try:
                    answer(conn, conn.recv(65536))
                except OSError:
                    pass
                finally:
                    conn.close()
            threading.Thread(target=one, daemon=True).start()
    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()


def _reply(status: str, headers: dict[str, str], body: bytes = b""):
    def answer(conn, request) -> None:
        head = "".join(f"{k}: {v}\r\n" for k, v in {"Content-Length": str(len(body)), "Connection": "close",
                                                       **headers}.items())
        conn.sendall(f"HTTP/1.1 {status}\r\n{head}\r\n".encode() + body)
    return answer


def test_an_answer_and_an_http_error_are_returned():
    with _server(_reply("200 OK", {"Content-Type": "text/html; charset=utf-8"}, b"<a>x</a>")) as url:
        got = net.fetch(url + "/simple/x/")
    assert (got.status, got.body, got.content_type) == (200, b"<a>x</a>", "text/html")
    with _server(_reply("404 Not Found", {}, b"no")) as url:
        assert net.fetch(url).status == 404


def _drip_headers(conn, request) -> None:
    for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 10_000:
        conn.sendall(bytes([byte]))
        time.sleep(0.05)


def _drip_body(conn, request) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
    for _ in range(100_000):
        conn.sendall(b"x")
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize("answer", [_drip_headers, _drip_body], ids=["headers", "body"])
def test_a_dripping_server_is_cut_off_at_the_deadline(answer):
    """A byte every 50 ms never trips a socket timeout; the deadline covers the whole exchange."""
    with _server(answer) as url:
        start = time.monotonic()
        with pytest.raises(net.FetchError) as err:
            net.fetch(url, deadline_s=1.0)
        took = time.monotonic() - start
    assert err.value.kind == "timeout" and err.value.exit_code == 2
    assert 0.9 < took < 2.5


def _endless(conn, request) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"x" * (1 << 20)
    while True:
        conn.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))


@pytest.mark.slow
def test_a_body_past_the_limit_is_refused_told_or_not():
    with _server(_endless) as url:
        with pytest.raises(net.FetchError) as err:
            net.fetch(url, max_bytes=4 << 20, deadline_s=20)
    assert err.value.kind == "too large"
    told = _reply("200 OK", {"Content-Length": str(1 << 30)})  # says 1 GiB, sends nothing: refused unread
    with _server(told) as url:
        start = time.monotonic()
        with pytest.raises(net.FetchError) as err:
            net.fetch(url, max_bytes=1 << 20, deadline_s=20)
    assert err.value.kind == "too large" and time.monotonic() - start < 2


def test_redirects_are_followed_hop_by_hop_and_checked():
    def answer(conn, request) -> None:
        path = request.split(b" ")[1].decode()
        if path == "/loop":
            _reply("302 Found", {"Location": "/loop"})(conn, request)
        elif path == "/away":
            _reply("301 Moved", {"Location": "/there"})(conn, request)
        elif path == "/file":
            _reply("302 Found", {"Location": "file:///etc/passwd"})(conn, request)
        else:
            _reply("200 OK", {}, path.encode())(conn, request)
    with _server(answer) as url:
        got = net.fetch(url + "/away")
        assert (got.body, got.url) == (b"/there", url + "/there")
        for path, why in (("/loop", "more than"), ("/file", "not an http(s) URL")):
            with pytest.raises(net.FetchError) as err:
                net.fetch(url + path, deadline_s=10)
            assert err.value.kind == "redirect" and why in err.value.message
        with pytest.raises(net.FetchError) as err:
            net.fetch(url + "/there", https_only=True)
        assert err.value.kind == "redirect" and "not https" in err.value.message


def test_no_answer_is_a_network_error_with_the_credentials_masked():
    with pytest.raises(net.FetchError) as err:
        net.fetch("http://user:secret@127.0.0.1:9/simple/", deadline_s=5)
    assert err.value.kind == "network" and "secret" not in err.value.message and "secret" not in err.value.url


@pytest.mark.slow
def test_a_fetcher_is_reused_and_cut_connections_are_not():
    """One Fetcher asks many times over its pool; after a cut (a deadline) the next exchange still works."""
    calls = []

    def answer(conn, request) -> None:
        calls.append(request.split(b" ")[1])
        if request.split(b" ")[1] == b"/slow":
            time.sleep(3)
        _reply("200 OK", {}, b"ok")(conn, request)
    with _server(answer) as url:
        fetcher = net.Fetcher(deadline_s=0.5)
        assert fetcher.fetch(url + "/a").body == b"ok"
        with pytest.raises(net.FetchError):
            fetcher.fetch(url + "/slow")
        assert fetcher.fetch(url + "/b").body == b"ok"
        fetcher.close()


@pytest.mark.slow
def test_a_redirect_from_https_to_http_is_refused(tmp_path, monkeypatch):
    """A TLS server (a throwaway self-signed certificate, trusted through REQUESTS_CA_BUNDLE) that redirects to
    plain http: refused on that hop, https_only or not; the http server is never asked."""
    import ssl
    import subprocess

    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(cert), str(key))
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(cert))
    asked: list[bytes] = []

    def plain(conn, request) -> None:
        asked.append(request)
        _reply("200 OK", {}, b"downgraded")(conn, request)

    with _server(plain) as http_url:
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)

        def serve() -> None:
            while True:
                try:
                    raw, _ = listener.accept()
                except OSError:
                    return
                try:
                    with ctx.wrap_socket(raw, server_side=True) as conn:
                        path = conn.recv(65536).split(b" ")[1]
                        where = f"{http_url}/x" if path == b"/down" else "/ok"
                        body = b"fine" if path == b"/ok" else b""
                        status = "200 OK" if path == b"/ok" else "302 Found"
                        _reply(status, {"Location": where} if body == b"" else {}, body)(conn, b"")
                except (OSError, ssl.SSLError):
                    continue
        threading.Thread(target=serve, daemon=True).start()
        https_url = f"https://127.0.0.1:{listener.getsockname()[1]}"
        try:
            assert net.fetch(https_url + "/same", https_only=True, deadline_s=10).body == b"fine"
            for https_only in (False, True):
                with pytest.raises(net.FetchError) as err:
                    net.fetch(https_url + "/down", https_only=https_only, deadline_s=10)
                assert err.value.kind == "redirect" and "a redirect from https" in err.value.message
        finally:
            listener.close()
    assert asked == []
