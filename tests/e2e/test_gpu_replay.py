"""A real H200 machine, replayed: the parsers rebuild from raw text what the live probes saw there, and the
diagnosis and solver answer on that machine's saved Environment as they did live."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from support.snapshot import snapshot_matrix

from cudamatrix.detect import load_environment
from cudamatrix.diagnose.context import match_installed
from cudamatrix.diagnose.findings import diagnose, summary_exit
from cudamatrix.errors import NoSolution
from cudamatrix.matrix.load import load_matrix
from cudamatrix.models import Report
from cudamatrix.pastes.reports import from_reports
from cudamatrix.schema import validate
from cudamatrix.solve.solver import parse_request, solve
from cudamatrix.solve.target import from_environment
from cudamatrix.verify.run import MARK, check, exit_code

HERE = Path(__file__).parent.parent / "data" / "gpu_h200"
RAW = ["nvidia-smi.txt", "nvidia-smi-query.csv", "collect_env.txt", "ldconfig-p.txt", "nvcc.txt", "pip-freeze.txt"]


@pytest.fixture(scope="module")
def live():
    return load_environment(str(HERE / "detect.json"))


@pytest.fixture(scope="module")
def replayed():
    return from_reports([(name, (HERE / name).read_text()) for name in RAW])


def test_driver_and_gpu_match_the_live_probes(live, replayed):
    assert live.driver.version == replayed.driver.version == "580.159.04"
    assert live.driver.cuda_version == replayed.driver.cuda_version == "13.0"
    assert replayed.driver.status == "ok"
    assert [(g.name, g.compute_capability, g.memory_total_mib) for g in live.gpus] == \
        [(g.name, g.compute_capability, g.memory_total_mib) for g in replayed.gpus] == [("NVIDIA H200", "9.0", 143771)]
    # nvidia-smi's "Used" keeps the driver's reserved memory apart; so does the NVML probe (v2 structure)
    assert live.gpus[0].memory_used_mib == replayed.gpus[0].memory_used_mib == 0


def test_each_raw_output_alone_gives_its_part():
    table = from_reports([("t", (HERE / "nvidia-smi.txt").read_text())])
    assert (table.driver.version, table.driver.cuda_version, table.gpus[0].name) == ("580.159.04", "13.0", "NVIDIA H200")
    query = from_reports([("q", (HERE / "nvidia-smi-query.csv").read_text())])
    assert query.gpus[0].compute_capability == "9.0" and query.gpus[0].memory_total_mib == 143771
    full = from_reports([("full", (HERE / "nvidia-smi-q.txt").read_text())])
    assert full.driver.version == "580.159.04" and full.gpus[0].name == "NVIDIA H200"
    nvcc = from_reports([("n", (HERE / "nvcc.txt").read_text())])
    assert nvcc.toolkits[0].version == "13.0.88"


def test_python_side_matches(live, replayed):
    # a live detect keeps the distributions that matter for CUDA; a pasted list keeps every package it names
    assert {name: replayed.packages.get(name) for name in live.packages} == live.packages
    assert len(replayed.packages) > len(live.packages)
    want = {(f.name, f.version, f.variant, f.cuda) for f in live.frameworks}
    got = {(f.name, f.version, f.variant, f.cuda) for f in replayed.frameworks}
    assert ("torch", "2.11.0", "cu130", "13.0") in want & got
    assert want == got
    assert [t.version for t in live.toolkits] == ["13.0.88"]
    assert "13.0.88" in {t.version for t in replayed.toolkits}


def test_libraries_seen_in_both(live, replayed):
    live_cudnn = {lib.version for lib in live.libraries if lib.soname == "libcudnn.so.9"}
    assert {"9.19.0.56", "9.14.0"} <= live_cudnn  # the torch wheel's copy and the system copy
    first = [lib for lib in live.libraries if lib.soname == "libcudnn.so.9" and lib.loaded_first]
    assert [lib.origin for lib in first] == ["wheel:nvidia-cudnn-cu13"]
    assert "libcudnn.so.9" in {lib.soname for lib in replayed.libraries}


def test_doctor_on_the_saved_machine_is_healthy(live):
    findings = diagnose(live, load_matrix())
    assert summary_exit(findings) == 0
    assert not [f for f in findings if f.severity == "error"]


def test_every_framework_of_the_saved_machine_is_a_build_the_matrix_holds(live):
    """jax 0.11.2 there is the cuda13 build (pip freeze: jaxlib 0.11.2, jax-cuda13-plugin 0.11.2, jax-cuda13-pjrt
    0.11.2): detect records the variant on jaxlib, from the plugin, and the jax row takes it from there. Before,
    doctor called it "jax 0.11.2 is not in the matrix" (doctor.json here, an info finding), though the matrix
    holds jax 0.11.2 cuda13; on the frozen snapshot, doctor now finds nothing on this healthy machine."""
    matrix = snapshot_matrix()
    jax = next(i for i in match_installed(live, matrix) if i.name == "jax")
    assert (jax.version, jax.variant_name, jax.variant.name if jax.variant else None) == ("0.11.2", "cuda13", "cuda13")
    assert [(f.code, f.title) for f in diagnose(live, matrix)] == []


def test_torch_stays_as_installed_with_its_cuda_wheels(live):
    # torch 2.11.0 cu130 requires cuda-toolkit[...]==13.0.2 and cuda-bindings (its wheel metadata, in the
    # shipped matrix); the machine had them (pip-freeze.txt). The saved detect.json predates detect recording
    # those distributions, so they are added from the freeze the same run saved.
    freeze = dict(line.split("==", 1) for line in (HERE / "pip-freeze.txt").read_text().splitlines()
                  if "==" in line and line.split("==", 1)[0] in ("cuda-toolkit", "cuda-bindings", "cuda-pathfinder"))
    assert freeze["cuda-toolkit"] == "13.0.2"
    env = dataclasses.replace(live, packages={**live.packages, **freeze})
    matrix = load_matrix()
    kept = solve([from_environment(env, matrix)], parse_request(["torch"], env), matrix, installed=env)
    assert kept.unchanged and [(f.name, f.version, f.variant) for f in kept.frameworks] == [("torch", "2.11.0", "cu130")]


@pytest.mark.slow
def test_solver_on_the_saved_machine(live):
    # the frozen snapshot (its jax.json now lists 0.11.2, archs inferred from the read 0.11.0/0.12.0 wheels)
    matrix = snapshot_matrix()
    target = from_environment(live, matrix)
    assert target.gpus[0].compute_capability == "9.0" and target.driver == "580.159.04"
    kept = solve([target], parse_request(["torch"], live), matrix, installed=live)
    assert kept.unchanged and kept.frameworks[0].variant == "cu130"
    # jax 0.11.2 cuda13 (the variant detect records on jaxlib) is installed and consistent: kept, not moved to
    # the newest release the matrix lists (README "Preferences": keep what is installed when it is consistent)
    jax = solve([target], parse_request(["jax"], live), matrix, installed=live)
    assert jax.unchanged and [(f.name, f.version) for f in jax.frameworks] == [("jax", "0.11.2")]
    # TensorFlow's and-cuda wheels are CUDA 12; the installed JAX plugin brings CUDA 13 ones
    with pytest.raises(NoSolution) as exc:
        solve([target], parse_request(["tensorflow"], live), matrix, installed=live)
    assert any(c["rule"] == "co_installed" for c in exc.value.detail["causes"])


def test_verify_there_passed_with_real_cudnn(tmp_path):
    """The child's result from the H200, read again by the parent's code: the same verdict and exit code."""
    saved = json.loads((HERE / "verify.json").read_text())
    report = validate(Report, saved["data"], "verify.json")  # the saved data is a valid Report
    torch = next(f for f in report.frameworks if f.framework == "torch")
    assert (torch.status, torch.cudnn, torch.device_name) == ("verified", "9.19.0", "NVIDIA H200")
    assert torch.max_abs_error < 1e-3 and exit_code(report) == saved["exit_code"] == 0
    assert "libcudnn.so.9" in {lib["file"] for lib in torch.mapped_libraries}
    # the parent re-reads the child's last line: every mapped cuDNN is 9.19.0, so it stays verified ...
    event = {k: v for k, v in saved["data"]["frameworks"][0].items() if v is not None}
    fields = {**event, "stage": "result"}
    again = check(_replayer(tmp_path / "a", fields), "torch", gpu_expected=True, timeout=60, env={})
    assert (again.status, again.finding_code, again.cudnn) == ("verified", None, "9.19.0")
    # ... and the same run with the system cuDNN 8 of another machine mapped too is a cuDNN mismatch
    mixed = dict(fields, mapped_libraries=fields["mapped_libraries"] + [
        {"path": "/usr/lib/x86_64-linux-gnu/libcudnn.so.8", "file": "libcudnn.so.8", "version": "8.9.7"}])
    again = check(_replayer(tmp_path / "b", mixed), "torch", gpu_expected=True, timeout=60, env={})
    assert (again.status, again.finding_code) == ("failed", "CUDNN_MISMATCH")


def _replayer(folder: Path, result: dict) -> str:
    """An executable standing in for the H200's interpreter: it prints the saved result line, nothing else."""
    folder.mkdir()
    (folder / "line").write_text(MARK + json.dumps(result) + "\n")
    exe = folder / "python"
    exe.write_text(f"#!/bin/sh\ncat '{folder / 'line'}'\n")
    exe.chmod(0o755)
    return str(exe)
