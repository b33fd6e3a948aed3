"""nvidia-smi parsers on captured real outputs of every driver generation (tests/data, each with its source)."""
from __future__ import annotations

import pytest
from support.fakes import DATA, fixture

from cudamatrix.detect import smi

TABLES = [
    # file, driver, cuda, status, [(name, used MiB, total MiB)]
    ("nvidia-smi/331.62_multi-gtx680_old-format-no-cuda_cbio.txt", "331.62", None, "ok",
     [("GeForce GTX 680", 9, 4095)] * 3),
    ("nvidia-smi/418.67_V100_rhel_truncated_pytorch43058.txt", "418.67", "10.1", "unknown", []),
    ("nvidia-smi/450.57_titan-xp_mig-row_nvgpu15.txt", "450.57", "11.0", "ok", [("TITAN Xp", 7, 12196)]),
    ("nvidia-smi/470.256.02_A10G_bottlerocket-k8s.txt", "470.256.02", "11.4", "ok", [("NVIDIA A10G", 0, 22731)]),
    ("nvidia-smi/550.40.07_rtx4070_frogging-family.txt", "550.40.07", "12.4", "ok",
     [("NVIDIA GeForce RTX 4070", 430, 12282)]),
    ("nvidia-smi/570.124.06_2xH20-3e_hami1520.txt", "570.124.06", "12.8", "ok",
     [("NVIDIA H20-3e", 135144, 143771)] * 2),
    ("nvidia-smi/570.195.03_T4G_cuda13.0-in-container_eks.txt", "570.195.03", "13.0", "ok",
     [("NVIDIA T4G", 0, 15360)]),
    ("nvidia-smi/580.65.06_rtx5090.txt", "580.65.06", "13.0", "ok", [("NVIDIA GeForce RTX 5090", 1124, 32607)]),
    ("nvidia-smi/610.43.02_8xB200_KMD-UMD-format_sglang27487.txt", "610.43.02", "13.3", "ok",
     [("NVIDIA B200", 0, 183359)] * 2),
    ("nvidia-smi/windows_460.15_rtx2070_WDDM_insufficient-permissions_WSL6014.txt", "460.15", "11.1", "ok",
     [("GeForce RTX 207...", 176, 8192)]),
    ("nvidia-smi/wsl_545.46-546.80_cuda-ERR_rtx3060_WSL11589.txt", "546.80", None, "error",
     [("NVIDIA GeForce RTX 3060 ...", 816, 6144)]),
]


@pytest.mark.parametrize("rel,driver,cuda,status,gpus", TABLES, ids=[t[0].split("/")[1][:40] for t in TABLES])
def test_table_generations(rel, driver, cuda, status, gpus):
    r = smi.parse_table(fixture(rel))
    assert r.found
    assert r.driver.version == driver
    assert r.driver.cuda_version == cuda
    assert r.driver.status == status
    assert [(g.name, g.memory_used_mib, g.memory_total_mib) for g in r.gpus] == gpus
    assert [g.index for g in r.gpus] == list(range(len(gpus)))


def test_table_details_mig_bus_processes_and_wsl_versions():
    b200 = smi.parse_table(fixture("nvidia-smi/610.43.02_8xB200_KMD-UMD-format_sglang27487.txt"))
    assert b200.driver.kernel_module_version == "610.43.02"
    assert [g.mig_mode for g in b200.gpus] == ["Disabled", "Disabled"]
    assert b200.gpus[1].pci_bus_id == "00000000:68:00.0"
    win = smi.parse_table(fixture("nvidia-smi/windows_460.15_rtx2070_WDDM_insufficient-permissions_WSL6014.txt"))
    assert [(p.pid, p.name) for p in win.gpus[0].processes][:2] == [
        (1752, "Insufficient Permissions"), (2424, "...b3d8bbwe\\WinStore.App.exe")]
    wsl = smi.parse_table(fixture("nvidia-smi/wsl_545.46-546.80_cuda-ERR_rtx3060_WSL11589.txt"))
    assert wsl.driver.library_version == "545.46"  # nvidia-smi's own version differs from the Windows driver
    assert "ERR!" in wsl.driver.error


@pytest.mark.parametrize("rel,status,words", [
    ("nvidia-smi/error_no-driver_docker-without-nvidia-runtime.txt", "absent", "couldn't communicate"),
    ("nvidia-smi/error_nvml-mismatch_plus-proc-version-520-vs-dpkg-525_illinois70.txt", "mismatch",
     "Driver/library version mismatch"),
    ("nvidia-smi/error_device-handle-unknown-error_2015_xxd3vin19.txt", "error", "Unknown Error"),
    ("nvidia-smi/error_nvml-unknown-error_after-daemon-reload_nvidia-docker1671.txt", "error", "Unknown Error"),
])
def test_error_messages(rel, status, words):
    r = smi.parse_table(fixture(rel))
    assert r.found and r.driver.status == status and words in r.driver.error
    assert smi.parse_error(fixture(rel))[0] == status


@pytest.mark.parametrize("text,status", [
    ("bash: nvidia-smi: command not found", "absent"),
    ("'nvidia-smi' is not recognized as an internal or external command,", "absent"),
    ("No devices were found", "no_device"),
    ("Failed to initialize NVML: GPU access blocked by the operating system", "error"),
    ("all good here", None),
])
def test_error_words(text, status):
    got = smi.parse_error(text)
    assert (got[0] if got else None) == status


def test_q_log():
    t4 = smi.parse_q(fixture("nvidia-smi/q_440.33.01_T4_aws_nvidia-docker1256.txt"))
    assert (t4.driver.version, t4.driver.cuda_version) == ("440.33.01", "10.2")
    assert t4.gpus[0].name == "Tesla T4"
    assert t4.gpus[0].uuid == "GPU-4cfe4f25-9d56-b1f1-edb8-dfa13fc461ae"
    dgx = smi.parse_q(fixture("nvidia-smi/q_dgx1_8xV100-SXM2_partial_nvidia-docker868.txt"))
    assert dgx.found and dgx.driver.version is None  # the paste starts below the header
    assert dgx.gpus[0].name == "Tesla V100-SXM2-16GB" and dgx.gpus[0].pci_bus_id == "00000000:06:00.0"


def test_q_memory_and_mig_sections():
    text = """Driver Version                            : 535.104.05
CUDA Version                              : 12.2

Attached GPUs                             : 1
GPU 00000000:00:04.0
    Product Name                          : NVIDIA A100-SXM4-40GB
    MIG Mode
        Current                           : Enabled
        Pending                           : Enabled
    FB Memory Usage
        Total                             : 40960 MiB
        Reserved                          : 571 MiB
        Used                              : 4 MiB
        Free                              : 40384 MiB
"""
    r = smi.parse_q(text)
    assert (r.driver.version, r.driver.cuda_version) == ("535.104.05", "12.2")
    g = r.gpus[0]
    assert (g.memory_total_mib, g.memory_used_mib, g.mig_mode) == (40960, 4, "Enabled")


def test_query_csv_with_header_and_compute_capability():
    r = smi.parse_query(fixture("nvidia-smi-query/compute_cap-mode-driver-name-index_2gpu_570.86.15_triton8070.txt"))
    assert r.driver.version == "570.86.15"
    assert [(g.index, g.name, g.compute_capability) for g in r.gpus] == [
        (0, "NVIDIA TITAN V", "7.0"), (1, "NVIDIA RTX 5880 Ada Generation", "8.9")]


def test_query_csv_units_and_noheader_variants():
    h100 = smi.parse_query(fixture("nvidia-smi-query/mem-total-used_H100_host-view_hami.txt"))
    assert (h100.gpus[0].memory_total_mib, h100.gpus[0].memory_used_mib) == (81559, 18560)
    shell = smi.parse_query(fixture("nvidia-smi-query/noheader-nounits-variants_80GB_shell-comments.txt"))
    assert len(shell.gpus) == 1 and shell.gpus[0].memory_total_mib == 81920
    bare = smi.parse_query("0, NVIDIA L4, 550.54.15, 23034, 0, 8.9, GPU-x, 00000000:00:03.0, [N/A]\n", smi.QUERY_FIELDS)
    g = bare.gpus[0]
    assert (g.name, g.compute_capability, g.memory_total_mib, g.mig_mode) == ("NVIDIA L4", "8.9", 23034, None)
    assert bare.driver.version == "550.54.15"


def test_paste_damage_is_tolerated():
    raw = fixture("nvidia-smi/550.40.07_rtx4070_frogging-family.txt")
    quoted = "```\r\n" + "\r\n".join("> " + line for line in raw.splitlines()) + "\r\n```\r\n"
    r = smi.parse_table(quoted)
    assert r.driver.version == "550.40.07" and r.gpus[0].memory_total_mib == 12282


def test_every_fixture_has_a_source_line():
    folders = ("nvidia-smi", "nvidia-smi-query", "collect_env", "ldconfig", "nvcc", "other", "pip", "tf_build_info")
    paths = [p for f in folders for p in (DATA / f).glob("*.txt")]
    assert len(paths) >= 30
    for path in paths:
        assert path.read_text(encoding="utf-8").startswith("# source:"), path


def test_q_log_of_a_580_driver_keeps_fb_memory_apart_from_bar1():
    r = smi.parse_q(fixture("nvidia-smi/q_580.159.04_H200_full_cudamatrix-device.txt"))
    assert (r.driver.version, r.driver.cuda_version, r.driver.status) == ("580.159.04", "13.0", "ok")
    g = r.gpus[0]
    assert (g.name, g.memory_total_mib, g.memory_used_mib, g.mig_mode) == ("NVIDIA H200", 143771, 0, "Disabled")
    q = smi.parse_query(fixture("nvidia-smi-query/all-fields-with-units_H200_580.159.04_cudamatrix-device.txt"))
    assert (q.gpus[0].compute_capability, q.gpus[0].memory_total_mib, q.gpus[0].mig_mode) == ("9.0", 143771, "Disabled")


def test_old_process_table_layout():
    # the <= 410 layout: no GI/CI columns (rows typed after that layout, not a captured paste)
    text = ("| Processes:                                                       GPU Memory |\n"
            "|  GPU       PID   Type   Process name                             Usage      |\n"
            "|=============================================================================|\n"
            "|    0      2089      C   python                                       168MiB |\n")
    head = fixture("nvidia-smi/331.62_multi-gtx680_old-format-no-cuda_cbio.txt")
    r = smi.parse_table(head + "\n" + text)
    assert [(p.pid, p.name, p.used_memory_mib) for p in r.gpus[0].processes] == [(2089, "python", 168)]


# --- nvidia-smi --version (the four lines issue #13 names; typed after that layout, not a captured paste) ---

def test_version_lines_give_driver_and_cuda_and_the_tools_own_version():
    r = smi.parse_version("NVIDIA-SMI version  : 580.82.07\nNVML version        : 580.95\n"
                          "DRIVER version      : 581.42\nCUDA Version        : 13.0\n")
    assert r.found and (r.driver.version, r.driver.cuda_version) == ("581.42", "13.0")
    assert r.driver.library_version == "580.82.07"  # WSL: the Linux tools, the Windows driver
    same = smi.parse_version("NVIDIA-SMI version  : 560.35.03\nNVML version        : 560.35\n"
                             "DRIVER version      : 560.35.03\nCUDA Version        : 12.6\n")
    assert (same.driver.version, same.driver.cuda_version, same.driver.library_version) == ("560.35.03", "12.6", None)


def test_version_lines_of_a_610_driver_use_kmd_and_umd():
    # 610 renamed the header's fields (see the KMD/UMD table fixture of sglang#27487); --version follows
    r = smi.parse_version('NVIDIA-SMI version  : 610.88\nDRIVER version      : Deprecated, see "KMD version" instead\n'
                          "KMD version         : 610.88\nCUDA UMD version    : 13.3\n")
    assert (r.driver.version, r.driver.cuda_version) == ("610.88", "13.3")


def test_q_x_xml_and_list_without_its_parenthesis():
    xml = smi.parse_xml("<?xml version=\"1.0\" ?>\n<nvidia_smi_log>\n\t<driver_version>430.64</driver_version>\n"
                        "\t<cuda_version>10.1</cuda_version>\n\t<gpu id=\"00000000:29:00.0\">\n"
                        "\t\t<product_name>GeForce GTX 1660 Ti</product_name>\n")
    assert (xml.driver.version, xml.driver.cuda_version, xml.gpus[0].name) == ("430.64", "10.1", "GeForce GTX 1660 Ti")
    assert xml.gpus[0].pci_bus_id == "00000000:29:00.0"
    g = smi.gpu_line("GPU 0: GeForce GTX 1660 Ti (UUID: GPU-e18afb8d-1627-f8ff-2ba3-c05c5a8e9e67")
    assert (g.name, g.uuid) == ("GeForce GTX 1660 Ti", "GPU-e18afb8d-1627-f8ff-2ba3-c05c5a8e9e67")
    assert smi.gpu_line("GPU 0\uff1aTITAN RTX").name == "TITAN RTX"  # a full-width colon


def _wrapped(text: str, width: int) -> str:
    """``text`` as a terminal ``width`` columns wide shows it, copied with a line break at each wrap."""
    return "\n".join(line[i:i + width] for line in text.split("\n") for i in range(0, max(len(line), 1), width))


@pytest.mark.parametrize("rel", [t[0] for t in TABLES if len(t[4]) and t[0].split("/")[1][:3] >= "550"])
def test_a_table_wrapped_by_an_80_column_terminal_keeps_its_facts_or_leaves_them_unknown(rel):
    """The tables of drivers 550 and later are 89 columns wide: an 80-column terminal breaks every row in two
    when copied. The driver, its CUDA version and every GPU's name and count are still read; a figure the break
    cut (the memory) is left unknown, never read wrong."""
    from cudamatrix.pastes.reports import from_reports

    _, driver, cuda, _, gpus = next(t for t in TABLES if t[0] == rel)
    env = from_reports([(rel, _wrapped(fixture(rel), 80))])
    assert (env.driver.version, env.driver.cuda_version) == (driver, cuda)
    assert [g.name for g in env.gpus] == [name for name, _, _ in gpus]
    assert all(g.memory_total_mib in (None, total) for g, (_, _, total) in zip(env.gpus, gpus, strict=True))


def test_a_driver_version_cut_by_a_narrow_terminal_is_never_read_short():
    from cudamatrix.pastes.reports import from_reports

    rel = "nvidia-smi/550.40.07_rtx4070_frogging-family.txt"
    env = from_reports([(rel, _wrapped(fixture(rel), 60))])
    assert env.driver.version == "550.40.07"  # the two halves joined, never the cut "550.40.0"
