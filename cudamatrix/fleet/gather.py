"""Gather every node's Environment: one ``detect`` per node, through Ray or Slurm, and the fleet index.

Ray: one task per alive node, pinned to it with hard node affinity (``soft=False``: a task that cannot
run there fails rather than running elsewhere), executed by that node's worker, so with that node's
Python. Slurm: ``srun --ntasks-per-node=1 --label cudamatrix detect --json``, one task per node, each
line of output prefixed by its task number. ``cudamatrix`` must be installed on every node.
Ray is imported only here, and only by :func:`gather_ray`. No printing: progress goes to a callback.
"""
from __future__ import annotations

import re
import shutil
import time
from collections import Counter
from itertools import count
from pathlib import Path
from typing import Any, Callable

from cudamatrix import proc
from cudamatrix.detect import detect
from cudamatrix.errors import CudamatrixError, UsageError
from cudamatrix.fleet.classes import group
from cudamatrix.fleet.nodes import FLEET_INDEX
from cudamatrix.models import Environment
from cudamatrix.safe.files import parse_json, write_atomic
from cudamatrix.schema import field, record, to_dict, validate

Progress = Callable[[int, int, str, str], None]  # (done, total, node, "ok" | error message)
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


@record
class Node:
    """One node's answer: its Environment, or why there is none."""

    name: str  # the file stem: the hostname, made unique with the engine's node id where hostnames repeat
    hostname: str | None
    engine_id: str | None = None  # Ray node id, Slurm task number
    environment: Environment | None = None
    error: str | None = None
    python: str | None = None  # the interpreter that ran detect there


@record
class Gathered:
    engine: str
    nodes: list[Node] = field(default_factory=list)
    seconds: float = 0.0


def _detect_on_node() -> dict:
    """The Ray task body: detect on the node this runs on, with this worker's Python. Returns a plain dict
    (an error as ``{"error": ...}``) so that the driver needs nothing but JSON-ready values."""
    import socket
    import sys

    out: dict[str, Any] = {"hostname": socket.gethostname(), "python": sys.executable}
    try:
        # Ray leaves CUDA_VISIBLE_DEVICES alone for a task that asks no GPU (ray-project/ray#54868), so the
        # node's own setting reaches detect; the task asks none so that it never waits for a busy GPU
        out["environment"] = detect().to_dict()
    except CudamatrixError as exc:
        out["error"] = exc.message
    return out


def _unique_names(hosts: list[tuple[str | None, str]]) -> list[str]:
    """File stems from (hostname, engine id): the hostname where it is unique, else hostname-id."""
    counts = Counter(host for host, _ in hosts)  # read for a hostname only, never for None or ""
    names = []
    for host, ident in hosts:
        base = _SAFE.sub("_", host or "node").strip("._") or "node"
        base = "fleet-node" if base == "fleet" else base  # fleet.json is the index
        names.append(base if host and counts[host] == 1 else f"{base}-{_SAFE.sub('_', ident)[:12]}")
    return names


def gather_ray(address: str | None = None, timeout: float = 300.0, progress: Progress | None = None) -> Gathered:
    """Run detect once on every alive node of the Ray cluster at ``address`` (default: ``RAY_ADDRESS`` or the
    cluster started on this machine; never a new one). Raises UsageError when Ray is missing or unreachable."""
    try:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    except ImportError:
        raise UsageError("Ray is not installed: `fleet gather --engine ray` needs it",
                         hint="pip install ray (or the `ray` extra of cudamatrix), the version the cluster runs") \
            from None
    start = time.monotonic()
    _connect(ray, address, min(timeout, CONNECT_TIMEOUT))
    try:
        alive = [n for n in ray.nodes() if n.get("Alive")]
        names = _unique_names([(n.get("NodeManagerHostname"), n["NodeID"]) for n in alive])
        task = ray.remote(num_cpus=0, num_gpus=0, max_retries=0)(_detect_on_node)
        refs = {}
        for i, info in enumerate(alive):  # a name per alive node
            strategy = NodeAffinitySchedulingStrategy(node_id=info["NodeID"], soft=False)
            refs[task.options(scheduling_strategy=strategy).remote()] = Node(
                names[i], info.get("NodeManagerHostname"), info["NodeID"])
        gathered = Gathered("ray")
        pending = list(refs)
        while pending:
            left = timeout - (time.monotonic() - start)
            ready, pending = ray.wait(pending, num_returns=1, timeout=max(left, 0))
            if not ready:
                break
            node = refs[ready[0]]
            try:
                _fill(node, ray.get(ready[0]))
            except Exception as exc:  # a task that died (node lost, worker crash): that node's answer
                node.error = f"the Ray task failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
            gathered.nodes.append(node)
            if progress:
                progress(len(gathered.nodes), len(refs), node.name, node.error or "ok")
        for ref in pending:
            node = refs[ref]
            node.error = f"no answer within {timeout:g}s"
            ray.cancel(ref, force=True)
            gathered.nodes.append(node)
            if progress:
                progress(len(gathered.nodes), len(refs), node.name, node.error)
    finally:
        ray.shutdown()
    gathered.seconds = time.monotonic() - start
    return gathered


CONNECT_TIMEOUT = 30.0


def _connect(ray, address: str | None, timeout: float) -> None:
    """``ray.init`` to an existing cluster, bounded: Ray retries an unreachable address for minutes, so the
    call runs in a helper thread and a cluster that does not answer in time is a UsageError."""
    import threading

    box: dict = {}

    def init() -> None:
        try:
            # connecting only (an address, or "auto": never a new cluster), so ray.init's include_dashboard is
            # never read, and its logging_level is "ignored unless configure_logging is true" (its docstring)
            ray.init(address=address or "auto", log_to_driver=False, configure_logging=False)
        except Exception as exc:  # reported below, in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=init, daemon=True)
    thread.start()
    thread.join(timeout)
    hint = "start one (ray start --head) or give --address HOST:PORT (the head node's GCS port)"
    if thread.is_alive():
        raise UsageError(f"no Ray cluster answered at {address or 'auto'} within {timeout:g}s", hint=hint)
    if "error" in box:
        raise UsageError(f"cannot connect to a Ray cluster at {address or 'auto'}: {box['error']}", hint=hint)


def _fill(node: Node, answer: dict) -> None:
    node.python = answer.get("python")
    node.hostname = answer.get("hostname") or node.hostname
    if answer.get("error"):
        node.error = answer["error"]
        return
    try:
        node.environment = validate(Environment, answer["environment"], f"node {node.name}", UsageError)
    except UsageError as exc:
        node.error = exc.message


_LABEL = re.compile(r"^\s*(\d+): ?(.*)$")


def srun_argv(partition: str | None = None, nodes: int | None = None, srun: str = "srun") -> list[str]:
    """The srun command line: one task per node, each output line labelled with its task number."""
    argv = [srun, "--ntasks-per-node=1", "--label"]
    if partition:
        argv.append(f"--partition={partition}")
    if nodes is not None:
        argv.append(f"--nodes={nodes}")
    return argv + ["cudamatrix", "detect", "--json"]


GATHER_OUTPUT_BYTES = 256 * 1024 * 1024


def gather_slurm(partition: str | None = None, nodes: int | None = None, timeout: float = 300.0,
                 progress: Progress | None = None) -> Gathered:
    """Run ``cudamatrix detect --json`` once per node through srun. Raises UsageError when srun is missing,
    or when it fails without any task answering (the partition does not exist, no allocation)."""
    if nodes is not None and nodes < 1:
        raise UsageError("--nodes must be at least 1")
    srun = shutil.which("srun")
    if srun is None:
        raise UsageError("srun not found on PATH: `fleet gather --engine slurm` runs on a Slurm login node")
    argv = srun_argv(partition, nodes, srun)
    gathered = Gathered("slurm")
    answered = count(1)

    def on_line(line: str) -> None:
        m = _LABEL.match(line)
        if m and m.group(2) == "}" and progress:  # an envelope's last line: that task has answered
            progress(next(answered), nodes or 0, f"task {m.group(1)}", "ok")

    start = time.monotonic()
    # every node's envelope on one stdout: room for a few thousand nodes, still bounded
    result = proc.run(argv, timeout=timeout, on_output=on_line, max_output=GATHER_OUTPUT_BYTES)
    tasks: dict[str, list[str]] = {}
    for line in result.stdout.splitlines():
        m = _LABEL.match(line)
        if m:
            tasks.setdefault(m.group(1), []).append(m.group(2))
    if not tasks:
        why = result.error or (result.stderr.strip().splitlines() or [f"exit status {result.returncode}"])[-1]
        raise UsageError(f"srun gave no node's answer: {why}", hint=" ".join(argv))
    answers = []
    for task, lines in sorted(tasks.items(), key=lambda kv: int(kv[0])):
        answers.append((task, _parse_envelope("\n".join(lines), f"slurm task {task}")))
    names = _unique_names([(env.hostname if env else None, f"task{task}") for task, (env, _) in answers])
    for i, (task, (env, error)) in enumerate(answers):  # a name per answer
        gathered.nodes.append(Node(names[i], env.hostname if env else None, task, env, error))
    if result.timed_out:
        gathered.nodes.append(Node("srun", None, None, None, f"srun {result.error}; later nodes did not answer"))
    gathered.seconds = time.monotonic() - start
    return gathered


def _parse_envelope(text: str, where: str) -> tuple[Environment | None, str | None]:
    try:
        doc = parse_json(text)
        if doc.get("exit_code") != 0:
            errors = doc.get("errors") or [{}]
            return None, f"detect failed there: {errors[0].get('message', doc.get('status'))}"
        return validate(Environment, doc["data"]["environment"], where, UsageError), None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return None, f"{where}: not a `detect --json` envelope ({type(exc).__name__}: {exc})"
    except UsageError as exc:
        return None, exc.message


def write_fleet(gathered: Gathered, out: Path) -> dict:
    """Write ``out/<node>.json`` (each a ``detect --json`` environment) and ``out/fleet.json`` (the nodes,
    their hostnames and classes, and the nodes that failed). Returns the fleet index. Raises UsageError when
    ``out`` cannot be written."""
    import json

    ok = [n for n in gathered.nodes if n.environment is not None]
    classes = group([(n.name, n.environment) for n in ok if n.environment is not None])
    class_of = {name: c.id for c in classes for name in c.nodes}
    index = {
        "schema_version": 1,
        "engine": gathered.engine,
        "gathered_at": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
        "seconds": round(gathered.seconds, 2),
        "nodes": [{"node": n.name, "file": f"{n.name}.json", "hostname": n.hostname, "engine_id": n.engine_id,
                   "python": n.python, "class": class_of[n.name]} for n in ok],
        "failed": [{"node": n.name, "hostname": n.hostname, "engine_id": n.engine_id, "error": n.error}
                   for n in gathered.nodes if n.environment is None],
        "classes": [c.to_dict() for c in classes],
    }
    try:
        out.mkdir(parents=True, exist_ok=True)
        for n in ok:
            _write(out / f"{n.name}.json", json.dumps(to_dict(n.environment), indent=2) + "\n")
        _write(out / FLEET_INDEX, json.dumps(index, indent=2) + "\n")
    except OSError as exc:
        raise UsageError(f"{out}: cannot be written ({exc.strerror or exc})") from None
    return index


def _write(path: Path, text: str) -> None:
    """Through the one safe writer: an exclusive temporary file (no planted link followed), renamed over
    ``path``; a link at ``path`` itself is replaced, never written through (fleet folders are shared)."""
    write_atomic(path, text, follow_links=False)
