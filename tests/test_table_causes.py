"""No solution: the causes and the ways out, as a table on the small matrix; and a build the matrix lacks,
judged on what the environment states about it.

Facts: CUDA Toolkit Release Notes (driver 470 runs CUDA 11.4 at most; any CUDA 12.x runs on 525.60.13 and newer
under minor-version compatibility; 12.1 GA needs 530.30.02; Blackwell's first driver is CUDA 12.8 GA's 570.26);
PyTorch wheel local versions name the build's CUDA (``+cu126`` is CUDA 12.6, ``+cpu`` has none).
"""
from __future__ import annotations

import pytest

from cudamatrix.diagnose.findings import Installed
from cudamatrix.diagnose.stated import stated_build
from cudamatrix.errors import NoSolution
from cudamatrix.models import Environment, Framework
from cudamatrix.solve.solver import parse_request, solve
from smallmatrix import build, release, target, variant

PT = "https://download.pytorch.org/whl"
A = ["5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0"]
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
