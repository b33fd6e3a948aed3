"""Jetson boards get no default-index or PyTorch-index build: the candidate is rejected by the ``jetson`` rule,
and the ways out name NVIDIA's JetPack wheels.

Sources (the advisory CM-2026-002 in data/advisories.json cites both):
- PyTorch's own CUDA builds leave Tegra out: its aarch64 CUDA wheels are built with TORCH_CUDA_ARCH_LIST
  "8.0;9.0;10.0;11.0;12.0;12.1" (pytorch/pytorch .ci/aarch64_linux/aarch64_ci_build.sh, CUDA 12.9), and the
  aarch64 wheel of torch 2.15.0 is compiled for sm_80 sm_90 sm_100 sm_110 sm_120 (its arch flags string,
  recorded in torch.json): no sm_87/sm_72/sm_62/sm_53.
- NVIDIA's "PyTorch for Jetson" forum page publishes the wheels built per JetPack release for Nano, TX2, Xavier
  and Orin.
Run on the shipped data (the snapshot predates the advisory).
"""
from __future__ import annotations

import dataclasses

import pytest

from cudamatrix.errors import NoSolution
from cudamatrix.matrix.data import load_matrix
from cudamatrix.solve import rules
from cudamatrix.solve.solver import parse_request, solve
from cudamatrix.solve.target import Target, from_flags


@pytest.fixture(scope="module")
def matrix():
    return load_matrix()


def target(m, gpu: str, driver: str = "540.4.0", platform: str = "linux_aarch64") -> Target:
    t = from_flags(m, driver=driver, gpus=[gpu], python="3.12", platform=platform, cuda_toolkit=None,
                   base=Target(name="t"))
    return dataclasses.replace(t, name="t")


JETSONS = [  # (name as the matrix knows it, compute capability the advisory lists)
    ("Jetson AGX Orin", "8.7"),
    ("Jetson Orin Nano", "8.7"),
    ("Jetson AGX Xavier", "7.2"),
    ("Jetson TX2", "6.2"),
    ("Jetson Nano", "5.3"),
]


@pytest.mark.parametrize("gpu,cc", JETSONS)
def test_every_torch_cuda_build_is_rejected_on_a_jetson(matrix, gpu, cc):
    t = target(matrix, gpu)
    assert t.gpus[0].compute_capability == cc
    checked = 0
    for rel in matrix.frameworks("torch"):
        for var in rel.variants:
            if var.cuda is None:
                continue
            reasons = rules.check(matrix, rel, var, t)
            jetson = [r for r in reasons if r.rule == "jetson"]
            assert jetson, f"torch {rel.version} {var.name} was not rejected on {gpu}"
            assert "JetPack" in jetson[0].message and cc in jetson[0].message
            assert "CM-2026-002" in jetson[0].message
            checked += 1
    assert checked > 20


@pytest.mark.slow
@pytest.mark.parametrize("gpu,cc", JETSONS)
def test_solve_on_a_jetson_has_no_answer_and_names_jetpack(matrix, gpu, cc):
    with pytest.raises(NoSolution) as exc:
        solve([target(matrix, gpu)], parse_request(["torch"]), matrix)
    assert exc.value.causes[0].rule == "jetson"  # said first: no other change makes a build fit
    kinds = [w.kind for w in exc.value.ways_out]
    assert "jetpack" in kinds
    jet = next(w for w in exc.value.ways_out if w.kind == "jetpack")
    assert "JetPack" in jet.message
    # no way out sends the board to a driver upgrade or an older PyTorch-index build
    assert "upgrade_driver" not in kinds and "pin_older" not in kinds


def test_before_the_rule_an_orin_was_answered_with_a_pytorch_index_build(matrix):
    # the case the rule exists for: sm_80 SASS "covers" 8.7 by the same-major rule, which is wrong on Tegra
    t = target(matrix, "Jetson AGX Orin")
    rel = next(r for r in matrix.frameworks("torch") if any(v.cuda and rules.sass_covers(v.archs, "8.7")
                                                            and "linux_aarch64" in (v.platforms or r.platforms)
                                                            for v in r.variants))
    var = next(v for v in rel.variants if v.cuda and rules.sass_covers(v.archs, "8.7"))
    assert [r.rule for r in rules.check(matrix, rel, var, t) if r.rule in ("arch", "jetson")] == ["jetson"]


@pytest.mark.parametrize("gpu", ["NVIDIA GH200", "NVIDIA A100-SXM4-80GB"])
def test_server_gpus_are_not_jetsons(matrix, gpu):
    # aarch64 server boards (SBSA) and x86 GPUs keep their answers
    t = target(matrix, gpu, driver="580.65.06",
               platform="linux_aarch64" if "GH200" in gpu else "linux_x86_64")
    sol = solve([t], parse_request(["torch"]), matrix)
    assert sol.frameworks[0].name == "torch" and sol.cuda is not None
    assert not any("jetson" in r.rules for r in sol.rejected)


def test_jax_and_tensorflow_are_not_touched_by_the_torch_advisory(matrix):
    # CM-2026-002 affects torch only; the rule reads the advisory per family
    t = target(matrix, "Jetson AGX Orin")
    for family in ("tensorflow", "jax"):
        for rel in matrix.frameworks(family):
            for var in rel.variants:
                assert not [r for r in rules.check(matrix, rel, var, t) if r.rule == "jetson"]


def test_no_torch_build_in_the_matrix_carries_a_tegra_architecture(matrix):
    # the fact the rule rests on, as the matrix holds it: no recorded torch build ships SASS for a Jetson's
    # compute capability, so the same-major rule would be the only thing letting sm_80 "cover" an Orin
    tegra = {"5.3", "6.2", "7.2", "8.7"}
    for rel in matrix.frameworks("torch"):
        for var in rel.variants:
            assert not tegra & {a.rstrip("af") for a in var.archs}, (rel.version, var.name, var.archs)
