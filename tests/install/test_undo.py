"""Rollback, end to end with real pip and uv on a copied venv and a local wheel folder (``--find-links``):
the index options of the plan are reused to put the starting set back, what cannot be put back is named,
and a uv plan is restored with uv. Plus the pure parts as tables."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from support.interrupt import WHEN_RECORDED
from support.localindex import build_wheel, copy_venv
from support.uvtool import needs_uv, with_uv

from cudamatrix.errors import Exit, InstallFailed
from cudamatrix.install.apply import _index_options, _requirement, _source, apply, diff, installer_error, snapshot
from cudamatrix.models import InstalledDist, Plan, Step
from cudamatrix.proc import Result

# PEP 610 (direct_url.json): a VCS install records vcs_info.commit_id, an editable one dir_info.editable;
# pip reinstalls them with "name @ vcs+url@commit" and "-e path".
SOURCES = [
    (None, None),
    ("not json", None),
    (json.dumps({"url": "https://example.org/a.git", "vcs_info": {"vcs": "git", "commit_id": "abc123"}}),
     "git+https://example.org/a.git@abc123"),
    (json.dumps({"url": "file:///src/a", "dir_info": {"editable": True}}), "-e file:///src/a"),
    (json.dumps({"url": "file:///w/a-1.0-py3-none-any.whl", "archive_info": {}}), "file:///w/a-1.0-py3-none-any.whl"),
    (json.dumps({"dir_info": {}}), None),
]


@pytest.mark.parametrize("direct_url, source", SOURCES)
def test_pep610_source(direct_url, source):
    assert _source(direct_url) == source


REQUIREMENTS = [
    (InstalledDist(name="a", version="1.0"), ["a==1.0"]),
    (InstalledDist(name="a", version="1.0", source="-e file:///src/a"), ["-e", "file:///src/a"]),
    (InstalledDist(name="a", version="1.0", source="git+https://x/a.git@abc"), ["a @ git+https://x/a.git@abc"]),
]


@pytest.mark.parametrize("dist, argv", REQUIREMENTS)
def test_reinstall_requirement(dist, argv):
    assert _requirement(dist) == argv


# pip's index options, both spellings ("--opt value" and "--opt=value"); other options are not index options
INDEX_OPTIONS = [
    (["pip", "install", "--index-url", "https://i/simple", "a==1"], ["--index-url", "https://i/simple"]),
    (["pip", "install", "--extra-index-url=https://e/x", "a==1"], ["--extra-index-url=https://e/x"]),
    (["pip", "install", "--find-links", "/w", "--trusted-host", "h", "--no-deps", "a"],
     ["--find-links", "/w", "--trusted-host", "h"]),
    (["pip", "install", "--no-deps", "a==1"], []),
    (["pip", "install", "a==1", "--index-url"], []),
    (["pip", "install", "a==1", "--find-links", "/w"], ["--find-links", "/w"]),  # the value is the last argument
]


@pytest.mark.parametrize("argv, options", INDEX_OPTIONS)
def test_index_options_of_the_plan(argv, options):
    assert _index_options([Step(kind="install", reason="r", argv=argv)]) == options


def test_diff_names_added_removed_changed():
    before = [InstalledDist(name="a", version="1"), InstalledDist(name="b", version="1"),
              InstalledDist(name="c", version="1")]
    after = [InstalledDist(name="a", version="2"), InstalledDist(name="c", version="1", source="file:///c.whl"),
             InstalledDist(name="d", version="1")]
    d = diff(before, after)
    assert [x.name for x in d["added"]] == ["d"] and [x.name for x in d["removed"]] == ["b"]
    assert [(x.name, x.version) for x in d["changed"]] == [("a", "1"), ("c", "1")]


# --- real pip / uv ------------------------------------------------------------------------------------------

@pytest.fixture()
def world(template_venv, tmp_path, monkeypatch):
    """A copied venv with a==1.0 and b==1.0 installed from a wheel folder; pip told never to use an index."""
    for k in list(os.environ):
        if k.startswith(("PIP_", "UV_")):
            monkeypatch.delenv(k)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    monkeypatch.setenv("UV_NO_CONFIG", "1")
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uvc"))
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for name, version in (("mut-a", "1.0"), ("mut-a", "2.0"), ("mut-b", "1.0")):
        build_wheel(wheels, name, version)
    py = str(copy_venv(template_venv, tmp_path / "venv"))
    r = apply(Plan(python=py, steps=[Step(kind="install", reason="start", argv=[
        py, "-m", "pip", "install", "--no-deps", "--find-links", str(wheels), "mut-a==1.0", "mut-b==1.0"])]))
    assert r.ok
    return py, wheels


def _versions(py: str) -> dict[str, str]:
    return {d.name: d.version for d in snapshot(py) if d.name.startswith("mut-")}


def _pip(py: str, *args: str) -> list[str]:
    return [py, "-m", "pip", *args]


FAIL = "mut-missing==9.9"  # no such wheel in the folder: the step fails after the earlier steps changed things
# pip's words for it, and the root cause cudamatrix/install/explain.py reads from them (kind "not on the index")
MISSING = "ERROR: Could not find a version that satisfies the requirement mut-missing==9.9 (from versions: none)"
NOT_ON_INDEX = ("the index listed no file for it: a wrong index URL (--mirror), an index that did not answer (pip says "
                "so only when it retries: PIP_RETRIES), or no build for this Python and platform (cudamatrix solve)")


@pytest.mark.installs
def test_failed_plan_restores_from_the_plans_own_find_links(world):
    py, wheels = world
    plan = Plan(python=py, steps=[
        Step(kind="uninstall", reason="drop b", argv=_pip(py, "uninstall", "-y", "mut-b")),
        Step(kind="install", reason="upgrade a", argv=_pip(py, "install", "--no-deps", "--find-links", str(wheels),
                                                            "mut-a==2.0")),
        Step(kind="install", reason="a wheel that is not there", argv=_pip(py, "install", "--no-deps", "--find-links",
                                                                            str(wheels), FAIL))])
    seen: list[tuple[str, str]] = []
    with pytest.raises(InstallFailed) as err:
        apply(plan, on_progress=lambda event, text: seen.append((event, text)))
    assert _versions(py) == {"mut-a": "1.0", "mut-b": "1.0"}
    # mut-a is pinned by the plan: the journal saved a wheel of it and puts it back from there; mut-b is not in
    # the plan's to_remove, so no wheel of it was saved and it is only in the wheel folder: without the plan's
    # --find-links pip could not reinstall it
    assert [t for ev, t in seen if ev == "restore"] == [
        "restoring the starting set", "uninstall mut-a", "reinstall from the saved wheels: mut-a",
        "reinstall mut-b 1.0"]
    e = err.value
    assert e.exit_code == Exit.INSTALL_FAILED == 4
    assert e.detail["not_restored"] == []
    assert sorted((d["name"], d["version"]) for d in e.detail["restored"]) == [("mut-a", "1.0"), ("mut-b", "1.0")]
    restored = ", ".join(f"{d['name']} {d['version']}" for d in e.detail["restored"])
    assert e.hint == f"{NOT_ON_INDEX}; the environment is back to its starting set (restored {restored})"
    assert str(e) == f"install failed, step 3 failed: a wheel that is not there: not on the index: {MISSING}"
    assert e.detail["cause"] == {"kind": "not on the index", "line": MISSING, "way_out": NOT_ON_INDEX}
    assert e.detail["argv"][-1] == FAIL and "mut-missing" in e.detail["installer_error"]


@pytest.mark.installs
def test_what_cannot_be_put_back_is_named(world):
    py, wheels = world
    plan = Plan(python=py, steps=[
        Step(kind="uninstall", reason="drop b", argv=_pip(py, "uninstall", "-y", "mut-b")),
        Step(kind="install", reason="a wheel that is not there", argv=_pip(py, "install", "--no-deps", "--find-links",
                                                                            str(wheels), FAIL))])
    (wheels / "mut_b-1.0-py3-none-any.whl").unlink()  # the only copy of mut-b 1.0 is gone
    seen: list[tuple[str, str]] = []
    with pytest.raises(InstallFailed) as err:
        apply(plan, on_progress=lambda event, text: seen.append((event, text)))
    assert _versions(py) == {"mut-a": "1.0"}
    assert err.value.detail["not_restored"] == ["mut-b 1.0"]
    assert err.value.detail["restored"] == []
    # the plan does not list mut-b in to_remove: the journal saved no wheel of it, and the plan's wheel folder lost it
    assert [t for ev, t in seen if ev == "restore"] == ["restoring the starting set", "reinstall mut-b 1.0"]
    assert err.value.hint == (f"{NOT_ON_INDEX}; could not restore: mut-b 1.0; the journal keeps what is needed: "
                              f"cudamatrix fix --rollback --python {py}")


@pytest.mark.installs
@needs_uv
def test_a_uv_plan_is_restored_with_uv(world, monkeypatch):
    py, wheels = world
    monkeypatch.setenv("PATH", with_uv(dict(os.environ))["PATH"])
    uv = ["uv", "pip", "install", "--python", py, "--no-deps", "--find-links", str(wheels)]
    plan = Plan(python=py, steps=[
        Step(kind="install", reason="upgrade a", argv=uv + ["mut-a==2.0"]),
        Step(kind="install", reason="a wheel that is not there", argv=uv + [FAIL])])
    with pytest.raises(InstallFailed) as err:
        apply(plan)
    after = {d.name: d for d in snapshot(py)}
    assert (after["mut-a"].version, after["mut-b"].version) == ("1.0", "1.0")
    # the installer records itself in the dist-info INSTALLER file: the put-back copy came from uv
    assert after["mut-a"].installer == "uv" and after["mut-b"].installer == "pip"
    assert err.value.detail["argv"][:2] == ["uv", "pip"] and err.value.detail["not_restored"] == []


def test_snapshot_of_a_missing_interpreter_is_an_install_error(tmp_path):
    with pytest.raises(InstallFailed) as err:
        snapshot(str(tmp_path / "no-python"))
    assert err.value.exit_code == 4 and err.value.hint == "check that --python names a working interpreter"


def test_plan_without_install_steps_runs_nothing():
    applied = apply(Plan(python=sys.executable, steps=[Step(kind="env", reason="e"), Step(kind="verify", reason="v")]))
    assert applied.ok and applied.steps_run == [] and applied.before == [] and applied.after == []




# the installer's own words: pip prints "ERROR: ..." lines, uv "error: ..." with "  × " / "Caused by" lines;
# without such lines, the tail of what it printed; a program that did not run is named with its reason
WORDS = [
    (Result(["pip"], 1, stderr="Collecting x\nERROR: No matching distribution found for x\n"),
     "ERROR: No matching distribution found for x"),
    (Result(["uv"], 2, stderr="  × No solution found\n  ╰─▶ because ...\nerror: resolution failed\n"),
     "× No solution found\nerror: resolution failed"),
    (Result(["pip"], 1, stdout="line 1\nline 2\n"), "line 1\nline 2"),
    (Result(["pip"], 3), "exit status 3"),
    (Result(["pip"], None, stderr="partial", error="timed out after 5s"), "timed out after 5s\npartial"),
    (Result(["pip"], 1, stderr="\n".join(f"l{i}" for i in range(50))), "\n".join(f"l{i}" for i in range(10, 50))),
]


@pytest.mark.parametrize("result, words", WORDS)
def test_installer_error_keeps_the_installers_words(result, words):
    assert installer_error(result) == words


@pytest.mark.installs
def test_progress_events_of_a_failed_plan(world):
    py, wheels = world
    plan = Plan(python=py, steps=[
        Step(kind="install", reason="upgrade a", argv=_pip(py, "install", "--no-deps", "--find-links", str(wheels),
                                                            "mut-a==2.0")),
        Step(kind="install", reason="a wheel that is not there", argv=_pip(py, "install", "--no-deps", "--find-links",
                                                                            str(wheels), FAIL))])
    seen: list[tuple[str, str]] = []
    with pytest.raises(InstallFailed):
        apply(plan, on_progress=lambda event, text: seen.append((event, text)))
    steps = [t for e, t in seen if e == "step"]
    # one dry run per install step (what it would replace), then the journal saves the pinned mut-a, then the steps
    assert steps == ["asking the installer what the plan changes (dry run)",
                     "asking the installer what the plan changes (dry run)",
                     "saving mut-a 1.0 for a rollback without network",
                     "[1/2] upgrade a", "[2/2] a wheel that is not there"]
    restore = [t for e, t in seen if e == "restore"]
    assert restore == ["restoring the starting set", "uninstall mut-a", "reinstall from the saved wheels: mut-a"]
    assert any(e == "output" for e, _ in seen) and not any(e == "done" for e, _ in seen)


# --- apply() on this interpreter with steps that change nothing (fast): the flow, the events, the error -------

def _step(code: str, reason: str, **kw) -> Step:
    return Step(kind="install", reason=reason, argv=[sys.executable, "-c", code], **kw)


@pytest.mark.slow
def test_a_failing_step_that_changed_nothing_restores_nothing():
    seen: list[tuple[str, str]] = []
    plan = Plan(python=sys.executable, steps=[
        _step("print('first ok')", "first"),
        Step(kind="env", reason="not run by apply", env={"X": "1"}),
        _step("import sys; print('ERROR: no such wheel', file=sys.stderr); sys.exit(1)", "second")])
    with pytest.raises(InstallFailed) as err:
        apply(plan, on_progress=lambda e, t: seen.append((e, t)))
    e = err.value
    assert str(e) == "install failed, step 2 failed: second: ERROR: no such wheel"
    assert e.hint == "the environment is back to its starting set"
    # no known root cause in "ERROR: no such wheel" (explain.py): the installer's words stand alone
    assert e.detail == {"installer_error": "ERROR: no such wheel", "cause": None, "argv": plan.steps[2].argv,
                        "restored": [], "not_restored": []}
    assert [t for ev, t in seen if ev == "step"] == ["[1/2] first", "[2/2] second"]
    assert ("output", "first ok") in seen and not [t for ev, t in seen if ev == "restore"]


@pytest.mark.slow
def test_steps_run_with_their_environment_and_report_done():
    seen: list[tuple[str, str]] = []
    code = "import os, sys; sys.exit(0 if os.environ.get('CUDAMATRIX_STEP') == 'yes' else 3)"
    applied = apply(Plan(python=sys.executable, steps=[_step(code, "needs its env", env={"CUDAMATRIX_STEP": "yes"})]),
                    on_progress=lambda e, t: seen.append((e, t)))
    assert applied.ok and applied.steps_run == ["needs its env"]
    assert applied.before == applied.after and any(d.name == "pytest" for d in applied.after)
    assert seen[-1] == ("done", "1 step(s) done")


@pytest.mark.slow
def test_interrupt_restores_and_says_so():
    plan = Plan(python=sys.executable, steps=[_step(WHEN_RECORDED + "import os, signal; os.kill(os.getppid(), signal.SIGINT)",
                                                     "interrupted")])
    with pytest.raises(InstallFailed) as err:
        apply(plan)
    assert str(err.value) == "install failed, interrupted (Ctrl-C): interrupted by the user"
    assert err.value.detail["argv"] is None and err.value.detail["not_restored"] == []


@pytest.mark.slow
def test_restore_of_an_unchanged_set_does_nothing():
    from cudamatrix.install.apply import restore

    before = snapshot(sys.executable)
    assert restore(sys.executable, before) == ([], {"added": [], "removed": [], "changed": []})
    # an unreadable interpreter: nothing can be put back, and everything is named as not restored
    restored, left = restore("/nonexistent/python", before[:2])
    assert restored == [] and left == {"added": [], "removed": before[:2], "changed": []}


@pytest.mark.slow
def test_snapshot_records_where_each_distribution_came_from(tmp_path):
    # this project is installed editable (PEP 610: dir_info.editable), by pip, or by uv in .ci/run's Python 3.10
    # venv (the INSTALLER file says which)
    dists = {d.name: d for d in snapshot(sys.executable)}
    mine = dists["cudamatrix"]
    written = (Path(mine.path) / "INSTALLER").read_text().strip()
    assert written in ("pip", "uv")
    assert mine.source is not None and mine.source.startswith("-e file://") and mine.installer == written
    assert dists["pytest"].source is None
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho 'it broke' >&2\nexit 1\n")
    broken.chmod(0o755)
    with pytest.raises(InstallFailed) as err:
        snapshot(str(broken))
    assert str(err.value) == f"could not read the installed set of {broken}: it broke"
