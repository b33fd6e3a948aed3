"""The no-solution registries (``cudamatrix.solve.causes``): one table per cause and way-out function.

A case is a family's verdicts (each candidate with the Reasons that turned it down, per machine) -> that one
function's answer, as (rule or kind, sentence). The candidates are builds of the small matrix of ``smallmatrix``;
the verdicts are written out here as the solver states them, so each function is asked on its own. The documents
behind the expected answers are named above each table; ``no_solution`` itself is the loop over the registries.
"""
from __future__ import annotations

import pytest

from cudamatrix.models import Rejection
from cudamatrix.solve import causes
from cudamatrix.solve.rules import Reason
from cudamatrix.solve.search import Candidate, Verdict
from cudamatrix.solve.solver import parse_request
from smallmatrix import build, release, target, variant

A = ["5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0"]
CU121 = variant("cu121", "12.1", archs=A, cudnn="9.1.0", local_version="+cu121")
CU128 = variant("cu128", "12.8", archs=A + ["12.0"], cudnn="9.17.0", local_version="+cu128")
CPU = variant("cpu", None, local_version="+cpu")
R251, R270 = release("2.5.1", CU121, CPU), release("2.7.0", CU128, CPU)
M = build(R251, R270)
OLD, NEW = Candidate(R251, CU121), Candidate(R270, CU128)
OLD_CPU, NEW_CPU = Candidate(R251, CPU), Candidate(R270, CPU)
T4 = target("470.82.01", "7.5", python="3.11")  # driver 470 runs CUDA 11.4 at most (release notes)
KEY = T4.key()

# CUDA Toolkit release notes: CUDA 12.1 runs on >= 525.60.13 under minor-version compatibility, CUDA 12.8 needs
# 570.26 for full support (525.60.13 under minor-version compatibility).
FLOOR_OLD = Reason("driver_floor", "driver 470.82.01 runs CUDA 11.4 at most; torch 2.5.1 cu121 needs ...", "notes",
                   need_driver="525.60.13")
FLOOR_NEW = Reason("driver_floor", "driver 470.82.01 runs CUDA 11.4 at most; torch 2.7.0 cu128 needs ...", "notes",
                   need_driver="525.60.13")
GPU_NEW = Reason("gpu_driver", "driver 565.57.01 does not drive sm_120 ...", "notes", need_driver="570.26")
ARCH = Reason("arch", "torch 2.5.1 cu121 has no kernel image for sm_120 ...", "row")
PY = Reason("python", "torch 2.7.0 cu128 supports Python 3.10, 3.11, 3.12, not 3.13", "row")
JETSON = Reason("jetson", "sm_87 (compute capability 8.7) is a Jetson board: ...", "advisory")
REQUEST = Reason("request", "torch 2.5.1 cu121 does not match torch>=2.7", None)
CPU_ON_GPU = Reason("gpu_wanted", "torch 2.7.0 cpu is a CPU build and the target has a GPU ...")


def v(cand: Candidate, *reasons: Reason, key=KEY) -> Verdict:
    on = [r for r in reasons if r.rule not in ("request", "gpu_wanted")]
    return Verdict(cand, list(reasons), {key: on} if on else {})


def failure(*entries: Verdict, request=("torch",), targets=(T4,)) -> causes.Failure:
    unique = {}
    for t in targets:
        unique.setdefault(t.key(), []).append(t)
    reps = [group[0] for group in unique.values()]
    return causes.Failure(M, parse_request(list(request)), reps, unique, "torch", list(entries))


def answer(fn, f: causes.Failure) -> list[tuple[str, str]]:
    return [(getattr(x, "rule", None) or getattr(x, "kind"), x.message) for x in fn(f)]


UNMATCHED = [
    ([], [("request", "the matrix has no torch release")]),
    ([v(OLD, REQUEST)], [("request", "no torch release in the matrix matches torch>=2.7")]),
    ([v(OLD, REQUEST), v(NEW, FLOOR_NEW)], []),
]


@pytest.mark.parametrize("entries, expected", UNMATCHED)
def test_unmatched(entries, expected):
    found = causes._unmatched(parse_request(["torch>=2.7"]), "torch", entries)
    assert ([(found.rule, found.message)] if found else []) == expected


# A fleet: a build that fits every machine but one names that machine (the newest such build's reason there).
A100 = target("550.54.15", "8.0", python="3.11")
BLOCKING = [
    ([v(OLD, FLOOR_OLD), v(NEW, FLOOR_NEW)], (T4, A100),
     [("driver_floor", f"t: {FLOOR_NEW.message} (it fits every other machine)")]),
    ([v(OLD, FLOOR_OLD), v(NEW, FLOOR_NEW)], (T4,), []),  # one machine: no "every other machine"
]


@pytest.mark.parametrize("entries, targets, expected", BLOCKING)
def test_blocking_machines(entries, targets, expected):
    f = failure(*entries, targets=targets)
    assert answer(causes.blocking_machines, f) == expected
    if expected:
        assert [c.machines for c in causes.blocking_machines(f)] == [["t"]]


BROKEN = [
    ([v(OLD, FLOOR_OLD), v(NEW, FLOOR_NEW, PY)], [("driver_floor", FLOOR_OLD.message), ("python", PY.message)]),
    ([v(OLD, ARCH), v(NEW, JETSON)], [("jetson", JETSON.message), ("arch", ARCH.message)]),  # Jetson first
    ([v(OLD, REQUEST), v(NEW, CPU_ON_GPU)], [("gpu_wanted", CPU_ON_GPU.message)]),
]


@pytest.mark.parametrize("entries, expected", BROKEN)
def test_broken_rules(entries, expected):
    assert answer(causes.broken_rules, failure(*entries)) == expected


def test_broken_rules_defer_to_blocking_machines():
    assert causes.broken_rules(failure(v(OLD, FLOOR_OLD), v(NEW, FLOOR_NEW), targets=(T4, A100))) == []


SHARED = [
    ([Rejection(candidate="a + b", reasons=["two CUDA majors"], rules=["shared_nvidia"])], False,
     [("shared_nvidia", "two CUDA majors")]),
    ([Rejection(candidate="a", reasons=["pins differ"], rules=["co_installed"]),
      Rejection(candidate="b", reasons=["no kernel"], rules=["arch"])], True, [("co_installed", "pins differ")]),
    ([], False, [("shared_nvidia", "no combination of the requested frameworks shares one consistent set of "
                                   "nvidia-* wheels")]),
    ([], True, []),
]


@pytest.mark.parametrize("rejected, has_causes, expected", SHARED)
def test_shared_wheels(rejected, has_causes, expected):
    assert [(c.rule, c.message) for c in causes.shared_wheels(rejected, has_causes)] == expected


# The lowest driver that lets some build run: the highest of each build's floors, the lowest over the builds.
UPGRADE = [
    ([v(OLD, FLOOR_OLD), v(NEW, FLOOR_NEW)],
     [("upgrade_driver", "upgrade the driver to >= 525.60.13 (torch 2.7.0 cu128 then fits)")]),
    ([v(OLD, FLOOR_OLD), v(NEW, FLOOR_NEW, GPU_NEW)],
     [("upgrade_driver", "upgrade the driver to >= 525.60.13 (torch 2.5.1 cu121 then fits; the newest, torch 2.7.0 "
                         "cu128, needs >= 570.26)")]),
    ([v(OLD, FLOOR_OLD, ARCH)], []),  # a build the driver alone does not block
    ([v(OLD, PY)], []),
]


@pytest.mark.parametrize("entries, expected", UPGRADE)
def test_upgrade_driver(entries, expected):
    assert answer(causes.upgrade_driver, failure(*entries)) == expected


def test_jetpack():
    # NVIDIA's "PyTorch for Jetson": the board's JetPack wheels are the only builds with kernels for it
    assert [w.kind for w in causes.jetpack(failure(v(NEW, JETSON)))] == ["jetpack"]
    assert causes.jetpack(failure(v(NEW, ARCH))) == []


# Relaxing the request: a GPU build only the request turned down, checked now on every target.
A100_ONLY = target("550.54.15", "8.0", python="3.11")
PIN = [
    ([v(OLD, REQUEST), v(NEW, ARCH)], (A100_ONLY,), [("pin_older", "relax the request: torch==2.5.1 (cu121) fits")]),
    ([v(OLD, REQUEST), v(NEW, ARCH)], (T4,), []),  # 2.5.1 cu121 does not run on driver 470 either
    ([v(OLD_CPU, REQUEST), v(NEW, ARCH)], (A100_ONLY,), []),  # a CPU build is the cpu_build way out
]


@pytest.mark.parametrize("entries, targets, expected", PIN)
def test_pin_older(entries, targets, expected):
    assert answer(causes.pin_older, failure(*entries, targets=targets)) == expected


CPU_BUILD = [
    ([v(NEW_CPU, CPU_ON_GPU), v(OLD_CPU, CPU_ON_GPU)], [("cpu_build", "use the CPU build: torch==2.7.0+cpu")]),
    ([v(OLD_CPU, REQUEST), v(NEW, ARCH)], [("cpu_build", "use the CPU build: torch==2.5.1+cpu")]),
    ([v(NEW, ARCH)], []),
]


@pytest.mark.parametrize("entries, expected", CPU_BUILD)
def test_cpu_build(entries, expected):
    assert answer(causes.cpu_build, failure(*entries)) == expected


CHANGE_PYTHON = [
    ([v(NEW, PY)], [("change_python", "use Python 3.12 (torch supports 3.10, 3.11, 3.12)")]),
    ([v(NEW, ARCH)], []),
]


@pytest.mark.parametrize("entries, expected", CHANGE_PYTHON)
def test_change_python(entries, expected):
    assert answer(causes.change_python, failure(*entries)) == expected


def test_split_environments():
    assert causes.split_environments(parse_request(["torch", "tensorflow"])).message == \
        "install torch and tensorflow into separate environments"
    assert causes.split_environments(parse_request(["torch"])).message == \
        "uninstall the conflicting framework or move it to its own environment"


def test_the_registries_in_order():
    assert causes.CAUSES == [causes.blocking_machines, causes.broken_rules]
    assert causes.WAYS_OUT == [causes.upgrade_driver, causes.jetpack, causes.pin_older, causes.cpu_build,
                               causes.change_python]
    for fn in causes.CAUSES + causes.WAYS_OUT:
        assert fn.__doc__ and len(fn.__doc__) > 60, fn.__name__


def test_no_solution_is_the_loop_over_the_registries():
    request = parse_request(["torch"])
    err = causes.no_solution(M, request, [T4], {KEY: [T4]}, {"torch": [v(OLD, FLOOR_OLD), v(NEW, FLOOR_NEW, PY)]},
                             ["torch"], [])
    assert [c.rule for c in err.causes] == ["driver_floor", "python"]
    assert [w.kind for w in err.ways_out] == ["upgrade_driver", "change_python"]
    assert err.message.startswith("no consistent set for torch: ")
