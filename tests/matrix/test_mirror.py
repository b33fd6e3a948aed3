"""`matrix update --mirror URL` and the index client against hostile mirrors on loopback (http and https, the
servers of tests/support/hostileserver.py and tests/support/localindex.py): a redirect to http on any hop is refused and the overlay
is not written; a dripping index is cut off on time; a huge listing, JSON nested 100,000 deep, a pathological HTML
page and a broken wheel are refused with a message (exit 2, no traceback, overlay untouched); a good mirror, reached
directly or through https redirects, still works. http is read only where the user chose it."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from support.fakes import run_cli
from support.hostileserver import HostileServer, free_port
from support.localindex import LocalIndex, build_wheel

from cudamatrix.matrix import index as idx

PLUGIN_REQS = ["jax-cuda12-pjrt==99.0.0",
               'nvidia-cuda-runtime-cu12>=12.1.105; sys_platform == "linux" and extra == "with-cuda"']


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> Path:
    """jax 99.0.0 (a release the shipped data lacks), its jaxlib and CUDA plugin."""
    folder = tmp_path_factory.mktemp("mirror") / "wheels"
    build_wheel(folder, "jax", "99.0.0", requires=["jaxlib<=99.0.0,>=99.0.0"], requires_python=">=3.12")
    build_wheel(folder, "jaxlib", "99.0.0", tag="cp312-cp312-manylinux_2_27_x86_64")
    build_wheel(folder, "jax_cuda12_plugin", "99.0.0", tag="cp312-cp312-manylinux_2_27_x86_64", requires=PLUGIN_REQS)
    return folder


@pytest.fixture(scope="module")
def good(wheels):
    """The good mirror over https (its certificate is the one every hostile https server here reuses)."""
    with LocalIndex(wheels, json_api=True, ranges=True, tls=True) as index:
        yield index


@pytest.fixture(scope="module")
def plain(wheels):
    """The same wheels over plain http: where a downgrading redirect would lead."""
    with LocalIndex(wheels, json_api=True, ranges=True) as index:
        yield index


@pytest.fixture
def cert(good):
    return good.cafile, good.cafile.parent / good.cafile.name.replace("-cert", "-key")


def update(tmp_path: Path, good, url: str) -> tuple[int, dict, str, Path]:
    """`matrix update --mirror URL --json` in this process: (exit code, envelope, stderr, overlay folder)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update({"XDG_CACHE_HOME": str(tmp_path / "cache"), "REQUESTS_CA_BUNDLE": str(good.cafile),
                "PIP_CONFIG_FILE": os.devnull})
    out = run_cli(["matrix", "update", "--mirror", url, "--json"], env=env, text=True)
    return out.returncode, json.loads(out.stdout), out.stderr, tmp_path / "cache" / "cudamatrix" / "overlay"


def refused(tmp_path: Path, good, url: str) -> str:
    """The message of a refused update: exit 2, one error, no traceback, no overlay written."""
    code, doc, err, folder = update(tmp_path, good, url)
    assert code == 2 and doc["exit_code"] == 2 and "Traceback" not in err, (code, doc, err)
    assert not folder.exists()
    [error] = doc["errors"]
    assert error["type"] == "IndexReadError"
    return error["message"]


@pytest.mark.slow
def test_a_good_mirror_still_works_directly_and_through_https_redirects(tmp_path, good, cert):
    code, doc, _err, folder = update(tmp_path / "direct", good, good.url + "/simple")
    assert code == 0 and doc["data"]["added"]["jax"] == ["99.0.0"] and (folder / "overlay.json").is_file()
    with HostileServer("redirect", tls=True, cert=cert, target=good.url, hops=1) as hop:
        code, doc, _err, folder = update(tmp_path / "hops", good, hop.url + "/simple")
    assert code == 0 and doc["data"]["added"]["jax"] == ["99.0.0"] and (folder / "overlay.json").is_file()
    assert doc["data"]["index"] == hop.url + "/simple"


@pytest.mark.slow
@pytest.mark.parametrize("hops", [0, 2], ids=["first-hop", "third-hop"])
def test_an_https_mirror_that_redirects_to_http_is_refused_and_the_overlay_untouched(tmp_path, good, plain, cert,
                                                                                     hops):
    served = len(plain.served)
    with HostileServer("redirect", tls=True, cert=cert, target=plain.url, hops=hops) as hop:
        message = refused(tmp_path, good, hop.url + "/simple")
    assert message.endswith(f"redirects to {plain.url}/simple/torch/: not an https URL; the redirect is not followed")
    assert len(plain.served) == served  # the http index was never asked


@pytest.mark.slow
def test_an_earlier_overlay_survives_a_refused_update(tmp_path, good, plain, cert):
    code, _doc, _err, folder = update(tmp_path, good, good.url + "/simple")
    before = (folder / "overlay.json").read_bytes()
    with HostileServer("redirect", tls=True, cert=cert, target=plain.url) as hop:
        code, doc, _err, folder = update(tmp_path, good, hop.url + "/simple")
    assert code == 2 and (folder / "overlay.json").read_bytes() == before
    assert doc["errors"][0]["hint"].startswith("an index is read over https only, on every redirect: the shipped matrix")


@pytest.mark.slow
def test_a_dripping_mirror_is_cut_off_within_15_seconds(tmp_path, good, cert):
    """200 bytes of listing at one byte a second (the socket timeout never fires): the CLI's own budget
    (10 s before the first byte of body) ends it."""
    with HostileServer("drip-body", tls=True, cert=cert) as drip:
        start = time.monotonic()
        message = refused(tmp_path, good, drip.url + "/simple")
        took = time.monotonic() - start
    assert took < 15, took
    assert message.startswith(f"{drip.url}/simple/torch/: no complete answer within 1") and "cut off" in message
    code, doc, _err, _folder = update(tmp_path, good, f"https://127.0.0.1:{free_port()}/simple")
    assert code == 2 and doc["errors"][0]["hint"].startswith("offline or the index failed: the shipped matrix")


@pytest.mark.slow
@pytest.mark.parametrize("with_length", [True, False], ids=["content-length", "no-length"])
def test_a_huge_listing_is_refused(tmp_path, good, cert, with_length):
    with HostileServer("huge", tls=True, cert=cert, size=40 << 20, with_length=with_length) as huge:
        message = refused(tmp_path, good, huge.url + "/simple")
    assert message.startswith(f"{huge.url}/simple/torch/: the answer is ")
    assert "over the 32 MiB this read allows" in message


@pytest.mark.slow
def test_a_listing_nested_100k_deep_is_refused_without_a_recursion_error(tmp_path, good, cert):
    with HostileServer("nested", tls=True, cert=cert) as nested:
        message = refused(tmp_path, good, nested.url + "/simple")
    assert message == f"{nested.url}/simple/torch/: the JSON listing does not parse (nested too deeply)"


# --- the client in this process --------------------------------------------------------------------------------

def test_an_http_index_the_user_chose_may_redirect_through_https_and_back(good, plain, cert, monkeypatch):
    """http is read where the user named an http index (pip's own configuration, a script's --index-url); an https
    index is never downgraded, with or without https_only."""
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(good.cafile))
    with HostileServer("redirect", tls=True, cert=cert, target=plain.url) as to_http, \
            HostileServer("redirect", target=to_http.url) as to_https:
        files = idx.IndexClient(to_https.url + "/simple").project("jax")
        assert [f.filename for f in files] == ["jax-99.0.0-py3-none-any.whl"]
        for https_only in (False, True):
            with pytest.raises(idx.IndexReadError, match="redirects to http://.*: not an https URL"):
                idx.IndexClient(to_http.url + "/simple", https_only=https_only).project("jax")
    with pytest.raises(idx.IndexReadError, match="not an https URL"):
        idx.IndexClient(plain.url + "/simple", https_only=True)


def test_a_downgrade_on_a_wheel_read_is_refused_too(good, plain, cert, monkeypatch):
    """The listing is good; the wheel's URL redirects to http: the range read is refused like the listing."""
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(good.cafile))
    client = idx.IndexClient(good.url + "/simple", https_only=True)
    [wheel] = client.project("jaxlib")
    with HostileServer("redirect", tls=True, cert=cert, target=plain.url) as hop:
        moved = idx.IndexFile(**{**wheel.__dict__, "url": hop.url + "/files/" + wheel.filename})
        with pytest.raises(idx.IndexReadError, match="redirects to http://"):
            client.metadata(moved)
    assert client.metadata(wheel).name == "jaxlib"


@pytest.mark.slow
def test_a_dripping_index_is_cut_off_by_the_clients_timeout(good, cert, monkeypatch):
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(good.cafile))
    with HostileServer("drip-head", tls=True, cert=cert) as drip:
        start = time.monotonic()
        with pytest.raises(idx.IndexReadError, match="no complete answer within 2 s"):
            idx.IndexClient(drip.url + "/simple", timeout=2).exists("torch")
    assert time.monotonic() - start < 5


@pytest.mark.parametrize("doc", [
    {"files": 5}, {"files": "abc"}, {"files": {"a": 1}}, {"files": [None, 1, "x", []]},
    {"files": [{"filename": "jax-1.0-py3-none-any.whl", "url": "http://[::1/x"}]},
    {"files": [{"filename": "jax-1.0-py3-none-any.whl", "url": 7}]},
    {"files": [{"filename": "jax-1.0-py3-none-any.whl", "url": "/x", "requires-python": ["3"], "size": True,
                "core-metadata": {"sha256": ["a"]}, "yanked": {"x": 1}}]},
])
def test_a_json_listing_of_any_shape_lists_only_well_formed_files(doc):
    files = idx.parse_json_listing("jax", doc, "https://mirror.example/simple/jax/")
    assert all(f.requires_python in (None, ">=3") and f.metadata_sha256 is None and f.size is None for f in files)
    assert [f.url for f in files] in ([], ["https://mirror.example/x"])


@pytest.mark.parametrize("page", [
    "<a " * 30_000, "<a" + " " * 30_000, "<a href=" + "x" * 30_000, '<a href="' + "a" * 30_000 + ">",
    "<a data-x=" * 10_000, "<A\tHREF='x'>" * 10_000, "<a " + "href" * 10_000 + ">x</a>", '<a href="x"><b>jax-1.0-py3-none-any.whl</b></a>',
])
def test_a_pathological_html_page_is_refused_in_linear_time(page):
    start = time.monotonic()
    with pytest.raises(idx.IndexReadError, match=r"^the HTML listing does not parse: \d+ of its \d+ <a> tags are not "):
        idx.parse_html_listing("jax", page * 10, "https://mirror.example/simple/jax/")
    assert time.monotonic() - start < 1


@pytest.mark.parametrize("page, urls", [
    ("<a " + "href" * 1000 + ">x</a>", []),  # an anchor without an href: nothing listed
    ('<a href="http://[::1/x">jax-1.0-py3-none-any.whl</a>', []),  # not a URL: not a file
    ("<a>jax-1.0-py3-none-any.whl</a>", []),
    ("<html><a\nhref='/f/jax-1.0-py3-none-any.whl#sha256=00' data-yanked>jax-1.0-py3-none-any.whl</a></html>",
     ["https://mirror.example/f/jax-1.0-py3-none-any.whl#sha256=00"]),
])
def test_a_page_of_whole_anchors_is_read(page, urls):
    start = time.monotonic()
    assert [f.url for f in idx.parse_html_listing("jax", page * 1000, "https://mirror.example/simple/jax/")] \
        == urls * 1000
    assert time.monotonic() - start < 2


@pytest.mark.slow
def test_a_pathological_html_listing_is_refused_and_the_overlay_untouched(tmp_path, good, cert):
    with HostileServer("html-bomb", tls=True, cert=cert) as bomb:
        message = refused(tmp_path, good, bomb.url + "/simple")
    assert message == (f"{bomb.url}/simple/torch/: the HTML listing does not parse: 30001 of its 30001 <a> tags "
                       "are not whole anchors (<a href=...>name</a>)")


@pytest.mark.parametrize("wheel, said", [
    (b"PK\x05\x06", "not a readable wheel (error: unpack requires a buffer of 8 bytes)"),
    (b"no zip here", "not a zip file (no end of central directory)"),
])
def test_a_broken_wheel_is_refused_with_its_name(tmp_path, wheel, said, monkeypatch):
    folder = tmp_path / "w"
    folder.mkdir()
    (folder / "jax-1.0-py3-none-any.whl").write_bytes(wheel)
    with LocalIndex(folder, ranges=True) as index:
        client = idx.IndexClient(index.url + "/simple")
        [f] = client.project("jax")
        with pytest.raises(idx.IndexReadError) as err:
            client.members(f)
    assert said in err.value.message


def test_a_zip_bomb_member_is_not_inflated_past_the_cap(tmp_path, monkeypatch):
    import zipfile

    folder = tmp_path / "w"
    folder.mkdir()
    with zipfile.ZipFile(folder / "jax-1.0-py3-none-any.whl", "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("jax-1.0.dist-info/METADATA", b"\0" * (4 << 20))
    monkeypatch.setattr(idx, "MEMBER_MAX", 1 << 20)
    with LocalIndex(folder, ranges=True) as index:
        client = idx.IndexClient(index.url + "/simple")
        [f] = client.project("jax")
        with pytest.raises(idx.IndexReadError, match="over 1048576 bytes uncompressed"):
            client.member(f, "METADATA")


def test_an_unreachable_mirror_is_an_index_read_error():
    with pytest.raises(idx.IndexReadError, match="ConnectionError"):
        idx.IndexClient(f"https://127.0.0.1:{free_port()}/simple").project("torch")


def test_a_build_info_with_malformed_capabilities_keeps_only_the_well_formed_ones():
    from cudamatrix.matrix.discover import parse_tf_build_info

    text = "'cuda_version', '12.2'\n'cuda_compute_capabilities', ['sm_', 'compute_', 'x', 'sm_90a', 'compute_80']"
    assert parse_tf_build_info(text) == {"cuda": "12.2", "cudnn": None, "archs": ["9.0a"], "ptx": ["8.0"]}
