"""A real Ray cluster on this machine for the in-process tests of ``fleet gather --engine ray``
(tests/fleet/test_gather.py): each node a real GCS/raylet started by ``ray.cluster_utils.Cluster``, answering
``detect`` for a saved machine (its raylet's CUDAMATRIX_DETECT_ENV, which its workers inherit):

- ``head``: the H200 lent to the project (tests/data/gpu_h200/detect.json), one CPU;
- ``busy``: the H100 lent to the project (tests/data/gpu_speed), no CPU free (a gather task asks none);
- ``refused``: a node file detect refuses (an unknown key), so its answer is detect's error;
- ``gone``: started, then stopped: listed by Ray as a dead node.

Ray binds a local cluster to the host's own address, so nothing leaves the machine. Starting it takes 10 to 20 s
here. A mutation run starts a pytest session per mutant, so it may start the cluster once and name it in
``CUDAMATRIX_TEST_RAY`` (the JSON file this script writes once every node is up), and stop it afterwards:

    python tests/raycluster.py CLUSTER.json &
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

DATA = Path(__file__).parent / "data"
NODES = {"head": DATA / "gpu_h200" / "detect.json",
         "busy": DATA / "gpu_speed" / "h100-2026-11-27e" / "detect.json"}
ARGS = {"num_cpus": 1, "object_store_memory": 80 * 1024 * 1024, "include_dashboard": False}


@contextlib.contextmanager
def started(nodes: list[tuple[Path, dict]]):
    """A Cluster of these nodes, the first its head: each ``(the saved environment its detect answers with, its
    Cluster node arguments)``; yields ``(cluster, [node, ...])``. Every Ray process it started is stopped afterwards,
    also when the caller fails, and the environment variables it set are put back."""
    from ray.cluster_utils import Cluster

    saved = {k: os.environ.get(k) for k in ("CUDAMATRIX_DETECT_ENV", "RAY_USAGE_STATS_ENABLED")}
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    made = None
    try:
        # a raylet's workers inherit its environment: the variable is set before each node starts
        os.environ["CUDAMATRIX_DETECT_ENV"] = str(nodes[0][0])
        made = Cluster(initialize_head=True, head_node_args=nodes[0][1])
        handles = [made.head_node]
        for path, args in nodes[1:]:
            os.environ["CUDAMATRIX_DETECT_ENV"] = str(path)
            handles.append(made.add_node(**args))
        made.wait_for_nodes()
        yield made, handles
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if made is not None:
            every = made.list_all_nodes()
            made.shutdown()  # kills each node's processes and waits for them
            assert not [p for n in every for p in n.live_processes()]


@contextlib.contextmanager
def cluster(folder: Path) -> Iterator[dict]:
    """The cluster, as ``{"address": ..., "nodes": {node id: kind}, "refused": the refused node file, "python": its
    workers' interpreter}``."""
    refused = folder / "refused.json"
    refused.write_text(json.dumps({"drivers": {}}))
    nodes = [(NODES["head"], ARGS), (NODES["busy"], {**ARGS, "num_cpus": 0}), (refused, ARGS), (refused, ARGS)]
    with started(nodes) as (made, handles):
        gone = handles.pop()
        made.remove_node(gone)
        made.wait_for_nodes()  # until Ray counts it dead
        kinds = {h.node_id: kind for h, kind in zip(handles, ("head", "busy", "refused"), strict=True)}
        yield {"address": made.address, "nodes": kinds, "gone": gone.node_id, "refused": str(refused),
               "python": sys.executable}  # the interpreter of every node's workers


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
