"""cudamatrix.net.fetch against real loopback servers over http and https (tests/hostileserver.py): every redirect
hop's scheme is checked (https only unless http is allowed), a dripping server is cut off on time (in its body and
in its headers), a body past the byte cap is refused with memory bounded, and a good server still answers."""
from __future__ import annotations

import time
import tracemalloc

import pytest
from hostileserver import HostileServer, free_port, self_signed

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
