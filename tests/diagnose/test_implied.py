"""diagnose/implied.py: the findings a paste's own words imply, and the concrete build a fix names, on real pastes
of tests/data/pastes (each file's first line names its public source) and the frozen matrix snapshot."""
from __future__ import annotations

import json

import pytest
from packaging.version import Version
from support.fakes import DATA, run_cli
from support.snapshot import snapshot_matrix

from cudamatrix.diagnose.findings import diagnose
from cudamatrix.models import Environment, Framework, GpuInfo, ToolMessage
from cudamatrix.pastes.reports import from_reports
from cudamatrix.solve import rules
from cudamatrix.solve.target import Target

PASTES = DATA / "pastes"


def pasted(stem: str) -> Environment:
    return from_reports([(stem, (PASTES / f"{stem}.txt").read_text().split("\n", 1)[1])], strict=True)


def errors(env: Environment):
    return [f for f in diagnose(env, snapshot_matrix()) if f.severity == "error"]


def build_of(version: str, variant: str | None):
    """A torch row of the snapshot: the variant named, or the default index's one."""
    release = next(r for r in snapshot_matrix().frameworks("torch") if r.version == Version(version))
    return release, next(v for v in release.variants if v.name == variant or variant is None and v.pypi_default)


def test_arch_warning_alone_is_arch_unsupported_with_a_build_that_covers_the_gpu():
    (f,) = errors(pasted("torch-arch-warning_sm120_5060ti_quoted-one-line_kokoro306"))
    assert f.code == "ARCH_UNSUPPORTED" and "NVIDIA GeForce RTX 5060 Ti" in f.title
    assert "the installed build carries SASS sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90, PTX none" in f.evidence
    (command,) = f.fix_commands
    pin = next(a for a in command if a.startswith("torch=="))
    version, _, local = pin[len("torch=="):].partition("+")
    release, var = build_of(version, local or None)
    # the build named covers compute capability 12.0 by the rules' own SASS/PTX test (CUDA Programming Guide)
    assert rules.sass_covers(var.archs, "12.0") or rules.ptx_covers(var.ptx, "12.0")
    assert f"install torch {version} ({var.name}" in f.fix and "which needs driver >=" in f.fix


@pytest.mark.slow
def test_the_fix_is_the_set_solve_gives(tmp_path):
    """"from the same solve the solve command would give": doctor's command is solve's pip arguments."""
    paste = tmp_path / "warning.txt"
    paste.write_text((PASTES / "torch-arch-warning_sm120_5090_chinese-prose_leggedlab26.txt").read_text())
    doctor = json.loads(run_cli(["doctor", "--json", "--from", str(paste)]).stdout)
    solve = json.loads(run_cli(["solve", "torch", "--json", "--from", str(paste)]).stdout)
    (finding,) = [f for f in doctor["data"]["findings"] if f["code"] == "ARCH_UNSUPPORTED"]
    assert finding["fix_commands"] == [["pip", "install", *solve["data"]["solution"]["pip_args"]]]


def test_driver_too_old_alone_names_a_build_for_the_drivers_cuda():
    (f,) = errors(pasted("torch-warning_11070_forge2053"))
    assert f.code == "DRIVER_TOO_OLD" and "the driver runs CUDA 11.7 at most" in f.evidence
    pin = next(a for a in f.fix_commands[0] if a.startswith("torch=="))
    version, _, variant = pin[len("torch=="):].partition("+")
    release, var = build_of(version, variant)
    # a driver that runs CUDA 11.7 is at least 11.7's first driver, 515.43.04 (NVIDIA's "CUDA Toolkit and
    # Corresponding Driver Versions"): the build named passes every driver rule there
    low = Target(name="t", driver="515.43.04")
    assert not [r for r in rules.check(snapshot_matrix(), release, var, low) if r.rule == "driver_floor"]


def test_driver_too_old_with_the_build_known_names_its_driver_floor():
    (f,) = errors(pasted("collect_env_2.4.0cu121_driver-too-old-11040_undefined-symbol_vllm11623"))
    # torch 2.4.0+cu121 needs CUDA 12.1: 525.60.13 under minor-version compatibility, 530.30.02 in full (README:
    # "12.x >= 525.60.13"; CUDA 12.1's row of NVIDIA's table)
    assert f.fix.startswith("upgrade the driver to >= 525.60.13 (530.30.02 for full support of CUDA 12.1)")
    assert "; or install torch " in f.fix and "cu118" in f.fix


def test_words_join_the_finding_the_rules_made():
    env = pasted("issue-template_markdown-backticks_5090-sm120_driver-590.48.01_torch2.5.1-cu121_berkeley-humanoid49")
    (f,) = [f for f in errors(env) if f.code == "ARCH_UNSUPPORTED"]
    assert f.title.startswith("torch 2.5.1 has no kernel image")  # the rules' finding, one of its kind
    assert any(e.startswith("torch said: ") and "no kernel image" in e for e in f.evidence)


def test_cudnn_messages():
    (f,) = errors(pasted("torch-error_cudnn-incompatibility_8.7.0-vs-8.2.4_kohya-log-torch2.0.1cu118_kohya1096"))
    assert (f.code, f.title) == ("CUDNN_MISMATCH", "torch was built with cuDNN 8.7.0 but found cuDNN 8.2.4")
    assert "cuDNN 8.7.0 or a later 8.x" in f.fix
    # with the build known, the wheel it declares (every CUDA build of torch 2.5.1 needs nvidia-cudnn-cu12==9.1.0.70;
    # the default index's cu124 row holds the pins)
    env = Environment(origin="report", frameworks=[Framework(name="torch", version="2.5.1", variant="cu124")],
                      messages=[ToolMessage(tool="loader", kind="library_missing", text="libcudnn.so.9: cannot open "
                                            "shared object file", library="cudnn", soname="libcudnn.so.9")])
    (missing,) = [f for f in errors(env) if f.code == "CUDNN_MISMATCH"]
    assert missing.fix_commands == [["pip", "install", "nvidia-cudnn-cu12==9.1.0.70"]]


def test_other_libraries():
    (missing,) = errors(pasted("tf-log_could-not-load-libcudart.so.11.0_colab-lib64-nvidia_dreamtalk32"))
    assert (missing.code, missing.title) == ("LIBRARY_MISSING", "libcudart.so.11.0 could not be loaded (tensorflow)")
    (older,) = errors(pasted("jax-error_backend-failed_found-cuda-12010-built-12020_colab_kohya-colab94"))
    assert (older.code, older.title) == ("LIBRARY_MISMATCH",
                                         "jax was built against cudart 12.2; the one found is 12.1 (older)")


def test_no_kernel_image_where_the_installed_torch_covers_the_gpu_blames_another_package():
    # torch 2.9.1 cu128 carries sm_120 (its row in the snapshot): the failing kernel is an extension's
    env = Environment(origin="report", packages={"torch": "2.9.1"},
                      frameworks=[Framework(name="torch", version="2.9.1", variant="cu128", cuda="12.8")],
                      gpus=[GpuInfo(index=0, name="NVIDIA GeForce RTX 5080", compute_capability="12.0")],
                      messages=[ToolMessage(tool="torch", kind="no_kernel_image",
                                            text="RuntimeError: CUDA error: no kernel image is available")])
    assert rules.sass_covers(build_of("2.9.1", "cu128")[1].archs, "12.0")
    (f,) = errors(env)
    assert f.code == "ARCH_UNSUPPORTED" and "another package's" in f.fix and not f.fix_commands


def test_a_paste_without_the_gpu_asks_for_its_compute_capability():
    (f,) = errors(pasted("torch-error_no-kernel-image_windows-traceback_gsplat-extension_cuda12.8-pytorch2.7.1_"
                         "gsplat1053"))
    assert "the GPU's compute capability is not stated" in f.fix and "--gpu CC" in f.fix
