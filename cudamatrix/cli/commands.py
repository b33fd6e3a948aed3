"""Typer declarations of the commands whose bodies live in typer-free modules (detect, doctor, solve, lock,
check, env, fix, verify), so that :mod:`cudamatrix.cli.fast` can run plain invocations without typer."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from cudamatrix.cli.app import app
from cudamatrix.cli.detect_cmd import run_detect
from cudamatrix.cli.doctor_cmd import run_doctor
from cudamatrix.cli.fix_cmd import run_fix, run_verify
from cudamatrix.cli.solve_cmd import run_check, run_env, run_lock, run_solve

JsonOpt = typer.Option(False, "--json", help="Print the JSON envelope.")
EnvOpt = typer.Option([], "--env", help="A saved `detect --json` (repeatable: the answer must hold on every machine).")
DriverOpt = typer.Option(None, "--driver", help="Target driver version, e.g. 535.104.05.")
GpuOpt = typer.Option([], "--gpu", help='Target GPU: a name ("Tesla T4"), sm_75 or 7.5 (repeatable).')
PythonOpt = typer.Option(None, "--python", help="Target Python version (3.10), or the path of an interpreter to inspect.")
PlatformOpt = typer.Option(None, "--platform", help="linux_x86_64 | linux_aarch64 | win_amd64")
ToolkitOpt = typer.Option(None, "--cuda-toolkit", help="Target CUDA toolkit version, if one is installed there.")
DataOpt = typer.Option(None, "--data", help="Read the matrix from this folder.", hidden=True)
MirrorOpt = typer.Option(None, "--mirror", help="Replace https://download.pytorch.org/whl with this mirror in index URLs.")


@app.command("solve")
def solve(
    requirements: List[str] = typer.Argument(None, help="PEP 508 requirements: torch>=2.3 torchvision tensorflow==2.15.*"),
    env: List[Path] = EnvOpt, driver: Optional[str] = DriverOpt, gpu: List[str] = GpuOpt,
    python: Optional[str] = PythonOpt, platform: Optional[str] = PlatformOpt,
    cuda_toolkit: Optional[str] = ToolkitOpt,
    explain: bool = typer.Option(False, "--explain", help="Show the decision trace and rejected candidates."),
    mirror: Optional[str] = MirrorOpt, as_json: bool = JsonOpt, data_dir: Optional[Path] = DataOpt,
) -> None:
    """The consistent set for the target: exact versions, variant, index, CUDA/cuDNN, the pip command."""
    run_solve(requirements=requirements, env=env, driver=driver, gpu=gpu, python=python, platform=platform,
              cuda_toolkit=cuda_toolkit, explain=explain, mirror=mirror, as_json=as_json, data_dir=data_dir)


@app.command("lock")
def lock(
    requirements: List[str] = typer.Argument(None, help="PEP 508 requirements."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write here (default: stdout)."),
    fmt: str = typer.Option("requirements", "--format", help="requirements | uv | pylock"),
    env: List[Path] = EnvOpt, driver: Optional[str] = DriverOpt, gpu: List[str] = GpuOpt,
    python: Optional[str] = PythonOpt, platform: Optional[str] = PlatformOpt,
    cuda_toolkit: Optional[str] = ToolkitOpt, mirror: Optional[str] = MirrorOpt, as_json: bool = JsonOpt,
    data_dir: Optional[Path] = DataOpt,
) -> None:
    """A pinned requirements file (or uv project configuration) for the target."""
    run_lock(requirements=requirements, output=output, fmt=fmt, env=env, driver=driver, gpu=gpu, python=python,
             platform=platform, cuda_toolkit=cuda_toolkit, mirror=mirror, as_json=as_json, data_dir=data_dir)


@app.command("check")
def check(
    requirement_file: Optional[Path] = typer.Option(None, "-r", "--requirement", help="A requirements file to check."),
    env: List[Path] = EnvOpt, driver: Optional[str] = DriverOpt, gpu: List[str] = GpuOpt,
    python: Optional[str] = PythonOpt, platform: Optional[str] = PlatformOpt,
    cuda_toolkit: Optional[str] = ToolkitOpt, mirror: Optional[str] = MirrorOpt, as_json: bool = JsonOpt,
    data_dir: Optional[Path] = DataOpt,
) -> None:
    """Gate a Docker build: exit 0 if the requirements (or what is installed) fit the target, 1 if not."""
    run_check(requirement_file=requirement_file, env=env, driver=driver, gpu=gpu, python=python, platform=platform,
              cuda_toolkit=cuda_toolkit, mirror=mirror, as_json=as_json, data_dir=data_dir)


@app.command("env")
def env(
    shell: str = typer.Option("bash", "--shell", help="bash | fish | powershell"),
    env: List[Path] = EnvOpt,
    python: Optional[str] = typer.Option(None, "--python", help="Inspect the interpreter at this path."),
    as_json: bool = JsonOpt,
) -> None:
    """Print the exports that fix library paths for this environment (nothing when nothing needs fixing)."""
    run_env(shell=shell, env=env, python=python, as_json=as_json)


@app.command("detect")
def detect(
    as_json: bool = typer.Option(False, "--json", help="Print the JSON envelope (data.environment)."),
    python: Optional[str] = typer.Option(None, "--python", help="Inspect the Python environment of this interpreter."),
    reports: Optional[List[str]] = typer.Option(None, "--from", help="Read pasted tool output from FILE (- for stdin); repeatable."),
    env_file: Optional[str] = typer.Option(None, "--env", help="Read a saved `detect --json` file and print it again."),
    timeout: float = typer.Option(5.0, "--timeout", help="Seconds allowed to each probe's subprocess."),
) -> None:
    """Detect driver, GPUs, CUDA libraries, toolkits, frameworks and context. Exit 0; 2 on bad input."""
    run_detect(as_json=as_json, python=python, reports=reports, env_file=env_file, timeout=timeout)


@app.command("doctor")
def doctor(
    env: List[Path] = typer.Option([], "--env", help="A saved `detect --json`."),
    from_: List[str] = typer.Option([], "--from", help="Pasted tool outputs (nvidia-smi, collect_env, ldconfig -p, pip freeze...); '-' for stdin."),
    python: Optional[str] = typer.Option(None, "--python", help="Inspect the interpreter at this path."),
    as_json: bool = JsonOpt,
    data_dir: Optional[Path] = typer.Option(None, "--data", hidden=True),
) -> None:
    """Detect and diagnose: findings with a code, severity, evidence and fix. Exit 1 on errors."""
    run_doctor(env=env, from_=from_, python=python, as_json=as_json, data_dir=data_dir)


@app.command("fix")
def fix(
    requirements: List[str] = typer.Argument(None, help="PEP 508 requirements (default: the frameworks installed)."),
    python: Optional[str] = typer.Option(None, "--python", help="Fix the interpreter at this path."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan and change nothing."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask before installing."),
    mirror: Optional[str] = typer.Option(None, "--mirror", help="Replace the https://download.pytorch.org/whl "
                                                                "prefix of framework index URLs (a mirror)."),
    allow_http: bool = typer.Option(False, "--allow-http", help="Allow plain-http index URLs (trusted networks)."),
    installer: Optional[str] = typer.Option(None, "--installer", help="uv | pip (default: uv when on PATH)."),
    write_activation: bool = typer.Option(False, "--write-activation",
                                          help="Write the library-path changes as a shell snippet beside the environment."),
    no_verify: bool = typer.Option(False, "--no-verify", help="Skip the GPU verification."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Verify again even if the environment is unchanged."),
    framework: str = typer.Option("all", "--framework", help="torch | tensorflow | jax | all (verification)."),
    timeout: float = typer.Option(300.0, "--timeout", help="Seconds the verification may take."),
    driver: Optional[str] = typer.Option(None, "--driver", help="Solve for this driver version instead of the detected one."),
    gpu: List[str] = typer.Option([], "--gpu", help="Solve for this GPU (name, sm_XX or X.Y; repeatable)."),
    as_json: bool = JsonOpt,
    data_dir: Optional[str] = typer.Option(None, "--data", hidden=True),
    resume: bool = typer.Option(False, "--resume", help="Finish a change a killed run left in its journal."),
    rollback: bool = typer.Option(False, "--rollback", help="Undo a change a killed run left in its journal "
                                                            "(from saved wheels, no network)."),
) -> None:
    """Make this environment consistent: install the solved set (minimal change), then verify on the GPU."""
    run_fix(requirements=requirements, python=python, dry_run=dry_run, yes=yes, mirror=mirror, allow_http=allow_http,
            installer=installer, write_activation=write_activation, no_verify=no_verify, no_cache=no_cache,
            framework=framework, timeout=timeout, driver=driver, gpu=gpu, as_json=as_json, data_dir=data_dir,
            resume=resume, rollback=rollback)


@app.command("verify")
def verify(
    framework: str = typer.Option("all", "--framework", help="torch | tensorflow | jax | all"),
    python: Optional[str] = typer.Option(None, "--python", help="Verify the interpreter at this path."),
    timeout: float = typer.Option(300.0, "--timeout", help="Seconds each framework's check may take."),
    as_json: bool = JsonOpt,
) -> None:
    """Prove the GPU stack: a cuDNN convolution and a matmul on the GPU against the CPU, in a child process.
    Exit 0 verified, 5 failed, 6 not possible here (no GPU; the CPU path is still checked)."""
    run_verify(framework=framework, python=python, timeout=timeout, as_json=as_json)
