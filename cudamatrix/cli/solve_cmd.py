"""`cudamatrix solve`: the body (check: :mod:`.check_cmd`, env: :mod:`.env_cmd`, lock: :mod:`.lock_cmd`), typer-free
(options are declared in :mod:`cudamatrix.cli.options`; :mod:`cudamatrix.cli.fast` runs plain invocations without typer)."""
from __future__ import annotations

import os
from pathlib import Path

from cudamatrix import render
from cudamatrix.cli.answers import matrix_of as _matrix
from cudamatrix.cli.answers import solve_request as _solve
from cudamatrix.cli.common import finish, guarded
from cudamatrix.safe.shells import posix_word, shown_line


@guarded("solve")
def run_solve(requirements: list[str] | None = None, env: list[Path] | None = None, from_: list[str] | None = None,
              driver: str | None = None,
              gpu: list[str] | None = None, python: str | None = None, platform: str | None = None,
              cuda_toolkit: str | None = None, explain: bool = False, mirror: str | None = None,
              as_json: bool = False, data_dir: Path | None = None) -> None:
    """The consistent set for the target: exact versions, variant, index, CUDA/cuDNN, the pip command."""
    matrix = _matrix(data_dir)
    resolved, request, solution = _solve("solve", as_json, matrix, requirements, env, driver, gpu, python,
                                         platform, cuda_toolkit, mirror, from_)
    data = {"solution": solution.to_dict(), "targets": resolved.records(matrix)}
    removed = []
    if resolved.installed is not None:  # what fix would uninstall too, so that solve and fix say the same
        # lazy: `solve` would load 4 ms more (python -X importtime; the hoisting's budget per command is 3% of its run): packaging._tokenizer, packaging.specifiers, logging
        from cudamatrix.install.remedies import removals

        removed = removals(resolved.installed, solution)
        data["to_remove"] = [r.to_dict() for r in removed]
    pip = _pip_for(python)
    data["pip_command"] = [*pip, "install", *solution.pip_args] if solution.pip_args and not solution.unchanged else []
    finish("solve", 0, data, as_json, lambda: _human_solution(solution, resolved, explain, removed, pip))


def _pip_for(python: str | None) -> list[str]:
    """The pip that installs into the target: ``X -m pip`` for ``--python PATH`` (an interpreter), else ``pip``."""

    if python and os.path.isfile(python):
        return [os.path.abspath(python), "-m", "pip"]
    return ["pip"]


def _human_solution(solution, resolved, explain: bool, removed=(), pip: tuple[str, ...] | list[str] = ("pip",)) -> None:
    c = render.console()
    E = render.escape  # GPU names, requirements and paths come from the user
    for t in resolved.targets[:5]:
        c.print(f"[dim]{E(t.describe())}[/]")
    if len(resolved.targets) > 5:
        c.print(f"[dim]... and {len(resolved.targets) - 5} more machines[/]")
    for fw in solution.frameworks:
        c.print(f"[bold]{E(fw.name)} {E(fw.version)}[/] {E(fw.variant)}" +
                E(f"  {fw.label()}"))
    c.print(render.table(None, ["package", "version", "index"],
                         [[p.name + (f"[{','.join(p.extras)}]" if p.extras else ""), p.version,
                           p.index_url or "default"] for p in solution.packages], paths=("index",)))
    _commands(c, solution, removed, pip)
    if explain:
        _explained(c, solution)


def _commands(c, solution, removed, pip: tuple[str, ...] | list[str] = ("pip",)) -> None:
    """The uninstall and install commands (run by ``pip``: the target interpreter's), what the answer rests on,
    the library-path exports."""
    from rich.markup import escape  # "tensorflow[and-cuda]" is text, not a rich style tag

    run = " ".join(posix_word(a) for a in pip)
    if removed:
        c.print(run + " uninstall -y " + " ".join(r.name for r in removed) + "   # first; "
                + "; ".join(f"{r.name}: {r.reason}" for r in removed), soft_wrap=True, markup=False)
    if solution.unchanged:
        c.print("[green]already installed: nothing to change[/]")
    elif solution.pip_args:
        c.print(escape(run + " install " + " ".join(posix_word(a) for a in solution.pip_args)), soft_wrap=True)
    for line in (*solution.notes, *solution.unchecked):
        c.print(escape(line), soft_wrap=True)
    if solution.unverified:
        facts = "; ".join(f"{u['fact']} ({u['basis']})" for u in solution.unverified)
        c.print(escape(f"unverified: this answer rests on inferred facts: {facts}"), soft_wrap=True)
    for k, v in solution.env.items():
        c.print(render.escape(export_line("bash", k, v)), soft_wrap=True)


def _explained(c, solution) -> None:
    """--explain: the decision trace and every rejected candidate."""
    from rich.markup import escape

    c.print("[bold]trace[/]")
    for line in solution.trace:
        c.print(escape(f"  {line}"))
    c.print(f"[bold]rejected[/] ({len(solution.rejected)})")
    for r in solution.rejected:
        c.print(escape(f"  {r.candidate}: {'; '.join(r.reasons)}"))


def export_line(shell: str, key: str, value: str) -> str:
    """The line setting ``key`` in ``shell`` (quoting: :mod:`cudamatrix.safe.shells`; a comment where no line can
    be exact)."""
    return shown_line(shell, key, value)
