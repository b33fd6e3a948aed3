"""Sound answers: unknown facts never pass, inferred facts are ranked lower and said, GPU driver floors,
implied CUDA wheel pins, extras in every output, `check -r` read as pip reads it, diagnosis from stated
facts, and messages without empty slots."""
from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version
from support import tomlread
from support.fakes import run_cli
from support.snapshot import snapshot_matrix

from cudamatrix.diagnose.findings import diagnose
from cudamatrix.errors import DataError, NoSolution
from cudamatrix.lock.lockfile import requirements_txt, uv_project
from cudamatrix.matrix.data import FrameworkFile, Variant
from cudamatrix.models import Environment
from cudamatrix.pastes.reports import from_reports
from cudamatrix.schema import validate
from cudamatrix.solve import rules
from cudamatrix.solve.checks import check_requirements, nvidia_require_cuda
from cudamatrix.solve.requirements import parse_requirements
from cudamatrix.solve.solver import parse_request, solve
from cudamatrix.solve.target import Target, from_flags

DATA = Path(__file__).parent.parent / "data"
REPO = Path(__file__).parent.parent.parent


@pytest.fixture(scope="module")
def matrix():
    # the frozen snapshot: a data refresh must not move what these rule tests expect
    return snapshot_matrix()


def target(m, driver=None, gpus=(), python=None, platform=None, name="t") -> Target:
    t = from_flags(m, driver=driver, gpus=list(gpus), python=python, platform=platform, cuda_toolkit=None,
                   base=Target(name=name))
    return dataclasses.replace(t, name=name)


def release(m, family: str, version: str):
    return next(r for r in m.frameworks(family) if str(r.version) == version)


def variant(rel, name: str) -> Variant:
    return next(v for v in rel.variants if v.name == name)


def with_torch(m, releases):
    """The matrix with its torch releases replaced."""
    return dataclasses.replace(m, torch=FrameworkFile(releases=releases))


# --- 1. known / inferred / unknown ---------------------------------------------------------------

SRC = [{"states": "s", "read": "2026-11-26", "kind": "artifact"}]


def test_inferred_field_validates_its_keys():
    row = {"name": "cu128", "source": SRC, "cuda": "12.8",
           "inferred": {"archs": "same arch list as torch 2.9.1 cu128: PyTorch keeps a variant's list between "
                                 "adjacent releases unless RELEASE.md says otherwise"}}
    v = validate(Variant, row, "torch.json")
    assert list(v.inferred) == ["archs"]
    assert validate(Variant, {"name": "cpu", "source": SRC}, "x").inferred == {}
    with pytest.raises(DataError, match="inferred"):
        validate(Variant, {**row, "inferred": {"arch_list": "a guess"}}, "torch.json")


def test_unknown_arch_list_is_a_rejection_not_a_guess(matrix):
    rel = release(matrix, "torch", "2.12.1")
    cu129 = variant(rel, "cu129")
    assert not cu129.archs and not cu129.ptx and "archs" not in cu129.inferred
    reasons = rules.check(matrix, rel, cu129, target(matrix, "580.65.06", ["NVIDIA GeForce RTX 5090"]))
    assert [r.rule for r in reasons] == ["unknown"]
    assert "not in the matrix" in reasons[0].message and "RTX 5090" in reasons[0].message
    # a GPU older than everything the toolkit compiles for is a known failure, not an unknown
    old = rules.check(matrix, rel, cu129, target(matrix, "580.65.06", ["sm_35"]))
    assert "arch" in [r.rule for r in old]


def test_p100_and_rtx5090_have_no_single_torch_build(matrix):
    t = target(matrix, "580.65.06", ["Tesla P100-PCIE-16GB", "NVIDIA GeForce RTX 5090"])
    with pytest.raises(NoSolution) as exc:
        solve([t], parse_request(["torch"]), matrix)
    rejected = {r["candidate"]: r["rules"] for r in exc.value.detail["rejected"]}
    assert "unknown" in rejected["torch 2.12.1 cu129"]
    assert "arch" in rejected["torch 2.14.1 cu126"]  # SASS sm_50..sm_90, nothing for sm_120


def test_inferred_fact_ranks_below_known_and_is_listed(matrix):
    rel = release(matrix, "torch", "2.12.1")
    basis = "same list as torch 2.12.1 cu126 (an adjacent variant of the same release): a test's rule"
    inferred = dataclasses.replace(variant(rel, "cu129"), archs=list(variant(rel, "cu126").archs),
                                   cudnn=Version("9.10.2.21"), inferred={"archs": basis, "cudnn": basis})
    newer = dataclasses.replace(rel, version=Version("2.99.0"), variants=[inferred])
    older = release(matrix, "torch", "2.5.1")
    t = target(matrix, "575.51.03", ["Tesla T4"], python="3.11")
    both = solve([t], parse_request(["torch"]), with_torch(matrix, [newer, older]))
    assert both.frameworks[0].version == "2.5.1" and both.unverified == []
    alone = solve([t], parse_request(["torch"]), with_torch(matrix, [newer]))
    assert (alone.frameworks[0].version, alone.frameworks[0].variant) == ("2.99.0", "cu129")
    assert {u["fact"] for u in alone.unverified} == {"torch 2.99.0 cu129 archs", "torch 2.99.0 cu129 cudnn"}
    assert all(u["basis"] == basis for u in alone.unverified)


@pytest.mark.slow
def test_inferred_answer_says_so_in_human_and_json(tmp_path: Path):
    data = tmp_path / "data"
    shutil.copytree(REPO / "data", data)
    doc = json.loads((data / "torch.json").read_text())
    rel = next(r for r in doc["releases"] if r["version"] == "2.12.1")
    cu126 = next(v for v in rel["variants"] if v["name"] == "cu126")
    cu129 = next(v for v in rel["variants"] if v["name"] == "cu129")
    cu129["archs"] = cu126["archs"]
    cu129["inferred"] = {"archs": "the list of torch 2.12.1 cu126: a test's rule"}
    (data / "torch.json").write_text(json.dumps(doc))
    args = ["solve", "torch==2.12.1+cu129", "--driver", "575.51.03", "--gpu", "Tesla T4", "--data", str(data)]
    human = cli(*args)
    assert human.returncode == 0, human.stderr
    assert "unverified: this answer rests on inferred facts: torch 2.12.1 cu129 archs" in \
        " ".join(human.stdout.split())
    sol = json.loads(cli(*args, "--json").stdout)["data"]["solution"]
    assert sol["unverified"] == [{"fact": "torch 2.12.1 cu129 archs",
                                  "basis": "the list of torch 2.12.1 cu126: a test's rule"}]


def test_unknown_python_tags_and_cuda_floor_do_not_pass(matrix):
    rel = release(matrix, "torch", "2.5.1")
    blank = dataclasses.replace(rel, python=[])
    reasons = rules.check(matrix, blank, variant(blank, "cu124"), target(matrix, python="3.11"))
    assert [r.rule for r in reasons] == ["unknown"] and "Python" in reasons[0].message
    # no CUDA 10.3 row and no minor-version compatibility row for CUDA 10: its driver floor is unknown
    odd = dataclasses.replace(variant(rel, "cu124"), cuda=Version("10.3"))
    found = rules.check(matrix, rel, odd, target(matrix, "535.104.05"))
    assert any(r.rule == "unknown" and "minimum driver" in r.message for r in found)


def test_unknown_cudnn_passes_only_where_every_cudnn_agrees(matrix):
    rel = release(matrix, "torch", "2.12.1")
    cu126 = variant(rel, "cu126")
    assert cu126.cudnn is None
    assert not rules.check(matrix, rel, cu126, target(matrix, "560.28.03", ["NVIDIA A100-SXM4-80GB"]))
    on_p100 = rules.check(matrix, rel, cu126, target(matrix, "560.28.03", ["Tesla P100-PCIE-16GB"]))
    assert [r.rule for r in on_p100] == ["unknown"] and "cuDNN" in on_p100[0].message


# --- 3. GPU driver floors ------------------------------------------------------------------------

FLOORS = {"7.5": 410, "8.0": 450, "8.6": 455, "8.9": 520, "9.0": 520, "10.0": 570, "12.0": 570,
          "10.3": 575, "12.1": 575, "11.0": 580}


def test_gpu_driver_floors_are_the_first_cuda_release_drivers(matrix):
    by_cc = {cc: (a, d) for a in matrix.gpus.architectures for cc, d in a.min_driver.items()}
    for cc, branch in FLOORS.items():
        arch, driver = by_cc[cc]
        assert int(driver.split(".")[0]) == branch, cc
        first = min((r for r in matrix.cuda.releases if cc in r.compute_capabilities), key=lambda r: r.version)
        assert first.linux_min_driver == driver, cc  # NVIDIA's table, as cuda.json holds it
        assert f"{cc} CUDA {first.version} {driver}" in arch.min_driver_source


@pytest.mark.slow
def test_rtx5090_on_r550_is_refused_even_under_minor_version_compatibility(matrix):
    rel = release(matrix, "torch", "2.11.0")
    cu128 = variant(rel, "cu128")
    for driver in ("550.54.15", "565.57.01"):  # 565 >= 525.60.13 runs CUDA 12.8 under minor-version compat
        reasons = rules.check(matrix, rel, cu128, target(matrix, driver, ["NVIDIA GeForce RTX 5090"]))
        gpu = [r for r in reasons if r.rule == "gpu_driver"]
        assert gpu and gpu[0].need_driver == "570.26", reasons
    assert not rules.check(matrix, rel, cu128, target(matrix, "570.124.04", ["NVIDIA GeForce RTX 5090"]))
    with pytest.raises(NoSolution) as exc:
        solve([target(matrix, "550.54.15", ["NVIDIA GeForce RTX 5090"])], parse_request(["torch"]), matrix)
    ways = [w for w in exc.value.detail["ways_out"] if w["kind"] == "upgrade_driver"]
    assert ways and ways[0]["message"].startswith("upgrade the driver to >= 570.26 (torch 2.11.0 cu128 then fits")


@pytest.mark.slow
def test_gpu_driver_floor_blocks_one_machine_of_a_fleet(matrix):
    fleet = [target(matrix, "550.54.15", ["NVIDIA A100-SXM4-80GB"], name="a100"),
             target(matrix, "550.54.15", ["NVIDIA GeForce RTX 5090"], name="rtx5090")]
    with pytest.raises(NoSolution) as exc:
        solve(fleet, parse_request(["torch"]), matrix)
    blocking = [c for c in exc.value.detail["causes"] if c["machines"] == ["rtx5090"]]
    assert blocking and blocking[0]["rule"] == "gpu_driver"
    assert not any("a100" in c["machines"] for c in exc.value.detail["causes"])


def test_doctor_names_the_driver_to_install_for_the_gpu(matrix):
    env = validate(Environment, {"origin": "file", "driver": {"version": "550.54.15", "status": "ok"},
                                 "gpus": [{"index": 0, "name": "NVIDIA GeForce RTX 5090"}]}, "env")
    found = [f for f in diagnose(env, matrix) if f.code == "GPU_UNSUPPORTED_BY_DRIVER"]
    assert len(found) == 1 and found[0].severity == "error"
    assert found[0].fix.startswith("install driver 570.26 or newer (branch R570")


# --- 2. implied pins and the cuda-toolkit metapackage --------------------------------------------

def test_known_cudnn_implies_its_wheel(matrix):
    rel = release(matrix, "torch", "2.5.1")
    t = target(matrix, "550.54.15", ["NVIDIA A100-SXM4-80GB"])
    pins = {str(r) for r in rules.conflict_pins(matrix, rel, variant(rel, "cu121"), t)}
    assert pins == {"nvidia-cudnn-cu12==9.1.0.70", "nvidia-cuda-runtime-cu12==12.1.*"}
    tf = release(matrix, "tensorflow", "2.15.0")
    tf_pins = rules.conflict_pins(matrix, tf, variant(tf, "and-cuda"), t)
    problems = rules.pin_conflicts([Requirement(p) for p in pins], tf_pins, "torch 2.5.1 cu121", "tf 2.15.0")
    assert any("nvidia-cudnn-cu12==9.1.0.70" in p and "8.9.4.25" in p for p in problems)


def test_torch251_and_tensorflow215_do_not_share_a_set(matrix):
    t = target(matrix, "550.54.15", ["NVIDIA A100-SXM4-80GB"])
    with pytest.raises(NoSolution) as exc:
        solve([t], parse_request(["torch==2.5.1+cu121", "tensorflow[and-cuda]==2.15.*"]), matrix)
    messages = " ".join(c["message"] for c in exc.value.detail["causes"])
    assert "nvidia-cudnn-cu12==9.1.0.70" in messages


def test_cuda_toolkit_metapackage_expands_to_its_wheels(matrix):
    req = Requirement("cuda-toolkit[cublas,cudart]==13.0.3")
    parts = {str(r) for r in rules.expand_metapackage(matrix, req)}
    assert parts == {"nvidia-cublas==13.1.1.3.*", "nvidia-cuda-nvrtc==13.0.88.*", "nvidia-cuda-runtime==13.0.96.*"}
    assert rules.expand_metapackage(matrix, Requirement("cuda-toolkit[cublas]==99.0")) is None
    rel = release(matrix, "torch", "2.14.1")
    cu130 = dataclasses.replace(variant(rel, "cu130"), nvidia_pins=[
        'cuda-toolkit[cublas,cudart]==13.0.3; platform_system == "Linux"',
        'cuda-bindings<14,>=13.0.3; platform_system == "Linux"'])
    t = target(matrix, "580.65.06")
    pins = rules.conflict_pins(matrix, rel, cu130, t)
    names = {r.name for r in pins}
    assert {"cuda-toolkit", "cuda-bindings", "nvidia-cublas", "nvidia-cuda-runtime"} <= names
    assert "nvidia-cuda-runtime==13.0.*" not in {str(r) for r in pins}  # declared through the metapackage
    clash = rules.pin_conflicts(pins, [Requirement("nvidia-cublas==13.2.0.9")], "torch", "other")
    assert clash and "nvidia-cublas" in clash[0]
    assert rules.pin_conflicts(pins, [Requirement("cuda-bindings==12.9.0")], "torch", "other")


# --- 4. extras -----------------------------------------------------------------------------------

@pytest.mark.slow
def test_extras_survive_every_output(matrix, tmp_path: Path):
    t = target(matrix, "580.65.06", ["NVIDIA H100 80GB HBM3"], python="3.12")
    sol = solve([t], parse_request(["tensorflow[and-cuda]"]), matrix)
    assert "tensorflow[and-cuda]==" in requirements_txt(sol, [t])
    assert '"tensorflow[and-cuda]==' in uv_project(sol, [t])
    assert tomlread.loads(uv_project(sol, [t]))["project"]["dependencies"][0].startswith("tensorflow[and-cuda]==")
    from cudamatrix.install.plan import make_plan

    plan = make_plan(Environment(), sol, python=sys.executable)
    assert any(a.startswith("tensorflow[and-cuda]==") for s in plan.steps for a in s.argv)
    out = cli("solve", "tensorflow[and-cuda]", "--driver", "580.65.06", "--gpu", "NVIDIA H100 80GB HBM3",
              "--python", "3.12")
    assert out.returncode == 0, out.stderr
    assert re.search(r"pip install 'tensorflow\[and-cuda\]==\d", out.stdout), out.stdout
    assert "tensorflow[and-cuda]" in out.stdout.split("pip install")[0]  # the table too


def test_metapackage_pin_keeps_its_extras(matrix):
    rel = release(matrix, "torch", "2.14.1")
    cu130 = dataclasses.replace(variant(rel, "cu130"), nvidia_pins=[
        'cuda-toolkit[cublas,cudart]==13.0.3; platform_system == "Linux"'])
    one = dataclasses.replace(rel, variants=[cu130])
    sol = solve([target(matrix, "580.65.06", ["NVIDIA H100 80GB HBM3"], python="3.12")],
                parse_request(["torch"]), with_torch(matrix, [one]))
    assert "cuda-toolkit[cublas,cudart]==13.0.3" in [p.requirement() for p in sol.packages]


# --- 5. check -r as pip reads the file -----------------------------------------------------------

def test_parse_requirements_as_pip_does():
    text = ("-i https://download.pytorch.org/whl/cu126\n--extra-index-url=https://example.invalid/simple\n"
            "-f https://download.pytorch.org/whl/torch_stable.html\n"
            "torch==2.5.1+cu121 \\\n    --hash=sha256:00ff \\\n    --hash=sha256:11ee\nnumpy>=1  # comment\n")
    parsed = parse_requirements(text, "r.txt")
    assert [str(r) for r in parsed.requirements] == ["torch==2.5.1+cu121", "numpy>=1"]
    assert parsed.index_url == "https://download.pytorch.org/whl/cu126"
    assert parsed.extra_index_urls == ["https://example.invalid/simple"]
    assert parsed.find_links == ["https://download.pytorch.org/whl/torch_stable.html"]
    assert parsed.hashed == ["torch"]


@pytest.mark.parametrize("text, fits, checked", [
    ("torch==2.14.1\n", False, "torch==2.14.1+cu130"),  # the default index serves the CUDA 13.0 build
    ("--index-url https://download.pytorch.org/whl/cu126\ntorch==2.14.1\n", True, "torch==2.14.1+cu126"),
    ("--extra-index-url https://download.pytorch.org/whl/cu126\ntorch==2.14.1\n", True, "torch==2.14.1+cu126"),
    ("torch==2.5.1\n", True, "torch==2.5.1+cu124"),
    ("torch==2.14.1+cu126 --hash=sha256:00ff\n", None, None),  # a local version the default index lacks
    ("--index-url https://mirror.invalid/simple\ntorch==2.14.1\n", None, None),
    ("torchvision==0.20.1\n", None, None),  # which torch it comes with is not in the file
])
def test_check_file_reads_index_lines(matrix, text, fits, checked):
    t = target(matrix, "535.104.05", ["Tesla T4"], python="3.11")
    result = check_requirements(matrix, [t], None, text, "r.txt")
    if checked is None:
        assert result["fits"] is False and result["problems"]
        return
    assert result["checked"] == [checked]
    assert result["fits"] is fits, result["problems"]
    if not fits:
        assert result["ways_out"][0].startswith("add the line --extra-index-url https://download.pytorch.org/whl/cu126")


def test_nvidia_require_cuda_is_the_lowest_the_set_needs(matrix):
    t4 = target(matrix, "535.104.05", ["Tesla T4"], python="3.11")
    r = check_requirements(matrix, [t4], None, "--index-url https://download.pytorch.org/whl/cu126\n"
                                               "torch==2.14.1\n", "r.txt")
    assert r["nvidia_require_cuda"] == "cuda>=12.0"  # minor-version compatibility: SASS sm_75 is in the build
    h100 = target(matrix, "580.65.06", ["NVIDIA H100 80GB HBM3"], python="3.12")
    r = check_requirements(matrix, [h100], None, "torch==2.15.0\n", "r.txt")
    assert r["fits"] and r["nvidia_require_cuda"] == "cuda>=13.0"
    assert r["base_image"].endswith("ubuntu24.04") and "Python 3.12, the targets' Python" in r["python_in_image"]
    # without GPUs to prove SASS, the build's own CUDA; but never above what the driver reports
    no_gpu = target(matrix, "535.104.05")
    sol = solve([no_gpu], parse_request(["torch==2.14.1+cu126"]), matrix)
    assert nvidia_require_cuda(sol, matrix, [no_gpu]) == "cuda>=12.2"
    assert nvidia_require_cuda(sol, matrix, [target(matrix, "560.28.03")]) == "cuda>=12.6"


def test_base_image_says_how_python_gets_there(matrix):
    t = target(matrix, "535.104.05", ["Tesla T4"], python="3.11")
    r = check_requirements(matrix, [t], None, "--index-url https://download.pytorch.org/whl/cu126\n"
                                              "torch==2.14.1\n", "r.txt")
    assert "uv python install 3.11" in r["python_in_image"]
    t310 = target(matrix, "535.104.05", ["Tesla T4"], python="3.10")
    r = check_requirements(matrix, [t310], None, "--index-url https://download.pytorch.org/whl/cu126\n"
                                                 "torch==2.14.1\n", "r.txt")
    assert r["base_image"] == "nvidia/cuda:12.6.0-base-ubuntu22.04"


# --- 6. diagnosis from stated facts --------------------------------------------------------------

def _paste(name: str) -> Environment:
    return from_reports([(name, (DATA / "collect_env" / name).read_text())])


@pytest.mark.slow
def test_cpu_build_on_rtx4090_from_a_paste_is_not_healthy(matrix):
    env = _paste("windows_2.0.0cpu_rtx4090_driver528.49_textgen645.txt")
    assert env.driver.status == "unknown" and env.driver.version == "528.49"  # a paste sets no status
    codes = [f.code for f in diagnose(env, matrix)]
    assert "CPU_ONLY_BUILD" in codes
    out = cli("doctor", "--from", str(DATA / "collect_env" / "windows_2.0.0cpu_rtx4090_driver528.49_textgen645.txt"))
    assert out.returncode == 1 and "NVIDIA GeForce RTX 4090 (8.9)" in out.stdout and "(None)" not in out.stdout


@pytest.mark.slow
def test_release_missing_from_matrix_is_judged_on_stated_cuda(matrix):
    env = _paste("rhel7_1.6.0cu102_driver418.67_2xV100_pytorch43058.txt")
    findings = {f.code: f for f in diagnose(env, matrix)}
    assert "DRIVER_TOO_OLD" in findings
    assert "440.33" in findings["DRIVER_TOO_OLD"].fix
    unknown = findings["UNKNOWN_FRAMEWORK_BUILD"].evidence
    assert "unknown: the GPU architectures it was compiled for" in unknown


def test_local_tag_states_the_build(matrix):
    env = validate(Environment, {"origin": "file", "driver": {"version": "440.33.01", "status": "ok"},
                                 "gpus": [{"index": 0, "name": "Tesla T4"}],
                                 "frameworks": [{"name": "torch", "version": "1.7.0+cu110"}]}, "env")
    findings = {f.code: f for f in diagnose(env, matrix)}
    assert "DRIVER_TOO_OLD" in findings and "450" in findings["DRIVER_TOO_OLD"].fix


# --- 7. whole sentences --------------------------------------------------------------------------

def _template(text: str) -> str:
    """The message without the data it quotes (a row's source may itself hold separators)."""
    return re.sub(r"\([^()]*https?://[^()]*\)", "(source)", text).replace("matrix row: ", "")


HOLE = re.compile(r"\s[;,:.)]|\(\s*\)|\bNone\b|\s{2,}|\b(than|of|for|to|is|and|the)[;,.:]|^\s|\s$")
DRIVERS = ("352.39", "418.67", "450.80.02", "470.82.01", "525.60.13", "535.104.05", "550.54.15", "570.26",
           "580.65.06")
GPUS = ("Tesla K80", "Tesla P100-PCIE-16GB", "Tesla T4", "NVIDIA A100-SXM4-80GB", "NVIDIA GeForce RTX 4090",
        "NVIDIA H100 80GB HBM3", "NVIDIA GeForce RTX 5090")
REQUESTS = (["torch"], ["torch==2.15.0"], ["tensorflow[and-cuda]"], ["torch==2.5.1", "tensorflow[and-cuda]>=2.15"])


@pytest.mark.slow
def test_messages_have_no_empty_slots(matrix):
    seen = 0
    for driver in DRIVERS:
        for gpu in GPUS:
            t = target(matrix, driver, [gpu], python="3.11")
            for req in REQUESTS:
                try:
                    sol = solve([t], parse_request(req), matrix)
                    texts = [m for r in sol.rejected for m in r.reasons]
                except NoSolution as exc:
                    texts = [c["message"] for c in exc.detail["causes"]] + \
                            [w["message"] for w in exc.detail["ways_out"]]
                for text in texts:
                    seen += 1
                    assert not HOLE.search(_template(text)), text
            env = validate(Environment, {"origin": "file", "driver": {"version": driver, "status": "unknown"},
                                         "gpus": [{"index": None, "name": gpu, "memory_total_mib": 100,
                                                   "memory_used_mib": 99, "processes": [{"pid": None}]}],
                                         "frameworks": [{"name": "torch", "version": "2.5.1+cu124"}],
                                         "packages": {"torch": "2.5.1+cu124"},
                                         "requirements": {"torch": ["nvidia-cudnn-cu12==9.1.0.70"]}}, "env")
            for f in diagnose(env, matrix):
                for text in [f.title, f.fix or "", *f.evidence]:
                    assert not HOLE.search(_template(text)), (f.code, text)
    assert seen > 500


def cli(*args: str) -> subprocess.CompletedProcess:
    """The CLI in this process."""
    return run_cli(list(args), env=dict(os.environ), timeout=180, text=True)


def test_check_installed_uses_the_detected_build(matrix):
    env = validate(Environment, {"origin": "file", "driver": {"version": "535.104.05", "status": "ok"},
                                 "gpus": [{"index": 0, "name": "Tesla T4", "compute_capability": "7.5"}],
                                 "python": {"version": "3.11.4", "platform": "linux_x86_64"},
                                 "packages": {"torch": "2.14.1"},
                                 "frameworks": [{"name": "torch", "version": "2.14.1", "variant": "cu130"}]}, "env")
    t = target(matrix, "535.104.05", ["Tesla T4"], python="3.11")
    result = check_requirements(matrix, [t], env, None, None)
    assert result["checked"] == ["torch==2.14.1+cu130"] and result["fits"] is False
