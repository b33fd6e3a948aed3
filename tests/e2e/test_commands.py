"""lock, check and the JSON envelope, end to end in this process (``cudamatrix.cli.main``) on the small matrix
of ``smallmatrix`` written to a data folder (``--data``): exact files, problems, exit codes, envelope fields.

The torch rows are the facts of torch 2.5.1 as published: the PyTorch "Previous PyTorch Versions" page installs
``torch==2.5.1 torchvision==0.20.1`` with ``--index-url https://download.pytorch.org/whl/cu121`` (or cu124);
the wheels' METADATA (Requires-Dist) pins nvidia-cudnn-cu12==9.1.0.70 in both builds and nvidia-cublas-cu12
==12.1.3.1 (cu121) / 12.4.5.8 (cu124); the plain 2.5.1 wheel of the default index for Linux x86_64 is the
CUDA 12.4 build.
"""
from __future__ import annotations

import json

import pytest
from support import tomlread
from support.smallmatrix import build, release, replace, variant, write

from cudamatrix.cli import main

PT = "https://download.pytorch.org/whl"
LINUX = 'platform_system == "Linux" and platform_machine == "x86_64"'
ARCHS = ["5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0"]
CU121 = variant("cu121", "12.1", archs=ARCHS, cudnn="9.1.0.70", index_url=f"{PT}/cu121", local_version="+cu121",
                nvidia_pins=[f"nvidia-cudnn-cu12==9.1.0.70; {LINUX}", f"nvidia-cublas-cu12==12.1.3.1; {LINUX}"])
CU124 = variant("cu124", "12.4", archs=ARCHS, cudnn="9.1.0.70", index_url=f"{PT}/cu124", local_version="+cu124",
                pypi_default=True,
                nvidia_pins=[f"nvidia-cudnn-cu12==9.1.0.70; {LINUX}", f"nvidia-cublas-cu12==12.4.5.8; {LINUX}"])
CPU = variant("cpu", None, index_url=f"{PT}/cpu", local_version="+cpu")
TORCH = replace(release("2.5.1", CU121, CU124, CPU), companions={"torchvision": "0.20.1"})


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> str:
    return str(write(build(TORCH), tmp_path_factory.mktemp("matrix") / "data"))


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def body(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


# driver 550.54.15 runs CUDA 12.4 fully (Release Notes: 12.4 GA needs >= 550.54.14): the newest CUDA build, which
# is the default index's plain 2.5.1 (no index line); 535.104.05 runs 12.1 fully and 12.4 only under minor-version
# compatibility, so the cu121 build from the PyTorch index is preferred. The nvidia-* pins come from the default
# index, so the PyTorch index is an extra one (pip: --extra-index-url adds to the index, --index-url replaces it).
NV124 = ["nvidia-cudnn-cu12==9.1.0.70", "nvidia-cublas-cu12==12.4.5.8"]
NV121 = ["nvidia-cudnn-cu12==9.1.0.70", "nvidia-cublas-cu12==12.1.3.1"]
LOCK = [
    ("550.54.15", ["torch"], [], ["torch==2.5.1"] + NV124),
    ("535.104.05", ["torch", "torchvision"], [],
     [f"--extra-index-url {PT}/cu121", "torch==2.5.1+cu121", "torchvision==0.20.1+cu121"] + NV121),
    # a requirement the matrix does not know is passed through as given, after the pins
    ("550.54.15", ["torch", "numpy==1.26.4"], [], ["torch==2.5.1"] + NV124 + ["numpy==1.26.4"]),
    ("535.104.05", ["torch", "numpy==1.26.4"], [],
     [f"--extra-index-url {PT}/cu121", "torch==2.5.1+cu121"] + NV121 + ["numpy==1.26.4"]),
    ("535.104.05", ["torch"], ["--mirror", "https://mirror.example/pytorch/"],
     ["--extra-index-url https://mirror.example/pytorch/cu121", "torch==2.5.1+cu121"] + NV121),
]


@pytest.mark.slow
@pytest.mark.parametrize("driver, request_, extra, lines", LOCK)
def test_lock_requirements_exact(capsys, tmp_path, data, driver, request_, extra, lines):
    out = tmp_path / "requirements.txt"
    code, _, err = cli(capsys, "lock", *request_, "--driver", driver, "--gpu", "7.5", "--python", "3.11", "--data",
                       data, "-o", str(out), "--pins-only", *extra)
    assert code == 0, err
    text = out.read_text()
    assert body(text) == lines
    assert text.splitlines()[0] == "# written by cudamatrix lock from matrix test"
    assert f"# target GPU (sm 7.5); driver {driver}; Python 3.11; linux_x86_64" in text.splitlines()


def test_lock_uv_format_drops_the_local_version(capsys, data):
    # uv: a package pinned to an explicit index in [tool.uv.sources] is resolved from it alone, where the plain
    # version matches the local build ("torch==2.5.1" picks "2.5.1+cu121" from that index)
    code, out, err = cli(capsys, "lock", "torch", "torchvision", "--driver", "535.104.05", "--gpu", "7.5",
                         "--python", "3.11", "--data", data, "--format", "uv")
    assert code == 0, err
    assert body(out) == [
        "[project]", "dependencies = [", '    "torch==2.5.1",', '    "torchvision==0.20.1",',
        '    "nvidia-cudnn-cu12==9.1.0.70",', '    "nvidia-cublas-cu12==12.1.3.1",', "]",
        "[[tool.uv.index]]", 'name = "pytorch-cu121"', f'url = "{PT}/cu121"', "explicit = true",
        "[tool.uv.sources]", 'torch = [{ index = "pytorch-cu121" }]', 'torchvision = [{ index = "pytorch-cu121" }]']
    assert tomlread.loads(out)["project"]["dependencies"][:2] == ["torch==2.5.1", "torchvision==0.20.1"]


def check_file(capsys, tmp_path, data, text: str, driver="535.104.05") -> tuple[int, dict]:
    req = tmp_path / "req.txt"
    req.write_text(text)
    code, out, err = cli(capsys, "check", "-r", str(req), "--driver", driver, "--gpu", "7.5", "--python", "3.11",
                         "--data", data, "--json")
    doc = json.loads(out)
    assert set(doc) == {"schema_version", "command", "status", "exit_code", "data", "errors"}
    assert (doc["schema_version"], doc["command"], doc["exit_code"]) == (1, "check", code)
    return code, doc


# pip reads the file's own index lines: with the default index and the cu121 index as an extra one, pip takes
# the highest version, and a local version (2.5.1+cu121) sorts above the plain one (PEP 440, local versions);
# with no index line it installs the default index's 2.5.1, the CUDA 12.4 build. The file's nvidia-* pins must
# agree with the build's own Requires-Dist pins.
CHECK = [
    (f"--extra-index-url {PT}/cu121\ntorch==2.5.1\nnvidia-cublas-cu12==12.1.3.1\n", 0, ["torch==2.5.1+cu121"], []),
    (f"--extra-index-url {PT}/cu121\ntorch==2.5.1\nnvidia-cublas-cu12==12.4.5.8\n", 1, ["torch==2.5.1+cu121"],
     ["nvidia-cublas-cu12==12.4.5.8 disagrees with the framework's own pin nvidia-cublas-cu12==12.1.3.1"]),
    ("torch==2.5.1\nnvidia-cublas-cu12==12.4.5.8\n", 0, ["torch==2.5.1+cu124"], []),
    (f"--index-url {PT}/cu124\ntorch==2.5.1\nnvidia-cublas-cu12==12.1.3.1\n", 1, ["torch==2.5.1+cu124"],
     ["nvidia-cublas-cu12==12.1.3.1 disagrees with the framework's own pin nvidia-cublas-cu12==12.4.5.8"]),
    (f"--extra-index-url {PT}/cu121\ntorch==2.5.1\nnvidia-cublas-cu11==11.11.3.6\n", 1, ["torch==2.5.1+cu121"],
     ["nvidia-cublas-cu11==11.11.3.6 is another CUDA major of a library the framework pins (both install the "
      "same files)"]),
    (f"--extra-index-url {PT}/cu121\ntorch==2.5.1\ntorchvision==0.20.1\n", 0,
     ["torch==2.5.1+cu121", "torchvision==0.20.1+cu121"], []),
]


@pytest.mark.slow
@pytest.mark.parametrize("text, exit, checked, problems", CHECK)
def test_check_reads_index_lines_and_pins(capsys, tmp_path, data, text, exit, checked, problems):
    code, doc = check_file(capsys, tmp_path, data, text)
    assert code == exit
    assert doc["status"] == ("ok" if exit == 0 else "problems")
    assert doc["data"]["checked"] == checked and doc["data"]["problems"] == problems
    assert doc["data"]["fits"] is (exit == 0)


def test_check_torchvision_without_torch_is_unknown(capsys, tmp_path, data):
    code, doc = check_file(capsys, tmp_path, data, "torchvision==0.20.1\n")
    assert code == 1
    assert doc["data"]["problems"] == ["torchvision==0.20.1: the file pins no torch, so which torch build pip pairs "
                                       "it with is not known (add the torch line the image installs)"]


def test_usage_error_envelope_has_its_hint(capsys, data):
    code, out, _ = cli(capsys, "solve", "torch", "--gpu", "Tesla T5", "--data", data, "--json")
    doc = json.loads(out)
    assert code == 2 and doc == {
        "schema_version": 1, "command": "solve", "status": "usage_error", "exit_code": 2, "data": {},
        "errors": [{"type": "UsageError", "message": "--gpu 'Tesla T5': no GPU of that name in the matrix",
                    "hint": doc["errors"][0]["hint"]}]}
    assert doc["errors"][0]["hint"].startswith("did you mean: 'Tesla T4'")


def test_no_solution_envelope(capsys, data):
    # driver 470.82.01 runs CUDA 11.4 at most; every CUDA build here is 12.x (minor-version floor 525.60.13)
    code, out, _ = cli(capsys, "solve", "torch==2.5.1+cu124", "--driver", "470.82.01", "--gpu", "7.5",
                       "--data", data, "--json")
    doc = json.loads(out)
    assert (code, doc["schema_version"], doc["status"], doc["exit_code"]) == (3, 1, "no_solution", 3)
    assert [c["rule"] for c in doc["data"]["causes"]] == ["driver_floor"]
    assert doc["errors"][0]["type"] == "NoSolution"


# --- the tests' in-process runner answers as a process does ------------------------------------------------------

SAME_AS_A_PROCESS = [
    ["solve", "torch", "--driver", "535.104.05", "--gpu", "Tesla T4", "--python", "3.10", "--json"],
    ["lock", "torch", "--driver", "535.104.05", "--gpu", "7.5", "--python", "3.11", "--pins-only"],
    ["solve", "torch", "--gpu", "Tesla T5"],  # a usage error: exit 2, the message on stderr
    ["matrix", "show", "gpu", "Tesla T4"],
    ["solve", "--json", "--bogus"],  # the option parser's error, as one envelope
    ["detect", "--json", "--from", "-"],  # stdin
    ["--version"],
]


@pytest.mark.slow
@pytest.mark.parametrize("argv", SAME_AS_A_PROCESS, ids=lambda a: " ".join(a[:2]))
def test_run_cli_answers_as_the_cli_in_a_process_of_its_own(argv):
    """fakes.run_cli (this process) and fakes.spawn_cli (``python -m cudamatrix``) give the same exit code,
    stdout and stderr, and run_cli leaves the environment, the folder and the streams as it found them."""
    import os
    import sys

    from support.fakes import DATA, run_cli, spawn_cli

    paste = (DATA / "nvidia-smi" / "580.65.06_rtx5090.txt").read_bytes()
    env, cwd, streams = dict(os.environ), os.getcwd(), (sys.stdout, sys.stderr, sys.stdin)
    here = run_cli(argv, input=paste)
    assert (dict(os.environ), os.getcwd(), (sys.stdout, sys.stderr, sys.stdin)) == (env, cwd, streams)
    there = spawn_cli(argv, input=paste)
    assert (here.returncode, here.stdout, here.stderr) == (there.returncode, there.stdout, there.stderr)
    assert here.stdout or here.stderr  # something was said: two empty answers prove nothing


def test_run_cli_turns_an_escaping_exception_into_exit_1_and_its_traceback(monkeypatch):
    """What the interpreter does with an exception that leaves ``main``: exit 1, the traceback on stderr (the
    hardening tests look for "Traceback" in stderr)."""
    from support.fakes import run_cli

    import cudamatrix.cli

    def broken(argv):
        raise RuntimeError("a bug")

    monkeypatch.setattr(cudamatrix.cli, "main", broken)
    out = run_cli(["solve", "torch"], text=True)
    assert out.returncode == 1 and "Traceback" in out.stderr and "RuntimeError: a bug" in out.stderr
