"""What several pasted reports say about one machine, merged (cudamatrix.pastes.merge): the first paste's
fact of a GPU or of the driver wins, a full GPU name replaces a truncated one, a GPU gains the processes it lacks,
GPUs are listed by index, and the worse driver status wins, with its own error.

Every paste is a real public one (tests/data: nvidia-smi tables, collect_env, torch's warnings), read in this
process by ``from_reports``, which merges the readers' findings in the order the pastes are given.
"""
from __future__ import annotations

from support.fakes import fixture

from cudamatrix.pastes.reports import from_reports

SMI_V100 = "pastes/nvidia-smi_385.54_TCC-WDDM_no-cuda-column_V100_spacy3735.txt"  # "Tesla V100-PCIE..." (cut)
COLLECT_2XV100 = "collect_env/rhel7_1.6.0cu102_driver418.67_2xV100_pytorch43058.txt"  # 2x "Tesla V100-PCIE-16GB"
SMI_5090 = "nvidia-smi/580.65.06_rtx5090.txt"
SMI_4070 = "nvidia-smi/550.40.07_rtx4070_frogging-family.txt"
SMI_1070_PROCESSES = "pastes/nvidia-smi_396.24_no-cuda-column_processes_nvml-fix11.txt"  # 3 processes on GPU 0
SMI_2070_PROCESSES = "nvidia-smi/windows_460.15_rtx2070_WDDM_insufficient-permissions_WSL6014.txt"  # 2, name cut
WARNING_1070TI = "pastes/torch-arch-warning_sm61_1070ti_nightly-cu111_pytorch53164.txt"  # GPU 0, no processes
SMI_MIG = "nvidia-smi/mig_devices_A100_nvitop8.txt"  # GPUs 1 and 2 only
NVML_UNKNOWN = "nvidia-smi/error_nvml-unknown-error_after-daemon-reload_nvidia-docker1671.txt"  # error
DEVICE_HANDLE = "nvidia-smi/error_device-handle-unknown-error_2015_xxd3vin19.txt"  # error, another message
NO_DRIVER = "nvidia-smi/error_no-driver_docker-without-nvidia-runtime.txt"  # absent
MISMATCH = "nvidia-smi/error_nvml-mismatch_plus-proc-version-520-vs-dpkg-525_illinois70.txt"  # mismatch


def merged(*pastes: str):
    return from_reports([(rel, fixture(rel)) for rel in pastes])


def gpus(env) -> list[tuple]:
    return [(g.index, g.name, g.compute_capability, g.memory_total_mib, g.pci_bus_id, [p.pid for p in g.processes],
             g.source) for g in env.gpus]


def test_a_full_gpu_name_replaces_a_truncated_one_whichever_paste_comes_first():
    """nvidia-smi's table cuts "Tesla V100-PCIE-16GB" to "Tesla V100-PCIE..."; collect_env names it whole: the
    whole name is kept in either order, with the table's memory and bus id (facts collect_env lacks)."""
    alone = merged(SMI_V100)
    assert gpus(alone) == [(0, "Tesla V100-PCIE...", None, 16280, "00000000:84:00.0", [], "nvidia-smi")]
    second = (1, "Tesla V100-PCIE-16GB", None, None, None, [], "report:collect_env")
    assert gpus(merged(SMI_V100, COLLECT_2XV100)) == [
        (0, "Tesla V100-PCIE-16GB", None, 16280, "00000000:84:00.0", [], "nvidia-smi"), second]
    assert gpus(merged(COLLECT_2XV100, SMI_V100)) == [
        (0, "Tesla V100-PCIE-16GB", None, 16280, "00000000:84:00.0", [], "report:collect_env"), second]


def test_the_first_pastes_facts_of_a_gpu_and_a_driver_win():
    """Two tables of GPU 0: every fact the first one states stays (a later paste fills only what is missing)."""
    rtx5090 = (0, "NVIDIA GeForce RTX 5090", None, 32607, "00000000:02:00.0", [], "nvidia-smi")
    rtx4070 = (0, "NVIDIA GeForce RTX 4070", None, 12282, "00000000:2D:00.0", [], "nvidia-smi")
    first, other = merged(SMI_5090, SMI_4070), merged(SMI_4070, SMI_5090)
    assert gpus(first) == [rtx5090] and gpus(other) == [rtx4070]
    assert (first.driver.version, first.driver.cuda_version) == ("580.65.06", "13.0")
    assert (other.driver.version, other.driver.cuda_version) == ("550.40.07", "12.4")


def test_a_gpu_gains_the_processes_it_lacks_and_keeps_its_own():
    """torch's warning names GPU 0 without processes: the nvidia-smi table's processes are added; a GPU that has
    processes keeps them (the first table's), while a full name still replaces the second table's cut one."""
    env = merged(WARNING_1070TI, SMI_1070_PROCESSES)
    assert gpus(env) == [(0, "GeForce GTX 1070 Ti", "6.1", 8114, "00000000:24:00.0", [489, 662, 668],
                          "report:torch warning")]
    assert [p.name for p in env.gpus[0].processes] == ["/usr/bin/X", "kwin_x11", "/usr/bin/krunner"]
    assert gpus(merged(SMI_2070_PROCESSES, SMI_1070_PROCESSES)) == [
        (0, "GeForce GTX 1070", None, 8192, "00000000:01:00.0", [1752, 2424], "nvidia-smi")]
    assert gpus(merged(SMI_1070_PROCESSES, SMI_2070_PROCESSES)) == [
        (0, "GeForce GTX 1070", None, 8114, "00000000:24:00.0", [489, 662, 668], "nvidia-smi")]


def test_gpus_are_listed_by_index_whatever_paste_names_them_first():
    """MIG devices on GPUs 1 and 2 pasted before a table of GPU 0: the list is 0, 1, 2."""
    env = merged(SMI_MIG, SMI_5090)
    assert [(g.index, g.name, g.mig_mode) for g in env.gpus] == [
        (0, "NVIDIA GeForce RTX 5090", None), (1, None, "Enabled"), (2, None, "Enabled")]


def test_the_worse_driver_status_wins_with_its_error_and_an_equal_one_keeps_the_first_error():
    """absent < error < mismatch; of two errors, the first paste's message is the one said."""
    unknown = "Failed to initialize NVML: Unknown Error"
    for pastes, status, error in [
            ((NVML_UNKNOWN, DEVICE_HANDLE), "error", unknown),
            ((DEVICE_HANDLE, NVML_UNKNOWN), "error", "Unable to determine the device handle for GPU 0000:0B:00.0: "),
            ((NO_DRIVER, NVML_UNKNOWN), "error", unknown), ((NVML_UNKNOWN, NO_DRIVER), "error", unknown),
            ((NVML_UNKNOWN, MISMATCH), "mismatch", "Failed to initialize NVML: Driver/library version mismatch")]:
        driver = merged(*pastes).driver
        assert driver.status == status and driver.error.startswith(error), (pastes, driver)
