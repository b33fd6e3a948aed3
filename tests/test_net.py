"""cudamatrix.net.fetch against real loopback servers over http and https (tests/support/hostileserver.py): every redirect
hop's scheme is checked (https only unless http is allowed), a dripping server is cut off on time (in its body and
in its headers), a body past the byte cap is refused with memory bounded, and a good server still answers. Also what the install's fetchability check needs: a HEAD request, one total deadline
for the whole exchange, an HTTP error returned as an answer, a CA bundle of its own, a cut connection not reused."""
from __future__ import annotations

import contextlib
import socket
import time
import tracemalloc

import pytest
from support.hostileserver import HostileServer, RawServer, free_port, self_signed

from cudamatrix import net


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    return self_signed(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def trusted(cert, monkeypatch):
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(cert[0]))
    return cert


def test_a_good_https_server_answers(trusted):
    with HostileServer("ok", tls=True, cert=trusted) as good:
        got = net.fetch(good.url + "/simple/x/")
    assert got.status == 200 and got.body.startswith(b'{"meta"') and got.hops == ()
    assert got.header("content-type") == "application/vnd.pypi.simple.v1+json"


def test_an_https_redirect_to_http_is_refused_and_not_followed(trusted):
    with HostileServer("ok") as plain, HostileServer("redirect", tls=True, cert=trusted, target="") as hostile:
        hostile.target = plain.url
        with pytest.raises(net.NetError) as err:
            net.fetch(hostile.url + "/simple/x/")
        assert plain.requests == []  # never asked
    assert err.value.message == (f"{hostile.url}/simple/x/ redirects to {plain.url}/simple/x/: not an https URL; "
                                 "the redirect is not followed")


def test_every_hop_is_checked_not_only_the_first(trusted):
    """Two https hops on the same server, then http: refused at the third."""
    with HostileServer("ok") as plain, HostileServer("redirect", tls=True, cert=trusted, hops=2) as hostile:
        hostile.target = plain.url
        with pytest.raises(net.NetError, match="/hop/2/simple/x/ redirects to http://"):
            net.fetch(hostile.url + "/simple/x/")
        assert plain.requests == [] and hostile.requests == ["/simple/x/", "/hop/1/simple/x/", "/hop/2/simple/x/"]


def test_https_redirects_are_followed(trusted):
    with HostileServer("ok", tls=True, cert=trusted) as good, \
            HostileServer("redirect", tls=True, cert=trusted, hops=1, status=307) as hop:
        hop.target = good.url
        got = net.fetch(hop.url + "/simple/x/")
    assert got.status == 200 and got.url == good.url + "/simple/x/"
    assert got.hops == (hop.url + "/simple/x/", hop.url + "/hop/1/simple/x/")


def test_allow_http_lets_http_hops_through(trusted):
    """A user who allows http may get http, on any hop; without it the first URL itself is refused."""
    with HostileServer("ok") as plain, HostileServer("redirect", tls=True, cert=trusted) as hop:
        hop.target = plain.url
        got = net.fetch(hop.url + "/simple/x/", allow_http=True)
        assert got.status == 200 and got.url == plain.url + "/simple/x/"
        with pytest.raises(net.NetError, match="not an https URL"):
            net.fetch(plain.url + "/simple/x/")
        assert plain.requests == ["/simple/x/"]


@pytest.mark.parametrize("where", ["file:///etc/passwd", "ftp://127.0.0.1/x", "data:,hello"])
def test_a_redirect_to_another_scheme_is_refused_even_with_http_allowed(where):
    with HostileServer("redirect", target=where) as hop:
        with pytest.raises(net.NetError, match="not an https or http URL"):
            net.fetch(hop.url, allow_http=True)


def test_a_redirect_loop_ends():
    with HostileServer("loop") as hop:
        with pytest.raises(net.NetError, match="more than 10 redirects"):
            net.fetch(hop.url + "/x", allow_http=True)
    assert len(hop.requests) == 11


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["drip-body", "drip-head"])
@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
def test_a_dripping_server_is_cut_off_on_time(mode, tls, cert, monkeypatch):
    """One byte a second (200 bytes of body, or the status line and headers): cut off after the 2 s budget, not
    after the whole drip (a socket timeout alone never fires: every read gets a byte within it)."""
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(cert[0]))
    with HostileServer(mode, tls=tls, cert=cert) as drip:
        start = time.monotonic()
        with pytest.raises(net.NetError) as err:
            net.fetch(drip.url + "/simple/x/", allow_http=True, grace_s=2.0)
        took = time.monotonic() - start
    assert took < 5, took
    assert err.value.message.endswith("(every request gets 2 s and one more per 256 KiB received): cut off")


@pytest.mark.slow
def test_a_kept_alive_connection_is_cut_off_too(trusted):
    """The second request reuses the first one's connection (no new socket is made): its drip is cut off as well."""
    client = net.session()
    with HostileServer("ok-then-drip", tls=True, cert=trusted) as drip:
        assert net.fetch(drip.url + "/a", client=client, grace_s=2.0).status == 200
        start = time.monotonic()
        with pytest.raises(net.NetError, match="cut off"):
            net.fetch(drip.url + "/b", client=client, grace_s=2.0)
    assert time.monotonic() - start < 5 and drip.requests == ["/a", "/b"]


@pytest.mark.slow
@pytest.mark.parametrize("with_length", [True, False], ids=["content-length", "no-length"])
def test_a_body_past_the_cap_is_refused_with_memory_bounded(with_length, trusted):
    with HostileServer("huge", tls=True, cert=trusted, size=64 << 20, with_length=with_length) as huge:
        tracemalloc.start()
        try:
            with pytest.raises(net.NetError) as err:
                net.fetch(huge.url + "/simple/x/", max_bytes=4 << 20)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 16 << 20, peak
    said = "the answer is 64 MiB, over the 4 MiB" if with_length else "the answer is over the 4 MiB"
    assert said in err.value.message


def test_an_unreachable_server_is_a_net_error():
    with pytest.raises(net.NetError, match="ConnectionError"):
        net.fetch(f"https://127.0.0.1:{free_port()}/simple/")


def test_the_body_of_other_statuses_is_not_read(trusted):
    with HostileServer("endless", tls=True, cert=trusted) as endless:
        got = net.fetch(endless.url + "/x", read_body=())
    assert got.status == 200 and got.body == b""


@pytest.mark.parametrize("url, shown", [
    ("https://user:secret@host.example:8443/simple", "https://host.example:8443/simple"),
    ("https://host.example/simple", "https://host.example/simple"),
    ("https://u:p@[::1/simple", "<an unparsable URL>"),
])
def test_redact(url, shown):
    assert net.redact(url) == shown


def test_credentials_never_reach_a_refusal(trusted):
    with HostileServer("redirect", tls=True, cert=trusted, target="http://user:TOKEN@127.0.0.1:9") as hop:
        with pytest.raises(net.NetError) as err:
            net.fetch(hop.url.replace("https://", "https://me:TOKEN@") + "/x")
    assert "TOKEN" not in err.value.message and "http://127.0.0.1:9/x" in err.value.message


@contextlib.contextmanager
def _raw(answer):
    """Loopback http: each connection's request is read, then ``answer(conn, request)`` writes what it will
    (tests/support/hostileserver.RawServer); yields the URL and the request lines asked."""
    with RawServer(answer) as server:
        yield server.url, server.asked


def _reply(status: str, headers: dict[str, str], body: bytes = b""):
    def answer(conn, request) -> None:
        head = "".join(f"{k}: {v}\r\n" for k, v in {"Content-Length": str(len(body)), "Connection": "close",
                                                       **headers}.items())
        conn.sendall(f"HTTP/1.1 {status}\r\n{head}\r\n".encode() + body)
    return answer


def test_a_head_request_tells_the_length_and_reads_no_body():
    """A HEAD's Content-Length of 1 GiB is what the caller asked for (a file's size), not a body over the cap."""
    with _raw(_reply("200 OK", {"Content-Length": str(1 << 30)})) as (url, asked):
        got = net.fetch(url + "/f.whl", method="HEAD", allow_http=True, max_bytes=1 << 20)
    assert (got.status, got.header("content-length"), got.body) == (200, str(1 << 30), b"")
    assert asked == [b"HEAD /f.whl HTTP/1.1"]


def test_an_http_error_is_an_answer_not_an_error():
    with _raw(_reply("404 Not Found", {}, b"no such project")) as (url, _):
        got = net.fetch(url + "/simple/x/", allow_http=True, read_body=(200, 404))
    assert (got.status, got.body) == (404, b"no such project")
    with _raw(_reply("503 Service Unavailable", {}, b"busy")) as (url, _):
        assert net.fetch(url + "/simple/x/", allow_http=True).status == 503


def _drip_headers(conn, request) -> None:
    for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 10_000:
        conn.sendall(bytes([byte]))
        time.sleep(0.05)


def _drip_body(conn, request) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
    for _ in range(100_000):
        conn.sendall(b"x" * 64)  # 1.3 KB/s: would earn time forever under no deadline of 1 s
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize("answer", [_drip_headers, _drip_body], ids=["headers", "body"])
def test_a_total_deadline_cuts_a_dripping_server_off_within_it(answer):
    """A byte every 50 ms never trips a socket timeout, and the grace (10 s here) would let it run on: the total
    deadline of 1 s covers the whole exchange, headers and body."""
    with _raw(answer) as (url, _):
        start = time.monotonic()
        with pytest.raises(net.NetError) as err:
            net.fetch(url, allow_http=True, grace_s=10.0, min_rate=1, deadline_s=1.0)
        took = time.monotonic() - start
    assert 0.9 < took < 2.5, took
    assert err.value.exit_code == 2 and err.value.message.endswith("(the whole exchange gets 1 s): cut off")


@pytest.mark.slow
def test_a_client_is_reused_and_a_cut_connection_is_not():
    """One session asks many times over its pool; after a cut (a deadline) the next exchange still works."""
    def answer(conn, request) -> None:
        if request.split(b" ")[1] == b"/slow":
            time.sleep(3)
        _reply("200 OK", {}, b"ok")(conn, request)
    client = net.session()
    with _raw(answer) as (url, asked):
        assert net.fetch(url + "/a", client=client, allow_http=True, deadline_s=0.5).body == b"ok"
        with pytest.raises(net.NetError, match="cut off"):
            net.fetch(url + "/slow", client=client, allow_http=True, deadline_s=0.5)
        assert net.fetch(url + "/b", client=client, allow_http=True, deadline_s=0.5).body == b"ok"
    assert [a.split(b" ")[1] for a in asked] == [b"/a", b"/slow", b"/b"]


def test_a_session_trusts_the_ca_bundle_it_is_given(cert, monkeypatch):
    """``verify``: a CA bundle of the caller's (pip's ``cert``) instead of the environment's settings."""
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    with HostileServer("ok", tls=True, cert=cert) as good:
        with pytest.raises(net.NetError, match="SSLError"):
            net.fetch(good.url + "/simple/x/", client=net.session())
        assert net.fetch(good.url + "/simple/x/", client=net.session(verify=str(cert[0]))).status == 200


def test_no_answer_is_an_error_with_the_credentials_masked():
    with pytest.raises(net.NetError) as err:
        net.fetch(f"http://user:secret@127.0.0.1:{free_port()}/simple/", allow_http=True, deadline_s=5)
    assert "secret" not in err.value.message and "ConnectionError" in err.value.message


@pytest.mark.slow
def test_a_total_deadline_holds_while_the_name_lookup_hangs(monkeypatch):
    """A resolver that holds the lookup (no socket yet, so none to shut down): the caller gets its error at the
    deadline, not when the lookup ends. The system resolver is replaced by one that sleeps: nothing else can hang
    a lookup on loopback."""
    def held(*args, **kwargs):
        time.sleep(6)
        raise socket.gaierror("held")
    monkeypatch.setattr(socket, "getaddrinfo", held)
    start = time.monotonic()
    with pytest.raises(net.NetError) as err:
        net.fetch("http://user:secret@index.invalid/simple/", allow_http=True, deadline_s=1.0)
    took = time.monotonic() - start
    assert took < 3, took
    assert err.value.message == ("http://index.invalid/simple/: no connection within 1 s (the whole exchange gets "
                                 "1 s; the host name's lookup did not end): cut off")
