"""The command-line tools' outputs read from a paste (pastes/tools.py): nvcc --version, ldconfig -p, the
cudnn.h defines, /proc/driver/nvidia/version, deviceQuery and the kernel log's NVRM lines, each on a real paste from
tests/data, read in this process: what each reader finds and exactly which lines it says it read."""
from __future__ import annotations

import pytest
from support.fakes import DATA, fixture

from cudamatrix.detect.text import Paste
from cudamatrix.models import Driver, Environment, GpuInfo, Toolkit
from cudamatrix.pastes import tools


def paste_body(stem):
    """A paste of the corpus (tests/data/pastes) without its source line."""
    return (DATA / "pastes" / f"{stem}.txt").read_text(encoding="utf-8").partition("\n")[2]


def read(reader, text, env=None):
    """(what the reader returned, the paste, the environment) after one reader ran on ``text``."""
    paste = Paste(text)
    env = env if env is not None else Environment()
    return reader(paste, env), paste, env


def claimed(paste):
    """{line index: kind} of every line a reader claimed."""
    return {i: kind for i, kind in enumerate(paste.kind) if kind}


# --- nvcc --version ---------------------------------------------------------------------------------------------

def test_two_nvcc_outputs_are_two_toolkits_each_with_its_own_lines():
    """k2#584: two `nvcc --version` outputs, each after a prompt; the second has no "Build cuda_" line."""
    found, paste, env = read(tools.read_nvcc, paste_body("nvcc_11.0-and-10.1_dollar-prompts_k2-584"))
    assert found is True
    assert env.toolkits == [Toolkit(source="report:nvcc", version="11.0.194"),
                            Toolkit(source="report:nvcc", version="10.1.243")]
    # the three lines above the release line, the release line and the Build line after it; never the prompt line
    assert claimed(paste) == {**{i: "nvcc" for i in range(3, 8)}, **{i: "nvcc" for i in range(13, 17)}}


def test_the_same_nvcc_pasted_twice_is_one_toolkit():
    """blade-build#931 and k2#584 quote the same nvcc 11.0.194: one toolkit, both outputs' lines read."""
    text = paste_body("nvcc_11.0.194_review-comment_blade931") + paste_body("nvcc_11.0-and-10.1_dollar-prompts_k2-584")
    found, paste, env = read(tools.read_nvcc, text)
    assert [t.version for t in env.toolkits] == ["11.0.194", "10.1.243"]
    assert sum(kind == "nvcc" for kind in paste.kind) == 5 + 5 + 4


def test_an_nvcc_output_at_the_top_of_a_paste_and_its_build_line_at_the_bottom():
    """dfdx#619 starts at the release line (nothing above it to read) and the doc example's Build line is the
    paste's last line (no line after it to look at)."""
    found, paste, env = read(tools.read_nvcc, fixture("nvcc/11.5_partial_plus-list-gpu-code_dfdx619.txt"))
    assert [t.version for t in env.toolkits] == ["11.5.119"]
    assert claimed(paste) == {0: "nvcc", 1: "nvcc"}  # the `nvcc --list-gpu-code` output after it is not nvcc's
    text = fixture("nvcc/13.0_V13.0.88_x86-doc-example.txt").rstrip("\n")
    found, paste, env = read(tools.read_nvcc, text)
    assert [t.version for t in env.toolkits] == ["13.0.88"]
    assert claimed(paste) == {i: "nvcc" for i in range(5)}
    # the release line last: no Build line follows it
    found, paste, env = read(tools.read_nvcc, fixture("nvcc/10.0_linux_qixuema-envs4.txt").rstrip("\n"))
    assert [t.version for t in env.toolkits] == ["10.0.130"] and claimed(paste) == {i: "nvcc" for i in range(4)}


def test_a_release_without_its_full_version_is_the_short_one():
    """The release line of qixuema/envs#4 cut before ", V10.0.130" (the smallest edit): the release, 10.0."""
    text = fixture("nvcc/10.0_linux_qixuema-envs4.txt").replace(", V10.0.130", "")
    found, paste, env = read(tools.read_nvcc, text)
    assert found is True and env.toolkits == [Toolkit(source="report:nvcc", version="10.0")]
    assert claimed(paste) == {i: "nvcc" for i in range(4)}


def test_a_sentence_about_nvcc_before_its_output_is_passed_over():
    """qixuema/envs#4's output under a sentence that names "Cuda compilation tools" without a release."""
    text = "Cuda compilation tools are installed:\n" + fixture("nvcc/10.0_linux_qixuema-envs4.txt")
    found, paste, env = read(tools.read_nvcc, text)
    assert found is True and [t.version for t in env.toolkits] == ["10.0.130"]
    assert claimed(paste) == {i: "nvcc" for i in range(1, 5)}


def test_the_header_walk_stops_at_the_pastes_first_line():
    """qixuema/envs#4's output first, then a second output cut after its "Built on" line (the paste ends there:
    pytorch#51840's first three lines): the walk up from the first release line stops at line 0, and the cut
    output, with no release line, is not read."""
    cut = "\n".join(fixture("nvcc/11.0_V11.0.221_pytorch51840.txt").split("\n")[:3])
    text = fixture("nvcc/10.0_linux_qixuema-envs4.txt") + cut
    found, paste, env = read(tools.read_nvcc, text)
    assert [t.version for t in env.toolkits] == ["10.0.130"]
    assert claimed(paste) == {i: "nvcc" for i in range(4)}


def test_the_header_walk_goes_three_lines_up_at_most():
    """pytorch#51840's output cut after its Copyright line (the smallest edit: a paste that lost the rest), then
    qixuema/envs#4's whole output: the release line's three header lines are its own, the cut output's are not."""
    cut = "\n".join(fixture("nvcc/11.0_V11.0.221_pytorch51840.txt").split("\n")[:2])
    found, paste, env = read(tools.read_nvcc, cut + "\n" + fixture("nvcc/10.0_linux_qixuema-envs4.txt"))
    assert [t.version for t in env.toolkits] == ["10.0.130"] and claimed(paste) == {i: "nvcc" for i in range(2, 6)}


def test_the_header_walk_stops_at_line_0_when_the_output_lost_its_first_line():
    """qixuema/envs#4's output without its "nvcc: NVIDIA" line (cut at the top), then pytorch#51840's cut after its
    "Built on" line: the walk from the release line (line 2) stops at line 0 and never wraps to the paste's end."""
    head = "\n".join(fixture("nvcc/10.0_linux_qixuema-envs4.txt").split("\n")[1:])
    cut = "\n".join(fixture("nvcc/11.0_V11.0.221_pytorch51840.txt").split("\n")[:3])
    found, paste, env = read(tools.read_nvcc, head + cut)
    assert [t.version for t in env.toolkits] == ["10.0.130"] and claimed(paste) == {i: "nvcc" for i in range(3)}


def test_lines_that_only_mention_nvcc_are_no_nvcc_output():
    found, paste, env = read(tools.read_nvcc, "Cuda compilation tools are missing here\nrelease 11.0, V11.0.221\n")
    assert found is False and env.toolkits == [] and claimed(paste) == {}


# --- ldconfig -p ------------------------------------------------------------------------------------------------

def test_ldconfig_keeps_the_64_bit_copies_in_the_caches_order():
    """cutorch#809: `ldconfig -p | grep libcuda`, 64-bit and 32-bit copies: the libc6-only (32-bit) copies are
    claimed but not kept, since the other entries carry the ABI after a comma."""
    found, paste, env = read(tools.read_ldconfig, fixture("ldconfig/arch_opt-cuda9.1_libcuda_cutorch809.txt"))
    assert found is True
    assert [(lib.name, lib.soname, lib.path, lib.version, lib.stub, lib.origin) for lib in env.libraries] == [
        ("cudart", "libcudart.so.9.1", "/opt/cuda/lib64/libcudart.so.9.1", "9.1", False, "report:ldconfig"),
        ("cudart", "libcudart.so", "/opt/cuda/lib64/libcudart.so", None, False, "report:ldconfig"),
        ("cuda", "libcuda.so.1", "/usr/lib/libcuda.so.1", None, False, "report:ldconfig"),
        ("cuda", "libcuda.so", "/usr/lib/libcuda.so", None, False, "report:ldconfig"),
    ]
    assert claimed(paste) == {i: "ldconfig -p" for i in range(2, 8)}


def test_ldconfig_without_an_abi_after_a_comma_keeps_every_entry():
    """nvidia-docker#53's one entry, its flags edited to "(libc6)" (the smallest edit): with no entry naming
    the ABI after a comma, none is dropped for lacking it."""
    text = paste_body("ldconfig_grep-cudnn4_root-prompt_nvidia-docker53").replace("(libc6,x86-64)", "(libc6)")
    found, paste, env = read(tools.read_ldconfig, text)
    assert [(lib.name, lib.soname, lib.path) for lib in env.libraries] == [
        ("cudnn", "libcudnn.so.4", "/usr/lib/x86_64-linux-gnu/libcudnn.so.4")]


def test_ldconfig_reads_a_whole_cache_with_its_count_line_and_each_path_once():
    """`ldconfig -p` of the project's H200 machine: the "N libs found in cache" line is ldconfig's too; the same
    path listed twice (the paste pasted twice) is one copy."""
    text = (DATA / "gpu_h200" / "ldconfig-p.txt").read_text(encoding="utf-8").partition("\n")[2]
    found, paste, env = read(tools.read_ldconfig, text)
    assert paste.kind[0] == "ldconfig -p" and paste.lines[0].endswith("libs found in cache `/etc/ld.so.cache'")
    libs = [(lib.name, lib.path) for lib in env.libraries]
    assert ("cudart", "/usr/local/cuda/targets/x86_64-linux/lib/libcudart.so.13") in libs
    assert ("nvml", "/usr/local/nvidia/lib64/libnvidia-ml.so.1") in libs
    assert len(libs) == len(set(libs)) == 20
    # the same cache twice: every path is kept once
    found, paste, twice = read(tools.read_ldconfig, text + text)
    assert [(lib.name, lib.path) for lib in twice.libraries] == libs


def test_ldconfig_marks_a_stub_library():
    """cutorch#809's libcuda.so moved into the toolkit's stubs folder (the smallest edit: a cache that lists the
    stubs folder, as a devel image's LIBRARY_PATH set into ld.so.conf does): that copy is a stub."""
    text = fixture("ldconfig/arch_opt-cuda9.1_libcuda_cutorch809.txt").replace(
        "=> /usr/lib/libcuda.so\n", "=> /opt/cuda/lib64/stubs/libcuda.so\n")
    found, paste, env = read(tools.read_ldconfig, text)
    assert [(lib.path, lib.stub) for lib in env.libraries if lib.name == "cuda"] == [
        ("/usr/lib/libcuda.so.1", False), ("/opt/cuda/lib64/stubs/libcuda.so", True)]


def test_a_truncated_ldconfig_entry_and_lines_already_read_are_not_entries():
    """gpustat#164's second entry is cut mid-way ("libcudart.so.10.2 (l"): not an entry, not claimed."""
    found, paste, env = read(tools.read_ldconfig, fixture("ldconfig/cudart-11.0-and-10.2_truncated_gpustat164.txt"))
    assert [lib.soname for lib in env.libraries] == ["libcudart.so.11.0"]
    assert claimed(paste) == {1: "ldconfig -p"}
    # a line another reader claimed first is left to it
    paste = Paste(fixture("ldconfig/cudart-11.0-and-10.2_truncated_gpustat164.txt"))
    paste.claim(1, "other")
    env = Environment()
    assert tools.read_ldconfig(paste, env) is False and env.libraries == []


@pytest.mark.parametrize("line, entry", [
    ("\tlibcudart.so.11.0 (libc6,x86-64) => /usr/local/cuda/lib64/libcudart.so.11.0",
     ("libcudart.so.11.0", "libc6,x86-64", "/usr/local/cuda/lib64/libcudart.so.11.0")),
    ("libcuda.so.1 (libc6) => /usr/lib32/libcuda.so.1", ("libcuda.so.1", "libc6", "/usr/lib32/libcuda.so.1")),
    ("libcuda.so.1 (libc6,x86-64) => /usr/lib/libcuda.so.1 (extra)", ("libcuda.so.1", "libc6,x86-64",
                                                                       "/usr/lib/libcuda.so.1")),
    ("\tlibcudart.so.10.2 (l", None),  # gpustat#164's cut line: no arrow
    ("libcuda.so.1 => /usr/lib/libcuda.so.1", None),  # no flags
    ("libcuda.so.1 (libc6,x86-64 => /usr/lib/libcuda.so.1", None),  # flags not closed
    ("lib cuda.so (libc6,x86-64) => /usr/lib/libcuda.so", None),  # a name with a blank is no soname
    ("libcuda.so.1 (libc6,x86-64) =>   ", None),  # no path
    ("x => y", None),
])
def test_one_ldconfig_entry(line, entry):
    assert tools._ldconfig_entry(line) == entry


# --- the cudnn.h defines ----------------------------------------------------------------------------------------

TF35376 = "tf-log_loaded-runtime-cudnn_7.4.1-vs-7.6.0_template-tf-gpu-1.15.0_cudnn-h_tensorflow35376"


def test_cudnn_header_defines_name_the_systems_cudnn():
    """tensorflow#35376: `cat cudnn.h | grep CUDNN_MAJOR -A 2`: cuDNN 7.4.1, with the "--" and CUDNN_VERSION
    lines grep printed after it."""
    found, paste, env = read(tools.read_cudnn_header, paste_body(TF35376))
    assert found is True
    assert [(n.probe, n.message, n.level) for n in env.notes] == [
        ("report", "cuDNN 7.4.1 named in the paste (the cudnn.h headers), of no framework it could be tied to",
         "info")]
    assert claimed(paste) == {i: "cudnn.h" for i in range(11, 16)}
    assert paste.lines[16] == "- GPU model and memory:"  # the template's next field is not the header's


@pytest.mark.parametrize("edit", [
    ("#define CUDNN_PATCHLEVEL 1\n", ""),  # the grep cut before its third define
    ("#define CUDNN_MINOR 4", "#define CUDNN_MINOR"),  # a define without its number
    ("#define CUDNN_MINOR 4", "#define CUDNN_MINOR 4444"),  # a number too long for a cuDNN version part
    ("#define CUDNN_MINOR 4", "#define CUDNN_MINOR x4"),
    ("#define CUDNN_MINOR 4", "#define CUDNN_MINOR_X 4"),  # another define
    ("#define CUDNN_MINOR 4", "#define CUDNN_MAJOR 4"),  # a second header's first define where the minor goes
])
def test_cudnn_header_defines_that_do_not_say_a_version(edit):
    """tensorflow#35376's defines with one part missing or broken (each the smallest edit): no version."""
    text = paste_body(TF35376).replace(*edit)
    found, paste, env = read(tools.read_cudnn_header, text)
    assert found is False and env.notes == [] and "cudnn.h" not in paste.kind


def test_cudnn_header_parts_of_three_digits_are_read():
    text = paste_body(TF35376).replace("#define CUDNN_PATCHLEVEL 1", "#define CUDNN_PATCHLEVEL 100")
    found, paste, env = read(tools.read_cudnn_header, text)
    assert env.notes[0].message.startswith("cuDNN 7.4.100 named in the paste")


def test_cudnn_header_defines_at_the_end_of_a_paste():
    """The three defines of tensorflow#35376 alone, as the last lines (nothing after them; nor the last define)."""
    lines = paste_body(TF35376).split("\n")[11:14]
    found, paste, env = read(tools.read_cudnn_header, "\n".join(lines))
    assert found is True and claimed(paste) == {0: "cudnn.h", 1: "cudnn.h", 2: "cudnn.h"}
    found, paste, env = read(tools.read_cudnn_header, "\n".join(lines[:2]))
    assert found is False and env.notes == []


def test_cudnn_header_claims_at_most_three_lines_after_the_defines():
    """tensorflow#35376's grep output followed by a second "--" group: the reader stops five lines below
    CUDNN_MAJOR, and at the first line that is neither a separator nor the CUDNN_VERSION formula."""
    lines = paste_body(TF35376).split("\n")
    text = "\n".join(lines[11:16] + ["--", "--", "--"])
    found, paste, env = read(tools.read_cudnn_header, text)
    assert claimed(paste) == {i: "cudnn.h" for i in range(6)}


def test_the_issue_templates_inline_grep_command_is_no_header():
    """tensorrt#1747 names the grep command inline (no define at a line's start)."""
    text = paste_body("issue-template_bold-labels_runfile-driver-470.94_rtx2080_libcudnn.so.8_tensorrt1747")
    found, paste, env = read(tools.read_cudnn_header, text)
    assert found is False and env.notes == []


# --- /proc/driver/nvidia/version --------------------------------------------------------------------------------

@pytest.mark.parametrize("stem, version, nvrm", [
    ("proc-version_384.98_dollar-cat_neofetch876", "384.98", 2),
    ("proc-version_jetson-aarch64-35.3.1_nixgl139", "35.3.1", 1),
    ("proc-version_open-module-525.60.11_arch_nixgl121", "525.60.11", 1),
    ("proc-version_open-module-565.57.01_nixgl186", "565.57.01", 1),
    ("nvidia-smi-error_mismatch_nvml-580.178_proc-580.173.02_truenas19", "580.173.02", 4),
])
def test_proc_version_names_the_kernel_module(stem, version, nvrm):
    found, paste, env = read(tools.read_proc_version, paste_body(stem))
    assert found is True and env.driver.kernel_module_version == version
    assert claimed(paste) == {nvrm: "/proc/driver/nvidia/version", nvrm + 1: "/proc/driver/nvidia/version"}
    assert paste.lines[nvrm + 1].startswith("GCC version")


def test_the_first_proc_version_of_a_paste_is_the_kernel_modules():
    """neofetch#876 and nixGL#186 in one paste: the first file's version is kept; both are read."""
    text = paste_body("proc-version_384.98_dollar-cat_neofetch876") + paste_body("proc-version_open-module-565.57.01_nixgl186")
    found, paste, env = read(tools.read_proc_version, text)
    assert env.driver.kernel_module_version == "384.98"
    assert sum(kind == "/proc/driver/nvidia/version" for kind in paste.kind) == 4


def test_a_proc_version_line_last_or_without_its_gcc_line():
    """neofetch#876's NVRM line alone (the paste's last line), and followed by another line: only itself."""
    line = paste_body("proc-version_384.98_dollar-cat_neofetch876").split("\n")[2]
    found, paste, env = read(tools.read_proc_version, line)
    assert found is True and claimed(paste) == {0: "/proc/driver/nvidia/version"}
    found, paste, env = read(tools.read_proc_version, line + "\nsomething else\n")
    assert claimed(paste) == {0: "/proc/driver/nvidia/version"}
    # the GCC line as the paste's last line (no newline after it)
    found, paste, env = read(tools.read_proc_version, "\n".join(paste_body(
        "proc-version_384.98_dollar-cat_neofetch876").split("\n")[2:4]))
    assert claimed(paste) == {0: "/proc/driver/nvidia/version", 1: "/proc/driver/nvidia/version"}
    found, paste, env = read(tools.read_proc_version, "NVRM version: unknown\n")
    assert found is False and env.driver.kernel_module_version is None and claimed(paste) == {}


# --- deviceQuery ------------------------------------------------------------------------------------------------

DEVICE_QUERY = "other/deviceQuery_gtx770_driver7.0-runtime6.5_remode9.txt"


def test_device_query_names_the_gpu_driver_and_runtime():
    found, paste, env = read(tools.read_device_query, fixture(DEVICE_QUERY))
    assert found is True
    assert env.gpus == [GpuInfo(index=0, name="GeForce GTX 770", compute_capability="3.0", memory_total_mib=2047,
                                source="report:deviceQuery")]
    assert (env.driver.cuda_version, env.driver.source) == ("7.0", "report:deviceQuery")
    assert env.toolkits == [Toolkit(source="report:deviceQuery runtime", version="6.5")]
    assert claimed(paste) == {i: "deviceQuery" for i in range(11)}


def test_device_query_lines_before_its_title_and_after_its_result_are_not_its_own():
    """remode#9's deviceQuery between two lines of prose, the second after a "Result = PASS" line added at its
    end (the line deviceQuery prints last)."""
    text = "Here is my output:\n" + fixture(DEVICE_QUERY).rstrip("\n") + "\nResult = PASS\nThen it hangs.\n"
    found, paste, env = read(tools.read_device_query, text)
    assert claimed(paste) == {i: "deviceQuery" for i in range(1, 13)}
    assert paste.lines[12] == "Result = PASS" and paste.kind[13] is None


def test_device_query_keeps_the_first_value_of_a_fact():
    """A GPU already known with its compute capability and memory (from nvidia-smi) keeps them."""
    env = Environment()
    env.gpus.append(GpuInfo(index=0, name="GeForce GTX 770", compute_capability="3.5", memory_total_mib=4096))
    read(tools.read_device_query, fixture(DEVICE_QUERY), env)
    assert [(g.compute_capability, g.memory_total_mib) for g in env.gpus] == [("3.5", 4096)]


def test_device_query_lines_after_a_log_timestamp():
    """remode#9's two fact lines as `docker logs -t` prints them, after a timestamp with colons (the smallest edit):
    the value is what follows the last colon; and the memory without its count of bytes."""
    stamp = "2015-06-01T10:00:00.000000000Z "
    text = fixture(DEVICE_QUERY).replace("  CUDA Capability", stamp + "CUDA Capability").replace(
        "  Total amount", stamp + "Total amount").replace(" (2146762752 bytes)", "")
    found, paste, env = read(tools.read_device_query, text)
    assert [(g.compute_capability, g.memory_total_mib) for g in env.gpus] == [("3.0", 2047)]


def test_device_query_cuts_a_long_capability():
    text = fixture(DEVICE_QUERY).replace("number:    3.0", "number:    3.0000000000")
    assert read(tools.read_device_query, text)[2].gpus[0].compute_capability == "3.000000"


@pytest.mark.parametrize("old, new", [
    ("2047 MBytes", "2047 GBytes"),  # another unit
    ("2047 MBytes", "2O47 MBytes"),  # no number
    ("2047 MBytes (2146762752 bytes)", "2047"),  # no unit
])
def test_device_query_memory_in_other_words_is_not_read(old, new):
    found, paste, env = read(tools.read_device_query, fixture(DEVICE_QUERY).replace(old, new))
    assert env.gpus[0].memory_total_mib is None and env.gpus[0].compute_capability == "3.0"


def test_device_query_facts_before_any_device_line_belong_to_no_gpu():
    """remode#9 with its "Device 0:" line dropped (the smallest edit): no GPU, the versions still read."""
    text = fixture(DEVICE_QUERY).replace('Device 0: "GeForce GTX 770"\n', "")
    found, paste, env = read(tools.read_device_query, text)
    assert found is True and env.gpus == [] and env.driver.cuda_version == "7.0"


def test_device_query_is_known_by_its_title_or_its_capability_line():
    """remode#9 without its title line (a paste cut at the top), and without its capability line: each is still
    deviceQuery's output."""
    untitled = fixture(DEVICE_QUERY).replace(" CUDA Device Query (Runtime API) version (CUDART static linking)\n", "")
    found, paste, env = read(tools.read_device_query, untitled)
    assert found is True and [g.name for g in env.gpus] == ["GeForce GTX 770"] and env.driver.cuda_version == "7.0"
    titled = fixture(DEVICE_QUERY).replace("  CUDA Capability Major/Minor version number:    3.0\n", "")
    found, paste, env = read(tools.read_device_query, titled)
    assert found is True and [(g.name, g.compute_capability) for g in env.gpus] == [("GeForce GTX 770", None)]


def test_device_query_starts_at_its_command():
    """remode#9 cut at the top, under the command that ran it (`$ ./deviceQuery`, the smallest edit): its lines are
    read from there; a second run after its "Result = PASS" line is read again from its own command."""
    body = fixture(DEVICE_QUERY).replace(" CUDA Device Query (Runtime API) version (CUDART static linking)\n", "")
    text = "Output:\n$ ./deviceQuery\n" + body.rstrip("\n") + "\nResult = PASS\nand again\n$ ./deviceQuery\n" + body
    found, paste, env = read(tools.read_device_query, text)
    assert claimed(paste) == {**{i: "deviceQuery" for i in range(2, 13)}, **{i: "deviceQuery" for i in range(15, 25)}}
    assert paste.kind[0] is None and paste.kind[13] is None and 1 in paste.commands


def test_text_without_device_querys_title_is_not_read():
    text = fixture(DEVICE_QUERY).replace("CUDA Device Query", "CUDA query")
    text = text.replace("CUDA Capability Major/Minor", "CUDA capability")
    found, paste, env = read(tools.read_device_query, text)
    assert found is False and env.gpus == [] and claimed(paste) == {}
    # the title alone (no version line): a deviceQuery, without the driver's CUDA
    only = fixture(DEVICE_QUERY).replace("CUDA Driver Version / Runtime Version", "CUDA versions")
    found, paste, env = read(tools.read_device_query, only)
    assert found is True and env.driver == Driver() and env.toolkits == []


# --- the kernel log's NVRM lines --------------------------------------------------------------------------------

def test_dmesg_says_nouveau_holds_the_gpu():
    found, paste, env = read(tools.read_dmesg, fixture("other/dmesg_nouveau-owns-device_mattshma133.txt"))
    assert found is True
    assert (env.driver.status, env.driver.error) == (
        "no_device", "NVRM: the NVIDIA driver could not bind the GPU (nouveau holds it?)")
    assert [(n.probe, n.message, n.level) for n in env.notes] == [
        ("report:dmesg", "the kernel log says nouveau owns the GPU: blacklist it and reload the nvidia module",
         "error")]
    # every NVRM line, never the nvidia-nvlink ones between them
    assert claimed(paste) == {i: "dmesg" for i in (0, *range(3, 11))}


@pytest.mark.parametrize("keep", ["No NVIDIA graphics adapter probed", "The NVIDIA probe routine was not called"])
def test_dmesg_either_probe_line_says_another_driver_holds_the_gpu(keep):
    """mattshma/bigdata#133's log with only one of its two probe lines, and "nouveau" dropped from the list of
    drivers (each the smallest edit): another driver, unnamed."""
    text = fixture("other/dmesg_nouveau-owns-device_mattshma133.txt").replace("nouveau, ", "")
    for line in ("No NVIDIA graphics adapter probed", "The NVIDIA probe routine was not called"):
        if line != keep:
            text = text.replace(line, "NVIDIA line")
    found, paste, env = read(tools.read_dmesg, text)
    assert found is True and env.driver.status == "no_device"
    assert env.driver.error == "NVRM: the NVIDIA driver could not bind the GPU (another driver holds it?)"
    assert env.notes[0].message.startswith("the kernel log says another driver owns the GPU")


MISMATCH = "other/dmesg_api-mismatch_515.48.07-vs-510.73.05_dalle-playground104.txt"


def test_dmesg_api_mismatch_names_both_versions():
    """dalle-playground#104: the client (user space) is 515.48.07, the kernel module 510.73.05 — without the
    period that ends the kernel's sentence ("510.73.05.  Please")."""
    found, paste, env = read(tools.read_dmesg, fixture(MISMATCH))
    assert found is True
    assert (env.driver.status, env.driver.library_version, env.driver.kernel_module_version) == (
        "mismatch", "515.48.07", "510.73.05")
    assert env.driver.error.startswith("NVRM: API mismatch: the client has the version 515.48.07, but")
    assert env.driver.error.endswith("NVRM: this kernel module has the version 510.73.05")
    assert claimed(paste) == {i: "dmesg" for i in range(4)}


def test_nvrm_lines_that_say_neither_are_not_read():
    """dalle-playground#104 without its mismatch sentence's versions: NVRM lines, nothing this reader reads."""
    text = fixture(MISMATCH).replace("the client has the version 515.48.07, but", "the client differs")
    found, paste, env = read(tools.read_dmesg, text)
    assert found is False and env.driver == Driver() and claimed(paste) == {}
    found, paste, env = read(tools.read_dmesg, "[    1.0] nvidia: loading out-of-tree module\n")
    assert found is False and claimed(paste) == {}
