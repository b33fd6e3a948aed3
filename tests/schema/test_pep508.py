"""cudamatrix.schema.pep508 answers exactly as packaging does, or not at all: every requirement the matrix
holds (the frameworks' METADATA pins and the cuda-toolkit metapackage's) and generated ones, their markers in
the environments doctor builds, their specifiers against many versions."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from cudamatrix.schema import pep508
from cudamatrix.solve.pins import marker_env
from cudamatrix.solve.target import Target

REPO = Path(__file__).parent.resolve().parent.parent
EXTRAS = (None, "and-cuda", "with-cuda", "cuda", "cuda12", "cuda13", "all", "All_")
TARGETS = [Target(name="t", python=py, platform=plat) for py in ("3.9", "3.11", "3.14", "3.15", "3.10.0")
           for plat in ("linux_x86_64", "linux_aarch64", "win_amd64", "macosx_14_0_arm64")]
VERSIONS = ["0", "1", "9.1.0.70", "9.24.0.43", "12", "12.0", "12.1.105", "13", "13.0", "13.0.0", "13.0.3", "13.0.96",
            "13.1", "14", "14.0.0", "2.14.1", "2.14.1+cu130", "13.0.96rc1", "1!2.0", "13.0.post1", "not a version",
            "13.0.3+cu130", "14+Local.1", "13+x", "13.0.96+a-b_c", "13.0.96+", "13.0.96+x..y"]


def _matrix_requirements() -> list[str]:
    texts: set[str] = set()

    def walk(obj) -> None:
        if isinstance(obj, dict):
            for key, value in obj.items():
                if key in ("nvidia_pins", "requires", "affects") and isinstance(value, list):
                    texts.update(x for x in value if isinstance(x, str))
                elif key == "requires" and isinstance(value, dict):
                    for group in value.values():
                        texts.update(group)
                else:
                    walk(value)
        elif isinstance(obj, list):
            for item in obj:
                walk(item)

    for path in sorted((REPO / "data").glob("*.json")):
        walk(json.loads(path.read_text()))
    return sorted(texts)


MATRIX = _matrix_requirements()


def _same(text: str) -> None:
    """pep508's reading of ``text`` is packaging's, in every answer it gives."""
    lite = pep508.parse(text)
    if lite is None:
        return
    full = Requirement(text)
    assert lite.name == full.name and lite.extras == set(full.extras)
    assert str(lite) == str(full) and str(lite.specifier) == str(full.specifier)
    assert sorted((c.operator, c.version) for c in lite.specifier) == \
        sorted((s.operator, s.version) for s in full.specifier)
    assert len(lite.specifier) == len(full.specifier)
    for v in VERSIONS:
        want = full.specifier.contains(v, prereleases=True) if v != "not a version" else None
        if want is not None:
            assert lite.specifier.contains(v, prereleases=True) == want, (text, v)
    assert (lite.marker is None) == (full.marker is None)
    for target in TARGETS:
        for extra in EXTRAS:
            env = marker_env(target, extra)
            try:
                got = lite.applies(env)
            except pep508.Unanswered:
                continue
            assert full.marker is None or got == full.marker.evaluate(env), (text, env)


@pytest.mark.slow
def test_the_matrix_requirements_are_read_as_packaging_reads_them():
    assert len(MATRIX) > 100
    read = [t for t in MATRIX if pep508.parse(t) is not None]
    assert len(read) > 0.9 * len(MATRIX)  # the common shape is the common case: that is the point
    for text in MATRIX:
        _same(text)


@pytest.mark.parametrize("text", [
    # torch 2.14.1's and cuda-toolkit 13.0.3's METADATA lines (wheel METADATA, Requires-Dist)
    'cuda-toolkit[cublas,cudart,cufft,cufile,cupti,curand,cusolver,cusparse,nvjitlink,nvrtc,nvtx]==13.0.3; '
    'platform_system == "Linux"',
    'cuda-bindings<14,>=13.0.3; platform_system == "Linux" and python_version < "3.15"',
    "nvidia-nvjitlink<14,>=13.0.88; (sys_platform == 'linux' and platform_machine == 'aarch64' or sys_platform == "
    "'linux' and platform_machine == 'x86_64' or sys_platform == 'win32' and platform_machine == 'AMD64') and "
    "extra == 'all'",
    'nvidia-cudla==13.*; (platform_system == "Linux" and platform_machine == "aarch64") and extra == "all"',
    "nvidia-cudnn-cu12 ==9.1.0.70 ;platform_system=='Linux'",
    'x ; python_full_version >= "3.10.0" or extra == "Cuda_12"',
    'x!=1.0.*, <=2 ; python_version != "3.11"',
])
def test_real_lines(text):
    assert pep508.parse(text) is not None
    _same(text)


@pytest.mark.parametrize("text", [
    'triton~=3.8.0; platform_system == "Linux"',  # ~= is packaging's
    "x>=1.0rc1", "x==1.0+local", "x>=1!2", "x @ https://example.org/x.whl", "x (>=1.0)",
    'x; "linux" == sys_platform',  # the literal first
    'x; platform_release >= "5.4"', 'x; implementation_version >= "3"', 'x; sys_platform in "linux win32"', 'x; platform_machine == "v1"',
    "x; python_version < '3.15a1'", "x>=1.*", "x; ", "x; (sys_platform == 'linux'", "x==", "-x",
])
def test_other_shapes_are_left_to_packaging(text):
    assert pep508.parse(text) is None


def test_a_variable_the_environment_lacks_is_unanswered():
    lite = pep508.parse('x; sys_platform == "linux" or python_version >= "3"')
    assert lite is not None
    with pytest.raises(pep508.Unanswered):
        lite.applies({"python_version": "3.11"})
    with pytest.raises(pep508.Unanswered):
        lite.applies({"sys_platform": "win32", "python_version": "3.11rc1"})


def test_a_version_that_is_not_plain_is_asked_of_packaging():
    spec = pep508.specifiers(">=2.5,<2.15")
    assert spec is not None
    assert spec.contains("2.14.1+cu130", prereleases=True) == SpecifierSet(">=2.5,<2.15").contains("2.14.1+cu130",
                                                                                                    prereleases=True)
    assert pep508.specifiers(">=2.5rc1") is None
    assert str(pep508.specifiers("<3,>=2")) == str(SpecifierSet("<3,>=2"))


_names = st.sampled_from(["nvidia-cudnn-cu12", "x", "cuda_toolkit", "A.b-c"])
_release = st.lists(st.integers(0, 14), min_size=1, max_size=4).map(lambda p: ".".join(map(str, p)))
_clause = st.tuples(st.sampled_from(["==", "!=", "<", "<=", ">", ">="]), _release,
                    st.booleans()).map(lambda c: f"{c[0]}{c[1]}{'.*' if c[2] and c[0] in ('==', '!=') else ''}")
_atom = st.one_of(
    st.tuples(st.sampled_from(["sys_platform", "platform_system", "platform_machine", "os_name", "extra"]),
              st.sampled_from(["==", "!="]),
              st.sampled_from(["linux", "Linux", "win32", "x86_64", "aarch64", "AMD64", "all", "and-cuda",
                               "With_Cuda", "cuda12", "posix", "darwin"])),
    st.tuples(st.sampled_from(["python_version", "python_full_version"]),
              st.sampled_from(["==", "!=", "<", "<=", ">", ">="]), _release),
).map(lambda a: f"{a[0]} {a[1]} {json.dumps(a[2])}")
_marker = st.recursive(_atom, lambda inner: st.tuples(inner, st.sampled_from([" and ", " or "]), inner).map(
    lambda t: f"({t[0]}{t[1]}{t[2]})" if len(t[0]) % 2 else f"{t[0]}{t[1]}{t[2]}"), max_leaves=5)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(name=_names, clauses=st.lists(_clause, max_size=3), marker=st.none() | _marker,
       have=st.lists(st.tuples(_release, st.sampled_from(["", "+cu130", "+Local.7", "+1"])).map("".join),
                     min_size=1, max_size=4))
def test_generated_requirements(name, clauses, marker, have):
    text = name + ",".join(clauses) + (f"; {marker}" if marker else "")
    lite = pep508.parse(text)
    assert lite is not None, text
    full = Requirement(text)
    for v in have:
        assert lite.specifier.contains(v, prereleases=True) == full.specifier.contains(v, prereleases=True), (text, v)
    if marker:
        for target in TARGETS[:6]:
            for extra in EXTRAS:
                env = marker_env(target, extra)
                assert lite.applies(env) == Marker(marker).evaluate(env), (text, env)
