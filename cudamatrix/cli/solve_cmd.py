"""`cudamatrix doctor | solve | lock | check | env`."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from .. import render
from ..errors import Exit, NoSolution, UsageError
from .app import app
from .common import Done, echo, finish, guarded

EnvOpt = typer.Option([], "--env", help="A saved `detect --json` (repeatable: the answer must hold on every machine).")
FromOpt = typer.Option([], "--from", help="Pasted tool outputs (nvidia-smi, collect_env, ldconfig -p, pip freeze...); '-' for stdin.")
DriverOpt = typer.Option(None, "--driver", help="Target driver version, e.g. 535.104.05.")
GpuOpt = typer.Option([], "--gpu", help='Target GPU: a name ("Tesla T4"), sm_75 or 7.5 (repeatable).')
PythonOpt = typer.Option(None, "--python", help="Target Python version (3.10), or the path of an interpreter to inspect.")
PlatformOpt = typer.Option(None, "--platform", help="linux_x86_64 | linux_aarch64 | win_amd64")
ToolkitOpt = typer.Option(None, "--cuda-toolkit", help="Target CUDA toolkit version, if one is installed there.")
JsonOpt = typer.Option(False, "--json", help="Print the JSON envelope.")
DataOpt = typer.Option(None, "--data", help="Read the matrix from this folder.", hidden=True)
MirrorOpt = typer.Option(None, "--mirror", help="Replace https://download.pytorch.org/whl with this mirror in index URLs.")


def _matrix(data_dir: Optional[Path]):
    from ..matrix import load_matrix

    return load_matrix(str(data_dir) if data_dir else None)


def _solve(matrix, requirements, env, driver, gpu, python, platform, cuda_toolkit, mirror=None):
    from ..solve import parse_request, solve, with_mirror
    from .targets import resolve

    resolved = resolve(matrix, env_files=env, driver=driver, gpus=gpu, python=python, platform=platform,
                       cuda_toolkit=cuda_toolkit)
    request = parse_request(requirements, resolved.installed)
    solution = with_mirror(solve(resolved.targets, request, matrix, installed=resolved.installed), mirror)
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


@app.command("solve")
@guarded("solve")
def solve_command(
    requirements: List[str] = typer.Argument(None, help="PEP 508 requirements: torch>=2.3 torchvision tensorflow==2.15.*"),
    env: List[Path] = EnvOpt, driver: Optional[str] = DriverOpt, gpu: List[str] = GpuOpt,
    python: Optional[str] = PythonOpt, platform: Optional[str] = PlatformOpt,
    cuda_toolkit: Optional[str] = ToolkitOpt,
    explain: bool = typer.Option(False, "--explain", help="Show the decision trace and rejected candidates."),
    mirror: Optional[str] = MirrorOpt, as_json: bool = JsonOpt, data_dir: Optional[Path] = DataOpt,
) -> None:
    """The consistent set for the target: exact versions, variant, index, CUDA/cuDNN, the pip command."""
    matrix = _matrix(data_dir)
    try:
        resolved, request, solution = _solve(matrix, requirements or [], env, driver, gpu, python, platform,
                                             cuda_toolkit, mirror)
    except NoSolution as exc:
        _no_solution("solve", exc, as_json)
    data = {"solution": solution.to_dict(), "targets": [t.describe() for t in resolved.targets]}
    finish("solve", 0, data, as_json, lambda: _human_solution(solution, resolved, explain))


def _human_solution(solution, resolved, explain: bool) -> None:
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


@app.command()
@guarded("lock")
def lock(
    requirements: List[str] = typer.Argument(None, help="PEP 508 requirements."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write here (default: stdout)."),
    fmt: str = typer.Option("requirements", "--format", help="requirements | uv"),
    env: List[Path] = EnvOpt, driver: Optional[str] = DriverOpt, gpu: List[str] = GpuOpt,
    python: Optional[str] = PythonOpt, platform: Optional[str] = PlatformOpt,
    cuda_toolkit: Optional[str] = ToolkitOpt, mirror: Optional[str] = MirrorOpt, as_json: bool = JsonOpt,
    data_dir: Optional[Path] = DataOpt,
) -> None:
    """A pinned requirements file (or uv project configuration) for the target."""
    from ..lockfile import requirements_txt, uv_project

    if fmt not in ("requirements", "uv"):
        raise UsageError(f"--format {fmt!r} is not known", hint="requirements | uv")
    matrix = _matrix(data_dir)
    try:
        resolved, request, solution = _solve(matrix, requirements or [], env, driver, gpu, python, platform,
                                             cuda_toolkit, mirror)
    except NoSolution as exc:
        _no_solution("lock", exc, as_json)
    passthrough = [str(r) for r in request.passthrough]
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


@app.command()
@guarded("check")
def check(
    requirement_file: Optional[Path] = typer.Option(None, "-r", "--requirement", help="A requirements file to check."),
    env: List[Path] = EnvOpt, driver: Optional[str] = DriverOpt, gpu: List[str] = GpuOpt,
    python: Optional[str] = PythonOpt, platform: Optional[str] = PlatformOpt,
    cuda_toolkit: Optional[str] = ToolkitOpt, mirror: Optional[str] = MirrorOpt, as_json: bool = JsonOpt,
    data_dir: Optional[Path] = DataOpt,
) -> None:
    """Gate a Docker build: exit 0 if the requirements (or what is installed) fit the target, 1 if not."""
    from ..checks import check_requirements

    matrix = _matrix(data_dir)
    from .targets import resolve

    resolved = resolve(matrix, env_files=env, driver=driver, gpus=gpu, python=python, platform=platform,
                       cuda_toolkit=cuda_toolkit)
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


@app.command("env")
@guarded("env")
def env_command(
    shell: str = typer.Option("bash", "--shell", help="bash | fish | powershell"),
    env: List[Path] = EnvOpt,
    python: Optional[str] = typer.Option(None, "--python", help="Inspect the interpreter at this path."),
    as_json: bool = JsonOpt,
) -> None:
    """Print the exports that fix library paths for this environment (nothing when nothing needs fixing)."""
    from ..diagnose import library_path_fix
    from .targets import environments

    if shell not in ("bash", "fish", "powershell"):
        raise UsageError(f"--shell {shell!r} is not known", hint="bash | fish | powershell")
    if len(env) > 1:
        raise UsageError("env reads one environment at a time")
    environment = environments(env, [], python)[0]
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
