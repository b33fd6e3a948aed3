"""`cudamatrix solve | check | env`: the bodies (lock: :mod:`.lock_cmd`), typer-free (options are declared in
:mod:`cudamatrix.cli.commands`; :mod:`cudamatrix.cli.fast` runs plain invocations without typer)."""
from __future__ import annotations

import os
from pathlib import Path

from cudamatrix import render
from cudamatrix.cli.answers import check_names_on_index
from cudamatrix.cli.answers import matrix_of as _matrix
from cudamatrix.cli.answers import solve_request as _solve
from cudamatrix.cli.common import check_target_flags, echo, finish, guarded, has_folder, python_path
from cudamatrix.cli.targets import environments, resolve
from cudamatrix.errors import UsageError
from cudamatrix.safe.files import read_text
from cudamatrix.safe.shells import SHELLS, NotExact, known_shell, shown_line
from cudamatrix.safe.shells import export_line as exact_line


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
    import shlex

    from rich.markup import escape  # "tensorflow[and-cuda]" is text, not a rich style tag

    run = " ".join(shlex.quote(a) for a in pip)
    if removed:
        c.print(run + " uninstall -y " + " ".join(r.name for r in removed) + "   # first; "
                + "; ".join(f"{r.name}: {r.reason}" for r in removed), soft_wrap=True, markup=False)
    if solution.unchanged:
        c.print("[green]already installed: nothing to change[/]")
    elif solution.pip_args:
        c.print(escape(run + " install " + " ".join(shlex.quote(a) for a in solution.pip_args)), soft_wrap=True)
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


@guarded("check")
def run_check(requirement_file: Path | None = None, env: list[Path] | None = None, from_: list[str] | None = None,
              driver: str | None = None,
              gpu: list[str] | None = None, python: str | None = None, platform: str | None = None,
              cuda_toolkit: str | None = None, mirror: str | None = None, as_json: bool = False,
              data_dir: Path | None = None) -> None:
    """Gate a Docker build: exit 0 if the requirements (or what is installed) fit the target, 1 if not.
    A folder of node files in ``env`` is the fleet form, answered per node class (:mod:`.fleet_cmd`)."""
    # lazy: `solve` would load 9 ms more (python -X importtime; the hoisting's budget per command is 3% of its run): cudamatrix.solve.checks, packaging._tokenizer, packaging.specifiers
    from cudamatrix.solve.checks import check_requirements

    if has_folder(env):
        if from_:
            raise UsageError("--from cannot be combined with a fleet folder", hint="--env DIR reads the saved nodes")
        # lazy: the fleet views (fleet.classes, hashlib: 4 ms, python -X importtime) only for a folder of nodes
        from cudamatrix.cli.fleetviews import run_check_fleet

        return run_check_fleet(requirement_file=requirement_file, env=env, driver=driver, gpu=gpu, python=python,
                               platform=platform, cuda_toolkit=cuda_toolkit, mirror=mirror, as_json=as_json,
                               data_dir=data_dir)

    check_target_flags(driver, gpu)
    matrix = _matrix(data_dir)

    resolved = resolve(matrix, env_files=env or [], from_files=from_ or [], driver=driver, gpus=gpu or [],
                       python=python, platform=platform, cuda_toolkit=cuda_toolkit,
                       need_installed=requirement_file is None)
    text = None
    if requirement_file is not None:
        text = read_text(requirement_file, what="requirements file")
    result = check_requirements(matrix, resolved.targets, resolved.installed, text,
                                str(requirement_file) if requirement_file else None, mirror,
                                names=lambda parsed, names: check_names_on_index(matrix, names, parsed))
    code = 0 if result["fits"] else 1

    def human() -> None:
        from rich.markup import escape

        c = render.console()
        E = render.escape
        if result["fits"]:
            n = len(resolved.targets)
            what = ", ".join(result["checked"]) or result.get("note", "")
            c.print(f"[green]fits[/] {escape(what)} on {n} target{'s' if n != 1 else ''}")
        else:
            c.print("[red]does not fit[/]")
            for p in result["problems"]:
                c.print(f"  - {escape(p)}")
            for w in result.get("ways_out", []):
                c.print(f"  → {escape(w)}")
        for line in result.get("unchecked", []):
            c.print(escape(line), soft_wrap=True)
        for line in result.get("skipped", []):
            c.print(escape(f"skipped: {line}"), soft_wrap=True)
        for u in result.get("unverified", []):
            c.print(escape(f"unverified: {u['fact']} is inferred ({u['basis']})"), soft_wrap=True)
        if result.get("base_image"):
            c.print(f"base image: {escape(result['base_image'])}")
        if result.get("python_in_image"):
            c.print(f"Python: {escape(result['python_in_image'])}", soft_wrap=True)
        if result.get("nvidia_require_cuda"):
            c.print(E(f"ENV NVIDIA_REQUIRE_CUDA=\"{result['nvidia_require_cuda']}\""))

    finish("check", code, result, as_json, human)


@guarded("env")
def run_env(shell: str = "bash", env: list[Path] | None = None, python: str | None = None,
            as_json: bool = False) -> None:
    """Print the exports that fix library paths for this environment (nothing when nothing needs fixing)."""
    # lazy: `solve` would load 20 ms more (python -X importtime; the hoisting's budget per command is 3% of its run): cudamatrix.ldso.linkmap, cudamatrix.ldso.libpaths, cudamatrix.ldso.elf
    from cudamatrix.ldso.libpaths import after_change, library_path_fix

    name = known_shell(shell)
    if name is None:
        raise UsageError(f"--shell {shell!r} is not known", hint=" | ".join(SHELLS))
    if env and len(env) > 1:
        raise UsageError("env reads one environment at a time")
    environment = environments(env or [], [], python_path(python))[0]
    changes = library_path_fix(environment)
    advice = env_advice(environment, changes, after_change(environment, changes) if changes else None)
    try:
        lines = [exact_line(name, k, v) for k, v in changes.items()]
    except NotExact as exc:  # a line that would set other bytes is never printed
        raise UsageError(f"env cannot write an exact {name} line: {exc}", hint="rename the folder" + (
            ", or use --shell bash, zsh, sh or fish, which take any byte" if name == "powershell" else "")) from None

    def human() -> None:
        for line in lines:
            echo(line)
        err = render.console(stderr=True)  # stdout stays exactly the exports (eval "$(cudamatrix env)")
        for line in advice:
            err.print(line, soft_wrap=True, markup=False, highlight=False)

    finish("env", 0, {"env": changes, "shell": name, "lines": lines, "advice": advice}, as_json, human)


def env_advice(environment, changes: dict[str, str], left=None) -> list[str]:
    """What the exports do: one line per framework and folder (or preloaded file) whose loads they stop, the
    loads no variable stops, and what the loader model predicts once they apply (``left``: the wrong loads it
    still predicts, None when it could not check); a plain "nothing to change" when nothing loads wrong."""
    # lazy: `solve` would load 20 ms more (python -X importtime; the hoisting's budget per command is 3% of its run): cudamatrix.ldso.linkmap, cudamatrix.ldso.libpaths, cudamatrix.ldso.elf
    from cudamatrix.ldso.libpaths import grouped, wrong_loads

    wrong = wrong_loads(environment)
    if not environment.library_loads:
        if changes:
            return []
        if environment.origin == "live":  # detected here: no framework of it loads a CUDA library
            return ["nothing to change: no installed framework loads CUDA libraries"]
        return ["nothing to change: this environment carries no loader prediction (pasted or saved by an older "
                "version); run cudamatrix env on the machine"]
    unknown = [n.message for n in environment.notes if n.probe == "loader" and "not predicted" in n.message]
    if not wrong and unknown:
        return ["nothing to change for the loads the model predicts; not predicted: " + "; ".join(unknown)]
    if not wrong:
        return ["nothing to change: every library each framework maps, and every library those open, resolves "
                "to the framework's own copy"]
    out = [_advice_line(group) for group in grouped(wrong)]
    if left is not None and changes:
        out.append("# after this change every library the frameworks map resolves to their own copies (loader model)"
                   if not left else "# still wrong after this change: " + "; ".join(
                       f"{w.load.soname} -> {w.load.path} ({w.load.rule})" for w in left))
    return out


def _advice_line(group) -> str:
    # lazy: `solve` would load 20 ms more (python -X importtime; the hoisting's budget per command is 3% of its run): cudamatrix.ldso.linkmap, cudamatrix.ldso.libpaths, cudamatrix.ldso.elf
    from cudamatrix.ldso.libpaths import winner_folder

    load = group[0].load
    names = ", ".join(w.load.soname for w in group)
    own = sorted({w.load.expected for w in group if w.load.expected})
    instead = f" instead of {own[0] if len(own) == 1 else 'its own copies in ' + winner_folder_of(own)}" if own else ""
    if group[0].cause == "LD_PRELOAD":
        return (f"# {names}: LD_PRELOAD puts {load.path} in place of {load.expected}; a running notebook kernel keeps "
                "it until restarted without it")
    if group[0].cause == "LD_LIBRARY_PATH":
        return f"# {load.framework} maps {names} from {winner_folder(load)} (LD_LIBRARY_PATH){instead}"
    return (f"# {names}: {load.framework} maps {load.path} ({load.rule}); no variable changes that: restart, and "
            "import the framework before what loaded that copy")


def winner_folder_of(paths: list[str]) -> str:
    """The folder of the first path (the framework's own copies of one library family share it)."""

    return os.path.dirname(paths[0])


def export_line(shell: str, key: str, value: str) -> str:
    """The line setting ``key`` in ``shell`` (quoting: :mod:`cudamatrix.safe.shells`; a comment where no line can
    be exact)."""
    return shown_line(shell, key, value)
