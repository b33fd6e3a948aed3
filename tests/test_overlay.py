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
    doc = {"overlay_schema": 1, "created": "2026-12-01T00:00:00Z", "index": "https://pypi.org/simple",
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


def test_a_signed_overlay_of_good_rows_is_applied(shipped):
    path = _plant(_signed(_doc()))
    got = overlay.apply(shipped)
    assert NEW in _versions(got) and NEW not in _versions(shipped)
    info = overlay.info(got)
    assert info.ignored is None and info.path == str(path) and info.releases == {"torch": [NEW], "tensorflow": [],
                                                                                  "jax": []}
    assert (info.created, info.index) == ("2026-12-01T00:00:00Z", "https://pypi.org/simple")


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


def test_write_signs_with_the_users_key_and_refuses_an_open_folder(shipped, tmp_path):
    path = overlay.write(_doc(), shipped)
    assert path == overlay.overlay_path() and (path.stat().st_mode & 0o777) == 0o600
    assert NEW in _versions(overlay.apply(shipped))
    assert [p.name for p in path.parent.iterdir()] == ["overlay.json"]  # no temp file left
    path.parent.chmod(0o755)
    with pytest.raises(overlay.OverlayError, match="open to other users"):
        overlay.write(_doc(), shipped)
