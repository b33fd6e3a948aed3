"""What a paste's own words say about its driver, diagnosed (cudamatrix/diagnose/pasted.py), and advisories as
conditions over facts (cudamatrix/diagnose/host.py), on real pastes of tests/data/pastes and the frozen snapshot.

Facts the expectations rest on:
- NVIDIA Container Toolkit ("Specialized Configurations with Docker", Constraints): an image's NVIDIA_REQUIRE_CUDA
  is checked against the driver's CUDA version; NVIDIA_DISABLE_REQUIRE switches every such check off.
- CUDA Toolkit Release Notes: CUDA 12.8 GA needs Linux driver >= 570.26; the R550 branch reports CUDA 12.4
  (the snapshot's cuda.json driver_branches and releases copy both).
- pytorch/functorch#926: torch 1.12 fails with "compiled against (8, 3, 2) but linked against (8, 0, 3)" when an
  older cuDNN is the one loaded (advisory CM-2022-001).
"""
from __future__ import annotations

import pytest
from support.fakes import DATA
from support.snapshot import snapshot_matrix

from cudamatrix.diagnose.findings import diagnose, summary_exit
from cudamatrix.models import Environment, Framework, GpuInfo, Library, ToolMessage
from cudamatrix.pastes.reports import from_reports


def pasted(stem: str) -> Environment:
    body = (DATA / "pastes" / f"{stem}.txt").read_text(encoding="utf-8").partition("\n")[2]
    return from_reports([(stem, body)], strict=True)


def errors(env: Environment, code: str):
    return [f for f in diagnose(env, snapshot_matrix()) if f.code == code and f.severity == "error"]


# --- a container's CUDA requirement ----------------------------------------------------------------------------

def test_a_refused_container_is_driver_too_old_with_an_image_for_the_driver_a_driver_and_the_override():
    env = pasted("container-error_requirement-cuda12.8_smi-550.144.03_tabbyapi324")
    [msg] = [m for m in env.messages if m.kind == "container_requirement"]
    assert (msg.tool, msg.library, msg.minimum) == ("nvidia-container-cli", "cuda", "12.8")
    [f] = errors(env, "DRIVER_TOO_OLD")
    assert f.evidence == [
        "nvidia-container-cli said: requirement error: unsatisfied condition: cuda>=12.8, please update your driver "
        "to a newer version, or use an earlier cuda container",
        "the image requires CUDA >= 12.8 (its NVIDIA_REQUIRE_CUDA)",
        "driver 550.144.03 runs CUDA 12.4 at most (the driver's CUDA Version)"]
    assert "use an image built for CUDA 12.4 or older" in f.fix and "a 12.4.x tag" in f.fix
    assert "upgrade the driver to >= 570.26 on Linux or >= 570.65 on Windows (the minimum drivers of CUDA 12.8)" in f.fix
    assert "-e NVIDIA_DISABLE_REQUIRE=1" in f.fix and "container-toolkit" in f.fix


def test_a_refused_container_alone_is_read_and_its_image_fix_asks_for_the_drivers_cuda():
    """nvidia-docker#1442: the error alone (no nvidia-smi); refused as no known tool output before."""
    env = pasted("container-error_requirement-cuda11.0_alone_nvidia-docker1442")
    [f] = errors(env, "DRIVER_TOO_OLD")
    assert "one no newer than the CUDA Version nvidia-smi prints on the host" in f.fix
    assert "upgrade the driver to >= 450.51.05 on Linux or >= 451.48 on Windows (the minimum drivers of CUDA 11.0)" in \
        f.fix


def test_the_driver_table_gives_the_drivers_cuda_when_the_paste_states_only_its_version():
    env = pasted("container-error_requirement-cuda12.8_smi-550.144.03_tabbyapi324")
    env.driver.cuda_version = None
    [f] = errors(env, "DRIVER_TOO_OLD")
    assert "driver 550.144.03 runs CUDA 12.4 at most (the matrix's driver-branch table)" in f.evidence


# --- nvidia-smi without a driver, in a paste ---------------------------------------------------------------------

SMI_FAILED = ("the paste says: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make "
              "sure that the latest NVIDIA driver is installed and running.")


@pytest.mark.parametrize("stem, where, said, fix", [
    ("nvidia-smi-error_no-driver_container-prompt_manylinux-cuda5", "in a Docker container",
     "the paste shows in a Docker container: [root@24c96d985c30 /]# nvidia-smi", "docker run --gpus all"),
    ("nvidia-smi-error_no-driver_wsl-version-mnt-c_wsl9640", "on WSL 2",
     "the paste shows on WSL 2: PS C:\\Users\\98246> wsl.exe --version", "install or update the NVIDIA driver on Windows"),
    ("nvidia-smi-error_no-driver_modprobe-module-missing_nvidia-docker365", "on a kernel without the NVIDIA module",
     "modprobe said: modprobe: FATAL: Module nvidia not found.", "sudo dkms autoinstall"),
])
def test_a_pasted_no_driver_is_an_error_quoting_the_paste_with_the_fix_for_where_it_was_taken(stem, where, said, fix):
    env = pasted(stem)
    findings = diagnose(env, snapshot_matrix())
    [f] = [f for f in findings if f.code == "NO_DRIVER"]
    assert f.severity == "error" and summary_exit(findings) == 1
    assert f.title == f"The pasted machine's NVIDIA driver could not be reached ({where})"
    assert f.evidence[0] == SMI_FAILED and said in f.evidence
    assert not any("/proc/driver/nvidia/version" in e for e in f.evidence)  # nothing about this machine
    assert fix in f.fix and f.fix.count("; ") <= 2  # that place's fix only


def test_a_pasted_no_driver_that_shows_no_place_gives_each_places_fix():
    """mattshma/bigdata#108: the docker command is in the prose, not run at a prompt: no place is shown."""
    [f] = errors(pasted("nvidia-smi-error_no-driver_docker-run-in-prose_bigdata108"), "NO_DRIVER")
    assert f.title == "The pasted machine's NVIDIA driver could not be reached"
    assert f.evidence == [SMI_FAILED]
    assert all(w in f.fix for w in ("in a container: ", "on WSL 2: ", "otherwise the driver is installed but not "))


# --- advisories: conditions over facts -----------------------------------------------------------------------------

def _torch_1_12(*, found=None, system=None) -> Environment:
    env = Environment(origin="report", packages={"torch": "1.12.1+cu116"},
                      frameworks=[Framework(name="torch", version="1.12.1+cu116", variant="cu116", cuda="11.6")],
                      gpus=[GpuInfo(index=0, name="Tesla T4", compute_capability="7.5")])
    env.driver.version, env.driver.cuda_version = "510.47.03", "11.6"
    if found:
        env.messages.append(ToolMessage(tool="torch", kind="library_version", library="cudnn", built="8.3.2",
                                        found=found, text="cuDNN version incompatibility"))
    if system:
        env.libraries.append(Library(name="cudnn", soname="libcudnn.so.8", version=system, origin="report:collect_env",
                                     path=f"/usr/lib/x86_64-linux-gnu/libcudnn.so.{system}"))
    return env


@pytest.mark.parametrize("found, system, expected", [
    ("8.0.3", None, [("KNOWN_BAD", "error")]),  # the cuDNN it needs to see, seen loaded
    ("8.3.2", None, []),  # another one loaded
    (None, "8.4.1", []),  # a healthy report: the only cuDNN on the machine is not an older one
    (None, "8.0.3", [("KNOWN_BAD", "info")]),  # an older copy exists; whether it is loaded is not shown
    (None, None, [("KNOWN_BAD", "info")]),  # nothing known: a note at most
])
def test_an_advisory_fires_only_when_the_facts_meet_its_library_condition(found, system, expected):
    got = [(f.code, f.severity) for f in diagnose(_torch_1_12(found=found, system=system), snapshot_matrix())
           if f.code == "KNOWN_BAD"]
    assert got == expected
    if expected == [("KNOWN_BAD", "info")]:
        [f] = [f for f in diagnose(_torch_1_12(found=found, system=system), snapshot_matrix()) if f.code == "KNOWN_BAD"]
        assert f.title.startswith("CM-2022-001 may apply: ")
        assert "applies only when the cudnn loaded is <8.3.2; the facts do not show which cudnn is loaded" in f.evidence


def test_every_shipped_advisory_on_a_version_alone_states_its_condition_as_data():
    """An advisory whose only condition is a package version says what else it needs to see (a library and its
    versions, or the library failing to load); one with a GPU or driver condition has facts to meet already."""
    from cudamatrix.matrix.load import load_matrix

    for adv in load_matrix().advisories.advisories:
        if not (adv.gpu_compute_capabilities or adv.driver):
            assert adv.library and (adv.library_version or adv.library_missing), adv.id


# --- a named GPU's compute capability, from the matrix's GPU table -----------------------------------------------

@pytest.mark.parametrize("stem, name, cc, row", [
    ("nvidia-smi-q_460.32.03_T4_no-compute-cap_colab_sd-colab6", "Tesla T4", "7.5", "NVIDIA T4"),
    ("nvidia-smi_450.66-418.67_V100-SXM2-cut_backtick_rapids34", "Tesla V100-SXM2...", "7.0", "Tesla V100 SXM2 16GB"),
])
def test_detect_from_fills_a_named_gpus_compute_capability_and_says_it_was_inferred(stem, name, cc, row):
    """nvidia-smi's table and an older -q print no compute capability; detect --from (from_report_files) takes it
    from the matrix's GPU table and says so, and a fleet class then names it ("Tesla T4 (7.5)", not "(?)")."""
    from cudamatrix.fleet.classes import class_facts, describe
    from cudamatrix.pastes.reports import from_report_files

    env = from_report_files([str(DATA / "pastes" / f"{stem}.txt")])
    assert [(g.name, g.compute_capability) for g in env.gpus] == [(name, cc)]
    [note] = [n.message for n in env.notes if "inferred from its name" in n.message]
    assert note.startswith(f"GPU 0 ({name}): compute capability {cc} inferred from its name (the matrix's GPU table, "
                           f"{row}: https://developer.nvidia.com/")
    assert describe(class_facts(env)).startswith(f"{name} ({cc}); driver ")
    assert from_reports([(stem, (DATA / "pastes" / f"{stem}.txt").read_text().partition("\n")[2])]).gpus[0] \
        .compute_capability is None  # what the paste itself states (the corpus's fields) stays as read


# --- releases the matrix holds, and those before its first row ----------------------------------------------------

def test_a_pasted_tensorflow_2_8_is_the_matrix_row_its_plain_wheel_is():
    """tensorflow#60854 names TensorFlow 2.8.0: the matrix holds it (variant "gpu", the plain wheel: no extra, no
    other index), so it is no UNKNOWN_FRAMEWORK_BUILD."""
    from cudamatrix.diagnose.context import match_installed

    env = pasted("tf-template-headings_2.8.0_build-info-11.2-8_laptop-3080_tensorflow60854")
    [inst] = match_installed(env, snapshot_matrix())
    assert (inst.name, inst.version, inst.variant_name) == ("tensorflow", "2.8.0", "gpu")
    assert [f.code for f in diagnose(env, snapshot_matrix())] == []


def test_tensorflow_2_8_missing_cudnn_names_the_system_cudnn_it_was_built_with_not_a_wheel_it_does_not_declare():
    """The same paste with TensorFlow's own "Could not load dynamic library 'libcudnn.so.8'" (its title) added: the
    release declares no nvidia-cudnn wheel (the matrix row has no pins), so the fix is the cuDNN 8.1 for CUDA 11.x
    its row was built with, loaded from the system."""
    env = pasted("tf-template-headings_2.8.0_build-info-11.2-8_laptop-3080_tensorflow60854")
    env.messages.append(ToolMessage(tool="tensorflow", kind="library_missing", library="cudnn", soname="libcudnn.so.8",
                                    text="Could not load dynamic library 'libcudnn.so.8'"))
    [f] = errors(env, "CUDNN_MISMATCH")
    assert f.fix.startswith("tensorflow 2.8.0 declares no nvidia-cudnn wheel: it loads the system's cuDNN, and was "
                            "built with cuDNN 8.1 for CUDA 11.2 (matrix row tensorflow 2.8.0 gpu): install cuDNN 8.1 "
                            "for CUDA 11.x where the loader finds it")
    assert "nvidia-cudnn wheel the framework declares" not in f.fix and f.fix_commands == []


def test_a_release_before_the_matrixs_first_row_is_not_sent_to_update_cudamatrix():
    """tensorflow#44040: TensorFlow 2.3.1, older than the matrix's first TensorFlow row (2.4.0): no update brings it."""
    env = pasted("tf-system-info_2.3.1_before-matrix_found-device-960M_tensorflow44040")
    [f] = [f for f in diagnose(env, snapshot_matrix()) if f.code == "UNKNOWN_FRAMEWORK_BUILD"]
    assert f.severity == "info"
    assert f.title == "tensorflow 2.3.1 is not in the matrix 2026.11.26 (it starts at tensorflow 2.4.0)"
    assert f.fix.startswith("the matrix starts at tensorflow 2.4.0: older releases are not covered")
    assert "update cudamatrix" not in f.fix


# --- a +cpu build beside a CUDA toolkit --------------------------------------------------------------------------

def test_a_cpu_build_beside_a_pasted_cuda_toolkit_is_cpu_only_build():
    """pytorch#49325, its two pastes: nvcc's "release 10.2, V10.2.89" and collect_env's "PyTorch version:
    1.7.1+cpu". The local version says the build carries no CUDA, the toolkit that the machine is set up for it."""
    nvcc = (DATA / "pastes" / "nvcc_10.2.89_windows-pdt_then-question_pytorch49325.txt").read_text(encoding="utf-8")
    collect_env = (DATA / "collect_env" / "windows10_1.7.1cpu_pytorch49325.txt").read_text(encoding="utf-8")
    items = [("nvcc", nvcc.partition("\n")[2]), ("collect_env", collect_env.partition("\n")[2])]
    env = from_reports(items, strict=True)
    assert [f.variant for f in env.frameworks if f.name == "torch"] == ["cpu"]
    [f] = errors(env, "CPU_ONLY_BUILD")
    assert f.title == "torch 1.7.1+cpu is a CPU-only build on a CUDA machine"
    assert f.evidence == ["torch variant cpu", "a CUDA toolkit beside it: CUDA 10.2.89"]
    unknown = [g for g in diagnose(env, snapshot_matrix()) if g.code == "UNKNOWN_FRAMEWORK_BUILD"]
    assert [g.severity for g in unknown] == ["info"] and "(it starts at torch 1.12.0)" in unknown[0].title
    env = from_reports(items[1:], strict=True)  # collect_env alone: no toolkit, no GPU stated
    assert errors(env, "CPU_ONLY_BUILD") == []
