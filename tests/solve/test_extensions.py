"""Extensions solved with their framework (solve/extensions.py), on the shipped data/extensions.json and torch.json.

Every expectation is worked out from the data's own rows, which scripts/refresh_extensions.py read from the wheels:
vllm's and xformers' ``Requires-Dist: torch==X`` (METADATA), the CUDA major their libraries link (vllm's
``_C.abi3.so`` names ``libcudart.so.12`` up to 0.19.1 and ``libcudart.so.13`` from 0.20.0, whose torch 2.11.0
defaults to CUDA 13), cupy-cudaNNx's name and onnxruntime-gpu's ``nvidia-cuda-runtime~=13.0`` / its CUDA provider's
``libcublasLt.so.N``. Before this module an extension was passed to pip untouched: ``solve torch vllm`` pinned the
newest torch and left ``vllm`` bare (pip then pairs it with vllm 0.2.5, the last release without an exact pin).
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version
from support.fakes import run_cli

from cudamatrix.errors import NoSolution
from cudamatrix.matrix.data import default_data_dir, load_matrix_from
from cudamatrix.solve.solver import parse_request, solve
from cudamatrix.solve.target import from_flags

H100 = ["--gpu", "H100"]
R580 = "580.65.06"  # the first R580 driver: CUDA 13.0's floor (cuda.json)
R570 = "570.86.10"  # runs CUDA 12.8 at most


@pytest.fixture(scope="module")
def matrix():
    return load_matrix_from(default_data_dir(), trusted=True)


def rows(matrix, name):
    return sorted((r for r in matrix.extensions.releases if r.name == name), key=lambda r: r.version, reverse=True)


def default_build(matrix, version):
    release = next(r for r in matrix.frameworks("torch") if str(r.version) == version)
    return next(v for v in release.variants if v.pypi_default)


def torch_pin(row) -> str:
    (spec,) = SpecifierSet(row.requires["torch"])
    assert spec.operator == "=="
    return spec.version


def solved(matrix, texts, driver, python=None):
    targets = [from_flags(matrix, driver=driver, gpus=["H100"], python=python, platform=None, cuda_toolkit=None)]
    return solve(targets, parse_request(texts), matrix)


def pins(solution) -> dict[str, str]:
    return {p.name: p.version for p in solution.packages}


def test_torch_vllm_on_h100_r580_is_a_current_vllm_with_its_exact_torch(matrix):
    newest = rows(matrix, "vllm")[0]
    assert newest.cuda_major == default_build(matrix, torch_pin(newest)).cuda.major  # built for torch's default
    sol = solved(matrix, ["torch", "vllm"], R580)
    got = pins(sol)
    assert got["vllm"] == str(newest.version) and Version(got["vllm"]) > Version("0.2.5")
    assert got["torch"].split("+")[0] == torch_pin(newest)
    assert sol.cuda.split(".")[0] == str(newest.cuda_major)
    assert any(f"vllm {newest.version}" in n and f"torch=={torch_pin(newest)}" in n for n in sol.notes)
    assert f"vllm=={newest.version}" in sol.pip_args and "vllm" not in sol.pip_args  # pinned, never bare


def test_vllm_alone_solves_torch_with_it(matrix):
    newest = rows(matrix, "vllm")[0]
    assert pins(solved(matrix, ["vllm"], R580))["vllm"] == str(newest.version)


def test_vllm_at_least_0_12_on_r570_lands_on_a_cuda_12_torch(matrix):
    # R570 runs no CUDA 13 build: the newest vllm >= 0.12 whose libraries link CUDA 12, with the torch it pins
    want = next(r for r in rows(matrix, "vllm") if r.version >= Version("0.12") and r.cuda_major == 12)
    sol = solved(matrix, ["vllm>=0.12"], R570)
    got = pins(sol)
    assert got["vllm"] == str(want.version) and got["torch"].split("+")[0] == torch_pin(want)
    assert sol.cuda.startswith("12.")


def test_vllm_that_needs_cuda_13_on_r570_names_the_r580_floor(matrix):
    first13 = min(r.version for r in rows(matrix, "vllm") if r.cuda_major == 13)
    floor = next(m.linux_min_driver for m in matrix.cuda.minor_compat if m.cuda_major == 13)
    with pytest.raises(NoSolution) as err:
        solved(matrix, [f"vllm>={first13}"], R570)
    (cause,) = err.value.causes
    assert cause.rule == "extension_build" and f"driver >= {floor}" in cause.message
    kinds = {w.kind: w for w in err.value.ways_out}
    assert kinds["upgrade_driver"].change == {"driver": floor}
    older = next(r for r in rows(matrix, "vllm") if r.cuda_major == 12)
    assert kinds["pin_older"].change == {"extension": "vllm", "requirement": f"vllm=={older.version}"}


def test_xformers_pinned_against_another_torch_exits_3_with_the_xformers_of_that_torch(matrix):
    old = next(r for r in rows(matrix, "xformers") if str(r.version) == "0.0.29.post3")
    assert torch_pin(old) == "2.6.0"  # its METADATA
    for_280 = next(r for r in rows(matrix, "xformers") if r.requires.get("torch") == "==2.8.0")
    with pytest.raises(NoSolution) as err:
        solved(matrix, ["torch==2.8.0", "xformers==0.0.29.post3"], R580)
    assert "requires torch==2.6.0" in err.value.causes[0].message
    changes = [w.change for w in err.value.ways_out]
    assert {"extension": "xformers", "requirement": f"xformers=={for_280.version}"} in changes
    assert {"family": "torch", "requirement": "torch==2.6.0"} in changes
    # and the answer for torch 2.8.0 is that xformers (0.0.32.post2: post1 and post2 both pin torch 2.8.0)
    assert pins(solved(matrix, ["torch==2.8.0", "xformers"], R580))["xformers"] == str(for_280.version)


def test_torch_xformers_is_the_xformers_built_for_the_chosen_torch(matrix):
    sol = solved(matrix, ["torch", "xformers"], R580)
    got = pins(sol)
    row = next(r for r in rows(matrix, "xformers") if str(r.version) == got["xformers"])
    assert SpecifierSet(row.requires["torch"]).contains(got["torch"].split("+")[0])


@pytest.mark.parametrize("driver, major", [(R570, 12), (R580, 13)])
def test_onnxruntime_and_cupy_follow_the_framework_cuda_major(matrix, driver, major):
    sol = solved(matrix, ["torch", "onnxruntime-gpu", "cupy"], driver)
    got = pins(sol)
    assert int(sol.cuda.split(".")[0]) == major
    assert f"cupy-cuda{major}x" in got  # cupy stands for the build of torch's CUDA major
    ort = next(r for r in rows(matrix, "onnxruntime-gpu") if str(r.version) == got["onnxruntime-gpu"])
    assert ort.cuda_major == major
    assert ort.version == max(r.version for r in rows(matrix, "onnxruntime-gpu") if r.cuda_major == major)


def test_onnxruntime_alone_takes_the_cuda_major_the_driver_runs(matrix):
    got = pins(solved(matrix, ["onnxruntime-gpu"], R570))
    assert set(got) == {"onnxruntime-gpu"}
    assert next(r for r in rows(matrix, "onnxruntime-gpu") if str(r.version) == got["onnxruntime-gpu"]).cuda_major == 12


def test_cupy_of_another_cuda_major_than_the_torch_pinned_exits_3(matrix):
    torch13 = next(r for r in matrix.frameworks("torch") if default_build(matrix, str(r.version)).cuda.major == 13)
    torch13_only = f"torch=={torch13.version}+{default_build(matrix, str(torch13.version)).name}"
    with pytest.raises(NoSolution) as err:
        solved(matrix, [torch13_only, "cupy-cuda12x"], R580)
    assert "built for CUDA 12" in err.value.causes[0].message


def test_an_extension_release_the_matrix_lacks_exits_3(matrix):
    with pytest.raises(NoSolution) as err:
        solved(matrix, ["vllm==0.0.1"], R580)
    assert err.value.causes[0].rule == "extension_unknown"


@pytest.mark.slow
def test_a_data_folder_without_extensions_json_loads_and_says_it_has_no_release(tmp_path, matrix):
    # a folder written before extensions.json existed still loads (the file is optional); its extension finds no row
    for f in default_data_dir().glob("*.json"):
        if f.name != "extensions.json":
            (tmp_path / f.name).write_bytes(f.read_bytes())
    bare = load_matrix_from(tmp_path)
    assert bare.extensions.releases == []
    with pytest.raises(NoSolution) as err:
        solved(bare, ["torch", "xformers"], R580)
    assert err.value.causes[0].rule == "extension_unknown"


# --- the command line: solve, lock, check -r -------------------------------------------------------------------

def cli(*args: str) -> subprocess.CompletedProcess:
    return run_cli(list(args), env=dict(os.environ), timeout=180, text=True)


@pytest.mark.slow
def test_solve_cli_exit_3_with_cause_and_ways_out():
    out = cli("solve", "torch==2.8.0", "xformers==0.0.29.post3", "--driver", R580, *H100, "--json")
    assert out.returncode == 3, out.stdout + out.stderr
    doc = json.loads(out.stdout)
    assert [c["rule"] for c in doc["data"]["causes"]] == ["extension_build"]
    assert "requires torch==2.6.0" in doc["data"]["causes"][0]["message"]
    assert {"extension": "xformers", "requirement": "xformers==0.0.32.post2"} in \
        [w["change"] for w in doc["data"]["ways_out"]]


@pytest.mark.slow
def test_lock_carries_the_extension_pinned(tmp_path: Path, matrix):
    lock = tmp_path / "requirements.txt"
    out = cli("lock", "torch", "xformers", "--driver", R580, *H100, "--pins-only", "-o", str(lock))
    assert out.returncode == 0, out.stderr
    lines = [x for x in lock.read_text().splitlines() if x and not x.startswith(("#", "--"))]
    xf = [x for x in lines if x.startswith("xformers==")]
    assert len(xf) == 1 and "xformers" not in [x.strip() for x in lines]  # pinned, never bare
    torch = next(x for x in lines if x.startswith("torch=="))
    row = next(r for r in rows(matrix, "xformers") if f"xformers=={r.version}" == xf[0])
    assert SpecifierSet(row.requires["torch"]).contains(torch.split("==")[1].split("+")[0])


@pytest.mark.slow
def test_check_r_gates_an_extension_paired_with_the_wrong_torch(tmp_path: Path):
    bad = tmp_path / "bad.txt"
    bad.write_text("torch==2.8.0\nxformers==0.0.29.post3\n")
    out = cli("check", "-r", str(bad), "--driver", R580, *H100)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "xformers 0.0.29.post3 requires torch==2.6.0" in out.stdout and "Traceback" not in out.stderr
    good = tmp_path / "good.txt"
    good.write_text("torch==2.8.0\nxformers==0.0.32.post1\n")
    out = cli("check", "-r", str(good), "--driver", R580, *H100)
    assert out.returncode == 0, out.stdout + out.stderr


def test_an_extension_by_url_names_its_own_wheel_and_is_passed_through():
    request = parse_request(["torch", "xformers @ file:///nonexistent/x.whl", "xformers>=0.0.30"])
    assert [r.url for r in request.passthrough] == ["file:///nonexistent/x.whl"]
    assert [str(r) for r in request.extensions] == ["xformers>=0.0.30"]
    assert set(parse_request(["sglang"]).families) == {"torch"}  # it requires torch: torch is solved with it
    assert parse_request(["onnxruntime-gpu"]).families == {}  # it does not: nothing else is added
