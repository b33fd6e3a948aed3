"""The Targets of a fleet's nodes (:func:`cudamatrix.fleet.nodes.load_nodes` reads them): apart from the node reader,
so that reading saved environments (doctor --env) does not load the solver's target model."""
from __future__ import annotations

from typing import TYPE_CHECKING

from cudamatrix.fleet.nodes import clone
from cudamatrix.solve import target

if TYPE_CHECKING:
    from cudamatrix.matrix.data import Matrix
    from cudamatrix.models import Environment
    from cudamatrix.solve.target import Target


def node_targets(matrix: Matrix, envs: list[Environment], same: list[int], names: list[str]) -> list[Target]:
    """The Targets of the nodes :func:`load_nodes` read: made once per first file alike, named per node, with
    the node's own driver version where it differs (a Target reads a stated driver version as its driver and
    nothing more; a node whose driver version or its first file's is not stated gets its own Target)."""
    targets: list[Target] = []
    for env, first, name in zip(envs, same, names, strict=True):
        if first == len(targets):
            targets.append(target.from_environment(env, matrix, name=name))
            continue
        driver, theirs = env.driver.version, envs[first].driver.version
        if driver == theirs:  # the Target's own driver: the version, or one read from the CUDA it runs
            targets.append(_renamed(targets[first], name, targets[first].driver))
        elif driver is not None and theirs is not None:
            targets.append(_renamed(targets[first], name, driver))
        else:
            targets.append(target.from_environment(env, matrix, name=name))
    return targets


def _renamed(target: Target, name: str, driver: str | None) -> Target:
    """``replace(target, name=name, driver=driver)`` without going through ``__init__`` (a fleet makes thousands;
    every other field is the first node's, already made)."""
    new = clone(target)
    object.__setattr__(new, "name", name)  # a frozen record: set once, on a copy no one else holds yet
    object.__setattr__(new, "driver", driver)
    return new
