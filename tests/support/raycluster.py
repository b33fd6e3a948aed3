"""A real Ray cluster on this machine for the in-process tests of ``fleet gather --engine ray``
(tests/fleet/test_gather.py): each node a real GCS/raylet started by ``ray.cluster_utils.Cluster``, answering
``detect`` for a saved machine (its raylet's CUDAMATRIX_DETECT_ENV, which its workers inherit):

- ``head``: the H200 lent to the project (tests/data/gpu_h200/detect.json), one CPU;
- ``busy``: the H100 lent to the project (tests/data/gpu_speed), no CPU free (a gather task asks none);
- ``refused``: a node file detect refuses (an unknown key), so its answer is detect's error;
- ``gone``: started, then stopped: listed by Ray as a dead node;
- ``hung`` and ``dies``: no saved machine, so their detect probes this one live and, NVML absent here, runs the
  ``nvidia-smi`` first on its raylet's PATH: a stand-in that replays a real table (tests/data), or, once armed by a
  test (a file ``armed`` beside it), freezes the worker that runs detect (``kill -STOP``: a process stuck in a
  hung driver, which no limit of detect's own can end) on ``hung``, kills it (``kill -9``, as the OOM killer
  does) on ``dies``.

Ray binds a local cluster to the host's own address, so nothing leaves the machine. Starting it takes 10 to 20 s
here. A mutation run starts a pytest session per mutant, so it may start the cluster once and name it in
``CUDAMATRIX_TEST_RAY`` (the JSON file this script writes once every node is up), and stop it afterwards:

    python tests/support/raycluster.py CLUSTER.json &
    CUDAMATRIX_TEST_RAY=CLUSTER.json bash scripts/mutation.sh --module cudamatrix/fleet/gather.py ...
    kill %1    # SIGTERM: every node it started is stopped
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

DATA = Path(__file__).parent.parent / "data"
NODES = {"head": DATA / "gpu_h200" / "detect.json",
         "busy": DATA / "gpu_speed" / "h100-2026-11-27e" / "detect.json"}
ARGS = {"num_cpus": 1, "object_store_memory": 80 * 1024 * 1024, "include_dashboard": False}
SMI = """#!/bin/sh
here=$(dirname "$0")
if rm "$here/armed" 2>/dev/null; then
ARMED
fi
case "$1" in --query-gpu=*) exit 6 ;; *) cat "$here/table.txt" ;; esac
"""
ARMED = {  # what an armed stand-in does to the worker that runs it ($PPID), once (the file is removed)
    # frozen, as a process stuck in a hung driver is (detect's own limits cannot end it); the pid is written for
    # the test, and the worker woken after a minute if nothing killed it
    "hung": 'echo "$PPID" > "$here/worker"; (sleep 60; kill -CONT "$PPID") >/dev/null 2>&1 & kill -STOP "$PPID"',
    "dies": 'kill -9 "$PPID"; exit 137',  # killed, as the OOM killer does
}
TABLE = DATA / "nvidia-smi" / "580.65.06_rtx5090.txt"  # first line: its public source


@contextlib.contextmanager
def started(nodes: list[tuple[Path | dict[str, str | None], dict]]):
    """A Cluster of these nodes, the first its head: each ``(the saved environment its detect answers with, or the
    environment variables its raylet starts with (None: unset), its Cluster node arguments)``; yields
    ``(cluster, [node, ...])``. Every Ray process it started is stopped afterwards, also when the caller fails, and
    the environment variables it set are put back."""
    from ray.cluster_utils import Cluster

    own = [{"CUDAMATRIX_DETECT_ENV": str(env)} if isinstance(env, Path) else env for env, _ in nodes]
    keys = {k for env in own for k in env}
    saved = {k: os.environ.get(k) for k in keys | {"RAY_USAGE_STATS_ENABLED"}}
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    made = None
    try:
        handles = []
        for env, (_, args) in zip(own, nodes, strict=True):
            _put({**{k: saved[k] for k in keys}, **env})  # a raylet's workers inherit its environment
            if made is None:
                made = Cluster(initialize_head=True, head_node_args=args)
                handles.append(made.head_node)
            else:
                handles.append(made.add_node(**args))
        made.wait_for_nodes()
        yield made, handles
    finally:
        _put(saved)
        if made is not None:
            every = made.list_all_nodes()
            made.shutdown()  # kills each node's processes and waits for them
            assert not [p for n in every for p in n.live_processes()]


def _put(values: dict[str, str | None]) -> None:
    """Set these environment variables (None: unset)."""
    for key, value in values.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _stand_in(folder: Path, kind: str) -> dict[str, str | None]:
    """The environment of a node that probes this machine live with the ``kind`` stand-in nvidia-smi first on PATH."""
    folder.mkdir()
    (folder / "nvidia-smi").write_text(SMI.replace("ARMED", ARMED[kind]))
    (folder / "nvidia-smi").chmod(0o755)
    (folder / "table.txt").write_text(TABLE.read_text().partition("\n")[2])
    return {"CUDAMATRIX_DETECT_ENV": None, "PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', os.defpath)}"}


@contextlib.contextmanager
def cluster(folder: Path) -> Iterator[dict]:
    """The cluster, as ``{"address": ..., "nodes": {node id: kind}, "refused": the refused node file, "python": its
    workers' interpreter}``."""
    refused = folder / "refused.json"
    refused.write_text(json.dumps({"drivers": {}}))
    nodes = [(NODES["head"], ARGS), (NODES["busy"], {**ARGS, "num_cpus": 0}), (refused, ARGS),
             (_stand_in(folder / "hung", "hung"), ARGS), (_stand_in(folder / "dies", "dies"), ARGS), (refused, ARGS)]
    with started(nodes) as (made, handles):
        gone = handles.pop()
        made.remove_node(gone)
        made.wait_for_nodes()  # until Ray counts it dead
        kinds = {h.node_id: kind for h, kind in zip(handles, ("head", "busy", "refused", "hung", "dies"), strict=True)}
        yield {"address": made.address, "nodes": kinds, "gone": gone.node_id, "refused": str(refused),
               "python": sys.executable,  # the interpreter of every node's workers
               "armed": {kind: str(folder / kind / "armed") for kind in ARMED}, "worker": str(folder / "hung" / "worker")}


def main(out: str) -> None:
    """Start the cluster, write its description to ``out``, and keep it until SIGTERM or SIGINT."""
    import tempfile

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with tempfile.TemporaryDirectory() as folder, cluster(Path(folder)) as made:
        Path(out).write_text(json.dumps(made))
        try:
            signal.pause()
        except (SystemExit, KeyboardInterrupt):
            pass
        finally:
            Path(out).unlink(missing_ok=True)


if __name__ == "__main__":
    main(sys.argv[1])
