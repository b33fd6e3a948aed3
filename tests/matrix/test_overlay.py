"""The user's matrix overlay (cudamatrix.matrix.overlay) read in this process: a signed overlay of good rows
is applied; one owned by another user, open to others, a symlink, without its digest, or signed with another
key is ignored with the reason, and the shipped matrix is used unchanged."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from cudamatrix.matrix import overlay
from cudamatrix.matrix.data import default_data_dir, load_matrix_from
from cudamatrix.safe.keys import sign, user_key

NEW = "2.99.0"


@pytest.fixture(scope="module")
def shipped():
    return load_matrix_from(default_data_dir(), trusted=True)


def _doc(digest: bool = True) -> dict:
    """What `matrix update` writes for one new torch release: the newest shipped row as 2.99.0, unsigned."""
    row = json.loads((default_data_dir() / "torch.json").read_text())["releases"][0]
    row["version"] = NEW
    row.pop("companions", None)
    families = {"torch": [row], "tensorflow": [], "jax": []}
    doc = {"overlay_schema": 1, "created": "2026-12-01T00:00:00Z", "index": "https://index.example/simple",
           "matrix_version": "x", "families": families}
    if digest:
        doc["sha256"] = overlay.digest(families)
    return doc


def _signed(doc: dict, key: bytes | None = None) -> dict:
    key = key or user_key(create=True)[0]
    assert key is not None
    return {**doc, "mac": sign(key, doc)}


def _plant(doc: dict | str, folder: Path | None = None) -> Path:
    folder = folder or overlay.overlay_path().parent
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    folder.chmod(0o700)
    path = folder / "overlay.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    path.chmod(0o600)
    return path


def _versions(matrix) -> set[str]:
    return {str(r.version) for r in matrix.frameworks("torch")}


def _ignored(shipped, path: Path | None = None) -> str:
    """Apply the overlay at ``path`` (default: the user's) and return why it was ignored; the matrix must be the
    shipped one, unchanged."""
    got = overlay.apply(shipped, path)
    assert got is shipped and NEW not in _versions(got)
    why = overlay.info(got).ignored
    assert why and why.endswith("the shipped matrix is used"), why
    return why


@pytest.mark.slow
def test_a_signed_overlay_of_good_rows_is_applied(shipped):
    path = _plant(_signed(_doc()))
    got = overlay.apply(shipped)
    assert NEW in _versions(got) and NEW not in _versions(shipped)
    info = overlay.info(got)
    assert info.ignored is None and info.path == str(path) and info.releases == {"torch": [NEW], "tensorflow": [],
                                                                                  "jax": []}
    assert (info.created, info.index) == ("2026-12-01T00:00:00Z", "https://index.example/simple")


def test_no_overlay_file_is_the_shipped_matrix(shipped):
    assert overlay.apply(shipped) is shipped


def test_an_overlay_signed_with_another_key_is_ignored(shipped):
    user_key(create=True)
    _plant(_signed(_doc(), key=os.urandom(32)))
    assert "not signed with this user's key" in _ignored(shipped)


def test_an_overlay_without_a_mac_is_ignored(shipped):
    user_key(create=True)
    _plant(_doc())
    assert "not signed with this user's key" in _ignored(shipped)


def test_an_overlay_without_its_digest_is_ignored_even_when_signed(shipped):
    _plant(_signed(_doc(digest=False)))
    assert "sha256" in _ignored(shipped)


def test_an_overlay_whose_rows_were_edited_after_signing_is_ignored(shipped):
    doc = _signed(_doc())
    doc["families"]["torch"][0]["variants"][0]["index_url"] = "https://evil.example/simple"
    _plant(doc)
    assert "sha256" in _ignored(shipped)


def test_an_overlay_that_is_a_symlink_is_ignored(shipped, tmp_path):
    good = _plant(_signed(_doc()), tmp_path / "elsewhere")  # a valid, signed, private file
    folder = overlay.overlay_path().parent
    folder.mkdir(parents=True, mode=0o700)
    (folder / "overlay.json").symlink_to(good)
    assert "not a regular file" in _ignored(shipped)


def test_an_overlay_open_to_other_users_is_ignored(shipped):
    _plant(_signed(_doc())).chmod(0o644)
    assert "open to other users" in _ignored(shipped)


def test_an_overlay_in_a_folder_open_to_other_users_is_ignored(shipped):
    _plant(_signed(_doc())).parent.chmod(0o755)
    assert "open to other users" in _ignored(shipped)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown to another user needs root")
@pytest.mark.parametrize("what", ["file", "folder"])
def test_an_overlay_owned_by_another_user_is_ignored(shipped, what):
    path = _plant(_signed(_doc()))
    os.chown(path if what == "file" else path.parent, 65534, -1)  # nobody
    assert f"the overlay {what} belongs to another user (uid 65534)" in _ignored(shipped)


def test_an_overlay_that_is_a_folder_or_not_json_is_ignored(shipped):
    folder = overlay.overlay_path().parent
    (folder / "overlay.json").mkdir(parents=True, mode=0o700)
    folder.chmod(0o700)
    assert "not a regular file" in _ignored(shipped)
    shutil.rmtree(folder / "overlay.json")
    _plant("{")
    assert "cannot be read" in _ignored(shipped)


@pytest.mark.slow
def test_write_signs_with_the_users_key_and_refuses_an_open_folder(shipped, tmp_path):
    path = overlay.write(_doc(), shipped)
    assert path == overlay.overlay_path() and (path.stat().st_mode & 0o777) == 0o600
    assert NEW in _versions(overlay.apply(shipped))
    assert [p.name for p in path.parent.iterdir()] == ["overlay.json"]  # no temp file left
    path.parent.chmod(0o755)
    with pytest.raises(overlay.OverlayError, match="open to other users"):
        overlay.write(_doc(), shipped)


# --- building an overlay from a real index (https on loopback), in this process ------------------------------

PLUGIN_REQS = ["jax-cuda12-pjrt==99.0.0",
               'nvidia-cuda-runtime-cu12>=12.1.105; sys_platform == "linux" and extra == "with-cuda"',
               'nvidia-cudnn-cu12<10.0,>=9.10.2.21; sys_platform == "linux" and extra == "with-cuda"']


@pytest.fixture(scope="module")
def jax_index(tmp_path_factory):
    """jax 99.0.0 (a release the shipped data lacks) with its jaxlib and CUDA plugin; jaxlib 98.0.0 without a
    jax of its own (not a release); torch and tensorflow absent."""
    from support.localindex import LocalIndex, build_wheel

    folder = tmp_path_factory.mktemp("jaxindex") / "wheels"
    build_wheel(folder, "jax", "99.0.0", requires=["jaxlib<=99.0.0,>=99.0.0", "numpy>=2"],
                requires_python=">=3.12")
    for version in ("99.0.0", "98.0.0"):
        build_wheel(folder, "jaxlib", version, tag="cp312-cp312-manylinux_2_27_x86_64")
    build_wheel(folder, "jax_cuda12_plugin", "99.0.0", tag="cp312-cp312-manylinux_2_27_x86_64",
                requires=PLUGIN_REQS)
    with LocalIndex(folder, json_api=True, metadata_for=("jax-cuda12-plugin",), ranges=True, tls=True) as index:
        yield index


@pytest.mark.slow
def test_build_reads_only_releases_the_shipped_matrix_lacks(shipped, jax_index, monkeypatch):
    from datetime import datetime, timezone

    from cudamatrix.matrix.index import IndexClient

    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(jax_index.cafile))
    said: list[str] = []
    doc = overlay.build(IndexClient(jax_index.url + "/simple", https_only=True), shipped, "https://mirror.example/simple",
                        said.append, now=datetime(2026, 12, 1, 8, 30, tzinfo=timezone.utc))
    assert set(doc) == {"overlay_schema", "created", "index", "matrix_version", "families", "sha256"}
    assert doc["overlay_schema"] == 1 and doc["created"] == "2026-12-01T08:30:00Z"
    assert doc["index"] == "https://mirror.example/simple" and doc["matrix_version"] == shipped.meta.data_version
    assert doc["families"]["torch"] == [] and doc["families"]["tensorflow"] == []
    assert [r["version"] for r in doc["families"]["jax"]] == ["99.0.0"]  # jaxlib 98.0.0 has no jax: no release
    row = doc["families"]["jax"][0]
    assert row["notes"][-1] == "from the user's overlay, read from the index on 2026-12-01T08:30:00Z"
    assert doc["sha256"] == overlay.digest(doc["families"])
    assert said[0] == "jax: 1 release(s) the shipped matrix lacks: 99.0.0"
    # written and read back: the shipped matrix gains exactly that release
    path = overlay.write(doc, shipped)
    got = overlay.apply(shipped, path)
    assert "99.0.0" in {str(r.version) for r in got.frameworks("jax")}
    assert overlay.info(got).releases == {"jax": ["99.0.0"], "torch": [], "tensorflow": []}
    assert overlay.info(got).as_dict()["releases"]["jax"] == ["99.0.0"]


def test_to_plain_gives_a_shipped_release_with_its_sources_as_the_records_its_data_file_holds(shipped):
    # the rows matrix update inherits from: every variant's sources as data/<family>.json holds them (records of
    # url, states, read and kind; the file leaves out a url that is null), not as one text
    for fam in overlay.FAMILIES:
        rows = {r["version"]: r for r in json.loads((default_data_dir() / f"{fam}.json").read_text())["releases"]}
        for release in shipped.frameworks(fam):
            plain = overlay.to_plain(release)
            json.dumps(plain)  # plain JSON, nothing left to convert
            by_name = {v["name"]: v for v in plain["variants"]}
            for variant in rows[str(release.version)]["variants"]:
                got = [{k: v for k, v in s.items() if v is not None} for s in by_name[variant["name"]]["source"]]
                assert got == variant["source"]


def test_an_overlay_that_vanished_before_it_was_read_says_so(tmp_path):
    # apply() stat-ed the file, then it was removed before the read: the reason is said, not a parse of nothing
    with pytest.raises(ValueError, match="^it vanished while being read$"):
        overlay._read_signed(tmp_path / "overlay.json")


def test_the_digest_is_canonical_json():
    import hashlib

    fams = {"torch": [{"b": 1, "a": "é"}], "jax": []}
    text = '{"jax":[],"torch":[{"a":"\\u00e9","b":1}]}'
    assert overlay.digest(fams) == hashlib.sha256(text.encode()).hexdigest()
    assert overlay.overlay_path() == overlay.cache_dir() / "overlay" / "overlay.json"


@pytest.mark.parametrize("damage,words", [
    (lambda d: d.update(overlay_schema=2), "not overlay schema 1"),
    (lambda d: d.pop("overlay_schema"), "not overlay schema 1"),
    (lambda d: d.update(families=[]), "families are not torch/tensorflow/jax"),
    (lambda d: d["families"].update(cupy=[]), "families are not torch/tensorflow/jax"),
    (lambda d: d["families"]["torch"][0].update(version="not a version"), "overlay torch"),
    (lambda d: d["families"]["torch"][0]["variants"][0].update(index_url="http://evil.example/simple"), "index"),
])
def test_check_rows_refuses_a_bad_document(shipped, damage, words):
    doc = _doc()
    damage(doc)
    if isinstance(doc.get("families"), dict):
        doc["sha256"] = overlay.digest(doc["families"])
    with pytest.raises(overlay.OverlayError) as err:
        overlay.check_rows(doc, shipped)
    assert words in err.value.message, err.value.message
    with pytest.raises(overlay.OverlayError):
        overlay.write(doc, shipped)
    assert not overlay.overlay_path().exists()


def test_check_rows_keeps_every_shipped_row_and_adds_only_new_ones(shipped):
    doc = _doc()
    newest = json.loads((default_data_dir() / "torch.json").read_text())["releases"][0]
    doc["families"]["torch"].append({**newest, "notes": ["an overlay's copy of a shipped row"]})
    doc["families"]["torch"][-1].pop("companions", None)
    doc["sha256"] = overlay.digest(doc["families"])
    got = overlay.check_rows(doc, shipped)
    versions = [str(r.version) for r in got.frameworks("torch")]
    assert versions[0] == NEW and versions[1:] == [str(r.version) for r in shipped.frameworks("torch")]
    shipped_row = next(r for r in got.frameworks("torch") if str(r.version) == newest["version"])
    assert shipped_row is next(r for r in shipped.frameworks("torch") if str(r.version) == newest["version"])
    assert got.frameworks("jax") == shipped.frameworks("jax")


def test_write_refuses_without_a_usable_key(shipped):
    from cudamatrix.safe.keys import cache_dir

    folder = cache_dir()
    folder.mkdir(parents=True)
    (folder / "verify.key").symlink_to("/dev/null")
    with pytest.raises(overlay.OverlayError, match="the per-user key cannot be kept") as err:
        overlay.write(_doc(), shipped)
    assert "private" in err.value.hint
    assert not overlay.overlay_path().exists()


@pytest.mark.slow
def test_write_refuses_a_cache_folder_it_cannot_create(shipped, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    user_key(create=True)
    with pytest.raises(overlay.OverlayError, match="cannot create the cache folder"):
        overlay.write(_doc(), shipped, blocker / "overlay" / "overlay.json")


@pytest.mark.slow
def test_a_signed_overlay_that_is_not_an_object_is_ignored(shipped):
    user_key(create=True)
    _plant("[1, 2]")
    assert "the overlay is not a JSON object" in _ignored(shipped)


# --- issue #28: the survivors of the mutation run ------------------------------------------------------------

def test_a_row_with_a_control_character_is_refused(shipped):
    """A terminal escape in a note would reach the user's terminal through every render: refused by name."""
    doc = _doc()
    doc["families"]["torch"][0]["notes"] = ["ok", "red \x1b[31m text"]
    doc["sha256"] = overlay.digest(doc["families"])
    with pytest.raises(overlay.OverlayError) as err:
        overlay.check_rows(doc, shipped)
    assert err.value.message == ("the overlay's families.torch[0].notes[1] holds a line break or a control "
                                 "character")


def test_a_row_inconsistent_with_the_shipped_matrix_is_refused_by_name(shipped):
    doc = _doc()
    doc["families"]["torch"][0]["name"] = "jax"
    doc["sha256"] = overlay.digest(doc["families"])
    with pytest.raises(overlay.OverlayError) as err:
        overlay.check_rows(doc, shipped)
    assert err.value.message == ("the overlay's rows are inconsistent with the shipped matrix: "
                                 "torch.json: releases[0]: name: 'jax' in torch.json")
    doc["families"]["torch"] = [dict(doc["families"]["torch"][0], version=f"2.99.{i}") for i in range(7)]
    doc["sha256"] = overlay.digest(doc["families"])
    with pytest.raises(overlay.OverlayError) as err:
        overlay.check_rows(doc, shipped)
    assert err.value.message == ("the overlay's rows are inconsistent with the shipped matrix: " + "; ".join(
        f"torch.json: releases[{i}]: name: 'jax' in torch.json" for i in range(5)))  # the first five problems


def test_the_refusals_are_exact(shipped):
    doc = _doc()
    doc["families"]["cupy"] = []
    with pytest.raises(overlay.OverlayError) as err:
        overlay.check_rows(doc, shipped)
    assert err.value.message == "the overlay's families are not torch/tensorflow/jax"
    doc = _doc()
    doc["sha256"] = "0" * 64
    with pytest.raises(overlay.OverlayError) as err:
        overlay.check_rows(doc, shipped)
    assert err.value.message == "the overlay's rows do not match its sha256"
    user_key(create=True)
    _plant("[1, 2]")
    assert _ignored(shipped) == "the overlay is not a JSON object; the shipped matrix is used"
    _plant(_signed(_doc(digest=False)))
    assert _ignored(shipped) == "the overlay's rows do not match its sha256; the shipped matrix is used"
    _plant(_doc(digest=False))  # unsigned, and its digest is wrong too: the plainer reason first
    assert _ignored(shipped) == "the overlay's rows do not match its sha256; the shipped matrix is used"
    _plant({**_doc(), "mac": "0" * 64})
    assert _ignored(shipped) == ("the overlay is not signed with this user's key (no key, or another key): an "
                                 "overlay edited or planted by anyone without the key is not used; the shipped "
                                 "matrix is used")


def test_reading_an_overlay_never_makes_a_key(shipped):
    _plant(_doc())
    assert "not signed with this user's key" in _ignored(shipped)
    from cudamatrix.safe.keys import KEY_FILE, cache_dir

    assert not (cache_dir() / KEY_FILE).exists()


def test_an_overlay_nested_too_deep_is_refused_before_its_rows_are_read(shipped):
    doc = _doc()
    deep: object = "x"
    for _ in range(20):
        deep = [deep]
    doc["families"]["torch"][0]["notes"] = deep
    doc["sha256"] = overlay.digest(doc["families"])
    _plant(_signed(doc))
    assert _ignored(shipped) == ("the overlay cannot be read (nested more than 16 levels deep); the shipped matrix "
                                 "is used")


def test_an_overlay_of_several_megabytes_is_read(shipped):
    """The bound is 16 MB (a matrix update of many releases), not the 4 MB of other files."""
    text = json.dumps(_signed(_doc())) + " " * (5 * 1024 * 1024)
    _plant(text)
    got = overlay.apply(shipped)
    assert NEW in _versions(got) and overlay.info(got).ignored is None


def test_the_releases_an_overlay_adds_leave_out_the_shipped_ones_it_repeats(shipped):
    doc = _doc()
    newest = json.loads((default_data_dir() / "torch.json").read_text())["releases"][0]
    newest.pop("companions", None)
    doc["families"]["torch"].append(newest)
    doc["sha256"] = overlay.digest(doc["families"])
    _plant(_signed(doc))
    got = overlay.apply(shipped)
    assert overlay.info(got).releases == {"torch": [NEW], "tensorflow": [], "jax": []}


def test_an_overlay_folder_that_is_a_symlink_is_neither_written_nor_read(shipped, tmp_path):
    real = tmp_path / "elsewhere"
    real.mkdir(mode=0o700)
    real.chmod(0o700)
    user_key(create=True)
    link = overlay.overlay_path().parent
    link.symlink_to(real)
    with pytest.raises(overlay.OverlayError) as err:
        overlay.write(_doc(), shipped)
    assert err.value.message == f"{link}: the overlay folder is not a regular folder; not writing the overlay there"
    assert err.value.hint == f"chmod 700 {link} (or set XDG_CACHE_HOME to a private folder)"
    assert list(real.iterdir()) == []
    path = real / "overlay.json"
    path.write_text(json.dumps(_signed(_doc())))
    path.chmod(0o600)
    assert _ignored(shipped) == "the overlay folder is not a regular folder; the shipped matrix is used"


def test_write_makes_missing_folders_and_a_sorted_indented_file(shipped, tmp_path):
    user_key(create=True)
    path = tmp_path / "a" / "b" / "overlay.json"
    assert overlay.write(_doc(), shipped, path) == path
    text = path.read_text()
    doc = json.loads(text)
    assert text == json.dumps(doc, indent=1, sort_keys=True)  # diff-able by a person: one key a line, sorted


def test_write_says_when_the_overlay_cannot_be_written(shipped, monkeypatch):
    import errno

    user_key(create=True)
    folder = overlay.overlay_path().parent
    real = os.write

    def full(fd, data):
        if os.path.dirname(os.readlink(f"/proc/self/fd/{fd}")) == str(folder):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(os, "write", full)
        with pytest.raises(overlay.OverlayError) as err:
            overlay.write(_doc(), shipped)
    path = overlay.overlay_path()
    assert err.value.message == (f"{path}: cannot write the overlay ({path}: cannot be written (No space left on "
                                 "device))")


def test_without_a_usable_key_write_says_where_to_look(shipped):
    from cudamatrix.safe.keys import cache_dir

    cache_dir().mkdir(parents=True)
    (cache_dir() / "verify.key").symlink_to("/dev/null")
    with pytest.raises(overlay.OverlayError) as err:
        overlay.write(_doc(), shipped)
    assert err.value.hint == "make the cache folder ($XDG_CACHE_HOME, default ~/.cache) yours and private"


TORCH_TAG = "cp312-cp312-manylinux_2_28_x86_64"


@pytest.fixture(scope="module")
def all_index(tmp_path_factory):
    """torch, tensorflow and jax on one index, each with what ``build`` must tell apart: new releases (2.99.0,
    2.100.0: Version order is not text order; 2.101.0 without torch/version.py), one release the shipped matrix has, one below its oldest; torch's
    CUDA read from torch/version.py in the wheel, tensorflow's from build_info.py; torchvision 0.99.0 for the new
    torch and 0.29.2 (already paired in the shipped matrix: not read again); a jax without its jaxlib and a jaxlib
    without its jax (neither is a release)."""
    from support.localindex import LocalIndex, build_wheel

    folder = tmp_path_factory.mktemp("allindex") / "wheels"
    for version, cuda in (("2.99.0", "'13.0'"), ("2.100.0", "None"), ("2.14.1", "'12.8'"), ("1.11.0", "'11.3'")):
        build_wheel(folder, "torch", version, tag=TORCH_TAG, requires_python=">=3.10",
                    files={"torch/version.py": f"__version__ = '{version}'\ncuda: Optional[str] = {cuda}\n"})
    build_wheel(folder, "torch", "2.101.0", tag=TORCH_TAG)  # a wheel without torch/version.py
    # a torch/version.py with a Latin-1 byte in a comment (not UTF-8): its version and CUDA are still read
    build_wheel(folder, "torch", "2.98.0", tag=TORCH_TAG, files={
        "torch/version.py": "# built by J\xf6rg\n__version__ = '2.98.0'\ncuda: Optional[str] = '12.8'\n".encode("latin-1")})
    build_wheel(folder, "torchvision", "0.99.0", requires=["torch==2.99.0"], tag=TORCH_TAG)
    build_wheel(folder, "torchvision", "0.29.2", requires=["torch==2.14.1"], tag=TORCH_TAG)
    # tensorflow 2.15.0's own build_info.py (tests/data/pip_reports): CUDA 12.2, sm_50 to sm_75 and PTX 8.0
    info = (Path(__file__).parent.parent / "data" / "pip_reports" / "tensorflow-2.15.0-build_info.py.txt").read_text()
    for version in ("2.99.0", "2.21.0", "2.3.0"):
        build_wheel(folder, "tensorflow", version, tag=TORCH_TAG,
                    files={"tensorflow/python/platform/build_info.py": info})
    build_wheel(folder, "tensorflow_cpu", "2.99.0", tag=TORCH_TAG)
    build_wheel(folder, "jax", "0.99.0", requires=["jaxlib<=0.99.0,>=0.99.0"])
    build_wheel(folder, "jax", "0.98.0", requires=["jaxlib<=0.98.0,>=0.98.0"])  # no jaxlib 0.98.0
    for version in ("0.99.0", "0.97.0", "0.4.1"):  # 0.97.0 has no jax; 0.4.1 is below the oldest shipped
        build_wheel(folder, "jaxlib", version, tag=TORCH_TAG)
    build_wheel(folder, "jax", "0.4.1")
    with LocalIndex(folder, json_api=True, ranges=True, tls=True) as index:
        yield index


@pytest.fixture
def far_from_utc(monkeypatch):
    """A local time zone 5 h 30 min from UTC, so that a local time labelled Z would show."""
    import time

    old = os.environ.get("TZ")
    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    yield
    if old is None:
        monkeypatch.delenv("TZ")
    else:
        monkeypatch.setenv("TZ", old)
    time.tzset()


@pytest.mark.slow
def test_build_reads_every_family_and_only_the_new_releases(shipped, all_index, monkeypatch, far_from_utc):
    from datetime import datetime, timedelta, timezone

    from cudamatrix.matrix.index import IndexClient

    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(all_index.cafile))
    said: list[str] = []
    before = datetime.now(timezone.utc).replace(microsecond=0)
    doc = overlay.build(IndexClient(all_index.url + "/simple", https_only=True), shipped, "https://idx.invalid/simple",
                        said.append)
    created = datetime.strptime(doc["created"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    assert before <= created <= datetime.now(timezone.utc) + timedelta(seconds=1)  # UTC, not the local time
    families = doc["families"]
    assert {fam: [r["version"] for r in rows] for fam, rows in families.items()} == {
        "torch": ["2.101.0", "2.100.0", "2.99.0", "2.98.0"], "tensorflow": ["2.99.0"], "jax": ["0.99.0"]}
    assert [line for line in said if not line.startswith(" ")] == [
        "torch: 4 release(s) the shipped matrix lacks: 2.98.0, 2.99.0, 2.100.0, 2.101.0",
        "tensorflow: 1 release(s) the shipped matrix lacks: 2.99.0",
        "jax: 1 release(s) the shipped matrix lacks: 0.99.0"]
    # torchvision 0.29.2 is paired in the shipped matrix already: its METADATA is not read again
    assert "  torchvision: 1 releases, 1 pairings" in said
    no_version_py, cpu_torch, new_torch, latin1 = families["torch"]
    assert no_version_py["variants"] == []  # nothing tells its CUDA: no default variant, and no error
    assert new_torch["companions"] == {"torchvision": "0.99.0"}
    [cu130] = new_torch["variants"]
    assert (cu130["name"], cu130["cuda"], cu130["local_version"]) == ("cu130", "13.0", "+cu130")
    assert cu130["source"][-1]["states"] == f"torch/version.py read from torch-2.99.0-{TORCH_TAG}.whl"
    assert cpu_torch["variants"] == []  # its version.py says cuda None: no CUDA default on the index
    assert [(v["name"], v["cuda"]) for v in latin1["variants"]] == [("cu128", "12.8")]
    [tf] = families["tensorflow"]
    assert tf["companions"] == {"tensorflow-cpu": "2.99.0"}
    [gpu] = tf["variants"]
    assert (gpu["cuda"], gpu["archs"], gpu["ptx"]) == ("12.2", ["5.0", "6.0", "7.0", "7.5"], ["8.0"])
    assert gpu["source"][-1]["states"] == \
        f"tensorflow/python/platform/build_info.py read from tensorflow-2.99.0-{TORCH_TAG}.whl"
    assert families["jax"][0]["companions"] == {"jaxlib": "0.99.0"}
    for rows in families.values():
        for row in rows:
            assert row["notes"][-1] == f"from the user's overlay, read from the index on {doc['created']}"
            assert row["notes"].count(row["notes"][-1]) == 1
    assert doc["sha256"] == overlay.digest(families) and doc["index"] == "https://idx.invalid/simple"
