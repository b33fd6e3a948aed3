"""Typer declarations of the commands whose bodies live in typer-free modules (detect, doctor, solve, lock,
check, env, fix, verify), so that :mod:`cudamatrix.cli.fast` can run plain invocations without typer.

Flags, help and defaults are declared once, in :mod:`cudamatrix.cli.options`; the signatures below only
give typer the parameter types."""
from __future__ import annotations

from pathlib import Path
from typing import Any, List, Optional

import typer

from cudamatrix.cli.app import app
from cudamatrix.cli.check_cmd import run_check
from cudamatrix.cli.detect_cmd import run_detect
from cudamatrix.cli.doctor_cmd import run_doctor
from cudamatrix.cli.env_cmd import run_env
from cudamatrix.cli.fix_cmd import run_fix, run_verify
from cudamatrix.cli.fleet_cmd import run_gather
from cudamatrix.cli.lock_cmd import run_lock
from cudamatrix.cli.options import COMMANDS
from cudamatrix.cli.solve_cmd import run_solve


def _o(command: str, param: str) -> Any:
    """The typer option for ``param`` of ``command``, from the one declaration in the options table."""
    o = COMMANDS[command].option(param)
    default = list(o.default) if isinstance(o.default, list) else o.default
    return typer.Option(default, *o.flags, help=o.help or None, hidden=o.hidden, metavar=o.shown_metavar())


def _a(command: str) -> Any:
    arg = COMMANDS[command].positional
    assert arg is not None
    return typer.Argument(None, help=arg.help, metavar=arg.metavar)


@app.command("solve")
def solve(
    requirements: List[str] = _a("solve"),
    env: List[Path] = _o("solve", "env"), from_: List[str] = _o("solve", "from_"),
    driver: Optional[str] = _o("solve", "driver"),
    gpu: List[str] = _o("solve", "gpu"), python: Optional[str] = _o("solve", "python"),
    platform: Optional[str] = _o("solve", "platform"), cuda_toolkit: Optional[str] = _o("solve", "cuda_toolkit"),
    explain: bool = _o("solve", "explain"), mirror: Optional[str] = _o("solve", "mirror"),
    as_json: bool = _o("solve", "as_json"), data_dir: Optional[Path] = _o("solve", "data_dir"),
) -> None:
    """The consistent set for the target: exact versions, variant, index, CUDA/cuDNN, the pip command."""
    run_solve(requirements=requirements, env=env, from_=from_, driver=driver, gpu=gpu, python=python, platform=platform,
              cuda_toolkit=cuda_toolkit, explain=explain, mirror=mirror, as_json=as_json, data_dir=data_dir)


@app.command("lock")
def lock(
    requirements: List[str] = _a("lock"),
    output: Optional[Path] = _o("lock", "output"), fmt: str = _o("lock", "fmt"),
    env: List[Path] = _o("lock", "env"), from_: List[str] = _o("lock", "from_"),
    driver: Optional[str] = _o("lock", "driver"),
    gpu: List[str] = _o("lock", "gpu"), python: Optional[str] = _o("lock", "python"),
    platform: Optional[str] = _o("lock", "platform"), cuda_toolkit: Optional[str] = _o("lock", "cuda_toolkit"),
    mirror: Optional[str] = _o("lock", "mirror"), as_json: bool = _o("lock", "as_json"),
    data_dir: Optional[Path] = _o("lock", "data_dir"), per_class: bool = _o("lock", "per_class"),
    pins_only: bool = _o("lock", "pins_only"), glibc: Optional[str] = _o("lock", "glibc"),
    allow_local: bool = _o("lock", "allow_local"),
) -> None:
    """The complete, hashed set for the target: a requirements file or pylock.toml (or uv project settings)."""
    run_lock(requirements=requirements, output=output, fmt=fmt, env=env, from_=from_, driver=driver, gpu=gpu, python=python,
             platform=platform, cuda_toolkit=cuda_toolkit, mirror=mirror, as_json=as_json, data_dir=data_dir,
             per_class=per_class, pins_only=pins_only, glibc=glibc, allow_local=allow_local)


@app.command("check")
def check(
    requirement_file: Optional[Path] = _o("check", "requirement_file"),
    env: List[Path] = _o("check", "env"), from_: List[str] = _o("check", "from_"),
    driver: Optional[str] = _o("check", "driver"),
    gpu: List[str] = _o("check", "gpu"), python: Optional[str] = _o("check", "python"),
    platform: Optional[str] = _o("check", "platform"), cuda_toolkit: Optional[str] = _o("check", "cuda_toolkit"),
    mirror: Optional[str] = _o("check", "mirror"), as_json: bool = _o("check", "as_json"),
    data_dir: Optional[Path] = _o("check", "data_dir"),
) -> None:
    """Gate a Docker build: exit 0 if the requirements (or what is installed) fit the target, 1 if not."""
    run_check(requirement_file=requirement_file, env=env, from_=from_, driver=driver, gpu=gpu, python=python, platform=platform,
              cuda_toolkit=cuda_toolkit, mirror=mirror, as_json=as_json, data_dir=data_dir)


@app.command("env")
def env(
    shell: str = _o("env", "shell"), env: List[Path] = _o("env", "env"),
    python: Optional[str] = _o("env", "python"), as_json: bool = _o("env", "as_json"),
) -> None:
    """Print the exports that fix library paths for this environment (nothing when nothing needs fixing)."""
    run_env(shell=shell, env=env, python=python, as_json=as_json)


@app.command("detect")
def detect(
    as_json: bool = _o("detect", "as_json"), python: Optional[str] = _o("detect", "python"),
    reports: Optional[List[str]] = _o("detect", "reports"), env_file: Optional[str] = _o("detect", "env_file"),
    timeout: float = _o("detect", "timeout"), all_copies: bool = _o("detect", "all_copies"),
) -> None:
    """Detect driver, GPUs, CUDA libraries, toolkits, frameworks and context. Exit 0; 2 on bad input."""
    run_detect(as_json=as_json, python=python, reports=reports, env_file=env_file, timeout=timeout,
               all_copies=all_copies)


@app.command("doctor")
def doctor(
    env: List[Path] = _o("doctor", "env"), from_: List[str] = _o("doctor", "from_"),
    python: Optional[str] = _o("doctor", "python"), as_json: bool = _o("doctor", "as_json"),
    data_dir: Optional[Path] = _o("doctor", "data_dir"), all_copies: bool = _o("doctor", "all_copies"),
) -> None:
    """Detect and diagnose: findings with a code, severity, evidence and fix. Exit 1 on errors."""
    run_doctor(env=env, from_=from_, python=python, as_json=as_json, data_dir=data_dir, all_copies=all_copies)


@app.command("fix")
def fix(
    requirements: List[str] = _a("fix"),
    python: Optional[str] = _o("fix", "python"), dry_run: bool = _o("fix", "dry_run"),
    from_: List[str] = _o("fix", "from_"), yes: bool = _o("fix", "yes"),
    mirror: Optional[str] = _o("fix", "mirror"), allow_http: bool = _o("fix", "allow_http"),
    installer: Optional[str] = _o("fix", "installer"), write_activation: bool = _o("fix", "write_activation"),
    no_verify: bool = _o("fix", "no_verify"), no_cache: bool = _o("fix", "no_cache"),
    framework: str = _o("fix", "framework"), timeout: float = _o("fix", "timeout"),
    driver: Optional[str] = _o("fix", "driver"), gpu: List[str] = _o("fix", "gpu"),
    as_json: bool = _o("fix", "as_json"), data_dir: Optional[str] = _o("fix", "data_dir"),
    resume: bool = _o("fix", "resume"), rollback: bool = _o("fix", "rollback"), undo: bool = _o("fix", "undo"),
) -> None:
    """Make this environment consistent: install the solved set (minimal change), then verify on the GPU."""
    run_fix(requirements=requirements, python=python, dry_run=dry_run, from_=from_, yes=yes, mirror=mirror, allow_http=allow_http,
            installer=installer, write_activation=write_activation, no_verify=no_verify, no_cache=no_cache,
            framework=framework, timeout=timeout, driver=driver, gpu=gpu, as_json=as_json, data_dir=data_dir,
            resume=resume, rollback=rollback, undo=undo)


@app.command("verify")
def verify(
    framework: str = _o("verify", "framework"), python: Optional[str] = _o("verify", "python"),
    timeout: float = _o("verify", "timeout"), as_json: bool = _o("verify", "as_json"),
) -> None:
    """Prove the GPU stack: a cuDNN convolution and a matmul on the GPU against the CPU, in a child process.
    Exit 0 verified, 5 failed, 6 not possible here (no GPU; the CPU path is still checked)."""
    run_verify(framework=framework, python=python, timeout=timeout, as_json=as_json)


fleet_app = typer.Typer(help="Fleets: gather every node's environment through Ray or Slurm.", no_args_is_help=True)
app.add_typer(fleet_app, name="fleet")


@fleet_app.command("gather")
def fleet_gather(
    engine: str = typer.Option("ray", "--engine", help="ray | slurm", metavar="ENGINE"),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="The folder for NODE.json and fleet.json.",
                                          metavar="DIR"),
    address: Optional[str] = typer.Option(None, "--address", metavar="ADDRESS", help="Ray: the cluster address (default: RAY_ADDRESS "
                                                                  "or the cluster started on this machine)."),
    partition: Optional[str] = typer.Option(None, "--partition", help="Slurm: the partition.", metavar="NAME"),
    nodes: Optional[int] = typer.Option(None, "--nodes", help="Slurm: how many nodes.", metavar="N"),
    timeout: float = typer.Option(300.0, "--timeout", help="Seconds allowed to the whole gathering.",
                                   metavar="SECONDS"),
    as_json: bool = typer.Option(False, "--json", help="Print the JSON envelope."),
) -> None:
    """Run `detect` once on every node; write one file per node and fleet.json (nodes, hostnames, classes).
    Exit 1 when a node did not answer."""
    run_gather(engine=engine, output=output, address=address, partition=partition, nodes=nodes, timeout=timeout,
               as_json=as_json)
