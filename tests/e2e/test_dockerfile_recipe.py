"""The Dockerfile recipe of docs/locks-and-docker.md, run as docker would run its check stage, without docker: its WORKDIR, COPY and
RUN lines, read out of that page, in order, with bash, in a throwaway folder (the image's filesystem) and a
throwaway venv (the image's Python). cudamatrix is installed by the recipe's own RUN line from a wheel built from
this checkout; its dependencies come from a loopback index serving the distributions this interpreter has
installed (repacked from their files), so nothing is fetched from outside."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from support.fakes import run_cli
from support.localindex import LocalIndex, canonical, copy_venv, pip_env
from support.lockwheels import repack_installed

ROOT = Path(__file__).parent.resolve().parents[1]
pytestmark = pytest.mark.installs


def recipe() -> list[tuple[str, str]]:
    """(instruction, arguments) of the page's ```dockerfile block, continuation lines joined, comments out."""
    text = (ROOT / "docs" / "locks-and-docker.md").read_text()
    (block,) = re.findall(r"```dockerfile\n(.*?)```", text, re.S)
    lines = [line for line in block.replace("\\\n", " ").splitlines() if line.strip() and not line.startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def check_stage() -> list[tuple[str, str]]:
    steps = recipe()
    second = next(i for i, (op, _) in enumerate(steps) if op == "FROM" and i > 0)
    return steps[1:second]


def _closure(name: str) -> list[str]:
    """``name`` and what it requires here (markers evaluated for this interpreter, no extras)."""
    seen: list[str] = []
    todo = [name]
    while todo:
        dist = canonical(todo.pop())
        if dist in seen:
            continue
        seen.append(dist)
        for text in metadata.requires(dist) or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return seen


@pytest.fixture(scope="module")
def context(tmp_path_factory, template_venv):
    """The build context (a wheel of cudamatrix built from this checkout in wheels/) and an index of its
    dependencies."""
    tmp = tmp_path_factory.mktemp("docker")
    ctx = tmp / "context"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w",
                            str(ctx / "wheels"), str(ROOT)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr  # hatchling, the build backend, comes with the test extra
    deps = tmp / "deps"
    for dist in _closure("cudamatrix")[1:]:
        repack_installed(dist, deps)
    with LocalIndex(deps) as index:
        yield ctx, pip_env(f"{index.url}/simple", tmp / "cache")


def build(context, tmp_path, template_venv, requirements: str) -> subprocess.CompletedProcess | None:
    """Run the check stage against ``requirements``; the failing RUN line's result, or None when all passed."""
    ctx, env = context
    (ctx / "requirements.txt").write_text(requirements)
    image = tmp_path / "image"
    venv = copy_venv(template_venv, tmp_path / "python").parent.parent
    env = {**env, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}", "VIRTUAL_ENV": str(venv)}
    workdir = image
    for op, args in check_stage():
        if op == "WORKDIR":
            workdir = image / args.strip().lstrip("/")
            workdir.mkdir(parents=True, exist_ok=True)
        elif op == "COPY":
            src, dest = shlex.split(args)
            target = workdir / dest
            if (ctx / src).is_dir():
                shutil.copytree(ctx / src, target, dirs_exist_ok=True)
            else:
                shutil.copy(ctx / src, target if not dest.endswith("/") and dest != "." else target / Path(src).name)
        elif op == "RUN":
            done = subprocess.run(["bash", "-euo", "pipefail", "-c", args], cwd=workdir, env=env,
                                  capture_output=True, text=True, timeout=600)
            if done.returncode != 0:
                return done
        else:
            raise AssertionError(f"the check stage holds {op}, which this test does not emulate")
    return None


def test_the_recipe_has_a_check_stage_the_image_depends_on():
    steps = recipe()
    assert steps[0] == ("FROM", "python:3.12-slim AS check")
    runs = [args for op, args in check_stage() if op == "RUN"]
    assert any("pip install" in r and "wheels/cudamatrix-" in r for r in runs)
    (gate,) = [r for r in runs if r.startswith("cudamatrix check")]
    assert "-r requirements.txt" in gate and "--driver " in gate and "--gpu " in gate
    image = steps[len(check_stage()) + 1:]
    assert any(op == "COPY" and args.startswith("--from=check ") for op, args in image)
    assert any(op == "RUN" and "--require-hashes" in args for op, args in image)


def test_a_fitting_lock_passes_the_check_stage(context, tmp_path, template_venv):
    ctx, env = context
    gate = next(args for op, args in check_stage() if op == "RUN" and args.startswith("cudamatrix check"))
    target = shlex.split(gate.split("&&")[0])[4:]  # the recipe's --driver/--gpu/--python
    lock = run_cli(["lock", "torch==2.14.1", *target, "--pins-only"], env=dict(os.environ), text=True,
                   cwd=ROOT)  # in this process
    assert lock.returncode == 0, lock.stderr
    assert build(context, tmp_path, template_venv, lock.stdout) is None
    assert (tmp_path / "image" / "build" / "checked").is_file()
    installed = tmp_path / "python" / "bin" / "cudamatrix"
    assert installed.is_file()  # the recipe's pip line installed the wheel into the image's Python


def test_a_set_the_target_cannot_run_stops_the_build(context, tmp_path, template_venv):
    failed = build(context, tmp_path, template_venv, "tensorflow[and-cuda]==2.15.1\n")
    assert failed is not None and failed.returncode == 1, failed
    assert "does not fit" in failed.stdout and "not 3.12" in failed.stdout
    assert not (tmp_path / "image" / "build" / "checked").exists()
