"""Issue #40's readers on the lines of real pastes (tests/data/pastes, the source named on each) and the smallest
edits of them: listings of CUDA libraries (pastes/listings.py), what an installer says it installed
(installs.py), GPUs and a driver named outside the tools' tables (devices.py), TensorFlow's opened libraries and
JAX's words about its own builds (messages.py), and the findings those words state (diagnose/remedy.py)."""
from __future__ import annotations

import pytest
from support.snapshot import snapshot_matrix

from cudamatrix.detect.text import Paste
from cudamatrix.diagnose.findings import diagnose
from cudamatrix.models import Environment
from cudamatrix.pastes import devices, installs, listings, messages
from cudamatrix.pastes.reports import from_reports


def read(text, reader):
    paste = Paste(text)
    env = Environment(origin="report")
    return reader(paste, env), paste, env


def kinds(paste):
    return {i: k for i, k in enumerate(paste.kind) if k}


# --- listings --------------------------------------------------------------------------------------------------

LDD = ("ldd libtensorflow_framework.so\n"  # tensorflow#22940's lines
       "\tlinux-vdso.so.1 =>  (0x00007ffc8a15a000)\n"
       "\tlibcublas.so.9.0 => not found\n"
       "\tlibcuda.so.1 => /usr/lib/x86_64-linux-gnu/libcuda.so.1 (0x00007f0258749000)\n"
       "\tlibcudnn.so.7 => /usr/lib/x86_64-linux-gnu/libcudnn.so.7 (0x00007f0243922000)\n"
       "\tlibcufft.so.9.0 => not found\n"
       "\tlibdl.so.2 => /lib/x86_64-linux-gnu/libdl.so.2 (0x00007f024371e000)\n"
       "\t/lib64/ld-linux-x86-64.so.2 (0x00007f025a7aa000)\n")


def test_ldd_names_what_the_loader_cannot_find_and_the_copies_it_picks():
    found, paste, env = read(LDD + "\tlibcublas.so.9.0 => not found\n", listings.read)
    assert found is True
    assert [(m.tool, m.kind, m.soname, m.library) for m in env.messages] == [
        ("ldd", "library_missing", "libcublas.so.9.0", "cublas"), ("ldd", "library_missing", "libcufft.so.9.0",
                                                                    "cufft")]  # said once, cufft though untracked
    assert [(lib.name, lib.soname, lib.path, lib.origin) for lib in env.libraries] == [
        ("cuda", "libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "report:ldd"),
        ("cudnn", "libcudnn.so.7", "/usr/lib/x86_64-linux-gnu/libcudnn.so.7", "report:ldd")]
    assert set(kinds(paste)) == {1, 2, 3, 4, 5, 6, 7, 8}  # every row, the vdso and loader ones too
    found, paste, env = read("\tlibdl.so.2 => /lib/x86_64-linux-gnu/libdl.so.2 (0x00007f024371e000)\n",
                             listings.read)
    assert found is False and env.libraries == []  # no CUDA library: not what is read here
    found, paste, env = read("the old name => the new name\nlibcudnn.so.8 => see the docs\n", listings.read)
    assert found is False


LS_L = ("lrwxrwxrwx 1 mineru mineru        23 May 14 17:49 libcublas.so.12 -> ./libcublas.so.12.4.5.8\n"
        "-rwxrwxr-x 8 mineru mineru 109604768 May  4  2024 libcublas.so.12.4.5.8\n"
        "lrwxrwxrwx 1 mineru mineru        21 May 14 17:49 libcudart.so -> libcudart.so.12.4.127\n"
        "lrwxrwxrwx 1 mineru mineru        21 May 14 17:49 libcudart.so.12 -> libcudart.so.12.4.127\n"
        "lrwxrwxrwx 1 mineru mineru        20 May 14 17:49 libcufft.so.11 -> libcufft.so.11.2.1.3\n")


def test_ls_l_symlinks_are_sonames_and_name_their_files_version():
    """torch_memory_saver#11's listing: "libcudart.so -> ..." is the link-time name, not a SONAME; libcufft is no
    tracked library; the plain file is claimed as the listing's."""
    found, paste, env = read(LS_L, listings.read)
    assert found is True and set(kinds(paste)) == {0, 1, 2, 3, 4}
    assert [(lib.soname, lib.path, lib.version, lib.origin) for lib in env.libraries] == [
        ("libcublas.so.12", "libcublas.so.12.4.5.8", "12.4.5.8", "report:ls"),
        ("libcudart.so.12", "libcudart.so.12.4.127", "12.4.127", "report:ls")]
    found, paste, env = read("see libcudart.so.12 -> libcudart.so.12.4.127 there\n", listings.read)
    assert found is False  # prose around an arrow


def test_ldconfig_v_rows_under_their_folder_even_after_a_fence_on_the_same_line():
    """sukima#34 typed its second block's first row on the fence's line ("```\\tlibcudart.so.11.0 -> ...")."""
    text = "/usr/lib:\n\tlibcuda.so.1 -> libcuda.so.515.57\n```\tlibcudart.so.11.0 -> libcudart.so.11.7.99\n"
    found, paste, env = read(text, listings.read)
    assert found is True and kinds(paste) == {1: "ldconfig -v", 2: "ldconfig -v"}
    assert [(lib.soname, lib.path, lib.origin) for lib in env.libraries] == [
        ("libcuda.so.1", "/usr/lib/libcuda.so.515.57", "report:ldconfig"),
        ("libcudart.so.11.0", "/usr/lib/libcudart.so.11.7.99", "report:ldconfig")]
    assert Paste("```python\nx\n```").lines == ["", "x", ""]  # an info string is still no output


def test_ls_columns_give_cudnns_full_version_from_its_sub_libraries():
    text = ("libcudart.so.11.0.221         libnppidei.so\n"  # tensorflow#43947's columns
            "libcudnn_adv_infer.so.8       libnppidei.so.11\n"
            "libcudnn_adv_infer.so.8.1.1   libnppidei.so.11.1.0.245\n")
    found, paste, env = read(text, listings.read)
    assert found is True and set(kinds(paste)) == {0, 1, 2}
    assert [n.message for n in env.notes] == [
        "cuDNN 8.1.1 named in the paste (the files an ls lists), of no framework it could be tied to"]
    found, paste, env = read("I copied libcudnn_adv_infer.so.8.1.1 there\n", listings.read)
    assert found is False and env.notes == []


# --- installs ----------------------------------------------------------------------------------------------------

UV = ("Using CPython 3.12.8\nCreating virtual environment at: .venv\nResolved 20 packages in 428ms\n"
      "Installed 19 packages in 41ms\n + jax==0.6.1\n + jax-cuda12-plugin==0.6.1\n + nvidia-cudnn-cu12==9.10.1.4\n")


def test_uvs_install_report_gives_the_packages_and_the_python():
    found, paste, env = read(UV, installs.read)
    assert found is True and set(kinds(paste)) == {0, 1, 2, 3, 4, 5, 6}
    assert env.packages == {"jax": "0.6.1", "jax-cuda12-plugin": "0.6.1", "nvidia-cudnn-cu12": "9.10.1.4"}
    assert env.python.version == "3.12.8"
    found, paste, env = read("the diff says\n + x==1\n", installs.read)
    assert found is False and env.packages == {}  # one row without uv's words around it


def test_pip_show_gives_name_and_version():
    text = "Name: flax\nVersion: 0.10.6\nSummary: Flax\nRequires: jax, msgpack\n\nName: jax\nVersion: 0.6.1\n"
    found, paste, env = read(text, installs.read)
    assert found is True and env.packages == {"flax": "0.10.6", "jax": "0.6.1"}
    assert set(kinds(paste)) == {0, 1, 2, 3, 5, 6}
    found, paste, env = read("Name: my project\nVersion: unreleased\n", installs.read)
    assert found is False


# --- GPUs and a driver named outside the tools' tables ------------------------------------------------------------

def test_an_applications_device_line_and_its_total_vram():
    """Fooocus#886: "Total VRAM 12288 MB" and "Device: cuda:0 NVIDIA GeForce RTX 2060 12GB"; ComfyUI's
    " : cudaMallocAsync" after the name."""
    found, paste, env = read("Total VRAM 12288 MB, total RAM 65457 MB\n\nDevice: cuda:0 NVIDIA GeForce RTX 2060 12GB\n",
                             devices.read)
    assert found is True and [(g.index, g.name, g.memory_total_mib) for g in env.gpus] == [
        (0, "NVIDIA GeForce RTX 2060", 12288)]
    found, paste, env = read("Device: cuda:1 NVIDIA GeForce RTX 4090 : cudaMallocAsync\n", devices.read)
    assert [(g.index, g.name, g.memory_total_mib) for g in env.gpus] == [(1, "NVIDIA GeForce RTX 4090", None)]
    found, paste, env = read("Device: cuda:0 is busy\nDevice: cuda:999 RTX 4090\n", devices.read)
    assert found is False and env.gpus == []


@pytest.mark.parametrize("line, gpus", [
    ("8 * A100 SXM4(40G)", [("A100 SXM4", 40960)] * 8),  # PlugLM#1
    ("2x RTX 3090 (24GB)", [("RTX 3090", 24576)] * 2),
    ("4 \u00d7 Tesla V100", [("Tesla V100", None)] * 4),
    ("2 x 3", []), ("3 * 4 = 12", []), ("100 x RTX 4090", []), ("2 x RTX 3090 and a big case for them", []),
])
def test_a_count_and_a_gpu_typed_alone_on_a_line(line, gpus):
    found, paste, env = read(line + "\n", devices.read_typed_gpus)
    assert found is bool(gpus) and [(g.name, g.memory_total_mib) for g in env.gpus] == gpus


def test_nvidia_smis_banner_cut_after_its_version_is_the_driver():
    """JaxMARL#134: "My Nvidia-smi is - only top line -" and "` NVIDIA-SMI 560.35.03"."""
    found, paste, env = read("My Nvidia-smi is - only top line - \n` NVIDIA-SMI 560.35.03\n", devices.read)
    assert found is True and env.driver.version == "560.35.03" and kinds(paste) == {1: "nvidia-smi"}
    found, paste, env = read("NVIDIA-SMI 560.35.03 was installed with the driver\n", devices.read)
    assert found is False and env.driver.version is None


# --- TensorFlow's opened libraries, JAX's words about its builds ---------------------------------------------------

def test_tensorflows_opened_libraries_and_cannot_dlopen_alone():
    text = ("I tensorflow/stream_executor/platform/default/dso_loader.cc:49] Successfully opened dynamic library "
            "libcudnn.so.8\nI tensorflow/stream_executor/dso_loader.cc:111] successfully opened CUDA library "
            "libcublas.so.8.0 locally\nI dso_loader.cc:49] Successfully opened dynamic library libcufft.so.10\n")
    found, paste, env = read(text, messages.read)
    assert found is True and set(kinds(paste)) == {0, 1, 2}
    assert [(lib.soname, lib.origin, lib.loaded_first) for lib in env.libraries] == [
        ("libcudnn.so.8", "report:tensorflow", True), ("libcublas.so.8.0", "report:tensorflow", True)]
    alone = ("W gpu_device.cc:1956] Cannot dlopen some GPU libraries. Please make sure the missing libraries mentioned "
             "above are installed properly\nSkipping registering GPU devices...\n")
    found, paste, env = read(alone, messages.read)
    assert [(m.tool, m.kind, m.library, m.soname) for m in env.messages] == [("tensorflow", "library_missing", None,
                                                                               None)]
    assert set(kinds(paste)) == {0, 1}
    named = "W dso_loader.cc:60] Could not load dynamic library 'libcusolver.so.11'; dlerror: x\n" + alone
    found, paste, env = read(named, messages.read)
    assert [m.soname for m in env.messages] == ["libcusolver.so.11"]  # the named one says which


@pytest.mark.parametrize("text", [
    "RuntimeWarning: JAX plugin jax_cuda12_plugin version 0.9.2 is installed, \nbut it is not compatible with the "
    "installed jaxlib version 0.9.0.1\n",  # recovar#64: one warning on two lines
    "RuntimeWarning: JAX plugin jax_cuda12_plugin version 0.9.2 is installed, but it is not compatible with the "
    "installed jaxlib version 0.9.0.1.\n",
])
def test_jaxs_plugin_of_another_release(text):
    found, paste, env = read(text, messages.read)
    assert found is True and env.packages == {"jax-cuda12-plugin": "0.9.2", "jaxlib": "0.9.0.1"}
    assert [(m.library, m.built, m.found) for m in env.messages] == [("jax-cuda12-plugin", "0.9.0.1", "0.9.2")]
    assert all(k == "JAX warning" for k in kinds(paste).values())


@pytest.mark.parametrize("before", ["", "Istanbul \u0130 ", "x\n" * 3])
def test_a_cpu_jaxlib_is_read_in_any_case_on_its_own_lines(before):
    """JAX's CPU-jaxlib warning as written and retyped in capitals or lower case: each line that holds it is read
    once, also after a character that lower-cases to two ("\u0130": the lines are then read one by one)."""
    said = "An NVIDIA GPU may be present on this machine, but a CUDA-enabled jaxlib is not installed. Falling back to cpu."
    text = before + said + "\nother\n" + said.upper() + " " + said.lower() + "\n" + said.lower()[:40] + "\n"
    found, paste, env = read(text, messages.read_jax_builds)
    lines = text.split("\n")
    assert found is True and [m.kind for m in env.messages] == ["cpu_only_build"]  # one message: the same said again
    assert set(kinds(paste)) == {i for i, line in enumerate(lines) if "JAXLIB IS NOT" in line.upper()}


def test_what_jaxs_own_words_state_as_findings():
    matrix = snapshot_matrix()

    def found(text):
        env = from_reports([("paste", text)])
        return {f.code: (f.title, f.fix) for f in diagnose(env, matrix) if f.severity == "error"}

    cpu = found("an nvidia gpu may be present on this machine, but a cuda-enabled jaxlib is not installed. falling "
                "back to cpu.\n")
    assert list(cpu) == ["CPU_ONLY_BUILD"] and "pip install -U 'jax[cuda12]'" in cpu["CPU_ONLY_BUILD"][1]
    plugin = found("JAX plugin jax_cuda12_plugin version 0.9.2 is installed, but it is not compatible with the "
                   "installed jaxlib version 0.9.0.1\n")
    title, fix = plugin["JAX_PLUGIN_MISMATCH"]
    assert "jax-cuda12-plugin 0.9.2 is not of the installed jaxlib's release (0.9.0.1)" in title
    assert "pip install 'jax[cuda12]==0.9.0.1'" in fix and "(older)" not in title
    pjrt = found("RuntimeError: Unable to initialize backend 'cuda': INVALID_ARGUMENT: Mismatched PJRT plugin PJRT "
                 "API version (0.54) and framework PJRT API version 0.51).\n")
    assert "PJRT API 0.54, jaxlib 0.51" in pjrt["JAX_PLUGIN_MISMATCH"][0]
    dlopen = found("Cannot dlopen some GPU libraries. Please make sure the missing libraries mentioned above are "
                   "installed properly\n")
    assert "TF_CPP_MAX_VLOG_LEVEL=3" in dlopen["LIBRARY_MISSING"][1]


def test_a_loaded_cudnn_is_among_the_libraries_in_every_wording():
    """TensorFlow 1.x (tf-faster-rcnn#436: no colon, compatibility versions) and 2.x/XLA (Kaggle docker-python#1435):
    the cuDNN it loaded is a library, the copy its loader picked, of that version."""
    for text, version in (
            ("E tensorflow/stream_executor/cuda/cuda_dnn.cc:378] Loaded runtime CuDNN library: 7201 (compatibility "
             "version 7200) but source was compiled with 7004 (compatibility version 7000).", "7.2.1"),
            ("Loaded runtime CuDNN library: 9.0.0 but source was compiled with: 9.3.0.  CuDNN library needs to have "
             "matching major version", "9.0.0")):
        env = from_reports([("paste", text)])
        assert [(lib.name, lib.version, lib.loaded_first) for lib in env.libraries] == [("cudnn", version, True)]


def test_an_nvidia_smi_row_whose_bus_id_the_paste_masked_is_still_the_gpu():
    """telegraf#6258 hid its bus id ("xxxxxxxxxxxxxxxx"): the row still names GPU 0 (no bus id), so the paste is
    no driver without a visible device."""
    from cudamatrix.detect.smi import _gpu_row

    g = _gpu_row("|   0  GeForce GTX 105...  Off  | xxxxxxxxxxxxxxxx Off |                  N/A |")
    assert (g.index, g.name, g.pci_bus_id) == (0, "GeForce GTX 105...", None)
    assert _gpu_row("|   0  GeForce GTX 1050  Off  | xyz Off |                  N/A |") is None  # no bus id, no mask


def test_condas_plan_names_the_packages_it_installs():
    """jax#14606: "The following NEW packages will be INSTALLED:" and its rows (a name cut with "~" is whole after
    "::"); an UPDATED row's new version is after its arrow."""
    text = ("The following NEW packages will be INSTALLED:\n\n"
            "  jax                conda-forge/noarch::jax-0.4.4-pyhd8ed1ab_0\n"
            "  jaxlib             conda-forge/linux-64::jaxlib-0.4.4-cpu_py311h7146453_1\n"
            "  cuda-cudart-dev_l~ conda-forge/noarch::cuda-cudart-dev_linux-64-12.5.82-h85509e4_0\n\n"
            "The following packages will be UPDATED:\n\n"
            "  numpy              1.26.4-py311h64a7726_0 --> 2.1.2-py311h71ddf71_0\n"
            "  scipy              conda-forge::scipy-1.13.0-py311h --> conda-forge::scipy-1.14.1-py311h\n\n"
            "Proceed ([y]/n)?\n")
    found, paste, env = read(text, installs.read)
    assert found is True
    assert env.packages == {"jax": "0.4.4", "jaxlib": "0.4.4", "cuda-cudart-dev-linux-64": "12.5.82", "numpy": "2.1.2",
                            "scipy": "1.14.1"}
    assert set(kinds(paste)) == {0, 2, 3, 4, 6, 8, 9}
    found, paste, env = read("see conda-forge/noarch::jax-0.4.4-pyhd8ed1ab_0\n", installs.read)
    assert found is False and env.packages == {}
