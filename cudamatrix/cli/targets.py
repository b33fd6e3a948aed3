"""Command-line options -> Environments and Targets: one home for doctor, solve, lock, check, env and fix.

The library's stages take values (:func:`cudamatrix.solve.target.from_flags` takes a driver, GPUs, a Python, a
platform); what to detect, read or load for a command's options is decided here.
"""
from __future__ import annotations

from pathlib import Path

from cudamatrix.cli.environments import environments, split_python
from cudamatrix.errors import UsageError
from cudamatrix.fleet.nodes import env_paths, load_nodes
from cudamatrix.fleet.nodetargets import node_targets
from cudamatrix.matrix.data import Matrix
from cudamatrix.models import Environment
from cudamatrix.proc import PausedGc
from cudamatrix.schema import record
from cudamatrix.solve.target import Target, from_environment, from_flags, target_record


@record
class Resolved:
    """The Targets to solve for, and the environments they came from."""

    targets: list[Target]
    installed: Environment | None  # the environment whose installed set counts (minimal change)
    environments: list[Environment]

    def records(self, matrix: Matrix) -> list[dict]:
        """The targets as the JSON ``targets[]`` (:func:`cudamatrix.solve.target.target_record`)."""
        return [target_record(matrix, t) for t in self.targets]


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
