"""The loader model against the truth: gcc-built libraries with DT_RPATH, DT_RUNPATH or neither, dlopened by a
small C program whose /proc/self/maps says which file ld.so really mapped."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from loader_cases import (
    MID_C,
    TOP_C,
    clean_env,
    driver,
    leaf,
    linked,
    mapped_with_soname,
    opener,
    predict,
    record,
    rpath,
    runpath,
    truth,
)

from cudamatrix.detect import elf

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


@pytest.mark.slow
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


@pytest.mark.slow
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


# --- an object with both DT_RPATH and DT_RUNPATH; an ld.so.cache entry outside the default folders --------------

def _retag(path: Path, old: int, new: int) -> None:
    """Rewrite the one dynamic entry tagged ``old`` as ``new`` (its string stays): GNU ld writes either DT_RPATH
    or DT_RUNPATH, never both, so the second one is made from an entry that also points at a string
    (DT_AUXILIARY of ``-Wl,-f``, DT_SONAME of an executable). Found with readelf, not the reader under test."""
    import re
    import struct
    import subprocess

    sections = subprocess.run(["readelf", "-W", "-S", str(path)], capture_output=True, text=True, check=True).stdout
    m = re.search(r"\]\s+\.dynamic\s+DYNAMIC\s+[0-9a-f]+\s+([0-9a-f]+)\s+([0-9a-f]+)", sections)
    assert m, sections
    off, size = int(m.group(1), 16), int(m.group(2), 16)
    raw = bytearray(path.read_bytes())
    hits = [i for i in range(off, off + size, 16) if struct.unpack_from("<q", raw, i)[0] == old]
    assert len(hits) == 1, hits
    struct.pack_into("<q", raw, hits[0], new)
    path.write_bytes(bytes(raw))
    dynamic = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True, check=True).stdout
    assert "(RPATH)" in dynamic and "(RUNPATH)" in dynamic, dynamic


DT_AUXILIARY = 0x7FFFFFFD


@pytest.fixture(scope="module")
def both(parts) -> dict[str, Path]:
    """Objects carrying both dynamic tags, DT_RPATH naming a folder whose libleaf.so.1 ld.so must not pick."""
    if shutil.which("readelf") is None:
        pytest.skip("needs readelf")
    t = parts["root"] / "both"
    p = {}
    # needs libleaf.so.1 itself: DT_RPATH -> a, DT_RUNPATH -> c
    p["mid"] = linked(t / "mid", "libmid_both.so", MID_C, parts["a"], "libleaf.so.1",
                      rpath("$ORIGIN/../../a") + ["-Wl,-f,$ORIGIN/../../c"])
    _retag(p["mid"], DT_AUXILIARY, elf.DT_RUNPATH)
    # a loader whose dependency (no path of its own) needs libleaf.so.1: its DT_RPATH (-> a) would serve that
    # dependency, but it has a DT_RUNPATH too, so ld.so drops the DT_RPATH (glibc get-dynamic-info.h)
    p["top"] = linked(t / "top", "libtop_both.so", TOP_C, parts["root"] / "mid", "libmid_none.so",
                      rpath("$ORIGIN/../../mid:$ORIGIN/../../a") + ["-Wl,-f,$ORIGIN/../../mid"])
    _retag(p["top"], DT_AUXILIARY, elf.DT_RUNPATH)
    # the program itself: its DT_RPATH (-> a) would serve every object it dlopens; with DT_RUNPATH, none
    (t / "bin").mkdir(parents=True, exist_ok=True)
    (t / "bin" / "driver.c").write_text(parts["driver"].with_name("driver.c").read_text())
    from loader_cases import gcc
    gcc(["-o", "driver_both", "driver.c", "-ldl", f"-Wl,--disable-new-dtags,-rpath,{parts['a']}",
         f"-Wl,-soname,{parts['c']}"], t / "bin")
    p["driver"] = t / "bin" / "driver_both"
    _retag(p["driver"], elf.DT_SONAME, elf.DT_RUNPATH)
    return p


@pytest.mark.slow
def test_elf_reader_reads_both_tags_and_ignores_rpath(both):
    d = elf.read_dynamic(str(both["mid"]))
    assert (d.rpath, d.runpath) == ("$ORIGIN/../../a", "$ORIGIN/../../c")
    assert d.effective_rpath is None  # ld.so ignores DT_RPATH beside DT_RUNPATH


BOTH_CASES = {
    # name: (program, top object, environment, expected folder key or None: dlopen fails)
    "both tags: DT_RUNPATH, not DT_RPATH": ("driver", "mid", {}, "c"),
    "both tags: LD_LIBRARY_PATH beats DT_RUNPATH, DT_RPATH ignored": ("driver", "mid", {"LD_LIBRARY_PATH": "{b}"},
                                                                        "b"),
    "both tags on the loader: its DT_RPATH serves no dependency": ("driver", "top", {"LD_LIBRARY_PATH": "{b}"}, "b"),
    "both tags on the loader, nothing else: not found": ("driver", "top", {}, None),
    "both tags on the program: its DT_RPATH serves nothing": ("both_driver", "mid_none", {"LD_LIBRARY_PATH": "{b}"},
                                                                "b"),
}


@pytest.mark.parametrize("case", list(BOTH_CASES))
def test_an_object_with_both_tags_follows_runpath(parts, both, case):
    program_key, top_key, extra, want = BOTH_CASES[case]
    program = both["driver"] if program_key == "both_driver" else parts["driver"]
    top = both.get(top_key) or parts[top_key]
    env = clean_env(**{k: v.format(**{k2: str(v2) for k2, v2 in parts.items()}) for k, v in extra.items()})
    leaves = mapped_with_soname(truth(program, top, env, parts["root"]), "libleaf.so.1")
    res = predict(program, top, env, parts["root"], "libleaf.so.1")
    record(case, res.path if res else None, res.rule if res else None, leaves)
    if want is None:
        assert leaves == [] and res is not None and res.path is None, (leaves, res)
        return
    assert leaves == [str(parts[want] / "libleaf.so.1")]  # the case is what its name says
    assert res is not None and res.path == leaves[0], (res, leaves)
    assert "DT_RPATH" not in res.rule, res.rule


def _cache(parts, folder: Path) -> tuple[Path, list]:
    """A real ld.so.cache (``ldconfig -C``) whose only extra folder is ``folder``; its entries as ldconfig -p
    prints them, read through the same parser detect uses."""
    import subprocess

    from cudamatrix.detect import libraries

    work = parts["root"] / f"cache-{folder.name}"
    work.mkdir(exist_ok=True)
    (work / "ld.so.conf").write_text(f"{folder}\n")
    subprocess.run(["ldconfig", "-X", "-C", str(work / "ld.so.cache"), "-f", str(work / "ld.so.conf")],
                   check=True, capture_output=True, timeout=60)
    listing = subprocess.run(["ldconfig", "-p", "-C", str(work / "ld.so.cache")], check=True, capture_output=True,
                             text=True, timeout=60).stdout
    entries = libraries.parse_ldconfig(listing)
    assert any(e.soname == "libleaf.so.1" and e.path == str(folder / "libleaf.so.1") for e in entries), listing
    return work / "ld.so.cache", entries


def _model(program: Path, top: Path, env: dict, cwd: Path, entries: list, root: str = "/"):
    from cudamatrix.detect.loader import LinkMap, system_search

    lm = LinkMap(system_search(env, entries, str(program), cwd=str(cwd), root=root))
    lm.load(str(top), None)
    return next((r for r in lm.resolutions if r.name == "libleaf.so.1"), None)


def test_an_ld_so_cache_entry_outside_the_default_folders_is_found(parts):
    """The cache names a folder no default search reaches (c): the model finds it there, by that rule; without
    the entry nothing is found (the truth of that second half is the plain process: dlopen fails)."""
    if shutil.which("ldconfig") is None:
        pytest.skip("needs ldconfig")
    _, entries = _cache(parts, parts["c"])
    env = clean_env()
    res = _model(parts["driver"], parts["mid_none"], env, parts["root"], entries)
    assert res is not None and res.path == str(parts["c"] / "libleaf.so.1") and res.rule == "ld.so cache", res
    assert mapped_with_soname(truth(parts["driver"], parts["mid_none"], env, parts["root"]), "libleaf.so.1") == []
    res = _model(parts["driver"], parts["mid_none"], env, parts["root"], [e for e in entries
                                                                           if e.soname != "libleaf.so.1"])
    assert res is not None and res.path is None, res
    # LD_LIBRARY_PATH still comes first
    env_b = clean_env(LD_LIBRARY_PATH=str(parts["b"]))
    res = _model(parts["driver"], parts["mid_none"], env_b, parts["root"], entries)
    assert res is not None and res.path == str(parts["b"] / "libleaf.so.1") and res.rule == "LD_LIBRARY_PATH", res


@pytest.mark.slow
def test_the_ld_so_cache_is_searched_before_the_default_folders(parts, tmp_path):
    """The truth: a child in its own mount namespace sees the built cache at /etc/ld.so.cache and a different
    libleaf.so.1 in /usr/lib (an overlay of the real one, seen by nobody else); ld.so maps the cache's copy.
    The model, given the same cache and a root whose /usr/lib holds that other copy, says the same."""
    import subprocess

    if shutil.which("ldconfig") is None or shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs ldconfig, unshare and root (a private mount namespace)")
    cache, entries = _cache(parts, parts["c"])
    upper, work = tmp_path / "upper", tmp_path / "work"
    upper.mkdir()
    work.mkdir()
    shutil.copy2(parts["b"] / "libleaf.so.1", upper / "libleaf.so.1")
    script = (f"mount --bind {cache} /etc/ld.so.cache && "
              f"mount -t overlay overlay -o lowerdir=/usr/lib,upperdir={upper},workdir={work} /usr/lib && "
              f"test -f /usr/lib/libleaf.so.1 && exec {parts['driver']} {parts['mid_none']}")
    out = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script], env=clean_env(),
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0 and "mount" in out.stderr:
        pytest.skip(f"no private mounts here: {out.stderr.strip()[:200]}")
    leaves = [line.split(None, 5)[5] for line in out.stdout.splitlines()
              if len(line.split(None, 5)) == 6 and line.endswith("/libleaf.so.1")]
    assert sorted(set(leaves)) == [str(parts["c"] / "libleaf.so.1")], (out.stdout[-2000:], out.stderr)
    # the model: the same cache; default folders under a root whose usr/lib holds the other copy
    root = tmp_path / "root"
    (root / "usr" / "lib").mkdir(parents=True)
    shutil.copy2(parts["b"] / "libleaf.so.1", root / "usr" / "lib" / "libleaf.so.1")
    (root / "lib").symlink_to("usr/lib")
    res = _model(parts["driver"], parts["mid_none"], clean_env(), parts["root"], entries, root=str(root))
    assert res is not None and res.path == str(parts["c"] / "libleaf.so.1") and res.rule == "ld.so cache", res
    # and without the entry, the default folder's copy
    res = _model(parts["driver"], parts["mid_none"], clean_env(), parts["root"],
                 [e for e in entries if e.soname != "libleaf.so.1"], root=str(root))
    assert res is not None and res.path == str(root / "usr" / "lib" / "libleaf.so.1") and \
        res.rule == "default folder", res


# --- issue #28: the rest of the precedence list, and a link map that already holds objects --------------------

# the truth for several loads in one process: dlopen each argument in turn (by path, or by name when it has no
# slash), then print what the process maps
DRIVER_MANY_C = r"""
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int failed = 0;
    for (int i = 1; i < argc; i++)
        if (!dlopen(argv[i], RTLD_NOW)) { fprintf(stderr, "dlopen: %s\n", dlerror()); failed = 1; }
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4096];
    while (fgets(line, sizeof line, f)) fputs(line, stdout);
    return failed ? 3 : 0;
}
"""


@pytest.fixture(scope="module")
def more(parts) -> dict[str, Path]:
    """A program that dlopens several objects in turn, a loader with DT_RUNPATH only, a libleaf.so.1 copy under
    another file name, and a breadth-first trap (two paths to libleaf.so.1 at different depths)."""
    from loader_cases import gcc

    t = parts["root"] / "more"
    p: dict[str, Path] = {}
    (t / "bin").mkdir(parents=True)
    (t / "bin" / "many.c").write_text(DRIVER_MANY_C)
    gcc(["-o", "many", "many.c", "-ldl"], t / "bin")
    p["many"] = t / "bin" / "many"
    # DT_RUNPATH naming both its dependency's folder and a folder holding libleaf.so.1: ld.so uses it for the
    # loader's own needs only, so libmid_none.so (no path) does not find libleaf.so.1 through it
    p["top_runpath"] = linked(t / "top", "libtop_runpath.so", TOP_C, parts["root"] / "mid", "libmid_none.so",
                              runpath(f"{parts['root']}/mid:{parts['a']}"))
    # the same file content as c/libleaf.so.1 (DT_SONAME libleaf.so.1) under a name that is not its SONAME
    (t / "alias").mkdir()
    shutil.copy2(parts["c"] / "libleaf.so.1", t / "alias" / "libother.so")
    (t / "alias" / "liblink.so").symlink_to(parts["b"] / "libleaf.so.1")
    # breadth first: libbfs_top.so needs libp.so and libq.so; libp.so needs libleaf.so.1 (DT_RPATH -> a);
    # libq.so needs libr.so, which needs libleaf.so.1 (DT_RPATH -> b). ld.so maps libp.so's dependency (depth 2)
    # before libr.so's (depth 3), so a's copy is mapped and libr.so gets it by SONAME
    bfs = t / "bfs"
    linked(bfs, "libp.so", MID_C, parts["a"], "libleaf.so.1", rpath(str(parts["a"])))
    linked(bfs, "libr.so", "extern int which(void);\nint r(void) { return which(); }\n", parts["b"], "libleaf.so.1",
           rpath(str(parts["b"])))
    linked(bfs, "libq.so", "extern int r(void);\nint q(void) { return r(); }\n", bfs, "libr.so", rpath("$ORIGIN"))
    p["bfs_top"] = linked(bfs, "libbfs_top.so", "extern int mid(void), q(void);\nint t(void) { return mid() + q(); }\n",
                          bfs, "libp.so", [f"-L{bfs}", "-l:libq.so", *rpath("$ORIGIN")])
    return p


def _many(parts, more, env: dict[str, str], *names: Path | str) -> tuple[list[str], Any]:
    """(the real paths of the libleaf.so.1 copies (libother.so is one) a process maps after dlopen of each of ``names`` in turn, the model's link
    map after the same loads)."""
    from cudamatrix.detect import libraries
    from cudamatrix.detect.loader import LinkMap, system_search

    out = subprocess.run([str(more["many"]), *map(str, names)], env=env, cwd=parts["root"], capture_output=True,
                         text=True, timeout=30)
    leaves = sorted({line.split(None, 5)[5] for line in out.stdout.splitlines() if len(line.split(None, 5)) == 6
                     and os.path.basename(line.split(None, 5)[5]) in ("libleaf.so.1", "libother.so")})
    entries, _ = libraries.run_ldconfig(10)
    lm = LinkMap(system_search(env, entries, str(more["many"]), cwd=str(parts["root"])))
    for name in names:
        lm.load(str(name), None)
    return leaves, lm


def _leaf_loads(lm) -> list[tuple[str | None, str]]:
    return [(r.path, r.rule) for r in lm.resolutions if r.name == "libleaf.so.1"]


def test_dt_runpath_is_not_inherited_by_dependencies(parts, more):
    """The loader's DT_RUNPATH holds libleaf.so.1, its dependency asks for it: not found (ld.so(8): DT_RUNPATH
    serves the object's own DT_NEEDED entries only), where the same folders as DT_RPATH would serve it."""
    leaves, lm = _many(parts, more, clean_env(), more["top_runpath"])
    assert leaves == []  # the truth: dlopen failed
    res = next(r for r in lm.resolutions if r.name == "libleaf.so.1")
    assert (res.path, res.rule, res.error) == (None, "not found", "not found"), res
    assert lm.find(str(more["top_runpath"])) is None and lm.objects == [lm.exe]  # the failed load left nothing


def test_a_library_already_loaded_by_soname_wins_over_every_path(parts, more):
    """libleaf.so.1 mapped from a (libmid_rpath.so's DT_RPATH): a later libmid_runpath.so, whose search would find
    b on LD_LIBRARY_PATH, gets the mapped copy by SONAME."""
    env = clean_env(LD_LIBRARY_PATH=str(parts["b"]))
    leaves, lm = _many(parts, more, env, parts["mid_rpath"], parts["mid_runpath"])
    a = str(parts["a"] / "libleaf.so.1")
    assert leaves == [a]
    assert _leaf_loads(lm) == [(a, "DT_RPATH of libmid_rpath.so"), (a, "already loaded (a dependency loaded earlier)")]
    assert os.path.realpath(lm.resolutions[-1].found_as) == a and lm.resolutions[-1].requested_by == str(parts["mid_runpath"])


def test_a_library_opened_by_path_answers_to_its_soname(parts, more):
    """dlopen of c's copy under the file name libother.so: its DT_SONAME (libleaf.so.1) now answers for it, so
    libmid_rpath.so's DT_RPATH (a) is never searched."""
    other = str(parts["root"] / "more" / "alias" / "libother.so")
    leaves, lm = _many(parts, more, clean_env(), other, parts["mid_rpath"])
    assert leaves == [other]
    assert _leaf_loads(lm) == [(other, "already loaded (opened earlier)")]
    assert lm.find(other).names == {other, "libleaf.so.1"}


def test_the_same_file_under_another_path_is_mapped_once(parts, more):
    """A symbolic link to b's copy, then b's copy by its own path: one object (same device and inode), which
    answers to both names; a dependency then gets it by SONAME."""
    link, real = parts["root"] / "more" / "alias" / "liblink.so", str(parts["b"] / "libleaf.so.1")
    leaves, lm = _many(parts, more, clean_env(), link, real, parts["mid_rpath"])
    assert leaves == [real]
    assert [(r.name, r.path, r.rule) for r in lm.resolutions] == [
        (str(link), real, "path"), (real, real, "path"), (str(parts["mid_rpath"]), str(parts["mid_rpath"]), "path"),
        ("libleaf.so.1", real, "already loaded (opened earlier)")]
    obj = lm.find(real)
    assert obj.path == str(link) and {str(link), real, "libleaf.so.1"} <= obj.names and len(lm.objects) == 3


def test_dependencies_are_mapped_breadth_first(parts, more):
    leaves, lm = _many(parts, more, clean_env(), more["bfs_top"])
    a = str(parts["a"] / "libleaf.so.1")
    assert leaves == [a]
    assert _leaf_loads(lm) == [(a, "DT_RPATH of libp.so"), (a, "already loaded (a dependency loaded earlier)")]
    assert [r.requested_by for r in lm.resolutions if r.name == "libleaf.so.1"] == \
        [str(more["bfs_top"].parent / "libp.so"), str(more["bfs_top"].parent / "libr.so")]
