"""The verification memory (cudamatrix.verify.memory): each entry's MAC binds the entry to its own key, so an
entry copied, moved or edited by anyone without this user's key is never recalled."""
from __future__ import annotations

import json
import os
import re

import pytest

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


# --- what a remembered result may be recalled for ----------------------------------------------------------

def _env(gpus=("NVIDIA H100 80GB HBM3",), packages=None, driver="580.65.06", libraries=()):
    from cudamatrix.models import Driver, Environment, GpuInfo, Library, PythonInfo

    return Environment(driver=Driver(version=driver, status="ok", cuda_version="13.0"),
                       gpus=[GpuInfo(index=i, name=n, compute_capability="9.0", uuid=f"GPU-{i}")
                             for i, n in enumerate(gpus)],
                       packages={"torch": "2.14.1"} if packages is None else packages,
                       python=PythonInfo(version="3.11.9", executable="/venv/bin/python"),
                       libraries=[Library(name="cudnn", path=p, soname=os.path.basename(p), origin="ldconfig")
                                  for p in libraries])


def test_a_verified_result_is_not_recalled_for_another_machine():
    assert memory.store(A, _report())
    assert memory.load(A, _env()) is not None
    notes: list[str] = []
    assert memory.load(A, _env(gpus=()), notes) is None  # no GPU now
    assert any("does not match this machine" in n for n in notes), notes
    assert memory.load(A, _env(gpus=("Tesla T4",))) is None  # another GPU
    assert memory.load(A, _env(packages={"torch": "2.13.0"})) is None  # another torch
    assert memory.load(A, _env(packages={"torch": "2.14.1+cu130"})) is not None  # the same release, a local tag
    assert memory.load(A, _env(packages={})) is not None  # nothing to compare with


def test_a_failed_result_is_recalled_without_a_gpu():
    assert memory.store(A, _report("failed"))
    assert memory.load(A, _env(gpus=())).status == "failed"


def test_a_result_is_not_recalled_once_a_library_it_mapped_changed(tmp_path):
    lib = tmp_path / "libcudnn.so.9"
    lib.write_bytes(b"one")
    report = Report(status="verified", frameworks=[FrameworkReport(
        framework="torch", status="verified", version="2.14.1", device_name="NVIDIA H100 80GB HBM3",
        mapped_libraries=[{"path": str(lib), "soname": "libcudnn.so.9"}])])
    assert memory.store(A, report)
    assert _file()["entries"][A]["mapped"] == [[str(lib), 3, lib.stat().st_mtime_ns]]
    assert memory.load(A, _env()) is not None
    lib.write_bytes(b"other")  # replaced in place
    notes: list[str] = []
    assert memory.load(A, _env(), notes) is None and memory.load(A) is None
    assert any("does not match this machine" in n for n in notes)
    lib.unlink()
    assert memory.load(A) is None


def test_a_hang_is_never_remembered():
    hang = Report(status="failed", frameworks=[FrameworkReport(framework="torch", status="failed",
                                                               finding_code="VERIFY_TIMEOUT")])
    assert memory.store(A, hang) is False
    assert not (memory.cache_dir() / memory.CACHE_FILE).exists()


def test_only_the_newest_entries_are_kept():
    for i in range(memory.KEEP + 3):
        assert memory.store(f"k{i}", _report())
    keys = list(_file()["entries"])
    assert len(keys) == memory.KEEP and keys[-1] == f"k{memory.KEEP + 2}" and "k0" not in keys
    assert memory.store("k5", _report("failed"))  # stored again: moves to the end
    assert list(_file()["entries"])[-1] == "k5"


def test_the_memory_file_is_private_and_the_entry_says_when(monkeypatch):
    assert memory.store(A, _report(), at="2026-01-02T03:04:05+0000", env={"LD_LIBRARY_PATH": "/x"})
    entry = _file()["entries"][A]
    assert entry["at"] == "2026-01-02T03:04:05+0000" and entry["env"] == {"LD_LIBRARY_PATH": "/x"}
    assert entry["report"]["status"] == "verified" and isinstance(entry["mac"], str) and len(entry["mac"]) == 64
    assert _file()["format"] == memory.FORMAT
    assert memory.store(B, _report())  # no "at": now
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4}", _file()["entries"][B]["at"])


@pytest.mark.parametrize("content,words", [
    ("{not json", "not valid JSON"),
    ('{"format": 1, "entries": {}}', "not in this version's format"),
    ('{"format": 2, "entries": []}', "not in this version's format"),
    ('[]', "not in this version's format"),
])
def test_an_unreadable_memory_is_ignored_with_a_note_and_rebuilt(content, words):
    assert memory.store(A, _report())
    path = memory.cache_dir() / memory.CACHE_FILE
    path.write_text(content)
    notes: list[str] = []
    assert memory.load(A, notes=notes) is None
    assert notes == [n for n in notes if words in n] and notes, notes
    assert memory.store(B, _report())
    assert set(_file()["entries"]) == {B}


def test_a_memory_without_its_key_is_ignored():
    assert memory.store(A, _report())
    (memory.cache_dir() / "verify.key").unlink()
    notes: list[str] = []
    assert memory.load(A, notes=notes) is None
    assert any("no secret to check it with" in n for n in notes), notes


def test_a_memory_open_to_others_is_ignored():
    assert memory.store(A, _report())
    (memory.cache_dir() / memory.CACHE_FILE).chmod(0o644)
    notes: list[str] = []
    assert memory.load(A, notes=notes) is None
    assert any(n.startswith("verification memory ignored (") and "mode" in n for n in notes), notes


def test_a_key_open_to_others_is_not_used():
    assert memory.store(A, _report())
    (memory.cache_dir() / "verify.key").chmod(0o644)
    notes: list[str] = []
    assert memory.load(A, notes=notes) is None
    assert any(n.startswith("verification memory: ") and n.endswith("; not used") for n in notes), notes
    assert memory.store(B, _report(), notes=notes) is False
    assert any(n.startswith("verification memory: ") and not n.endswith("; not used") for n in notes), notes


@pytest.mark.parametrize("damage", [
    lambda e: e.pop("report"),
    lambda e: e.pop("at"),
    lambda e: e.update(at=5),
    lambda e: e.update(report=[]),
    lambda e: e["report"].update(status="great"),
    lambda e: e["report"]["frameworks"][0].update(status="great"),
    lambda e: e["report"]["frameworks"][0].update(framework=7),
    lambda e: e["report"]["frameworks"].append("torch"),
    lambda e: e["report"]["frameworks"][0].update(mapped_libraries="x"),
    lambda e: e["report"]["frameworks"][0].update(mapped_libraries=["x"]),
    lambda e: e["report"]["frameworks"][0].update(unknown_field=1),
])
def test_a_signed_entry_of_the_wrong_shape_is_ignored(damage):
    """Written by this user's key but not a report this version can read: ignored with a note, no traceback."""
    from cudamatrix.safe.keys import user_key

    assert memory.store(A, _report())
    data = _file()
    entry = data["entries"][A]
    damage(entry)
    entry["mac"] = memory._mac(user_key(create=False)[0], A, entry)
    _rewrite(data)
    notes: list[str] = []
    assert memory.load(A, notes=notes) is None
    assert notes == ["verification memory: a malformed entry was ignored"], notes
    assert memory.recall_consistent(A) is None


def test_recall_consistent_refuses_changes_that_are_not_text():
    from cudamatrix.safe.keys import user_key

    assert memory.store(A, _report(), env={"LD_LIBRARY_PATH": "/x"})
    data = _file()
    data["entries"][A]["env"] = {"LD_LIBRARY_PATH": 5}
    data["entries"][A]["mac"] = memory._mac(user_key(create=False)[0], A, data["entries"][A])
    _rewrite(data)
    assert memory.load(A) is not None and memory.recall_consistent(A) is None


# --- the keys: what a remembered answer depends on ----------------------------------------------------------

def test_the_fingerprint_follows_everything_a_result_depends_on(tmp_path, monkeypatch):
    for var in ("LD_LIBRARY_PATH", "LD_PRELOAD", "CUDA_VISIBLE_DEVICES", "CUDA_HOME"):
        monkeypatch.delenv(var, raising=False)
    lib = tmp_path / "libcudnn.so.9"
    lib.write_bytes(b"one")
    base = _env(libraries=[str(lib)])
    fp = memory.fingerprint(base)
    assert re.fullmatch(r"[0-9a-f]{64}", fp) and memory.fingerprint(_env(libraries=[str(lib)])) == fp
    assert memory.fingerprint(base, ["torch", "jax"]) == memory.fingerprint(base, ["jax", "torch"]) != fp
    assert memory.fingerprint(base, "torch") != fp
    others = [_env(libraries=[str(lib)], driver="570.1"), _env(libraries=[str(lib)], gpus=("Tesla T4",)),
              _env(libraries=[str(lib)], packages={"torch": "2.14.0"}), _env(libraries=[])]
    moved = _env(libraries=[str(lib)])
    moved.python.executable = "/other/bin/python"
    others.append(moved)
    cc = _env(libraries=[str(lib)])
    cc.gpus[0].compute_capability = "8.0"
    others.append(cc)
    uuid = _env(libraries=[str(lib)])
    uuid.gpus[0].uuid = "GPU-other"
    others.append(uuid)
    status = _env(libraries=[str(lib)])
    status.driver.status = "error"
    others.append(status)
    cuda = _env(libraries=[str(lib)])
    cuda.driver.cuda_version = "12.9"
    others.append(cuda)
    first = _env(libraries=[str(lib)])
    first.libraries[0].loaded_first = True
    others.append(first)
    version = _env(libraries=[str(lib)])
    version.libraries[0].version = "9.1.0"
    others.append(version)
    assert len({memory.fingerprint(e) for e in others} | {fp}) == len(others) + 1
    lib.write_bytes(b"longer")  # the same path, another file
    assert memory.fingerprint(base) != fp
    changed = memory.fingerprint(base)
    monkeypatch.setenv("LD_LIBRARY_PATH", "/opt/x")
    assert memory.fingerprint(base) != changed
    with_var = memory.fingerprint(base)
    monkeypatch.delenv("LD_LIBRARY_PATH")
    assert memory.fingerprint(base, extra_env={"LD_LIBRARY_PATH": "/opt/x"}) == with_var
    assert memory.fingerprint(base, extra_env={"HOME": "/x"}) == changed  # not a key that matters
    for var in ("LD_PRELOAD", "CUDA_VISIBLE_DEVICES", "CUDA_HOME"):
        monkeypatch.setenv(var, "1")
        assert memory.fingerprint(base) != changed, var
        monkeypatch.delenv(var)


def test_the_fingerprint_ignores_the_order_of_gpus_and_libraries_and_takes_unknown_values(tmp_path):
    """GPUs and libraries are sets: listed in another order they are the same machine. Unknown values (None)
    are hashed as they are, beside known ones, without a traceback."""
    a, b = tmp_path / "liba.so.1", tmp_path / "libb.so.1"
    a.write_bytes(b"a")
    b.write_bytes(b"bb")
    two = ("NVIDIA H100 80GB HBM3", "Tesla T4")
    env = _env(gpus=two, libraries=[str(a), str(b)])
    swapped = _env(gpus=two, libraries=[str(b), str(a)])
    swapped.gpus.reverse()
    assert memory.fingerprint(env) == memory.fingerprint(swapped)
    odd = _env(gpus=two, libraries=[str(a), str(tmp_path / "missing.so")])
    odd.gpus[0].uuid = odd.gpus[1].name = odd.gpus[1].compute_capability = None
    odd.libraries[0].version = "9.1.0"
    assert re.fullmatch(r"[0-9a-f]{64}", memory.fingerprint(odd))
    assert memory.fingerprint(odd) != memory.fingerprint(_env(gpus=two, libraries=[str(a)]))


def test_a_mapped_library_that_was_missing_is_recalled_until_it_appears(tmp_path):
    lib = tmp_path / "libcudnn.so.9"
    report = Report(status="verified", frameworks=[FrameworkReport(
        framework="torch", status="verified", version="2.14.1", device_name="NVIDIA H100 80GB HBM3",
        mapped_libraries=[{"path": str(lib), "soname": "libcudnn.so.9"}])])
    assert memory.store(A, report)
    assert _file()["entries"][A]["mapped"] == [[str(lib), None, None]]
    assert memory.load(A, _env()) is not None  # still missing: the same
    lib.write_bytes(b"one")
    assert memory.load(A, _env()) is None


def test_the_data_stamp_follows_the_matrix_files(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.json").write_text("{}")
    stamp = memory.data_stamp(str(data))
    assert re.fullmatch(r"[0-9a-f]{24}", stamp) and memory.data_stamp(str(data)) == stamp
    (data / "notes.txt").write_text("not data")
    (data / "sub.json").mkdir()
    assert memory.data_stamp(str(data)) == stamp  # only the .json files count
    (data / "a.json").write_text('{"x": 1}')
    edited = memory.data_stamp(str(data))
    assert edited != stamp
    (data / "b.json").write_text("{}")
    assert memory.data_stamp(str(data)) not in (stamp, edited)
    (data / "b.json").rename(data / "c.json")  # the same bytes under another name
    renamed = memory.data_stamp(str(data))
    assert renamed not in (stamp, edited)
    (data / "c.json").chmod(0)
    if os.geteuid() != 0:
        assert memory.data_stamp(str(data)) != renamed
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "a.json").write_text('{"x": 1}')
    assert memory.data_stamp(str(copy)) != edited  # another folder is another matrix
    assert memory.data_stamp(str(tmp_path / "absent")) == memory.data_stamp(str(tmp_path / "absent"))
    assert memory.data_stamp() == memory.data_stamp() and memory.data_stamp() != stamp


def test_the_fix_key_follows_the_question(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    key = memory.fix_key("fp", ["torch", "jax"], str(data), driver="535.104.05", gpus=["Tesla T4", "A100"],
                         installer="uv", mirror="https://m.example/simple")
    assert re.fullmatch(r"fix:[0-9a-f]{64}", key)
    assert memory.fix_key("fp", ["jax", "torch"], str(data), driver="535.104.05", gpus=["A100", "Tesla T4"],
                          installer="uv", mirror="https://m.example/simple") == key  # order does not matter
    variants = [memory.fix_key("fp2", ["torch", "jax"], str(data), driver="535.104.05", gpus=["Tesla T4", "A100"],
                               installer="uv", mirror="https://m.example/simple"),
                memory.fix_key("fp", ["torch"], str(data), driver="535.104.05", gpus=["Tesla T4", "A100"],
                               installer="uv", mirror="https://m.example/simple"),
                memory.fix_key("fp", ["torch", "jax"], str(data), driver="550.54.15", gpus=["Tesla T4", "A100"],
                               installer="uv", mirror="https://m.example/simple"),
                memory.fix_key("fp", ["torch", "jax"], str(data), driver="535.104.05", gpus=["Tesla T4"],
                               installer="uv", mirror="https://m.example/simple"),
                memory.fix_key("fp", ["torch", "jax"], str(data), driver="535.104.05", gpus=["Tesla T4", "A100"],
                               installer="pip", mirror="https://m.example/simple"),
                memory.fix_key("fp", ["torch", "jax"], str(data), driver="535.104.05", gpus=["Tesla T4", "A100"],
                               installer="uv"),
                memory.fix_key("fp", ["torch", "jax"], str(tmp_path), driver="535.104.05",
                               gpus=["Tesla T4", "A100"], installer="uv", mirror="https://m.example/simple")]
    assert len(set(variants) | {key}) == len(variants) + 1
    assert memory.fix_key("fp", []) == memory.fix_key("fp", [], None, driver=None, gpus=None)


# --- issue #28: the survivors of the mutation run ------------------------------------------------------------

def _opens(monkeypatch, files: dict[str, object]) -> None:
    """memory's own ``open``: the paths in ``files`` read from the given bytes (an OSError instance: that
    error), every other path as usual. /etc/machine-id and the matrix files stay untouched."""
    import builtins
    import io

    real = builtins.open

    def fake(path, mode="r", *args, **kwargs):
        got = files.get(os.fspath(path))
        if got is None:
            return real(path, mode, *args, **kwargs)
        if isinstance(got, OSError):
            raise got
        return io.BytesIO(got)

    monkeypatch.setattr(memory, "open", fake, raising=False)


def test_the_machine_id_comes_from_etc_then_dbus_and_is_part_of_the_fingerprint(monkeypatch):
    gone = FileNotFoundError(2, "No such file or directory")
    _opens(monkeypatch, {"/etc/machine-id": b"0123abcd\n", "/var/lib/dbus/machine-id": b"dbus-id\n"})
    assert memory._machine_id() == "0123abcd"
    first = memory.fingerprint(_env())
    _opens(monkeypatch, {"/etc/machine-id": gone, "/var/lib/dbus/machine-id": b"dbus-id\n"})
    assert memory._machine_id() == "dbus-id"
    assert memory.fingerprint(_env()) != first  # another machine with the same host name: another result
    _opens(monkeypatch, {"/etc/machine-id": gone, "/var/lib/dbus/machine-id": gone})
    assert memory._machine_id() == ""
    _opens(monkeypatch, {"/etc/machine-id": b"\xff\xfeid\xc3\xa9\n"})  # not ASCII: replaced, never a traceback
    assert memory._machine_id() == "\ufffd\ufffdid\ufffd\ufffd"


def test_the_fingerprint_follows_the_host_name_and_an_unset_variable_is_an_empty_one(monkeypatch, tmp_path):
    import collections

    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    unset = memory.fingerprint(_env())
    monkeypatch.setenv("LD_LIBRARY_PATH", "")
    assert memory.fingerprint(_env()) == unset  # the loader reads both alike
    real = os.uname()
    fake = collections.namedtuple("uname", "sysname nodename release version machine")
    monkeypatch.setattr(os, "uname", lambda: fake(real.sysname, "another-host", real.release, real.version,
                                                  real.machine))
    assert memory.fingerprint(_env()) != unset


def test_a_library_replaced_in_place_with_another_size_is_another_environment(tmp_path):
    lib = tmp_path / "libcudnn.so.9"
    lib.write_bytes(b"one")
    st = lib.stat()
    before = memory.fingerprint(_env(libraries=[str(lib)]))
    lib.write_bytes(b"a longer one")
    os.utime(lib, ns=(st.st_atime_ns, st.st_mtime_ns))  # the same time stamp: only the size tells
    assert memory.fingerprint(_env(libraries=[str(lib)])) != before


def test_the_default_data_stamp_is_the_shipped_matrixs(monkeypatch):
    from cudamatrix.matrix.data import default_data_dir

    assert memory.data_stamp() == memory.data_stamp(str(default_data_dir()))


def test_an_unreadable_matrix_file_changes_the_data_stamp(tmp_path, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    (data / "torch.json").write_text("{}")
    readable = memory.data_stamp(str(data))
    _opens(monkeypatch, {str(data / "torch.json"): PermissionError(13, "Permission denied")})
    unreadable = memory.data_stamp(str(data))
    assert re.fullmatch(r"[0-9a-f]{24}", unreadable) and unreadable != readable


def test_the_fix_key_tells_two_mirrors_apart(tmp_path):
    one = memory.fix_key("fp", ["torch"], str(tmp_path), mirror="https://a.example/simple")
    assert one != memory.fix_key("fp", ["torch"], str(tmp_path), mirror="https://b.example/simple")


def test_the_notes_of_an_ignored_memory_are_exact():
    assert memory.store(A, _report())
    path = memory.cache_dir() / memory.CACHE_FILE
    for content, note in (
            ("{not json", "verification memory ignored (not valid JSON: Expecting property name enclosed in double "
                          "quotes: line 1 column 2 (char 1)); it is rebuilt"),
            ("[]", "verification memory ignored (not in this version's format); it is rebuilt")):
        path.write_text(content)
        notes: list[str] = []
        assert memory.load(A, notes=notes) is None and notes == [note]
    assert memory.store(A, _report())
    data = _file()
    data["entries"][B] = dict(data["entries"][A], at="edited")
    _rewrite(data)
    notes = []
    assert memory.load(B, notes=notes) is None
    assert notes == ["verification memory: an entry not written by this user's cudamatrix was ignored"]
    (memory.cache_dir() / "verify.key").unlink()
    notes = []
    assert memory.load(A, notes=notes) is None
    assert notes == ["verification memory ignored (no secret to check it with); it is rebuilt"]
    assert memory.store(A, _report())
    notes = []
    assert memory.load(A, _env(gpus=()), notes) is None
    assert notes == ["verification memory: the remembered result does not match this machine any more; "
                     "verifying again"]


def _resign(entry_of_a) -> None:
    data = _file()
    entry_of_a(data["entries"][A])
    data["entries"][A]["mac"] = memory._mac(user_key(create=False)[0], A, data["entries"][A])
    _rewrite(data)


def test_a_signed_entry_without_its_optional_lists_is_still_a_report():
    """Entries of an older writer may lack the frameworks, a framework's mapped libraries, or the mapped files:
    an absent list is an empty one."""
    assert memory.store(A, _report())
    _resign(lambda e: (e["report"]["frameworks"][0].pop("mapped_libraries", None), e.pop("mapped", None)))
    got = memory.load(A)
    assert got is not None and got.frameworks[0].mapped_libraries == []
    _resign(lambda e: e["report"].pop("frameworks"))
    got = memory.load(A, _env())
    assert got is not None and got.frameworks == []


def test_a_signed_entry_with_a_mapped_file_that_is_not_a_list_is_refused_without_a_traceback():
    assert memory.store(A, _report())
    _resign(lambda e: e.update(mapped=[5]))
    notes: list[str] = []
    assert memory.load(A, notes=notes) is None and notes and "does not match this machine" in notes[0]


def test_the_installed_framework_is_looked_up_under_all_its_distribution_names():
    tf = Report(status="failed", frameworks=[FrameworkReport(framework="tensorflow", status="failed",
                                                             version="2.15.0")])
    assert memory.store(A, tf)
    assert memory.load(A, _env(packages={"tensorflow-cpu": "2.15.0"})) is not None
    assert memory.load(A, _env(packages={"tensorflow-cpu": "2.16.1"})) is None  # upgraded since
    other = Report(status="failed", frameworks=[FrameworkReport(framework="paddle", status="failed", version="3.0")])
    assert memory.store(B, other)
    assert memory.load(B, _env(packages={"paddle": "3.0"})) is not None
    assert memory.load(B, _env(packages={"paddle": "3.1"})) is None
    local = Report(status="verified", frameworks=[FrameworkReport(framework="torch", status="verified",
                                                                  version="2.14.1+cu130")])
    assert memory.store(A, local)
    assert memory.load(A, _env(packages={"torch": "2.14.1+cu130"})) is not None  # the local label is not the version
    assert memory.load(A, _env(packages={"torch": "2.14.0+cu130"})) is None


def test_recall_consistent_checks_the_environment_and_says_why():
    assert memory.store(A, _report(), env={"LD_LIBRARY_PATH": "/x"})
    notes: list[str] = []
    assert memory.recall_consistent(A, _env(gpus=()), notes) is None
    assert notes == ["verification memory: the remembered result does not match this machine any more; "
                     "verifying again"]
    assert memory.recall_consistent(A, _env()) == (memory.load(A), {"LD_LIBRARY_PATH": "/x"})


def test_a_memory_that_cannot_be_written_says_so(monkeypatch):
    assert memory.store(A, _report())  # the key exists
    import errno

    real = os.write

    def full(fd, data):
        if os.path.dirname(os.readlink(f"/proc/self/fd/{fd}")) == str(memory.cache_dir()):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(os, "write", full)
        notes: list[str] = []
        assert memory.store(B, _report(), notes=notes) is False
    path = memory.cache_dir() / memory.CACHE_FILE
    assert notes == [f"verification memory not written: {path}: cannot be written (No space left on device)"]
    assert memory.load(A) is not None and memory.load(B) is None


def test_a_key_open_to_others_is_named_when_storing():
    assert memory.store(A, _report())
    key = memory.cache_dir() / "verify.key"
    key.chmod(0o644)
    notes: list[str] = []
    assert memory.store(B, _report(), notes=notes) is False
    assert notes == [f"verification memory: {key} has mode 0644: others may read or change it"]


def test_in_an_installed_wheel_the_data_stamp_is_of_the_packaged_data(tmp_path, monkeypatch):
    """A wheel ships the matrix inside the package (cudamatrix/data); a checkout has it beside (data/)."""
    from cudamatrix.matrix import shipped

    package = tmp_path / "site" / "cudamatrix"
    (package / "matrix").mkdir(parents=True)
    (package / "data").mkdir()
    (package / "data" / "torch.json").write_text('{"releases": []}')
    monkeypatch.setattr(shipped, "__file__", str(package / "matrix" / "shipped.py"))  # where the data is found
    assert memory.data_stamp() == memory.data_stamp(str(package / "data"))
    assert memory.data_stamp() != memory.data_stamp(str(tmp_path / "site" / "data"))


def test_a_memory_file_whose_keys_were_reordered_is_still_recalled():
    """The MAC is over canonical JSON (sorted keys), not over the file's layout: a memory rewritten by a tool
    that sorts keys or indents is still this user's."""
    assert memory.store(A, _report(), env={"LD_LIBRARY_PATH": "/x"})
    path = memory.cache_dir() / memory.CACHE_FILE
    data = json.loads(path.read_text())
    entry = data["entries"][A]
    data["entries"][A] = {k: entry[k] for k in sorted(entry, reverse=True)}
    data["entries"][A]["report"] = dict(reversed(list(entry["report"].items())))
    _rewrite(data)
    got = memory.load(A)
    assert got is not None and got.frameworks[0].version == "2.14.1"
