"""What frameworks, the CUDA runtime and the loader print, read from a paste (pastes/messages.py), in this
process: every paste of tests/data/pastes that holds such words, read alone, against what a person reads in it
(tests/data/pastes_messages.json: the lines claimed, the messages, GPUs, driver, notes, WSL, libraries), and each
reader's edge cases on a real line (or the smallest edit of one, said where it is made)."""
from __future__ import annotations

import json

import pytest
from support.fakes import DATA

from cudamatrix.detect.text import Paste
from cudamatrix.models import Environment, Framework, GpuInfo, ToolMessage
from cudamatrix.pastes import messages

EXPECTED = json.loads((DATA / "pastes_messages.json").read_text(encoding="utf-8"))["pastes"]
CORPUS = sorted(p.stem for p in (DATA / "pastes").glob("*.txt"))


def paste_body(stem):
    return (DATA / "pastes" / f"{stem}.txt").read_text(encoding="utf-8").partition("\n")[2]


def read(text, reader=messages.read, env=None):
    paste = Paste(text)
    env = env if env is not None else Environment()
    return reader(paste, env), paste, env


def claimed(paste):
    return {i: kind for i, kind in enumerate(paste.kind) if kind}


def said(env):
    return [{k: v for k, v in vars(m).items() if v not in (None, [], "")} for m in env.messages]


def what_was_read(paste, env):
    return {
        "lines": {str(i): k for i, k in claimed(paste).items()},
        "messages": said(env),
        "gpus": [[g.index, g.name, g.compute_capability] for g in env.gpus],
        "driver": [env.driver.status, env.driver.cuda_version, env.driver.error],
        "notes": [n.message for n in env.notes],
        "wsl": env.context.wsl,
        "libraries": [lib.path for lib in env.libraries],
    }


@pytest.mark.parametrize("stem", CORPUS)
def test_every_paste_reads_as_a_person_reads_it(stem):
    found, paste, env = read(paste_body(stem))
    messages.settle(env)
    assert found is (stem in EXPECTED)
    if stem in EXPECTED:
        assert what_was_read(paste, env) == EXPECTED[stem]
    else:
        assert claimed(paste) == {} and env.messages == [] and env.gpus == []


# --- torch's architecture warnings ------------------------------------------------------------------------------

ARCH = "torch-arch-warning_sm120_5080-laptop_windows-venv_hi3dgen5"


def test_the_older_warning_names_the_minimum_on_the_lines_after_it():
    """pytorch#6515's warning from torch 0.3; torch 1.x adds "The minimum cuda capability supported by this library
    is 3.7." after it (the smallest edit: that sentence added on the next line; then three lines further)."""
    text = paste_body("torch-warning_old-gpu-2.1_820M_no-kernel-image-48_py2.7_pytorch6515")
    lines = text.split("\n")
    minimum = "    The minimum cuda capability supported by this library is 3.7."
    found, paste, env = read("\n".join(lines[:8] + [minimum] + lines[8:]), messages.read_arch_warning)
    assert found is True
    assert [(m.gpu, m.compute_capability, m.minimum) for m in env.messages] == [("GeForce 820M", "2.1", "3.7")]
    assert paste.kind[8] == "torch warning"
    found, paste, env = read("\n".join(lines[:7] + ["", "", ""] + [minimum] + lines[7:]), messages.read_arch_warning)
    assert env.messages[0].minimum is None
    found, paste, env = read("\n".join(lines[:7] + ["", ""] + [minimum]), messages.read_arch_warning)
    assert env.messages[0].minimum == "3.7"
    older = "    The minimum cuda capability that we support is 3.5."  # torch 0.4's words: no minimum read
    found, paste, env = read("\n".join(lines[:8] + [older] + lines[8:]), messages.read_arch_warning)
    assert env.messages[0].minimum is None


def test_the_older_warning_at_a_lines_start_after_a_sentence_and_under_a_minimum_it_does_not_own():
    """pytorch#6515's warning without its indentation (at the line's start), after a sentence that quotes its words
    without a GPU, and with torch 1.x's minimum sentence moved above it (the smallest edits): read, its minimum
    none (the sentence is not after it)."""
    text = paste_body("torch-warning_old-gpu-2.1_820M_no-kernel-image-48_py2.7_pytorch6515")
    lines = text.split("\n")
    old = "\n".join(lines[:6] + [lines[6].strip()] + lines[7:])
    env = read(old, messages.read_arch_warning)[2]
    assert [(g.index, g.name, g.compute_capability) for g in env.gpus] == [(0, "GeForce 820M", "2.1")]
    quoted = "It says the card is one which is of cuda capability 2.1.\n" + text
    assert [m.gpu for m in read(quoted, messages.read_arch_warning)[2].messages] == ["GeForce 820M"]
    minimum = "The minimum cuda capability supported by this library is 3.7."
    above = "\n".join(lines[:5] + [minimum] + lines[5:])
    assert read(above, messages.read_arch_warning)[2].messages[0].minimum is None


@pytest.mark.parametrize("edit", [
    ("Found GPU0 GeForce 820M", "Found GPU GeForce 820M"),  # no index
    ("which is of cuda capability 2.1.", "which is of cuda capability 2."),
    ("which is of cuda capability 2.1.", "which is of cuda capability .1"),
    ("which is of cuda capability 2.1.", "which is of cuda capability 2.x"),
    ("which is of cuda capability 2.1.", "which is of cuda capability 123.1"),
    ("which is of cuda capability 2.1.", "which is of cuda capability 2.123"),
])
def test_the_older_warning_without_an_index_or_a_capability_is_not_read(edit):
    text = paste_body("torch-warning_old-gpu-2.1_820M_no-kernel-image-48_py2.7_pytorch6515").replace(*edit)
    found, paste, env = read(text, messages.read_arch_warning)
    assert found is False and env.messages == [] and env.gpus == []


def test_the_older_warning_fills_the_gpu_of_its_index():
    """A GPU 0 known without a name (an nvidia-smi query of memory only) gains the warning's capability; a GPU of
    another index stays as it was and the warning's GPU is added."""
    text = paste_body("torch-warning_old-gpu-2.1_820M_no-kernel-image-48_py2.7_pytorch6515")
    env = Environment()
    env.gpus.append(GpuInfo(index=0, memory_total_mib=2048))
    read(text, messages.read_arch_warning, env)
    assert [(g.index, g.name, g.compute_capability) for g in env.gpus] == [(0, None, "2.1")]
    env = Environment()
    env.gpus.append(GpuInfo(index=1, memory_total_mib=2048))
    read(text, messages.read_arch_warning, env)
    assert [(g.index, g.compute_capability) for g in env.gpus] == [(0, "2.1"), (1, None)]
    # a GPU of that name known at another index is the one the warning names
    env = Environment()
    env.gpus.append(GpuInfo(index=1, name="GeForce 820M"))
    read(text, messages.read_arch_warning, env)
    assert [(g.index, g.name, g.compute_capability) for g in env.gpus] == [(1, "GeForce 820M", "2.1")]


def test_a_warning_completes_a_truncated_gpu_name_and_keeps_a_known_capability():
    """nvidia-smi cuts a long name ("NVIDIA GeForce RTX 5080 ..."): the warning's GPU is that one; a GPU already
    known with its capability keeps it."""
    env = Environment()
    env.gpus.append(GpuInfo(index=0, name="NVIDIA GeForce RTX 5080 ..."))
    read(paste_body(ARCH), messages.read_arch_warning, env)
    assert [(g.index, g.name, g.compute_capability) for g in env.gpus] == [(0, "NVIDIA GeForce RTX 5080 ...", "12.0")]
    env = Environment()
    env.gpus.append(GpuInfo(index=0, name="NVIDIA GeForce RTX 5080 Laptop GPU", compute_capability="9.9"))
    read(paste_body(ARCH), messages.read_arch_warning, env)
    assert [g.compute_capability for g in env.gpus] == ["9.9"]
    env = Environment()
    env.gpus.append(GpuInfo(index=3, name="NVIDIA GeForce RTX 4090"))
    read(paste_body(ARCH), messages.read_arch_warning, env)
    assert [(g.index, g.name) for g in env.gpus] == [(3, "NVIDIA GeForce RTX 4090"),
                                                     (4, "NVIDIA GeForce RTX 5080 Laptop GPU")]
    assert env.gpus[1].source == "report:torch warning"
    # another GPU cut by nvidia-smi, at index 0: the warning's GPU is a second one, index 1
    env = Environment()
    env.gpus.append(GpuInfo(index=0, name="NVIDIA GeForce RTX 4090 ..."))
    read(paste_body(ARCH), messages.read_arch_warning, env)
    assert [(g.index, g.name, g.compute_capability) for g in env.gpus] == [
        (0, "NVIDIA GeForce RTX 4090 ...", None), (1, "NVIDIA GeForce RTX 5080 Laptop GPU", "12.0")]


@pytest.mark.parametrize("head, name", [
    ("[Bug]: NVIDIA GeForce RTX 5070 Ti", "NVIDIA GeForce RTX 5070 Ti"),
    ("orpheus-fastapi     | NVIDIA GeForce RTX 5090 Laptop GPU", "NVIDIA GeForce RTX 5090 Laptop GPU"),
    ('"NVIDIA GeForce RTX 4090', "NVIDIA GeForce RTX 4090"),
    ("\u201cNVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 4090"),
    ("- `NVIDIA GeForce RTX 5090", "NVIDIA GeForce RTX 5090"),
    ("'NVIDIA GeForce RTX 5090", "NVIDIA GeForce RTX 5090"),
    ("UserWarning: NVIDIA RTX A6000", "NVIDIA RTX A6000"),
    ("\u8b66\u544a\uff1aNVIDIA GeForce RTX 5090", "NVIDIA GeForce RTX 5090"),
    ("RTX A6000", "RTX A6000"),
    ("  ", None),
])
def test_the_gpu_name_before_a_warning(head, name):
    """The text before " with CUDA capability" in the corpus' warnings (a title, a compose prefix, quotes, inline
    code, a Python warning, a full-width colon)."""
    assert messages._gpu_name(head) == name


@pytest.mark.parametrize("words, targets", [
    (["sm_50", "sm_60", "sm_90."], (["5.0", "6.0", "9.0"], [])),
    (["sm_37", "sm_50", "compute_37."], (["3.7", "5.0"], ["3.7"])),
    (["sm_50", "sm_90", "If", "sm_100"], (["5.0", "9.0"], [])),  # the list ends at the first other word
    (["sm_50", "sm_x", "sm_90"], (["5.0"], [])),  # a target that is no capability ends it too
    (["compute_90", "sm_90"], (["9.0"], ["9.0"])),
    (["\"sm_50", "sm_70.\""], (["5.0", "7.0"], [])),
])
def test_the_build_targets_of_a_warning(words, targets):
    assert messages._targets(words) == targets


def test_the_arch_list_is_read_on_the_warnings_line_or_the_three_after_it():
    """hi3dgen#5's warning with its arch list moved one, three and four lines down (blank lines between)."""
    lines = paste_body(ARCH).split("\n")
    for gap, archs in ((0, 8), (2, 8), (3, 0)):
        text = "\n".join(lines[:3] + [""] * gap + lines[3:])
        found, paste, env = read(text, messages.read_arch_warning)
        assert len(env.messages[0].archs) == archs, gap
    # the warning's own line: kokoro#306's quoted one-line warning
    one = paste_body("torch-arch-warning_sm120_5060ti_quoted-one-line_kokoro306")
    assert read(one, messages.read_arch_warning)[2].messages[0].archs == ["5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0"]


def test_each_warning_reads_its_own_arch_list():
    """hi3dgen#5's warning and its list, then metabin#15's (another GPU, another build): each warning's list is the
    one after it, never the one above it (also when that one is the line right above)."""
    first = paste_body(ARCH).split("\n")
    second = paste_body("torch-arch-warning_sm86_3060_compute37_metabin15")
    for text in ("\n".join(first[:5]) + "\n" + second, "\n".join(first[2:4]) + "\n" + second):
        env = read(text, messages.read_arch_warning)[2]
        assert [(m.compute_capability, m.archs[0], m.ptx) for m in env.messages] == [
            ("12.0", "5.0", []), ("8.6", "3.7", ["3.7"])], text


def test_an_arch_list_wrapped_by_a_narrow_terminal():
    """hi3dgen#5's list line wrapped after "install" (the smallest edit: a terminal 28 columns short): the list
    starts its own line."""
    text = paste_body(ARCH).replace("The current PyTorch install supports", "The current PyTorch install\nsupports")
    env = read(text, messages.read_arch_warning)[2]
    assert env.messages[0].archs == ["5.0", "6.0", "6.1", "7.0", "7.5", "8.0", "8.6", "9.0"]


def test_a_warning_claims_its_userwarning_line_on_the_first_line_and_nothing_past_four_lines():
    """yolov6#350 from its UserWarning line (the paste's first line); nerfacc#80's bare warning first, with a cut
    UserWarning line last (no line above line 0 is read); applio#1006 with one more blank line before its
    `warnings.warn(` (five lines after the warning: too far)."""
    lines = paste_body("torch-arch-warning_sm86_3080-laptop_plus-smi-header-515_yolov6-350").split("\n")
    found, paste, env = read("\n".join(lines[1:]), messages.read_arch_warning)
    assert paste.kind[0] == "torch warning" and paste.kind[1] == "torch warning"
    bare = paste_body("torch-arch-warning_sm86_a6000_bare_nerfacc80").rstrip("\n") + "\n" + lines[1].strip()
    found, paste, env = read(bare, messages.read_arch_warning)
    assert paste.kind[-1] is None
    applio = paste_body("torch-arch-warning_sm120_5090_backtick-log_applio1006").split("\n")
    found, paste, env = read("\n".join(applio[:6] + [""] + applio[6:]), messages.read_arch_warning)
    assert paste.kind[8] is None and paste.lines[8].strip().startswith("warnings.warn(")


def test_a_warning_claims_its_userwarning_line_and_the_lines_of_the_same_warning():
    """applio#1006: the UserWarning line above (a path under torch/cuda), the arch list, the advice and
    `warnings.warn(` after a blank line; the next paragraph is not the warning's."""
    found, paste, env = read(paste_body("torch-arch-warning_sm120_5090_backtick-log_applio1006"),
                             messages.read_arch_warning)
    assert claimed(paste) == {2: "torch warning", 3: "torch warning", 4: "torch warning", 5: "torch warning",
                              7: "torch warning"}
    # a UserWarning line that is not torch.cuda's is not the warning's
    text = paste_body("torch-arch-warning_sm120_5090_backtick-log_applio1006").replace("torch\\cuda\\__init__", "x")
    found, paste, env = read(text, messages.read_arch_warning)
    assert paste.kind[2] is None and paste.kind[3] == "torch warning"
    # the warning's line first in the paste: nothing above it to claim
    found, paste, env = read(paste_body("torch-arch-warning_sm86_a6000_bare_nerfacc80"), messages.read_arch_warning)
    assert claimed(paste) == {0: "torch warning", 1: "torch warning"}


@pytest.mark.parametrize("edit", [
    ("sm_120 is not compatible", "sm_1 is not compatible"),
    ("sm_120 is not compatible", "sm_1200 is not compatible"),
    ("sm_120 is not compatible", "sm_120 is compatible"),
])
def test_an_arch_warning_without_a_capability_is_not_read(edit):
    found, paste, env = read(paste_body(ARCH).replace(*edit), messages.read_arch_warning)
    assert found is False and env.messages == [] and env.gpus == []


def test_a_sentence_naming_a_capability_before_the_warning_does_not_stop_the_reader():
    text = "My GPU with CUDA capability sm_120 should work.\n" + paste_body(ARCH)
    env = read(text, messages.read_arch_warning)[2]
    assert [m.compute_capability for m in env.messages] == ["12.0"]


def test_an_arch_warning_whose_sentence_is_broken_is_not_read():
    """hi3dgen#5's warning with blanks inside its sentence (the smallest edit): no warning."""
    text = paste_body(ARCH).replace("sm_120 is not compatible", "sm_120  is not compatible")
    assert read(text, messages.read_arch_warning)[0] is False


# --- torch's driver warning and the runtime's errors ------------------------------------------------------------

def test_the_driver_too_old_message_claims_its_continuation_lines_only():
    """graphwriter#6: the warning kept its line breaks (six lines); the line after it is not its own."""
    text = paste_body("torch-warning_6050_multiline_graphwriter6")
    found, paste, env = read(text + "Traceback (most recent call last):\n", messages.read_driver_warning)
    assert claimed(paste) == {i: "torch warning" for i in range(6)}
    assert (env.driver.cuda_version, env.driver.source) == ("6.5", "report:torch warning")
    assert [(n.probe, n.message, n.level) for n in env.notes] == [
        ("report", "torch says the driver is too old: it runs CUDA 6.5 at most", "warning")]
    # the message's last line as the paste's last (no newline after it)
    found, paste, env = read(text.rstrip("\n"), messages.read_driver_warning)
    assert claimed(paste) == {i: "torch warning" for i in range(6)}
    # the seventh line after it is too far even when it reads like the message's
    lines = text.split("\n")
    found, paste, env = read("\n".join(lines[:6] + [lines[1]] + lines[6:]), messages.read_driver_warning)
    assert paste.kind[6] == "torch warning"
    found, paste, env = read("\n".join(lines[:6] + [lines[1], lines[1]] + lines[6:]), messages.read_driver_warning)
    assert paste.kind[7] is None


@pytest.mark.parametrize("version", ["123", "1234567"])
def test_a_driver_too_old_message_without_a_version_is_not_read(version):
    text = paste_body("torch-warning_11040_alone_seqnet36").replace("11040", version)
    found, paste, env = read(text, messages.read_driver_warning)
    assert found is False and env.messages == [] and env.driver.cuda_version is None


def test_found_no_nvidia_driver_says_the_driver_is_absent():
    """pytorch#74733's collect_env holds torch's "Found no NVIDIA driver on your system" warning."""
    text = (DATA / "collect_env" / "centos7_1.7.0cu110_no-driver-warning_pytorch74733.txt").read_text().partition("\n")[2]
    found, paste, env = read(text, messages.read_driver_warning)
    assert found is True
    assert (env.driver.status, env.driver.error) == ("absent", "Found no NVIDIA driver on your system (torch)")
    assert set(claimed(paste).values()) == {"torch warning"}


def test_the_runtimes_insufficient_driver_error_claims_the_call_that_returned_35():
    """nvidia-docker#498: "cudaGetDeviceProperties returned 35" above the message is the same error."""
    text = paste_body("cuda-error_insufficient-driver_bandwidthTest-35_windows_nvidia-docker498")
    found, paste, env = read(text, messages.read_kernel_errors)
    assert paste.kind[8] == "CUDA error"
    found, paste, env = read(text.replace("returned 35", "returned 36"), messages.read_kernel_errors)
    assert paste.kind[8] is None and paste.kind[9] == "CUDA error"
    # the message first in the paste: nothing above it (the paste's last line is not above it)
    lines = text.split("\n")
    found, paste, env = read("\n".join(lines[9:] + [lines[8]]), messages.read_kernel_errors)
    assert paste.kind[0] == "CUDA error" and paste.kind[-1] is None
    # the call that returned 35 on the paste's first line
    found, paste, env = read("\n".join(lines[8:]), messages.read_kernel_errors)
    assert paste.kind[0] == "CUDA error" and paste.kind[1] == "CUDA error"


def test_jax_says_the_runtime_is_insufficient_in_its_versions_helpers():
    """A JAX log line naming versions_helpers (jax's cuda plugin) is JAX's, onnxruntime's is onnxruntime's."""
    line = "jax_plugins/xla_cuda12/versions_helpers.cc:54] cudaErrorInsufficientDriver : driver is too old"
    assert said(read(line, messages.read_kernel_errors)[2]) == [
        {"tool": "jax", "kind": "driver_insufficient", "text": line}]


@pytest.mark.parametrize("words, tool", [
    ("CUDA error: no kernel image", "torch"), ("THCudaCheck FAIL", "torch"), ("cuda runtime error (209)", "torch"),
    ("RuntimeError: no kernel image", "torch"), ("error: no kernel image", "cuda runtime"),
])
def test_a_no_kernel_image_error_is_torchs_when_its_line_says_torchs_words(words, tool):
    line = words + " is available for execution on the device" if "no kernel image" in words else \
        words + ": no kernel image is available for execution on the device"
    found, paste, env = read(line, messages.read_kernel_errors)
    assert [(m.tool, m.kind) for m in env.messages] == [(tool, "no_kernel_image")]
    assert paste.kind[0] == ("torch error" if tool == "torch" else "CUDA error")


def test_a_cuda_programs_no_kernel_image_error_claims_its_advice_as_a_cuda_error():
    """pytorch#149845's error without torch's "RuntimeError: CUDA error: " (the smallest edit: a CUDA program's own
    words): the runtime's error, its advice lines the same."""
    lines = paste_body("torch-error_no-kernel-image_repl-tensor-compare_5090D-nightly-cu128_pytorch149845").split("\n")
    text = "\n".join([lines[9].replace("RuntimeError: CUDA error: ", "")] + lines[10:13])
    found, paste, env = read(text, messages.read_kernel_errors)
    assert [(m.tool, m.kind) for m in env.messages] == [("cuda runtime", "no_kernel_image")]
    assert claimed(paste) == {i: "CUDA error" for i in range(4)}


def test_the_no_kernel_image_message_claims_at_most_four_lines_after_it():
    """pytorch#149845's error and its three advice lines, with the advice repeated (the smallest edit)."""
    lines = paste_body("torch-error_no-kernel-image_repl-tensor-compare_5090D-nightly-cu128_pytorch149845").split("\n")
    text = "\n".join(lines[9:13] + lines[10:12])
    found, paste, env = read(text, messages.read_kernel_errors)
    assert claimed(paste) == {i: "torch error" for i in range(5)}
    assert read("\n".join(lines[9:13]), messages.read_kernel_errors)[1].kind[:4] == ["torch error"] * 4


def test_no_device_errors_and_paddles_device_note():
    """jax#28376's cuInit error, vLLM#26774's "No CUDA GPUs are available", and Paddle's device note
    (paddle#53484) with its driver API version; the note cut before its runtime version is not read."""
    found, paste, env = read(paste_body("jax-xla-log_cuinit-no-device_no-visible-gpu_jax28376"), messages.read_devices)
    assert env.driver.status == "no_device" and env.driver.error.endswith("no CUDA-capable device is detected")
    paddle = paste_body("loader-error_could-not-locate-cudnn-dll_paddle-note-cc8.6-driver-api-12.0_paddle53484")
    found, paste, env = read(paddle, messages.read_devices)
    assert found is True
    assert [(g.index, g.compute_capability, g.source) for g in env.gpus] == [(0, "8.6", "report:paddle")]
    assert (env.driver.cuda_version, env.driver.source) == ("12.0", "report:paddle")
    assert claimed(paste) == {8: "Paddle device note"}
    cut = paddle.replace(", Runtime API Version: 11.7", "")
    found, paste, env = read(cut, messages.read_devices)
    assert found is False and env.gpus == [] and claimed(paste) == {}


# --- cuDNN versions -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("line, pair", [
    ("cuDNN version incompatibility: PyTorch was compiled  against (8, 5, 0) but found runtime version (8, 3, 3).",
     ("8.5.0", "8.3.3")),
    ("RuntimeError: cuDNN version mismatch: PyTorch was compiled against 7102 but linked against 7600",
     ("7.1.2", "7.6.0")),
    ("cuDNN compiled (7102) and runtime (7600) versions mismatch", ("7.1.2", "7.6.0")),  # caffe2's, in torch 1.0
    ("PyTorch was compiled against (8, 5) but found runtime version (8, 3, 3).", None),
    ("PyTorch was compiled against 71 but linked against 7600", None),
])
def test_torchs_cudnn_wordings(line, pair):
    """co-gat#2's and da-detection#19's lines; caffe2's wording in the same integer encoding; cut ones."""
    assert messages._torch_cudnn(line) == pair


def test_caffe2s_wording_in_torch_1_0_is_torchs_cudnn_message():
    """torch 1.0's caffe2 check words da-detection#19's versions "cuDNN compiled (7102) and runtime (7600) versions
    mismatch" (caffe2/core/common_cudnn.h's message)."""
    line = "RuntimeError: [enforce fail at common_cudnn.h:97] cuDNN compiled (7102) and runtime (7600) versions mismatch"
    found, paste, env = read(line, messages.read_cudnn_versions)
    assert [(m.tool, m.built, m.found) for m in env.messages] == [("torch", "7.1.2", "7.6.0")]
    assert claimed(paste) == {0: "torch error"}


def test_a_loaded_runtime_line_with_older_integers_and_a_compatibility_version():
    """TensorFlow 1.x printed cuDNN as an integer ("7101") and 2.x adds "(compatibility version 7100)": deeplab2#66's
    line with the versions in those forms (the smallest edits)."""
    line = paste_body("tf-log_loaded-runtime-cudnn_8.0.4-vs-8.1.0_deeplab2-66").split("\n")[1]
    old = line.replace("8.0.4 but", "7101 (compatibility version 7100) but").replace("with: 8.1.0", "with: 7600")
    found, paste, env = read(old, messages.read_cudnn_versions)
    assert [(m.tool, m.built, m.found) for m in env.messages] == [("tensorflow", "7.6.0", "7.1.1")]


def test_a_cudnn_version_line_that_says_no_versions_is_left():
    text = "PyTorch was compiled with CUDA 11.8\nLoaded runtime CuDNN library: unknown\n"
    found, paste, env = read(text, messages.read_cudnn_versions)
    assert found is False and env.messages == [] and claimed(paste) == {}


def test_settle_gives_torch_the_cudnn_it_was_built_with():
    """kohya#1096: torch 2.0.1+cu118 compiled against cuDNN 8.7.0 (its message); a torch that knows its cuDNN keeps
    it; a message about another library or another tool names nothing."""
    text = paste_body("torch-error_cudnn-incompatibility_8.7.0-vs-8.2.4_kohya-log-torch2.0.1cu118_kohya1096")
    env = Environment()
    env.frameworks.append(Framework(name="torch", version="2.0.1+cu118", variant="cu118", cuda="11.8"))
    read(text, env=env)
    messages.settle(env)
    assert env.frameworks[0].cudnn == "8.7.0"
    env.frameworks[0].cudnn = "8.9.2"
    messages.settle(env)
    assert env.frameworks[0].cudnn == "8.9.2"
    other = Environment()
    other.frameworks.append(Framework(name="torch", version="2.0.1"))
    other.messages.append(ToolMessage(tool="tensorflow", kind="library_version", text="", library="cudnn", built="8.1.0"))
    other.messages.append(ToolMessage(tool="torch", kind="library_version", text="", library="cublas", built="11.8"))
    messages.settle(other)
    assert other.frameworks[0].cudnn is None
    nothing = Environment()
    messages.settle(nothing)
    assert nothing.frameworks == []


# --- JAX --------------------------------------------------------------------------------------------------------

def test_jax_outdated_reads_at_most_five_lines_after_it():
    """jax-feedstock#149's report with a blank line pushing "Installed version" one line too far (the smallest
    edit), and its lines in another order."""
    stem = "jax-error_backend-failed_outdated-cudnn-8907-min-9100_conda-forge_jax-feedstock149"
    lines = paste_body(stem).split("\n")
    text = "\n".join(lines[:7] + ["", "", ""] + lines[7:])
    found, paste, env = read(text, messages.read_jax)
    assert (env.messages[0].built, env.messages[0].minimum, env.messages[0].found) == ("8.9.7", "9.1.0", None)
    text = "\n".join(lines[:7] + ["", ""] + lines[7:])
    assert read(text, messages.read_jax)[2].messages[0].found == "8.9.7"


def test_jax_outdated_numbers_that_end_a_sentence():
    """jax-feedstock#149's block with each number ending in a period (the smallest edit: JAX's sentences)."""
    stem = "jax-error_backend-failed_outdated-cudnn-8907-min-9100_conda-forge_jax-feedstock149"
    text = paste_body(stem).replace("against: 8907", "against: 8907.").replace("supported: 9100", "supported: 9100.")
    env = read(text, messages.read_jax)[2]
    assert (env.messages[0].built, env.messages[0].minimum, env.messages[0].found) == ("8.9.7", "9.1.0", "8.9.7")


@pytest.mark.parametrize("number", ["89O7", "8907x", ""])
def test_jax_outdated_lines_without_a_number_say_nothing(number):
    stem = "jax-error_backend-failed_outdated-cudnn-8907-min-9100_conda-forge_jax-feedstock149"
    text = paste_body(stem).replace("Minimum supported: 9100", f"Minimum supported: {number}")
    found, paste, env = read(text, messages.read_jax)
    assert env.messages[0].minimum is None and paste.kind[8] is None


@pytest.mark.parametrize("name, number, version", [
    ("cuDNN", "8906", "8.9.6"), ("CUDA", "12020", "12.2"), ("cuSOLVER", "11401", "11401"), ("cudnn", "8600", "8.6.0"),
    ("cuda", "12010", "12.1"),
])
def test_jax_component_versions(name, number, version):
    assert messages._jax_version(name, number) == version


def test_jaxs_found_version_sentence_alone_and_after_another_outdated_line():
    """kohya-colab#94's sentence without the "CUDA backend failed to initialize:" before it (the smallest edit:
    JAX's check_cuda_versions words alone), under a line that says "Outdated " about something else."""
    stem = "jax-error_backend-failed_found-cuda-12010-built-12020_colab_kohya-colab94"
    text = paste_body(stem).replace("CUDA backend failed to initialize: Found CUDA", "Found CUDA")
    for t in (text, "pip: Outdated packages listed below.\n" + text):
        env = read(t, messages.read_jax)[2]
        assert [(m.library, m.built, m.found) for m in env.messages] == [("cudart", "12.2", "12.1")]


def test_a_jax_backend_line_that_names_no_component_is_claimed_and_says_nothing():
    """jax#20519's backend line cut after its first words (the smallest edit): JAX's error, no message."""
    line = "CUDA backend failed to initialize: (Set TF_CPP_MIN_LOG_LEVEL=0 and rerun for more info.)"
    found, paste, env = read(line, messages.read_jax)
    assert found is True and env.messages == [] and claimed(paste) == {0: "JAX error"}
    found, paste, env = read("Outdated browser found.\n", messages.read_jax)
    assert found is False and claimed(paste) == {}


# --- libraries that could not be loaded ---------------------------------------------------------------------------

@pytest.mark.parametrize("line, soname", [
    ("OSError: libcudnn.so.7: cannot open shared object file: No such file or directory", "libcudnn.so.7"),
    ("ImportError: /usr/lib/libcudnn.so.9: cannot open shared object file", "libcudnn.so.9"),
    ("`libcuda.so`: cannot open shared object file", "libcuda.so"),
    ("libcudnn.so.8: cannot open shared object file: No such file or directory", "libcudnn.so.8"),  # first
    ("Error: cudnn.so.8: cannot open shared object file", None),  # no "lib"
    ("Error: libcudnn: cannot open shared object file", None),  # no ".so"
    (": cannot open shared object file", None),
    ("Could not load library cudnn_ops_infer64_8.dll. Error code 126", "cudnn_ops_infer64_8.dll"),
    ("Could not locate cudnn_ops_infer64_8.dll. Please make sure", "cudnn_ops_infer64_8.dll"),
    ("no such line", None),
])
def test_the_file_a_loader_could_not_open(line, soname):
    """The loader's words in onnxruntime#3632, pytorch#165812, wsl#8587, dictate-wizard#2 and reactor#396."""
    assert messages._missing_soname(line) == soname


@pytest.mark.parametrize("soname, library", [
    ("libcudnn_cnn_infer.so.8", "cudnn"), ("cudart64_110.dll", "cudart"), ("libcuda.so", "cuda"),
    ("libcublasLt.so.12", "cublaslt"), ("libnvinfer.so.8", "nvinfer"), ("64_8.dll", "64_8.dll"),
])
def test_the_library_a_file_belongs_to(soname, library):
    assert messages._library_of(soname) == library


def test_a_loader_line_that_names_no_library_does_not_stop_the_reader():
    """onnxruntime#3632's loader line after one whose word before the message is no library file."""
    text = "Error: libcudnn: cannot open shared object file\n" + paste_body(
        "onnxruntime-error_libcudnn.so.7-missing_pytorch-docker-1.5_onnxruntime3632")
    env = read(text, messages.read_missing_libraries)[2]
    assert [m.soname for m in env.messages] == ["libcudnn.so.7"]


def test_a_loader_line_another_reader_read_is_found_but_not_said_again():
    text = paste_body("onnxruntime-error_libcudnn.so.7-missing_pytorch-docker-1.5_onnxruntime3632")
    paste = Paste(text)
    paste.claim(2, "other")
    env = Environment()
    assert messages.read_missing_libraries(paste, env) is True and env.messages == []


def test_tensorflows_opened_libraries_are_claimed_only_where_one_could_not_be_opened():
    """tensorflow#15294's "successfully opened" lines are the log's when a library could not be opened; alone,
    they are nothing this reader reads."""
    text = paste_body("tf-log_couldnt-open-libcudnn.so.5_cuda8.0-libs_tf1.0.1_tensorflow15294")
    opened = "\n".join(line for line in text.split("\n") if "successfully opened" in line)
    found, paste, env = read(opened, messages.read_missing_libraries)
    assert found is False and claimed(paste) == {}


def test_a_tensorflow_line_that_names_no_library_is_claimed_and_says_nothing():
    line = "W tensorflow/stream_executor/platform/default/dso_loader.cc:59] Could not load dynamic library '';"
    found, paste, env = read(line, messages.read_missing_libraries)
    assert found is True and env.messages == [] and claimed(paste) == {0: "TensorFlow/XLA log"}


def test_the_same_missing_library_said_twice_is_one_message_that_keeps_its_file():
    """tensorflow#15294: "Couldn't open CUDA library libcudnn.so.5" then "Unable to load cuDNN DSO" (no file):
    one message naming libcudnn.so.5, in either order."""
    text = paste_body("tf-log_couldnt-open-libcudnn.so.5_cuda8.0-libs_tf1.0.1_tensorflow15294")
    lines = text.split("\n")
    swapped = "\n".join(lines[:5] + [lines[6], lines[5]] + lines[7:])
    for t in (text, swapped):
        env = read(t, messages.read_missing_libraries)[2]
        assert [(m.library, m.soname) for m in env.messages] == [("cudnn", "libcudnn.so.5")]
    # two files of one library are two messages
    two = text.replace("Unable to load cuDNN DSO", "Couldn't open CUDA library libcudnn.so.7.")
    env = read(two, messages.read_missing_libraries)[2]
    assert [(m.library, m.soname) for m in env.messages] == [("cudnn", "libcudnn.so.5"), ("cudnn", "libcudnn.so.7")]


# --- TensorFlow's devices ---------------------------------------------------------------------------------------

def test_tensorflows_created_device_line_names_the_gpu():
    """TensorFlow 2's "Created device /job:localhost/replica:0/task:0/device:GPU:0 with 21670 MB memory:  -> device:
    0, name: NVIDIA GeForce RTX 3090, pci bus id: 0000:01:00.0, compute capability: 8.6" (the words of
    tensorflow/core/common_runtime/gpu/gpu_device.cc, as tensorflow#26182's log prints its older lines)."""
    line = ("2023-01-01 10:00:00.000000: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1613] Created device "
            "/job:localhost/replica:0/task:0/device:GPU:0 with 21670 MB memory:  -> device: 0, name: NVIDIA GeForce "
            "RTX 3090, pci bus id: 0000:01:00.0, compute capability: 8.6")
    found, paste, env = read(line, messages.read_tf_devices)
    assert found is True and claimed(paste) == {0: "TensorFlow/XLA log"}
    assert [(g.index, g.name, g.compute_capability, g.source) for g in env.gpus] == [
        (0, "NVIDIA GeForce RTX 3090", "8.6", "report:tensorflow")]
    cut = line.replace(", compute capability: 8.6", ", compute capability: x")
    found, paste, env = read(cut, messages.read_tf_devices)
    assert [(g.name, g.compute_capability) for g in env.gpus] == [("NVIDIA GeForce RTX 3090", None)]  # no "x"


def test_tensorflows_older_device_lines_and_a_line_cut_in_the_name():
    """TensorFlow 1.x's "Creating TensorFlow device (/gpu:0) -> (device: 0, name: GeForce GTX 1080, pci bus id:
    0000:01:00.0)" (no compute capability), 2.x's "-> physical GPU (device: 0, name: Tesla T4, pci bus id: ...,
    compute capability: 7.5)" (tensorflow#62170's title), and a line cut inside the name (TextBoxes-TensorFlow#8's
    last line): read as TensorFlow's, no GPU from it."""
    old = ("2017-06-23 23:47:12.053031: I tensorflow/core/common_runtime/gpu/gpu_device.cc:996] Creating TensorFlow "
           "device (/gpu:0) -> (device: 0, name: GeForce GTX 1080, pci bus id: 0000:01:00.0)")
    found, paste, env = read(old, messages.read_tf_devices)
    assert found is True and [(g.index, g.name, g.compute_capability) for g in env.gpus] == [(0, "GeForce GTX 1080",
                                                                                             None)]
    title = ("Created TensorFlow device (/job:localhost/replica:0/task:0/device:GPU:0 with 10175 MB memory) -> physical "
             "GPU (device: 0, name: Tesla T4, pci bus id: 0000:00:07.0, compute capability: 7.5)")
    found, paste, env = read(title, messages.read_tf_devices)
    assert [(g.name, g.compute_capability) for g in env.gpus] == [("Tesla T4", "7.5")]
    found, paste, env = read(old[:old.index("GTX") + 3], messages.read_tf_devices)
    assert found is True and claimed(paste) == {0: "TensorFlow/XLA log"} and env.gpus == []
    found, paste, env = read("a TensorFlow device (GPU) was created", messages.read_tf_devices)
    assert found is False


@pytest.mark.parametrize("line, gpu", [
    ("name: Tesla K80 major: 3 minor: 7 memoryClockRate(GHz): 0.8235", ("Tesla K80", "3.7")),
    ("pciBusID: 0000:3b:00.0 name: Quadro P6000 computeCapability: 6.1", ("Quadro P6000", "6.1")),
    ("name: Tesla K80 major: 3 memoryClockRate(GHz): 0.8235", None),  # no minor
    ("name: Tesla K80 major: x minor: 7", None),
    ("name: Quadro P6000 computeCapability: ", None),
    ("name:  major: 3 minor: 7", None),  # no name before " major: "
    ("pciBusID: 0000:3b:00.0 Quadro P6000 computeCapability: 6.1", None),  # no "name: "
])
def test_tensorflows_device_properties(line, gpu):
    """faster-rcnn-tf#330's and tensorflow#26182's property lines, and each edited one way."""
    got = messages._tf_properties(line)
    assert (got.name, got.compute_capability) == gpu if gpu else got is None


@pytest.mark.parametrize("text, cc", [
    ("3.7", True), ("12.0", True), ("12.1", True), ("8.10", True), ("123.0", False), ("8.100", False), ("8", False),
    ("8.", False), (".8", False), ("x.8", False), ("8.x", False),
])
def test_a_compute_capability_is_two_numbers_of_one_or_two_digits(text, cc):
    assert messages._is_cc(text) is cc


def test_tensorflows_device_properties_are_tensorflows():
    env = read(paste_body("tf-log_found-device-properties-tf1-major-minor_2xK80_faster-rcnn-tf330"),
               messages.read_tf_devices)[2]
    assert [(g.index, g.source) for g in env.gpus] == [(0, "report:tensorflow"), (1, "report:tensorflow")]


def test_tensorflows_found_device_line_last_in_a_paste_names_nothing():
    lines = paste_body("tf-log_found-device-properties-tf1-major-minor_2xK80_faster-rcnn-tf330").split("\n")
    found, paste, env = read(lines[2], messages.read_tf_devices)
    assert found is False and env.gpus == []
    found, paste, env = read("\n".join(lines[2:4]), messages.read_tf_devices)
    assert [(g.index, g.name) for g in env.gpus] == [(0, "Tesla K80")] and claimed(paste) == {
        0: "TensorFlow/XLA log", 1: "TensorFlow/XLA log"}


# --- WSL ------------------------------------------------------------------------------------------------------------

def test_wsl_from_ldconfigs_warning():
    """archwsl#248: ldconfig's warning about WSL's libcuda: a WSL 2 guest on Linux, its libcuda, a note; the same
    line without ldconfig's "ldconfig: " prefix (the path first), and after a warning about another folder."""
    text = paste_body("ldconfig-wsl_not-a-symbolic-link_archwsl-pacman_archwsl248")
    line = "ldconfig: /usr/lib/wsl/lib/libcuda.so.1 is not a symbolic link"
    for t in (text, text.replace(line, line.removeprefix("ldconfig: ")),
              text.replace(line, "ldconfig: /usr/lib/x86_64-linux-gnu/libfoo.so.1 is not a symbolic link\n" + line)):
        found, paste, env = read(t, messages.read_wsl)
        assert found is True and (env.context.wsl, env.context.os) == (True, "linux")
        assert [(n.probe, n.message) for n in env.notes] == [
            ("report", "WSL: the driver is the Windows one; libcuda comes from /usr/lib/wsl/lib")]
        assert [(lib.name, lib.soname, lib.path, lib.origin) for lib in env.libraries] == [
            ("cuda", "libcuda.so.1", "/usr/lib/wsl/lib/libcuda.so.1", "report:ldconfig")]


def test_wsl_keeps_a_known_os_and_a_known_libcuda():
    env = Environment()
    env.context.os = "windows"
    read(paste_body("ldconfig-wsl_not-a-symbolic-link_archwsl-pacman_archwsl248"), env=env)
    assert env.context.wsl is True and env.context.os == "windows"
    twice = paste_body("ldconfig-wsl_not-a-symbolic-link_archwsl-pacman_archwsl248") * 2
    found, paste, env = read(twice, messages.read_wsl)
    assert len(env.libraries) == 1 and len(env.notes) == 1
    assert claimed(paste) == {3: "ldconfig -p", 12: "ldconfig -p"}


def test_a_symbolic_link_line_outside_wsl_or_of_another_library():
    """archwsl#248's line with another folder, and with another library of the same folder (the smallest edits)."""
    text = paste_body("ldconfig-wsl_not-a-symbolic-link_archwsl-pacman_archwsl248")
    found, paste, env = read(text.replace("/usr/lib/wsl/lib/", "/usr/lib/x/"), messages.read_wsl)
    assert found is False and env.context.wsl is False
    found, paste, env = read(text.replace("libcuda.so.1", "libd3d12.so"), messages.read_wsl)
    assert found is True and env.context.wsl is True and env.libraries == []


@pytest.mark.parametrize("line, wsl", [
    ("- [X] WSL 2", True), ("- [x] WSL 2", True), ("* [x] WSL 2", True), ("[x] WSL 2", True),
    ("- [ ] WSL 2", False), ("I ticked [x] WSL 2 above", False),
])
def test_the_wsl_templates_ticked_box(line, wsl):
    """WSL#11229's template line, its other spellings and a sentence that quotes it."""
    found, paste, env = read(line + "\n", messages.read_wsl_template)
    assert found is wsl and env.context.wsl is wsl and (env.context.os == "linux") is wsl


# --- messages kept once, and cut to their sentence -------------------------------------------------------------------

def test_a_message_said_twice_is_kept_once():
    """deeplab2#66 prints its cuDNN line twice: one message."""
    env = read(paste_body("tf-log_loaded-runtime-cudnn_8.0.4-vs-8.1.0_deeplab2-66"))[2]
    assert len(env.messages) == 1


KERNEL = "no kernel image is available for execution on the device"  # pytorch#149845's error, the key words first


def test_clip_bounds():
    """_clip on pytorch#149845's error with prose around it (the lengths and periods are the edits)."""
    advice = ". CUDA kernel errors might be asynchronously reported at some other API call" + "y" * 100
    assert messages._clip(KERNEL + advice) == KERNEL + "."  # the key words at the line's start
    exactly = KERNEL + ". " + "w" * (160 - len(KERNEL) - 2)
    assert len(exactly) == 160 and messages._clip(exactly) == exactly  # 160 characters: kept whole
    longer = exactly + "w"
    assert messages._clip(longer) == KERNEL + "."
    before = "x" * 100 + ". RuntimeError: CUDA error: " + KERNEL + advice  # a period before the key words
    at = before.find("no kernel image")
    assert messages._clip(before) == "..." + before[at - 80:before.find(". ", at) + 1]
    # the first period 240 characters after the key words is too far: cut there, without it
    far = "RuntimeError: CUDA error: " + KERNEL + "z" * (240 - len(KERNEL)) + ". then more" + "q" * 50
    at = far.find("no kernel image")
    assert far.find(". ", at) == at + 240 and messages._clip(far) == far[:at + 240]
    near = far.replace("z. then", ". zthen")
    assert messages._clip(near) == near[:at + 240]
    # no period: cut 240 characters after the key words, on a letter
    none = "RuntimeError: CUDA error: " + KERNEL + "z " * 200
    at = none.find("no kernel image")
    assert none[at + 240] != " " and messages._clip(none) == none[:at + 240].strip()


@pytest.mark.parametrize("text, clipped", [
    ("short line: no kernel image", "short line: no kernel image"),
    ("x" * 100 + " RuntimeError: CUDA error: no kernel image is available for execution on the device. "
     "CUDA kernel errors might be asynchronously reported at some other API call" + "y" * 40,
     "..." + "x" * 53 + " RuntimeError: CUDA error: no kernel image is available for execution on the device."),
    ("CUDA error: no kernel image is available" + " z" * 200, ("CUDA error: no kernel image is available" + " z" * 200)
     [:"CUDA error: no kernel image is available".find("no kernel image") + 240].strip()),
    ("w" * 200, "w" * 200),
    ("w" * 400, "w" * 300),
])
def test_a_long_line_is_cut_to_its_message(text, clipped):
    assert messages._clip(text) == clipped
