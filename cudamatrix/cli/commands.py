"""Typer declarations of the hot commands (detect, doctor, fix, verify). Their bodies live in typer-free
modules so that :mod:`cudamatrix.cli.fast` can run plain invocations without importing typer."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from .app import app
from .detect_cmd import run_detect
from .doctor_cmd import run_doctor
from .fix_cmd import run_fix, run_verify

JsonOpt = typer.Option(False, "--json", help="Print the JSON envelope.")


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
) -> None:
    """Make this environment consistent: install the solved set (minimal change), then verify on the GPU."""
    run_fix(requirements=requirements, python=python, dry_run=dry_run, yes=yes, mirror=mirror, allow_http=allow_http,
            installer=installer, write_activation=write_activation, no_verify=no_verify, no_cache=no_cache,
            framework=framework, timeout=timeout, driver=driver, gpu=gpu, as_json=as_json, data_dir=data_dir)


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
