"""`cudamatrix solve | lock | check | env`: the bodies, typer-free (options are declared in
:mod:`cudamatrix.cli.commands`; :mod:`cudamatrix.cli.fast` runs plain invocations without typer)."""
from __future__ import annotations

from pathlib import Path

from cudamatrix import render
from cudamatrix.errors import Exit, NoSolution, UsageError
from cudamatrix.cli.common import Done, echo, finish, guarded


def _matrix(data_dir: Path | None):
    from cudamatrix.matrix.data import load_matrix

    return load_matrix(str(data_dir) if data_dir else None)


def _solve(command: str, as_json: bool, matrix, requirements, env, driver, gpu, python, platform, cuda_toolkit,
           mirror=None):
    """Resolve the targets, parse the request and solve; "no solution" ends the command with exit 3."""
    from cudamatrix.solve.indexes import with_mirror
    from cudamatrix.solve.solver import parse_request, solve
    from cudamatrix.solve.target import resolve

    resolved = resolve(matrix, env_files=env or [], driver=driver, gpus=gpu or [], python=python, platform=platform,
                       cuda_toolkit=cuda_toolkit)
    request = parse_request(requirements or [], resolved.installed)
    try:
        solution = with_mirror(solve(resolved.targets, request, matrix, installed=resolved.installed), mirror)
    except NoSolution as exc:
        _no_solution(command, exc, as_json)
    return resolved, request, solution


def _no_solution(command: str, exc: NoSolution, as_json: bool) -> None:
    if as_json:
        render.print_json(command, Exit.NO_SOLUTION, exc.detail, [exc.as_dict()])
        raise Done(Exit.NO_SOLUTION)
    c = render.console(stderr=True)
    c.print("[bold red]no consistent set[/]")
    for cause in exc.detail["causes"]:
        machines = f" [dim](blocks: {', '.join(cause['machines'])})[/]" if cause.get("machines") else ""
        c.print(f"  - {cause['message']}{machines}")
    if exc.detail["ways_out"]:
        c.print("ways out:")
        for way in exc.detail["ways_out"]:
            c.print(f"  → {way['message']}")
    raise Done(Exit.NO_SOLUTION)


@guarded("solve")
def run_solve(requirements: list[str] | None = None, env: list[Path] | None = None, driver: str | None = None,
              gpu: list[str] | None = None, python: str | None = None, platform: str | None = None,
              cuda_toolkit: str | None = None, explain: bool = False, mirror: str | None = None,
              as_json: bool = False, data_dir: Path | None = None) -> None:
    """The consistent set for the target: exact versions, variant, index, CUDA/cuDNN, the pip command."""
    resolved, request, solution = _solve("solve", as_json, _matrix(data_dir), requirements, env, driver, gpu, python,
                                         platform, cuda_toolkit, mirror)
    data = {"solution": solution.to_dict(), "targets": [t.describe() for t in resolved.targets]}
    removed = []
    if resolved.installed is not None:  # what fix would uninstall too, so that solve and fix say the same
        from cudamatrix.install.remedies import removals

        removed = removals(resolved.installed, solution)
        data["to_remove"] = [r.to_dict() for r in removed]
    finish("solve", 0, data, as_json, lambda: _human_solution(solution, resolved, explain, removed))


def _human_solution(solution, resolved, explain: bool, removed=()) -> None:
    c = render.console()
    for t in resolved.targets[:5]:
        c.print(f"[dim]{t.describe()}[/]")
    if len(resolved.targets) > 5:
        c.print(f"[dim]... and {len(resolved.targets) - 5} more machines[/]")
    for fw in solution.frameworks:
        c.print(f"[bold]{fw.name} {fw.version}[/] {fw.variant}" +
                (f"  CUDA {fw.cuda}, cuDNN {fw.cudnn or 'unknown'}" if fw.cuda else "  CPU build"))
    c.print(render.table(None, ["package", "version", "index"],
                         [[p.name + (f"[{','.join(p.extras)}]" if p.extras else ""), p.version, p.index_url or "default"]
                          for p in solution.packages]))
    if removed:
        c.print("pip uninstall -y " + " ".join(r.name for r in removed) + "   # first; "
                + "; ".join(f"{r.name}: {r.reason}" for r in removed), soft_wrap=True, markup=False)
    if solution.unchanged:
        c.print("[green]already installed: nothing to change[/]")
    elif solution.pip_args:
        import shlex

        c.print("pip install " + " ".join(shlex.quote(a) for a in solution.pip_args), soft_wrap=True)
    for k, v in solution.env.items():
        c.print(f"export {k}={v}")
    if explain:
        c.print("[bold]trace[/]")
        for line in solution.trace:
            c.print(f"  {line}")
        c.print(f"[bold]rejected[/] ({len(solution.rejected)})")
        for r in solution.rejected:
            c.print(f"  {r.candidate}: {'; '.join(r.reasons)}")


@guarded("lock")
def run_lock(requirements: list[str] | None = None, output: Path | None = None, fmt: str = "requirements",
             env: list[Path] | None = None, driver: str | None = None, gpu: list[str] | None = None,
             python: str | None = None, platform: str | None = None, cuda_toolkit: str | None = None,
             mirror: str | None = None, as_json: bool = False, data_dir: Path | None = None) -> None:
    """A pinned requirements file (or uv project configuration) for the target."""
    from cudamatrix.solve.lockfile import requirements_txt, uv_project

    if fmt not in ("requirements", "uv", "pylock"):
        raise UsageError(f"--format {fmt!r} is not known", hint="requirements | uv | pylock")
    resolved, request, solution = _solve("lock", as_json, _matrix(data_dir), requirements, env, driver, gpu, python,
                                         platform, cuda_toolkit, mirror)
    passthrough = [str(r) for r in request.passthrough]
    if fmt == "pylock":
        from cudamatrix.cli.lock_pylock import pylock_text

        text = pylock_text(solution, resolved.targets, passthrough)
    else:
        text = (requirements_txt if fmt == "requirements" else uv_project)(solution, resolved.targets, passthrough)
    if output is not None:
        try:
            tmp = output.with_name(output.name + ".tmp")
            tmp.write_text(text)
            tmp.replace(output)
        except OSError as exc:
            raise UsageError(f"{output}: cannot be written ({exc.strerror})") from None
    data = {"format": fmt, "path": str(output) if output else None, "text": text, "solution": solution.to_dict()}

    def human() -> None:
        if output is None:
            echo(text, nl=False)
        else:
            render.console(stderr=True).print(f"wrote {output}")

    finish("lock", 0, data, as_json, human)


@guarded("check")
def run_check(requirement_file: Path | None = None, env: list[Path] | None = None, driver: str | None = None,
              gpu: list[str] | None = None, python: str | None = None, platform: str | None = None,
              cuda_toolkit: str | None = None, mirror: str | None = None, as_json: bool = False,
              data_dir: Path | None = None) -> None:
    """Gate a Docker build: exit 0 if the requirements (or what is installed) fit the target, 1 if not."""
    from cudamatrix.solve.checks import check_requirements

    matrix = _matrix(data_dir)
    from cudamatrix.solve.target import resolve

    resolved = resolve(matrix, env_files=env or [], driver=driver, gpus=gpu or [], python=python,
                       platform=platform, cuda_toolkit=cuda_toolkit, need_installed=requirement_file is None)
    text = None
    if requirement_file is not None:
        try:
            text = requirement_file.read_text(errors="replace")
        except OSError as exc:
            raise UsageError(f"{requirement_file}: cannot be read ({exc.strerror})") from None
    result = check_requirements(matrix, resolved.targets, resolved.installed, text,
                                str(requirement_file) if requirement_file else None, mirror)
    code = 0 if result["fits"] else 1

    def human() -> None:
        c = render.console()
        if result["fits"]:
            c.print(f"[green]fits[/] {', '.join(result['checked'])} on {len(resolved.targets)} target(s)")
        else:
            c.print("[red]does not fit[/]")
            for p in result["problems"]:
                c.print(f"  - {p}")
            for w in result.get("ways_out", []):
                c.print(f"  → {w}")
        if result.get("base_image"):
            c.print(f"base image: {result['base_image']}")
        if result.get("nvidia_require_cuda"):
            c.print(f"ENV NVIDIA_REQUIRE_CUDA=\"{result['nvidia_require_cuda']}\"")

    finish("check", code, result, as_json, human)


@guarded("env")
def run_env(shell: str = "bash", env: list[Path] | None = None, python: str | None = None,
            as_json: bool = False) -> None:
    """Print the exports that fix library paths for this environment (nothing when nothing needs fixing)."""
    from cudamatrix.detect.libpaths import library_path_fix
    from cudamatrix.solve.target import environments

    if shell not in ("bash", "fish", "powershell"):
        raise UsageError(f"--shell {shell!r} is not known", hint="bash | fish | powershell")
    if env and len(env) > 1:
        raise UsageError("env reads one environment at a time")
    environment = environments(env or [], [], python)[0]
    changes = library_path_fix(environment)
    lines = [export_line(shell, k, v) for k, v in changes.items()]
    finish("env", 0, {"env": changes, "shell": shell, "lines": lines}, as_json,
           lambda: [echo(line) for line in lines])


def export_line(shell: str, key: str, value: str) -> str:
    import shlex

    if shell == "fish":
        return f"set -e {key}" if not value else f"set -gx {key} {shlex.quote(value)}"
    if shell == "powershell":
        return f"Remove-Item Env:{key}" if not value else f"$env:{key} = '{value}'"
    return f"unset {key}" if not value else f"export {key}={shlex.quote(value)}"
