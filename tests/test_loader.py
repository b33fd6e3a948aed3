"""The loader model against the truth: gcc-built libraries with DT_RPATH, DT_RUNPATH or neither, dlopened by a
small C program whose /proc/self/maps says which file ld.so really mapped."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from cudamatrix.detect import elf
from loader_cases import (MID_C, TOP_C, clean_env, driver, leaf, linked, mapped_with_soname, opener, predict,
                          record, rpath, runpath, truth)

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None or not os.path.exists("/proc/self/maps"),
                                reason="needs gcc and /proc (Linux)")


@pytest.fixture(scope="module")
def parts(tmp_path_factory) -> dict[str, Path]:
    """Three different libleaf.so.1 (folders a, b, c) and objects that need it, linked three ways."""
    t = tmp_path_factory.mktemp("ld")
    p = {"root": t, "a": leaf(t / "a", 1).parent, "b": leaf(t / "b", 2).parent, "c": leaf(t / "c", 3).parent}
    p["mid_rpath"] = linked(t / "mid", "libmid_rpath.so", MID_C, p["a"], "libleaf.so.1", rpath("$ORIGIN/../a"))
    p["mid_runpath"] = linked(t / "mid", "libmid_runpath.so", MID_C, p["a"], "libleaf.so.1",
                              runpath("${ORIGIN}/../a"))
    p["mid_none"] = linked(t / "mid", "libmid_none.so", MID_C, p["a"], "libleaf.so.1", [])
    # a chain: the top object's DT_RPATH serves its dependency's dependency (mid_none has no path of its own)
    p["top_rpath"] = linked(t / "top", "libtop_rpath.so", TOP_C, t / "mid", "libmid_none.so",
                            rpath("$ORIGIN/../mid:$ORIGIN/../a"))
    # the same chain, but the middle object has DT_RUNPATH: ld.so then skips every DT_RPATH for its needs
    p["mid_runpath_b"] = linked(t / "mid2", "libmid_none.so", MID_C, p["b"], "libleaf.so.1", runpath("$ORIGIN/../c"))
    p["top_over_runpath"] = linked(t / "top2", "libtop_rpath.so", TOP_C, t / "mid2", "libmid_none.so",
                                   rpath("$ORIGIN/../mid2:$ORIGIN/../a"))
    # $LIB: one copy in each place $LIB can name; the truth says which one this glibc means
    for n, sub in enumerate(("lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu", "lib64", "lib"), start=10):
        leaf(t / "libtok" / sub, n)
    p["mid_lib"] = linked(t / "libtok" / "x", "libmid_lib.so", MID_C, p["a"], "libleaf.so.1", rpath("$ORIGIN/../$LIB"))
    # a DT_RUNPATH over 4 KiB (TensorFlow 2.20's libtensorflow_framework.so.2 carries 21 KiB), the one folder
    # that holds the library last
    p["mid_long"] = linked(t / "mid", "libmid_long.so", MID_C, p["a"], "libleaf.so.1",
                           runpath(":".join([f"/nonexistent/{i:04d}" for i in range(400)] + ["$ORIGIN/../a"])))
    p["open_rpath"] = opener(t / "op", "libopen_rpath.so", rpath("$ORIGIN/../a"))
    p["open_runpath"] = opener(t / "op", "libopen_runpath.so", runpath("$ORIGIN/../a"))
    p["driver"] = driver(t / "bin")
    return p


CASES = {
    # name: (top object key, environment, cwd key, expected folder key)
    "DT_RPATH beats LD_LIBRARY_PATH": ("mid_rpath", {"LD_LIBRARY_PATH": "{b}"}, "root", "a"),
    "DT_RUNPATH loses to LD_LIBRARY_PATH": ("mid_runpath", {"LD_LIBRARY_PATH": "{b}"}, "root", "b"),
    "DT_RUNPATH (${ORIGIN}) when LD_LIBRARY_PATH lacks it": ("mid_runpath", {"LD_LIBRARY_PATH": "{c}/none"}, "root", "a"),
    "no path: LD_LIBRARY_PATH": ("mid_none", {"LD_LIBRARY_PATH": "{c}:{b}"}, "root", "c"),
    "LD_PRELOAD beats DT_RPATH": ("mid_rpath", {"LD_PRELOAD": "{c}/libleaf.so.1", "LD_LIBRARY_PATH": "{b}"}, "root",
                                  "c"),
    "empty LD_LIBRARY_PATH entry is the current folder": ("mid_none", {"LD_LIBRARY_PATH": ":{c}"}, "b", "b"),
    "relative LD_LIBRARY_PATH entry": ("mid_none", {"LD_LIBRARY_PATH": "nowhere:c"}, "root", "c"),
    "set but empty LD_LIBRARY_PATH is no path": ("mid_none", {"LD_LIBRARY_PATH": ""}, "b", None),
    "DT_RPATH of the loader chain ($ORIGIN)": ("top_rpath", {"LD_LIBRARY_PATH": "{b}"}, "root", "a"),
    "DT_RUNPATH stops the chain's DT_RPATH": ("top_over_runpath", {"LD_LIBRARY_PATH": "{b}"}, "root", "b"),
    "DT_RUNPATH of the object itself after LD_LIBRARY_PATH": ("top_over_runpath", {}, "root", "c"),
    "$LIB": ("mid_lib", {}, "root", "$LIB"),
    "DT_RUNPATH longer than 4 KiB": ("mid_long", {}, "root", "a"),
    "DT_RUNPATH longer than 4 KiB loses to LD_LIBRARY_PATH": ("mid_long", {"LD_LIBRARY_PATH": "{b}"}, "root", "b"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_prediction_matches_proc_self_maps(parts, case):
    top_key, extra, cwd_key, want = CASES[case]
    env = clean_env(**{k: v.format(**{k2: str(v2) for k2, v2 in parts.items()}) for k, v in extra.items()})
    cwd = parts[cwd_key]
    mapped = truth(parts["driver"], parts[top_key], env, cwd)
    leaves = mapped_with_soname(mapped, "libleaf.so.1")
    res = predict(parts["driver"], parts[top_key], env, cwd, "libleaf.so.1")
    record(case, res.path if res else None, res.rule if res else None, leaves)
    if want is None:  # the truth: nothing found, dlopen failed
        assert leaves == [] and res is not None and res.path is None
        return
    assert len(leaves) == 1, mapped
    if want != "$LIB":
        assert leaves[0] == str(parts[want] / "libleaf.so.1")  # the case is what its name says
    assert res is not None and res.path == leaves[0], (res, leaves)


DLOPEN_CASES = {
    # a library's own dlopen follows that library's rules: its DT_RPATH before LD_LIBRARY_PATH ...
    "dlopen from a DT_RPATH library": ("open_rpath", {"LD_LIBRARY_PATH": "{b}"}, "a"),
    # ... and its DT_RUNPATH after LD_LIBRARY_PATH
    "dlopen from a DT_RUNPATH library": ("open_runpath", {"LD_LIBRARY_PATH": "{b}"}, "b"),
    "dlopen from a DT_RUNPATH library, nothing on LD_LIBRARY_PATH": ("open_runpath", {}, "a"),
}


@pytest.mark.parametrize("case", list(DLOPEN_CASES))
def test_dlopen_follows_the_callers_rules(parts, case):
    top_key, extra, want = DLOPEN_CASES[case]
    env = clean_env(**{k: v.format(**{k2: str(v2) for k2, v2 in parts.items()}) for k, v in extra.items()})
    leaves = mapped_with_soname(truth(parts["driver"], parts[top_key], env, parts["root"], "open_leaf"),
                                "libleaf.so.1")
    res = predict(parts["driver"], parts[top_key], env, parts["root"], "libleaf.so.1", dlopened=True)
    record(case, res.path if res else None, res.rule if res else None, leaves)
    assert leaves == [str(parts[want] / "libleaf.so.1")]
    assert res is not None and res.path == leaves[0] and res.how == "dlopen", res


def test_rules_name_the_winner(parts):
    env = clean_env(LD_LIBRARY_PATH=str(parts["b"]))
    assert predict(parts["driver"], parts["mid_rpath"], env, parts["root"], "libleaf.so.1").rule == \
        "DT_RPATH of libmid_rpath.so"
    assert predict(parts["driver"], parts["mid_runpath"], env, parts["root"], "libleaf.so.1").rule == "LD_LIBRARY_PATH"
    pre = clean_env(LD_PRELOAD=str(parts["c"] / "libleaf.so.1"))
    assert predict(parts["driver"], parts["mid_rpath"], pre, parts["root"], "libleaf.so.1").rule == \
        "already loaded (LD_PRELOAD)"


def test_elf_reader_reads_what_the_linker_wrote(parts):
    d = elf.read_dynamic(str(parts["mid_rpath"]))
    assert (d.soname, d.needed[0], d.rpath, d.runpath) == ("libmid_rpath.so", "libleaf.so.1", "$ORIGIN/../a", None)
    d = elf.read_dynamic(str(parts["mid_runpath"]))
    assert (d.rpath, d.runpath, d.effective_rpath) == (None, "${ORIGIN}/../a", None)
    d = elf.read_dynamic(str(parts["mid_none"]))
    assert (d.rpath, d.runpath, d.needed) == (None, None, ("libleaf.so.1",))
    assert elf.read_dynamic(str(parts["driver"])).interp  # an executable names its ELF interpreter


@pytest.mark.parametrize("damage,message", [
    (lambda b: b"#!/bin/sh\necho hi\n", "not an ELF file"),
    (lambda b: b[:4] + b"\x01" + b[5:], "32-bit"),
    (lambda b: b[:5] + b"\x02" + b[6:], "big-endian"),
    (lambda b: b[:40], "truncated"),
    (lambda b: b[:64], "past the end"),
])
def test_elf_reader_refuses_cleanly(parts, tmp_path, damage, message):
    bad = tmp_path / "libbad.so"
    bad.write_bytes(damage(parts["mid_rpath"].read_bytes()))
    with pytest.raises(elf.ElfError, match=message):
        elf.read_dynamic(str(bad))
    assert elf.try_read(str(bad)) is None


def test_elf_reads_are_cached_by_file_identity(parts, tmp_path):
    copy = tmp_path / "libcopy.so"
    shutil.copy(parts["mid_rpath"], copy)
    first = elf.read_dynamic(str(copy))
    assert elf.read_dynamic(str(copy)) is first
    shutil.copy(parts["mid_runpath"], copy)  # same path, new content: read again
    assert elf.read_dynamic(str(copy)).runpath == "${ORIGIN}/../a"
