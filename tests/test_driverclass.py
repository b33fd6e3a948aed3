"""solve.driverclass: a fleet's targets checked once per driver class, with the verdicts of a check per target."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from cudamatrix.matrix.data import load_matrix
from cudamatrix.matrix.query import driver_version
from cudamatrix.models import Environment
from cudamatrix.schema import validate
from cudamatrix.solve import rules
from cudamatrix.solve.driverclass import MIN_TARGETS, SharedChecks, driver_class, stated_drivers
from cudamatrix.solve.target import from_environment

SCENARIOS = Path(__file__).parent / "scenarios"


@pytest.fixture(scope="module")
def matrix():
    return load_matrix(None)


def _fleet(matrix, steps: int) -> list:
    """The scenario machines with a GPU and a driver, each under ``steps`` patch levels from its own driver up,
    and each also under a driver of every stated version (those must never share a verdict)."""
    bases = []
    for path in sorted(SCENARIOS.glob("doctor_*.json")):
        env = json.loads(path.read_text())["environment"]
        if env.get("gpus") and (env.get("driver") or {}).get("version"):
            bases.append(validate(Environment, env, str(path), ValueError))
    stated = [".".join(str(n) for n in v) for v in stated_drivers(matrix) if v[0] >= 300][::3]
    targets = []
    for base in bases:
        head, _, last = base.driver.version.rpartition(".")
        drivers = [f"{head}.{int(last) + k:0{len(last)}d}" for k in range(steps)] + stated
        for i, drv in enumerate(drivers):
            env = dataclasses.replace(base, driver=dataclasses.replace(base.driver, version=drv))
            targets.append(from_environment(env, matrix, name=f"{base.hostname}-{i}"))
    return targets


def test_stated_drivers_hold_every_floor_of_the_data(matrix):
    floors = set(stated_drivers(matrix))
    for rel in matrix.cuda.releases:
        for drv in (rel.linux_min_driver, rel.windows_min_driver):
            if drv:
                assert driver_version(drv) in floors
    arch_floors = [drv for arch in matrix.gpus.architectures for drv in arch.min_driver.values()]
    assert arch_floors
    for drv in arch_floors:
        assert driver_version(drv) in floors


def test_driver_class(matrix):
    floors = stated_drivers(matrix)
    top = floors[-1]
    above = ".".join(str(n) for n in top[:1]) + ".999.99"
    assert driver_class(above, floors) == driver_class(".".join(str(n) for n in top[:1]) + ".999.98", floors)
    assert driver_class("580.65.06", floors) == ("stated", "580.65.06")  # a stated version is its own class
    assert driver_class("580.65.07", floors) != driver_class("580.65.05", floors)  # either side of 580.65.06
    assert driver_class("garbage", floors) == ("text", "garbage")
    assert driver_class(None, floors) == ("none", None)


def test_shared_verdicts_equal_a_check_per_target(matrix):
    """Every candidate of every family against some 500 targets: the shared check gives each target exactly the
    reasons (rule, words, row, floor) rules.check gives it alone."""
    targets = _fleet(matrix, 12)
    assert len(targets) >= MIN_TARGETS
    shared = SharedChecks(matrix, targets)
    assert shared.keys is not None
    compared = reused = 0
    for family in ("torch", "tensorflow", "jax"):
        for release in matrix.frameworks(family):
            for variant in release.variants:
                for target in targets:
                    assert shared.check(release, variant, target) == rules.check(matrix, release, variant, target)
                    compared += 1
    reused = compared - len(shared.memo)
    assert reused > compared // 3  # the sharing happened: many targets took their class's verdict


def test_a_few_targets_are_each_checked(matrix):
    targets = _fleet(matrix, 1)[:MIN_TARGETS - 1]
    assert SharedChecks(matrix, targets).keys is None


def test_words_change_whole_numbers_only(matrix):
    from cudamatrix.solve.driverclass import _quoting

    quoted = _quoting("535.104.05")
    text = "driver 535.104.05 runs CUDA 12.2 at most; 535.104.051 and 1535.104.05 and 535.104.05.1 are others"
    assert quoted.sub("535.104.12", text) == ("driver 535.104.12 runs CUDA 12.2 at most; 535.104.051 and "
                                              "1535.104.05 and 535.104.05.1 are others")
