"""What the extension scan's shortcuts (issue #39) must not change: a RECORD read in a small piece first and the rest
after it, names answered once per set of torch libraries, the torch-symbol test kept per name."""
from __future__ import annotations

import pytest

from cudamatrix import proc
from cudamatrix.detect import cxxfilt, extensions
from cudamatrix.ldso import elfsyms


def test_a_record_past_the_first_read_is_read_to_its_end(tmp_path):
    meta = tmp_path / "big_ext-1.0.dist-info"
    meta.mkdir()
    (meta / "WHEEL").write_text("Wheel-Version: 1.0\nRoot-Is-Purelib: false\n")
    rows = [f"big_ext/data/file_{i:06d}.py,sha256=abcdefabcdefabcdefabcdef,1234\n" for i in range(1200)]
    head = "".join(rows).encode()
    assert len(head) > extensions._FIRST_READ
    # one row cut by the first read's end, one after it, one at the very end without a newline
    cut = extensions._FIRST_READ - len(b"big_ext/_C.so")
    body = head[:cut] + b"\nbig_ext/_C.so,sha256=x,1\n" + head[cut:] + b"big_ext/lib/libx.so.12,,\nbig_ext/_y.so,,"
    (meta / "RECORD").write_bytes(body)
    assert extensions._objects(str(meta)) == ["big_ext/_C.so", "big_ext/lib/libx.so.12", "big_ext/_y.so"]


class _Table:
    def __init__(self, defines: set[str]) -> None:
        self.names, self.asked = defines, []

    def defines(self, names):
        self.asked.append([n for n, _raw, _h in names])
        return {n for n, _raw, _h in names if n in self.names}


@pytest.fixture
def tables(monkeypatch):
    elfsyms.forget()
    made = {"/t/libc10.so": _Table({"a", "b"}), "/t/libtorch_cpu.so": _Table({"c"})}
    monkeypatch.setattr(elfsyms, "_hash_table", lambda lib: made[lib])
    yield made
    elfsyms.forget()


def test_names_answered_before_are_not_asked_again_and_the_answer_is_the_same(tables, monkeypatch):
    libs = ["/t/libc10.so", "/t/libtorch_cpu.so"]
    first = elfsyms.defined(libs, ["a", "c", "gone", "a"])
    assert first == ({"a", "c"}, [])
    assert tables["/t/libc10.so"].asked == [["a", "c", "gone"]] and tables["/t/libtorch_cpu.so"].asked == [["c", "gone"]]
    monkeypatch.setattr(elfsyms, "_hash_table", lambda lib: pytest.fail(f"{lib} read again"))
    assert elfsyms.defined(libs, ["gone", "c", "a"]) == first  # every name known: no table read
    assert elfsyms.defined(libs, ["gone"]) == (set(), [])


def test_the_torch_symbol_test_per_name_is_the_expressions():
    names = ["_ZN3c104cuda9SetDeviceEa", "_ZNK2at6Tensor4sizeEl", "_ZTVN5torch8autograd4NodeE", "aoti_torch_empty",
             "_ZN3std6vectorEv", "malloc", "_ZN3c10", "_ZNSt3c10x", "cudaMalloc", "_ZN5torch3jit4loadEv"]
    for _ in range(2):  # worked out, then remembered
        assert [extensions._is_torch_symbol(n) for n in names] == [
            bool(extensions.TORCH_SYMBOL.match(n)) for n in names]
    assert [extensions._is_torch_symbol(n) for n in names] == [True, True, True, True, False, False, False, False,
                                                                False, True]


@pytest.mark.skipif(proc.which("c++filt") is None, reason="needs c++filt")
def test_names_given_to_cxxfilt_as_arguments_read_as_they_read_on_its_input(monkeypatch):
    """c++filt flushes each line it reads from its input (a write, and a wake of our reader, per name): names that are
    one word of symbol characters go as its arguments, in batches; the lines are those its input gives."""
    tool = proc.which("c++filt")
    assert tool is not None
    names = ["_ZN3c104cuda9SetDeviceEa", "_ZN3c105ErrorC2ENS_14SourceLocationESs", "aoti_torch_empty_strided",
             "_ZN2at4_ops5zeros4callEN3c108ArrayRefINS2_6SymIntEEE", "_ZNK3c1010TensorImpl4sizeEl.cold", "_Znot_mangled"]
    by_input = proc.run([tool], input="\n".join(names) + "\n", timeout=10).stdout.splitlines()
    assert by_input[0] == "c10::cuda::SetDevice(signed char)"
    runs: list[list[str]] = []
    real = proc.run
    monkeypatch.setattr(cxxfilt.proc, "run", lambda argv, **kw: runs.append(argv) or real(argv, **kw))
    assert cxxfilt.filtered(tool, names, 10.0) == by_input and len(runs) == 1 and runs[0][:2] == [tool, "--"]
    runs.clear()
    monkeypatch.setattr(cxxfilt, "_ARGV_BYTES", 80)  # batches of two or three names
    assert cxxfilt.filtered(tool, names, 10.0) == by_input and len(runs) > 2
    runs.clear()
    odd = [*names, "_Z1fv _Z1gv"]  # not one word: its input reads it word by word, so all of them go there
    assert cxxfilt.filtered(tool, odd, 10.0) == [*by_input, "f() g()"] and runs == [[tool]]


@pytest.mark.skipif(proc.which("c++filt") is None, reason="needs c++filt")
def test_cxxfilt_is_found_on_path_and_its_absence_is_no_answer(tmp_path, monkeypatch):
    """c++filt is run by name, found on PATH as a shell finds it: where PATH holds it, the names come back read;
    where PATH holds no c++filt (an empty folder), there is no answer and nothing raises."""
    assert cxxfilt.demangled(["_ZN3c104cuda9SetDeviceEa"], 10.0) == ["c10::cuda::SetDevice(signed char)"]
    monkeypatch.setenv("PATH", str(tmp_path))
    assert cxxfilt.demangled(["_ZN3c104cuda9SetDeviceEa"], 10.0) is None
    assert cxxfilt.demangled([], 10.0) is None
