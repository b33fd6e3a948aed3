"""An implicit request (``solve`` or ``fix`` with no requirement) carries the installed packages built against one
exact torch (vllm, xformers, sglang): torch moved without them leaves them pinning a torch that is gone. They are
solved with torch, their installed release tried first, so a set that works stays as it is.

Facts, from the shipped data's rows: xformers 0.0.27.post1's METADATA declares ``torch==2.4.0``, 0.0.32.post1's
``torch==2.8.0``, 0.0.35's ``torch>=2.10`` (scripts/refresh_extensions.py read them from the wheels); torch 2.4.0's
builds carry no sm_120 kernels (its TORCH_CUDA_ARCH_LIST stops at 9.0), so an RTX 5090 (12.0) needs another torch;
an A100 (8.0) with driver 580 runs torch 2.8.0 cu128."""
from __future__ import annotations

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from cudamatrix.matrix.data import default_data_dir, load_matrix_from
from cudamatrix.models import Driver, Environment, Framework, GpuInfo, PythonInfo
from cudamatrix.solve.solver import parse_request, solve
from cudamatrix.solve.target import from_environment


@pytest.fixture(scope="module")
def matrix():
    return load_matrix_from(default_data_dir(), trusted=True)


def machine(gpu: tuple[str, str], driver: str, driver_cuda: str, torch: str, cuda: str, **packages: str) -> Environment:
    env = Environment(origin="file", driver=Driver(version=driver, cuda_version=driver_cuda, status="ok"),
                      gpus=[GpuInfo(index=0, name=gpu[0], compute_capability=gpu[1])],
                      python=PythonInfo(version="3.11.9", platform="linux_x86_64"),
                      packages={"torch": torch, **{k.replace("_", "-"): v for k, v in packages.items()}})
    env.frameworks = [Framework(name="torch", version=torch, variant="cu" + cuda.replace(".", ""), cuda=cuda)]
    return env


def answer(matrix, env, texts=()):
    solution = solve([from_environment(env, matrix)], parse_request(list(texts), env), matrix, installed=env)
    return {p.name: p.version for p in solution.packages}, solution


def test_torch_that_must_move_takes_the_installed_extension_with_it(matrix):
    env = machine(("NVIDIA GeForce RTX 5090", "12.0"), "575.57.08", "12.9", "2.4.0+cu121", "12.1",
                  xformers="0.0.27.post1")
    pins, solution = answer(matrix, env)
    torch = Version(pins["torch"].split("+")[0])
    xformers = next(r for r in matrix.extensions.releases if r.name == "xformers" and str(r.version) == pins["xformers"])
    assert SpecifierSet(xformers.requires["torch"]).contains(torch)  # the pair pip installs agrees
    assert torch >= Version("2.7")  # a torch with sm_120 kernels
    assert pins["xformers"] != "0.0.27.post1"
    assert any(n.startswith("xformers 0.0.27.post1 is installed and built for one torch: solved with it; "
                            f"{pins['xformers']} in its place") for n in solution.notes)
    assert solution.request == ["torch", "xformers"]


def test_a_set_that_works_stays_as_it_is(matrix):
    env = machine(("NVIDIA A100-SXM4-40GB", "8.0"), "580.126.09", "13.0", "2.8.0", "12.8", xformers="0.0.32.post1")
    pins, solution = answer(matrix, env)
    assert (pins["torch"], pins["xformers"]) == ("2.8.0", "0.0.32.post1")  # not the newest xformers, 0.0.35
    assert any(w.startswith("xformers 0.0.32.post1: the installed release, tried first") for w in solution.notes)


def test_an_installed_release_the_matrix_does_not_know_is_left_and_said(matrix):
    env = machine(("NVIDIA A100-SXM4-40GB", "8.0"), "580.126.09", "13.0", "2.8.0", "12.8", vllm="0.99.0")
    pins, solution = answer(matrix, env)
    assert "vllm" not in pins and solution.request == ["torch"]
    assert "vllm 0.99.0 is installed and matrix " in " ".join(solution.notes)


def test_a_typed_request_is_what_the_user_wrote(matrix):
    env = machine(("NVIDIA GeForce RTX 5090", "12.0"), "575.57.08", "12.9", "2.4.0+cu121", "12.1",
                  xformers="0.0.27.post1")
    pins, solution = answer(matrix, env, ["torch"])
    assert "xformers" not in pins and solution.request == ["torch"]


def test_the_extension_moves_rather_than_torch(matrix):
    """torch 2.14.1 beside xformers 0.0.29.post3 (torch==2.6.0) on driver 580: torch 2.6.0 would run here too, but
    the extension moves (one distribution) and torch stays, as fix's plan for the extension findings says
    (install/extfix.py); the installed xformers is tried first only among the releases the kept torch carries."""
    env = machine(("NVIDIA A100-SXM4-40GB", "8.0"), "580.126.09", "13.0", "2.14.1", "13.0", xformers="0.0.29.post3")
    pins, solution = answer(matrix, env)
    assert pins["torch"].split("+")[0] == "2.14.1"
    assert pins["xformers"] == "0.0.35"  # the newest whose torch>=2.10 admits 2.14.1
    assert any(n.startswith("xformers 0.0.29.post3 is installed and built for one torch: solved with it; 0.0.35 "
                            "in its place") for n in solution.notes)
