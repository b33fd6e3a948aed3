"""`cudamatrix fix` and `cudamatrix verify`.

fix: detect -> solve -> plan -> (confirm) -> apply -> verify. Exit codes: 0 verified (or nothing to
verify), 1 cancelled, 2 usage, 3 no solution, 4 install failed (restored), 5 verify failed,
6 verify not possible here (no GPU: the CPU path was checked).
The already-consistent path prints plain lines (no rich import) so it stays fast.
"""
from __future__ import annotations

import shlex
import sys

from .common import echo, finish, guarded

FRAMEWORK_CHOICES = ("torch", "tensorflow", "jax", "all")


@guarded("fix")
def run_fix(requirements: list[str] | None = None, python: str | None = None, dry_run: bool = False,
            yes: bool = False, mirror: str | None = None, allow_http: bool = False, installer: str | None = None,
            write_activation: bool = False, no_verify: bool = False, no_cache: bool = False,
            framework: str = "all", timeout: float = 300.0, driver: str | None = None,
            gpu: list[str] | None = None, as_json: bool = False, data_dir: str | None = None) -> None:
    """Make this environment consistent: install the solved set (minimal change), then verify on the GPU."""
    from ..fix import fix as run_fix_stage

    _check_framework(framework)
    interactive = sys.stdin.isatty() and not yes and not as_json
    progress = _Progress(as_json)
    try:
        result = run_fix_stage(python=python, request=requirements or [], dry_run=dry_run, verify=not no_verify,
                               frameworks=framework, mirror=mirror, allow_http=allow_http, installer=installer,
                               write_activation=write_activation, use_cache=not no_cache, timeout=timeout,
                               driver=driver, gpus=gpu or [], data_dir=data_dir,
                               confirm=_ask if interactive else None, on_progress=progress, in_process=False)
    finally:
        progress.stop()
    finish("fix", result.exit_code, result.to_dict(), as_json, lambda: human_fix(result))


@guarded("verify")
def run_verify(framework: str = "all", python: str | None = None, timeout: float = 300.0,
               as_json: bool = False) -> None:
    """Prove the GPU stack: a cuDNN convolution and a matmul on the GPU against the CPU, in a child process.
    Exit 0 verified, 5 failed, 6 not possible here (no GPU; the CPU path is still checked)."""
    from ..verify import exit_code, verify as verify_stage

    _check_framework(framework)
    report = verify_stage(python=python, frameworks=framework, timeout=timeout)
    code = exit_code(report)
    finish("verify", code, report.to_dict(), as_json, lambda: human_report(report))


def _check_framework(framework: str) -> None:
    from ..errors import UsageError

    if framework not in FRAMEWORK_CHOICES:
        raise UsageError(f"--framework {framework!r} is not known", hint="torch | tensorflow | jax | all")


def _ask(plan) -> bool:
    human_plan(plan)
    sys.stderr.write("Apply this plan? [y/N]: ")
    sys.stderr.flush()
    answer = sys.stdin.readline().strip().lower()
    return answer in ("y", "yes")


class _Progress:
    """Long steps: a rich status line when stdout is a terminal, else a plain log on stderr."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.status = None

    def __call__(self, event: str, text: str) -> None:
        if self.status is None and not self.as_json and sys.stdout.isatty():
            from .. import render

            self.status = render.console().status("working...")
            self.status.start()
        if self.status is not None:
            if event == "output":
                self.status.update(text.strip()[:100] or "working...")
            else:
                self.status.console.print(text)
                self.status.update(text)
        elif event != "output" or not self.as_json:
            sys.stderr.write(("  " if event == "output" else "") + text + "\n")
            sys.stderr.flush()

    def stop(self) -> None:
        if self.status is not None:
            self.status.stop()


def _echo(text: str = "") -> None:
    echo(text)


def human_plan(plan) -> None:
    if plan.nothing_to_do:
        _echo("plan: nothing to install")
    for i, step in enumerate(plan.steps, 1):
        _echo(f"{i}. [{step.kind}] {step.reason}")
        if step.argv and step.kind != "verify":
            _echo("     " + " ".join(shlex.quote(a) for a in step.argv))
        for k, v in step.env.items():
            _echo(f"     export {k}={shlex.quote(v)}")


def human_fix(result) -> None:
    """The fix result for people: plain lines (fast on the healthy path)."""
    _echo(f"python: {result.python}")
    if result.status == "dry_run" or (result.plan and not result.plan.nothing_to_do and result.applied is None):
        human_plan(result.plan)
    if result.applied is not None:
        before = {d.name: d.version for d in result.applied.before}
        for d in result.applied.after:
            if before.get(d.name) != d.version:
                _echo(f"  {d.name} {before.get(d.name) or '(new)'} -> {d.version}")
    for m in result.messages:
        _echo(m)
    if result.report is not None:
        human_report(result.report)


def human_report(report) -> None:
    for fw in report.frameworks:
        head = f"{fw.framework} {fw.version or ''}".strip()
        if fw.cuda:
            head += f" (CUDA {fw.cuda}, cuDNN {fw.cudnn or '-'})"
        _echo(f"{head}: {fw.status}" + (f" [{fw.finding_code}]" if fw.finding_code else ""))
        if fw.device_name:
            _echo(f"  device: {fw.device_name} (compute capability {fw.compute_capability})")
        if fw.time_to_first_result_s is not None:
            _echo(f"  first GPU result after {fw.time_to_first_result_s:.2f}s, max abs error {fw.max_abs_error:.3g}")
        elif fw.cpu_checked:
            _echo(f"  CPU convolution checked against the reference (max abs error {fw.max_abs_error:.3g})")
        if fw.cause:
            _echo(f"  {fw.cause}")
        for lib in fw.mapped_libraries:
            _echo(f"  mapped: {lib.get('path')} {lib.get('version') or ''}")
        if fw.status == "failed" and fw.stderr_tail:
            _echo("  stderr (last lines):")
            for line in fw.stderr_tail.splitlines()[-8:]:
                _echo("    " + line)
    if report.status == "not_possible":
        _echo("GPU verification is not possible here (no GPU or no driver); the CPU path was checked.")
    if report.cached_at:
        _echo(f"(remembered result from {report.cached_at})")
