"""`cudamatrix detect` on the command line: the JSON envelope, human output, --env round trip, bad input."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from support.fakes import run_cli, spawn_cli

ENVELOPE_KEYS = {"schema_version", "command", "status", "exit_code", "data", "errors"}
ENV_KEYS = {"schema_version", "captured_at", "origin", "hostname", "driver", "gpus", "libraries", "toolkits", "python",
            "packages", "requirements", "frameworks", "file_conflicts", "library_loads", "extensions", "messages", "context", "notes",
            "timings_ms", "host", "child_stderr"}


@pytest.fixture(scope="module")
def live():
    done = spawn_cli(["detect", "--json"])  # the live detection of a process of its own
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


@pytest.mark.slow
def test_envelope_keys_and_timings(live):
    assert set(live) == ENVELOPE_KEYS
    assert (live["command"], live["status"], live["exit_code"], live["errors"]) == ("detect", "ok", 0, [])
    env = live["data"]["environment"]
    assert set(env) == ENV_KEYS
    assert env["origin"] == "live"
    assert {"python", "loader", "libraries", "total"} <= set(env["timings_ms"])
    assert env["python"]["executable"] and env["python"]["version"].startswith(f"{sys.version_info[0]}.")


@pytest.mark.slow
@pytest.mark.parametrize("whole", [True, False], ids=["envelope", "environment-only"])
def test_env_round_trip(live, tmp_path, whole):
    saved = tmp_path / "env.json"
    saved.write_text(json.dumps(live if whole else live["data"]["environment"]))
    done = run_cli(["detect", "--json", "--env", str(saved)])
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout)["data"]["environment"] == live["data"]["environment"]


@pytest.mark.slow
def test_env_file_with_a_bad_key_names_file_and_path(live, tmp_path):
    env = live["data"]["environment"]
    env["gpus"] = [{"index": 0, "name": "x", "bogus": 1}]
    env["driver"]["status"] = "sleepy"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(env))
    done = run_cli(["detect", "--json", "--env", str(bad)])
    assert done.returncode == 2
    message = json.loads(done.stdout)["errors"][0]["message"]
    assert "bad.json" in message and "gpus[0].bogus" in message and "driver.status" in message
    assert b"Traceback" not in done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("content", [b"", b"{not json", b"[1, 2]", b'{"command": "solve", "data": {}}'])
def test_env_file_not_an_environment(tmp_path, content):
    bad = tmp_path / "x.json"
    bad.write_bytes(content)
    done = run_cli(["detect", "--env", str(bad)])
    assert done.returncode == 2
    assert b"x.json" in done.stderr and b"Traceback" not in done.stderr


@pytest.mark.slow
def test_python_path_that_is_not_an_interpreter(tmp_path):
    done = run_cli(["detect", "--json", "--python", str(tmp_path / "nope")])
    assert done.returncode == 2 and "no Python interpreter" in json.loads(done.stdout)["errors"][0]["message"]
    script = tmp_path / "fake-python"
    script.write_text("#!/bin/sh\necho broken >&2\nexit 1\n")
    script.chmod(0o755)
    done = run_cli(["detect", "--python", str(script)])
    assert done.returncode == 2 and b"broken" in done.stderr and b"Traceback" not in done.stderr


def _other_python(version: str) -> Path | None:
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found = sorted(root.glob(f"{version}*/bin/python{version}")) if root.is_dir() else []
    return found[0] if found else None


@pytest.mark.slow
@pytest.mark.parametrize("version", ["3.6", "3.8"])
def test_python_probe_runs_in_an_older_interpreter(version):
    python = _other_python(version)
    if python is None:
        pytest.skip(f"no Python {version} interpreter here")
    done = run_cli(["detect", "--json", "--python", str(python)])
    assert done.returncode == 0, done.stderr.decode()
    info = json.loads(done.stdout)["data"]["environment"]["python"]
    assert info["version"].startswith(version + ".") and info["tags"][0].startswith("cp3")


@pytest.mark.slow
def test_python_2_is_refused_clearly():
    python = _other_python("2.7")
    if python is None:
        pytest.skip("no Python 2.7 here")
    done = run_cli(["detect", "--python", str(python)])
    assert done.returncode == 2 and b"Python >= 3.6" in done.stderr


def test_exclusive_sources(tmp_path):
    done = run_cli(["detect", "--env", "a.json", "--from", "b.txt"])
    assert done.returncode == 2 and b"exclusive" in done.stderr


@pytest.mark.slow
def test_human_summary():
    done = spawn_cli(["detect"])
    assert done.returncode == 0, done.stderr.decode()
    out = done.stdout.decode()
    assert "driver" in out and "python" in out and "detected in" in out
