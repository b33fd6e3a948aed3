"""Scenario files: an environment or target + a request -> the expected solution, causes or findings.

Each ``tests/scenarios/*.json`` is one case, most taken from a public bug report (its ``source``). A new
bug report becomes a regression test by adding a file, without new Python. Keys:

- ``target``: flags (driver, gpus, python, platform) — or ``targets``: a list of named flag sets (a fleet);
- ``environment``: an Environment as ``detect --json`` saves it (doctor scenarios, and the installed set);
- ``request``: requirement strings for solve (absent: doctor);
- ``expect``: what must hold (see ``check_solution`` / ``check_findings``): for a solution, each framework's
  exact ``version`` (``"==2.5.1"``) and ``variant``, with ``why`` saying which documented rule and which rows of
  the snapshot give that answer; for no solution, the cause rules and the kinds of ways out;
- ``requirements_txt``: a requirements file's text for ``check`` (with ``target``);
- ``snapshot``: the named frozen copy of data/ the case runs against (``tests/support/snapshot.py``), where it needs
  facts the default snapshot predates (per-platform wheels, Jetson drivers, cuDNN's GPU floors);
- ``pending_facts``: the matrix facts the case needs that the data does not hold yet (the case is skipped
  while the solver rejects its candidates as resting on unknown facts).

Every case runs against the frozen matrix snapshot kept with the tests (``tests/data/matrix_snapshot/``, see
``tests/support/snapshot.py``), so that a refresh of ``data/`` does not move the expectations.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from support.snapshot import named_snapshot, snapshot_matrix

from cudamatrix.diagnose.findings import diagnose, summary_exit
from cudamatrix.errors import NoSolution
from cudamatrix.models import Cause, Environment, WayOut
from cudamatrix.schema import validate
from cudamatrix.solve.checks import check_requirements
from cudamatrix.solve.solver import parse_request, solve
from cudamatrix.solve.target import Target, from_environment, from_flags

SCENARIOS = sorted((Path(__file__).parent.parent / "scenarios").glob("*.json"))


def _target(matrix, flags: dict, name: str, base: Target | None = None) -> Target:
    t = from_flags(matrix, driver=flags.get("driver"), gpus=flags.get("gpus", []), python=flags.get("python"),
                   platform=flags.get("platform"), cuda_toolkit=flags.get("cuda_toolkit"),
                   base=base or Target(name=name))
    return Target(**{**t.__dict__, "name": name})


def test_there_are_enough_scenarios():
    assert len(SCENARIOS) >= 40


def test_solutions_are_pinned_exactly():
    """A solving scenario names the exact version and variant of each framework it expects, and why.

    Scenarios still written in the older, looser form (a CUDA range) run as before and are named in a
    warning, so that files added in that form keep working until they are pinned."""
    loose, exact = [], 0
    for path in SCENARIOS:
        case = json.loads(path.read_text())
        expect = case["expect"]
        if "request" not in case or expect.get("exit", 0) != 0:
            continue
        fws = expect.get("frameworks", {})
        if not fws or not expect.get("why") or any(
                not str(w.get("version", "")).startswith("==") or "variant" not in w for w in fws.values()):
            loose.append(path.stem)
        else:
            exact += 1
    if loose:
        warnings.warn(f"scenarios without an exact version, variant and why: {loose}", stacklevel=1)
    assert exact >= 22  # the solving scenarios pinned against this snapshot


@pytest.mark.slow
@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario(path: Path):
    case = json.loads(path.read_text())
    assert case.get("source"), f"{path.name}: every scenario names its source"
    matrix = named_snapshot(case["snapshot"]) if "snapshot" in case else snapshot_matrix()
    env = validate(Environment, case["environment"], path.name) if "environment" in case else None
    expect = case["expect"]
    if "requirements_txt" in case:
        targets = [_target(matrix, case["target"], "target")]
        check_file(check_requirements(matrix, targets, None, case["requirements_txt"], path.name), expect, matrix,
                   targets, case["requirements_txt"])
        return
    if "request" not in case:
        check_findings(diagnose(env, matrix), expect)
        return
    if "targets" in case:
        targets = [_target(matrix, flags, name) for name, flags in case["targets"].items()]
    elif env is not None:
        base = from_environment(env, matrix)
        targets = [_target(matrix, case["target"], "this machine", base)] if "target" in case else [base]
    else:
        targets = [_target(matrix, case["target"], "target")]
    request = parse_request(case["request"], env)
    try:
        solution = solve(targets, request, matrix, installed=env)
    except NoSolution as exc:
        if case.get("pending_facts") and any(c.rule == "unknown" for c in exc.causes):
            pytest.skip(f"rests on facts the matrix does not hold yet: {case['pending_facts']}")
        assert expect.get("exit") == 3, f"unexpected no solution: {exc.message}"
        check_no_solution(exc.causes, exc.ways_out, expect)
        return
    assert expect.get("exit", 0) == 0, f"expected no solution, got {solution.pip_args}"
    check_solution(solution, expect)


def check_solution(solution, expect: dict) -> None:
    chosen = {fw.name: fw for fw in solution.frameworks}
    for name, want in expect.get("frameworks", {}).items():
        fw = chosen[name]
        if "cuda" in want:
            assert fw.cuda is not None and SpecifierSet(want["cuda"]).contains(fw.cuda), \
                f"{name} {fw.version} {fw.variant}: CUDA {fw.cuda} not {want['cuda']}"
        if "version" in want:
            assert SpecifierSet(want["version"]).contains(fw.version), f"{name} {fw.version} not {want['version']}"
        if want.get("gpu_build", True) is True:
            assert fw.cuda is not None, f"{name} {fw.version}: a CPU build was chosen for a GPU target"
        if want.get("gpu_build") is False:
            assert fw.cuda is None, f"{name}: a GPU build was chosen"
        if "variant" in want:
            assert fw.variant == want["variant"]
        if name in expect.get("cudnn_label", {}):
            assert fw.cudnn == expect["cudnn_label"][name] and not any("cudnn" in u for u in fw.unpinned), fw
        if name in expect.get("variant_not", {}):
            assert fw.variant != expect["variant_not"][name], f"{name} {fw.version} {fw.variant}"
    if expect.get("same_cuda_major"):
        majors = {fw.cuda.split(".")[0] for fw in solution.frameworks if fw.cuda}
        assert len(majors) == 1, f"frameworks mix CUDA majors: {majors}"
    pinned = [p.requirement() for p in solution.packages]
    for text in expect.get("requirements_include", []):
        assert text in pinned, f"{text} not in {pinned}"
    for text in expect.get("requirements_include_prefix", []):
        assert any(p.startswith(text) for p in pinned), f"no {text}... in {pinned}"
    names = {p.name for p in solution.packages}
    if "no_package_prefix" in expect:
        assert not [n for n in names if n.startswith(expect["no_package_prefix"])], sorted(names)
        assert not [p for p in solution.packages if p.extras and p.name == "tensorflow"], solution.packages
    for name in expect.get("packages_include", []):
        assert name in names, f"{name} missing from {sorted(names)}"
    if "to_install_prefix" in expect:
        assert solution.to_install, "expected something to install"
        assert all(p.name.startswith(expect["to_install_prefix"]) for p in solution.to_install), \
            [p.name for p in solution.to_install]
    if "unchanged" in expect:
        assert solution.unchanged is expect["unchanged"], solution.to_install
    facts = [u["fact"] for u in solution.unverified]
    for text in expect.get("unverified_include", []):
        assert text in facts, facts
    for text in expect.get("notes_include", []):
        assert any(text in n for n in solution.notes), solution.notes
    for text in expect.get("notes_exclude", []):
        assert not any(text in n for n in solution.notes), solution.notes
    if "index_contains" in expect:
        urls = [solution.index_url or ""] + solution.extra_index_urls
        assert any(expect["index_contains"] in u for u in urls), urls


def check_no_solution(causes: list[Cause], ways_out: list[WayOut], expect: dict) -> None:
    rules_seen = {c.rule for c in causes}
    if "cause_rules_any" in expect:
        assert rules_seen & set(expect["cause_rules_any"]), rules_seen
    kinds = {w.kind for w in ways_out}
    if "way_kinds_any" in expect:
        assert kinds & set(expect["way_kinds_any"]), kinds
    machines = {m for c in causes for m in c.machines}
    for m in expect.get("machines_include", []):
        assert m in machines, machines
    for m in expect.get("machines_exclude", []):
        assert m not in machines, machines
    for c in causes:
        assert c.message, "every cause is a sentence"
        for text in expect.get("cause_text_excludes", []):
            assert text not in c.message, c.message
    texts = " ".join(c.message for c in causes)
    for text in expect.get("cause_text_includes", []):
        assert text in texts, texts
    ways = " ".join(w.message for w in ways_out)
    for text in expect.get("ways_text_includes", []):
        assert text in ways, ways
    for text in expect.get("ways_text_excludes", []):
        assert text not in ways, ways


def check_file(result: dict, expect: dict, matrix=None, targets=None, text: str = "") -> None:
    """``check -r``: whether the file fits, which builds pip would install, and the container constraint; with
    ``advice_converges``, every change check suggests, applied to the file, makes check pass."""
    if expect.get("advice_converges"):
        from support.fakes import apply_advice

        assert result["advice"], result["ways_out"]
        for advice in result["advice"]:
            assert advice["add"][0].startswith("--extra-index-url "), advice
            again = check_requirements(matrix, targets, None, apply_advice(text, advice), "applied")
            assert again["fits"] is True, (advice, again["problems"])
    assert result["fits"] is expect["fits"], result["problems"]
    if "checked" in expect:
        assert result["checked"] == expect["checked"]
    if "nvidia_require_cuda" in expect:
        assert result.get("nvidia_require_cuda") == expect["nvidia_require_cuda"]
    if "base_image" in expect:
        assert result.get("base_image") == expect["base_image"]
    for text in expect.get("problems_include", []):
        assert any(text in p for p in result["problems"]), result["problems"]
    for text in expect.get("ways_exclude", []):
        assert not any(text in w for w in result["ways_out"]), result["ways_out"]
    for text in expect.get("ways_include", []):
        assert any(text in w for w in result["ways_out"]), result["ways_out"]
    for text in expect.get("skipped_include", []):
        assert any(text in p for p in result["skipped"]), result["skipped"]


def check_findings(findings, expect: dict) -> None:
    codes = [f.code for f in findings]
    for code in expect.get("findings", []):
        assert code in codes, f"{code} not in {codes}"
    for code in expect.get("no_findings", []):
        assert code not in codes, f"{code} unexpectedly in {codes}"
    if "exit" in expect:
        assert summary_exit(findings) == expect["exit"], [(f.code, f.severity, f.title) for f in findings]
    for f in findings:
        assert f.title and (f.fix or f.severity == "info"), f
