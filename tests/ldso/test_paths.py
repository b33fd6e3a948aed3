"""ldso.paths.realpath: os.path.realpath's answers, with each folder resolved once per detection; matching and
glob_one: glob's."""
from __future__ import annotations

import fnmatch
import glob
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cudamatrix.ldso import paths


@pytest.fixture
def tree(tmp_path):
    """Folders reached through links, relative and absolute links to files, a chain, a loop, a broken link."""
    (tmp_path / "a" / "b" / "c").mkdir(parents=True)
    (tmp_path / "x" / "y").mkdir(parents=True)
    (tmp_path / "x" / "lnk").symlink_to(tmp_path / "a" / "b")
    (tmp_path / "a" / "b" / "cl").symlink_to("c")
    (tmp_path / "a" / "b" / "c" / "libf.so.1.2").write_text("")
    (tmp_path / "a" / "b" / "c" / "libf.so.1").symlink_to("libf.so.1.2")
    (tmp_path / "a" / "b" / "c" / "libg.so").symlink_to("../c/libf.so.1")
    (tmp_path / "x" / "loop1").symlink_to("loop2")
    (tmp_path / "x" / "loop2").symlink_to("loop1")
    (tmp_path / "x" / "broken").symlink_to(tmp_path / "nowhere")
    paths.forget()
    return tmp_path


CASES = ["x/lnk/c/libf.so.1", "x/lnk/cl/libf.so.1", "x/lnk/cl/libg.so", "x/loop1", "x/broken", "x/lnk/../y",
         "x/lnk/cl/../c/libf.so.1.2", "x/", "x//lnk/./c/libf.so.1", "nothere/libf.so", "a/b/c/libf.so.1.2"]


@pytest.mark.parametrize("case", CASES)
def test_same_answer_as_os_path_realpath(tree, case):
    path = str(tree / case) if not case.endswith("/") else str(tree / case) + "/"
    assert paths.realpath(path) == os.path.realpath(path)
    assert paths.realpath(path) == os.path.realpath(path)  # the second time from the folder memory


def test_relative_paths_and_root(tree, monkeypatch):
    monkeypatch.chdir(tree / "x")
    for case in ("lnk/cl/libg.so", "rel/none", ".", "/"):
        assert paths.realpath(case) == os.path.realpath(case)


def test_forget_sees_a_folder_replaced_by_a_link(tree):
    """A folder remembered in one detection and replaced by a link before the next: forget() answers anew."""
    first = paths.realpath(str(tree / "x" / "y" / "libz.so"))
    assert first == str(tree / "x" / "y" / "libz.so")
    (tree / "x" / "y").rmdir()
    (tree / "x" / "y").symlink_to(tree / "a" / "b" / "c")
    paths.forget()
    assert paths.realpath(str(tree / "x" / "y" / "libz.so")) == str(tree / "a" / "b" / "c" / "libz.so")


# --- matching / glob_one: glob's answers without a regular expression per pattern ------------------------------

_PATTERNS = ["_C.*.so", "nvidia_*.dist-info", "*", "*.so", "xla_extension*.so", "_jax*.so", "cuda*",
             "libcublas.so.*[0-9]", "libnvToolsExt.so.*[0-9]", "libcudnn*.so.*[0-9a-c]", "lib*[z-a]", "a*b*c",
             "*[0-9]", "x?y", "[!a]*", "lib[-a]", "*a*", "libcudart.so.13"]


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(names=st.lists(st.text(alphabet="abcxyz._-019*[]?lLsoC", max_size=12), max_size=12),
       pattern=st.sampled_from(_PATTERNS) | st.text(alphabet="abc.*[]-09!?", max_size=8))
def test_matching_is_glob_filtering(names, pattern):
    want = [n for n in fnmatch.filter(names, pattern) if not n.startswith(".")]
    assert paths.matching(names, pattern) == want


def test_glob_one_is_glob(tmp_path):
    names = ["libcudnn.so.9", "libcudnn.so.9.24.0", "libcudnn.so", ".libcudnn.so.9", "_C.cpython-311.so", "cuda-13.0",
             "cuda", "cudax", "lib", "sub"]
    for n in names:
        (tmp_path / n).write_text("")
    (tmp_path / "cudadir").mkdir()
    (tmp_path / "cudalink").symlink_to(tmp_path / "cudadir")
    for pattern in _PATTERNS:
        assert sorted(paths.glob_one(str(tmp_path), pattern)) == sorted(glob.glob(os.path.join(tmp_path, pattern)))
    assert sorted(paths.glob_one(str(tmp_path), "cuda*", dirs=True)) == \
        sorted(p.rstrip("/") for p in glob.glob(os.path.join(tmp_path, "cuda*", "")))
    assert paths.glob_one(str(tmp_path / "absent"), "*") == []
