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


@pytest.mark.slow
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


# --- issue #23: inputs as people type them, unknown is not absent, substitutions said -------------------------

@pytest.mark.parametrize("typed, cc", [("4090", "8.9"), ("rtx4090", "8.9"), ("RTX 4090", "8.9"), ("a100", "8.0"),
                                       ("8.6", "8.6"), ("sm_86", "8.6"), ("86", "8.6"), ("Tesla T4", "7.5")])
def test_gpu_as_people_type_it(matrix, typed, cc):
    """gpus.json names and aliases (NVIDIA's "CUDA GPUs" list: GeForce RTX 4090 is 8.9, A100 8.0, T4 7.5): a
    model number is a model, never a compute capability (4090 is not "409.0")."""
    t = from_flags(matrix, driver="580.65.06", gpus=[typed], python=None, platform=None, cuda_toolkit=None)
    assert t.gpus[0].compute_capability == cc


def test_an_ambiguous_gpu_name_lists_the_candidates(matrix):
    """"4000" is Quadro RTX 4000 (7.5) and RTX 4000 Ada (8.9) (NVIDIA's "CUDA GPUs" list): exit 2, listing them."""
    from cudamatrix.errors import UsageError

    with pytest.raises(UsageError) as err:
        from_flags(matrix, driver=None, gpus=["4000"], python=None, platform=None, cuda_toolkit=None)
    assert "different compute capabilities" in err.value.message
    assert "'Quadro RTX 4000' (sm 7.5)" in err.value.hint and "(sm 8.9)" in err.value.hint


@pytest.mark.parametrize("typed", ["R550", "r550", "550"])
def test_a_driver_branch_is_its_first_release(matrix, typed):
    """NVIDIA numbers the releases of branch R550 550.xx.yy; CUDA 12.4 needs 550.54.14 (CUDA release notes,
    table 3): a branch is checked as its first release, below 550.54.14, so no build needing full 12.4 support
    is assumed, and the target says how the value was read."""
    from cudamatrix.matrix.query import driver_version

    t = from_flags(matrix, driver=typed, gpus=["H100"], python=None, platform=None, cuda_toolkit=None)
    assert t.driver == "550" and driver_version(t.driver) < driver_version("550.54.14")
    assert "driver branch R550" in t.describe()


def test_a_cuda_version_given_as_driver_is_refused(matrix):
    """nvidia-smi prints "CUDA Version: 12.4" beside "Driver Version": 12.4 is not a driver; the first driver
    for CUDA 12.4 is 550.54.14 (CUDA release notes, table 3), named in the hint."""
    from cudamatrix.errors import UsageError

    with pytest.raises(UsageError) as err:
        from_flags(matrix, driver="12.4", gpus=["H100"], python=None, platform=None, cuda_toolkit=None)
    assert "is a CUDA version" in err.value.message and "550.54.14" in err.value.hint


KOHYA = "tests/data/pastes/torch-error_cudnn-incompatibility_8.7.0-vs-8.2.4_kohya-log-torch2.0.1cu118_kohya1096.txt"


def test_a_report_of_cuda_in_use_without_gpu_or_driver_is_not_a_cpu_machine(matrix):
    """kohya_ss issue 1096 (the paste's first line): torch 2.0.1+cu118 fails on a cuDNN mismatch; the report names
    no GPU and no driver. The GPU is unknown, not absent: solve answers with a GPU build, says the driver it needs,
    and never a CPU build."""
    from cudamatrix.detect import from_report_files
    from cudamatrix.solve.target import from_environment

    target = from_environment(from_report_files([KOHYA]), matrix, name="the pasted machine")
    assert target.gpu_unknown and target.wants_gpu and "GPU not stated" in target.describe()
    solution = solve([target], parse_request(["torch"]), matrix)
    assert all(fw.cuda for fw in solution.frameworks)
    assert any(n.startswith("the driver is not stated: torch") for n in solution.notes)
    assert any(line.startswith("the driver is not stated") for line in solution.trace)


def test_a_substitution_is_a_trace_line_and_a_note(matrix):
    """tensorflow-gpu is TensorFlow's old name (TensorFlow's pip guide); the answer installs tensorflow, and says so."""
    t = from_flags(matrix, driver="535.104.05", gpus=["T4"], python="3.10", platform=None, cuda_toolkit=None)
    solution = solve([t], parse_request(["tensorflow-gpu==2.10.0"]), matrix)
    said = [n for n in solution.notes if n.startswith("substituted: tensorflow-gpu==2.10.0")]
    assert said and said[0] in solution.trace


def test_a_build_passed_over_for_inferred_facts_is_said():
    """README "known / inferred": a build that rests on inferred facts ranks below one that rests on read ones.
    When that passes over a newer build that fits (issue #23: torch 2.11/2.12 cu128/cu129 on R570, whose facts
    were inferred), the answer says so, with the facts and their basis, in a note and the trace."""
    from smallmatrix import build, release, target, variant

    known = variant("cu124", "12.4", archs=["8.0", "9.0"], cudnn="9.1.0", index_url="https://download.pytorch.org/whl/cu124",
                    local_version="+cu124")
    guessed = variant("cu128", "12.8", archs=["8.0", "9.0", "12.0"], cudnn="9.1.0",
                      index_url="https://download.pytorch.org/whl/cu128", local_version="+cu128",
                      inferred={"archs": "copied from the cu126 build of the same release"})
    m = build(release("2.5.1", known), release("2.7.0", guessed))
    solution = solve([target("570.86.10", "9.0")], parse_request(["torch"]), m)
    assert [(f.version, f.variant) for f in solution.frameworks] == [("2.5.1", "cu124")]
    said = [n for n in solution.notes if n.startswith("passed over torch 2.7.0 cu128")]
    assert said and "copied from the cu126 build" in said[0] and said[0] in solution.trace


def test_a_yanked_release_only_when_pinned_exactly():
    """PEP 592: pip installs a yanked release only when a requirement pins it exactly. jax 0.4.32 was yanked (the
    JAX changelog, data/jax.json): jax<0.4.33 gets 0.4.31, jax==0.4.32 gets 0.4.32."""
    from snapshot import named_snapshot

    m = named_snapshot("issue23")
    t = from_flags(m, driver="550.54.14", gpus=["T4"], python="3.11", platform=None, cuda_toolkit=None)
    assert solve([t], parse_request(["jax<0.4.33"]), m).frameworks[0].version == "0.4.31"
    assert solve([t], parse_request(["jax==0.4.32"]), m).frameworks[0].version == "0.4.32"


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
