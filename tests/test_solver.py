"""The solver is a pure function: the same inputs give the same Solution, and nothing given is changed.

Runs on the frozen matrix snapshot kept with the tests (tests/data/matrix_snapshot/)."""
from __future__ import annotations

import copy

import pytest

from cudamatrix.errors import NoSolution
from cudamatrix.models import Cause, Environment, Framework, Rejection, WayOut
from cudamatrix.solve.search import Preference
from cudamatrix.solve.solver import parse_request, solve
from cudamatrix.solve.target import from_flags
from snapshot import snapshot_matrix


@pytest.fixture(scope="module")
def matrix():
    return snapshot_matrix()


def _newer_than_matrix_env(matrix) -> Environment:
    newest = max(r.version for r in matrix.frameworks("torch"))
    version = f"{newest.major}.{newest.minor + 50}.0+cu130"  # a release the snapshot cannot know
    return Environment(origin="file", packages={"torch": version, "torchvision": "0.99.0"},
                       frameworks=[Framework(name="torch", version=version, variant="cu130", cuda="13.0")])


def test_solve_twice_with_the_same_request_gives_the_same_answer(matrix):
    # the kept-installed path used to delete torch from the Request: a second call chose no torch
    env = _newer_than_matrix_env(matrix)
    target = from_flags(matrix, driver="580.65.06", gpus=[], python="3.11", platform=None, cuda_toolkit=None)
    request = parse_request(["torch", "jax"], env)
    before = copy.deepcopy(request)
    first = solve([target], request, matrix, installed=env)
    second = solve([target], request, matrix, installed=env)
    assert first.to_dict() == second.to_dict()
    assert request.texts == before.texts and set(request.families) == {"torch", "jax"}
    assert {k: [str(r) for r in v] for k, v in request.families.items()} == \
        {k: [str(r) for r in v] for k, v in before.families.items()}
    # torch is kept as installed both times, and says so
    assert [f.name for f in first.frameworks] == ["jax", "torch"]
    assert any("kept as it is" in line for line in first.trace)


def test_trace_and_rejections_are_part_of_the_result(matrix):
    target = from_flags(matrix, driver="470.82.01", gpus=["Tesla T4"], python="3.10", platform=None, cuda_toolkit=None)
    solution = solve([target], parse_request(["torch"]), matrix)
    assert solution.trace[0].startswith("target: NVIDIA T4 (sm 7.5); driver 470.82.01")  # said once, not twice
    assert solution.rejected and all(isinstance(r, Rejection) for r in solution.rejected)
    assert {"driver_floor"} <= {rule for r in solution.rejected for rule in r.rules}


def test_no_solution_carries_typed_causes_and_ways_out(matrix):
    target = from_flags(matrix, driver="470.82.01", gpus=["Tesla T4"], python="3.10", platform=None, cuda_toolkit=None)
    request = parse_request(["torch>=2.8"])
    with pytest.raises(NoSolution) as info:
        solve([target], request, matrix)
    exc = info.value
    assert exc.causes and all(isinstance(c, Cause) for c in exc.causes)
    assert "driver_floor" in {c.rule for c in exc.causes}
    assert exc.ways_out and all(isinstance(w, WayOut) for w in exc.ways_out)
    assert "upgrade_driver" in {w.kind for w in exc.ways_out}
    # the envelope's JSON is the same objects, serialised
    assert exc.detail["causes"] == [c.to_dict() for c in exc.causes]
    # and a second call raises the same
    with pytest.raises(NoSolution) as again:
        solve([target], request, matrix)
    assert again.value.detail == exc.detail


def test_preference_is_named():
    assert Preference._fields == ("keeps_installed", "build_as_wanted", "facts_known", "version",
                                  "full_driver_support", "cuda", "pypi_default")


# --- solve's pip line: packages the matrix does not know pass through as the user wrote them ------------------

PASSTHROUGH = ["einops[foo]>=0.7; python_version >= '3.8'", "Pillow==10.0.0"]


def _t4(matrix):
    return from_flags(matrix, driver="550.54.15", gpus=["Tesla T4"], python="3.11", platform=None, cuda_toolkit=None)


def test_solve_pip_line_keeps_passthrough_packages(matrix):
    """The request's other packages end the pip line with their name, extras, pins and markers, after the
    framework pins; the framework's index becomes an extra index so the default index can still serve them."""
    from packaging.requirements import Requirement

    sol = solve([_t4(matrix)], parse_request(["torch", *PASSTHROUGH], None), matrix)
    assert sol.pip_args[-2:] == [str(Requirement(r)) for r in PASSTHROUGH]
    tail = [Requirement(a) for a in sol.pip_args[-2:]]
    assert [(r.name, r.extras, str(r.specifier), str(r.marker) if r.marker else None) for r in tail] == \
        [("einops", {"foo"}, ">=0.7", 'python_version >= "3.8"'), ("Pillow", set(), "==10.0.0", None)]
    torch = next(p for p in sol.packages if p.name == "torch")
    assert torch.requirement() in sol.pip_args and sol.pip_args.index(torch.requirement()) < len(sol.pip_args) - 2
    assert "--index-url" not in sol.pip_args and sol.index_url is None
    assert sol.pip_args[:2] == ["--extra-index-url", sol.extra_index_urls[0]]
    assert any("einops" in line and "passed to the installer as given" in line for line in sol.trace)
    alone = solve([_t4(matrix)], parse_request(["torch"], None), matrix)
    assert alone.pip_args[0] == "--index-url" and not any("einops" in a for a in alone.pip_args)


def test_solve_pip_line_keeps_passthrough_when_the_framework_is_already_right(matrix):
    """Nothing of the framework to install: the pip line still installs the other packages."""
    sol = solve([_t4(matrix)], parse_request(["torch", *PASSTHROUGH], None), matrix)
    torch = next(p for p in sol.packages if p.name == "torch")
    have = Environment(packages={p.name: p.version for p in sol.packages})
    again = solve([_t4(matrix)], parse_request(["torch", *PASSTHROUGH], None), matrix, installed=have)
    assert again.to_install == [] and torch.requirement() not in again.pip_args
    assert again.pip_args[-2:] == sol.pip_args[-2:] and len(again.pip_args) == 2
