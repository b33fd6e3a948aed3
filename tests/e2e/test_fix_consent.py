"""Every change asks, every dry run is dry (issue 42): ``fix --undo``, ``--resume`` and ``--rollback`` show their
plan, honour ``--dry-run``, and ask at a terminal (a real pseudo-terminal here), need ``--yes`` without one
(exit 2, nothing changed), in the command and in ``cudamatrix.fix()``. Real pip into copied venvs, a loopback
index, real journals. Plus: a venv without a framework has nothing to fix, verify without the framework is not
"no GPU", pip draws no progress bar into the pipe, the lock's way out names lock."""
from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
import test_fix_e2e
from support.localindex import LocalIndex, build_wheel, copy_venv, pip_list
from test_fix_e2e import TARGET, _cli, _fix_then_take_the_index_away

from cudamatrix.errors import UsageError
from cudamatrix.install import journal as journals
from cudamatrix.install.apply import apply, snapshot
from cudamatrix.models import Plan, Step

world = test_fix_e2e.world  # the fix end-to-end tests' venv with a stand-in CPU torch (a fixture)

ROOT = Path(__file__).parent.resolve().parents[1]
PROMPT = "Apply this plan? [y/N]: "


def _in_a_terminal(argv: list[str], env: dict, answer: str | None, timeout: float = 300) -> tuple[int, str]:
    """``cudamatrix ARGV`` with a pseudo-terminal as stdin, stdout and stderr (one stream: the order is the order
    printed); ``answer`` is typed once the question shows. Returns (exit code, what the terminal showed)."""
    main, side = pty.openpty()
    child = subprocess.Popen([sys.executable, "-m", "cudamatrix", *argv], stdin=side, stdout=side, stderr=side,
                             env=env, cwd=ROOT, close_fds=True)
    os.close(side)
    seen, typed, deadline = b"", False, time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(main, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                seen += chunk
            if answer is not None and not typed and PROMPT.encode() in seen:
                os.write(main, answer.encode() + b"\n")
                typed = True
            if not ready and child.poll() is not None:
                break
        code = child.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        os.close(main)
    return code, seen.decode(errors="replace").replace("\r\n", "\n")


def _env(env: dict) -> dict:
    return {k: v for k, v in env.items() if k not in ("COLUMNS", "LINES")}


# --- fix --undo -----------------------------------------------------------------------------------------------

@pytest.mark.installs
def test_undo_shows_its_plan_asks_and_needs_yes_without_a_terminal(world, tmp_path):
    py, env, solution = world
    before = _fix_then_take_the_index_away(py, env, solution, tmp_path)
    fixed = pip_list(py, env)
    dry = _cli("fix", "--undo", "--python", str(py), "--installer", "pip", "--dry-run", env=env)
    assert dry.returncode == 0 and "[install] put back the starting versions" in dry.stdout, dry.stdout + dry.stderr
    assert "nothing was changed" in dry.stdout and pip_list(py, env) == fixed
    piped = _cli("fix", "--undo", "--python", str(py), "--installer", "pip", "--json", env=env)  # before: applied
    doc = json.loads(piped.stdout)
    assert piped.returncode == 2 and "no terminal to ask" in doc["errors"][0]["message"], piped.stdout
    assert doc["errors"][0]["detail"]["plan"]["steps"] and pip_list(py, env) == fixed
    code, shown = _in_a_terminal(["fix", "--undo", "--python", str(py), "--installer", "pip"], _env(env), "n")
    assert code == 1 and "cancelled: nothing was changed" in shown, shown
    # the header and the plan come before the question, once (before: the header after the answer)
    assert shown.count(f"python: {py}") == 1 and shown.index(f"python: {py}") < shown.index(PROMPT), shown
    assert shown.index("[install] put back") < shown.index(PROMPT) and pip_list(py, env) == fixed
    code, shown = _in_a_terminal(["fix", "--undo", "--python", str(py), "--installer", "pip"], _env(env), "y")
    assert code == 0 and "undone: back to the starting set" in shown, shown
    assert pip_list(py, env) == before


# --- fix --rollback and --resume of a killed fix's journal ----------------------------------------------------

def _killed(py: str, plan: Plan) -> journals.Journal:
    """The journal a SIGKILLed fix of ``py`` leaves: the starting set is what is installed now, its owner is gone."""
    j = journals.begin(py, plan, snapshot(py), set(), [])
    j.record(pid=2 ** 22 + 4242, owner=None, pid_start=None, state="running")
    return j


@pytest.fixture()
def killed(template_venv, tmp_path, monkeypatch):
    """A venv whose fix was killed after its first step installed ``mut-a 1.0`` (the journal says so), and the
    environment for the command."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    env.update({"PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                "XDG_STATE_HOME": str(tmp_path / "state"), "XDG_CACHE_HOME": str(tmp_path / "cache"),
                "PYTHONPATH": str(ROOT)})
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    wheels = tmp_path / "wheels"
    build_wheel(wheels, "mut-a", "1.0")
    py = str(copy_venv(template_venv, tmp_path / "venv"))
    step = Step(kind="install", reason="install mut-a", argv=[py, "-m", "pip", "install", "--no-deps", "--find-links",
                                                              str(wheels), "mut-a==1.0"])
    j = _killed(py, Plan(python=py, steps=[step]))
    subprocess.run([py, "-m", "pip", "install", "--no-deps", "--find-links", str(wheels), "mut-a==1.0"], env=env,
                   check=True, capture_output=True, timeout=300)
    return py, env, j


def _has(py: str, name: str) -> bool:
    return name in {d.name for d in snapshot(py)}


@pytest.mark.installs
def test_rollback_dry_run_is_dry_and_a_rollback_asks(killed):
    py, env, j = killed
    dry = _cli("fix", "--rollback", "--python", py, "--dry-run", "--json", env=env)  # before: it rolled back
    doc = json.loads(dry.stdout)["data"]
    assert dry.returncode == 0 and doc["status"] == "dry_run", dry.stdout + dry.stderr
    assert [s["kind"] for s in doc["plan"]["steps"]] == ["uninstall"] and "mut-a 1.0" in doc["plan"]["steps"][0]["reason"]
    assert _has(py, "mut-a") and (j.folder / journals.JOURNAL_FILE).is_file()
    piped = _cli("fix", "--rollback", "--python", py, env=env)
    assert piped.returncode == 2 and "no terminal to ask" in piped.stderr, piped.stdout + piped.stderr
    assert _has(py, "mut-a")
    code, shown = _in_a_terminal(["fix", "--rollback", "--python", py], env, "n")
    assert code == 1 and "[uninstall]" in shown and shown.index("[uninstall]") < shown.index(PROMPT), shown
    assert _has(py, "mut-a") and (j.folder / journals.JOURNAL_FILE).is_file()
    done = _cli("fix", "--rollback", "--python", py, "--yes", env=env)
    assert done.returncode == 0 and "rolled back to the starting set" in done.stdout, done.stdout + done.stderr
    assert not _has(py, "mut-a") and not (j.folder / journals.JOURNAL_FILE).exists()


@pytest.mark.installs
def test_resume_shows_its_plan_honours_dry_run_and_asks(killed):
    py, env, j = killed
    subprocess.run([py, "-m", "pip", "uninstall", "-y", "mut-a"], env=env, check=True, capture_output=True,
                   timeout=300)  # the killed step had not got that far
    dry = _cli("fix", "--resume", "--python", py, "--no-verify", "--dry-run", env=env)
    assert dry.returncode == 0 and "[install] install mut-a" in dry.stdout, dry.stdout + dry.stderr
    assert not _has(py, "mut-a") and "resumed" not in journals.load(py).data  # the journal is left as it was
    piped = _cli("fix", "--resume", "--python", py, "--no-verify", env=env)  # before: resumed without asking
    assert piped.returncode == 2 and "no terminal to ask" in piped.stderr, piped.stdout + piped.stderr
    assert not _has(py, "mut-a") and "resumed" not in journals.load(py).data
    done = _cli("fix", "--resume", "--python", py, "--no-verify", "--yes", env=env)
    assert "resumed the interrupted change: done" in done.stdout, done.stdout + done.stderr
    assert _has(py, "mut-a")
    # completed: the way back is fix --undo (a rollback is for an interrupted change), aimed at this interpreter
    assert f"to go back to the starting set: cudamatrix fix --python {py} --undo" in done.stdout, done.stdout


@pytest.mark.installs
def test_fix_called_in_a_kernel_without_stdin_asks_and_refuses(killed, monkeypatch):
    """``cudamatrix.fix(rollback=True)`` by a person (interactive) where input() cannot ask (``sys.stdin`` is
    None): the documented UsageError, nothing changed (before: the rollback ran without asking)."""
    import cudamatrix

    py, env, j = killed
    monkeypatch.setattr(sys, "stdin", None)
    dry = cudamatrix.fix(python=py, rollback=True, dry_run=True, interactive=True, show=False)
    assert dry.status == "dry_run" and _has(py, "mut-a")
    with pytest.raises(UsageError, match="cannot ask here"):
        cudamatrix.fix(python=py, rollback=True, interactive=True, show=False, verify=False)
    assert _has(py, "mut-a") and (j.folder / journals.JOURNAL_FILE).is_file()
    done = cudamatrix.fix(python=py, rollback=True, interactive=True, yes=True, show=False, verify=False)
    assert done.status == "rolled_back" and not _has(py, "mut-a")


def test_the_cell_question_without_stdin_is_a_usage_error(monkeypatch, capsys):
    """input() with ``sys.stdin`` None raises RuntimeError ("lost sys.stdin"): the question turns it into the
    UsageError ``fix()`` documents (before: the RuntimeError went out)."""
    from cudamatrix.render import Ask

    monkeypatch.setattr(sys, "stdin", None)
    plan = Plan(python="/v/bin/python", steps=[Step(kind="install", reason="r", argv=["/v/bin/python", "-m", "pip"])])
    with pytest.raises(UsageError, match="cannot ask here") as err:
        Ask()(plan)
    assert "RuntimeError" in err.value.message and err.value.detail["plan"]["python"] == "/v/bin/python"
    assert capsys.readouterr().out.startswith("python: /v/bin/python\n1. [install] r\n")


def test_one_question_for_the_command_line_and_the_cell(monkeypatch, capsys):
    """The command line at a terminal and fix() at a cell ask through one prompt (render.Ask): its words are
    written once in the package (before: cli/fix_cmd._Ask and render.CellAsk each wrote them). At a terminal the
    question goes to stderr and the answer is a line of stdin, an end of input a no; consent given shows the plan
    and reads nothing."""
    import io

    package = ROOT / "cudamatrix"
    writers = [p.relative_to(package).as_posix() for p in sorted(package.rglob("*.py"))
               if PROMPT.strip() in p.read_text()]
    assert writers == ["render.py"], writers
    from cudamatrix.render import Ask

    plan = Plan(python="/v/bin/python", steps=[Step(kind="install", reason="r", argv=["/v/bin/python", "-m", "pip"])])
    for typed, answer in (("yes\n", True), ("Y\n", True), ("n\n", False), ("", False)):
        monkeypatch.setattr(sys, "stdin", io.StringIO(typed))
        assert Ask(terminal=True)(plan) is answer
        shown = capsys.readouterr()
        assert shown.err == PROMPT and shown.out.startswith("python: /v/bin/python\n1. [install] r\n"), shown
    monkeypatch.setattr(sys, "stdin", None)  # consent given: nothing is read
    assert Ask(yes=True)(plan) is True
    shown = capsys.readouterr()
    assert shown.err == "" and shown.out.startswith("python: /v/bin/python\n1. [install] r\n")


# --- nothing installed, nothing asked --------------------------------------------------------------------------

@pytest.mark.installs
def test_a_venv_without_a_framework_has_nothing_to_fix(template_venv, tmp_path, monkeypatch):
    import cudamatrix

    py = copy_venv(template_venv, tmp_path / "venv")
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state"), XDG_CACHE_HOME=str(tmp_path / "cache"),
               PYTHONPATH=str(ROOT))
    r = _cli("fix", "--python", str(py), "--json", env=env)  # before: a plan for torch, refused without --yes (2)
    doc = json.loads(r.stdout)["data"]
    assert r.returncode == 0 and doc["status"] == "unchanged" and doc["plan"] is None, r.stdout + r.stderr
    assert "nothing to fix" in doc["messages"][0]
    assert f"cudamatrix fix --python {py} torch" in doc["messages"][1]
    human = _cli("fix", "--python", str(py), "--dry-run", *TARGET, env=env)
    assert human.returncode == 0 and "nothing to fix" in human.stdout and "[install]" not in human.stdout
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    result = cudamatrix.fix(python=str(py), show=False)
    assert (result.status, result.exit_code, result.plan) == ("unchanged", 0, None)
    asked = cudamatrix.fix(python=str(py), request=["torch"], dry_run=True, show=False)
    assert [p.name for p in asked.plan.solution.to_install] == ["torch"]  # named: planned as before


# --- verify without the framework ------------------------------------------------------------------------------

@pytest.mark.slow
def test_verify_without_the_framework_is_a_finding_not_no_gpu(tmp_path):
    venv = tmp_path / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    env = dict(os.environ, PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(tmp_path / "cache"))
    for framework in ("all", "jax"):
        r = _cli("verify", "--python", str(venv / "bin" / "python"), "--framework", framework, "--json", env=env)
        doc = json.loads(r.stdout)
        assert r.returncode == 1 and doc["status"] == "problems", r.stdout  # before: 6, "verify_not_possible"
    human = _cli("verify", "--python", str(venv / "bin" / "python"), "--framework", "jax", env=env)
    assert human.returncode == 1 and "to install one: cudamatrix fix jax" in human.stdout, human.stdout


# --- pip's progress bar ----------------------------------------------------------------------------------------

@pytest.mark.installs
def test_pip_draws_no_progress_bar_into_the_pipe(template_venv, tmp_path, monkeypatch):
    """A notebook kernel sets FORCE_COLOR: pip then draws its download bar into the pipe, one line per redraw (80
    lines a cell). The steps run with the bar off: the download is one line."""
    for k in list(os.environ):
        if k.startswith(("PIP_", "UV_")):
            monkeypatch.delenv(k)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    wheels = tmp_path / "wheels"
    build_wheel(wheels, "big-blob", "1.0", files={"big_blob/blob.bin": os.urandom(3_000_000)})  # above pip's 512 kB
    py = str(copy_venv(template_venv, tmp_path / "venv"))
    lines: list[str] = []
    with LocalIndex(wheels) as index:
        applied = apply(Plan(python=py, steps=[Step(kind="install", reason="big", argv=[
            py, "-m", "pip", "install", "--no-deps", "--index-url", index.url + "/simple", "big-blob==1.0"])]),
            on_progress=lambda event, text: lines.append(text) if event == "output" else None)
    assert applied.ok and any("big_blob-1.0" in line or "big-blob" in line for line in lines), lines
    assert not [line for line in lines if "\u2501" in line or "eta" in line], lines


# --- the lock's way out ----------------------------------------------------------------------------------------

def test_the_way_out_names_the_command_that_ran_the_installer():
    from cudamatrix.install.explain import explain

    refused = "ERROR: Could not install: Connection refused"
    assert explain(refused).way_out.endswith("then run fix again")
    lock = explain(refused, command="lock")
    assert lock.way_out.endswith("then run lock again") and "fix" not in lock.way_out
