"""`fleet gather --engine slurm` against a real Slurm: a one-node cluster on this machine (munged, slurmctld and
slurmd from the system packages, started by the test with their own configuration, ports and state folder, and
stopped afterwards). Skipped where those programs are not installed (`.ci/run` installs them where it can).

The task runs the real `cudamatrix detect --json` on the node, so the gathered environment is this machine's.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from support.fakes import run_cli

PROGRAMS = ("munged", "slurmctld", "slurmd", "srun", "sinfo")
pytestmark = pytest.mark.skipif(any(shutil.which(p) is None for p in PROGRAMS) or os.geteuid() != 0,
                                reason="needs Slurm and munge installed (slurmd runs jobs as root here)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


CONF = """ClusterName=cmtest
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={d}/munge.sock
CredType=cred/munge
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SchedulerType=sched/builtin
ReturnToService=2
MpiDefault=none
SwitchType=switch/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=cmtest Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


def _stop(pid_file: Path) -> None:
    try:
        pid = int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def slurm():
    # a short folder: munge's socket path must fit a Unix socket address
    d = Path(tempfile.mkdtemp(prefix="cmslurm"))
    host = socket.gethostname().split(".")[0]
    (d / "state").mkdir()
    (d / "spool").mkdir()
    key = d / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    conf = d / "slurm.conf"
    conf.write_text(CONF.format(host=host, d=d, ctld_port=_free_port(), d_port=_free_port(), cpus=os.cpu_count()))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    try:
        subprocess.run(["munged", "--force", f"--socket={d}/munge.sock", f"--key-file={key}",
                        f"--pid-file={d}/munged.pid", f"--log-file={d}/munged.log", f"--seed-file={d}/munged.seed"],
                       check=True, timeout=30)
        subprocess.run(["slurmctld", "-f", str(conf)], check=True, timeout=30, env=env)
        subprocess.run(["slurmd", "-f", str(conf)], check=True, timeout=30, env=env)
        deadline = time.monotonic() + 60
        state = ""
        while time.monotonic() < deadline:
            state = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, env=env,
                                   timeout=30).stdout.strip()
            if state == "idle":
                break
            time.sleep(0.5)
        assert state == "idle", (state, (d / "slurmctld.log").read_text()[-2000:])
        yield env, host
    finally:
        for name in ("slurmd", "slurmctld", "munged"):
            _stop(d / f"{name}.pid")
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.slow
def test_gather_through_a_real_srun(slurm, tmp_path: Path):
    env, host = slurm
    env = {k: v for k, v in env.items() if k != "CUDAMATRIX_DETECT_ENV"}
    # the job step runs `cudamatrix` from PATH on the node (srun exports this environment to it)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    out_dir = tmp_path / "fleet"
    run = subprocess.run([sys.executable, "-m", "cudamatrix", "fleet", "gather", "--engine", "slurm",
                          "--partition", "cmtest", "--nodes", "1", "-o", str(out_dir), "--json"],
                         capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, (run.stdout, run.stderr)
    index = json.loads((out_dir / "fleet.json").read_text())
    assert index["engine"] == "slurm" and index["failed"] == []
    assert [n["node"] for n in index["nodes"]] == [host] and index["nodes"][0]["engine_id"] == "0"
    node = json.loads((out_dir / f"{host}.json").read_text())
    # what the node's detect saw: this machine, through the interpreter srun ran
    assert node["origin"] == "live" and node["hostname"].split(".")[0] == host
    assert Path(node["python"]["executable"]).resolve() == Path(sys.executable).resolve()
    assert len(index["classes"]) == 1 and index["classes"][0]["nodes"] == [host]
    assert "[1/1] task 0: ok" in run.stderr
    # the folder is a fleet for solve
    solved = run_cli(["solve", "torch", "--env", str(out_dir), "--json"], env=env, text=True)  # in this process
    assert solved.returncode == 0 and json.loads(solved.stdout)["data"]["targets"][0]["description"].startswith(host)
