"""Fleets without a cluster: CUDAMATRIX_DETECT_ENV, --env folders, node classes, the per-class lock, check and
doctor, bad input, and the Slurm path through an ``srun`` stand-in.

A real one-node Slurm is in tests/fleet/test_gather_slurm.py; the stand-in covers what one node cannot: several
nodes, repeated classes and a failing node. It does what real srun does for ``--ntasks-per-node=1 --label``
on N nodes: it runs the command once per node, concurrently, and prefixes every output line with the task
number and ": " (srun(1) ``--label``; the real srun of tests/fleet/test_gather_slurm.py prints the same). Each task
runs the real ``cudamatrix detect --json`` with its own CUDAMATRIX_DETECT_ENV.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import tomlread
from support.fakes import run_cli, spawn_cli

SCENARIOS = Path(__file__).parent.parent / "scenarios"


def _environ(env: dict | None) -> dict:
    base = {k: v for k, v in os.environ.items() if k != "CUDAMATRIX_DETECT_ENV"}
    return {**base, **(env or {})}


def cli(*args: str, env: dict | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    """The CLI in this process, ``env`` over this process's environment."""
    return run_cli(list(args), env=_environ(env), timeout=timeout, text=True)


def cli_process(*args: str, env: dict | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    """The CLI in a process of its own: what it imports (ray, or a stand-in on PYTHONPATH) stays there."""
    return spawn_cli(list(args), env=_environ(env), timeout=timeout, text=True)


ENVIRONMENTS = Path(__file__).parent.parent / "data" / "environments"


def saved(scenario: str, **changes) -> dict:
    """A saved machine: tests/data/environments/NAME.json, else a scenario's environment."""
    own = ENVIRONMENTS / f"{scenario}.json"
    env = json.loads(own.read_text()) if own.exists() else \
        json.loads((SCENARIOS / f"{scenario}.json").read_text())["environment"]
    env.update(changes)
    return env


def write(folder: Path, name: str, env: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(env))
    return path


@pytest.mark.slow
def test_detect_env_var_returns_the_saved_environment(tmp_path: Path):
    path = write(tmp_path, "k80", saved("doctor_k80_on_driver_535", hostname="gpu-7"))
    out = cli("detect", "--json", env={"CUDAMATRIX_DETECT_ENV": str(path)})
    assert out.returncode == 0, out.stderr
    env = json.loads(out.stdout)["data"]["environment"]
    assert env["driver"]["version"] == "535.104.05" and env["gpus"][0]["name"] == "Tesla K80"
    assert env["hostname"] == "gpu-7"
    assert any("CUDAMATRIX_DETECT_ENV" in n["message"] for n in env["notes"])
    bad = write(tmp_path, "bad", {**saved("doctor_k80_on_driver_535"), "drivers": {}})
    out = cli("detect", "--json", env={"CUDAMATRIX_DETECT_ENV": str(bad)})
    assert out.returncode == 2 and "drivers" in json.loads(out.stdout)["errors"][0]["message"]


def test_class_ids_follow_hardware_driver_and_toolkit_only():
    from cudamatrix.fleet.classes import class_facts, class_id, group
    from cudamatrix.models import Environment
    from cudamatrix.schema import validate

    def env(**changes) -> Environment:
        return validate(Environment, saved("h100_driver580", **changes), "test")

    a = env(hostname="a", captured_at="2026-01-01T00:00:00+00:00", packages={"torch": "2.5.1"})
    b = env(hostname="b", timings_ms={"total": 12.0})
    older = env(driver={"version": "550.54.15", "cuda_version": "12.4", "status": "ok"})
    assert class_id(class_facts(a)) == class_id(class_facts(b)) != class_id(class_facts(older))
    assert class_id(class_facts(a)).startswith("c-") and len(class_id(class_facts(a))) == 12
    classes = group([("a", a), ("b", b), ("old", older)])
    assert [c.nodes for c in classes] == [["a", "b"], ["old"]]
    assert "H100" in classes[0].to_dict()["description"]


@pytest.mark.slow
def test_env_folder_reads_fleet_index_or_every_json(tmp_path: Path):
    fleet = tmp_path / "fleet"
    for i in range(3):
        write(fleet, f"t4-{i}", saved("doctor_cpu_wheel_on_t4"))
    write(fleet, "k80", saved("doctor_k80_on_driver_535"))
    out = cli("solve", "torch", "--env", str(fleet), "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)["data"]
    assert len(data["targets"]) == 4
    # identical machines are solved once: the trace lists one target per class
    assert sum(line.startswith("target ") for line in data["solution"]["trace"]) == 2
    assert any("(+2 alike)" in line for line in data["solution"]["trace"])
    # a fleet.json beside them lists the nodes to read (here: only the T4s)
    (fleet / "fleet.json").write_text(json.dumps({"nodes": [{"file": f"t4-{i}.json"} for i in range(3)]}))
    out = cli("solve", "torch", "--env", str(fleet), "--json")
    assert out.returncode == 0 and len(json.loads(out.stdout)["data"]["targets"]) == 3


@pytest.mark.slow
@pytest.mark.parametrize("case", ["empty", "outside", "malformed", "bad_node"])
def test_bad_fleet_folders_are_usage_errors(tmp_path: Path, case: str):
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    if case == "outside":
        write(tmp_path, "elsewhere", saved("doctor_cpu_wheel_on_t4"))
        (fleet / "fleet.json").write_text(json.dumps({"nodes": [{"file": "../elsewhere.json"}]}))
    elif case == "malformed":
        (fleet / "fleet.json").write_text("{not json")
    elif case == "bad_node":
        write(fleet, "good", saved("doctor_cpu_wheel_on_t4"))
        write(fleet, "broken", {**saved("doctor_cpu_wheel_on_t4"), "gpus": "many"})
    for args in (["solve", "torch"], ["doctor"], ["check"], ["lock", "torch", "--per-class", "-o", str(tmp_path / "l")]):
        out = cli(*args, "--env", str(fleet))
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        assert "Traceback" not in out.stderr
        if case == "bad_node":
            assert "broken.json" in out.stderr and "gpus" in out.stderr
        if case == "outside":
            assert "../elsewhere.json" in out.stderr
    assert not (tmp_path / "l").exists()


@pytest.mark.slow
def test_per_class_lock_is_one_file_when_one_set_fits(tmp_path: Path):
    fleet = tmp_path / "fleet"
    write(fleet, "a", saved("doctor_cpu_wheel_on_t4"))
    write(fleet, "b", saved("doctor_cudnn8_shadows_wheel_cudnn9"))  # another T4 class: driver 550
    locks = tmp_path / "locks"
    out = cli("lock", "torch", "--per-class", "--pins-only", "--env", str(fleet), "-o", str(locks), "--json")
    assert out.returncode == 0, out.stderr
    mapping = json.loads((locks / "locks.json").read_text())
    assert mapping["single"] is True and len(mapping["classes"]) == 2
    assert {c["lock"] for c in mapping["classes"]} == {"fleet.txt"}
    assert sorted(p.name for p in locks.iterdir()) == ["fleet.txt", "locks.json"]
    # the gate passes for the lock on every node, per class
    gate = cli("check", "--env", str(fleet), "-r", str(locks / "fleet.txt"), "--json")
    assert gate.returncode == 0, gate.stdout
    assert json.loads(gate.stdout)["data"]["fits"] is True


@pytest.mark.slow
def test_fleet_option_errors(tmp_path: Path):
    fleet = tmp_path / "fleet"
    write(fleet, "a", saved("doctor_cpu_wheel_on_t4"))
    cases = [
        (["lock", "torch", "--per-class", "-o", str(tmp_path / "x")], "--env"),
        (["lock", "torch", "--per-class", "--env", str(fleet)], "-o DIR"),
        (["lock", "torch", "--per-class", "--env", str(fleet), "-o", str(tmp_path / "x"), "--driver", "550.54.15"],
         "--driver"),
        (["doctor", "--env", str(fleet), "--python", sys.executable], "--python"),
        (["check", "--env", str(fleet), "--gpu", "7.5"], "--gpu"),
        (["fleet", "gather", "--engine", "ray"], "-o DIR"),
        (["fleet", "gather", "--engine", "mpi", "-o", str(tmp_path / "x")], "mpi"),
        (["fleet", "gather", "--engine", "ray", "--partition", "gpu", "-o", str(tmp_path / "x")], "Slurm"),
    ]
    for args, words in cases:
        out = cli(*args)
        assert out.returncode == 2 and words in out.stderr, (args, out.stderr)
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_gather_without_ray_installed_says_so(tmp_path: Path):
    # a `ray` package that fails to import, first on the path: what an install without the extra looks like
    shadow = tmp_path / "shadow" / "ray"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('No module named ray')\n")
    out = cli_process("fleet", "gather", "-o", str(tmp_path / "out"),
                      env={"PYTHONPATH": str(shadow.parent) + os.pathsep + os.environ.get("PYTHONPATH", "")})
    assert out.returncode == 2 and "Ray is not installed" in out.stderr and "pip install ray" in out.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_unreachable_ray_cluster_is_a_usage_error(tmp_path: Path):
    pytest.importorskip("ray")
    out = cli_process("fleet", "gather", "--engine", "ray", "--address", "127.0.0.1:9", "--timeout", "5",
                      "-o", str(tmp_path / "none"), timeout=120)
    assert out.returncode == 2 and "Ray cluster" in out.stderr
    assert not (tmp_path / "none").exists()


FAKE_SRUN = r'''#!{python}
"""srun stand-in: --ntasks-per-node=1 --label on FAKE_SRUN_NODES nodes; task i gets CUDAMATRIX_DETECT_ENV from
the i-th path of FAKE_SRUN_ENVS."""
import os, subprocess, sys
args = sys.argv[1:]
with open(os.environ["FAKE_SRUN_LOG"], "w") as fh:
    fh.write("\n".join(args))
opts = []
while args and args[0].startswith("-"):
    opts.append(args.pop(0))
assert "--ntasks-per-node=1" in opts and "--label" in opts, opts
envs = os.environ["FAKE_SRUN_ENVS"].split(os.pathsep)
nodes = next((int(o.split("=")[1]) for o in opts if o.startswith("--nodes=")), len(envs))
procs = [subprocess.Popen(args, stdout=subprocess.PIPE, text=True,
                          env={{**os.environ, "CUDAMATRIX_DETECT_ENV": envs[i]}}) for i in range(nodes)]
worst = 0
for i, p in enumerate(procs):
    out, _ = p.communicate()
    for line in out.splitlines():
        print(f"{{i}}: {{line}}")
    worst = max(worst, p.returncode)
sys.exit(worst)
'''


@pytest.mark.slow
def test_slurm_gather_through_srun(tmp_path: Path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    srun = bin_dir / "srun"
    srun.write_text(FAKE_SRUN.format(python=sys.executable))
    srun.chmod(0o755)
    saved_dir = tmp_path / "saved"
    files = [write(saved_dir, "a", saved("h100_driver580", hostname="gpu-a")),
             write(saved_dir, "b", saved("h100_driver580", hostname="gpu-b")),
             write(saved_dir, "c", saved("doctor_k80_on_driver_535", hostname="gpu-c")),
             write(saved_dir, "d", {"drivers": {}})]  # a node whose detect fails
    # the `cudamatrix` that srun runs on the nodes: this interpreter's console script
    path = os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    env = {"PATH": path, "FAKE_SRUN_ENVS": os.pathsep.join(map(str, files)), "FAKE_SRUN_LOG": str(tmp_path / "log")}
    out_dir = tmp_path / "out"
    out = cli("fleet", "gather", "--engine", "slurm", "--partition", "gpu", "--nodes", "4", "-o", str(out_dir),
              "--json", env=env)
    assert (tmp_path / "log").read_text().split("\n") == [
        "--ntasks-per-node=1", "--label", "--partition=gpu", "--nodes=4", "cudamatrix", "detect", "--json"]
    assert out.returncode == 1, out.stderr  # one node failed
    index = json.loads((out_dir / "fleet.json").read_text())
    assert sorted(n["node"] for n in index["nodes"]) == ["gpu-a", "gpu-b", "gpu-c"]
    assert [f["engine_id"] for f in index["failed"]] == ["3"] and "drivers" in index["failed"][0]["error"]
    assert sorted(len(c["nodes"]) for c in index["classes"]) == [1, 2]
    assert json.loads((out_dir / "gpu-c.json").read_text())["gpus"][0]["name"] == "Tesla K80"
    assert out.stderr.count(": ok") == 4  # progress: a line per task that answered
    # the gathered folder is a fleet for the other commands
    assert cli("solve", "torch", "--env", str(out_dir)).returncode in (0, 3)
    # srun missing: a usage error, nothing written
    out = cli("fleet", "gather", "--engine", "slurm", "-o", str(tmp_path / "none"), env={"PATH": str(tmp_path)})
    assert out.returncode == 2 and "srun" in out.stderr and not (tmp_path / "none").exists()



@pytest.mark.slow
def test_check_folder_without_requirements_checks_each_nodes_installed_set(tmp_path: Path):
    fleet = tmp_path / "fleet"
    write(fleet, "kaggle-1", saved("doctor_kaggle_p100_cu128"))  # torch 2.8.0+cu128 on a P100: no sm_60 kernels
    write(fleet, "h100-1", saved("h100_driver580"))
    write(fleet, "h100-2", saved("h100_driver580"))
    out = cli("check", "--env", str(fleet), "--json")
    assert out.returncode == 1, out.stderr
    data = json.loads(out.stdout)["data"]
    assert [c["nodes"] for c in data["blocking"]] == [["kaggle-1"]]
    assert any("kaggle-1" in p and "P100" in p for p in data["blocking"][0]["problems"])
    assert {tuple(c["nodes"]): c["fits"] for c in data["classes"]} == {("h100-1", "h100-2"): True,
                                                                       ("kaggle-1",): False}
    human = cli("check", "--env", str(fleet))
    assert human.returncode == 1 and "blocks" in human.stdout and "kaggle-1" in human.stdout


# --- attacks on the fleet folders (shared on clusters): planted links, hostile text, unbounded files ----------

def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    return victim


@pytest.mark.slow
def test_lock_per_class_never_follows_links_planted_at_its_names(tmp_path: Path):
    """The names the writer used as temporary files (NAME.tmp) and the outputs themselves: a link planted at
    any of them is never written through (before: both targets were overwritten, exit 0)."""
    from cudamatrix.fleet.classes import group
    from cudamatrix.models import Environment
    from cudamatrix.schema import validate

    fleet, locks = tmp_path / "fleet", tmp_path / "locks"
    envs = {"a": saved("doctor_kaggle_p100_cu128"), "b": saved("h100_driver580")}  # no one set fits both
    for name, env in envs.items():
        write(fleet, name, env)
    ids = [c.id for c in group([(n, validate(Environment, e, n)) for n, e in envs.items()])]
    victim = _victim(tmp_path)
    locks.mkdir()
    names = ["locks.json", "fleet.txt", *(f"{i}.txt" for i in ids)]
    for name in names:
        (locks / (name + ".tmp")).symlink_to(victim)
    (locks / "locks.json").symlink_to(victim)  # the output's own name
    out = cli("lock", "torch", "--per-class", "--pins-only", "--env", str(fleet), "-o", str(locks), "--json")
    assert out.returncode in (0, 3), out.stdout[-500:] + out.stderr[-500:]
    assert victim.read_text() == "precious"
    assert not (locks / "locks.json").is_symlink() and json.loads((locks / "locks.json").read_text())["classes"]
    for name in names:  # the planted links are left alone, and nothing else is left behind
        assert (locks / (name + ".tmp")).is_symlink()
    assert not [p for p in locks.iterdir() if p.name.startswith(".")]


def _srun(tmp_path: Path, script: str) -> dict:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    srun = bin_dir / "srun"
    srun.write_text(script)
    srun.chmod(0o755)
    path = os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return {"PATH": path, "FAKE_SRUN_LOG": str(tmp_path / "log")}


@pytest.mark.slow
def test_gather_never_follows_links_planted_at_its_names(tmp_path: Path):
    saved_dir = tmp_path / "saved"
    files = [write(saved_dir, "a", saved("h100_driver580", hostname="gpu-a"))]
    env = {**_srun(tmp_path, FAKE_SRUN.format(python=sys.executable)), "FAKE_SRUN_ENVS": str(files[0])}
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    victim = _victim(tmp_path)
    for name in ("fleet.json.tmp", "gpu-a.json.tmp", "gpu-a.json"):
        (out_dir / name).symlink_to(victim)
    out = cli("fleet", "gather", "--engine", "slurm", "-o", str(out_dir), "--json", env=env)
    assert out.returncode == 0, out.stdout[-500:] + out.stderr[-500:]
    assert victim.read_text() == "precious"
    assert json.loads((out_dir / "gpu-a.json").read_text())["hostname"] == "gpu-a"
    assert json.loads((out_dir / "fleet.json").read_text())["nodes"][0]["node"] == "gpu-a"


ESCAPES = "\x1b[2J\x1b]8;;https://evil.example/\x07click\x1b]8;;\x07\u202e"


def _inert(out: subprocess.CompletedProcess) -> None:
    for stream in (out.stdout, out.stderr):
        assert not any(c in stream for c in ("\x1b", "\x07", "\u202e")), stream[-800:]


@pytest.mark.slow
def test_escape_sequences_in_node_files_are_shown_escaped(tmp_path: Path):
    fleet = tmp_path / "fleet"
    env = saved("doctor_kaggle_p100_cu128")
    env["gpus"][0]["name"] = "Tesla P100" + ESCAPES
    write(fleet, "n1", env)
    write(fleet, "n2", saved("h100_driver580"))
    for argv in (["doctor", "--env", str(fleet)], ["check", "--env", str(fleet)],
                 ["lock", "torch", "--per-class", "--pins-only", "--env", str(fleet), "-o", str(tmp_path / "locks")],
                 ["solve", "torch", "--env", str(fleet)]):
        out = cli(*argv)
        assert "Traceback" not in out.stderr and out.returncode in (0, 1, 3), (argv, out.stderr[-500:])
        _inert(out)
    for lock in (tmp_path / "locks").glob("*.txt"):
        text = lock.read_text()
        assert "\x1b" not in text and not any(ln.startswith("--extra-index-url http://evil") for ln in text.splitlines())


@pytest.mark.slow
def test_a_line_break_in_a_node_files_gpu_name_adds_no_line_to_a_lock(tmp_path: Path):
    fleet = tmp_path / "fleet"
    env = saved("h100_driver580")
    env["gpus"][0]["name"] = "NVIDIA H100 80GB HBM3\n--extra-index-url http://evil.example/simple\r\x85"
    write(fleet, "n1", env)
    out = cli("lock", "torch", "--per-class", "--pins-only", "--env", str(fleet), "-o", str(tmp_path / "locks"))
    assert out.returncode == 0, out.stderr
    for lock in (tmp_path / "locks").glob("*.txt"):
        assert not any(ln.startswith("--extra-index-url http://evil") for ln in lock.read_text().splitlines())
    out = cli("lock", "torch", "--pins-only", "--env", str(fleet / "n1.json"))
    assert out.returncode == 0 and not any(ln.startswith("--extra") for ln in out.stdout.splitlines()), out.stdout


SRUN_SAYS = r'''#!{python}
import json, sys
print("0: " + json.dumps({{"schema_version": 1, "command": "detect", "status": "usage_error", "exit_code": 2,
                          "data": {{}}, "errors": [{{"type": "UsageError", "message": {message!r}}}]}}))
sys.stderr.write({stderr!r})
sys.exit({code})
'''


@pytest.mark.slow
def test_escape_sequences_in_slurm_output_are_shown_escaped(tmp_path: Path):
    out_dir = tmp_path / "out"
    env = _srun(tmp_path, SRUN_SAYS.format(python=sys.executable, message="boom" + ESCAPES, stderr="", code=0))
    out = cli("fleet", "gather", "--engine", "slurm", "-o", str(out_dir), env=env)
    assert out.returncode == 1 and "boom" in out.stdout and "\\x1b[2J" in out.stdout, out.stdout + out.stderr
    _inert(out)
    # srun itself fails, no task answers: its last stderr line is the error shown
    script = '#!/bin/sh\nprintf "srun: error: %b\\n" "no partition\\033[2J\\033]8;;https://evil/\\007x" >&2\nexit 1\n'
    env = _srun(tmp_path, script)
    out = cli("fleet", "gather", "--engine", "slurm", "-o", str(tmp_path / "none"), env=env)
    assert out.returncode == 2 and "no partition" in out.stderr, out.stderr
    _inert(out)


def _limit_memory() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


@pytest.mark.slow
@pytest.mark.parametrize("attack", ["nested-list", "nested-object", "huge-sparse", "fifo", "deep-node-file",
                                    "huge-node-file"])
def test_an_unbounded_fleet_json_or_node_file_is_a_usage_error(tmp_path: Path, attack: str):
    """Before: a deeply nested or 3.5 GB sparse fleet.json raised RecursionError or MemoryError (a traceback,
    no envelope)."""
    fleet = tmp_path / "fleet"
    write(fleet, "a", saved("h100_driver580"))
    index = fleet / "fleet.json"
    if attack == "nested-list":
        index.write_text("[" * 200_000 + "]" * 200_000)
    elif attack == "nested-object":
        index.write_text('{"nodes": [{"file": "a.json", "x": ' + "[" * 5_000 + "]" * 5_000 + "}]}")
    elif attack == "huge-sparse":
        with open(index, "wb") as fh:
            fh.truncate(3_500_000_000)
    elif attack == "fifo":
        os.mkfifo(index)
    elif attack == "deep-node-file":
        index.write_text(json.dumps({"nodes": [{"file": "a.json"}]}))
        (fleet / "a.json").write_text('{"schema_version": 1, "gpus": ' + "[" * 200_000 + "]" * 200_000 + "}")
    else:
        index.write_text(json.dumps({"nodes": [{"file": "a.json"}]}))
        with open(fleet / "a.json", "wb") as fh:
            fh.truncate(3_500_000_000)
    for argv in (["solve", "torch", "--env", str(fleet)], ["doctor", "--env", str(fleet)],
                 ["check", "--env", str(fleet)], ["lock", "torch", "--per-class", "--env", str(fleet), "-o",
                                                  str(tmp_path / "locks")]):
        # under a 3 GB address-space limit, as on a small node: an unbounded read ends in MemoryError
        out = subprocess.run([sys.executable, "-m", "cudamatrix", *argv, "--json"], capture_output=True, text=True,
                             timeout=60, preexec_fn=_limit_memory,
                             env={k: v for k, v in os.environ.items() if k != "CUDAMATRIX_DETECT_ENV"})
        assert "Traceback" not in out.stderr, out.stderr[-600:]
        doc = json.loads(out.stdout)
        assert out.returncode == 2 and doc["exit_code"] == 2 and doc["status"] == "usage_error", doc


# --- classes and locks in this process: what must never share a class or a lock --------------------------------

def _fleet(tmp_path: Path, nodes: dict[str, dict]):
    from cudamatrix.fleet.perclass import load_fleet
    from cudamatrix.matrix.load import load_matrix

    for name, env in nodes.items():
        write(tmp_path / "fleet", name, env)
    matrix = load_matrix()
    return matrix, load_fleet(matrix, [tmp_path / "fleet"])


def _python(version: str) -> dict:
    h100 = saved("h100_driver580")
    return {**h100, "python": {**h100["python"], "version": version}}


def test_nodes_that_differ_only_in_python_minor_are_two_classes(tmp_path: Path):
    """A wheel set is per interpreter: 3.11 and 3.12 are two classes; 3.11.9 and 3.11.4 are one."""
    from cudamatrix.fleet.classes import class_facts, describe
    from cudamatrix.fleet.perclass import lock_per_class

    matrix, fleet = _fleet(tmp_path, {"a": _python("3.11.9"), "a2": _python("3.11.4"), "b": _python("3.12.3")})
    assert sorted(sorted(c.nodes) for c in fleet.classes) == [["a", "a2"], ["b"]]
    assert [c.nodes for c in fleet.classes][0] == ["a", "a2"]  # largest class first
    assert {class_facts(e)["python"] for e in fleet.environments} == {"3.11", "3.12"}
    assert {describe(c.facts).split("; ")[-2] for c in fleet.classes} == {"Python 3.11", "Python 3.12"}
    assert len({fleet.solver_key(c) for c in fleet.classes}) == 2  # the solver tells them apart too
    files, mapping = lock_per_class(matrix, fleet, ["torch"])
    assert len({c["id"] for c in mapping["classes"]}) == 2
    for c in mapping["classes"]:  # whatever file a class gets, it was solved for that class's interpreter
        text = files[c["lock"]]
        py = c["facts"]["python"]
        assert any(line.startswith("# target ") and f"Python {py};" in line for line in text.splitlines()), text


def test_one_gpu_node_among_cpu_nodes_gets_its_own_class_and_a_cuda_lock(tmp_path: Path):
    """The one set that fits every node is a CPU build; the GPU node must not get it."""
    from cudamatrix.fleet.perclass import lock_per_class

    h100 = saved("h100_driver580")
    cpu = {**saved("doctor_no_driver_cpu_only_is_fine"), "python": h100["python"]}
    matrix, fleet = _fleet(tmp_path, {"cpu1": cpu, "cpu2": cpu, "gpu": h100})
    assert [c.nodes for c in fleet.classes] == [["cpu1", "cpu2"], ["gpu"]]
    files, mapping = lock_per_class(matrix, fleet, ["torch"])
    assert mapping["single"] is False and mapping["joint_causes"][0]["rule"] == "cpu_only"
    by_nodes = {tuple(c["nodes"]): c for c in mapping["classes"]}
    gpu, cpus = by_nodes[("gpu",)], by_nodes[("cpu1", "cpu2")]
    assert gpu["lock"] != cpus["lock"] and sorted(files) == sorted([gpu["lock"], cpus["lock"]])
    assert gpu["cuda"] and all(" cpu" not in f for f in gpu["frameworks"]), gpu
    assert cpus["cuda"] is None and all(f.endswith(" cpu") for f in cpus["frameworks"]), cpus
    assert "# target gpu:" in files[gpu["lock"]] and "# target cpu1:" not in files[gpu["lock"]]
    assert gpu["ray"]["label_selector"] != cpus["ray"]["label_selector"]
    assert gpu["slurm"]["feature"] == "cudamatrix_" + gpu["id"].replace("-", "_")


def test_real_nodes_that_differ_only_in_their_gpu_are_two_classes(tmp_path: Path):
    """Two machines lent to the project, an H100 and an H200 (their own detect --json), on one driver, toolkit
    and Python: the GPU alone makes them two classes (a class id that left the GPUs out would merge them; the
    GPU node among CPU nodes above is told apart by its driver's status as well), which the solver then solves
    once (one architecture)."""
    from cudamatrix.detect import read_environment
    from cudamatrix.fleet.classes import class_facts

    data = Path(__file__).parent.parent / "data"
    h100 = read_environment(str(data / "gpu_speed" / "h100-2026-11-27e" / "detect.json"))
    h200 = read_environment(str(data / "gpu_h200" / "detect.json"))
    matrix, fleet = _fleet(tmp_path, {"h100": h100, "h200": h200, "h100b": {**h100, "hostname": "b"}})
    facts = [class_facts(e) for e in fleet.environments]  # the files in name order: h100, h100b, h200
    assert [k for k in facts[0] if facts[0][k] != facts[2][k]] == ["gpus"] and facts[0] == facts[1]
    assert [c.nodes for c in fleet.classes] == [["h100", "h100b"], ["h200"]]
    assert len({fleet.solver_key(c) for c in fleet.classes}) == 1


def test_class_descriptions_and_ids_are_exact():
    """The one line people read for a class, and the id: c- and 10 hex digits of the SHA-256 of the canonical
    JSON of the facts (the same facts give the same id on every machine)."""
    import hashlib

    from cudamatrix.fleet.classes import abbreviate, class_facts, class_id, describe, group
    from cudamatrix.models import Environment
    from cudamatrix.schema import validate

    h100 = validate(Environment, saved("h100_driver580"), "test")
    facts = class_facts(h100)
    canonical = json.dumps(facts, sort_keys=True, separators=(",", ":"))
    assert class_id(facts) == "c-" + hashlib.sha256(canonical.encode()).hexdigest()[:10]
    two = {**facts, "gpus": [["NVIDIA H100 80GB HBM3", "9.0", 81559]] * 2 + [["", "", 0]],
           "toolkits": ["12.4", "13.0"]}
    assert describe(two) == ("2x NVIDIA H100 80GB HBM3 (9.0), GPU (?); driver 580.65.06; toolkit 12.4, 13.0; "
                             f"Python {facts['python']}; linux_x86_64")
    bare = {"platform": None, "gpus": [], "driver": {"version": None, "cuda_version": None, "status": "absent"},
            "toolkits": [], "python": None}
    assert describe(bare) == "no GPU; driver absent; Python ?; ?"
    cls = group([("n1", h100)])[0]
    assert cls.to_dict() == {"id": class_id(facts), "description": describe(facts), "facts": facts, "nodes": ["n1"]}
    assert cls.members == [0]
    assert abbreviate(["a", "b", "c"]) == "a, b, c"
    assert abbreviate([f"n{i}" for i in range(7)]) == "n0, n1, n2, n3, n4 and 2 more"
    assert abbreviate(["a", "b", "c"], limit=2) == "a, b and 1 more"
    assert abbreviate([f"n{i}" for i in range(5)]) == "n0, n1, n2, n3, n4"


def test_class_facts_read_every_fact_that_splits_a_class():
    from cudamatrix.fleet.classes import class_facts
    from cudamatrix.models import Environment
    from cudamatrix.schema import validate

    base = saved("h100_driver580")
    facts = class_facts(validate(Environment, base, "test"))
    gpu = base["gpus"][0]
    assert facts["gpus"] == [[gpu["name"], gpu["compute_capability"], gpu["memory_total_mib"]]]
    assert facts["driver"] == {"version": base["driver"]["version"], "cuda_version": base["driver"]["cuda_version"],
                               "status": base["driver"]["status"]}
    assert facts["platform"] == base["python"]["platform"] and facts["python"] == "3.11"
    changed = [{**base, "gpus": [{**gpu, "memory_total_mib": 40960}]},
               {**base, "gpus": [{**gpu, "compute_capability": "8.0"}]},
               {**base, "driver": {**base["driver"], "cuda_version": "12.9"}},
               {**base, "driver": {**base["driver"], "status": "error"}},
               {**base, "toolkits": [{"version": "12.4", "path": "/usr/local/cuda-12.4", "source": "nvcc"}]},
               {**base, "python": {**base["python"], "platform": "linux_aarch64"}}]
    for env in changed:
        assert class_facts(validate(Environment, env, "test")) != facts, env
    no_python = class_facts(validate(Environment, {**base, "python": {"platform": "linux_x86_64"}}, "test"))
    assert no_python["python"] is None


def _patch_levels(env: dict, count: int) -> list[dict]:
    """The machine under ``count`` patch levels of its driver, from its own up (nodes of one driver branch)."""
    head, _, last = env["driver"]["version"].rpartition(".")
    return [{**env, "driver": {**env["driver"], "version": f"{head}.{int(last) + k:0{len(last)}d}"}}
            for k in range(count)]


def test_node_files_alike_are_read_as_each_alone(tmp_path: Path):
    """load_nodes validates files alike but for hostname/captured_at/timings once: every Environment equals the
    file's own load_environment, and a file alike but for a bad per-node value is refused with its own message."""
    from cudamatrix.detect import load_environment
    from cudamatrix.errors import UsageError
    from cudamatrix.fleet.nodes import load_nodes

    fleet = tmp_path / "fleet"
    kinds = _patch_levels(saved("doctor_cpu_wheel_on_t4"), 2) + [saved("doctor_kaggle_p100_cu128")]
    paths = [write(fleet, f"n{i}", {**kinds[i % 3], "hostname": f"n{i}", "captured_at": f"2026-11-26T00:00:0{i}Z",
                                    "timings_ms": {"total": 100.0 + i}}) for i in range(9)]
    paths.append(write(fleet, "n9", {**kinds[0], "hostname": None, "timings_ms": {"total": 5}}))  # an int: validated
    envs, same = load_nodes(paths)
    assert same == [0, 0, 2, 0, 0, 2, 0, 0, 2, 0]  # n1 is n0 under another patch level of its driver
    for env, path in zip(envs, paths, strict=True):
        assert env == load_environment(str(path))
    bad = write(fleet, "n10", {**kinds[1], "hostname": ["not", "text"]})
    with pytest.raises(UsageError) as alone:
        load_environment(str(bad))
    with pytest.raises(UsageError) as grouped:
        load_nodes([*paths, bad])
    assert grouped.value.message == alone.value.message and "n10.json: hostname" in alone.value.message


def test_node_files_alike_but_for_the_driver_are_read_and_targeted_as_each_alone(tmp_path: Path):
    """Files alike but for a dotted driver version share one validation and one Target (load_nodes,
    node_targets): on a mixed fleet (dotted versions, a version with a suffix, none stated with only the CUDA the
    driver runs, none at all, a status that differs) every Environment equals the
    file's own load_environment and every Target its own from_environment; a file alike but for a driver version
    that is not a version, or not text, is refused with its own message."""
    from cudamatrix.detect import load_environment
    from cudamatrix.errors import UsageError
    from cudamatrix.fleet.nodes import load_nodes
    from cudamatrix.fleet.nodetargets import node_targets
    from cudamatrix.matrix.load import load_matrix
    from cudamatrix.solve.target import from_environment

    base = saved("doctor_cpu_wheel_on_t4")
    drv = base["driver"]
    drivers = [drv, {**drv, "version": "535.104.06"}, {**drv, "version": "550.54.15"},
               {**drv, "version": "535.104.05.post1"}, {**drv, "version": None},
               {k: v for k, v in drv.items() if k != "version"}, {**drv, "version": None, "cuda_version": "12.4"},
               {**drv, "version": "575.51.03", "status": "no_device"}]
    fleet = tmp_path / "fleet"
    paths = [write(fleet, f"n{i:02d}", {**base, "driver": d, "hostname": f"n{i:02d}"})
             for i, d in enumerate(drivers + drivers[::-1])]
    matrix = load_matrix(None)
    alone = [load_environment(str(p)) for p in paths]
    envs, same = load_nodes(paths)
    assert envs == alone
    assert len(set(same)) < len(paths)  # shared: the dotted versions take the first one's validation
    names = [p.stem for p in paths]
    assert node_targets(matrix, envs, same, names) == \
        [from_environment(env, matrix, name=name) for env, name in zip(alone, names, strict=True)]
    for number, version in enumerate(("5x5.104.05", 535)):  # not a version; a number, not text
        bad = write(fleet, f"n9{number}", {**base, "driver": {**drv, "version": version}, "hostname": "n99"})
        with pytest.raises(UsageError) as own:
            load_environment(str(bad))
        with pytest.raises(UsageError) as grouped:
            load_nodes([*paths, bad])
        assert grouped.value.message == own.value.message and f"n9{number}.json: driver.version" in own.value.message


@pytest.mark.parametrize("per_class", [2, 1])
def test_per_class_locks_shared_by_classes_alike_equal_their_own_solves(tmp_path: Path, monkeypatch, per_class):
    """Classes that differ only in a driver patch level get one solve (lock_per_class): the locks and locks.json
    (the unsolved classes' causes with their own driver and machines) equal those of a solve per class, for
    classes of two nodes and of one."""
    from cudamatrix.fleet import perclass
    from cudamatrix.matrix.load import load_matrix

    fleet = tmp_path / "fleet"
    kinds = _patch_levels(saved("doctor_cpu_wheel_on_t4"), 3) + \
        _patch_levels(saved("doctor_kaggle_p100_cu128"), 3)
    for i in range(6 * per_class):
        write(fleet, f"n{i:02d}", {**kinds[i % 6], "hostname": f"n{i:02d}"})
    matrix = load_matrix(None)
    loaded = perclass.load_fleet(matrix, [fleet])
    assert len(loaded.classes) == 6
    shared = perclass.lock_per_class(matrix, loaded, ["torch==2.15.0"])
    monkeypatch.setattr(perclass, "_as_for", lambda answer, first, targets: None)  # each class solved itself
    alone = perclass.lock_per_class(matrix, loaded, ["torch==2.15.0"])
    assert shared == alone
    unsolved = shared[1]["unsolved"]
    assert len(unsolved) == 6 and len({json.dumps(u["causes"]) for u in unsolved}) == 6  # 2.15.0 needs driver 580
    for entry in unsolved:
        quoted = " ".join(c["message"] for c in entry["causes"])
        assert entry["facts"]["driver"]["version"] in quoted
        assert all(c["machines"] in ([], entry["nodes"]) for c in entry["causes"])


def _counting_solves(monkeypatch) -> list[list[str]]:
    """The node names of every solve the solver is asked for from now on (its entry point, wrapped)."""
    from cudamatrix.solve import solver

    calls: list[list[str]] = []
    real = solver.solve

    def solve(targets, *args, **kwargs):
        calls.append([t.name for t in targets])
        return real(targets, *args, **kwargs)

    monkeypatch.setattr(solver, "solve", solve)
    return calls


@pytest.mark.slow
def test_classes_alike_for_the_rules_are_solved_once_each_in_their_own_words(tmp_path: Path, monkeypatch):
    """Three patch levels of a T4's driver and three of a P100's (six classes, two kinds the rules cannot tell
    apart): lock_per_class asks the solver once for the fleet and once per kind, and each class's answer is the
    NoSolution of its own solve in every part (message, hint, causes, ways out, rejected candidates); so it is for
    two patch levels of an H100's driver under Python 3.8, whose words quote no driver."""
    from cudamatrix.fleet import perclass
    from cudamatrix.solve.solver import parse_request

    kinds = _patch_levels(saved("doctor_cpu_wheel_on_t4"), 3) + _patch_levels(saved("doctor_kaggle_p100_cu128"), 3)
    matrix, fleet = _fleet(tmp_path, {f"n{i}": {**env, "hostname": f"n{i}"} for i, env in enumerate(kinds)})
    assert len(fleet.classes) == 6
    calls = _counting_solves(monkeypatch)
    mapping = perclass.lock_per_class(matrix, fleet, ["torch==2.15.0"])[1]
    assert len(mapping["unsolved"]) == 6
    assert sorted(map(len, calls)) == [1, 1, 6] and len({n for c in calls[1:] for n in c}) == 2
    request = parse_request(["torch==2.15.0"], None)
    h100 = saved("h100_driver580")
    old_python = {**h100, "python": {**h100["python"], "version": "3.8.10"},  # words that quote no driver
                  "driver": {**h100["driver"], "version": "580.95.05"}}  # above 580.65.06, which the matrix states
    python_fleet = _fleet(tmp_path / "py38", {f"p{i}": env for i, env in enumerate(_patch_levels(old_python, 2))})
    kinds_fleet = (matrix, fleet)
    for (matrix, fleet), solves, quoted in ((kinds_fleet, 2, True), (python_fleet, 1, False)):
        calls.clear()
        answers = list(perclass._per_class(matrix, fleet, request, None))
        assert len(calls) == solves and [c for c, _ in answers] == fleet.classes
        for cls, answer in answers:
            own = _solved(matrix, fleet.targets_of(cls), ["torch==2.15.0"])
            assert (answer.message, answer.hint, answer.causes, answer.ways_out, answer.rejected) == \
                (own.message, own.hint, own.causes, own.ways_out, own.rejected)
            assert answer.rejected and (fleet.environments[cls.members[0]].driver.version in answer.message) == quoted


@pytest.mark.slow
def test_classes_alike_are_solved_each_when_the_words_quote_a_node_or_a_driver_that_is_not_a_desktop_one(
        tmp_path: Path, monkeypatch):
    """A shared answer is refused when its words quote the first class's node by name (nodes named "torch",
    "driver" and "build": words of its sentences) or a driver that is not a desktop driver version (99.1 and 99.2,
    571 and 571.0.1: alike for the rules), and never made for drivers of one branch on either side of a version
    the matrix states (525.53.01 and 525.85.12, around CUDA 12.0's 525.60.13): every class is then solved
    itself, and its causes are its own."""
    from cudamatrix.fleet import perclass

    t4 = saved("doctor_cpu_wheel_on_t4")
    named = dict(zip(("torch", "driver", "build"), _patch_levels(t4, 3), strict=True))

    def drivers(*versions: str) -> dict[str, dict]:
        return {f"n{i}": {**t4, "driver": {**t4["driver"], "version": v}} for i, v in enumerate(versions)}

    calls = _counting_solves(monkeypatch)
    for folder, nodes in (("named", named), ("odd", drivers("99.1", "99.2")), ("mixed", drivers("571", "571.0.1")),
                          ("apart", drivers("525.53.01", "525.85.12"))):
        matrix, fleet = _fleet(tmp_path / folder, nodes)
        assert len(fleet.classes) == len(nodes)
        calls.clear()
        mapping = perclass.lock_per_class(matrix, fleet, ["torch==2.15.0"])[1]
        assert sorted(map(len, calls)) == [1] * len(nodes) + [len(nodes)]
        for entry in mapping["unsolved"]:
            own = _solved(matrix, [fleet.targets[fleet.names.index(n)] for n in entry["nodes"]], ["torch==2.15.0"])
            assert (entry["causes"], entry["ways_out"]) == (own.detail["causes"], own.detail["ways_out"])


# --- lock_per_class, check_fleet and doctor_fleet in this process, against the solver's own answers ---------------
# (public functions only: load_fleet, lock_per_class, check_fleet, doctor_fleet, slurm_feature; the expected
# values come from the solver, lock writers, check and diagnose each called on the class's own nodes)

def lock_per_class(*args, **kwargs):
    from cudamatrix.fleet.perclass import lock_per_class as locks

    return locks(*args, **kwargs)


def _solved(matrix, targets: list, requirements: list[str], mirror: str | None = None):
    from cudamatrix.errors import NoSolution
    from cudamatrix.solve.indexes import with_mirror
    from cudamatrix.solve.solver import parse_request, solve

    try:
        return with_mirror(solve(targets, parse_request(requirements, None), matrix), mirror)
    except NoSolution as exc:
        return exc


def _entry(cls, lock: str, sol, pip: dict) -> dict:
    """A class's locks.json entry as the README documents it, spelt out."""
    from cudamatrix.fleet.perclass import slurm_feature

    return {**cls.to_dict(), "lock": lock, "frameworks": [f"{f.name} {f.version} {f.variant}" for f in sol.frameworks],
            "cuda": sol.cuda, "cudnn": sol.cudnn,
            "ray": {"label_selector": {"cudamatrix-class": cls.id}, "node_labels": {"cudamatrix-class": cls.id},
                    "runtime_env": {"pip": pip}},
            "slurm": {"feature": slurm_feature(cls.id), "constraint": f"--constraint={slurm_feature(cls.id)}"}}


def test_load_fleet_reads_every_node_file_in_name_order(tmp_path: Path):
    from cudamatrix.detect import load_environment

    matrix, fleet = _fleet(tmp_path, {"b": saved("doctor_cudnn8_shadows_wheel_cudnn9"),
                                      "a": saved("doctor_cpu_wheel_on_t4"), "a2": saved("doctor_cpu_wheel_on_t4")})
    assert fleet.names == ["a", "a2", "b"]
    assert fleet.environments == [load_environment(str(tmp_path / "fleet" / f"{n}.json")) for n in fleet.names]
    assert [t.name for t in fleet.targets] == fleet.names
    assert [c.nodes for c in fleet.classes] == [["a", "a2"], ["b"]]
    assert [fleet.targets_of(c) for c in fleet.classes] == [fleet.targets[:2], fleet.targets[2:]]
    h100 = saved("h100_driver580")
    unnamed = {**h100, "gpus": [{**h100["gpus"][0], "compute_capability": None}]}
    looked_up = _fleet(tmp_path / "cc", {"u": unnamed})[1]
    assert [g.compute_capability for g in looked_up.targets[0].gpus] == ["9.0"]  # from the matrix's GPU table
    one = _fleet(tmp_path / "one", {"b": saved("doctor_cudnn8_shadows_wheel_cudnn9")})[1]
    assert one.names == ["b"] and one.environments == fleet.environments[2:]


def test_one_set_for_the_fleet_is_one_lock_and_every_class_maps_to_it(tmp_path: Path):
    """Two T4 classes (drivers 535 and 550) that one torch build fits: fleet.txt, the pins of a solve over every
    node, and each class's Ray and Slurm placement (passthrough requirements keep the default index: extra)."""
    from cudamatrix.lock.lockfile import requirements_txt, uv_project

    matrix, fleet = _fleet(tmp_path, {"a": saved("doctor_cpu_wheel_on_t4"), "a2": saved("doctor_cpu_wheel_on_t4"),
                                      "b": saved("doctor_cudnn8_shadows_wheel_cudnn9")})
    request = ["torch", "numpy<2"]
    joint = _solved(matrix, fleet.targets, request)
    files, mapping = lock_per_class(matrix, fleet, request)
    assert files == {"fleet.txt": requirements_txt(joint, fleet.targets, ["numpy<2"])}
    index = joint.frameworks[0].index_url
    assert index and index in files["fleet.txt"]
    pip = {"packages": [p.requirement() for p in joint.packages] + ["numpy<2"],
           "pip_install_options": ["--extra-index-url", index]}
    assert mapping == {"schema_version": 1, "request": request, "format": "requirements", "single": True,
                       "nodes": 3, "classes": [_entry(c, "fleet.txt", joint, pip) for c in fleet.classes],
                       "unsolved": [], "joint_causes": []}
    assert mapping["classes"][0]["slurm"]["feature"] == "cudamatrix_" + fleet.classes[0].id[2:].join(["c_", ""])
    uv_files, uv_mapping = lock_per_class(matrix, fleet, request, fmt="uv")
    assert uv_files == {"fleet.toml": uv_project(joint, fleet.targets, ["numpy<2"])}
    assert tomlread.loads(uv_files["fleet.toml"])["project"]["dependencies"][-1] == "numpy<2"
    assert uv_mapping["format"] == "uv" and {c["lock"] for c in uv_mapping["classes"]} == {"fleet.toml"}
    seen = []
    own = lock_per_class(matrix, fleet, request, write=lambda *args, **kw: seen.append((args, kw)) or "mine")[0]
    assert own == {"fleet.txt": "mine"} and seen == [((joint, fleet.targets, ["numpy<2"]), {"find_links": []})]


def test_one_framework_index_alone_is_the_index_url_and_a_mirror_replaces_it(tmp_path: Path):
    from cudamatrix.lock.lockfile import requirements_txt

    matrix, fleet = _fleet(tmp_path, {"a": saved("doctor_cpu_wheel_on_t4")})
    mirror = "https://mirror.invalid/pytorch"
    joint = _solved(matrix, fleet.targets, ["torch"], mirror)
    index = joint.frameworks[0].index_url
    assert index.startswith(mirror + "/")
    files, mapping = lock_per_class(matrix, fleet, ["torch"], mirror=mirror)
    assert files == {"fleet.txt": requirements_txt(joint, fleet.targets, [])}
    assert f"--index-url {index}" in files["fleet.txt"] and "download.pytorch.org" not in files["fleet.txt"]
    pip = {"packages": [p.requirement() for p in joint.packages], "pip_install_options": ["--index-url", index]}
    assert mapping["classes"] == [_entry(fleet.classes[0], "fleet.txt", joint, pip)]
    # a framework from the default index needs no index option at all
    plain = _solved(matrix, fleet.targets, ["tensorflow"])
    tf = lock_per_class(matrix, fleet, ["tensorflow"])[1]["classes"][0]["ray"]["runtime_env"]
    assert tf == {"pip": {"packages": [p.requirement() for p in plain.packages]}}


def test_classes_without_one_set_get_their_own_locks_and_the_unsolved_their_causes(tmp_path: Path):
    """torch 2.15.0 needs driver 580: the H100 class gets a lock of its own, the T4 class on driver 535 none, and
    locks.json carries the joint solve's causes and the T4 class's own causes and ways out."""
    from cudamatrix.errors import NoSolution
    from cudamatrix.lock.lockfile import uv_project
    from cudamatrix.solve.indexes import index_layout

    matrix, fleet = _fleet(tmp_path, {"h1": saved("h100_driver580"), "h2": saved("h100_driver580"),
                                      "t4": {**saved("doctor_cpu_wheel_on_t4"),
                                             "python": saved("h100_driver580")["python"]}})
    h100, t4 = fleet.classes
    assert h100.nodes == ["h1", "h2"] and t4.nodes == ["t4"]
    request = ["torch==2.15.0", "numpy<2"]
    joint = _solved(matrix, fleet.targets, request)
    own, blocked = _solved(matrix, fleet.targets_of(h100), request), _solved(matrix, fleet.targets_of(t4), request)
    assert isinstance(joint, NoSolution) and isinstance(blocked, NoSolution) and not isinstance(own, NoSolution)
    files, mapping = lock_per_class(matrix, fleet, request, fmt="uv")
    name = f"{h100.id}.toml"
    assert files == {name: uv_project(own, fleet.targets_of(h100), ["numpy<2"])}
    assert tomlread.loads(files[name])["project"]["dependencies"][-1] == "numpy<2"
    assert "# target h1:" in files[name] and "# target t4:" not in files[name]
    pip = {"packages": [p.requirement() for p in own.packages] + ["numpy<2"]}
    index_url, extra = index_layout(own.packages, True)
    if index_url or extra:
        pip["pip_install_options"] = (["--index-url", index_url] if index_url else []) + \
            [a for u in extra for a in ("--extra-index-url", u)]
    assert mapping == {"schema_version": 1, "request": request, "format": "uv", "single": False, "nodes": 3,
                       "classes": [_entry(h100, name, own, pip)],
                       "unsolved": [{**t4.to_dict(), "causes": blocked.detail["causes"],
                                     "ways_out": blocked.detail["ways_out"]}],
                       "joint_causes": joint.detail["causes"]}
    assert mapping["unsolved"][0]["causes"] and mapping["joint_causes"]


def test_classes_the_solver_cannot_tell_apart_share_an_answer_and_the_rest_are_still_solved(tmp_path: Path):
    """The H100s with less memory are their own class, but the solver reads the same facts for them: the same pins
    (a lock of their own); the T4 class after them is still answered."""
    h100 = saved("h100_driver580")
    small = {**h100, "gpus": [{**h100["gpus"][0], "memory_total_mib": 40960}]}
    t4 = {**saved("doctor_cpu_wheel_on_t4"), "python": h100["python"]}
    matrix, fleet = _fleet(tmp_path, {"h1": h100, "h2": h100, "h3": h100, "s1": small, "s2": small, "t4": t4})
    assert [c.nodes for c in fleet.classes] == [["h1", "h2", "h3"], ["s1", "s2"], ["t4"]]
    assert fleet.solver_key(fleet.classes[0]) == fleet.solver_key(fleet.classes[1])  # one answer for both
    files, mapping = lock_per_class(matrix, fleet, ["torch==2.15.0"])
    assert [c["nodes"] for c in mapping["classes"]] == [["h1", "h2", "h3"], ["s1", "s2"]]
    assert [u["nodes"] for u in mapping["unsolved"]] == [["t4"]]
    big, less = mapping["classes"]
    assert big["frameworks"] == less["frameworks"] and big["lock"] != less["lock"]
    pins = [line for line in files[big["lock"]].splitlines() if not line.startswith("#")]
    assert pins == [line for line in files[less["lock"]].splitlines() if not line.startswith("#")]


def test_a_gpu_without_a_usable_driver_does_not_split_the_cpu_set(tmp_path: Path):
    """Locks per class split a fleet only for GPUs that could run a CUDA build: a node whose GPU has no usable
    driver takes the CPU set with the rest (one lock); with a usable GPU the cause is said in words."""
    h100 = saved("h100_driver580")
    cpu = {**saved("doctor_no_driver_cpu_only_is_fine"), "python": h100["python"]}
    dead = {**h100, "driver": {**h100["driver"], "status": "error"}}  # the GPU is there, its driver broken
    matrix, fleet = _fleet(tmp_path, {"cpu": cpu, "dead": dead})
    assert any(t.has_gpu for t in fleet.targets) and not any(t.driver_usable for t in fleet.targets if t.has_gpu)
    files, mapping = lock_per_class(matrix, fleet, ["torch"])
    assert mapping["single"] is True and list(files) == ["fleet.txt"] and mapping["joint_causes"] == []
    # per class: the T4 class's own build comes from the PyTorch index, moved to the mirror
    t4 = {**saved("doctor_cpu_wheel_on_t4"), "python": h100["python"]}
    matrix, fleet = _fleet(tmp_path / "3", {"cpu": cpu, "t4": t4})
    mirror = "https://mirror.invalid/pytorch"
    files, mapping = lock_per_class(matrix, fleet, ["torch"], mirror=mirror)
    assert mapping["single"] is False
    [t4_entry] = [c for c in mapping["classes"] if c["nodes"] == ["t4"]]
    options = t4_entry["ray"]["runtime_env"]["pip"]["pip_install_options"]
    assert options[1].startswith(mirror + "/") and mirror in files[t4_entry["lock"]]
    assert "download.pytorch.org" not in files[t4_entry["lock"]]
    matrix, fleet = _fleet(tmp_path / "2", {"cpu": cpu, "gpu": h100})
    causes = lock_per_class(matrix, fleet, ["torch"])[1]["joint_causes"]
    assert causes == [{"rule": "cpu_only", "machines": ["cpu"],
                       "message": "some nodes have no usable GPU: the one set for every node would be the GPU build, "
                                  "so each class gets its own lock (a CPU build where there is no GPU)"}]


def test_check_fleet_with_a_file_that_fits_every_node(tmp_path: Path):
    from cudamatrix.errors import UsageError
    from cudamatrix.fleet.perclass import check_fleet
    from cudamatrix.solve.checks import check_requirements

    matrix, fleet = _fleet(tmp_path, {"a": saved("doctor_cpu_wheel_on_t4"), "a2": saved("doctor_cpu_wheel_on_t4"),
                                      "b": saved("doctor_cudnn8_shadows_wheel_cudnn9")})
    text = "torch==2.5.1\n"
    joint = check_requirements(matrix, fleet.targets, None, text, "req.txt", None)
    assert joint["fits"] is True
    result = check_fleet(matrix, fleet, text, "req.txt")
    assert result == {"fits": True, "nodes": 3, "blocking": [],
                      **{k: v for k, v in joint.items() if k != "targets"},
                      "classes": [{**c.to_dict(), "fits": True} for c in fleet.classes]}
    mirror = "https://mirror.invalid/pytorch"
    text = f"--index-url {mirror}/cu124\ntorch==2.5.1\n"  # the mirror's cu124 folder: known only with --mirror
    mirrored = check_fleet(matrix, fleet, text, "req.txt", mirror)
    assert mirrored["fits"] is True and mirrored["checked"] == ["torch==2.5.1+cu124"]
    unknown = check_fleet(matrix, fleet, text, "req.txt")
    assert unknown["fits"] is False and "--mirror" in " ".join(unknown["joint_problems"])
    with pytest.raises(UsageError) as refused:  # a line check cannot read: refused with the file's own name
        check_fleet(matrix, fleet, "-r other.txt\n", "mine.txt")
    assert refused.value.message.startswith("mine.txt:1: -r")


def test_check_fleet_names_the_classes_a_file_blocks(tmp_path: Path):
    from cudamatrix.fleet.perclass import check_fleet
    from cudamatrix.solve.checks import check_requirements

    h100 = saved("h100_driver580")
    other = {**h100, "packages": {**h100.get("packages", {}), "torch": "2.8.0+cu128"}}  # installed sets differ:
    matrix, fleet = _fleet(tmp_path, {"h1": h100, "h2": other,  # with a file they are one class all the same
                                      "t4": {**saved("doctor_cpu_wheel_on_t4"), "python": h100["python"]}})
    text = "torch==2.15.0\n"
    joint = check_requirements(matrix, fleet.targets, None, text, "req.txt", None)
    assert joint["fits"] is False
    result = check_fleet(matrix, fleet, text, "req.txt")
    entries = []
    for cls in fleet.classes:
        one = check_requirements(matrix, fleet.targets_of(cls), None, text, "req.txt", None)
        entries.append({**cls.to_dict(), "nodes": cls.nodes, "fits": one["fits"], "checked": one["checked"],
                        "problems": one["problems"], "ways_out": one.get("ways_out", [])})
    assert [e["fits"] for e in entries] == [True, False] and entries[1]["problems"]
    assert result == {"fits": False, "nodes": 3, "classes": entries, "blocking": [entries[1]],
                      "joint_problems": joint["problems"], "checked": joint["checked"]}
    # a file from a mirror of the PyTorch index: each class is checked knowing the mirror too
    mirror = "https://mirror.invalid/pytorch"
    mirrored = check_fleet(matrix, fleet, f"--index-url {mirror}/cu130\ntorch==2.15.0\n", "req.txt", mirror)
    assert [(c["nodes"], c["fits"]) for c in mirrored["classes"]] == [(["h1", "h2"], True), (["t4"], False)]


def test_check_fleet_without_a_file_checks_each_installed_set_of_a_class(tmp_path: Path):
    """Nodes of one class with different frameworks installed are checked apart, each with its own set."""
    from cudamatrix.fleet.perclass import check_fleet
    from cudamatrix.solve.checks import check_requirements

    t4 = saved("doctor_cpu_wheel_on_t4")
    other = {**t4, "packages": {**t4["packages"], "torch": "2.8.0+cu128"}}
    matrix, fleet = _fleet(tmp_path, {"a": t4, "b": other, "c": t4, "p100": saved("doctor_kaggle_p100_cu128")})
    t4_class, p100 = fleet.classes
    assert t4_class.nodes == ["a", "b", "c"] and p100.nodes == ["p100"]
    result = check_fleet(matrix, fleet, None, None)
    groups = [(t4_class, [0, 2]), (t4_class, [1]), (p100, [3])]
    entries = []
    for cls, members in groups:
        one = check_requirements(matrix, [fleet.targets[i] for i in members], fleet.environments[members[0]],
                                 None, None, None)
        entries.append({**cls.to_dict(), "nodes": [fleet.names[i] for i in members], "fits": one["fits"],
                        "checked": one["checked"], "problems": one["problems"], "ways_out": one.get("ways_out", [])})
    assert entries[0]["checked"] != entries[1]["checked"]
    assert [e["fits"] for e in entries] == [True, True, False]
    assert result == {"fits": False, "nodes": 4, "classes": entries, "blocking": [entries[2]]}
    healthy = check_fleet(*_fleet(tmp_path / "ok", {"a": t4, "c": t4}), None, None)
    assert healthy["fits"] is True and healthy["blocking"] == [] and "joint_problems" not in healthy


def test_doctor_fleet_says_each_finding_once_per_class_with_its_nodes(tmp_path: Path):
    from cudamatrix.diagnose.findings import diagnose
    from cudamatrix.fleet.perclass import doctor_fleet

    sick = saved("doctor_torch251_tf215_conflict")  # two errors
    matrix, fleet = _fleet(tmp_path, {"s1": sick, "s2": sick, "t4": saved("doctor_cudnn8_shadows_wheel_cudnn9")})
    result = doctor_fleet(matrix, fleet)
    codes = {f.code: f for f in diagnose(fleet.environments[0], matrix)}
    assert sorted(codes) == ["FRAMEWORK_CONFLICT", "NVIDIA_WHEEL_DRIFT"]
    warn = diagnose(fleet.environments[2], matrix)
    assert [f.severity for f in warn] == ["warning"]
    assert result == {
        "nodes": 3, "healthy": False, "matrix_version": matrix.meta.data_version,
        "classes": [
            {**fleet.classes[0].to_dict(), "healthy": False,
             "findings": [{"code": c, "severity": "error", "title": codes[c].title, "evidence": codes[c].evidence,
                           "fix": codes[c].fix, "nodes": ["s1", "s2"]} for c in sorted(codes)]},
            {**fleet.classes[1].to_dict(), "healthy": True,
             "findings": [{"code": warn[0].code, "severity": "warning", "title": warn[0].title,
                           "evidence": warn[0].evidence, "fix": warn[0].fix, "nodes": ["t4"]}]}]}
    # one class, a warning whose code sorts first on one node and two errors on another: errors come first
    shadow = saved("doctor_cudnn8_shadows_wheel_cudnn9")
    shadow = {**shadow, "driver": sick["driver"], "gpus": sick["gpus"], "toolkits": sick["toolkits"],
              "python": {**shadow["python"], "version": sick["python"]["version"],
                         "platform": sick["python"]["platform"]}}
    mixed = doctor_fleet(*_fleet(tmp_path / "m", {"n1": shadow, "n2": sick}))
    assert len(mixed["classes"]) == 1
    assert [(f["code"], f["nodes"]) for f in mixed["classes"][0]["findings"]] == [
        ("FRAMEWORK_CONFLICT", ["n2"]), ("NVIDIA_WHEEL_DRIFT", ["n2"]), ("LIBRARY_SHADOWED", ["n1"])]
    # a warning whose code sorts after an info finding's still comes first
    nvcc = saved("doctor_nvcc_newer_than_driver_is_harmless")
    planted = {**nvcc, "notes": [*nvcc.get("notes", []), {"probe": "unsafe library path",
                                                           "message": "LD_LIBRARY_PATH has an empty entry"}]}
    info = doctor_fleet(*_fleet(tmp_path / "i", {"x": planted}))["classes"][0]
    assert [(f["code"], f["severity"]) for f in info["findings"]] == [
        ("UNSAFE_LIBRARY_PATH", "warning"), ("TOOLKIT_NEWER_THAN_DRIVER", "info")]
    assert info["healthy"] is True
    well = doctor_fleet(*_fleet(tmp_path / "w", {"a": saved("doctor_healthy_a100_driver580")}))
    assert well["healthy"] is True and well["classes"][0]["healthy"] is True


def test_classes_alike_take_their_own_driver_where_the_rules_quoted_it_only(tmp_path: Path, monkeypatch):
    """Issue #41: a class alike for the rules gets the first one's NoSolution with its own driver put where the rules
    quoted the driver (rules.DriverWords), not the first driver's text replaced wherever it appears: a GPU named
    after that driver keeps its name. Before, a regular expression rewrote the name too."""
    from cudamatrix.fleet import perclass
    from cudamatrix.matrix.load import load_matrix

    t4 = saved("doctor_cpu_wheel_on_t4")
    base = {**t4, "driver": {**t4["driver"], "version": "561.1.1"},
            "gpus": [{**t4["gpus"][0], "name": "Lab card 561.1.1/561.1.2", "compute_capability": "12.0"}]}
    kinds = _patch_levels(base, 2)
    for i, env in enumerate(kinds):
        write(tmp_path / "fleet", f"n{i}", {**env, "hostname": f"n{i}"})
    matrix = load_matrix(None)
    fleet = perclass.load_fleet(matrix, [tmp_path / "fleet"])
    assert len(fleet.classes) == 2
    shared = perclass.lock_per_class(matrix, fleet, ["torch==2.15.0"])
    monkeypatch.setattr(perclass, "_as_for", lambda answer, first, targets: None)  # each class solved itself
    assert shared == perclass.lock_per_class(matrix, fleet, ["torch==2.15.0"])
    for entry in shared[1]["unsolved"]:  # the name quotes both drivers: whichever class is solved first
        quoted = " ".join(c["message"] for c in entry["causes"])
        assert f"driver {entry['facts']['driver']['version']} does not drive Lab card 561.1.1/561.1.2 " in quoted


def test_per_class_lock_carries_a_pyg_wheel_and_its_page(tmp_path: Path):
    """A PyG wheel in a per-class lock is pinned to the wheel its class's solution chose, with that page as
    --find-links in the lock and in the Ray runtime_env's pip options (issue #39: a lock carries the extension's
    file; the page rows are data/extensions.json's find_links, read from each package's own build workflow)."""
    from cudamatrix.fleet.perclass import lock_per_class
    from cudamatrix.solve.solver import parse_request, solve

    h100 = saved("h100_driver580")
    matrix, fleet = _fleet(tmp_path, {"a": h100, "b": h100})
    files, mapping = lock_per_class(matrix, fleet, ["torch", "torch-scatter"])
    sol = solve([fleet.targets[0]], parse_request(["torch", "torch-scatter"]), matrix)
    page = sol.pip_args[sol.pip_args.index("--find-links") + 1]
    pin = next(a for a in sol.pip_args if a.startswith("torch-scatter=="))
    (entry,) = mapping["classes"]
    lines = files[entry["lock"]].splitlines()
    assert f"--find-links {page}" in lines and pin in lines and "torch-scatter" not in lines
    pip = entry["ray"]["runtime_env"]["pip"]
    assert pin in pip["packages"] and pip["pip_install_options"][-2:] == ["--find-links", page]
