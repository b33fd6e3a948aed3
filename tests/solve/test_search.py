"""solve.search: the request's side of the screen (matches_request, and the requirements screen reads for a family)."""
from __future__ import annotations

import dataclasses

import pytest
from packaging.requirements import Requirement
from support.snapshot import snapshot_matrix

from cudamatrix.solve.search import Candidate, _concerning, matches_request


def _candidate(family: str, version: str, variant: str) -> Candidate:
    release = next(r for r in snapshot_matrix().frameworks(family) if str(r.version) == version)
    return Candidate(release, next(v for v in release.variants if v.name == variant))


@pytest.mark.parametrize("spec, meets", [
    ("torch==2.5.1", True), ("torch==2.5.1+cu121", True), ("torch>=2.6", False), ("torch<2.5.1", False),
    ("torch~=2.5.0", True), ("torch!=2.5.1", False), ("torch==2.5.*", True), ("torch", True),
    ("torchvision==0.20.1", True), ("torchvision==0.20.0", False),
])
def test_a_candidate_meets_the_specifiers_as_packaging_reads_them(spec, meets):
    """Twice each: the second answer comes from the version texts parsed once per process."""
    cand = _candidate("torch", "2.5.1", "cu121")
    for _ in range(2):
        assert (matches_request(cand, [Requirement(spec)]) == []) is meets, spec


def test_a_version_that_is_not_one_meets_no_specifier():
    """A companion version the matrix states in a form PEP 440 does not read is turned down with the reason, as
    packaging's contains() turns down an invalid version, never taken as a match."""
    cand = _candidate("torch", "2.5.1", "cu121")
    odd = dataclasses.replace(cand.release, companions={**cand.release.companions, "torchvision": "not-a-version"})
    problems = matches_request(Candidate(odd, cand.variant), [Requirement("torchvision>=0")])
    assert problems == ["torch 2.5.1 cu121: torchvision not-a-version+cu121 does not satisfy torchvision>=0"]


def test_the_screen_reads_only_the_requirements_of_the_family():
    reqs = [Requirement(t) for t in ("numpy<2", "torch>=2.4", "tensorflow-gpu==2.15.0", "jaxlib", "torchaudio",
                                     "tensorflow-cpu", "jax-cuda12-plugin")]
    matrix = snapshot_matrix()
    assert [str(r) for r in _concerning("torch", reqs, matrix)] == ["torch>=2.4", "torchaudio"]
    assert [str(r) for r in _concerning("tensorflow", reqs, matrix)] == ["tensorflow-gpu==2.15.0", "tensorflow-cpu"]
    assert [str(r) for r in _concerning("jax", reqs, matrix)] == ["jaxlib"]


@pytest.mark.parametrize("spec, text", [
    ("==2.5.1", "2.5.1"), ("==2.5.1", "2.5.1+cu121"), ("==2.5.1+cu121", "2.5.1"), ("==2.5.1+cu121", "2.5.1+cu121"),
    ("==2.5.1+cu118", "2.5.1+cu121"), (">=2.6", "2.6.0rc1"), ("<2.6", "2.6.0.dev1"), ("~=2.5.0", "2.5.9"),
    ("!=2.5.*", "2.5.1+cpu"), ("===2.5.1", "2.5.1"), (">=0", "not-a-version"), ("", "2.5.1"),
])
def test_meets_answers_as_packaging_and_again_from_its_memo(spec, text):
    """_meets keeps each answer by the specifiers' text and the version text: the first answer, the memo's, and
    that of another requirement with the same specifiers are all packaging's own (an invalid text meets none)."""
    from packaging.version import InvalidVersion, Version

    from cudamatrix.solve.search import _meets

    try:
        expected = Requirement(f"torch{spec}").specifier.contains(Version(text), prereleases=True)
    except InvalidVersion:
        expected = False
    for req in (Requirement(f"torch{spec}"), Requirement(f"torch{spec}"), Requirement(f"torchvision{spec}")):
        assert _meets(req, text) is expected, (spec, text)


def test_a_build_without_a_local_version_is_met_by_its_variant_name():
    """check -r reads torch==2.5.1+cu118 for a build whose wheels carry no local version: its variant names it."""
    from support.smallmatrix import release, variant

    plain = release("2.5.1", variant("cu118", "11.8", archs=["7.5"], local_version=None))
    cand = Candidate(plain, plain.variants[0])
    assert matches_request(cand, [Requirement("torch==2.5.1+cu118")]) == []
    assert matches_request(cand, [Requirement("torch==2.5.1")]) == []
    assert matches_request(cand, [Requirement("torch==2.5.1+cu121")]) == \
        ["torch 2.5.1 cu118: torch 2.5.1 does not satisfy torch==2.5.1+cu121"]


def test_the_ways_out_re_screen_each_build_once_per_request(monkeypatch):
    """A solve and the re-solves of its ways out share their candidates and each build's problems with a request:
    matches_request runs once per build and request, and the answer is the one of a solve without the memo."""
    from cudamatrix.errors import NoSolution
    from cudamatrix.solve import search
    from cudamatrix.solve.solver import fits, parse_request, solve
    from cudamatrix.solve.target import from_flags

    matrix = snapshot_matrix()
    target = from_flags(matrix, driver="535.104.05", gpus=["7.5"], python="3.11", platform=None, cuda_toolkit=None)
    calls: list[tuple[str, tuple[str, ...]]] = []
    real = search.matches_request

    def counted(cand, reqs, extras=frozenset()):
        calls.append((cand.label, tuple(str(r) for r in reqs)))
        return real(cand, reqs, extras)

    monkeypatch.setattr(search, "matches_request", counted)
    with pytest.raises(NoSolution) as info:
        solve([target], parse_request(["torch==2.15.0"]), matrix)
    assert len(info.value.ways_out) >= 2 and len(calls) == len(set(calls))  # each build and request once
    assert len({reqs for _, reqs in calls}) >= 2  # the relaxed request of a way out was screened too
    monkeypatch.setattr(search, "matches_request", real)
    with pytest.raises(NoSolution) as again:
        solve([target], parse_request(["torch==2.15.0"]), matrix)
    assert again.value.detail == info.value.detail
    assert fits([target], parse_request(["torch==2.15.0"]), matrix) is None
    assert [(f.name, f.version) for f in fits([target], parse_request(["torch==2.14.1"]), matrix)] == \
        [("torch", "2.14.1")]
