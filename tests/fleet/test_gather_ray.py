"""A real Ray cluster on this machine, gathered and solved end to end through the command line.

Four nodes (a head and three workers, each a real GCS/raylet started by ``ray.cluster_utils.Cluster``, one
CPU and a small object store each) run on this machine. Ray binds a local cluster to the host's own address
rather than 127.0.0.1 (it resolves loopback names to that address), so nothing leaves the machine. Each
raylet starts with its own ``CUDAMATRIX_DETECT_ENV`` — a saved Environment of a machine from a public bug
report — which its workers inherit, so ``detect`` on each node answers for a different machine: two alike
H100 nodes, a K80 on driver 535 and an RTX 5090 on driver 570. No single torch build runs on both the K80
(sm_37) and the RTX 5090 (sm_120), so the lock is per class.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# the ray extra: .ci/run's main venv has it; the light Python 3.10 venv does not
pytest.importorskip("ray", reason="Ray is not installed here (the test extra installs it)")

SCENARIOS = Path(__file__).parent.parent / "scenarios"
NODES = [  # (scenario whose environment the node reports, what the node is)
    ("h100_driver580", "h100"),  # tests/data/environments/
    ("h100_driver580", "h100"),
    ("doctor_k80_on_driver_535", "k80"),
    ("doctor_rtx5090_cu124_no_kernel", "5090"),
]
NODE_ARGS = {"num_cpus": 1, "object_store_memory": 80 * 1024 * 1024, "include_dashboard": False}


def cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "CUDAMATRIX_DETECT_ENV"}
    return subprocess.run([sys.executable, "-m", "cudamatrix", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """(cluster, {node id: kind}); every Ray process is stopped afterwards, also when a test fails."""
    from support.raycluster import started

    folder = tmp_path_factory.mktemp("saved")
    files = []
    for scenario, kind in NODES:
        path = folder / f"{kind}-{len(files)}.json"
        own = Path(__file__).parent.parent / "data" / "environments" / f"{scenario}.json"
        env = json.loads(own.read_text()) if own.exists() else \
            json.loads((SCENARIOS / f"{scenario}.json").read_text())["environment"]
        path.write_text(json.dumps(env))
        files.append((path, kind))
    with started([(path, NODE_ARGS) for path, _ in files]) as (made, handles):
        yield made, {h.node_id: kind for h, (_, kind) in zip(handles, files, strict=True)}


@pytest.fixture(scope="module")
def gathered(cluster, tmp_path_factory):
    made, kinds = cluster
    out = tmp_path_factory.mktemp("fleet")
    run = cli("fleet", "gather", "--engine", "ray", "--address", made.address, "-o", str(out), "--json")
    return run, out, kinds


@pytest.mark.slow
def test_gather_writes_one_file_per_node_and_the_classes(gathered):
    run, out, kinds = gathered
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["command"] == "fleet gather" and doc["status"] == "ok"
    index = json.loads((out / "fleet.json").read_text())
    assert index["engine"] == "ray" and index["failed"] == []
    # one entry per Ray node, named by node, each answered by the node it was pinned to
    assert sorted(n["engine_id"] for n in index["nodes"]) == sorted(kinds)
    assert all(n["hostname"] and n["python"] for n in index["nodes"])
    expected = {"h100": ("580.65.06", "NVIDIA H100 80GB HBM3"), "k80": ("535.104.05", "Tesla K80"),
                "5090": ("570.124.04", "NVIDIA GeForce RTX 5090")}
    for node in index["nodes"]:
        env = json.loads((out / node["file"]).read_text())
        driver, gpu = expected[kinds[node["engine_id"]]]
        assert env["driver"]["version"] == driver and env["gpus"][0]["name"] == gpu
    # progress: one line per node on stderr
    assert run.stderr.count(": ok") == len(kinds)
    # classes: the two H100 nodes are one class; the K80 and the 5090 one each
    classes = {c["id"]: c for c in index["classes"]}
    assert sorted(len(c["nodes"]) for c in classes.values()) == [1, 1, 2]
    by_node = {n["node"]: n["class"] for n in index["nodes"]}
    h100 = [n["node"] for n in index["nodes"] if kinds[n["engine_id"]] == "h100"]
    assert by_node[h100[0]] == by_node[h100[1]] and sorted(classes[by_node[h100[0]]]["nodes"]) == sorted(h100)


@pytest.mark.slow
def test_solve_lock_check_and_doctor_over_the_gathered_folder(gathered, tmp_path):
    run, out, kinds = gathered
    assert run.returncode == 0, run.stderr
    index = json.loads((out / "fleet.json").read_text())
    kind_of = {n["node"]: kinds[n["engine_id"]] for n in index["nodes"]}
    class_kind = {n["class"]: kind_of[n["node"]] for n in index["nodes"]}

    # one image for all: no torch build covers both sm_37 and sm_120; the causes name the blocking nodes
    solved = cli("solve", "torch", "--env", str(out), "--json")
    assert solved.returncode == 3, solved.stderr
    blocked = {m for c in json.loads(solved.stdout)["data"]["causes"] for m in c["machines"]}
    assert blocked and {kind_of[m] for m in blocked} <= {"k80", "5090"}

    # one lock per class, the mapping, Ray's own validation of each runtime_env and label selector
    locks = tmp_path / "locks"
    locked = cli("lock", "torch", "--per-class", "--pins-only", "--env", str(out), "-o", str(locks), "--json")
    assert locked.returncode == 0, locked.stderr
    mapping = json.loads((locks / "locks.json").read_text())
    assert mapping["single"] is False and mapping["unsolved"] == []
    assert {c["id"] for c in mapping["classes"]} == set(class_kind)
    from ray._private.label_utils import validate_label_selector, validate_node_labels
    from ray.runtime_env import RuntimeEnv

    for cls in mapping["classes"]:
        assert (locks / cls["lock"]).is_file()
        RuntimeEnv(**cls["ray"]["runtime_env"])
        validate_node_labels(cls["ray"]["node_labels"])
        assert validate_label_selector(cls["ray"]["label_selector"]) is None
        assert cls["slurm"]["constraint"] == "--constraint=" + cls["slurm"]["feature"]
        torch = next(p for p in cls["ray"]["runtime_env"]["pip"]["packages"] if p.startswith("torch=="))
        assert torch in (locks / cls["lock"]).read_text()
    by_kind = {class_kind[c["id"]]: c for c in mapping["classes"]}
    assert by_kind["k80"]["cuda"] != by_kind["5090"]["cuda"]

    # the gate: the H100 class's lock runs on the H100 nodes and not on the K80
    gate = cli("check", "--env", str(out), "-r", str(locks / by_kind["h100"]["lock"]), "--json")
    assert gate.returncode == 1, gate.stderr
    result = json.loads(gate.stdout)["data"]
    blocking = {class_kind[c["id"]] for c in result["blocking"]}
    assert "k80" in blocking and "h100" not in blocking
    for kind in ("k80", "5090"):
        gate = cli("check", "--env", str(out), "-r", str(locks / by_kind[kind]["lock"]))
        assert gate.returncode == 1 and "blocks" in gate.stdout

    # doctor per class: the K80's unsupported driver branch is found on the K80 class only
    doctor = cli("doctor", "--env", str(out), "--json")
    assert doctor.returncode == 1
    found = {class_kind[c["id"]]: {f["code"] for f in c["findings"]} for c in json.loads(doctor.stdout)["data"]["classes"]}
    assert "GPU_UNSUPPORTED_BY_DRIVER" in found["k80"] and "GPU_UNSUPPORTED_BY_DRIVER" not in found["h100"]

