"""Tests of cudamatrix/solve/causes.py.

The no-solution registries (``cudamatrix.solve.causes``): one table per cause and way-out function.

A case is a family's verdicts (each candidate with the Reasons that turned it down, per machine) -> that one
function's answer, as (rule or kind, sentence). The candidates are builds of the small matrix of ``smallmatrix``;
the verdicts are written out here as the solver states them, so each function is asked on its own. The documents
behind the expected answers are named above each table; ``no_solution`` itself is the loop over the registries.

No solution: the causes and the ways out, as a table on the small matrix; and a build the matrix lacks,
judged on what the environment states about it.

Facts: CUDA Toolkit Release Notes (driver 470 runs CUDA 11.4 at most; any CUDA 12.x runs on 525.60.13 and newer
under minor-version compatibility; 12.1 GA needs 530.30.02; Blackwell's first driver is CUDA 12.8 GA's 570.26);
PyTorch wheel local versions name the build's CUDA (``+cu126`` is CUDA 12.6, ``+cpu`` has none).

No solution, exactly: every cause (rule, machines, whole sentence), every way out, the summary and the hint, for
requests nothing fits; and the solver's own steps around the search (fleets of alike machines, what it keeps of
an installed environment, what an installed framework's nvidia-* requirements forbid).

Facts (the small matrix of ``smallmatrix`` copies them): CUDA Toolkit Release Notes, "CUDA Toolkit and
Corresponding Driver Versions": R450 runs CUDA 11.0 at most and R470 CUDA 11.4; 11.8 GA needs 520.61.05, 12.1 GA
530.30.02, 12.8 GA 570.26; under minor-version compatibility any 11.x runs on 450.80.02 and any 12.x on 525.60.13.
Blackwell's first driver is CUDA 12.8 GA's 570.26. Jetson AGX Orin is compute capability 8.7 (NVIDIA "CUDA GPU
Compute Capability"), and advisory CM-2026-002 of data/advisories.json sends Jetson boards to NVIDIA's JetPack
wheels. The framework rows of the small matrix are constructed; the rows of the snapshot
(``tests/data/matrix_snapshot``) carry their sources: torch 2.5.1 ships cp39-cp313 wheels and 2.4.1 cp38-cp312
(PyTorch RELEASE.md, "Release Compatibility Matrix"); the Requires-Dist of torch 2.5.1+cu124 pins
nvidia-cudnn-cu12==9.1.0.70 and that of tensorflow[and-cuda] 2.18.0 nvidia-cudnn-cu12==9.3.0.75 (wheel metadata).
"""
from __future__ import annotations

import dataclasses

import pytest
from support.smallmatrix import ARCHS as ARCHS_DOC
from support.smallmatrix import NOTES, build, release, replace, target, variant
from support.snapshot import snapshot_matrix

from cudamatrix.diagnose.findings import Installed
from cudamatrix.diagnose.stated import stated_build
from cudamatrix.errors import NoSolution, UsageError
from cudamatrix.matrix.data import Advisory, Architecture
from cudamatrix.models import Environment, Framework, FrameworkChoice, Rejection
from cudamatrix.solve import causes
from cudamatrix.solve.rules import Reason
from cudamatrix.solve.search import Candidate, Verdict
from cudamatrix.solve.solver import parse_request, solve
from cudamatrix.solve.target import Target, from_flags

# --- solve causes registry -----------------------------------------------------------------------------------------

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
    return [(getattr(x, "rule", None) or x.kind, x.message) for x in fn(f)]


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


# --- table causes --------------------------------------------------------------------------------------------------

PT = "https://download.pytorch.org/whl"


MATRIX = build(
    release("2.5.1", variant("cu121", "12.1", archs=A, cudnn="9.1.0", index_url=f"{PT}/cu121", local_version="+cu121"),
            variant("cu124", "12.4", archs=A, cudnn="9.1.0", index_url=f"{PT}/cu124", local_version="+cu124"),
            variant("cpu", None, index_url=f"{PT}/cpu", local_version="+cpu")),
    release("2.7.0", variant("cu128", "12.8", archs=A + ["12.0"], cudnn="9.17.0", index_url=f"{PT}/cu128",
                             local_version="+cu128"),
            variant("cpu", None, index_url=f"{PT}/cpu", local_version="+cpu")))


NO_SOLUTION = [
    (["torch"], target("470.82.01", "7.5", python="3.11"), ["driver_floor", "gpu_wanted"],
     [("upgrade_driver", "upgrade the driver to >= 525.60.13 (torch 2.7.0 cu128 then fits)")]),
    (["torch"], target("565.57.01", "12.0", python="3.11"), ["gpu_driver", "arch", "gpu_wanted"],
     [("upgrade_driver", "upgrade the driver to >= 570.26 (torch 2.7.0 cu128 then fits)")]),
    (["torch"], target("550.54.15", "7.5", python="3.13"), ["python"],
     [("change_python", "use Python 3.12 (torch 2.7.0 cu128 then fits)")]),
    (["torch==2.5.1"], target("570.86.10", "12.0", python="3.11"), ["arch", "gpu_wanted"],
     # the CPU way out is the CPU build of the pinned release, not the newest one
     [("pin_older", "relax the request: torch==2.7.0 (cu128) fits"),
      ("cpu_build", "use the CPU build: torch==2.5.1+cpu")]),
]


@pytest.mark.parametrize("request_, t, rules, ways", NO_SOLUTION)
def test_causes_and_ways_out(request_, t, rules, ways):
    with pytest.raises(NoSolution) as err:
        solve([t], parse_request(request_), MATRIX)
    detail = err.value.detail
    assert [c["rule"] for c in detail["causes"]] == rules
    assert [(w["kind"], w["message"]) for w in detail["ways_out"]][:len(ways)] == ways
    assert err.value.exit_code == 3
    assert err.value.hint.startswith("; ".join(m for _, m in ways))


def test_driver_floor_cause_names_both_floors():
    with pytest.raises(NoSolution) as err:
        solve([target("470.82.01", "7.5", python="3.11")], parse_request(["torch==2.5.1+cu121"]), MATRIX)
    assert err.value.detail["causes"][0]["message"] == (
        "driver 470.82.01 runs CUDA 11.4 at most; torch 2.5.1 cu121 needs CUDA 12.1, which needs driver >= 525.60.13 "
        "under minor-version compatibility, and 530.30.02 for full support")


def test_fleet_cause_names_the_machine_it_blocks():
    ok = target("550.54.15", "7.5", python="3.11")
    old = target("470.82.01", "7.5", python="3.11")
    import dataclasses

    old = dataclasses.replace(old, name="old-box")
    with pytest.raises(NoSolution) as err:
        solve([ok, old], parse_request(["torch==2.5.1+cu124"]), MATRIX)
    (cause,) = err.value.detail["causes"]
    assert cause["rule"] == "driver_floor" and cause["machines"] == ["old-box"]
    assert cause["message"].startswith("old-box: driver 470.82.01 runs CUDA 11.4 at most;")
    assert cause["message"].endswith("(it fits every other machine)")


STATED = [
    # installed version, stated variant, stated CUDA (report), stated cuDNN -> the build's CUDA, unknown facts
    ("2.9.0+cu126", "cu126", None, None, "12.6",
     ["the GPU architectures it was compiled for", "its cuDNN version", "the Python versions it is built for"]),
    ("2.9.0+cu118", "cu118", None, "9.1.0", "11.8",
     ["the GPU architectures it was compiled for", "the Python versions it is built for"]),
    ("1.6.0", None, "10.2", None, "10.2",
     ["the GPU architectures it was compiled for", "its cuDNN version", "the Python versions it is built for"]),
    ("2.9.0+cpu", "cpu", None, None, None, ["the Python versions it is built for"]),
    ("2.9.0+rocm6.2", None, None, None, "none",
     ["the CUDA version it was built with", "the Python versions it is built for"]),
    ("2.9.0", None, None, None, "none",
     ["the CUDA version it was built with", "the Python versions it is built for"]),
]


@pytest.mark.parametrize("version, variant_name, cuda, cudnn, build_cuda, unknown", STATED)
def test_stated_build(version, variant_name, cuda, cudnn, build_cuda, unknown):
    env = Environment(frameworks=[Framework(name="torch", version=version, variant=variant_name, cuda=cuda,
                                            cudnn=cudnn, source="report:collect_env")])
    rel, var, missing = stated_build(env, Installed("torch", version, variant_name, None, None))
    assert missing == unknown
    if build_cuda == "none":
        assert (rel, var) == (None, None)
        return
    assert str(rel.version) == version.split("+")[0] and rel.python == []
    assert (str(var.cuda) if var.cuda else None) == build_cuda
    assert (str(var.cudnn) if var.cudnn else None) == cudnn
    assert var.archs == [] and var.source == "stated by the environment (report:collect_env)"


# the same facts when only the installed version states them (no report, no variant detected)
LOCAL_ONLY = [
    ("2.9.0+cu126", "12.6", "cu126"),
    ("1.7.1+cu92", "9.2", "cu92"),
    ("2.9.0+cpu", None, "cpu"),
    ("2.9.0+cu9", "none", None),      # not a CUDA tag PyTorch uses: unknown
    ("2.9.0+cuda126", "none", None),
    ("not-a-version+cu126", "bad", None),
]


@pytest.mark.parametrize("version, build_cuda, name", LOCAL_ONLY)
def test_stated_build_from_the_local_tag_alone(version, build_cuda, name):
    other = Framework(name="torch", version="1.0.0", variant="cpu", cuda="10.2", source="report")  # another build
    env = Environment(frameworks=[other])
    rel, var, missing = stated_build(env, Installed("torch", version, None, None, None))
    if build_cuda == "bad":
        assert (rel, var, missing) == (None, None, ["its version"])
        return
    if build_cuda == "none":
        assert (rel, var) == (None, None) and missing[0] == "the CUDA version it was built with"
        return
    assert (str(var.cuda) if var.cuda else None, var.name) == (build_cuda, name)
    assert var.source == "stated by the environment (installed version)"


def test_a_report_can_state_the_cpu_build():
    env = Environment(frameworks=[Framework(name="torch", version="2.9.0", variant="cpu", source="report")])
    rel, var, missing = stated_build(env, Installed("torch", "2.9.0", "cpu", None, None))
    assert var.cuda is None and var.name == "cpu" and missing == ["the Python versions it is built for"]


# --- mut solver ----------------------------------------------------------------------------------------------------

LINUX = 'platform_system == "Linux" and platform_machine == "x86_64"'


def cu(name: str, cuda: str, archs=A, cudnn: str = "9.1.0", **kw):
    return variant(name, cuda, archs=archs, cudnn=cudnn, index_url=f"{PT}/{name}", local_version=f"+{name}", **kw)


CPU_whole = variant("cpu", None, index_url=f"{PT}/cpu", local_version="+cpu")


CU118, CU121, CU124 = cu("cu118", "11.8"), cu("cu121", "12.1"), cu("cu124", "12.4")


CU128_whole = cu("cu128", "12.8", archs=A + ["10.0", "12.0"], cudnn="9.17.0")


M_whole = build(release("2.5.1", CU118, CU121, CU124, CPU_whole), release("2.6.0", CU128_whole, CPU_whole),
          release("2.7.0", CU118, CU128_whole, CPU_whole))


FLEET = build(release("2.5.1", CU121, CU124, CPU_whole), release("2.7.0", CU128_whole, CPU_whole))  # no CUDA 11 build: R470 runs none


GPU_ONLY = build(release("2.5.1", CU121, CU124), release("2.7.0", CU128_whole))


# the sentences the rules write for these rows (rules.check), used in several cases below
FLOOR_121 = ("driver 470.82.01 runs CUDA 11.4 at most; torch 2.5.1 cu121 needs CUDA 12.1, which needs driver "
             ">= 525.60.13 under minor-version compatibility, and 530.30.02 for full support")


FLOOR_128 = ("driver 470.82.01 runs CUDA 11.4 at most; torch 2.7.0 cu128 needs CUDA 12.8, which needs driver "
             ">= 525.60.13 under minor-version compatibility, and 570.26 for full support")


R450_118 = ("driver 450.51.06 runs CUDA 11.0 at most; torch 2.5.1 cu118 needs CUDA 11.8, which needs driver "
            ">= 450.80.02 under minor-version compatibility, and 520.61.05 for full support")


NO_SM120 = ("torch 2.5.1 cu118 has no kernel image for sm_120 (compute capability 12.0): "
            "SASS sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90, PTX none")


BLACKWELL_R470 = ("driver 470.82.01 does not drive sm_120 (Blackwell, compute capability 12.0): the first driver "
                  "for it is 570.26 (branch R570)")


CPU_251 = "torch 2.5.1 cpu is a CPU build and the target has a GPU (ask for it explicitly, e.g. torch==2.5.1+cpu)"


OLDER_CUDA = ""  # no longer said: an older torch that fits is the pin_older way out, re-solved


def named(t: Target, name: str) -> Target:
    return dataclasses.replace(t, name=name)


def explain(targets: list[Target], texts: list[str], matrix, installed: Environment | None = None):
    """The NoSolution of a request: (message, causes as (rule, machines, message), ways out as (kind, message),
    hint)."""
    with pytest.raises(NoSolution) as err:
        solve(targets, parse_request(texts), matrix, installed=installed)
    e = err.value
    assert e.exit_code == 3 and e.detail["causes"] == [c.to_dict() for c in e.causes]
    return (str(e), [(c.rule, c.machines, c.message) for c in e.causes],
            [(w.kind, w.message) for w in e.ways_out], e.hint)


# request, targets -> every cause (rule, machines it blocks, sentence) and every way out (kind, sentence)
NO_SOLUTION_whole = {
    # R450 runs CUDA 11.0: the CUDA 11.8 builds need 450.80.02 (11.x minor-version compatibility), the 12.x
    # builds 525.60.13; the lowest way out names the newest build it lets in, and what the newest release needs
    "r450-cuda11-floor": (
        M_whole, ["torch"], [target("450.51.06", "7.5", python="3.11")],
        [("driver_floor", ["t"], R450_118), ("gpu_wanted", [], CPU_251)],
        [("upgrade_driver", "upgrade the driver to >= 450.80.02 (torch 2.7.0 cu118 then fits; the newest, torch "
                            "2.7.0 cu128, needs >= 525.60.13)" + OLDER_CUDA),
         ("cpu_build", "use the CPU build: torch==2.7.0+cpu")]),
    # Blackwell on R470: the CUDA 12.8 builds have sm_120 but need both 525.60.13 (CUDA) and 570.26 (the GPU's
    # first driver): the way out is the higher of the two; the older builds have no sm_120 at all
    "blackwell-r470-both-floors": (
        M_whole, ["torch"], [target("470.82.01", "12.0", python="3.11")],
        [("gpu_driver", ["t"], BLACKWELL_R470), ("arch", ["t"], NO_SM120), ("driver_floor", ["t"], FLOOR_121),
         ("gpu_wanted", [], CPU_251)],
        [("upgrade_driver", "upgrade the driver to >= 570.26 (torch 2.7.0 cu128 then fits)" + OLDER_CUDA),
         ("cpu_build", "use the CPU build: torch==2.7.0+cpu")]),
    # a pinned release without sm_120 on a Blackwell GPU whose driver is new enough: the newest release that has
    # it is the way out, and the CPU build of the pinned release
    "blackwell-pinned-release-no-sm120": (
        M_whole, ["torch==2.5.1"], [target("570.86.10", "12.0", python="3.11")],
        [("arch", ["t"], NO_SM120), ("gpu_wanted", [], CPU_251)],
        [("pin_older", "relax the request: torch==2.7.0 (cu128) fits"),
         ("cpu_build", "use the CPU build: torch==2.5.1+cpu")]),
    # a family the matrix holds nothing of, then one whose every build needs a newer driver: both are explained
    "no-release-then-old-driver": (
        M_whole, ["tensorflow", "torch==2.5.1"], [target("450.51.06", "7.5", python="3.11")],
        [("request", [], "the matrix has no tensorflow release"), ("driver_floor", ["t"], R450_118),
         ("gpu_wanted", [], CPU_251)],
        [("upgrade_driver", "upgrade the driver to >= 450.80.02 (torch 2.5.1 cu118 then fits; the newest, torch "
                            "2.5.1 cu121, needs >= 525.60.13)" + OLDER_CUDA),
         ("cpu_build", "use the CPU build: torch==2.5.1+cpu")]),
    "unknown-release-then-no-release": (
        M_whole, ["torch==3.0", "tensorflow"], [target("550.54.15", "7.5", python="3.11")],
        [("request", [], "no torch release in the matrix matches torch==3.0"),
         ("request", [], "the matrix has no tensorflow release")],
        []),
    # fleets: a machine that every build would fit but for it is named, with the newest such build
    "fleet-two-alike-old-machines": (
        FLEET, ["torch==2.5.1"], [target("550.54.15", "7.5", python="3.11"),
                                  named(target("470.82.01", "7.5", python="3.11"), "old-b"),
                                  named(target("470.82.01", "7.5", python="3.11"), "old-a")],
        [("driver_floor", ["old-a", "old-b"], f"old-b, old-a: {FLOOR_121} (it fits every other machine)")],
        [("upgrade_driver", "upgrade the driver to >= 525.60.13 (torch 2.5.1 cu121 then fits)" + OLDER_CUDA),
         ("cpu_build", "use the CPU build: torch==2.5.1+cpu")]),
    "fleet-newest-build-names-the-blocker": (
        FLEET, ["torch"], [target("550.54.15", "7.5", python="3.11"),
                           named(target("470.82.01", "7.5", python="3.11"), "old")],
        [("driver_floor", ["old"], f"old: {FLOOR_128} (it fits every other machine)")],
        [("upgrade_driver", "upgrade the driver to >= 525.60.13 (torch 2.7.0 cu128 then fits)" + OLDER_CUDA),
         ("cpu_build", "use the CPU build: torch==2.7.0+cpu")]),
    # no build fits all machines but one: each rule names every machine it blocks
    "fleet-each-rule-with-its-machines": (
        GPU_ONLY, ["torch"], [named(target("470.82.01", "7.5", python="3.11"), "old"),
                              named(target("550.54.15", "7.5", python="3.13"), "py313"),
                              named(target("470.57.02", "7.5", python="3.11"), "old2")],
        [("driver_floor", ["old", "old2"], FLOOR_121),
         ("python", ["py313"], "torch 2.5.1 cu121 supports Python 3.10, 3.11, 3.12, not 3.13")],
        # Python 3.12 on every machine still leaves the old drivers: a way out that lifts nothing is not printed
        []),
}


@pytest.mark.parametrize("case", list(NO_SOLUTION_whole), ids=list(NO_SOLUTION_whole))
def test_causes_and_ways_out_exactly(case):
    matrix, texts, targets, causes, ways = NO_SOLUTION_whole[case]
    message, got_causes, got_ways, hint = explain(targets, texts, matrix)
    assert got_causes == causes
    assert got_ways == ways
    # the summary names the first three causes; the hint is every way out
    assert message == f"no consistent set for {' '.join(texts)}: " + "; ".join(m for _, _, m in causes[:3])
    assert hint == ("; ".join(m for _, m in ways) if ways else None)


def test_a_jetson_board_is_said_first_and_sent_to_jetpack():
    # CM-2026-002 (data/advisories.json): no default-index or PyTorch-index torch build runs on a Jetson board
    jetpack = Advisory(id="CM-2026-002", affects=["torch"], gpu_compute_capabilities=["5.3", "6.2", "7.2", "8.7"],
                       symptom="the default-index and PyTorch-index aarch64 builds carry no Tegra kernels",
                       fix="Install the torch wheel NVIDIA builds for the board's JetPack release",
                       source="https://forums.developer.nvidia.com/t/pytorch-for-jetson-version-1-9-0-now-available/72048")
    ampere = Architecture(name="Ampere", compute_capabilities=["8.0", "8.6", "8.7"], source=ARCHS_DOC,
                          min_driver={"8.0": "450.51.05", "8.6": "455.23"}, min_driver_source=NOTES)
    rel = replace(release("2.5.1", CU121, CU124, CPU_whole), platforms=["linux_aarch64", "linux_x86_64"])
    m = build(rel)
    m = replace(m, advisories=replace(m.advisories, advisories=[jetpack]),
                gpus=replace(m.gpus, architectures=[a if a.name != "Ampere" else ampere
                                                    for a in m.gpus.architectures]))
    orin = target("540.4.0", "8.7", python="3.13", platform="linux_aarch64")
    message, causes, ways, _ = explain([orin], ["torch"], m)
    # the Python rule comes first in each build's reasons; the board rule is still said first
    assert causes == [
        ("jetson", ["t"], "sm_87 (compute capability 8.7) is a Jetson board: torch 2.5.1 cu121 from the default "
                          "or PyTorch index has no kernels for it; install NVIDIA's JetPack wheels of torch for the "
                          "board's JetPack release (CM-2026-002)"),
        ("python", ["t"], "torch 2.5.1 cu121 supports Python 3.10, 3.11, 3.12, not 3.13")]
    assert ways == [
        ("jetpack", "install torch from NVIDIA's JetPack wheels for the board's JetPack release (NVIDIA's "
                    "'PyTorch for Jetson' builds or the jetson-containers images); no default-index or "
                    "PyTorch-index build has kernels for it")]  # another Python lifts nothing on a Jetson board


def snapshot_target(**flags) -> Target:
    m = snapshot_matrix()
    return named(from_flags(m, driver=flags["driver"], gpus=flags["gpus"], python=flags.get("python"),
                            platform=None, cuda_toolkit=None, base=Target(name="box")), "box")


def test_python_below_the_release_names_the_newest_python_and_an_older_release():
    # torch 2.5.1 ships cp39-cp313, so Python 3.8 is out; 2.4.1 (cp38-cp312) is the newest release for it, GPU
    # and CPU builds alike; the newest Python of 2.5.1 is 3.13 (versions sort as versions: 3.13 after 3.9)
    box = snapshot_target(driver="550.54.15", gpus=["Tesla T4"], python="3.8")
    message, causes, ways, hint = explain([box], ["torch==2.5.1"], snapshot_matrix())
    assert causes == [("python", ["box"], "torch 2.5.1 cpu supports Python 3.9, 3.10, 3.11, 3.12, 3.13, not 3.8")]
    assert ways == [("pin_older", "relax the request: torch==2.4.1 (cu118) fits"),
                    ("cpu_build", "use the CPU build: torch==2.4.1+cpu"),
                    ("change_python", "use Python 3.13 (torch 2.5.1 cu124 then fits)")]


# the wheel metadata of torch 2.5.1+cu124 and tensorflow[and-cuda] 2.18.0 pin different builds of the same
# nvidia-* wheels (CUDA 12.4 vs 12.5 libraries, cuDNN 9.1.0.70 vs 9.3.0.75): ten wheels disagree, five are named
TF218 = ["cublas-cu12==12.4.5.8", "cublas-cu12==12.5.3.2", "cuda-cupti-cu12==12.4.127", "cuda-cupti-cu12==12.5.82",
         "cuda-nvrtc-cu12==12.4.127", "cuda-nvrtc-cu12==12.5.82", "cuda-runtime-cu12==12.4.127",
         "cuda-runtime-cu12==12.5.82", "cudnn-cu12==9.1.0.70", "cudnn-cu12==9.3.0.75"]


def test_torch_and_tensorflow_that_pin_different_cudnn_wheels():
    box = snapshot_target(driver="550.54.15", gpus=["Tesla T4"], python="3.11")
    texts = ["torch==2.5.1", "tensorflow[and-cuda]==2.18.*"]
    message, causes, ways, hint = explain([box], texts, snapshot_matrix())
    pairs = [(TF218[i], TF218[i + 1]) for i in range(0, 10, 2)]
    expected = [("shared_nvidia", [], f"torch 2.5.1 cu124 needs nvidia-{a}, tensorflow 2.18.0 and-cuda needs "
                                      f"nvidia-{b}") for a, b in pairs]
    assert causes == expected
    assert ways == [("split_environments", "install torch and tensorflow into separate environments")]
    assert message == f"no consistent set for {' '.join(texts)}: " + "; ".join(m for _, _, m in expected[:3])
    assert hint == "install torch and tensorflow into separate environments"


def test_an_installed_tensorflow_whose_cudnn_pin_no_torch_build_shares():
    m = snapshot_matrix()
    tf = next(r for r in m.frameworks("tensorflow") if str(r.version) == "2.18.0")
    env = Environment(packages={"tensorflow": "2.18.0"}, requirements={"tensorflow": list(tf.variants[0].nvidia_pins)})
    box = snapshot_target(driver="550.54.15", gpus=["Tesla T4"], python="3.11")
    message, causes, ways, hint = explain([box], ["torch==2.5.1"], m, installed=env)
    # cu124 pins its wheels (metadata); cu121's and cu118's follow from their known cuDNN and CUDA
    assert causes == [
        ("co_installed", [], "installed tensorflow 2.18.0 needs nvidia-cuda-nvrtc-cu12==12.5.82, torch 2.5.1 cu124 "
                             "needs nvidia-cuda-nvrtc-cu12==12.4.127"),
        ("co_installed", [], "installed tensorflow 2.18.0 needs nvidia-cudnn-cu12==9.3.0.75, torch 2.5.1 cu121 "
                             "needs nvidia-cudnn-cu12==9.1.0.70"),
        ("co_installed", [], "installed tensorflow 2.18.0 needs nvidia-cudnn-cu12, torch 2.5.1 cu118 needs "
                             "nvidia-cudnn-cu11: two CUDA majors of one library install the same files")]
    assert ways == [("split_environments", "uninstall the conflicting framework or move it to its own environment")]
    assert message == "no consistent set for torch==2.5.1: " + "; ".join(m for _, _, m in causes)


PINNED = cu("cu121", "12.1", cudnn="9.1.0.70", nvidia_pins=[f"nvidia-cudnn-cu12==9.1.0.70; {LINUX}"])


VISION = build(replace(release("2.5.1", PINNED, CPU_whole), companions={"torchvision": "0.20.1"}),
               replace(release("2.7.0", CU128_whole, CPU_whole), companions={"torchvision": "0.22.0"}))


T4_whole = target("550.54.15", "7.5", python="3.11")


def chosen(sol) -> list[tuple[str, str, str]]:
    return [(f.name, f.version, f.variant) for f in sol.frameworks]


def test_no_target_is_a_usage_error():
    with pytest.raises(UsageError) as err:
        solve([], parse_request(["torch"]), FLEET)
    assert str(err.value) == "no target to solve for" and err.value.exit_code == 2


def test_alike_machines_are_solved_once_and_counted():
    a, b = named(T4_whole, "a"), named(T4_whole, "b")
    c = named(target("535.104.05", "7.5", python="3.11"), "c")
    sol = solve([a, b, c], parse_request(["torch"]), FLEET)
    # 535.104.05 runs 12.1 fully and 12.4 and 12.8 under minor-version compatibility (SASS sm_75 present): three
    # CUDA builds fit both kinds of machine; the two CPU builds are not the answer on a GPU machine
    assert sol.trace[:3] == ["target a: GPU (sm 7.5); driver 550.54.15; Python 3.11; linux_x86_64 (+1 alike)",
                             "target c: GPU (sm 7.5); driver 535.104.05; Python 3.11; linux_x86_64",
                             "torch: 3 of 5 candidates fit every target"]
    assert chosen(sol) == [("torch", "2.7.0", "cu128")]


# a machine with a driver is a GPU machine even without a GPU named (a Dockerfile step solving for the machine the
# image runs on); one whose driver does not work (mismatch, no device visible) gets the CPU build
WANTS_GPU = [
    (target("550.54.15", python="3.11"), ("torch", "2.7.0", "cu128")),
    (T4_whole, ("torch", "2.7.0", "cu128")),
    (dataclasses.replace(T4_whole, driver_usable=False), ("torch", "2.7.0", "cpu")),
    (target(None, python="3.11"), ("torch", "2.7.0", "cpu")),
]


@pytest.mark.parametrize("t, expected", WANTS_GPU)
def test_gpu_build_wanted_where_a_gpu_or_driver_is(t, expected):
    assert chosen(solve([t], parse_request(["torch"]), FLEET)) == [expected]


# an installed framework newer than the matrix knows, which meets the request, stays as it is (minimal change)
KEEP = [
    ("2.9.0+cu126", "cu126", ["torch"], True),
    ("2.9.0+cu126", None, ["torch>=2.8"], True),
    ("2.9.0rc1", None, ["torch>=2.8"], True),          # a pre-release that is installed meets the request
    ("2.9.0+cu126", "cu126", ["torch<2.9"], False),
    ("2.9.0+cu126", "cu126", ["torch<2.9", "torchvision"], False),
    ("2.7.0+cu128", "cu128", ["torch"], False),        # a release the matrix knows is solved as usual
    ("2.6.5", None, ["torch"], False),                 # older than the newest known: not "newer"
    ("not a version", None, ["torch"], False),
]


@pytest.mark.parametrize("version, variant_name, texts, kept", KEEP)
def test_installed_framework_newer_than_the_matrix(version, variant_name, texts, kept):
    env = Environment(packages={"torch": version},
                      frameworks=[Framework(name="torch", version=version, variant=variant_name, cuda="12.6",
                                            cudnn="9.10.2")])
    sol = solve([T4_whole], parse_request(texts), VISION, installed=env)
    line = (f"torch {version} is installed and newer than matrix test knows: kept as it is, unverified by the "
            f"matrix")
    if kept:
        assert sol.frameworks == [FrameworkChoice(name="torch", version=version, variant=variant_name or "unknown",
                                                  cuda="12.6", cudnn="9.10.2")]
        assert line in sol.trace and sol.to_install == []
    else:
        assert chosen(sol) == [("torch", "2.7.0", "cu128")] and line not in sol.trace


def test_only_frameworks_of_the_request_are_kept_and_a_bad_version_skips_only_itself():
    jax = replace(release("0.4.30", cu("cuda12", "12.1", pip_extra="cuda12"), name="jax"),
                  companions={"jaxlib": "0.4.30"})
    m = replace(FLEET, jax=replace(FLEET.jax, releases=[jax]))
    env = Environment(frameworks=[Framework(name="torch", version="2.9.0"), Framework(name="jax", version="0.5.0")])
    # torch newer than the matrix but not asked for: left alone; jax newer and asked for: kept
    assert chosen(solve([T4_whole], parse_request(["jax"]), m, installed=env)) == [("jax", "0.5.0", "unknown")]
    env.frameworks[0] = Framework(name="torch", version="not a version")
    sol = solve([T4_whole], parse_request(["torch", "jax"]), m, installed=env)
    assert chosen(sol) == [("torch", "2.7.0", "cu128"), ("jax", "0.5.0", "unknown")]
    env.frameworks[0] = Framework(name="torch", version="2.7.0+cu128", variant="cu128")  # known: solved
    assert chosen(solve([T4_whole], parse_request(["torch", "jax"]), m, installed=env)) == chosen(sol)


def test_the_installed_build_is_kept_over_a_newer_release():
    # minimal change: the installed 2.5.1+cu121 fits, so it stays although 2.7.0 is newer (README, "Preferences")
    env = Environment(packages={"torch": "2.5.1+cu121"},
                      frameworks=[Framework(name="torch", version="2.5.1+cu121", variant="cu121")])
    assert chosen(solve([T4_whole], parse_request(["torch"]), FLEET, installed=env)) == [("torch", "2.5.1", "cu121")]
    assert chosen(solve([T4_whole], parse_request(["torch"]), FLEET)) == [("torch", "2.7.0", "cu128")]


def test_installed_jax_build_is_read_from_its_jaxlib():
    # detect records JAX's CUDA variant on jaxlib, not on jax; the installed build is kept over a newer release
    jax = [replace(release(v, cu("cuda12", "12.1", pip_extra="cuda12"), name="jax"), companions={"jaxlib": v})
           for v in ("0.4.30", "0.4.31")]
    m = replace(FLEET, jax=replace(FLEET.jax, releases=jax))
    env = Environment(frameworks=[Framework(name="jax", version="0.4.30"),
                                  Framework(name="jaxlib", version="0.4.30", variant="cuda12")])
    assert chosen(solve([T4_whole], parse_request(["jax"]), m, installed=env)) == [("jax", "0.4.30", "cuda12")]
    env.frameworks[1] = Framework(name="jaxlib", version="0.4.29", variant="cuda12")  # not jax's own jaxlib
    assert chosen(solve([T4_whole], parse_request(["jax"]), m, installed=env)) == [("jax", "0.4.31", "cuda12")]


# the nvidia-* requirements of an installed framework the request leaves in place constrain the answer;
# those of a framework the request replaces, or of a distribution that is no framework, do not
TF_CUDNN = "nvidia-cudnn-cu12==9.3.0.75"


CO_INSTALLED = [
    ({"tensorflow": [TF_CUDNN]}, {}, "installed tensorflow"),
    ({"tensorflow": [TF_CUDNN]}, {"tensorflow": "2.18.0"}, "installed tensorflow 2.18.0"),
    ({"tensorflow": ["nvidia-cudnn-cu12 ==", TF_CUDNN]}, {"tensorflow": "2.18.0"}, "installed tensorflow 2.18.0"),
    ({"jax-cuda12-plugin": [TF_CUDNN]}, {"jax-cuda12-plugin": "0.4.30"}, "installed jax-cuda12-plugin 0.4.30"),
    ({"torch": [TF_CUDNN]}, {"torch": "2.4.0"}, None),
    ({"cupy-cuda12x": [TF_CUDNN]}, {}, None),
    ({"tensorflow": ["nvidia-cudnn-cu12 =="]}, {}, None),
    # one distribution left out does not end the reading of the others
    ({"cupy-cuda12x": [TF_CUDNN], "tensorflow": [TF_CUDNN]}, {"tensorflow": "2.18.0"}, "installed tensorflow 2.18.0"),
]


@pytest.mark.parametrize("requirements, packages, label", CO_INSTALLED)
def test_installed_requirements_constrain_the_answer(requirements, packages, label):
    m = build(release("2.5.1", PINNED))
    env = Environment(packages=packages, requirements=requirements)
    if label is None:
        assert chosen(solve([T4_whole], parse_request(["torch"]), m, installed=env)) == [("torch", "2.5.1", "cu121")]
        return
    message, causes, ways, _ = explain([T4_whole], ["torch"], m, installed=env)
    assert causes == [("co_installed", [], f"{label} needs {TF_CUDNN}, torch 2.5.1 cu121 needs "
                                           f"nvidia-cudnn-cu12==9.1.0.70")]
    assert ways == [("split_environments", "uninstall the conflicting framework or move it to its own environment")]


def test_without_a_named_conflict_the_cause_says_no_shared_set():
    # a build whose nvidia-* pins the matrix does not hold cannot be shown to share a set with an installed
    # framework's: rejected as unknown, and the cause falls back to the general sentence
    bare = cu("cu121", "12.1", cudnn=None)
    env = Environment(packages={"tensorflow": "2.18.0"}, requirements={"tensorflow": [TF_CUDNN]})
    m = build(release("2.5.1", bare))
    message, causes, ways, _ = explain([T4_whole], ["torch"], m, installed=env)
    with pytest.raises(NoSolution) as err:
        solve([T4_whole], parse_request(["torch"]), m, installed=env)
    assert [(r.candidate, r.rules, r.reasons) for r in err.value.rejected] == [
        ("torch 2.5.1 cu121", ["unknown"], ["the nvidia-* wheels torch 2.5.1 cu121 pins are not in the matrix, so "
                                            "whether it shares one set of them with another framework is unknown"])]
    assert causes == [("shared_nvidia", [], "no combination of the requested frameworks shares one consistent set "
                                            "of nvidia-* wheels")]
    assert ways == [("split_environments", "uninstall the conflicting framework or move it to its own environment")]
    assert message == ("no consistent set for torch: no combination of the requested frameworks shares one "
                       "consistent set of nvidia-* wheels")


def test_a_solution_keeps_the_rejections_of_every_family():
    # a CPU build is turned down on a GPU machine, in each family; the pair shares one set of nvidia-* wheels
    jax = replace(release("0.4.30", cu("cuda12", "12.1", pip_extra="cuda12",
                                       nvidia_pins=[f"nvidia-cublas-cu12==12.1.3.1; {LINUX}"]),
                          variant("cpu", None), name="jax"), companions={"jaxlib": "0.4.30"})
    m = build(release("2.5.1", PINNED, CPU_whole))
    m = replace(m, jax=replace(m.jax, releases=[jax]))
    sol = solve([T4_whole], parse_request(["torch", "jax"]), m)
    assert chosen(sol) == [("torch", "2.5.1", "cu121"), ("jax", "0.4.30", "cuda12")]
    assert [(r.candidate, r.rules) for r in sol.rejected] == [("torch 2.5.1 cpu", ["gpu_wanted"]),
                                                              ("jax 0.4.30 cpu", ["gpu_wanted"])]


def test_a_build_needs_the_higher_of_two_floors_of_one_branch_as_versions():
    # CUDA Toolkit Release Notes: CUDA 12.8 GA needs 570.26 (Blackwell's first driver here) and CUDA 12.8
    # Update 1 needs 570.124.06, a later driver of the same R570 branch; a build documenting the latter as its
    # minimum (constructed row) needs 570.124.06 on a Blackwell GPU, though "570.26" sorts after it as text
    documented = cu("cu128", "12.8", archs=A + ["10.0", "12.0"], cudnn="9.17.0", min_driver="570.124.06")
    m = build(release("2.7.0", documented, CPU_whole))
    _, causes, ways, _ = explain([target("560.35.03", "12.0", python="3.11")], ["torch"], m)
    assert [rule for rule, _, _ in causes] == ["driver_floor", "gpu_driver", "gpu_wanted"]
    assert ways == [("upgrade_driver", "upgrade the driver to >= 570.124.06 (torch 2.7.0 cu128 then fits)"
                                       + OLDER_CUDA),
                    ("cpu_build", "use the CPU build: torch==2.7.0+cpu")]


def test_jaxlib_lends_its_variant_to_jax_only():
    # detect records JAX's variant on jaxlib; a torch whose build is not stated borrows nothing from a jaxlib,
    # even of the same version string (torch 0.4.1 and jaxlib 0.4.1 were both published): on a machine without
    # a GPU the newest CPU build is chosen, not the 0.4.1 CPU build as if it were the installed one
    m = build(release("0.4.1", CPU_whole), release("2.5.1", CU121, CPU_whole))
    env = Environment(frameworks=[Framework(name="torch", version="0.4.1"),
                                  Framework(name="jaxlib", version="0.4.1", variant="cpu")])
    assert chosen(solve([target(None, python="3.11")], parse_request(["torch"]), m, installed=env)) == [
        ("torch", "2.5.1", "cpu")]
    env.frameworks[0] = Framework(name="torch", version="0.4.1", variant="cpu")  # stated: kept
    assert chosen(solve([target(None, python="3.11")], parse_request(["torch"]), m, installed=env)) == [
        ("torch", "0.4.1", "cpu")]


def test_a_no_solution_s_json_is_made_from_its_records_whenever_read():
    """One source (issue #41): the ways out kept after re-solving are the ones the JSON lists, with no second copy
    to keep in step by hand (the JSON was made once, when the error was raised, and went stale)."""
    from cudamatrix.errors import NoSolution
    from cudamatrix.models import Cause, WayOut

    upgrade = WayOut(message="upgrade the driver to 570.26", kind="upgrade_driver", change={"driver": "570.26"})
    cpu = WayOut(message="use a CPU build", kind="cpu_build")
    exc = NoSolution("no consistent set", causes=[Cause(rule="driver_floor", message="driver 470 is too old")],
                     ways_out=[upgrade, cpu])
    exc.ways_out = [cpu]  # what checked_ways keeps
    assert exc.detail["ways_out"] == [cpu.to_dict()]
    assert exc.as_dict()["detail"]["causes"] == [{"rule": "driver_floor", "message": "driver 470 is too old",
                                                  "machines": []}]
