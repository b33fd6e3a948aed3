"""`fleet gather` in this process (cudamatrix.fleet.gather): the node names, the srun command line, the Slurm
output read task by task, the Ray task's answer, and the folder write_fleet writes.

srun is the one part this test replaces (a real one-node Slurm is in tests/fleet/test_gather_slurm.py, slow): the
stand-in prints what real ``srun --ntasks-per-node=1 --label cudamatrix detect --json`` prints, every line of a
task's output prefixed by its task number and ": " (srun(1) ``--label``), the tasks' lines interleaved as
concurrent tasks write them. Each task's output is a real ``detect --json`` envelope: the H100 and H200 machines
lent to the project (tests/data) and the envelope this cudamatrix prints for a node file it refuses.
"""
from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cudamatrix.errors import UsageError

DATA = Path(__file__).parent.parent / "data"
H100 = DATA / "gpu_speed" / "h100-2026-11-27e" / "detect.json"
H200 = DATA / "gpu_h200" / "detect.json"

SRUN = """#!/bin/sh
printf '%s\\n' "$@" > "$FAKE_SRUN_LOG"
cat "$FAKE_SRUN_OUT"
if [ -n "$FAKE_SRUN_ERR" ]; then printf '%s\\n' "$FAKE_SRUN_ERR" >&2; fi
if [ -n "$FAKE_SRUN_SLEEP" ]; then exec sleep "$FAKE_SRUN_SLEEP"; fi
exit "${FAKE_SRUN_STATUS:-0}"
"""


def envelope(path: Path, hostname: str | None = None) -> str:
    """A real detect --json envelope, as the node named ``hostname`` prints it."""
    doc = json.loads(path.read_text())
    if hostname is not None:
        doc["data"]["environment"]["hostname"] = hostname
    return json.dumps(doc, indent=2) + "\n"


@pytest.fixture(scope="module")
def refused(tmp_path_factory) -> str:
    """The envelope `cudamatrix detect --json` prints on a node whose saved environment it refuses."""
    from support.fakes import child_env, run_cli

    bad = tmp_path_factory.mktemp("bad") / "node.json"
    bad.write_text(json.dumps({"drivers": {}}))
    out = run_cli(["detect", "--json"], env={**child_env(), "CUDAMATRIX_DETECT_ENV": str(bad)}, text=True)
    assert out.returncode == 2 and json.loads(out.stdout)["status"] == "usage_error"
    return out.stdout


@pytest.fixture
def srun(tmp_path: Path, monkeypatch):
    """Install the srun stand-in first on PATH; returns a function that sets what it prints, and its log."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(SRUN)
    (bin_dir / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    log = tmp_path / "srun.log"
    monkeypatch.setenv("FAKE_SRUN_LOG", str(log))
    for name in ("FAKE_SRUN_ERR", "FAKE_SRUN_SLEEP", "FAKE_SRUN_STATUS"):
        monkeypatch.delenv(name, raising=False)

    def tasks(outputs: list[str], **env: str) -> Path:
        """Task i prints outputs[i]; their lines interleaved, each labelled with its task number."""
        lines = [out.splitlines() for out in outputs]
        printed = [f"{i}: {line[k]}" for k in range(max(map(len, lines), default=0))
                   for i, line in enumerate(lines) if k < len(line)]
        (tmp_path / "srun.out").write_text("".join(f"{line}\n" for line in printed))
        monkeypatch.setenv("FAKE_SRUN_OUT", str(tmp_path / "srun.out"))
        for key, value in env.items():
            monkeypatch.setenv(f"FAKE_SRUN_{key.upper()}", value)
        return log

    return tasks


def test_node_names_are_hostnames_made_safe_and_unique():
    from cudamatrix.fleet.gather import _unique_names

    hosts = [("gpu-1", "a1"), ("gpu-2", "b2"), ("gpu-2", "c3"), (None, "d4"), ("fleet", "e5"), ("a b/c", "f6"),
             ("..", "g7"), ("", "h8"), ("gpu-1.example.org", "0123456789abcdef0123"), ("x", "id/with spaces")]
    assert _unique_names(hosts) == ["gpu-1", "gpu-2-b2", "gpu-2-c3", "node-d4", "fleet-node", "a_b_c", "node",
                                    "node-h8", "gpu-1.example.org", "x"]
    assert _unique_names([("gpu", "n1"), ("gpu", "n2/x y"), (None, "n3"), (None, "n4")]) == [
        "gpu-n1", "gpu-n2_x_y", "node-n3", "node-n4"]
    assert _unique_names([("fleet", "1"), ("fleet", "2")]) == ["fleet-node-1", "fleet-node-2"]
    assert _unique_names([("h", "0123456789abcdef"), ("h", "z")]) == ["h-0123456789ab", "h-z"]
    assert _unique_names([("GPU-X", "1"), ("_x_", "2"), (None, "3"), ("", "4")]) == ["GPU-X", "x", "node-3", "node-4"]


def test_srun_command_line():
    from cudamatrix.fleet.gather import srun_argv

    tail = ["cudamatrix", "detect", "--json"]
    assert srun_argv() == ["srun", "--ntasks-per-node=1", "--label", *tail]
    assert srun_argv("gpu", 4, "/usr/bin/srun") == ["/usr/bin/srun", "--ntasks-per-node=1", "--label",
                                                    "--partition=gpu", "--nodes=4", *tail]
    assert srun_argv(None, 1) == ["srun", "--ntasks-per-node=1", "--label", "--nodes=1", *tail]
    assert srun_argv("", None) == ["srun", "--ntasks-per-node=1", "--label", *tail]


def test_gather_slurm_reads_every_tasks_envelope_in_task_order(srun, refused: str):
    """Twelve tasks (task 10 sorts after task 9, not after task 1), two of them on one hostname, one node whose
    detect refused its input, one whose output was cut: every node, its name, its Environment or its error, and
    progress once per task that answered (its envelope's last line)."""
    from cudamatrix.fleet.gather import gather_slurm
    from cudamatrix.models import Environment
    from cudamatrix.schema import validate

    outputs = [envelope(H100 if i % 2 else H200, f"gpu-{i:02d}") for i in range(12)]
    outputs[3] = envelope(H100, "gpu-01")  # a hostname twice
    outputs[5] = refused
    outputs[7] = envelope(H200, "gpu-07")[:400]  # cut: the node died while writing
    log = srun(outputs)
    seen: list[tuple] = []
    gathered = gather_slurm("gpu", 12, timeout=60, progress=lambda *a: seen.append(a))
    assert log.read_text().splitlines() == ["--ntasks-per-node=1", "--label", "--partition=gpu", "--nodes=12",
                                            "cudamatrix", "detect", "--json"]
    assert gathered.engine == "slurm" and 0 < gathered.seconds < 60
    names = ["gpu-00", "gpu-01-task1", "gpu-02", "gpu-01-task3", "gpu-04", "node-task5", "gpu-06", "node-task7",
             "gpu-08", "gpu-09", "gpu-10", "gpu-11"]
    assert [(n.name, n.engine_id) for n in gathered.nodes] == [(name, str(i)) for i, name in enumerate(names)]
    assert [n.hostname for n in gathered.nodes] == [
        None if i in (5, 7) else "gpu-01" if i == 3 else f"gpu-{i:02d}" for i in range(12)]
    for i, node in enumerate(gathered.nodes):
        if i in (5, 7):
            assert node.environment is None
            continue
        assert node.error is None
        own = json.loads(outputs[i])["data"]["environment"]
        assert node.environment == validate(Environment, own, "node", UsageError)
    assert gathered.nodes[5].error == "detect failed there: " + json.loads(refused)["errors"][0]["message"]
    assert re.fullmatch(r"slurm task 7: not a `detect --json` envelope \(JSONDecodeError: .*\)",
                        gathered.nodes[7].error), gathered.nodes[7].error
    # progress as each envelope's last line "}" comes (the shortest first: the lines are interleaved)
    answered = sorted((i for i in range(12) if i != 7), key=lambda i: (len(outputs[i].splitlines()), i))
    assert answered[0] == 5 and seen == [(k + 1, 12, f"task {i}", "ok") for k, i in enumerate(answered)]


@pytest.mark.parametrize(("output", "error"), [
    ('{"exit_code": 3, "status": "no_solution"}', "detect failed there: no_solution"),
    ('{"exit_code": 2, "errors": []}', "detect failed there: None"),
    ('{"exit_code": 0, "data": {}}', "slurm task 0: not a `detect --json` envelope (KeyError: 'environment')"),
    ('["not", "an", "envelope"]',
     "slurm task 0: not a `detect --json` envelope (AttributeError: 'list' object has no attribute 'get')"),
    ('{"exit_code": 0, "data": {"environment": {"gpus": 5}}}',
     "slurm task 0: gpus: Input should be a valid list"),
])
def test_a_task_output_that_is_not_a_detect_envelope_is_that_nodes_error(srun, output: str, error: str):
    from cudamatrix.fleet.gather import gather_slurm

    srun([output + "\n"])
    gathered = gather_slurm(timeout=60)
    assert [(n.name, n.environment, n.error) for n in gathered.nodes] == [("node-task0", None, error)]


def test_srun_that_gives_no_tasks_answer_is_a_usage_error_with_the_command(srun, tmp_path: Path):
    from cudamatrix.fleet.gather import gather_slurm

    argv = f"{tmp_path / 'bin' / 'srun'} --ntasks-per-node=1 --label --partition=none cudamatrix detect --json"
    srun([], err="srun: error: Unable to allocate resources: Invalid partition name specified", status="1")
    error = pytest.raises(UsageError, gather_slurm, "none", timeout=60).value
    assert error.message == "srun gave no node's answer: srun: error: Unable to allocate resources: Invalid " \
                            "partition name specified"
    assert error.hint == argv
    srun([], err="", status="3")
    assert pytest.raises(UsageError, gather_slurm, "none", timeout=60).value.message == \
        "srun gave no node's answer: exit status 3"
    srun([], err="srun: first\nsrun: last", status="1")
    (tmp_path / "srun.out").write_text("unlabelled line\n")
    assert pytest.raises(UsageError, gather_slurm, "none", timeout=60).value.message == \
        "srun gave no node's answer: srun: last"


def test_without_srun_or_with_no_node_gather_slurm_refuses(tmp_path: Path, monkeypatch):
    from cudamatrix.fleet.gather import gather_slurm

    monkeypatch.setenv("PATH", str(tmp_path))
    assert pytest.raises(UsageError, gather_slurm, None, 0).value.message == "--nodes must be at least 1"
    assert pytest.raises(UsageError, gather_slurm, None, -2).value.message == "--nodes must be at least 1"
    assert pytest.raises(UsageError, gather_slurm).value.message == \
        "srun not found on PATH: `fleet gather --engine slurm` runs on a Slurm login node"


def test_one_node_is_enough_and_progress_counts_the_nodes_asked_for(srun):
    from cudamatrix.fleet.gather import gather_slurm

    log = srun([envelope(H200, "gpu-a")])
    seen: list[tuple] = []
    assert [n.name for n in gather_slurm(None, 1, timeout=60, progress=lambda *a: seen.append(a)).nodes] == ["gpu-a"]
    assert seen == [(1, 1, "task 0", "ok")] and "--nodes=1" in log.read_text().splitlines()
    seen.clear()
    srun([envelope(H200, "gpu-a"), envelope(H100, "gpu-b")])
    assert len(gather_slurm(timeout=60, progress=lambda *a: seen.append(a)).nodes) == 2
    assert seen == [(1, 0, "task 0", "ok"), (2, 0, "task 1", "ok")]  # no --nodes: the total is not known


@pytest.mark.slow  # waits for its 0.5 s timeout
def test_srun_that_outlives_the_timeout_keeps_the_nodes_that_answered(srun):
    from cudamatrix.fleet.gather import gather_slurm

    srun([envelope(H200, "gpu-a")], sleep="30")
    gathered = gather_slurm(timeout=0.5)
    assert [(n.name, n.hostname, n.engine_id, n.environment is not None, n.error) for n in gathered.nodes] == [
        ("gpu-a", "gpu-a", "0", True, None),
        ("srun", None, None, False, "srun timed out after 0.5s; later nodes did not answer")]
    assert 0.5 <= gathered.seconds < 20


def test_the_ray_tasks_answer_is_the_nodes_environment_or_its_error(tmp_path: Path, monkeypatch):
    """_detect_on_node (what each Ray task runs: detect with that worker's Python) and _fill (what the driver
    keeps of its answer)."""
    import socket

    from cudamatrix.detect import load_environment
    from cudamatrix.fleet.gather import Node, _detect_on_node, _fill
    from cudamatrix.models import Environment
    from cudamatrix.schema import to_dict, validate

    monkeypatch.setenv("CUDAMATRIX_DETECT_ENV", str(H200))
    answer = _detect_on_node()
    own = json.loads(H200.read_text())["data"]["environment"]
    assert answer["hostname"] == socket.gethostname() and answer["python"] == sys.executable
    saved = to_dict(load_environment(str(H200)))
    notes = answer["environment"].pop("notes")  # detect says where the saved environment came from
    assert answer["environment"] == {k: v for k, v in saved.items() if k != "notes"}
    assert notes[:-1] == saved["notes"] and "CUDAMATRIX_DETECT_ENV" in notes[-1]["message"]
    answer["environment"]["notes"] = notes
    json.dumps(answer)  # plain JSON values: what Ray carries back to the driver
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"drivers": {}}))
    monkeypatch.setenv("CUDAMATRIX_DETECT_ENV", str(bad))
    failed = _detect_on_node()
    assert failed == {"hostname": socket.gethostname(), "python": sys.executable,
                      "error": f"{bad}: drivers: unknown key"}

    node = Node("n1", "ray-host", "abc")
    _fill(node, answer)
    assert (node.hostname, node.python, node.error) == (socket.gethostname(), sys.executable, None)
    assert node.environment == validate(Environment, answer["environment"], "n", UsageError)
    node = Node("n2", "ray-host", "abc")
    _fill(node, failed)
    assert (node.hostname, node.environment, node.error) == (socket.gethostname(), None, failed["error"])
    node = Node("n3", "ray-host", "abc")
    _fill(node, {"python": "/usr/bin/python3", "environment": {**own, "gpus": 5}})
    assert (node.hostname, node.python, node.environment) == ("ray-host", "/usr/bin/python3", None)
    assert node.error == "node n3: gpus: Input should be a valid list"
    node = Node("n4", "ray-host", "abc")
    _fill(node, {"hostname": "", "error": "detect: killed"})
    assert (node.hostname, node.python, node.error) == ("ray-host", None, "detect: killed")


def test_write_fleet_writes_each_node_and_the_index_of_nodes_failures_and_classes(tmp_path: Path):
    from cudamatrix.fleet.classes import group
    from cudamatrix.fleet.gather import Gathered, Node, write_fleet
    from cudamatrix.models import Environment
    from cudamatrix.schema import to_dict, validate

    def env(path: Path, host: str) -> Environment:
        return validate(Environment, json.loads(envelope(path, host))["data"]["environment"], host, UsageError)

    nodes = [Node("b", "host-b", "t1", env(H100, "host-b"), python="/opt/py/bin/python3"),
             Node("lost", "host-l", "t2", None, "no answer within 300s"),
             Node("a", "host-a", "t0", env(H200, "host-a")), Node("c", None, "t3", env(H100, "c"))]
    out = tmp_path / "out" / "fleet"
    index = write_fleet(Gathered("ray", nodes, seconds=12.3456), out)
    assert json.loads((out / "fleet.json").read_text()) == index
    assert (out / "fleet.json").read_text() == json.dumps(index, indent=2) + "\n"
    assert sorted(p.name for p in out.iterdir()) == ["a.json", "b.json", "c.json", "fleet.json"]
    for node in (nodes[0], nodes[2], nodes[3]):
        text = (out / f"{node.name}.json").read_text()
        assert text == json.dumps(to_dict(node.environment), indent=2) + "\n"
    classes = group([("b", nodes[0].environment), ("a", nodes[2].environment), ("c", nodes[3].environment)])
    class_of = {name: c.id for c in classes for name in c.nodes}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", index.pop("gathered_at"))
    assert index == {
        "schema_version": 1, "engine": "ray", "seconds": 12.35,
        "nodes": [{"node": n.name, "file": f"{n.name}.json", "hostname": n.hostname, "engine_id": n.engine_id,
                   "python": n.python, "class": class_of[n.name]} for n in (nodes[0], nodes[2], nodes[3])],
        "failed": [{"node": "lost", "hostname": "host-l", "engine_id": "t2", "error": "no answer within 300s"}],
        "classes": [c.to_dict() for c in classes]}
    assert [c["nodes"] for c in index["classes"]] == [["b", "c"], ["a"]]
    # gathered again into the same folder: its files replaced; a link planted at a node's name is replaced
    # itself, never written through (fleet folders are shared)
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text("not to be overwritten\n")
    (out / "a.json").unlink()
    (out / "a.json").symlink_to(elsewhere)
    again = write_fleet(Gathered("ray", nodes[2:3]), out)
    assert [n["node"] for n in again["nodes"]] == ["a"] and elsewhere.read_text() == "not to be overwritten\n"
    assert not (out / "a.json").is_symlink()
    assert (out / "a.json").read_text() == json.dumps(to_dict(nodes[2].environment), indent=2) + "\n"
    blocked = tmp_path / "file"
    blocked.write_text("a file where the folder should be\n")
    error = pytest.raises(UsageError, write_fleet, Gathered("slurm", nodes), blocked).value
    assert error.message == f"{blocked}: cannot be written (File exists)"


@pytest.mark.slow  # imports Ray (about 0.6 s, once)
def test_gather_ray_at_an_address_ray_refuses_is_a_usage_error_with_how_to_give_one():
    """Real Ray, a mistyped --address: Ray's own refusal, said at once, with what to give."""
    pytest.importorskip("ray")
    from cudamatrix.fleet.gather import gather_ray

    error = pytest.raises(UsageError, gather_ray, "127.0.0.1:notaport", 5.0).value
    assert error.message.startswith("cannot connect to a Ray cluster at 127.0.0.1:notaport: Unable to parse port "
                                    "number from notaport"), error.message
    assert error.hint == "start one (ray start --head) or give --address HOST:PORT (the head node's GCS port)"


def test_gather_ray_without_ray_installed_says_how_to_install_it(monkeypatch):
    from cudamatrix.fleet.gather import gather_ray

    monkeypatch.setitem(sys.modules, "ray", None)  # what `import ray` finds where Ray is not installed
    error = pytest.raises(UsageError, gather_ray).value
    assert error.message == "Ray is not installed: `fleet gather --engine ray` needs it"
    assert error.hint == "pip install ray (or the `ray` extra of cudamatrix), the version the cluster runs"


def test_the_gathering_time_is_utc_whatever_the_local_zone(tmp_path: Path):
    import datetime
    import time

    from cudamatrix.fleet.gather import Gathered, write_fleet

    with pytest.MonkeyPatch.context() as zone:
        zone.setenv("TZ", "America/New_York")  # 4 or 5 hours from UTC
        time.tzset()
        try:
            index = write_fleet(Gathered("slurm"), tmp_path / "out")
        finally:
            zone.undo()
            time.tzset()
    at = datetime.datetime.fromisoformat(index["gathered_at"])
    now = datetime.datetime.now(datetime.timezone.utc)
    assert at.utcoffset() == datetime.timedelta(0) and abs((now - at).total_seconds()) < 600


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory) -> Iterator[dict]:
    """A real Ray cluster on this machine (tests/support/raycluster.py): the one CUDAMATRIX_TEST_RAY names (started once
    for a mutation run), else one started here and stopped afterwards."""
    pytest.importorskip("ray")
    from support import raycluster

    described = os.environ.get("CUDAMATRIX_TEST_RAY")
    if described:
        yield json.loads(Path(described).read_text())
        return
    with raycluster.cluster(tmp_path_factory.mktemp("ray")) as made:
        yield made


@pytest.fixture(scope="module")
def ray_gathered(ray_cluster: dict) -> tuple[Any, list[tuple], float]:
    """One gather over the whole cluster, nothing armed: (what gather_ray returned, its progress calls, its wall
    time, which the test of a node that never answers takes as this machine's pace)."""
    import time

    from cudamatrix.detect.loader import findable
    from cudamatrix.fleet.gather import gather_ray

    if findable("libnvidia-ml.so.1", dict(os.environ)):  # the nodes' raylets inherit this environment
        pytest.skip("NVML is on this machine: the live nodes' detect reads the GPU through it and never runs the "
                    "stand-in nvidia-smi that replays a table, freezes its worker or kills it")
    for armed in ray_cluster["armed"].values():  # left by a gather that ended before a stand-in ran
        Path(armed).unlink(missing_ok=True)
    seen: list[tuple] = []
    start = time.monotonic()
    gathered = gather_ray(ray_cluster["address"], 60.0, lambda *a: seen.append(a))
    return gathered, seen, time.monotonic() - start


@pytest.mark.slow  # a Ray cluster: 10 to 20 s to start, once; 3 to 10 s to gather
def test_gather_ray_asks_every_alive_node_on_that_node(ray_cluster: dict, ray_gathered: tuple):
    """One task per alive node, run there (each node answers for its own saved machine, or probes this one live
    with the nvidia-smi on its PATH), also where no CPU is free; a node whose detect refuses its input gives
    detect's message; the dead node is not asked; names are hostname-node id where hostnames repeat (every node of
    this cluster is this machine)."""
    import socket

    import ray

    from cudamatrix.detect import load_environment
    from cudamatrix.schema import to_dict

    kinds = ray_cluster["nodes"]
    gathered, seen, _ = ray_gathered
    assert not ray.is_initialized()  # the driver's connection is closed
    assert gathered.engine == "ray" and 0 < gathered.seconds < 60
    by_kind = {kinds[n.engine_id]: n for n in gathered.nodes}
    assert sorted(by_kind) == ["busy", "dies", "head", "hung", "refused"] and len(gathered.nodes) == 5
    host = socket.gethostname()
    for node in gathered.nodes:
        assert (node.name, node.hostname, node.python) == (f"{host}-{node.engine_id[:12]}", host,
                                                           ray_cluster["python"])
    for kind, path in (("head", H200), ("busy", H100)):
        got = to_dict(by_kind[kind].environment)
        want = to_dict(load_environment(str(path)))
        assert by_kind[kind].error is None and got.pop("notes")[:-1] == want.pop("notes") and got == want
    for kind in ("hung", "dies"):  # unarmed: the real table their nvidia-smi replays
        env = by_kind[kind].environment
        assert by_kind[kind].error is None and env.origin == "live" and env.hostname == host
        assert (env.driver.version, env.driver.source, [g.name for g in env.gpus]) == (
            "580.65.06", "nvidia-smi", ["NVIDIA GeForce RTX 5090"])
    refused = by_kind["refused"]
    assert refused.environment is None and refused.error == f"{ray_cluster['refused']}: drivers: unknown key"
    assert [s[0] for s in seen] == [1, 2, 3, 4, 5] and {s[1] for s in seen} == {5}
    assert sorted(s[2:] for s in seen) == sorted((n.name, n.error or "ok") for n in gathered.nodes)
    assert [s[2] for s in seen] == [n.name for n in gathered.nodes]  # in the order they answered


@pytest.mark.slow  # waits out its timeout: twice the unarmed gather's time, and 2 s
def test_gather_ray_keeps_a_node_that_never_answers_and_one_whose_worker_died(ray_cluster: dict,
                                                                             ray_gathered: tuple):
    """Armed: the worker running detect on ``hung`` is frozen by nvidia-smi (a GPU fallen off the bus), the one on
    ``dies`` killed. The gather ends at its timeout, not later, and the frozen node's progress line says it gave
    no answer in time; the dead worker's task is not run again (it would answer now: the stand-in kills once) and
    its Ray error is that node's; both keep the hostname Ray lists for them."""
    import socket
    import time

    from cudamatrix.fleet.gather import gather_ray

    kinds = ray_cluster["nodes"]
    timeout = round(2 * ray_gathered[2] + 2, 1)  # twice this machine's pace: time for the nodes that answer
    for armed in ray_cluster["armed"].values():
        Path(armed).write_text("")
    seen: list[tuple] = []
    ended: list[float] = []

    def progress(*line) -> None:
        seen.append(line)
        if line[3].startswith("no answer"):
            ended.append(time.monotonic() - start)

    start = time.monotonic()
    gathered = gather_ray(ray_cluster["address"], timeout, progress)
    assert timeout <= ended[0] < timeout + 1.5 and timeout <= gathered.seconds  # the wait ends at the timeout
    assert not any(Path(armed).exists() for armed in ray_cluster["armed"].values())  # both stand-ins ran
    by_kind = {kinds[n.engine_id]: n for n in gathered.nodes}
    assert [kinds[n.engine_id] for n in gathered.nodes][-1] == "hung" and len(gathered.nodes) == 5
    host = socket.gethostname()
    hung, dies = by_kind["hung"], by_kind["dies"]
    assert (hung.name, hung.hostname, hung.environment, hung.python, hung.error) == (
        f"{host}-{hung.engine_id[:12]}", host, None, None, f"no answer within {timeout:g}s")
    assert (dies.name, dies.hostname, dies.environment, dies.python) == (
        f"{host}-{dies.engine_id[:12]}", host, None, None)
    assert dies.error == ("the Ray task failed: WorkerCrashedError: The worker died unexpectedly while executing "
                          "this task. Check python-core-worker-*.log files for more information.")
    assert [by_kind[k].error is None for k in ("head", "busy")] == [True, True]
    assert seen == [(i + 1, 5, n.name, n.error or "ok") for i, n in enumerate(gathered.nodes)]


def _close_the_late_connection() -> None:
    """Wait for the helper thread of a connection that outlived the gather's timeout, then close what it opened
    (what gather_ray's own shutdown would do)."""
    import threading

    import ray

    for thread in threading.enumerate():
        if thread.name.endswith("(init)"):  # the helper thread, named after its target
            assert thread.daemon  # never keeps the process alive
            thread.join(120)
    ray.shutdown()


@pytest.mark.slow  # the Ray cluster of the test above, and the late connection's end
def test_a_cluster_that_does_not_answer_in_time_is_a_usage_error(ray_cluster: dict):
    """No cluster answers within a millisecond: connecting takes longer, so the wait ends first and says so; the
    helper thread's late connection is then waited for and closed (what gather_ray's own shutdown would do)."""
    from cudamatrix.fleet.gather import gather_ray

    address = ray_cluster["address"]
    error = pytest.raises(UsageError, gather_ray, address, 0.001).value  # the gather's timeout bounds the connection
    assert error.message == f"no Ray cluster answered at {address} within 0.001s"
    assert error.hint == "start one (ray start --head) or give --address HOST:PORT (the head node's GCS port)"
    _close_the_late_connection()


@pytest.mark.slow  # the Ray cluster of the tests above, connected to twice
def test_gather_ray_without_an_address_connects_to_the_cluster_ray_finds(ray_cluster: dict, monkeypatch):
    """No --address: Ray's "auto", which reads RAY_ADDRESS first; the messages then name "auto"."""
    import ray

    from cudamatrix.fleet.gather import _connect, gather_ray

    monkeypatch.setenv("RAY_ADDRESS", ray_cluster["address"])
    _connect(ray, None, 30.0)
    try:
        assert ray.is_initialized() and ray.get_runtime_context().gcs_address == ray_cluster["address"]
    finally:
        ray.shutdown()
    error = pytest.raises(UsageError, gather_ray, None, 0.001).value
    assert error.message == "no Ray cluster answered at auto within 0.001s"
    _close_the_late_connection()
