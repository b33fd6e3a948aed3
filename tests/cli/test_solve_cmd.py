"""solve / lock / check / env / doctor through the command line: envelopes, targets, bad input, fleets."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support import tomlread
from support.fakes import run_cli

from cudamatrix.solve.indexes import PYTORCH_INDEX_PREFIX

ENVELOPE = {"schema_version", "command", "status", "exit_code", "data", "errors"}
T4 = ["--driver", "535.104.05", "--gpu", "Tesla T4", "--python", "3.10"]


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """The CLI in this process."""
    return run_cli(list(args), env=dict(os.environ), input=stdin, timeout=180, text=True)


def envelope(out: subprocess.CompletedProcess) -> dict:
    doc = json.loads(out.stdout)
    assert set(doc) == ENVELOPE
    assert doc["exit_code"] == out.returncode
    return doc


def environment(driver="535.104.05", gpus=(("Tesla T4", "7.5"),), python="3.10.12", packages=None,
                frameworks=()) -> dict:
    return {"origin": "file", "driver": {"version": driver, "cuda_version": None, "status": "ok"},
            "gpus": [{"index": i, "name": n, "compute_capability": cc} for i, (n, cc) in enumerate(gpus)],
            "python": {"version": python, "platform": "linux_x86_64"},
            "packages": packages or {}, "frameworks": list(frameworks)}


@pytest.mark.slow
def test_solve_target_flags_json():
    out = cli("solve", "torch", "torchvision", *T4, "--json")
    assert out.returncode == 0, out.stderr
    doc = envelope(out)
    sol = doc["data"]["solution"]
    assert doc["command"] == "solve" and doc["status"] == "ok"
    names = {p["name"]: p["version"] for p in sol["packages"]}
    assert "torch" in names and "torchvision" in names
    assert sol["cuda"].startswith("12.") and sol["variant"].startswith("cu12")
    # a PyTorch index build: its index first, then exactly the two pins, in request order
    assert sol["index_url"] == f"https://download.pytorch.org/whl/{sol['variant']}" and sol["extra_index_urls"] == []
    assert sol["pip_args"] == ["--index-url", sol["index_url"], f"torch=={names['torch']}",
                               f"torchvision=={names['torchvision']}"]
    assert names["torch"].endswith(f"+{sol['variant']}") and names["torchvision"].endswith(f"+{sol['variant']}")
    for key in ("packages", "variant", "index_url", "extra_index_urls", "pip_args", "env", "rejected"):
        assert key in sol
    # candidates that cannot run on a T4 with driver 535 were rejected, each with its rule
    assert sol["rejected"] and all(r["reasons"] and r["rules"] for r in sol["rejected"])


@pytest.mark.slow
def test_solve_human_output_has_pip_command_and_explain():
    out = cli("solve", "torch", *T4, "--explain")
    assert out.returncode == 0, out.stderr
    assert "pip install" in out.stdout and "trace" in out.stdout and "rejected" in out.stdout


@pytest.mark.slow
def test_no_solution_exit_3_with_causes_and_ways_out():
    out = cli("solve", "torch==2.5.1", "--driver", "570.124.04", "--gpu", "NVIDIA GeForce RTX 5090", "--json")
    assert out.returncode == 3
    doc = envelope(out)
    assert doc["status"] == "no_solution"
    assert any(c["rule"] == "arch" for c in doc["data"]["causes"])
    assert doc["data"]["ways_out"]
    human = cli("solve", "torch==2.5.1", "--driver", "570.124.04", "--gpu", "sm_120")
    assert human.returncode == 3 and "no kernel image" in human.stderr and "ways out" in human.stderr


@pytest.mark.slow
@pytest.mark.parametrize("args, needle", [
    (["solve", "torch>>2", *T4], "cannot parse requirement"),
    (["solve", "torch", "--gpu", "Tesla T5"], "did you mean"),
    (["solve", "torch", "--driver", "five-three-five"], "not a driver version"),
    (["solve", "torch", "--platform", "amiga"], "--platform"),
    (["lock", "torch", *T4, "--format", "conda"], "--format"),
    (["env", "--shell", "tcsh"], "--shell"),
])
def test_bad_input_is_exit_2_without_traceback(args, needle):
    out = cli(*args)
    assert out.returncode == 2, out.stdout + out.stderr
    assert needle in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.slow
def test_gpu_alias_matches_and_unknown_gpu_suggests_the_closest_name():
    out = cli("solve", "torch", "--gpu", "RTX 4090", "--json")
    assert out.returncode == 0, out.stderr
    assert [t["description"] for t in envelope(out)["data"]["targets"]] == [
        "target: GeForce RTX 4090 (sm 8.9); driver unknown; Python any; linux_x86_64"]
    out = cli("solve", "torch", "--gpu", "GeForce RTX 4099", "--json")
    assert out.returncode == 2
    doc = envelope(out)
    assert doc["schema_version"] == 1 and doc["status"] == "usage_error" and doc["data"] == {}
    (error,) = doc["errors"]
    assert error["type"] == "UsageError"
    assert error["message"] == "--gpu 'GeForce RTX 4099': no GPU of that name in the matrix"
    assert error["hint"].startswith("did you mean: 'GeForce RTX 4090', ")


@pytest.mark.slow
def test_contradictory_options(tmp_path: Path):
    a = tmp_path / "a.json"
    a.write_text(json.dumps(environment()))
    b = tmp_path / "b.json"
    b.write_text(json.dumps(environment()))
    out = cli("solve", "torch", "--env", str(a), "--env", str(b), "--driver", "550.54.15")
    assert out.returncode == 2 and "cannot be combined" in out.stderr
    out = cli("doctor", "--env", str(a), "--from", str(b))
    assert out.returncode == 2 and "cannot be combined" in out.stderr


@pytest.mark.slow
def test_fleet_of_saved_environments_names_blocking_machines(tmp_path: Path):
    files = []
    for i in range(3):
        p = tmp_path / f"t4-{i}.json"
        p.write_text(json.dumps(environment()))
        files += ["--env", str(p)]
    k80 = tmp_path / "old-k80.json"
    k80.write_text(json.dumps(environment(driver="470.256.02", gpus=(("Tesla K80", "3.7"),))))
    r5090 = tmp_path / "new-5090.json"
    r5090.write_text(json.dumps(environment(driver="570.124.04", gpus=(("NVIDIA GeForce RTX 5090", "12.0"),))))
    ok = cli("solve", "torch", *files, "--json")
    assert ok.returncode == 0, ok.stderr
    assert len(envelope(ok)["data"]["targets"]) == 3
    out = cli("solve", "torch", *files, "--env", str(k80), "--env", str(r5090), "--json")
    assert out.returncode == 3
    # the K80's driver 470 runs CUDA 11.4 at most (Release Notes); the RTX 5090 (sm_120) has no kernel image in
    # a build old enough for that driver: each cause names the one machine it blocks, never the T4s
    causes = sorted((c["rule"], tuple(c["machines"])) for c in envelope(out)["data"]["causes"])
    assert causes == [("arch", ("new-5090",)), ("driver_floor", ("old-k80",))]


@pytest.mark.slow
def test_bad_env_file_names_the_key(tmp_path: Path):
    bad = tmp_path / "bad.json"
    doc = environment()
    doc["gpus"][0]["bogus"] = 1
    bad.write_text(json.dumps(doc))
    out = cli("solve", "torch", "--env", str(bad))
    assert out.returncode == 2
    assert "gpus[0].bogus" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.slow
def test_lock_requirements_file_header_and_pins(tmp_path: Path):
    target = tmp_path / "requirements.txt"
    out = cli("lock", "torch", "torchvision", *T4, "--pins-only", "-o", str(target))
    assert out.returncode == 0, out.stderr
    text = target.read_text()
    assert text.startswith("# written by cudamatrix lock from matrix ")
    assert "# target " in text and "T4 (sm 7.5); driver 535.104.05; Python 3.10" in text
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    # exactly the solution's index line and pins, in order
    sol = envelope(cli("solve", "torch", "torchvision", *T4, "--json"))["data"]["solution"]
    assert sol["index_url"].startswith("https://download.pytorch.org/whl/cu12")
    assert lines == [f"--index-url {sol['index_url']}"] + [f"{p['name']}=={p['version']}" for p in sol["packages"]]
    assert [p["name"] for p in sol["packages"]] == ["torch", "torchvision"]


@pytest.mark.slow
def test_lock_uv_format():
    out = cli("lock", "torch", *T4, "--format", "uv")
    assert out.returncode == 0, out.stderr
    assert "[[tool.uv.index]]" in out.stdout and "[tool.uv.sources]" in out.stdout
    assert 'explicit = true' in out.stdout and 'torch = [{ index = "pytorch-cu12' in out.stdout
    doc = tomlread.loads(out.stdout)
    assert doc["tool"]["uv"]["sources"]["torch"] == [{"index": doc["tool"]["uv"]["index"][0]["name"]}]


@pytest.mark.slow
def test_check_requirements_gate(tmp_path: Path):
    good = tmp_path / "good.txt"
    assert cli("lock", "torch", *T4, "--pins-only", "-o", str(good)).returncode == 0
    out = cli("check", "-r", str(good), *T4, "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    doc = envelope(out)
    assert doc["data"]["fits"] is True
    assert doc["data"]["base_image"].startswith("nvidia/cuda:12.")
    assert doc["data"]["nvidia_require_cuda"].startswith("cuda>=12.")
    bad = tmp_path / "bad.txt"
    bad.write_text("--extra-index-url https://download.pytorch.org/whl/cu124\ntorch==2.5.1+cu124\n")
    out = cli("check", "-r", str(bad), "--driver", "570.124.04", "--gpu", "NVIDIA GeForce RTX 5090")
    assert out.returncode == 1
    assert "no kernel image" in out.stdout
    broken = tmp_path / "broken.txt"
    broken.write_text("torch>>2\n")
    out = cli("check", "-r", str(broken), *T4)
    assert out.returncode == 2 and "broken.txt:1" in out.stderr


@pytest.mark.slow
def test_env_prints_nothing_when_nothing_needs_fixing(tmp_path: Path):
    p = tmp_path / "e.json"
    p.write_text(json.dumps(environment()))
    out = cli("env", "--env", str(p))
    assert out.returncode == 0 and out.stdout == ""


@pytest.mark.slow
def test_env_removes_shadowing_folder(tmp_path: Path):
    doc = environment()
    doc["context"] = {"env": {"LD_LIBRARY_PATH": "/opt/cudnn8/lib:/usr/local/nvidia/lib64"}}
    doc["libraries"] = [
        {"name": "cudnn", "soname": "libcudnn.so.9", "path": "/opt/cudnn8/lib/libcudnn.so.9", "version": "9.0.0",
         "origin": "LD_LIBRARY_PATH", "loaded_first": True},
        {"name": "cudnn", "soname": "libcudnn.so.9", "path": "/v/site-packages/nvidia/cudnn/lib/libcudnn.so.9",
         "version": "9.1.0", "origin": "wheel:nvidia-cudnn-cu12", "loaded_first": False}]
    # the loader model's prediction, as a saved detect --json carries it: a build whose own search
    # (DT_RUNPATH) comes after LD_LIBRARY_PATH
    doc["library_loads"] = [
        {"framework": "torch", "soname": "libcudnn.so.9", "path": "/opt/cudnn8/lib/libcudnn.so.9",
         "rule": "LD_LIBRARY_PATH", "found_as": "/opt/cudnn8/lib/libcudnn.so.9",
         "expected": "/v/site-packages/nvidia/cudnn/lib/libcudnn.so.9", "expected_rule": "DT_RUNPATH of x.so"}]
    p = tmp_path / "e.json"
    p.write_text(json.dumps(doc))
    out = cli("env", "--env", str(p))
    assert out.returncode == 0
    assert out.stdout.strip() == "export LD_LIBRARY_PATH=/usr/local/nvidia/lib64"
    assert "libcudnn.so.9" in out.stderr
    fish = cli("env", "--env", str(p), "--shell", "fish")
    assert fish.stdout.strip() == "set -gx LD_LIBRARY_PATH /usr/local/nvidia/lib64"
    doctor = cli("doctor", "--env", str(p), "--json")
    assert doctor.returncode == 1
    codes = {f["code"] for f in envelope(doctor)["data"]["findings"]}
    assert "LIBRARY_SHADOWED" in codes


@pytest.mark.slow
def test_wordings_say_things_once():
    # "target target:" (a machine described by flags is named "target") in the decision trace
    explain = cli("solve", "torch", *T4, "--explain")
    assert explain.returncode == 0 and "target target" not in explain.stdout
    assert "target: NVIDIA T4 (sm 7.5); driver 535.104.05" in explain.stdout
    # a live environment is no "pasted or saved" one: here the test extra's torch may be a CPU build (no CUDA
    # library to load) or a CUDA build (its loads predicted); either way env says something true of this machine
    live = cli("env")
    assert live.returncode == 0 and "older version" not in live.stderr and "pasted or saved" not in live.stderr


# --- hints that run where they point (issue #26): with --python X every printed command carries X ----------------

@pytest.fixture()
def spaced_python(tmp_path) -> str:
    """An interpreter whose path holds a space and a quote (it must come out quoted for the shell)."""
    folder = tmp_path / "my env's" / "bin"
    folder.mkdir(parents=True)
    (folder / "python").symlink_to(sys.executable)
    return str(folder / "python")


def test_aimed_points_each_command_at_the_interpreter_and_quotes_it():
    import shlex

    from cudamatrix.safe.shells import Command, Said, pip, tool

    x = "/v/my env/bin/python"
    q = shlex.quote(x)
    assert Said(tool("fix"), " (or ", tool("solve", "torch"), " for the pip command)").aimed(x) == \
        f"cudamatrix fix --python {q} (or cudamatrix solve --python {q} torch for the pip command)"
    assert Said(pip("install", "torch==2.5.1", always_quoted=(1,)), "; ", pip("uninstall", "-y", "jax")).aimed(x) == \
        f"{q} -m pip install 'torch==2.5.1'; {q} -m pip uninstall -y jax"
    # a command that names an interpreter already, uv's own form, and words that are no command record stay
    assert Said(tool("fix", "--rollback", "--python", "/a"), " finishes it").aimed(x) == \
        "cudamatrix fix --rollback --python /a finishes it"
    assert Said(Command(("uv", "pip", "install", "x"))).aimed(x) == "uv pip install x"
    assert Said("cudamatrix.fix(), see mypip install").aimed(x) == "cudamatrix.fix(), see mypip install"
    assert Said(pip("install", "x")).aimed(None) == "pip install x"
    # the quoted path is one word for the shell, whatever it holds
    assert shlex.split(Said(pip("install", "x")).aimed("/v/it's here/python")) == ["/v/it's here/python", "-m", "pip",
                                                                                  "install", "x"]


@pytest.mark.slow
def test_doctor_with_python_prints_fixes_that_install_into_that_interpreter(tmp_path, spaced_python, monkeypatch):
    import shlex

    scenario = json.loads((Path(__file__).parent.parent / "scenarios" / "doctor_torchvision_mismatch.json").read_text())
    saved = tmp_path / "env.json"
    saved.write_text(json.dumps(scenario["environment"]))
    monkeypatch.setenv("CUDAMATRIX_DETECT_ENV", str(saved))  # this machine and that interpreter, as reported
    doc = envelope(cli("doctor", "--python", spaced_python, "--json"))
    fixes = [f["fix"] for f in doc["data"]["findings"] if f.get("fix")]
    aimed = [f for f in fixes if "pip install" in f or "cudamatrix " in f]
    assert aimed, fixes
    for fix in aimed:
        assert f"{shlex.quote(spaced_python)} -m pip install" in fix or f"--python {shlex.quote(spaced_python)}" in fix
        assert not re.search(r"(?<!-m )(?<![\w/])pip install", fix), fix
    human = cli("doctor", "--python", spaced_python)
    assert f"{shlex.quote(spaced_python)} -m pip install" in human.stdout, human.stdout


@pytest.mark.slow
def test_solve_with_an_interpreter_prints_its_pip(spaced_python):
    import shlex

    out = cli("solve", "torch==2.5.1", "--python", spaced_python, "--driver", "535.104.05", "--gpu", "Tesla T4")
    assert out.returncode == 0, out.stderr
    line = next(ln for ln in out.stdout.splitlines() if " -m pip install " in ln)
    assert line.startswith(f"{shlex.quote(spaced_python)} -m pip install "), line
    doc = envelope(cli("solve", "torch==2.5.1", "--python", spaced_python, "--driver", "535.104.05", "--gpu",
                       "Tesla T4", "--json"))
    assert doc["data"]["pip_command"][:4] == [spaced_python, "-m", "pip", "install"]
    versioned = envelope(cli("solve", "torch==2.5.1", *T4, "--json"))  # --python 3.10 is a version: plain pip
    assert versioned["data"]["pip_command"][:2] == ["pip", "install"]


@pytest.mark.slow
def test_solve_pip_line_keeps_passthrough_packages_as_written():
    """What the user wrote for a package the matrix does not know reaches the printed pip command."""
    import shlex

    args = ["solve", "torch", "einops[foo]>=0.7", "Pillow==10.0.0", "--driver", "550.54.15", "--gpu", "Tesla T4",
            "--python", "3.11"]
    out = cli(*args, "--json")
    assert out.returncode == 0, out.stderr
    pip_args = envelope(out)["data"]["solution"]["pip_args"]
    assert pip_args[-2:] == ["einops[foo]>=0.7", "Pillow==10.0.0"] and any(a.startswith("torch==") for a in pip_args)
    human = cli(*args)
    line = next(x for x in human.stdout.splitlines() if "pip install" in x)
    words = shlex.split(line[line.index("pip install"):])
    assert words[-2:] == ["einops[foo]>=0.7", "Pillow==10.0.0"], line


@pytest.mark.slow
@pytest.mark.parametrize("command", ["solve", "check", "lock", "fix"])
def test_gpu_major_only_is_a_usage_error_with_the_choices(command, tmp_path: Path):
    """``--gpu 7`` names no GPU (7.0 V100, 7.2 Xavier, 7.5 T4 have different kernels): exit 2 with the choices,
    in the JSON envelope with --json and in words without, never a traceback; nothing is written."""
    req = tmp_path / "requirements.txt"
    req.write_text("torch==2.5.1\n")
    args = {"check": ["check", "-r", str(req)], "lock": ["lock", "torch", "-o", str(tmp_path / "lock.txt")],
            "fix": ["fix", "torch", "--dry-run"]}.get(command, [command, "torch"])
    out = cli(*args, "--gpu", "7", "--json")
    assert out.returncode == 2, out.stdout + out.stderr
    doc = envelope(out)
    assert doc["command"] == command and doc["status"] == "usage_error" and doc["data"] == {}
    (error,) = doc["errors"]
    assert error["type"] == "UsageError" and "Traceback" not in out.stderr
    assert error["message"] == ("--gpu '7' gives only the major of a compute capability: 7.0, 7.2, 7.5 are "
                                "different GPUs with different kernels")
    assert error["hint"].startswith("one of: --gpu 7.0 (") and "--gpu 7.5 (" in error["hint"]
    words = cli(*args, "--gpu", "12")  # 1.2 is no GPU the matrix knows; 12.0 and 12.1 are
    assert words.returncode == 2 and "Traceback" not in words.stderr
    assert "12.0, 12.1 are different GPUs" in words.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["requirements.txt"]


TARGET_KEYS = {"name", "description", "gpus", "gpu_unknown", "driver", "cuda_toolkit", "python", "platform", "notes"}


@pytest.mark.slow
def test_solve_and_check_targets_are_records(tmp_path: Path):
    """``data.targets[]`` of solve and check: each target as data (GPU names and compute capabilities, driver with
    the CUDA it runs, toolkit, Python, platform) beside the line people read, for flags and for a fleet."""
    out = cli("solve", "torch", *T4, "--cuda-toolkit", "12.4", "--json")
    assert out.returncode == 0, out.stderr
    (t,) = envelope(out)["data"]["targets"]
    assert set(t) == TARGET_KEYS
    assert t == {"name": "target", "description": "target: NVIDIA T4 (sm 7.5); driver 535.104.05; Python 3.10; "
                                                   "linux_x86_64",
                 "gpus": [{"name": "NVIDIA T4", "compute_capability": "7.5"}], "gpu_unknown": False,
                 "driver": {"version": "535.104.05", "cuda_version": "12.2", "usable": True, "jetpack": None},
                 "cuda_toolkit": "12.4", "python": "3.10", "platform": "linux_x86_64", "notes": []}
    req = tmp_path / "requirements.txt"
    req.write_text(f"--index-url {PYTORCH_INDEX_PREFIX}/cu126\ntorch==2.14.1\n")
    checked = envelope(cli("check", "-r", str(req), *T4, "--json"))["data"]["targets"]
    assert [set(c) for c in checked] == [TARGET_KEYS] and checked[0]["gpus"] == t["gpus"]
    a, b = tmp_path / "gpu.json", tmp_path / "cpu.json"
    a.write_text(json.dumps(environment()))
    b.write_text(json.dumps({**environment(gpus=()), "driver": {"version": None, "cuda_version": None,
                                                                 "status": "absent"}}))
    fleet = envelope(cli("solve", "torch", "--env", str(a), "--env", str(b), "--json"))["data"]["targets"]
    assert [(f["name"], f["gpus"], f["driver"]["usable"], f["python"]) for f in fleet] == [
        ("gpu", [{"name": "Tesla T4", "compute_capability": "7.5"}], True, "3.10"), ("cpu", [], False, "3.10")]
