"""The verification memory (cudamatrix.verify.memory): each entry's MAC binds the entry to its own key, so an
entry copied, moved or edited by anyone without this user's key is never recalled."""
from __future__ import annotations

import json
import os

from cudamatrix.models import FrameworkReport, Report
from cudamatrix.safe.keys import user_key
from cudamatrix.verify import memory

A, B = "a" * 64, "b" * 64  # two fingerprints (memory keys)


def _report(status: str = "verified") -> Report:
    return Report(status=status, frameworks=[FrameworkReport(framework="torch", status=status, version="2.14.1",
                                                             device_name="NVIDIA H100 80GB HBM3")])


def _file() -> dict:
    return json.loads((memory.cache_dir() / memory.CACHE_FILE).read_text())


def _rewrite(data: dict) -> None:
    path = memory.cache_dir() / memory.CACHE_FILE
    path.write_text(json.dumps(data))
    path.chmod(0o600)


def test_a_stored_result_is_recalled_under_its_key_only():
    assert memory.store(A, _report(), at="2026-11-26T10:00:00+0000")
    got = memory.load(A)
    assert got is not None and got.status == "verified" and got.cached_at == "2026-11-26T10:00:00+0000"
    assert got.frameworks[0].device_name == "NVIDIA H100 80GB HBM3"
    assert memory.load(B) is None
    assert (memory.cache_dir() / memory.CACHE_FILE).stat().st_mode & 0o777 == 0o600


def test_an_entry_copied_under_another_key_is_not_recalled():
    """A verified result of machine A copied under machine B's fingerprint (same MAC, same body): the MAC
    covers the key, so B recalls nothing and says an entry was ignored; A's own entry still works."""
    assert memory.store(A, _report())
    data = _file()
    data["entries"][B] = dict(data["entries"][A])
    _rewrite(data)
    notes: list[str] = []
    assert memory.load(B, notes=notes) is None
    assert any("not written by this user's cudamatrix" in n for n in notes), notes
    assert memory.load(A) is not None


def test_an_entry_moved_to_another_key_is_not_recalled_and_storing_drops_it():
    assert memory.store(A, _report())
    data = _file()
    data["entries"] = {B: data["entries"][A]}
    _rewrite(data)
    assert memory.load(A) is None and memory.load(B) is None
    assert memory.store(A, _report("failed"))
    assert set(_file()["entries"]) == {A}  # the forged entry is not carried over
    assert memory.load(A).status == "failed"


def test_an_edited_entry_is_not_recalled():
    assert memory.store(A, _report("failed"))
    data = _file()
    data["entries"][A]["report"]["status"] = "verified"
    data["entries"][A]["report"]["frameworks"][0]["status"] = "verified"
    _rewrite(data)
    assert memory.load(A) is None


def test_an_entry_signed_with_another_users_key_is_not_recalled():
    assert memory.store(A, _report())
    key_path = memory.cache_dir() / "verify.key"
    key_path.write_bytes(os.urandom(32))  # another key: every entry signed with the old one is foreign now
    assert user_key(create=False)[0] == key_path.read_bytes()
    assert memory.load(A) is None


def test_recall_consistent_returns_the_stored_library_path_changes():
    assert memory.store(A, _report(), env={"LD_LIBRARY_PATH": "/x"})
    report, env = memory.recall_consistent(A)
    assert report.status == "verified" and env == {"LD_LIBRARY_PATH": "/x"}
    assert memory.recall_consistent(B) is None
