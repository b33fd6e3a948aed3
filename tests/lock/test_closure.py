"""The complete set's pure parts (cudamatrix/lock/closure.py, lock/resolve.py's lock_specs): which platform tags a
target accepts, which markers pip answered for the wrong interpreter, how resolutions for several targets merge."""
from __future__ import annotations

import pytest
from packaging.tags import sys_tags

from cudamatrix.errors import UsageError
from cudamatrix.lock.closure import LockedFile, LockSpec, diverging_markers, from_report, glibc_of, merge, platform_tags
from cudamatrix.lock.pylock import check_name
from cudamatrix.lock.resolve import host_glibc, lock_specs
from cudamatrix.models import Environment, PythonInfo
from cudamatrix.solve.target import Target


def test_every_manylinux_tag_the_glibc_accepts():
    # PEP 600: glibc 2.Y takes manylinux_2_Z for every Z <= Y; manylinux2014 = 2.17, manylinux2010 = 2.12,
    # manylinux1 = 2.5 (those two for x86_64/i686 only); the architectures of manylinux2014 start at 2.17
    tags = platform_tags("linux_x86_64", "2.28")
    assert tags[0] == "manylinux_2_28_x86_64" and tags[-1] == "linux_x86_64"
    assert [f"manylinux_2_{n}_x86_64" for n in range(28, 4, -1)] == [t for t in tags if t.startswith("manylinux_")]
    assert "manylinux_2_18_x86_64" in tags  # nvidia-nccl-cu13 2.30.7's only tag
    for legacy, after in (("manylinux2014", 17), ("manylinux2010", 12), ("manylinux1", 5)):
        assert tags.index(f"{legacy}_x86_64") == tags.index(f"manylinux_2_{after}_x86_64") + 1
    arm = platform_tags("linux_aarch64", "2.31")
    assert arm[0] == "manylinux_2_31_aarch64" and "manylinux_2_17_aarch64" in arm
    assert "manylinux_2_16_aarch64" not in arm and "manylinux2014_aarch64" in arm and "manylinux1_aarch64" not in arm
    assert platform_tags("win_amd64", None) == ["win_amd64"]
    with pytest.raises(UsageError):
        platform_tags("linux_x86_64", "two")
    with pytest.raises(UsageError):
        platform_tags("macos_arm64", "2.28")


def test_the_tag_list_agrees_with_packaging_on_this_machine():
    """packaging.tags computes the running machine's own list (from its glibc): ours for that glibc holds each
    of its manylinux platforms in the same order."""
    glibc = host_glibc()
    if glibc is None or not any("manylinux" in str(t) for t in sys_tags()):
        pytest.skip("not a glibc machine")
    import platform

    plat = "linux_aarch64" if platform.machine() in ("aarch64", "arm64") else "linux_x86_64"
    theirs = list(dict.fromkeys(t.platform for t in sys_tags() if "manylinux" in t.platform))
    assert [t for t in platform_tags(plat, glibc) if "manylinux" in t] == theirs


def test_glibc_from_an_environments_tags():
    assert glibc_of(["cp311-cp311-manylinux_2_36_x86_64", "cp311-cp311-linux_x86_64"]) == "2.36"
    assert glibc_of(["cp311-cp311-win_amd64"]) is None


def test_lock_specs_say_what_they_assumed():
    flags = Target(name="target", python=None, platform="linux_x86_64")
    (spec,) = lock_specs([flags], [None], glibc="2.35")
    assert spec.glibc == "2.35" and spec.python and any("Python" in a and "assumed" in a for a in spec.assumed)
    saved = Environment(python=PythonInfo(version="3.10.12", tags=["cp310-cp310-manylinux_2_31_x86_64"]))
    (spec,) = lock_specs([Target(name="node", python="3.10", platform="linux_x86_64")], [saved])
    assert (spec.python, spec.glibc, spec.assumed) == ("3.10", "2.31", ())
    two = [Target(name="a", python="3.11"), Target(name="b", python="3.11"), Target(name="c", python="3.12")]
    assert [s.python for s in lock_specs(two, [], glibc="2.28")] == ["3.11", "3.12"]  # one per interpreter
    (win,) = lock_specs([Target(name="w", python="3.11", platform="win_amd64")], [])
    assert win.glibc is None and win.tags() == ["win_amd64"]


def _report(*items: tuple[str, str, list[str]], extras: list[str] | None = None) -> dict:
    return {"install": [{"metadata": {"name": n, "version": v, "requires_dist": r},
                         "requested_extras": extras or [],
                         "download_info": {"url": f"https://x.invalid/{n}-{v}-py3-none-any.whl",
                                           "archive_info": {"hashes": {"sha256": "ab" * 32}}}}
                        for n, v, r in items]}


def test_markers_pip_answered_for_another_interpreter():
    spec = LockSpec("linux_x86_64", "3.10", "2.28")
    report = _report(("anyio", "4.0", ['exceptiongroup>=1.0.2; python_version < "3.11"', "idna>=2.8",
                                       'trio>=0.23; extra == "trio"']),
                     ("torch", "2.14.1", ['triton==3.8.0; platform_system == "Linux" and python_version < "3.15"']))
    here = diverging_markers(report, [], LockSpec("linux_x86_64", "3.11", "2.28"))
    import sys

    if sys.version_info[:2] == (3, 11):
        assert here == []  # the same interpreter: pip's answers hold
    assert diverging_markers(report, [], spec) == ([] if sys.version_info[:2] == (3, 10) else
                                                   ['anyio 4.0: exceptiongroup>=1.0.2; python_version < "3.11"'])
    win = diverging_markers(report, ['colorama; sys_platform == "win32"'], LockSpec("win_amd64", "3.11"))
    assert 'the request: colorama; sys_platform == "win32"' in win
    assert any(d.startswith("torch 2.14.1: triton") for d in win)
    # a marker on what a LockSpec does not know (the patch level) is never taken as answered
    patch = _report(("x", "1", ['y; python_full_version >= "3.11.4"']))
    assert diverging_markers(patch, [], LockSpec("linux_x86_64", "3.11", "2.28")) == ['x 1: y; python_full_version >= "3.11.4"']


def test_extras_count_when_markers_are_compared():
    report = _report(("jax", "0.6.2", ['jax-cuda12-plugin==0.6.2; extra == "cuda12"']), extras=["cuda12"])
    assert diverging_markers(report, [], LockSpec("linux_x86_64", "3.12", "2.28")) == []


def test_from_report_needs_a_hash_for_every_file():
    files = from_report(_report(("Jinja2", "3.1.6", [])), ["https://x.invalid/simple"])
    assert files == [LockedFile("jinja2", "3.1.6", "https://x.invalid/Jinja2-3.1.6-py3-none-any.whl", "ab" * 32,
                                "https://x.invalid/simple")]
    bare = _report(("a", "1", []))
    bare["install"][0]["download_info"]["archive_info"] = {}
    with pytest.raises(UsageError, match="no sha256"):
        from_report(bare)
    legacy = _report(("a", "1", []))
    legacy["install"][0]["download_info"]["archive_info"] = {"hash": "sha256=" + "cd" * 32}  # pip 22.2
    assert from_report(legacy)[0].sha256 == "cd" * 32


def test_merging_targets_keeps_every_file_and_refuses_two_versions():
    a, b = LockSpec("linux_x86_64", "3.10", "2.28"), LockSpec("linux_x86_64", "3.11", "2.28")
    m10 = LockedFile("markupsafe", "3.0.4", "u/markupsafe-3.0.4-cp310-cp310-manylinux_2_17_x86_64.whl", "1" * 64)
    m11 = LockedFile("markupsafe", "3.0.4", "u/markupsafe-3.0.4-cp311-cp311-manylinux_2_17_x86_64.whl", "2" * 64)
    closure = merge([(a, [m10]), (b, [m11])])
    assert [(p.name, [f.sha256 for f in p.files]) for p in closure.packages] == [("markupsafe", ["1" * 64, "2" * 64])]
    newer = LockedFile("markupsafe", "3.0.5", "u/markupsafe-3.0.5-py3-none-any.whl", "3" * 64)
    with pytest.raises(UsageError, match="different versions of markupsafe"):
        merge([(a, [m10]), (b, [newer])])
    with pytest.raises(UsageError, match="tomli only on some"):
        merge([(a, [m10, LockedFile("tomli", "2.0", "u/tomli-2.0-py3-none-any.whl", "4" * 64)]), (b, [m11])])


@pytest.mark.parametrize("name, ok", [("pylock.toml", True), ("pylock.jax.toml", True), ("pylock-jax.toml", False),
                                      ("pylock.a.b.toml", False), ("PYLOCK.toml", False), ("jax.toml", False)])
def test_pylock_file_names(tmp_path, name, ok):
    if ok:
        check_name(tmp_path / name)
    else:
        with pytest.raises(UsageError, match="PEP 751"):
            check_name(tmp_path / name)
