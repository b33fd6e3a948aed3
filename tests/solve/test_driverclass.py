"""solve.driverclass: a fleet's targets checked once per driver class, with the verdicts of a check per target."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from cudamatrix.matrix.load import load_matrix
from cudamatrix.matrix.query import driver_version
from cudamatrix.models import Environment
from cudamatrix.schema import validate
from cudamatrix.solve import rules
from cudamatrix.solve.driverclass import MIN_TARGETS, SharedChecks, driver_class, stated_drivers
from cudamatrix.solve.target import from_environment

SCENARIOS = Path(__file__).parent.parent / "scenarios"


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


@pytest.mark.slow
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
    reused = compared - len(shared.memo.verdicts)
    assert reused > compared // 3  # the sharing happened: many targets took their class's verdict


def test_a_few_targets_are_each_checked(matrix):
    targets = _fleet(matrix, 1)[:MIN_TARGETS - 1]
    assert SharedChecks(matrix, targets).keys is None


def _mixed(matrix, fitting: bool) -> list:
    """Each scenario machine under three patch levels of its driver (words that quote three drivers) and two stated
    drivers; some also under two drivers of a two-digit branch (96.43.10, 96.43.11: one class, not desktop
    drivers, so each is checked itself), a driver given as its branch only and an unreadable one. ``fitting``:
    only the machines one torch build fits together (T4 and newer, driver 525 and newer; no RTX 5090 under 570)."""
    stated = [".".join(str(n) for n in v) for v in stated_drivers(matrix) if v[0] >= 300]
    newer = [d for d in stated if len(d) > 3 and int(d.split(".")[0]) >= 575]  # stated drivers the builds run on
    out = []
    machines = [t for t in _fleet(matrix, 1)[::len(stated[::3]) + 1] if t.platform == "linux_x86_64"]
    for b, base in enumerate(dataclasses.replace(t, python="3.11") for t in machines):  # one image for all
        cc = min((float(g.compute_capability) for g in base.gpus), default=0.0)
        branch = int(base.driver.split(".")[0])
        if fitting and (cc < 7.5 or branch < 525 or (cc >= 12 and branch < 570)):
            continue
        head, _, last = base.driver.rpartition(".")
        drivers = [f"{head}.{int(last) + k:0{len(last)}d}" for k in range(3)] + (newer if fitting else stated)[b % 5::9][:2]
        if b % 3 == 0 and not fitting:
            drivers += ["96.43.10", "96.43.11", str(branch), "r535 beta"]
        out += [dataclasses.replace(base, name=f"m{b}-{i}", driver=d) for i, d in enumerate(drivers)]
        # the same compute capability under another GPU name, on the next patch level: messages quote the name
        other = tuple(dataclasses.replace(g, name=f"{g.name} (second kind)") for g in base.gpus)
        out.append(dataclasses.replace(base, name=f"m{b}-other", gpus=other, driver=drivers[1] + "1"))
    return out


def _answer(matrix, targets, request):
    from cudamatrix.errors import NoSolution
    from cudamatrix.schema import to_dict
    from cudamatrix.solve.solver import parse_request, solve

    try:
        return to_dict(solve(targets, parse_request(request, None), matrix))
    except NoSolution as exc:
        return {"message": exc.message, "hint": exc.hint, **exc.detail}


@pytest.mark.parametrize("fitting", [False, True])
def test_grouped_solve_equals_a_check_per_target(matrix, monkeypatch, fitting):
    """The whole answer (causes, their machines, ways out, rejections with each node's own driver in the words,
    or the solution and its trace) with the targets grouped by class equals the answer with each target checked
    itself (MIN_TARGETS past the fleet: every target is its own class), on a fleet mixing drivers quoted in
    messages, stated drivers, a driver given as its branch only and an unreadable one."""
    from cudamatrix.solve import driverclass

    targets = _mixed(matrix, fitting)
    assert len(targets) >= MIN_TARGETS
    assert len({driverclass.class_key(t, stated_drivers(matrix)) for t in targets}) < len(targets) * 3 // 4
    grouped = _answer(matrix, targets, ["torch"])
    monkeypatch.setattr(driverclass, "MIN_TARGETS", 10 ** 9)
    alone = _answer(matrix, targets, ["torch"])
    assert grouped == alone
    if fitting:
        assert grouped["frameworks"], grouped
    else:
        words = " ".join(m for r in grouped["rejected"] for m in r["reasons"])
        assert "r535 beta" in words and sum(t.driver in words for t in targets if t.driver[0].isdigit()) > 20
        assert grouped["causes"] and grouped["ways_out"]


def test_a_grouped_screen_shares_a_verdict_only_within_a_class(matrix):
    """Sharing across a line the rules draw would show: two T4 machines either side of a stated driver, and a
    T4 beside a P100 under one driver, are never one class; a class's members differ only in their driver."""
    from cudamatrix.solve.driverclass import class_key

    floors = stated_drivers(matrix)
    targets = _mixed(matrix, False)
    by_class: dict = {}
    for t in targets:
        by_class.setdefault(class_key(t, floors), []).append(t)
    for members in by_class.values():
        assert len({(t.key()[1:], tuple(g.name for g in t.gpus)) for t in members}) == 1
        stated = [t for t in members if driver_class(t.driver, floors)[0] == "stated"]
        assert not stated or len({t.driver for t in members}) == 1


def test_the_collector_is_paused_within_and_as_it_was_after(matrix):
    """PausedGc pauses the cyclic collector and leaves it as it found it (on, or off), also when the body raises;
    a fleet's solve that ends in NoSolution leaves it on."""
    import gc

    from cudamatrix.errors import NoSolution
    from cudamatrix.proc import PausedGc
    from cudamatrix.solve.solver import parse_request, solve

    assert gc.isenabled()
    with pytest.raises(KeyError):
        with PausedGc():
            assert not gc.isenabled()
            raise KeyError("body")
    assert gc.isenabled()
    gc.disable()
    try:
        with PausedGc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
    with pytest.raises(NoSolution):
        solve(_mixed(matrix, False), parse_request(["torch"], None), matrix)
    assert gc.isenabled()


def test_a_member_gets_its_own_driver_where_the_rule_quoted_the_driver_only(matrix):
    """Issue #41: a member's verdict is its class's with the member's driver put where the rule quoted the driver
    (a fact of the reason), not the class's sentence searched for the first driver's text: a GPU named after that
    driver (names come from --gpu, env files and pastes) kept its name. Before, the name was rewritten too."""
    floors = stated_drivers(matrix)
    drivers = [f"561.1.{k}" for k in range(1, MIN_TARGETS + 2)]
    assert len({driver_class(d, floors) for d in drivers}) == 1  # one class: between the same stated versions
    gpu = rules.TargetGpu("12.0", f"Lab card {drivers[0]}")
    targets = [rules.Target(name=f"n{i}", driver=d, gpus=(gpu,), python="3.12") for i, d in enumerate(drivers)]
    shared = SharedChecks(matrix, targets)
    assert shared.keys is not None
    compared = 0
    for release in matrix.frameworks("torch"):
        for variant in release.variants:
            for target in targets:
                alone = rules.check(matrix, release, variant, target)
                assert shared.check(release, variant, target) == alone
                compared += any(f"Lab card {drivers[0]}" in r.message and r.rule == "gpu_driver" for r in alone)
    assert compared  # the GPU's rule quoted both the driver and the name
