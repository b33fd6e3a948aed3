"""The loader model against the truth: gcc-built libraries with DT_RPATH, DT_RUNPATH or neither, dlopened by a
small C program whose /proc/self/maps says which file ld.so really mapped."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support import fakes, loader_cases
from support.loader_cases import (
    MID_C,
    TOP_C,
    clean_env,
    driver,
    gcc,
    kept,
    kept_root,
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

from cudamatrix.ldso import elf
from cudamatrix.ldso.linkmap import HASWELL_FLAGS, XEON_PHI_FLAGS, _host_cpu, dl_platform, host_platform

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None or not os.path.exists("/proc/self/maps"),
                                reason="needs gcc and /proc (Linux)")


@pytest.fixture(scope="module")
def parts() -> dict[str, Path]:
    """Three different libleaf.so.1 (folders a, b, c) and objects that need it, linked three ways (built once,
    kept for later sessions: :func:`loader_cases.kept`)."""
    return kept(ROOT / "ld", _build_parts)


ROOT = kept_root(__file__, loader_cases.__file__, fakes.__file__)


def _build_parts(t: Path) -> dict[str, Path]:
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
    # $PLATFORM (braced and not): a copy in each folder the token can name here (the kernel's machine name and
    # glibc's x86-64 platform names); ld.so maps one of them, and the model must name the same one
    machine = os.uname().machine
    leaf(t / "plat" / machine, 20)
    for n, name in enumerate(("haswell", "xeon_phi"), start=22):
        if name != machine:
            leaf(t / "plat" / name, n)
    p["mid_platform"] = linked(t / "plat" / "x", "libmid_platform.so", MID_C, p["a"], "libleaf.so.1",
                               rpath("/nonexistent/$PLATFORM:$ORIGIN/../${PLATFORM}"))
    # a relative DT_RPATH entry and an empty one: both against the process's current folder
    p["mid_relative"] = linked(t / "mid", "libmid_relative.so", MID_C, p["a"], "libleaf.so.1", rpath("nowhere:c"))
    p["mid_empty"] = linked(t / "mid", "libmid_empty.so", MID_C, p["a"], "libleaf.so.1", rpath("/nonexistent::"))
    # DF_1_NODEFLIB: a system library (the ld.so cache and the default folders hold it) is not searched for
    p["nodeflib"] = linked(t / "mid", "libnodeflib.so", "extern int zlibVersion(void);\nint z(void) { return "
                           "zlibVersion() != 0; }\n", Path("/nonexistent"), "libz.so.1", ["-Wl,-z,nodeflib"])
    _set_nodeflib(p["nodeflib"])
    p["deflib"] = linked(t / "mid", "libdeflib.so", "extern int zlibVersion(void);\nint z(void) { return "
                         "zlibVersion() != 0; }\n", Path("/nonexistent"), "libz.so.1", [])
    # the program's own DT_RPATH with $ORIGIN, run through a symbolic link in another folder: its origin is
    # the real file's folder (/proc/self/exe), where a library's is the folder of the path it was loaded by
    (t / "bin2").mkdir()
    (t / "bin2" / "driver.c").write_text((t / "bin" / "driver.c").read_text())
    gcc(["-o", "driver_origin", "driver.c", "-ldl", *rpath("$ORIGIN/../a")], t / "bin2")
    p["driver_origin"] = t / "bin2" / "driver_origin"
    (t / "elsewhere" / "bin").mkdir(parents=True)
    (t / "elsewhere" / "bin" / "driver_origin").symlink_to(p["driver_origin"])
    p["driver_link"] = t / "elsewhere" / "bin" / "driver_origin"
    (t / "elsewhere" / "mid").mkdir()
    (t / "elsewhere" / "mid" / "libmid_rpath.so").symlink_to(p["mid_rpath"])
    p["mid_rpath_link"] = t / "elsewhere" / "mid" / "libmid_rpath.so"
    leaf(t / "elsewhere" / "a", 21)
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
    "$PLATFORM": ("mid_platform", {}, "root", "$PLATFORM"),
    "relative DT_RPATH entry": ("mid_relative", {"LD_LIBRARY_PATH": "{b}"}, "root", "c"),
    "empty DT_RPATH entry is the current folder": ("mid_empty", {"LD_LIBRARY_PATH": "{a}"}, "c", "c"),
    "$ORIGIN of a library loaded through a link is the link's folder": ("mid_rpath_link", {}, "root", "elsewhere_a"),
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
    if want == "$PLATFORM":
        assert leaves[0] == str(parts["root"] / "plat" / host_platform(os.uname().machine) / "libleaf.so.1")
    elif want == "elsewhere_a":
        assert leaves[0] == str(parts["root"] / "elsewhere" / "a" / "libleaf.so.1")
    elif want != "$LIB":
        assert leaves[0] == str(parts[want] / "libleaf.so.1")  # the case is what its name says
    assert res is not None and res.path == leaves[0], (res, leaves)


# glibc's $PLATFORM (sysdeps/x86/cpu-features.c): (machine, glibc, vendor, flags) -> the expansion
SKYLAKE_SP = HASWELL_FLAGS | {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"}
KNL = HASWELL_FLAGS | {"avx512f"} | XEON_PHI_FLAGS
PLATFORMS = [
    ("x86_64", (2, 35), "GenuineIntel", HASWELL_FLAGS, "haswell"),  # Ubuntu 22.04 on Haswell or later
    ("x86_64", (2, 36), "GenuineIntel", SKYLAKE_SP, "haswell"),  # Debian 12: AVX-512 without ER is still haswell
    ("x86_64", (2, 39), "GenuineIntel", SKYLAKE_SP, "haswell"),  # 2.37 dropped the subfolder search, not the name
    ("x86_64", (2, 28), "GenuineIntel", KNL, "xeon_phi"),
    ("x86_64", (2, 28), "GenuineIntel", KNL - {"avx512pf"}, "haswell"),  # ER without PF: the haswell test decides
    ("x86_64", (2, 26), "GenuineIntel", HASWELL_FLAGS - {"abm"}, "x86_64"),  # no LZCNT: no legacy name
    ("x86_64", (2, 26), "GenuineIntel", HASWELL_FLAGS - {"movbe"}, "x86_64"),
    ("x86_64", (2, 25), "GenuineIntel", HASWELL_FLAGS, "x86_64"),  # before glibc named platforms
    ("x86_64", (2, 36), "AuthenticAMD", HASWELL_FLAGS, "x86_64"),  # arch_kind_amd: never renamed
    ("x86_64", (2, 35), "HygonGenuine", HASWELL_FLAGS, "x86_64"),
    ("x86_64", None, "GenuineIntel", HASWELL_FLAGS, "x86_64"),  # not glibc (musl)
    ("aarch64", (2, 35), None, frozenset({"asimd"}), "aarch64"),
]


@pytest.mark.parametrize("machine,glibc,vendor,flags,want", PLATFORMS)
def test_platform_token_follows_glibc_and_the_cpu(machine, glibc, vendor, flags, want):
    assert dl_platform(machine, glibc, vendor, frozenset(flags)) == want


def test_the_first_processor_of_cpuinfo_is_read(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu " + " ".join(sorted(HASWELL_FLAGS)) +
                    "\n\nprocessor\t: 1\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu\n")
    assert _host_cpu(str(info)) == ("GenuineIntel", frozenset({"fpu"} | HASWELL_FLAGS))
    assert _host_cpu(str(tmp_path / "absent")) == (None, frozenset())


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
    # several LD_PRELOAD entries, split by spaces or colons (ld.so(8)): each is loaded, in order; a tab is no
    # separator (glibc rtld.c splits on " :"), so the second name is not found and DT_RPATH (a) serves
    for sep, want in ((" ", "c"), (":", "c"), (" : ", "c"), ("\t", "a")):
        pre = clean_env(LD_PRELOAD=sep.join([str(parts["open_rpath"]), str(parts["c"] / "libleaf.so.1")]))
        mapped = truth(parts["driver"], parts["mid_rpath"], pre, parts["root"])
        assert mapped_with_soname(mapped, "libleaf.so.1") == [str(parts[want] / "libleaf.so.1")], sep
        res = predict(parts["driver"], parts["mid_rpath"], pre, parts["root"], "libleaf.so.1")
        assert res.path == str(parts[want] / "libleaf.so.1"), (sep, res)
        assert (str(parts["open_rpath"]) in mapped) == (want == "c"), sep


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
DT_FLAGS_1, DF_1_NODEFLIB = 0x6FFFFFFB, 0x800


def _set_nodeflib(path: Path) -> None:
    """Give ``path`` a DT_FLAGS_1 entry with DF_1_NODEFLIB, in one of the spare DT_NULL entries GNU ld leaves at the
    end of .dynamic (GNU ld 2.40 ignores ``-z nodeflib`` for a shared object). Checked with readelf."""
    import re
    import struct

    sections = subprocess.run(["readelf", "-W", "-S", str(path)], capture_output=True, text=True, check=True).stdout
    m = re.search(r"\]\s+\.dynamic\s+DYNAMIC\s+[0-9a-f]+\s+([0-9a-f]+)\s+([0-9a-f]+)", sections)
    assert m, sections
    off, size = int(m.group(1), 16), int(m.group(2), 16)
    raw = bytearray(path.read_bytes())
    nulls = [i for i in range(off, off + size, 16) if struct.unpack_from("<q", raw, i)[0] == 0]
    assert len(nulls) >= 2, "no spare dynamic entry"
    struct.pack_into("<qq", raw, nulls[0], DT_FLAGS_1, DF_1_NODEFLIB)
    path.write_bytes(bytes(raw))
    assert "NODEFLIB" in subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def both(parts) -> dict[str, Path]:
    """Objects carrying both dynamic tags, DT_RPATH naming a folder whose libleaf.so.1 ld.so must not pick."""
    if shutil.which("readelf") is None:
        pytest.skip("needs readelf")
    return kept(parts["root"] / "both", lambda t: _build_both(parts, t))


def _build_both(parts: dict[str, Path], t: Path) -> dict[str, Path]:
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
    from support.loader_cases import gcc
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


def _cache(work: Path, folder: Path) -> tuple[Path, list]:
    """A real ld.so.cache (``ldconfig -C``) whose only extra folder is ``folder``; its entries as ldconfig -p
    prints them, read through the same parser detect uses."""
    import subprocess

    from cudamatrix.detect import libraries

    work.mkdir(parents=True, exist_ok=True)
    (work / "ld.so.conf").write_text(f"{folder}\n")
    subprocess.run(["ldconfig", "-X", "-C", str(work / "ld.so.cache"), "-f", str(work / "ld.so.conf")],
                   check=True, capture_output=True, timeout=60)
    listing = subprocess.run(["ldconfig", "-p", "-C", str(work / "ld.so.cache")], check=True, capture_output=True,
                             text=True, timeout=60).stdout
    entries = libraries.parse_ldconfig(listing)
    assert any(e.soname == "libleaf.so.1" and e.path == str(folder / "libleaf.so.1") for e in entries), listing
    return work / "ld.so.cache", entries


def _model(program: Path, top: Path, env: dict, cwd: Path, entries: list, root: str = "/"):
    from cudamatrix.ldso.linkmap import LinkMap, system_search

    lm = LinkMap(system_search(env, entries, str(program), cwd=str(cwd), root=root))
    lm.load(str(top), None)
    return next((r for r in lm.resolutions if r.name == "libleaf.so.1"), None)


def test_an_ld_so_cache_entry_outside_the_default_folders_is_found(parts, tmp_path):
    """The cache names a folder no default search reaches (c): the model finds it there, by that rule; without
    the entry nothing is found (the truth of that second half is the plain process: dlopen fails)."""
    if shutil.which("ldconfig") is None:
        pytest.skip("needs ldconfig")
    _, entries = _cache(tmp_path, parts["c"])
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


def test_an_ld_so_cache_entry_that_is_no_elf_object_fails_the_load(parts, tmp_path):
    """The cache names a file that has since become no ELF object (a truncated copy): ld.so opens the cache's file
    with the same check as a folder's (open_verify) and the load fails there; a missing file is passed over."""
    if shutil.which("ldconfig") is None:
        pytest.skip("needs ldconfig")
    folder = tmp_path / "lib"
    folder.mkdir()
    shutil.copy2(parts["c"] / "libleaf.so.1", folder / "libleaf.so.1")
    _, entries = _cache(tmp_path / "cache", folder)
    (folder / "libleaf.so.1").write_bytes((parts["c"] / "libleaf.so.1").read_bytes()[:40])
    res = _model(parts["driver"], parts["mid_none"], clean_env(), parts["root"], entries)
    assert (res.path, res.error) == (None, f"{folder}/libleaf.so.1: no ELF object (ld.so fails the load there)"), res
    (folder / "libleaf.so.1").unlink()
    res = _model(parts["driver"], parts["mid_none"], clean_env(), parts["root"], entries)
    assert (res.path, res.error) == (None, "not found"), res


@pytest.mark.slow
def test_the_ld_so_cache_is_searched_before_the_default_folders(parts, tmp_path):
    """The truth: a child in its own mount namespace sees the built cache at /etc/ld.so.cache and a different
    libleaf.so.1 in /usr/lib (an overlay of the real one, seen by nobody else); ld.so maps the cache's copy.
    The model, given the same cache and a root whose /usr/lib holds that other copy, says the same."""
    import subprocess

    if shutil.which("ldconfig") is None or shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs ldconfig, unshare and root (a private mount namespace)")
    cache, entries = _cache(tmp_path / "cache", parts["c"])
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
    return kept(parts["root"] / "more", lambda t: _build_more(parts, t))


def _build_more(parts: dict[str, Path], t: Path) -> dict[str, Path]:
    from support.loader_cases import gcc

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
    # a repeated dependency ahead of one not walked yet: libdia.so needs libp.so and libdq.so; libdq.so needs
    # libleaf.so.1 (mapped through libp.so by then) and libdeflib.so, which needs the system's libz.so.1
    linked(bfs, "libdq.so", "extern int which(void), z(void);\nint dq(void) { return which() + z(); }\n", parts["a"],
           "libleaf.so.1", [f"-L{parts['root']}/mid", "-l:libdeflib.so", *rpath(f"{parts['a']}:{parts['root']}/mid")])
    p["dia"] = linked(bfs, "libdia.so", "extern int mid(void), dq(void);\nint dia(void) { return mid() + dq(); }\n",
                      bfs, "libp.so", [f"-L{bfs}", "-l:libdq.so", *rpath("$ORIGIN")])
    # a diamond: libdiamond.so needs libp.so and libpp.so, which needs libp.so again (a dependency with a
    # dependency of its own, reached twice in one walk)
    linked(bfs, "libpp.so", "extern int mid(void);\nint pp(void) { return mid(); }\n", bfs, "libp.so", rpath("$ORIGIN"))
    p["diamond"] = linked(bfs, "libdiamond.so", "extern int mid(void), pp(void);\nint dm(void) { return mid() + pp(); }\n",
                          bfs, "libp.so", [f"-L{bfs}", "-l:libpp.so", *rpath("$ORIGIN")])
    p["bfs_top"] = linked(bfs, "libbfs_top.so", "extern int mid(void), q(void);\nint t(void) { return mid() + q(); }\n",
                          bfs, "libp.so", [f"-L{bfs}", "-l:libq.so", *rpath("$ORIGIN")])
    return p


def _many(parts, more, env: dict[str, str], *names: Path | str) -> tuple[list[str], Any]:
    """(the real paths of the libleaf.so.1 copies (libother.so is one) a process maps after dlopen of each of ``names`` in turn, the model's link
    map after the same loads)."""
    from cudamatrix.detect import libraries
    from cudamatrix.ldso.linkmap import LinkMap, system_search

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
    assert {r.how for r in lm.resolutions} == {"dlopen", "DT_NEEDED"} and lm.exe.path == lm.exe.real == str(more["many"])


def test_dependencies_are_mapped_breadth_first(parts, more):
    leaves, lm = _many(parts, more, clean_env(), more["bfs_top"])
    a = str(parts["a"] / "libleaf.so.1")
    assert leaves == [a]
    assert _leaf_loads(lm) == [(a, "DT_RPATH of libp.so"), (a, "already loaded (a dependency loaded earlier)")]
    assert [r.requested_by for r in lm.resolutions if r.name == "libleaf.so.1"] == \
        [str(more["bfs_top"].parent / "libp.so"), str(more["bfs_top"].parent / "libr.so")]


# --- the loader child, in this process: each copy answers, and a hang or a crash names its culprit -----------------

JUNK_C = r"""
#include <stdio.h>
int cudaRuntimeGetVersion(int *v) {
    printf("not json\n[1, 2]\n{\"probe\": \"elsewhere\"}\n"); fflush(stdout);  /* a library that talks */
    *v = 12090; return 0;
}
"""
EXIT_C = """
#include <unistd.h>
int cudaRuntimeGetVersion(int *v) { (void)v; _exit(STATUS); }
"""


@pytest.fixture(scope="module")
def copies() -> dict[str, str]:
    """gcc-built library copies: answering ones (cuDNN, CUDA runtime), one that prints junk before answering,
    ones that crash (SIGSEGV in a constructor, _exit(7) in the call) or hang (a constructor that sleeps)."""
    return {k: str(v) for k, v in kept(ROOT / "copies", _build_copies).items()}


def _build_copies(t: Path) -> dict[str, Path]:
    from support.fakes import CRASH_C, CUDART_C, CUDNN_C, HANG_C, build_lib

    out = {"cudart": build_lib(t / "ok", "libcudart.so.12", CUDART_C, VERSION=12040),
           "cudart13": build_lib(t / "ok13", "libcudart.so.13", CUDART_C, VERSION=13000),
           "cudnn": build_lib(t / "dnn", "libcudnn.so.9", CUDNN_C, VERSION=91900),
           "junk": build_lib(t / "junk", "libcudart.so.12", JUNK_C),
           "exit": build_lib(t / "exit", "libcudart.so.12", EXIT_C, STATUS=7),
           "exit0": build_lib(t / "exit0", "libcudart.so.12", EXIT_C, STATUS=0)}
    for n in range(3):
        out[f"crash{n}"] = build_lib(t / f"crash{n}", "libcudnn.so.9", CRASH_C)
    out["hang"] = build_lib(t / "hang", "libcudart.so.12", HANG_C)
    return out


def test_the_loader_child_answers_every_copy(copies):
    from cudamatrix.detect.loader import run_loader

    a = run_loader([(copies["cudart"], "cudart"), (copies["cudnn"], "cudnn"), (copies["cudart13"], "cudart")],
                   nvml=False, libcuda=False, timeout=30)
    assert (a.error, a.failed, a.nvml, a.libcuda) == (None, {}, None, None)
    assert list(a.libs) == [copies["cudart"], copies["cudnn"], copies["cudart13"]]
    assert [(x["rc"], x["version"]) for x in a.libs.values()] == [(0, 12040), (0, 91900), (0, 13000)]
    assert a.libs[copies["cudnn"]]["cudart"] == 12040 and a.libs[copies["cudnn"]]["path"] == copies["cudnn"]


def test_a_copy_that_prints_to_stdout_still_answers(copies):
    from cudamatrix.detect.loader import run_loader

    a = run_loader([(copies["junk"], "cudart"), (copies["cudart"], "cudart")], nvml=False, libcuda=False, timeout=30)
    assert (a.error, a.failed) == (None, {})
    assert a.libs[copies["junk"]]["version"] == 12090 and a.libs[copies["cudart"]]["version"] == 12040


@pytest.mark.slow
@pytest.mark.parametrize("bad,how", [("crash0", "crashed the process (signal 11)"),
                                     ("exit", "crashed the process (exit status 7)"),
                                     ("exit0", "crashed the process (exit status 0)")])
def test_a_copy_that_crashes_is_named_and_the_others_still_answer(copies, bad, how):
    from cudamatrix.detect.loader import run_loader

    a = run_loader([(copies["cudart"], "cudart"), (copies[bad], "cudnn" if bad.startswith("crash") else "cudart"),
                    (copies["cudnn"], "cudnn")], nvml=False, libcuda=False, timeout=30)
    assert a.error is None and a.failed == {copies[bad]: how}
    assert list(a.libs) == [copies["cudart"], copies["cudnn"]]
    assert a.libs[copies["cudart"]]["version"] == 12040 and a.libs[copies["cudnn"]]["version"] == 91900


@pytest.mark.slow
def test_at_most_two_retries(copies):
    """Three copies crash in turn: each is named; the fourth is not asked (a third retry is not made)."""
    from cudamatrix.detect.loader import run_loader

    crashes = [copies[f"crash{n}"] for n in range(3)]
    a = run_loader([(p, "cudnn") for p in crashes] + [(copies["cudart"], "cudart")], nvml=False, libcuda=False,
                   timeout=30)
    assert a.failed == {p: "crashed the process (signal 11)" for p in crashes} and a.libs == {} and a.error is None


@pytest.mark.slow
def test_a_copy_that_hangs_is_named_within_the_timeout(copies):
    import time

    from cudamatrix.detect.loader import run_loader

    start = time.monotonic()
    a = run_loader([(copies["hang"], "cudart"), (copies["cudart"], "cudart")], nvml=False, libcuda=False,
                   timeout=1.5)
    assert a.failed == {copies["hang"]: "hung (no answer within 1.5s)"} and a.error is None
    assert list(a.libs) == [copies["cudart"]] and a.libs[copies["cudart"]]["version"] == 12040
    assert time.monotonic() - start < 10


@pytest.mark.slow
def test_nvml_and_libcuda_answers(tmp_path, monkeypatch):
    """NVML (its C interface, called by ctypes) and cuDriverGetVersion, from gcc-built stand-ins on
    LD_LIBRARY_PATH; then from nothing: each probe says what it could not load."""
    from support.fakes import LIBCUDA_C, build_lib, fake_nvml

    from cudamatrix.detect.loader import run_loader

    fake_nvml(tmp_path / "lib", driver="580.95.05", cuda=13000)
    build_lib(tmp_path / "lib", "libcuda.so.1", LIBCUDA_C, VERSION=13000, RC=0)
    monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path / "lib"))
    a = run_loader([], nvml=True, libcuda=True, timeout=30)
    assert (a.error, a.failed, a.libs) == (None, {}, {})
    assert (a.nvml["driver"], a.nvml["cuda"], a.nvml["gpus"][0]["name"]) == ("580.95.05", 13000,
                                                                             "NVIDIA A100-SXM4-80GB")
    assert (a.libcuda["rc"], a.libcuda["version"], a.libcuda["path"]) == (0, 13000, str(tmp_path / "lib" / "libcuda.so.1"))
    only = run_loader([], nvml=False, libcuda=True, timeout=30)
    assert only.nvml is None and only.libcuda["version"] == 13000
    monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path / "none"))
    a = run_loader([], nvml=True, libcuda=False, timeout=30)
    assert a.nvml["error"] == "NVML Shared Library Not Found" and a.libcuda is None and a.failed == {}


def test_the_childs_clock_line_gives_its_start_up_and_imports():
    """``{"clock": [born, ready]}`` (the child's time.monotonic() instants) against the parent's spawn instant:
    kept only as two numbers in order after the spawn."""
    from cudamatrix.detect.loader import LoaderAnswers, _read_answers

    def times(line, spawned=10.0):
        a = LoaderAnswers()
        _read_answers(line + "\n", a, spawned)
        return a.start_ms, a.imports_ms

    assert times('{"clock": [10.012, 10.02]}') == (12.0, 8.0)
    assert times('{"clock": [10.0123456, 10.0234567]}') == (12.35, 11.11)  # hundredths of a millisecond
    assert times('{"clock": [10.0, 10.0]}') == (0.0, 0.0)  # the same instant, at either end
    assert times('{"clock": [10.012, 10.02]}', None) == (None, None)
    assert _read_answers("", LoaderAnswers(), 1.0) == (None, False)  # nothing started, not done
    for bad in ('{"clock": [9.9, 10.0]}', '{"clock": [10.5, 10.2]}', '{"clock": [10.1]}', '{"clock": "x"}',
                '{"clock": [true, 11]}', '{"clock": [10.1, null]}'):
        assert times(bad) == (None, None), bad


def test_a_child_that_cannot_run_is_an_error_not_a_failed_step(tmp_path):
    from cudamatrix.detect.loader import LoaderAnswers, run_loader

    lib = [(str(tmp_path / "libcudart.so.12"), "cudart")]
    assert run_loader(lib, nvml=False, libcuda=False, timeout=30, python=str(tmp_path / "no-python")).error == \
        "not found"
    # a program that refuses the interpreter's options: its own words (the end of its stderr)
    cat = shutil.which("cat")
    said = subprocess.run([cat, "-I"], capture_output=True, text=True, timeout=30)
    a = run_loader(lib, nvml=False, libcuda=False, timeout=30, python=cat)
    assert said.returncode != 0 and a.error == said.stderr.strip()[-300:] and a.failed == {} and a.libs == {}
    # one that exits without a word: its exit status
    assert run_loader(lib, nvml=False, libcuda=False, timeout=30, python=shutil.which("false")).error == \
        "exit status 1"
    # nothing asked: no child at all
    assert run_loader([], nvml=False, libcuda=False, timeout=30, python=str(tmp_path / "no-python")) == LoaderAnswers()


# --- findable: can dlopen(name) find a file at all (detect skips the NVML child when it cannot) -----------------

def _cached_names() -> tuple[list, set[str]]:
    """This machine's ld.so cache (``ldconfig -p``, not the byte scan under test) and its SONAMEs."""
    from cudamatrix.detect import libraries

    entries, _ = libraries.run_ldconfig(10)
    return entries, {e.soname for e in entries}


def test_findable_on_ld_library_path_only(tmp_path, monkeypatch):
    from cudamatrix.detect.loader import findable

    (tmp_path / "libcudamatrix_findable.so.1").write_bytes(b"")
    name = "libcudamatrix_findable.so.1"
    assert findable(name, {"LD_LIBRARY_PATH": f"/nonexistent:{tmp_path}"})
    assert not findable(name, {}) and not findable(name, {"LD_LIBRARY_PATH": "/nonexistent"})
    # an empty entry is dropped from the child's LD_LIBRARY_PATH (safe_environ): it does not count
    monkeypatch.chdir(tmp_path)
    assert not findable(name, {"LD_LIBRARY_PATH": ":/nonexistent"})


def test_findable_through_the_ld_so_cache_and_the_default_folders():
    from cudamatrix.detect.loader import _DEFAULT_DIRS, findable

    entries, names = _cached_names()
    # a SONAME only the cache knows (this machine: the CUDA toolkit's folder is in ld.so.conf)
    outside = [e.soname for e in entries if not any(os.path.exists(os.path.join(d, e.soname)) for d in _DEFAULT_DIRS)]
    if not outside:
        pytest.skip("no ld.so cache entry outside the default folders here")
    assert findable(outside[0], {})
    # the cache is matched by whole name: a name it holds only as the start of another is not in it
    prefix = next((e[:-1] for e in outside if e[:-1] not in names and not e[:-1].endswith(".")), None)
    if prefix is not None:
        assert not findable(prefix, {})
    assert not findable("libcudamatrix_no_such_library.so.1", {})
    # a file in a default folder that the cache does not list (a development link, a linker script)
    plain = next((n for d in _DEFAULT_DIRS if os.path.isdir(d) for n in sorted(os.listdir(d))
                  if n.startswith("lib") and ".so" in n and n not in names), None)
    if plain is not None:
        assert findable(plain, {})


# --- system_search: what glibc compiled in, inferred from where the program's ELF interpreter lives ----------------

@pytest.fixture(scope="module")
def interps(parts) -> dict[str, Path]:
    """Programs whose PT_INTERP names a loader in each layout (gcc --dynamic-linker; never run): Fedora's
    /usr/lib64, Debian's multiarch folders (with an ABI suffix too), and a plain /lib."""
    return kept(parts["root"] / "interp", _build_interps)


def _build_interps(t: Path) -> dict[str, Path]:
    from support.loader_cases import gcc

    (t / "main.c").write_text("int main(void) { return 0; }\n")
    out = {}
    for key, interp in (("lib64", "usr/lib64/ld-linux-x86-64.so.2"),
                        ("multiarch", "lib/aarch64-linux-gnu/ld-linux-aarch64.so.1"),
                        ("abi", "usr/lib/arm-linux-gnueabihf/ld-linux-armhf.so.3"),
                        ("plain", "lib/ld-musl-x86_64.so.1")):
        gcc(["-o", key, "main.c", f"-Wl,--dynamic-linker={t}/fs/{interp}"], t)
        out[key] = t / key
    (t / "fs" / "usr" / "lib64").mkdir(parents=True)
    (t / "fs" / "lib64").symlink_to("usr/lib64")  # the program names /lib64; its real folder is /usr/lib64
    gcc(["-o", "via_link", "main.c", f"-Wl,--dynamic-linker={t}/fs/lib64/ld-linux-x86-64.so.2"], t)
    out["via_link"] = t / "via_link"
    return out


@pytest.mark.parametrize("key,token,defaults", [
    ("lib64", "lib64", ["/lib64", "/usr/lib64"]),
    ("via_link", "lib64", ["/lib64", "/usr/lib64"]),
    ("multiarch", "lib/aarch64-linux-gnu", ["/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/lib", "/usr/lib"]),
    ("abi", "lib/arm-linux-gnueabihf", ["/lib/arm-linux-gnueabihf", "/usr/lib/arm-linux-gnueabihf", "/lib",
                                        "/usr/lib"]),
    ("plain", "lib", ["/lib", "/usr/lib"]),
])
def test_lib_and_default_folders_follow_the_interpreters_folder(interps, key, token, defaults):
    from cudamatrix.ldso.linkmap import system_search

    s = system_search({}, [], str(interps[key]), cwd="/somewhere")
    assert (s.lib_token, s.default_dirs, s.executable, s.cwd) == (token, defaults, str(interps[key]), "/somewhere")
    s = system_search({}, [], str(interps[key]), root="/srv/image/")
    assert s.default_dirs == [f"/srv/image/{d[1:]}" for d in defaults] and s.cwd == os.getcwd()


def test_system_search_reads_the_process_it_describes(parts, tmp_path):
    from cudamatrix.detect import libraries
    from cudamatrix.ldso.linkmap import system_search

    machine = os.uname().machine
    env = {"LD_LIBRARY_PATH": "/x:/y", "LD_PRELOAD": "libz.so.1", "PATH": "/bin"}
    link = tmp_path / "prog"
    link.symlink_to(parts["driver"])
    s = system_search(env, [], str(link), cwd="/w")
    assert (s.ld_library_path, s.ld_preload, s.platform, s.machine, s.executable) == (
        "/x:/y", "libz.so.1", machine, machine, str(parts["driver"]))
    assert s.lib_token.startswith("lib")
    bare = system_search({}, [], None)
    assert (bare.ld_library_path, bare.ld_preload, bare.executable, bare.lib_token, bare.default_dirs) == (
        None, None, None, "lib", ["/lib", "/usr/lib"])
    # the cache: the first entry of each SONAME that ld.so would take on this machine (a real paste: a 64-bit
    # and a 32-bit libcuda.so.1)
    text = (Path(__file__).parent.parent / "data" / "ldconfig" / "arch_opt-cuda9.1_libcuda_cutorch809.txt").read_text()
    entries = libraries.parse_ldconfig(text)
    cache = system_search({}, entries, None).cache
    if machine == "x86_64":
        assert cache == {"libcuda.so.1": "/usr/lib/libcuda.so.1", "libcuda.so": "/usr/lib/libcuda.so",
                         "libcudart.so.9.1": "/opt/cuda/lib64/libcudart.so.9.1", "libcudart.so": "/opt/cuda/lib64/libcudart.so"}
        # only the 32-bit entries: none is this machine's
        assert system_search({}, [e for e in entries if e.flags == "libc6"], None).cache == {}


# --- the program's own DT_RPATH, DF_1_NODEFLIB, and the link map's smaller questions --------------------------------

def _leaf(lm) -> Any:
    return next(r for r in lm.resolutions if r.name == "libleaf.so.1")


def test_the_programs_dt_rpath_serves_every_object_and_its_origin_is_the_real_file(parts):
    """A program run through a symbolic link, with DT_RPATH $ORIGIN/../a: libmid_none.so (no path) gets a's copy,
    found by the program's DT_RPATH after the loader chain's; a library's own DT_RPATH still comes first."""
    env = clean_env(LD_LIBRARY_PATH=str(parts["b"]))
    a = str(parts["a"] / "libleaf.so.1")
    for program in (parts["driver_origin"], parts["driver_link"]):
        assert mapped_with_soname(truth(program, parts["mid_none"], env, parts["root"]), "libleaf.so.1") == [a]
        res = predict(program, parts["mid_none"], env, parts["root"], "libleaf.so.1")
        assert (os.path.realpath(res.found_as), res.path, res.rule) == (a, a, "DT_RPATH of driver_origin (the program)")
    # the program loads a name itself: its DT_RPATH by the chain's rule
    from cudamatrix.detect import libraries
    from cudamatrix.ldso.linkmap import LinkMap, system_search

    lm = LinkMap(system_search(env, libraries.run_ldconfig(10)[0], str(parts["driver_link"]), cwd=str(parts["root"])))
    lm.load("libleaf.so.1", lm.exe)
    assert (_leaf(lm).path, _leaf(lm).rule) == (a, "DT_RPATH of driver_origin")
    # a program without a DT_RPATH: LD_LIBRARY_PATH
    assert predict(parts["driver"], parts["mid_none"], env, parts["root"], "libleaf.so.1").rule == "LD_LIBRARY_PATH"


def test_nodeflib_skips_the_cache_and_the_default_folders(parts):
    from cudamatrix.detect import libraries

    entries, names = _cached_names()
    if "libz.so.1" not in names:
        pytest.skip("no libz.so.1 in the ld.so cache here")
    env = clean_env()
    cached = next(e.path for e in entries if e.soname == "libz.so.1")
    for key, want, rule in (("nodeflib", None, "not found"), ("deflib", os.path.realpath(cached), "ld.so cache")):
        mapped = [p for p in truth(parts["driver"], parts[key], env, parts["root"]) if "libz.so" in p]
        assert mapped == ([want] if want else []), (key, mapped)
        res = predict(parts["driver"], parts[key], env, parts["root"], "libz.so.1")
        assert (res.path, res.rule) == (want, rule), res
    assert libraries  # the cache read by predict is this machine's


def _bare_link_map(parts, env: dict[str, str] | None = None, mapped: list[str] = ()):
    from cudamatrix.detect import libraries
    from cudamatrix.ldso.linkmap import LinkMap, system_search

    return LinkMap(system_search(env or clean_env(), libraries.run_ldconfig(10)[0], str(parts["driver"]),
                                 cwd=str(parts["root"])), mapped=mapped)


def test_load_first_keeps_the_name_that_loaded_and_answers_for_the_soname(parts):
    lm = _bare_link_map(parts, clean_env(LD_LIBRARY_PATH=str(parts["b"])))
    caller = lm.load(str(parts["open_runpath"]), None)
    obj = lm.load_first(["libleaf.so.1.2.3", "libleaf.so.1"], caller, "libleaf.so.1")
    res = lm.resolutions[-1]
    assert obj is lm.find(str(parts["b"] / "libleaf.so.1"))
    assert (res.name, res.path, res.rule, res.how, res.when, res.soname) == (
        "libleaf.so.1", str(parts["b"] / "libleaf.so.1"), "LD_LIBRARY_PATH", "dlopen", "first use", "libleaf.so.1")
    assert [r.name for r in lm.resolutions if "leaf" in r.name] == ["libleaf.so.1"]  # the miss is dropped
    obj = lm.load_first(["libleaf.so.1"], caller, "libleaf.so.1", how="preload", when="import")
    assert (lm.resolutions[-1].how, lm.resolutions[-1].when, lm.resolutions[-1].rule) == (
        "preload", "import", "already loaded (opened earlier)")
    # none loads: the last failure is kept, answering for the soname; no names: nothing is kept
    assert lm.load_first(["libnone.so.1.2", "libnone.so.1"], caller, "libnone.so.1") is None
    res = lm.resolutions[-1]
    assert (res.name, res.path, res.soname, res.when, res.error) == ("libnone.so.1", None, "libnone.so.1", "first use",
                                                                     "not found")
    n = len(lm.resolutions)
    assert lm.load_first([], caller, "libnone.so.1") is None and len(lm.resolutions) == n


def test_search_folders_are_the_objects_own_expanded_path(parts, tmp_path):
    lm = _bare_link_map(parts)
    mid = str(parts["root"] / "mid")
    got = {key: lm.search_folders(lm.load(str(parts[key]), None)) for key in ("mid_rpath", "mid_runpath", "mid_none")}
    assert got == {"mid_rpath": [f"{mid}/../a"], "mid_runpath": [f"{mid}/../a"], "mid_none": []}
    # the same DT_RPATH text in another folder expands against that folder
    (tmp_path / "deep").mkdir()
    shutil.copy2(parts["mid_rpath"], tmp_path / "deep" / "libmid_copy.so")
    copy = lm.load(str(tmp_path / "deep" / "libmid_copy.so"), None)
    assert lm.search_folders(copy) == [f"{tmp_path}/deep/../a"]
    assert lm.search_folders(lm.find(str(parts["mid_rpath"]))) == [f"{mid}/../a"]
    # loaded by a relative path: against the current folder
    lm = _bare_link_map(parts)
    assert lm.search_folders(lm.load("mid/libmid_rpath.so", None)) == [f"{parts['root']}/mid/../a"]


def test_a_mapped_file_that_is_not_an_elf_object_answers_by_path_only(parts, tmp_path):
    """A running process maps files that are not ELF objects (fonts, locale archives): they are in the link map,
    have no search path, and a load from one follows the plain rules."""
    data = tmp_path / "locale-archive"
    data.write_bytes(b"not an ELF object\n" * 8)
    lm = _bare_link_map(parts, clean_env(LD_LIBRARY_PATH=str(parts["b"])), mapped=[str(data), str(parts["c"] / "libleaf.so.1")])
    obj = lm.find(str(data))
    assert obj is not None and obj.dyn is None and obj.how == "mapped" and lm.search_folders(obj) == []
    assert lm.load("libleaf.so.1", obj).real == str(parts["c"] / "libleaf.so.1")  # mapped: by SONAME
    res = lm.resolutions[-1]
    assert (res.rule, res.found_as, res.how, res.when) == ("already loaded (mapped in this process)",
                                                           str(parts["c"] / "libleaf.so.1"), "dlopen", "import")
    lm = _bare_link_map(parts, clean_env(LD_LIBRARY_PATH=str(parts["b"])), mapped=[str(data)])
    assert lm.load("libleaf.so.1", lm.find(str(data))).real == str(parts["b"] / "libleaf.so.1")
    assert lm.resolutions[-1].rule == "LD_LIBRARY_PATH"


# --- the loader child's environment, its retries' cost, and the cuDNN copy's own answer ---------------------------

COUNTED_C = r"""
#include <stdio.h>
#include <stdlib.h>
__attribute__((constructor)) static void counted(void) {
    FILE *f = fopen(getenv("CUDAMATRIX_TEST_LOADS"), "a");
    if (f) { fputs(NAME "\n", f); fclose(f); }
}
"""


@pytest.mark.slow
def test_a_retry_loads_no_copy_that_already_answered(copies, tmp_path, monkeypatch):
    """NVML, libcuda and a copy answer, the next copy crashes: the retry loads none of the three again (each
    constructor runs once; a library's load can cost seconds and touch the driver)."""
    from support.fakes import CUDART_C, LIBCUDA_C, NVML_C, build_lib

    from cudamatrix.detect.loader import run_loader

    lib = tmp_path / "lib"
    build_lib(lib, "libnvidia-ml.so.1", COUNTED_C.replace("NAME", '"nvml"') + NVML_C.replace("DRIVER", "580.95.05")
              .replace("CUDA", "13000"))
    build_lib(lib, "libcuda.so.1", COUNTED_C.replace("NAME", '"libcuda"') + LIBCUDA_C, VERSION=13000, RC=0)
    ok = build_lib(tmp_path / "ok", "libcudart.so.12", COUNTED_C.replace("NAME", '"cudart"') + CUDART_C,
                   VERSION=12040)
    log = tmp_path / "loads.txt"
    monkeypatch.setenv("LD_LIBRARY_PATH", str(lib))
    monkeypatch.setenv("CUDAMATRIX_TEST_LOADS", str(log))
    a = run_loader([(str(ok), "cudart"), (copies["crash0"], "cudnn"), (copies["cudnn"], "cudnn")], nvml=True,
                   libcuda=True, timeout=30)
    assert a.failed == {copies["crash0"]: "crashed the process (signal 11)"} and a.error is None
    assert a.nvml["driver"] == "580.95.05" and a.libcuda["version"] == 13000 and len(a.libs) == 2
    assert sorted(log.read_text().split()) == ["cudart", "libcuda", "nvml"]


@pytest.mark.slow
def test_the_child_ignores_pythonpath_and_unsafe_library_folders(copies, tmp_path, monkeypatch):
    """The child runs isolated (-I): a PYTHONPATH folder whose json.py would shadow the standard library is not
    read; and a relative LD_LIBRARY_PATH entry (here: the folder of a libcuda.so.1) is dropped."""
    from support.fakes import LIBCUDA_C, build_lib

    from cudamatrix.detect.loader import run_loader

    hostile = tmp_path / "pythonpath"
    hostile.mkdir()
    (hostile / "json.py").write_text("raise SystemExit('a json.py on PYTHONPATH ran')\n")
    (hostile / "ctypes.py").write_text("raise SystemExit('a ctypes.py on PYTHONPATH ran')\n")
    monkeypatch.setenv("PYTHONPATH", str(hostile))
    a = run_loader([(copies["cudart"], "cudart")], nvml=False, libcuda=False, timeout=30)
    assert a.error is None and a.libs[copies["cudart"]]["version"] == 12040
    build_lib(tmp_path / "here", "libcuda.so.1", LIBCUDA_C, VERSION=13000, RC=0)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LD_LIBRARY_PATH", "here")
    a = run_loader([], nvml=False, libcuda=True, timeout=30)
    assert "error" in a.libcuda and "version" not in a.libcuda, a.libcuda


@pytest.fixture(scope="module")
def cudnn_copies() -> tuple[Path, Path]:
    """cuDNN 9.19 (DT_RUNPATH shim) and 9.24, whole, from the torch CUDA venvs (tests/support/realwheels.py)."""
    from support.realwheels import TORCH211_PY, TORCH_PY, site_packages

    return (site_packages(TORCH211_PY, "CUDAMATRIX_TORCH211_PYTHON") / "nvidia" / "cudnn" / "lib",
            site_packages(TORCH_PY, "CUDAMATRIX_TORCH_CUDA_PYTHON") / "nvidia" / "cudnn" / "lib")


@pytest.mark.slow
def test_a_cudnn_shim_answers_with_its_own_copy(cudnn_copies, tmp_path, monkeypatch):
    """cuDNN 9's shim forwards cudnnGetVersion to libcudnn_graph.so.9, opened by name: with 9.24's folder on
    LD_LIBRARY_PATH, 9.19's shim alone would answer 92400 (tests/ldso/test_openers.py shows the process doing
    so). The loader opens the copy's own graph library first, so each copy answers its own version."""
    from cudamatrix.detect.loader import own_answerer, run_loader

    c919, c924 = cudnn_copies
    shim = str(c919 / "libcudnn.so.9")
    assert own_answerer(shim) == [str(c919 / "libcudnn_graph.so.9")]
    monkeypatch.setenv("LD_LIBRARY_PATH", str(c924))
    a = run_loader([(shim, "cudnn")], nvml=False, libcuda=False, timeout=60)
    assert a.error is None and a.libs[shim]["version"] == 91900, a
    # through a link in another folder: the real folder's graph library; the link's own folder's first
    (tmp_path / "link").mkdir()
    (tmp_path / "link" / "libcudnn.so.9").symlink_to(c919 / "libcudnn.so.9")
    assert own_answerer(str(tmp_path / "link" / "libcudnn.so.9")) == [str(c919 / "libcudnn_graph.so.9")]
    (tmp_path / "link" / "libcudnn_graph.so.9").symlink_to(c924 / "libcudnn_graph.so.9")
    assert own_answerer(str(tmp_path / "link" / "libcudnn.so.9")) == [str(tmp_path / "link" / "libcudnn_graph.so.9")]
    # not a shim that forwards (the graph library itself), no graph library beside it, not cuDNN at all
    assert own_answerer(str(c919 / "libcudnn_graph.so.9")) == []
    (tmp_path / "alone").mkdir()
    shutil.copy2(c919 / "libcudnn.so.9", tmp_path / "alone" / "libcudnn.so.9")
    assert own_answerer(str(tmp_path / "alone" / "libcudnn.so.9")) == []
    assert own_answerer(str(tmp_path / "link" / "libcudnn_graph.so.9").replace("libcudnn_graph", "libcublas")) == []
    (tmp_path / "alone" / "libcudnn_ops.so.9").write_text("not an ELF object\n")  # unreadable: nothing to ask
    assert own_answerer(str(tmp_path / "alone" / "libcudnn_ops.so.9")) == []


@pytest.mark.slow
def test_the_child_does_not_import_site(copies, tmp_path):
    """The interpreter asked about (``--python``) may carry .pth files that run code at start-up (a broken one
    exits): the child runs without the site module (-S), so they do not run."""
    import venv

    venv.EnvBuilder(with_pip=False, symlinks=True).create(tmp_path / "venv")
    python = tmp_path / "venv" / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    Path(purelib, "broken.pth").write_text("import os; os._exit(3)\n")
    assert subprocess.run([str(python), "-c", "pass"], timeout=60).returncode == 3  # it does run with site
    from cudamatrix.detect.loader import run_loader

    a = run_loader([(copies["cudart"], "cudart")], nvml=False, libcuda=False, timeout=30, python=str(python))
    assert a.error is None and a.libs[copies["cudart"]]["version"] == 12040


def test_a_link_map_without_a_program(parts):
    """Nothing known of the program (a pasted report): no program DT_RPATH, the plain rules for the rest."""
    from cudamatrix.ldso.linkmap import LinkMap, system_search

    lm = LinkMap(system_search(clean_env(LD_LIBRARY_PATH=str(parts["b"])), [], None, cwd=str(parts["root"])))
    assert lm.exe is None and lm.load(str(parts["mid_none"]), None) is not None
    assert (_leaf(lm).path, _leaf(lm).rule) == (str(parts["b"] / "libleaf.so.1"), "LD_LIBRARY_PATH")
    assert lm.load(str(parts["mid_rpath"]), None) is not None and lm.resolutions[-1].rule == \
        "already loaded (a dependency loaded earlier)"


def test_a_closure_already_mapped_is_not_walked_again(parts, more):
    """libp.so (and libleaf.so.1 under it) loaded first, then an unrelated library, then libbfs_top.so, which needs
    libp.so again: libp.so answers by name and its own needs are not looked up a second time (each lookup is a
    record; a framework's later loads reach the same closures hundreds of times)."""
    bfs = more["bfs_top"].parent
    lm = _bare_link_map(parts)
    lm.load(str(bfs / "libp.so"), None)
    lm.load(str(parts["open_rpath"]), None)
    lm.load(str(more["bfs_top"]), None)
    assert [(r.requested_by, r.rule) for r in lm.resolutions if r.name == "libleaf.so.1"] == [
        (str(bfs / "libp.so"), "DT_RPATH of libp.so"), (str(bfs / "libr.so"), "already loaded (a dependency loaded earlier)")]
    assert [r.rule for r in lm.resolutions if r.name == "libp.so"] == ["already loaded (opened earlier)"]


def test_every_dependency_is_walked_once(parts, more):
    """libleaf.so.1 comes twice in the queue, ahead of libdeflib.so: it is walked once, and the walk goes on to
    libdeflib.so's libz.so.1 (what the process maps)."""
    env = clean_env()
    mapped = truth(more["many"], more["dia"], env, parts["root"])
    assert any(os.path.basename(p).startswith("libz.so") for p in mapped), mapped
    lm = _bare_link_map(parts, env)
    assert lm.load(str(more["dia"]), None) is not None
    pairs = [(r.name, r.requested_by) for r in lm.resolutions]
    assert len(pairs) == len(set(pairs)), pairs
    z = next(r for r in lm.resolutions if r.name == "libz.so.1")
    assert z.requested_by == str(parts["root"] / "mid" / "libdeflib.so") and z.path == os.path.realpath(z.path)
    assert os.path.realpath(z.path) in mapped


def test_a_dependency_reached_twice_is_walked_once(parts, more):
    """libp.so is needed by libdiamond.so and by libpp.so: its own need, libleaf.so.1, is looked up once (what the
    process maps: libp.so's copy from folder a)."""
    env = clean_env()
    mapped = truth(more["many"], more["diamond"], env, parts["root"])
    lm = _bare_link_map(parts, env)
    assert lm.load(str(more["diamond"]), None) is not None
    pairs = [(r.name, r.requested_by) for r in lm.resolutions]
    assert len(pairs) == len(set(pairs)), pairs
    [leaf] = [r for r in lm.resolutions if r.name == "libleaf.so.1"]
    assert leaf.requested_by.endswith("/libp.so") and os.path.realpath(leaf.path) in mapped
    assert [r.name for r in lm.resolutions if r.name == "libp.so"] == ["libp.so"] * 2  # by libdiamond.so, libpp.so


def test_a_link_map_checks_a_file_and_expands_a_path_once(parts, monkeypatch):
    """A name searched twice from one object (not found: every candidate file is checked) checks each file and
    expands the object's DT_RPATH once; a second link map given the first one's file answers checks none."""
    from cudamatrix.detect import libraries
    from cudamatrix.ldso.linkmap import LinkMap, system_search

    checked: list[str] = []
    expanded: list[tuple[str, str]] = []
    check, expand = LinkMap._check, LinkMap._expand_now
    monkeypatch.setattr(LinkMap, "_check", lambda self, path: checked.append(path) or check(self, path))
    monkeypatch.setattr(LinkMap, "_expand_now",
                        lambda self, value, obj: expanded.append((obj.real, value)) or expand(self, value, obj))
    search = system_search(clean_env(), libraries.run_ldconfig(10)[0], str(parts["driver"]), cwd=str(parts["root"]))
    fits: dict[str, bool] = {}
    lm = LinkMap(search, fits=fits)
    mid = lm.load(str(parts["mid_rpath"]), None)
    for _ in range(2):
        assert lm.load("libnowhere.so.7", mid) is None
    assert checked and len(checked) == len(set(checked)) and set(checked) <= set(fits)
    assert expanded and len(expanded) == len(set(expanded))
    assert not any(c.endswith("/libnowhere.so.7") for c in checked)  # no folder lists it: no file is checked
    checked.clear()
    again = LinkMap(search, fits=fits)
    assert again.load("libnowhere.so.7", again.load(str(parts["mid_rpath"]), None)) is None
    assert checked == []


def test_link_maps_list_each_searched_folder_once(parts, monkeypatch):
    """Two link maps sharing one prediction's listings search the same folders for a name no folder holds: each
    folder is listed once in all (the real listdir, counted), and the search still ends in "not found"."""
    from cudamatrix.detect import libraries
    from cudamatrix.ldso.linkmap import LinkMap, system_search

    listed: list[str] = []
    real_listdir = os.listdir
    monkeypatch.setattr(os, "listdir", lambda folder=".": listed.append(str(folder)) or real_listdir(folder))
    search = system_search(clean_env(LD_LIBRARY_PATH=str(parts["b"])), libraries.run_ldconfig(10)[0],
                           str(parts["driver"]), cwd=str(parts["root"]))
    fits: dict[str, bool] = {}
    listings: dict = {}
    for _ in range(2):
        lm = LinkMap(search, fits=fits, listings=listings)
        assert lm.load("libnowhere.so.7", lm.load(str(parts["mid_rpath"]), None)) is None
        assert lm.resolutions[-1].rule == "not found"
    assert listed and len(listed) == len(set(listed))
    assert str(parts["b"]) in listed and set(listed) <= set(listings)


def test_a_folder_that_cannot_be_listed_is_searched_by_name(parts, monkeypatch):
    """A folder with search but no read permission (mode 0711) cannot be listed, yet ld.so opens a file there by
    its name: the model then checks the name's path and finds libleaf.so.1 in LD_LIBRARY_PATH. (The tests run
    as root, for whom no permission stops a listing, so the listing's EACCES is raised here for that folder.)"""
    hidden = str(parts["b"])
    real_listdir = os.listdir

    def listdir(folder="."):
        if os.path.realpath(folder) == os.path.realpath(hidden):
            raise PermissionError(13, "Permission denied", folder)
        return real_listdir(folder)

    monkeypatch.setattr(os, "listdir", listdir)
    lm = _bare_link_map(parts, clean_env(LD_LIBRARY_PATH=hidden))
    assert lm.load("libleaf.so.1", None) is not None
    res = lm.resolutions[-1]
    assert (res.rule, os.path.dirname(res.path)) == ("LD_LIBRARY_PATH", hidden)


def test_a_failed_load_leaves_no_name_or_file_behind(parts, more):
    """libtop_runpath.so maps libmid_none.so, then libleaf.so.1 is not found and the whole dlopen fails (ld.so
    unmaps what it mapped): afterwards libmid_none.so answers to no name, and its file, opened again from a
    library whose DT_RPATH holds libleaf.so.1, is a new object that finds it."""
    lm = _bare_link_map(parts)
    assert lm.load(str(more["top_runpath"]), None) is None
    assert lm.load("libmid_none.so", None) is None
    assert (lm.resolutions[-1].name, lm.resolutions[-1].rule) == ("libmid_none.so", "not found")
    opener_obj = lm.load(str(parts["open_rpath"]), None)
    mid = lm.load(str(parts["mid_none"]), opener_obj)
    assert mid is not None and mid.loader is opener_obj
    last = [r for r in lm.resolutions if r.name == "libleaf.so.1"][-1]
    assert (last.path, last.rule) == (str(parts["a"] / "libleaf.so.1"), "DT_RPATH of libopen_rpath.so")


def test_a_name_that_is_not_the_soname_answers_once_loaded(parts, more):
    """A file found under a name other than its SONAME (libother.so, SONAME libleaf.so.1) answers to both names
    afterwards (ld.so matches a request against every name an object was loaded under)."""
    alias = str(parts["root"] / "more" / "alias")
    lm = _bare_link_map(parts, clean_env(LD_LIBRARY_PATH=alias))
    obj = lm.load("libother.so", None)
    assert obj is not None and lm.resolutions[-1].rule == "LD_LIBRARY_PATH"
    assert lm.load("libother.so", None) is obj and lm.resolutions[-1].rule == "already loaded (opened earlier)"
    assert lm.load("libleaf.so.1", None) is obj


def test_a_mapped_file_opened_by_path_is_the_same_object(parts):
    leaf_c = str(parts["c"] / "libleaf.so.1")
    lm = _bare_link_map(parts, mapped=[leaf_c])
    assert lm.load(leaf_c, None) is lm.find(leaf_c)
    assert [o.real for o in lm.objects].count(leaf_c) == 1 and lm.resolutions[-1].rule == "path"


def test_an_object_loaded_some_other_way_says_so(parts):
    lm = _bare_link_map(parts)
    lm.load(str(parts["b"] / "libleaf.so.1"), None, how="ctypes")
    lm.load(str(parts["mid_rpath"]), None)
    assert _leaf(lm).rule == "already loaded (loaded earlier)"


def test_the_same_file_found_under_a_new_name_answers_to_it(parts, more):
    """b's libleaf.so.1 opened by path, then liblink.so (a link to it) found on LD_LIBRARY_PATH by a library:
    the mapped object is reused, answers to liblink.so from then on, and the record says who asked and how."""
    alias = parts["root"] / "more" / "alias"
    lm = _bare_link_map(parts, clean_env(LD_LIBRARY_PATH=str(alias)))
    leaf_b = lm.load(str(parts["b"] / "libleaf.so.1"), None)
    caller = lm.load(str(parts["open_rpath"]), None)
    assert lm.load("liblink.so", caller, how="dlopen", when="first use") is leaf_b
    res = lm.resolutions[-1]
    assert (res.path, res.rule, res.requested_by, res.how, res.found_as, res.when) == (
        str(parts["b"] / "libleaf.so.1"), "LD_LIBRARY_PATH", str(parts["open_rpath"]), "dlopen", str(alias / "liblink.so"),
        "first use")
    assert lm.load("liblink.so", None) is leaf_b and lm.resolutions[-1].rule == "already loaded (opened earlier)"


def test_a_path_that_cannot_load_says_why(parts, more, tmp_path):
    lm = _bare_link_map(parts)
    (tmp_path / "libtext.so").write_text("INPUT(-lc)\n")  # a linker script, as libc.so is
    for path, error in ((tmp_path / "libmissing.so", "no such file"),
                        (tmp_path / "libtext.so", "not an ELF object of this machine")):
        assert lm.load(str(path), None, how="preload") is None
        res = lm.resolutions[-1]
        assert (res.name, res.path, res.rule, res.error, res.how, res.requested_by) == (
            str(path), None, "not found", error, "preload", None)
    # a dependency not found: who asked, and how
    assert lm.load(str(more["top_runpath"]), None) is None
    res = lm.resolutions[-1]
    assert (res.name, res.requested_by, res.how, res.error) == ("libleaf.so.1", str(parts["mid_none"]), "DT_NEEDED",
                                                                "not found")


@pytest.mark.parametrize("kind,stops", [("folder", True), ("text", True), ("short", True), ("other", False),
                                        ("narrow", False)])
def test_a_candidate_that_is_no_object_of_this_machine(parts, tmp_path, kind, stops):
    """A libleaf.so.1 on LD_LIBRARY_PATH ahead of b's that is an object of another machine (e_machine AArch64 on
    x86-64, or the other way) or class (32-bit): ld.so passes over it and maps b's copy. One that is no ELF object
    at all (a folder, a linker script, a truncated file): the load fails there, even where a later source
    (libmid_runpath.so's DT_RUNPATH) holds the library."""
    import struct

    raw = (parts["b"] / "libleaf.so.1").read_bytes()
    other = bytearray(raw)
    struct.pack_into("<H", other, 18, 183 if struct.unpack_from("<H", raw, 18)[0] != 183 else 62)  # EM_AARCH64
    narrow = bytearray(raw)
    narrow[4] = 1  # ELFCLASS32
    bad = tmp_path / kind / "libleaf.so.1"
    bad.parent.mkdir()
    content = {"folder": None, "text": b"INPUT(-lc)\n" * 8, "short": raw[:40], "other": bytes(other),
               "narrow": bytes(narrow)}[kind]
    bad.mkdir() if content is None else bad.write_bytes(content)
    env = clean_env(LD_LIBRARY_PATH=f"{bad.parent}:{parts['b']}")
    b = str(parts["b"] / "libleaf.so.1")
    leaves = mapped_with_soname(truth(parts["driver"], parts["mid_none"], env, parts["root"]), "libleaf.so.1")
    res = predict(parts["driver"], parts["mid_none"], env, parts["root"], "libleaf.so.1")
    record(f"libleaf.so.1 on LD_LIBRARY_PATH ahead of b: {kind}", res.path, res.rule, leaves)
    if stops:
        assert leaves == [] and (res.path, res.rule) == (None, "not found"), (leaves, res)
        assert res.error == f"{bad}: no ELF object (ld.so fails the load there)"
        leaves = mapped_with_soname(truth(parts["driver"], parts["mid_runpath"], env, parts["root"]), "libleaf.so.1")
        res = predict(parts["driver"], parts["mid_runpath"], env, parts["root"], "libleaf.so.1")
        assert leaves == [] and (res.path, res.error) == (None, f"{bad}: no ELF object (ld.so fails the load there)")
        # in a DT_RPATH folder (searched first), the same
        env = clean_env(LD_LIBRARY_PATH=str(parts["b"]))
        top = tmp_path / "top" / "libtop_rpath.so"
        top.parent.mkdir()
        shutil.copy2(parts["top_rpath"], top)  # DT_RPATH $ORIGIN/../mid:$ORIGIN/../a: mid holds libmid_none.so
        shutil.copytree(parts["root"] / "mid", tmp_path / "mid")
        (tmp_path / "a").symlink_to(bad.parent)
        leaves = mapped_with_soname(truth(parts["driver"], top, env, parts["root"]), "libleaf.so.1")
        res = predict(parts["driver"], top, env, parts["root"], "libleaf.so.1")
        assert leaves == [] and (res.path, res.error) == (None, f"{tmp_path}/top/../a/libleaf.so.1: no ELF object "
                                                                "(ld.so fails the load there)"), (leaves, res)
    else:
        assert leaves == [b] and (res.path, res.rule) == (b, "LD_LIBRARY_PATH"), (leaves, res)
