"""`cudamatrix fix` and `cudamatrix verify`.

fix: detect -> solve -> plan -> (confirm) -> apply -> verify. Exit codes: 0 verified (or nothing to
verify), 1 cancelled, 2 usage, 3 no solution, 4 install failed (restored), 5 verify failed,
6 verify not possible here (no GPU: the CPU path was checked).
The already-consistent path prints plain lines (no rich import) so it stays fast.
"""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Callable

from cudamatrix import fix, render
from cudamatrix.cli.answers import no_solution as _no_solution
from cudamatrix.cli.common import check_target_flags, check_timeout, finish, guarded, python_path
from cudamatrix.cli.targets import resolve
from cudamatrix.diagnose.findings import diagnose
from cudamatrix.errors import NoSolution, UsageError
from cudamatrix.fix import FixOptions, FixResult
from cudamatrix.install.plan import make_plan
from cudamatrix.matrix.load import load_matrix
from cudamatrix.names import FAMILY_NAMES
from cudamatrix.render import Ask, human_fix, human_report, inert
from cudamatrix.schema import http_allowed
from cudamatrix.solve import solver
from cudamatrix.verify.run import exit_code
from cudamatrix.verify.run import verify as verify_stage

if TYPE_CHECKING:
    from rich.status import Status

FRAMEWORK_CHOICES = (*FAMILY_NAMES, "all")


@guarded("fix")
def run_fix(requirements: list[str] | None = None, python: str | None = None, dry_run: bool = False,
            from_: list[str] | None = None, yes: bool = False, mirror: str | None = None, allow_http: bool = False, installer: str | None = None,
            write_activation: bool = False, no_verify: bool = False, no_cache: bool = False,
            framework: str = "all", timeout: float = 300.0, driver: str | None = None,
            gpu: list[str] | None = None, as_json: bool = False, data_dir: str | None = None,
            resume: bool = False, rollback: bool = False, undo: bool = False) -> None:
    """Make this environment consistent: install the solved set (minimal change), then verify on the GPU.

    Consent: ``--yes``, or an answer at the prompt; without a terminal (and without ``--yes``) a plan that
    changes anything is refused with exit 2 before any change. ``--resume`` / ``--rollback`` finish or undo a
    change a killed run left in its journal, ``--undo`` goes back to the starting set of the last completed one:
    each shows its plan, honours ``--dry-run`` and asks the same way."""
    _check_framework(framework)
    check_timeout(timeout)
    check_target_flags(driver, gpu)
    python = python_path(python)
    if from_:
        _plan_from_paste(from_, requirements or [], dry_run, python, mirror, allow_http, installer, no_verify,
                         driver, gpu or [], as_json, data_dir)
    confirm: Callable[[Any], bool] | None
    if yes or dry_run:
        confirm = None
    elif sys.stdin is not None and sys.stdin.isatty() and not as_json:
        confirm = Ask(terminal=True)
    else:
        confirm = _refuse
    progress = _Progress(as_json)

    try:
        with http_allowed(allow_http):  # a --data folder's http index URLs: only with --allow-http
            result = fix.fix(FixOptions(
                python=python, request=requirements or [], dry_run=dry_run, verify=not no_verify, frameworks=framework,
                mirror=mirror, allow_http=allow_http, installer=installer, write_activation=write_activation,
                use_cache=not no_cache, timeout=timeout, driver=driver, gpus=gpu or [], data_dir=data_dir,
                confirm=confirm, on_progress=progress, in_process=False, resume=resume, rollback=rollback,
                yes=yes, interactive=False, show=False, undo=undo))
    finally:
        progress.stop()
    finish("fix", result.exit_code, result.to_dict(), as_json, lambda: human_fix(result))


def _plan_from_paste(from_: list[str], requirements: list[str], dry_run: bool, python: str | None,
                     mirror: str | None, allow_http: bool, installer: str | None, no_verify: bool,
                     driver: str | None, gpu: list[str], as_json: bool, data_dir: str | None) -> None:
    """``fix --dry-run --from FILE``: the plan for the machine a bug report describes (nothing runs here)."""
    if not dry_run:
        raise UsageError("fix --from describes another machine: it can only show the plan",
                         hint="add --dry-run, or run `cudamatrix fix` on that machine")
    if python is not None:
        raise UsageError("--from and --python are exclusive", hint="--from reads the pasted machine's packages")
    matrix = load_matrix(data_dir)
    resolved = resolve(matrix, env_files=[], from_files=from_, driver=driver, gpus=gpu, python=None, platform=None,
                       cuda_toolkit=None)
    environment = resolved.installed
    assert environment is not None  # the pastes describe one machine: resolve() returns it as installed
    try:
        solution = solver.solve(resolved.targets, solver.parse_request(requirements, environment), matrix, installed=environment)
    except NoSolution as exc:
        _no_solution("fix", exc, as_json)

    interp = environment.python.executable or "python"
    # the pasted machine's error findings are answered in the plan, as on a live machine
    plan = make_plan(environment, solution, python=interp, installer=installer, mirror=mirror, allow_http=allow_http,
                     verify=not no_verify, findings=diagnose(environment, matrix))
    result = FixResult(python=interp, status="dry_run", solution=solution, plan=plan)
    result.messages.append("dry run for the pasted machine: nothing was changed")
    finish("fix", result.exit_code, result.to_dict(), as_json, lambda: human_fix(result))


@guarded("verify")
def run_verify(framework: str = "all", python: str | None = None, timeout: float = 300.0,
               as_json: bool = False) -> None:
    """Prove the GPU stack: a cuDNN convolution and a matmul on the GPU against the CPU, in a child process.
    Exit 0 verified, 5 failed, 6 not possible here (no GPU; the CPU path is still checked), 1 when no framework
    asked for is installed (NOT_INSTALLED: nothing was checked)."""
    _check_framework(framework)
    check_timeout(timeout)
    report = verify_stage(python=python_path(python), frameworks=framework, timeout=timeout)
    finish("verify", exit_code(report), report.to_dict(), as_json, lambda: human_report(report))


def _check_framework(framework: str) -> None:
    if framework not in FRAMEWORK_CHOICES:
        raise UsageError(f"--framework {framework!r} is not known", hint="torch | tensorflow | jax | all")


def _refuse(plan) -> bool:
    """No terminal to ask and no --yes: nothing is changed (exit 2)."""
    n = len([s for s in plan.steps if s.kind in ("install", "uninstall", "reinstall")])
    raise UsageError(f"fix would change {plan.python} ({n} step(s)) and there is no terminal to ask: nothing was "
                     "changed", hint="pass --yes to apply the plan, or --dry-run to see it",
                     detail={"plan": plan.to_dict()})


class _Progress:
    """Long steps: a rich status line when stdout is a terminal, else a plain log on stderr."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.status: Status | None = None

    def __call__(self, event: str, text: str) -> None:
        if self.status is None and not self.as_json and sys.stdout.isatty():
            self.status = render.console().status("working...")
            self.status.start()
        if self.status is not None:
            if event == "output":
                self.status.update(_literal(text.strip()[:100]) or "working...")
            else:
                self.status.console.print(text, markup=False)
                self.status.update(_literal(text))
        elif event != "output" or not self.as_json:
            sys.stderr.write(("  " if event == "output" else "") + inert(text) + "\n")
            sys.stderr.flush()

    def stop(self) -> None:
        if self.status is not None:
            self.status.stop()


def _literal(text: str):
    """A status line shown as typed: installer output may hold ``[...]`` that rich would read as markup, and
    control characters that the terminal would act on (:func:`cudamatrix.render.inert`)."""
    from rich.text import Text

    return Text(inert(text))
