"""The disk-space measure of a plan (cudamatrix.install.resources) in this process: wheel sizes from a real
loopback index (PEP 691 JSON sizes, PEP 503 HTML with a HEAD's Content-Length), RECORD sizes of the
distributions a plan replaces, the indexes a step names, the installer's cache folder, and the refusal's words.
(tests/install/test_journal.py has the first space-check tests, against a whole plan.)"""
from __future__ import annotations

import contextlib
import json
import os
import socket
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from support.hostileserver import HostileServer, RawServer, self_signed
from support.localindex import LocalIndex, build_wheel

from cudamatrix.install import resources
from cudamatrix.models import Environment, Plan, PythonInfo, Removal, Step

TAGS = ["cp312-cp312-manylinux_2_28_x86_64", "cp312-abi3-manylinux_2_17_x86_64", "py3-none-any"]
REAL_CONFIGURED = resources.configured


@pytest.fixture(autouse=True)
def _no_pip_config(monkeypatch):
    """pip's configuration is not asked (a subprocess) unless a test puts the real function back."""
    monkeypatch.setattr(resources, "configured", lambda python: resources.Configured())


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> Path:
    """torch 2.5.1+cu121 for three tags (sizes told apart by their payload), torch 2.5.10 (a longer version with the
    same start) with the best tag, and my_pkg 1.0 (a name written with - and _)."""
    folder = tmp_path_factory.mktemp("sizes") / "wheels"
    for tag, n in (("py3-none-any", 1000), ("cp312-abi3-manylinux_2_17_x86_64", 30_000),
                   ("cp312-cp312-manylinux_2_28_x86_64", 60_000), ("cp311-cp311-manylinux_2_28_x86_64", 90_000)):
        build_wheel(folder, "torch", "2.5.1+cu121", tag=tag, files={"torch/big.bin": "x" * n})
    build_wheel(folder, "torch", "2.5.10", tag=TAGS[0], files={"torch/big.bin": "y" * 120_000})
    build_wheel(folder, "my_pkg", "1.0", files={"my_pkg/big.bin": "z" * 5000})
    return folder


def _wheel(folder: Path, start: str) -> Path:
    [path] = [p for p in folder.iterdir() if p.name.startswith(start)]
    return path


@pytest.mark.slow
@pytest.mark.parametrize("json_api", [True, False], ids=["json", "html"])
def test_file_size_is_the_best_tags_wheel_of_that_exact_version(wheels, json_api):
    best = _wheel(wheels, f"torch-2.5.1+cu121-{TAGS[0]}").stat().st_size
    abi3 = _wheel(wheels, f"torch-2.5.1+cu121-{TAGS[1]}").stat().st_size
    pure = _wheel(wheels, "torch-2.5.1+cu121-py3-none-any").stat().st_size
    assert len({best, abi3, pure}) == 3
    with LocalIndex(wheels, json_api=json_api) as index:
        simple = index.url + "/simple"
        assert resources.file_size(simple, "torch", "2.5.1+cu121", TAGS) == best
        assert resources.file_size(simple + "/", "Torch", "2.5.1+CU121", TAGS[1:]) == abi3
        assert resources.file_size(simple, "torch", "2.5.1+cu121", ["py3-none-any"]) == pure
        # no tag of the list matches: still a wheel of that version (the first listed: the index sorts them), not None
        assert resources.file_size(simple, "torch", "2.5.1+cu121", ["cp39-cp39-win_amd64"]) == \
            _wheel(wheels, "torch-2.5.1+cu121-cp311").stat().st_size
        assert resources.file_size(simple, "torch", "2.5.10", TAGS) == _wheel(wheels, "torch-2.5.10").stat().st_size
        assert resources.file_size(simple, "my-pkg", "1.0", TAGS) == _wheel(wheels, "my_pkg-1.0").stat().st_size
        dead: set[str] = set()
        assert resources.file_size(simple, "torch", "9.9.9", TAGS, dead) is None  # listed project, no such version
        assert resources.file_size(simple, "absent", "1.0", TAGS, dead) is None  # an HTTP 404 is an answer
        assert dead == set()


def test_an_index_that_does_not_answer_is_not_asked_again():
    dead: set[str] = set()
    nobody = "http://127.0.0.1:9/simple"  # nothing listens on the discard port here
    assert resources.file_size(nobody, "torch", "2.5.1", TAGS, dead) is None
    assert dead == {nobody}
    assert resources.file_size(nobody, "torch", "2.5.1", TAGS, {nobody}) is None


def test_installed_size_sums_the_sizes_record_lists(tmp_path: Path):
    info = tmp_path / "torch-2.5.1.dist-info"
    info.mkdir()
    (info / "RECORD").write_text("torch/a.py,sha256=x,100\ntorch/b.so,sha256=y,2500\n"
                                 "torch-2.5.1.dist-info/RECORD,,\n\"torch/c, d.py\",sha256=z,7\nshort,row\n"
                                 "torch/e.pyc,,-5\n")
    assert resources.installed_size(str(info)) == 2607
    assert resources.installed_size(None) == resources.installed_size("") == 0
    assert resources.installed_size(str(tmp_path / "absent.dist-info")) == 0


def test_the_installers_cache_folder():
    assert resources.cache_dir("pip", {"PIP_CACHE_DIR": "/c/pip", "UV_CACHE_DIR": "/c/uv"}) == "/c/pip"
    assert resources.cache_dir("uv", {"PIP_CACHE_DIR": "/c/pip", "UV_CACHE_DIR": "/c/uv"}) == "/c/uv"
    assert resources.cache_dir("uv", {"XDG_CACHE_HOME": "/x", "PIP_CACHE_DIR": "/c/pip"}) == "/x/uv"
    assert resources.cache_dir("pip", {"XDG_CACHE_HOME": "/x", "UV_CACHE_DIR": "/c/uv"}) == "/x/pip"
    home = os.path.expanduser("~")
    assert resources.cache_dir("pip", {"XDG_CACHE_HOME": ""}) == os.path.join(home, ".cache", "pip")


def test_sizes_print_in_gb_from_a_tenth_of_one():
    assert resources.gb(100_000_000) == "0.10 GB"
    assert resources.gb(99_999_999) == "100.0 MB"
    assert resources.gb(2_345_000_000) == "2.35 GB" and resources.gb(0) == "0.0 MB"
    assert resources.gb(1_550_000) == "1.6 MB" and resources.gb(99_950_000) == "100.0 MB"


def _env(site: Path, packages: dict[str, str] | None = None) -> Environment:
    return Environment(python=PythonInfo(site_packages=[str(site)], tags=TAGS), packages=packages or {})


def _asked(monkeypatch, sizes: dict[tuple[str, str], int | None], listed: bool = True) -> list[tuple]:
    """``resources.find`` replaced: ``sizes`` says which index lists which project, and its size."""
    calls: list[tuple] = []

    def find(index, name, version, tags, dead=None, client=None):
        calls.append((index, name, version))
        if (index, name) in sizes:
            return resources.Found(listed=True, size=sizes[(index, name)])
        return resources.Found(listed=listed)
    monkeypatch.setattr(resources, "find", find)
    return calls


NO_CONFIG = resources.Configured()  # pip's configuration files say nothing, and no default index is known


def test_measure_asks_every_index_the_installer_reads_until_one_tells(tmp_path: Path, monkeypatch):
    """pip reads the last --index-url of its command line (not PIP_INDEX_URL then), and every extra index; uv's
    variables are not pip's."""
    from cudamatrix.install.journal import state_root

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    calls = _asked(monkeypatch, {("https://b.invalid/simple", "torch"): 1_000_000,
                                 ("https://a.invalid/simple", "numpy"): 50_000}, listed=False)
    argv = ["pip", "install", "--index-url=https://a.invalid/simple", "-i", "https://b.invalid/simple",
            "--extra-index-url", "https://a.invalid/simple", "--extra-index-url", "file:///local",
            "--extra-index-url", "https://e.invalid/simple",
            "torch[cuda]==2.5.1+cu121", "numpy==2.0.0", "setuptools>=70", "jax==0.4.30", "--no-deps",
            "--extra-index-url"]
    plan = Plan(python="/p", steps=[Step(kind="install", reason="r", argv=argv)])
    environ = {"PIP_INDEX_URL": "https://c.invalid/simple https://a.invalid/simple", "PIP_CACHE_DIR": "/c/pip",
               "UV_EXTRA_INDEX_URL": "http://d.invalid/simple"}
    check = resources.measure(plan, _env(tmp_path), environ, NO_CONFIG)
    indexes = ["https://b.invalid/simple", "https://a.invalid/simple", "https://e.invalid/simple"]
    # every index in order (the chosen index, then the extra ones), each once, until one tells; jax: none tells
    assert calls == [(indexes[0], "torch", "2.5.1+cu121")] + [(i, "numpy", "2.0.0") for i in indexes[:2]] + \
        [(i, "jax", "0.4.30") for i in indexes]
    download = 1_050_000
    assert [(n.where, n.path, n.nbytes) for n in check.needs] == [
        ("site-packages", str(tmp_path), int(download * resources.UNPACK_FACTOR * resources.MARGIN)),
        ("installer cache", "/c/pip", int(download * resources.MARGIN)),
        ("temp", tempfile.gettempdir(), int(download * resources.MARGIN)),
        ("journal", str(state_root()), 0)]
    assert str(state_root()).startswith(str(tmp_path / "state"))
    assert check.unknown == ["jax==0.4.30"]
    assert check.missing == []  # a file:// index may hold it: not refused
    del argv[argv.index("file:///local") - 1: argv.index("file:///local") + 1]
    check = resources.measure(plan, _env(tmp_path), environ, NO_CONFIG)
    assert check.missing == [f"jax==0.4.30 ({', '.join(indexes)})"]


def test_measure_lists_what_no_index_sized_and_uses_uvs_cache_for_uv(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    _asked(monkeypatch, {})
    argv = ["uv", "pip", "install", "--index-url", "https://a.invalid/simple", "torch==2.5.1", "jax==0.4.30"]
    plan = Plan(python="/p", steps=[Step(kind="reinstall", reason="r", argv=argv),
                                    Step(kind="verify", reason="v", argv=["x==1"])])
    check = resources.measure(plan, _env(tmp_path), {"UV_CACHE_DIR": "/c/uv", "PIP_CACHE_DIR": "/c/pip"}, NO_CONFIG)
    assert check.unknown == ["torch==2.5.1", "jax==0.4.30"] and check.missing == []
    assert {n.where: n.path for n in check.needs}["installer cache"] == "/c/uv"
    assert all(n.nbytes == 0 for n in check.needs)
    assert resources.measure(Plan(python="/p", steps=[Step(kind="verify", reason="v", argv=["x==1"])]),
                             _env(tmp_path), {}) == resources.SpaceCheck()


def _dist_info(site: Path, name: str, size: int) -> None:
    info = site / f"{name}.dist-info"
    info.mkdir(parents=True)
    (info / "RECORD").write_text(f"{name}/x.so,sha256=a,{size}\n")


def test_the_journal_needs_the_size_of_what_the_plan_replaces_or_removes(tmp_path: Path, monkeypatch):
    """The journal saves the installed copies of the distributions the plan replaces (installed under a name it
    pins) or removes, found by their canonical name; other distributions and ~-prefixed leftovers are not saved."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    _asked(monkeypatch, {})
    site = tmp_path / "site"
    _dist_info(site, "torch-2.4.0", 1000)
    _dist_info(site, "Nvidia_Cudnn_Cu12-9.1.0.70", 300)
    _dist_info(site, "nvidia-nccl-cu12-2.20.5", 40)  # an older installer kept the name's hyphens
    _dist_info(site, "numpy-1.26.4", 70_000)  # not touched
    _dist_info(site, "~orch-2.3.0", 5_000_000)  # pip's leftover of an interrupted uninstall
    (site / "torchvision-0.19.0.dist-info").write_text("a file, not a folder")
    plan = Plan(python="/p", steps=[Step(kind="install", reason="r", argv=["pip", "install", "torch==2.5.1",
                                                                                   "nvidia-nccl-cu12==2.21.5"])],
                to_remove=[Removal(name="nvidia-cudnn-cu12")])
    env = Environment(python=PythonInfo(site_packages=[str(tmp_path / "absent"), str(site)], tags=TAGS),
                      packages={"torch": "2.4.0", "numpy": "1.26.4", "nvidia-cudnn-cu12": "9.1.0.70",
                                "nvidia-nccl-cu12": "2.20.5"})
    needs = {n.where: n for n in resources.measure(plan, env, {}).needs}
    assert needs["journal"].nbytes == int(1340 * resources.MARGIN)
    assert needs["site-packages"].path == str(site)  # the last site-packages folder
    only_removal = Plan(python="/p", to_remove=[Removal(name="numpy")])
    assert {n.where: n.nbytes for n in resources.measure(only_removal, env, {}).needs}["journal"] == \
        int(70_000 * resources.MARGIN)
    bare = Environment(python=PythonInfo(tags=TAGS))
    assert {n.where: n.path for n in resources.measure(plan, bare, {}).needs}["site-packages"] == \
        tempfile.gettempdir()


class _Vfs:
    def __init__(self, free: int) -> None:
        self.f_bavail, self.f_frsize = free // 4096, 4096


def test_the_refusal_names_each_place_with_bytes_on_the_short_file_system(tmp_path: Path, monkeypatch):
    """Places the plan writes nothing to are left out of the sentence; a folder not made yet is measured on the
    file system of its nearest existing parent (and is not made)."""
    from cudamatrix.errors import InstallFailed

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state" / "not" / "made"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp-absent"))
    _asked(monkeypatch, {("https://a.invalid/simple", "torch"): 2_000_000_000})
    plan = Plan(python="/p", steps=[Step(kind="install", reason="r",
                                         argv=["pip", "install", "-i", "https://a.invalid/simple", "torch==2.5.1"])])
    monkeypatch.setenv("PIP_CACHE_DIR", str(tmp_path / "cache-absent"))
    seen: list[str] = []
    monkeypatch.setattr(resources, "STATVFS", lambda path: seen.append(path) or _Vfs(10 ** 9))
    with pytest.raises(InstallFailed) as err:
        resources.check_space(plan, _env(tmp_path))
    assert set(seen) == {str(tmp_path)}
    site, cache = int(2e9 * resources.UNPACK_FACTOR * resources.MARGIN), int(2e9 * resources.MARGIN)
    total = site + 2 * cache
    assert err.value.message == (
        f"not enough free disk space for this plan: {resources.gb(total)} needed on one file system, "
        f"{resources.gb(10 ** 9 // 4096 * 4096)} free: site-packages {tmp_path} ({resources.gb(site)}), "
        f"installer cache {tmp_path / 'cache-absent'} ({resources.gb(cache)}), "
        f"temp {tmp_path / 'tmp-absent'} ({resources.gb(cache)})")
    assert err.value.detail["short"] == [err.value.message.split(": ", 1)[1]]
    assert [n["where"] for n in err.value.detail["needs"]] == ["site-packages", "installer cache", "temp", "journal"]
    assert not (tmp_path / "state").exists() and not (tmp_path / "cache-absent").exists()


def test_the_note_names_at_most_five_unsized_pins(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    _asked(monkeypatch, {})
    monkeypatch.setattr(resources, "STATVFS", lambda path: _Vfs(10 ** 12))

    def note(count: int) -> str | None:
        pins = [f"p{i}==1.0" for i in range(count)]
        plan = Plan(python="/p", steps=[Step(kind="install", reason="r", argv=["pip", "install", *pins])])
        return resources.check_space(plan, _env(tmp_path))

    assert note(5) == ("disk space: the index did not tell the size of p0==1.0, p1==1.0, p2==1.0, p3==1.0, p4==1.0; "
                       "free space was not compared for them")
    assert note(6) == ("disk space: the index did not tell the size of p0==1.0, p1==1.0, p2==1.0, p3==1.0, p4==1.0"
                       "...; free space was not compared for them")
    assert note(0) is None


def _wants_json(accept: str) -> bool:
    """PEP 691 content negotiation: the JSON form is served when the Accept header lists its media type
    (media types compare case-insensitively, RFC 9110 section 8.3.1; parameters such as q= are not part of it)."""
    ranges = [part.split(";")[0].strip().lower() for part in accept.split(",")]
    return "application/vnd.pypi.simple.v1+json" in ranges


@contextlib.contextmanager
def _index(routes: dict):
    """A loopback index answering ``routes`` (path -> (body, Content-Type or None[, Content-Length or None]), or a
    function of the Accept header giving that); records each request as (method, path)."""
    seen: list[tuple[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _answer(self, with_body: bool) -> None:
            seen.append((self.command, self.path))
            got = routes.get(self.path)
            if callable(got):
                got = got(self.headers.get("Accept") or "")
            if got is None:
                self.send_error(404)
                return
            body, ctype, length = (*got, str(len(got[0])))[:3]
            self.send_response(200)
            if ctype:
                self.send_header("Content-Type", ctype)
            if length is not None:
                self.send_header("Content-Length", length)
            self.end_headers()
            if with_body:
                self.wfile.write(body)

        def do_GET(self):
            self._answer(True)

        def do_HEAD(self):
            self._answer(False)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


WHEEL = "torch-2.5.1-cp312-cp312-manylinux_2_28_x86_64.whl"
PAYLOAD = b"w" * 777  # the wheel file the index serves


def _listing(accept: str, size: bool = True) -> tuple[bytes, str]:
    if _wants_json(accept):
        item = {"filename": WHEEL, "url": f"/files/{WHEEL}", "hashes": {}}
        if size:
            item["size"] = len(PAYLOAD)
        doc = {"meta": {"api-version": "1.1"}, "name": "torch", "files": [item]}
        return json.dumps(doc).encode(), "application/vnd.pypi.simple.v1+json"
    return f'<html><body><a href="/files/{WHEEL}">{WHEEL}</a></body></html>'.encode(), "text/html"


def test_a_pep_691_index_answers_the_sizes_in_one_request():
    """file_size asks for the JSON form (PEP 691) and reads the size from it: no request per file."""
    with _index({"/simple/torch/": _listing, f"/files/{WHEEL}": (PAYLOAD, "application/octet-stream")}) as (url, seen):
        assert resources.file_size(url + "/simple", "torch", "2.5.1", TAGS) == len(PAYLOAD)
        assert seen == [("GET", "/simple/torch/")]


def test_an_html_index_is_asked_the_files_length_with_a_head_request():
    """A PEP 503 HTML answer (with or without its Content-Type) lists the files; the chosen one's size is the
    Content-Length of a HEAD request (the wheel itself is not downloaded). The project URL is the index URL,
    without its trailing slash, then /<project>/ (PEP 503)."""
    html = _listing("text/html")
    routes = {"/mirrorX/torch/": html, "/bare/torch/": (html[0], None),
              f"/files/{WHEEL}": (PAYLOAD, "application/octet-stream")}
    with _index(routes) as (url, seen):
        assert resources.file_size(url + "/mirrorX/", "torch", "2.5.1", TAGS) == len(PAYLOAD)
        assert seen == [("GET", "/mirrorX/torch/"), ("HEAD", f"/files/{WHEEL}")]
        del seen[:]
        assert resources.file_size(url + "/bare", "torch", "2.5.1", TAGS) == len(PAYLOAD)
        assert seen == [("GET", "/bare/torch/"), ("HEAD", f"/files/{WHEEL}")]


def test_a_json_answer_without_sizes_or_without_files():
    """A PEP 691 1.0 answer need not carry sizes: the file's URL (relative to the listing) is asked with HEAD. An
    answer without its "files" list sizes nothing (and raises nothing)."""
    no_size = {"meta": {"api-version": "1.0"}, "name": "torch",
               "files": [{"filename": WHEEL, "url": f"../../files/{WHEEL}", "hashes": {}}]}
    no_files = {"meta": {"api-version": "1.0"}, "name": "torch"}
    ctype = "application/vnd.pypi.simple.v1+json"
    routes = {"/a/torch/": (json.dumps(no_size).encode(), ctype), "/b/torch/": (json.dumps(no_files).encode(), ctype),
              f"/files/{WHEEL}": (PAYLOAD, "application/octet-stream")}
    with _index(routes) as (url, seen):
        assert resources.file_size(url + "/a", "torch", "2.5.1", TAGS) == len(PAYLOAD)
        assert seen == [("GET", "/a/torch/"), ("HEAD", f"/files/{WHEEL}")]
        assert resources.file_size(url + "/b", "torch", "2.5.1", TAGS) is None


def test_an_index_that_accepts_and_never_answers_times_out(monkeypatch):
    """The connection is made (the listening socket's backlog takes it) but no answer comes: the request gives up
    after HTTP_TIMEOUT_S, and the index is taken as dead."""
    monkeypatch.setattr(resources, "HTTP_TIMEOUT_S", 0.2)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        silent = f"http://127.0.0.1:{listener.getsockname()[1]}/simple"
        dead: set[str] = set()
        assert resources.file_size(silent, "torch", "2.5.1", TAGS, dead) is None
        assert dead == {silent}


def test_an_index_that_hangs_up_is_asked_once_for_the_whole_plan(tmp_path: Path, monkeypatch):
    """Every pin of every step shares the list of indexes that did not answer: one that closes each connection
    without an HTTP answer is asked once, not once per pin."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    accepted: list[int] = []
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)

        def hang_up() -> None:
            while True:
                try:
                    conn, _ = listener.accept()
                except OSError:
                    return
                accepted.append(1)
                conn.close()
        thread = threading.Thread(target=hang_up, daemon=True)
        thread.start()
        index = f"http://127.0.0.1:{listener.getsockname()[1]}/simple"
        steps = [Step(kind="install", reason="r", argv=["pip", "install", "-i", index, "torch==2.5.1", "jax==0.4.30"]),
                 Step(kind="install", reason="r", argv=["pip", "install", "-i", index, "numpy==2.0.0"])]
        check = resources.measure(Plan(python="/p", steps=steps), _env(tmp_path), {})
        assert check.unknown == ["torch==2.5.1", "jax==0.4.30", "numpy==2.0.0"]
        assert accepted == [1]
        listener.shutdown(socket.SHUT_RDWR)
    thread.join(5)


def test_the_indexes_the_installer_reads_in_its_order():
    """pip: the last --index-url / -i of the command line (as "=value" or the next argument), else PIP_INDEX_URL,
    else pip.conf's, else pip's built-in default; then the extra indexes of the command line and PIP_EXTRA_INDEX_URL
    (else pip.conf's). uv: UV_DEFAULT_INDEX / UV_INDEX_URL (no pip.conf), UV_EXTRA_INDEX_URL and UV_INDEX
    ("name=URL"). Each once, http(s) only; --no-index, find-links and file: indexes are other sources."""
    environ = {"PIP_INDEX_URL": "https://p.invalid/simple", "UV_INDEX_URL": "https://u.invalid/simple",
               "UV_DEFAULT_INDEX": "https://d.invalid/simple",
               "PIP_EXTRA_INDEX_URL": "https://pe1.invalid/simple https://pe2.invalid/simple",
               "UV_EXTRA_INDEX_URL": "https://ue.invalid/simple", "UV_INDEX": "named=https://n.invalid/simple"}
    conf = resources.Configured(index_url="https://conf.invalid/simple", extra=["https://ce.invalid/simple"],
                                default="https://default.invalid/simple")
    pip = ["pip", "install", "torch==2.5.1"]
    argv = pip + ["--extra-index-url", "https://x.invalid/simple", "-i", "https://s.invalid/simple"]
    assert resources.sources(argv, environ, conf) == resources.Sources(
        ["https://s.invalid/simple", "https://x.invalid/simple", "https://pe1.invalid/simple",
         "https://pe2.invalid/simple"])
    assert resources._indexes(pip, environ, conf) == ["https://p.invalid/simple", "https://pe1.invalid/simple",
                                                      "https://pe2.invalid/simple"]
    assert resources._indexes(pip, {}, conf) == ["https://conf.invalid/simple", "https://ce.invalid/simple"]
    no_file = resources.Configured(default="https://default.invalid/simple")
    assert resources._indexes(pip + ["-i"], {}, no_file) == ["https://default.invalid/simple"]
    uv = ["uv", "pip", "install", "--python", "/p", "torch==2.5.1"]
    assert resources._indexes(uv, environ, conf) == ["https://d.invalid/simple", "https://ue.invalid/simple",
                                                     "https://n.invalid/simple"]
    assert resources._indexes(uv, {}, conf) == ["https://default.invalid/simple"]  # uv reads no pip.conf
    assert resources.sources(pip + ["--no-index"], environ, conf) == resources.Sources([], other=True)
    assert resources.sources(pip, {"PIP_FIND_LINKS": "https://f.invalid/"}, no_file).other
    assert resources.sources(pip + ["-i", "file:///wheels"], {}, no_file) == resources.Sources([], other=True)
    assert resources.sources(pip, {}, resources.Configured()) == resources.Sources([], other=True)  # none known
    assert not resources.sources(pip, {}, no_file).other


def test_an_index_url_with_a_token_is_no_pin(tmp_path: Path, monkeypatch):
    """An index URL holding "==" (a base64 token's padding) is an option, not a pin to size."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    calls = _asked(monkeypatch, {})
    index = "https://user:dG9rZW4==@a.invalid/simple"
    plan = Plan(python="/p", steps=[Step(kind="install", reason="r",
                                         argv=["pip", "install", f"--extra-index-url={index}", "torch==2.5.1"])])
    assert resources.measure(plan, _env(tmp_path), {}, NO_CONFIG).unknown == ["torch==2.5.1"]
    assert calls == [(index, "torch", "2.5.1")]


def test_a_file_system_that_cannot_be_measured_is_skipped_and_exactly_full_is_enough(tmp_path: Path, monkeypatch):
    unmeasured, full = tmp_path / "unmeasured", tmp_path / "full"
    unmeasured.mkdir()
    full.mkdir()

    def statvfs(path: str) -> _Vfs:
        if path == str(unmeasured):
            raise PermissionError(path)
        return _Vfs(8192)
    monkeypatch.setattr(resources, "STATVFS", statvfs)
    fits = [resources.Need("temp", str(unmeasured), 10 ** 12), resources.Need("site-packages", str(full), 8192)]
    assert resources._short(fits) == []
    over = [fits[0], resources.Need("site-packages", str(full), 8193)]
    assert resources._short(over) == [f"{resources.gb(8193)} needed on one file system, {resources.gb(8192)} free: "
                                      f"site-packages {full} ({resources.gb(8193)})"]


def test_the_refusal_joins_each_short_file_system_and_says_what_to_do(tmp_path: Path, monkeypatch):
    """Two file systems short (the temp folder's and /proc's, where the cache is pointed): one sentence each,
    joined with "; ", and the hint names the variables that move each place."""
    from cudamatrix.errors import InstallFailed

    if os.stat(tmp_path).st_dev == os.stat("/proc").st_dev:
        pytest.skip("/proc is not its own file system here")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("PIP_CACHE_DIR", "/proc/absent-cache")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    _asked(monkeypatch, {("https://a.invalid/simple", "torch"): 2_000_000_000})
    monkeypatch.setattr(resources, "STATVFS", lambda path: _Vfs(10 ** 6))
    plan = Plan(python="/p", steps=[Step(kind="install", reason="r",
                                         argv=["pip", "install", "-i", "https://a.invalid/simple", "torch==2.5.1"])])
    with pytest.raises(InstallFailed) as err:
        resources.check_space(plan, _env(tmp_path))
    short = err.value.detail["short"]
    assert len(short) == 2 and "installer cache /proc/absent-cache" in short[1]
    assert err.value.message == "not enough free disk space for this plan: " + "; ".join(short)
    assert err.value.hint == ("free space there, or point TMPDIR, PIP_CACHE_DIR / UV_CACHE_DIR and XDG_STATE_HOME at "
                              "a larger disk; nothing was changed")


def test_html_links_with_a_hash_fragment_or_bytes_that_are_not_utf_8():
    """PEP 503 links carry "#sha256=..." after the file name; the page may hold bytes that are not UTF-8 (a
    project description in another encoding): the wheel links are read all the same, and the best tag chosen."""
    best, other = "torch-2.5.1-cp312-cp312-manylinux_2_28_x86_64.whl", "torch-2.5.1-py3-none-any.whl"
    page = (f'<html><body><!-- caf\xe9 --><a href="/files/{other}#sha256=ab12">{other}</a>'
            f'<a href="/files/{best}#sha256=cd34">{best}</a></body></html>').encode("latin-1")
    routes = {"/simple/torch/": (page, "text/html"), f"/files/{best}": (PAYLOAD, "application/octet-stream"),
              f"/files/{other}": (b"o" * 5, "application/octet-stream")}
    with _index(routes) as (url, seen):
        assert resources.file_size(url + "/simple", "torch", "2.5.1", TAGS) == len(PAYLOAD)
        assert seen == [("GET", "/simple/torch/"), ("HEAD", f"/files/{best}")]


def test_a_head_answer_without_a_usable_length_sizes_nothing():
    html = _listing("text/html")
    routes = {"/a/torch/": html, "/b/torch/": html, f"/files/{WHEEL}": (b"", "application/octet-stream", None)}
    with _index(routes) as (url, _):
        assert resources.file_size(url + "/a", "torch", "2.5.1", TAGS) is None
        routes[f"/files/{WHEEL}"] = (b"", "application/octet-stream", "unknown")
        assert resources.file_size(url + "/b", "torch", "2.5.1", TAGS) is None


@pytest.mark.parametrize("files,tags,size", [
    # compressed tag sets (PEP 425: "." joins alternatives in each part) and a build tag (PEP 427)
    ([("x-1.0-cp311-cp311-manylinux2014_x86_64.whl", 200),
      ("x-1.0-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", 300)],
     ["cp312-cp312-manylinux2014_x86_64"], 300),
    ([("x-1.0-cp27-none-any.whl", 100), ("x-1.0-py2.py3-none-any.whl", 400)], ["py3-none-any"], 400),
    ([("x-1.0-cp312-cp312-linux_x86_64.whl", 100), ("x-1.0-cp312-abi3.cp312-manylinux_2_28_x86_64.whl", 500)],
     ["cp312-abi3-manylinux_2_28_x86_64"], 500),
    ([("x-1.0-py3-none-any.whl", 100), ("x-1.0-1-cp312-cp312-manylinux_2_28_x86_64.whl", 600)], TAGS, 600),
])
def test_the_wheel_chosen_reads_compressed_tag_sets_and_build_tags(files, tags, size):
    doc = {"meta": {"api-version": "1.1"}, "name": "x",
           "files": [{"filename": n, "url": f"/files/{n}", "hashes": {}, "size": s} for n, s in files]}
    with _index({"/simple/x/": (json.dumps(doc).encode(), "application/vnd.pypi.simple.v1+json")}) as (url, _):
        assert resources.file_size(url + "/simple", "x", "1.0", tags) == size


JSON_TYPE = "application/vnd.pypi.simple.v1+json"


@pytest.mark.parametrize("size", ['"abc"', "1e400", "-1e400", "[1, 2]", "-5", "true", "1.5", "{}", "null",
                                  "123456789012345678901234567890"])
def test_a_json_size_that_is_no_whole_number_of_bytes_is_unknown(size, tmp_path, monkeypatch):
    """PEP 691 data is the index's word, not ours: a size that is text, not finite, a list, negative, a bool,
    a fraction or absurdly large is unknown, never a crash of the check: the file is asked with HEAD (here it
    answers without a length: the size stays unknown, and the check notes it)."""
    item = f'{{"filename": "{WHEEL}", "url": "/files/{WHEEL}", "hashes": {{}}, "size": {size}}}'
    body = f'{{"meta": {{"api-version": "1.1"}}, "name": "torch", "files": [{item}]}}'.encode()
    with _index({"/simple/torch/": (body, JSON_TYPE), f"/files/{WHEEL}": (b"", "application/octet-stream", None)}) \
            as (url, _):
        assert resources.find(url + "/simple", "torch", "2.5.1", TAGS) == resources.Found(listed=True, size=None)
        monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
        plan = Plan(python="/p", steps=[Step(kind="install", reason="r",
                                             argv=["pip", "install", "-i", url + "/simple", "torch==2.5.1"])])
        monkeypatch.setattr(resources, "STATVFS", lambda path: _Vfs(10 ** 12))
        assert "torch==2.5.1" in resources.check_space(plan, _env(tmp_path))


def test_a_whole_float_size_counts():
    body = json.dumps({"meta": {"api-version": "1.1"}, "name": "torch",
                       "files": [{"filename": WHEEL, "url": f"/files/{WHEEL}", "hashes": {}, "size": 1e3}]}).encode()
    with _index({"/simple/torch/": (body, JSON_TYPE)}) as (url, _):
        assert resources.file_size(url + "/simple", "torch", "2.5.1", TAGS) == 1000


@pytest.mark.parametrize("files", [None, "x", [1, "a", None, {"filename": 3, "url": "/f"}, {"filename": WHEEL}]])
def test_listing_entries_of_the_wrong_shape_are_skipped(files):
    body = json.dumps({"meta": {"api-version": "1.1"}, "name": "torch", "files": files}).encode()
    with _index({"/simple/torch/": (body, JSON_TYPE), "/bad/torch/": (b"[1, 2", JSON_TYPE),
                 "/deep/torch/": (b"[" * 100_000, JSON_TYPE)}) as (url, _):
        for where in ("simple", "bad", "deep"):
            assert resources.find(f"{url}/{where}", "torch", "2.5.1", TAGS) == resources.Found(), where


@contextlib.contextmanager
def _raw_server(answer):
    """A loopback server that reads a request, then calls ``answer(conn)`` (tests/support/hostileserver.RawServer)."""
    with RawServer(lambda conn, _request: answer(conn)) as server:
        yield server.url


def _drip(conn) -> None:
    """An answer that never ends: its headers one byte a tenth of a second (a socket timeout never fires)."""
    for byte in b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Slow: " + b"a" * 10_000:
        conn.sendall(bytes([byte]))
        time.sleep(0.1)


def _drip_body(conn) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100000\r\n\r\n<html>")
    for _ in range(10_000):
        conn.sendall(b" ")
        time.sleep(0.1)


@pytest.mark.slow
@pytest.mark.parametrize("answer", [_drip, _drip_body], ids=["headers", "body"])
def test_a_dripping_index_is_cut_off_at_the_deadline(answer, monkeypatch):
    """A server that sends a byte every tenth of a second defeats a per-read timeout: the whole exchange has a
    deadline (HTTP_TIMEOUT_S), after which the index counts as not answering."""
    monkeypatch.setattr(resources, "HTTP_TIMEOUT_S", 1.0)
    with _raw_server(answer) as url:
        dead: set[str] = set()
        start = time.monotonic()
        assert resources.find(url + "/simple", "torch", "2.5.1", TAGS, dead) == resources.Found(answered=False)
        assert time.monotonic() - start < 3.0
        assert dead == {url + "/simple"}


def _huge(conn) -> None:
    """A listing of a GiB (chunked, no length told): sent until the client hangs up."""
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"<a>" + b"x" * (1 << 20) + b"</a>"
    for _ in range(1024):
        conn.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))


@pytest.mark.slow
def test_a_huge_listing_is_not_read_past_the_limit(monkeypatch):
    """1 GiB of listing: reading stops at LISTING_MAX_BYTES (memory stays bounded), and the index gave no usable
    answer (the check refuses the plan, as for one that does not answer)."""
    import tracemalloc

    monkeypatch.setattr(resources, "LISTING_MAX_BYTES", 8 * 1024 * 1024)
    with _raw_server(_huge) as url:
        tracemalloc.start()
        try:
            dead: set[str] = set()
            found = resources.find(url + "/simple", "torch", "2.5.1", TAGS, dead)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert found == resources.Found(answered=False) and dead == {url + "/simple"}
    assert peak < 64 * 1024 * 1024


@pytest.mark.slow
def test_the_default_index_is_the_one_pip_is_configured_with(tmp_path, monkeypatch, wheels):
    """No index on the step's command line or in PIP_INDEX_URL: the plan's interpreter's pip configuration
    (pip.conf, as `pip config list` prints it) names the index, and the disk check sizes the pin from it
    (before, every default-index fix said "the index did not tell the size")."""
    import sys

    monkeypatch.setattr(resources, "configured", REAL_CONFIGURED)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    for var in [v for v in os.environ if v.startswith(("PIP_", "UV_"))]:
        monkeypatch.delenv(var)
    with LocalIndex(wheels, json_api=True) as index:
        conf = tmp_path / "pip.conf"
        conf.write_text(f"[global]\nindex-url = {index.url}/simple\n")
        monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
        plan = Plan(python=sys.executable, steps=[Step(kind="install", reason="r",
                                                       argv=[sys.executable, "-m", "pip", "install", "my-pkg==1.0"])])
        check = resources.measure(plan, _env(tmp_path))
        monkeypatch.setattr(resources, "STATVFS", lambda path: _Vfs(10 ** 12))
        assert resources.check_space(plan, _env(tmp_path)) is None  # sized: no note
    size = _wheel(wheels, "my_pkg-1.0").stat().st_size
    assert check.unknown == [] and check.missing == [] and check.dead == []
    assert {n.where: n.nbytes for n in check.needs}["temp"] == int(size * resources.MARGIN)
    # pip's built-in default, when no file names one: the index pip's own help names (not asked here)
    conf.write_text("[global]\n")
    assert resources.configured(sys.executable).index_url is None
    assert (resources.configured(sys.executable).default or "").startswith("https://")


@pytest.mark.slow
def test_a_pin_no_index_lists_is_refused_before_any_change(tmp_path, monkeypatch, wheels):
    """Every index answers, none lists the pinned version: refused with the pin and where it was looked for."""
    from cudamatrix.errors import InstallFailed

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    for var in [v for v in os.environ if v.startswith(("PIP_", "UV_"))]:  # find-links of this machine: other sources
        monkeypatch.delenv(var)
    with LocalIndex(wheels) as index:
        argv = ["pip", "install", "-i", index.url + "/simple", "torch==2.5.1+cu121", "torch==9.9"]
        plan = Plan(python="/p", steps=[Step(kind="install", reason="r", argv=argv)])
        with pytest.raises(InstallFailed) as err:
            resources.check_space(plan, _env(tmp_path))
    assert err.value.message == ("the plan's files cannot all be fetched: no index lists torch==9.9 "
                                 f"({index.url}/simple)")
    assert err.value.detail == {"unreachable": [], "not_listed": [f"torch==9.9 ({index.url}/simple)"]}


def _told_a_gib(conn) -> None:
    """A listing that says it is 1 GiB long and sends nothing more."""
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n" % (1 << 30))
    time.sleep(5)


def test_a_listing_that_says_it_is_a_gib_is_refused_unread(monkeypatch):
    """A Content-Length over LISTING_MAX_BYTES is refused before any of the body is read: no wait for it."""
    monkeypatch.setattr(resources, "HTTP_TIMEOUT_S", 20.0)
    with _raw_server(_told_a_gib) as url:
        dead: set[str] = set()
        start = time.monotonic()
        assert resources.find(url + "/simple", "torch", "2.5.1", TAGS, dead) == resources.Found(answered=False)
        assert time.monotonic() - start < 2.0 and dead == {url + "/simple"}


@pytest.mark.slow
@pytest.mark.parametrize("hops", [0, 1])
def test_an_https_index_that_redirects_to_http_is_not_followed(hops, tmp_path, monkeypatch):
    """An https index (trusted through REQUESTS_CA_BUNDLE) whose listing redirects to plain http, at once or after
    an https hop: the redirect is refused, the http server never asked, and the index counts as not answering."""
    cert = self_signed(tmp_path)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(cert[0]))
    with HostileServer("ok") as plain, HostileServer("redirect", tls=True, cert=cert, hops=hops) as hop:
        hop.target = plain.url
        dead: set[str] = set()
        assert resources.find(hop.url + "/simple", "torch", "2.5.1", TAGS, dead) == resources.Found(answered=False)
    assert plain.requests == [] and dead == {hop.url + "/simple"}
    assert hop.requests[-1].endswith("/simple/torch/")
