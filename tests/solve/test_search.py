"""solve.search: the request's side of the screen (matches_request, and the requirements screen reads for a family)."""
from __future__ import annotations

import dataclasses

import pytest
from packaging.requirements import Requirement
from snapshot import snapshot_matrix

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
