"""Command-line options -> Environments and Targets: one home for doctor, solve, lock, check, env and fix.

The library's stages take values (:func:`cudamatrix.solve.target.from_flags` takes a driver, GPUs, a Python, a
platform); what to detect, read or load for a command's options is decided here.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from cudamatrix.errors import UsageError
from cudamatrix.fleet.nodes import env_paths, load_nodes, node_targets
from cudamatrix.matrix.data import Matrix
from cudamatrix.models import Environment
from cudamatrix.schema import record
from cudamatrix.solve.driverclass import PausedGc
from cudamatrix.solve.target import Target, from_environment, from_flags, target_record

_VERSIONISH = re.compile(r"^\d+(\.\d+){0,2}$")


@record
class Resolved:
    """The Targets to solve for, and the environments they came from."""

    targets: list[Target]
    installed: Environment | None  # the environment whose installed set counts (minimal change)
    environments: list[Environment]

    def records(self, matrix: Matrix) -> list[dict]:
        """The targets as the JSON ``targets[]`` (:func:`cudamatrix.solve.target.target_record`)."""
        return [target_record(matrix, t) for t in self.targets]


def split_python(value: str | None) -> tuple[str | None, str | None]:
    """--python takes a version (a target's Python) or a path (an interpreter to inspect)."""
    if value is None:
        return None, None
    if _VERSIONISH.match(value.strip()):
        return value.strip(), None
    return None, os.path.abspath(value) if value else value  # a path: relative to the current folder, as everywhere


def environments(env_files: list[Path], from_files: list[str], interpreter: str | None,
                 all_copies: bool = False) -> list[Environment]:
    """Saved, pasted or live environments. ``--env`` may name folders of node files (see :func:`env_paths`).
    Raises UsageError for contradictory options."""
    # lazy: `solve` would load 17 ms more (python -X importtime; the hoisting's budget per command is 3% of its run): cudamatrix.detect, cudamatrix.detect.libraries, cudamatrix.detect.smi
    from cudamatrix.detect import detect

    if env_files and from_files:
        raise UsageError("--env and --from cannot be combined",
                         hint="--env reads saved `detect --json` files; --from reads pasted tool outputs")
    if env_files:
        return load_nodes(env_paths(env_files))[0]
    if from_files:
        # lazy: the paste readers (17 ms, python -X importtime) only for --from: doctor and solve on this machine skip them
        from cudamatrix.pastes.reports import from_report_files

        return [from_report_files(from_files)]
    return [detect(python=interpreter, all_copies=all_copies)]


def resolve(matrix: Matrix, *, env_files: list[Path], from_files: list[str] | None = None,
            driver: str | None, gpus: list[str], python: str | None, platform: str | None,
            cuda_toolkit: str | None, need_installed: bool = False) -> Resolved:
    """Targets and the installed environment for a command's options.

    Flags alone describe a machine you are not on (a Dockerfile's target): nothing is detected here, unless
    ``--python PATH`` names an interpreter whose installed set counts or ``need_installed`` asks for the
    live one. With ``--env``, flags override the saved machine's facts.
    """
    py_version, interpreter = split_python(python)
    if env_files:
        env_files = env_paths(env_files)  # folders of node files count as their files
    flags = any([driver, gpus, py_version, platform, cuda_toolkit])
    if flags and len(env_files) > 1:
        raise UsageError("target flags (--driver/--gpu/--python/--platform) cannot be combined with several --env "
                         "files", hint="describe each machine in its own saved environment")
    if flags and not env_files and not from_files and interpreter is None and not need_installed:
        target = from_flags(matrix, driver=driver, gpus=gpus, python=py_version, platform=platform,
                            cuda_toolkit=cuda_toolkit, base=Target(name="target"))
        return Resolved([target], None, [])
    if env_files and not from_files:  # node files alike are validated once, and their Targets made once

        with PausedGc():  # a fleet's objects, made at once and kept (see PausedGc)
            envs, same = load_nodes(env_files)
            targets = node_targets(matrix, envs, same, [Path(p).stem for p in env_files])
            # this command's process ends after one answer: the fleet's objects, which live until then, are
            # set aside from the collector's later passes (each would walk them all again and free nothing)
            import gc

            gc.freeze()
    else:
        envs = environments(env_files, from_files or [], interpreter)
        targets = [from_environment(env, matrix, name="the pasted machine" if from_files else "this machine")
                   for env in envs]
    if flags:
        targets = [from_flags(matrix, driver=driver, gpus=gpus, python=py_version, platform=platform,
                              cuda_toolkit=cuda_toolkit, base=base) for base in targets]
    installed = envs[0] if len(envs) == 1 else None
    return Resolved(targets, installed, envs)
