"""Installed packages read from a paste (pastes/packages.py): pip freeze, pip list, conda list and
collect_env's [pip3] / [conda] lines, each on a real paste from tests/data (or the smallest edit of one, said where
it is made), read in this process: the packages, the toolkit and torch build a list names, and the lines it claims."""
from __future__ import annotations

import pytest
from support.fakes import DATA, fixture

from cudamatrix.detect.text import Paste
from cudamatrix.models import Environment, Framework, Toolkit
from cudamatrix.pastes import packages


def paste_body(stem):
    """A paste of the corpus (tests/data/pastes) without its source line."""
    return (DATA / "pastes" / f"{stem}.txt").read_text(encoding="utf-8").partition("\n")[2]


def read(text, env=None):
    paste = Paste(text)
    env = env if env is not None else Environment()
    return packages.read(paste, env), paste, env


def claimed(paste):
    return {i: kind for i, kind in enumerate(paste.kind) if kind}


CONDA_LIST = "conda-list_header_cudatoolkit10.2.89_space-prompt_pytorch3d1538"
CONDA_FRAGMENT = "conda-list_fragment_pypi-nvidia-cu11_cudatoolkit-dev66"
PIP_LIST = "pip-list_cuda13-metapackage_cuda-bindings-pathfinder_cuda-python1038"
COLLECT_ENV = "collect_env-libs_conda-pytorch-1.10.2-cuda10.2-cudnn7.6.5_title-no-kernel-image_pytorch72957"
CONDA_PYTORCH = ("[conda] pytorch                   1.10.2          py3.7_cuda10.2_cudnn7.6.5_0    pytorch")


# --- conda list --------------------------------------------------------------------------------------------------

def test_a_conda_list_with_its_header_is_one_conda_list_to_its_last_row():
    """pytorch3d#1538: `conda list` with its "# packages in environment at" and "# Name" header lines. Its first
    rows are conda's own "_libgcc_mutex" and "_openmp_mutex" (no pip name starts with "_"): they are the list's,
    and the list goes on after them (it used to end there, and the rest was read as a header-less pip list)."""
    found, paste, env = read(paste_body(CONDA_LIST))
    assert found is True
    assert claimed(paste) == {2: "conda list", **{i: "conda list" for i in range(4, 23)}}
    assert env.toolkits == [Toolkit(source="report:conda list cudatoolkit", version="10.2.89")]
    assert env.packages["cudatoolkit"] == "10.2.89" and env.packages["fvcore"] == "0.1.5.post20210915"
    assert env.packages["lcms2"] == "2.12" and env.packages["ca-certificates"] == "2023.5.7"
    assert "_libgcc_mutex" not in env.packages and "-libgcc-mutex" not in env.packages
    assert len(env.packages) == 16 and env.frameworks == []


def test_a_conda_list_fragment_without_header_is_a_list_of_its_rows():
    """cudatoolkit-dev#66: rows only (no header), several in a row: a header-less list; its pypi rows are packages
    (the nvidia-* wheels), their build "pypi_0" no toolkit."""
    found, paste, env = read(paste_body(CONDA_FRAGMENT))
    assert found is True and env.toolkits == []
    assert env.packages["nvidia-cudnn-cu11"] == "8.7.0.84" and env.packages["nsight-compute"] == "2022.4.0.15"
    assert set(claimed(paste).values()) == {"pip list"}


def test_a_conda_cuda_toolkit_row_is_a_toolkit_unless_it_came_from_pypi():
    """pytorch3d#1538's cudatoolkit row renamed cuda-toolkit (the name of conda's CUDA 12 toolkit package; the
    smallest edit): a toolkit. The same row with cudatoolkit-dev#66's pypi build and channel: a wheel, no
    toolkit. And a pip list's cuda-toolkit (cuda-python#1038) is the CUDA 13 wheel metapackage, no toolkit."""
    text = paste_body(CONDA_LIST).replace("cudatoolkit               10.2.89", "cuda-toolkit              10.2.89")
    found, paste, env = read(text)
    assert env.toolkits == [Toolkit(source="report:conda list cuda-toolkit", version="10.2.89")]
    pypi = text.replace("hfd86e86_1  ", "pypi_0    pypi")
    assert read(pypi)[2].toolkits == []
    found, paste, env = read(paste_body(PIP_LIST))
    assert env.packages["cuda-toolkit"] == "13.2.1" and env.toolkits == []
    # collect_env's [conda] lines are conda's too
    tagged = paste_body(COLLECT_ENV).replace("[conda] cudatoolkit  ", "[conda] cuda-toolkit ")
    assert read(tagged)[2].toolkits == [Toolkit(source="report:collect_env cuda-toolkit", version="10.2.89")]


def test_conda_comment_lines_of_a_conda_list_are_its_own():
    """pytorch3d#1538's header with a second comment line under "# Name" (the smallest edit: conda prints "#"
    lines around its header): inside the conda table it is claimed; a "#" line ends no list."""
    lines = paste_body(CONDA_LIST).split("\n")
    text = "\n".join(lines[:5] + ["# channel notes here"] + lines[5:])
    found, paste, env = read(text)
    assert paste.kind[5] == "conda list" and paste.kind[23] == "conda list"
    # the same comment under a pip list's header is no part of it
    pip = paste_body(PIP_LIST).split("\n")
    found, paste, env = read("\n".join(pip[:4] + ["# channel notes here"] + pip[4:]))
    assert paste.kind[4] is None and paste.kind[5] == "pip list"


# --- conda's torch builds ------------------------------------------------------------------------------------------

def test_a_conda_pytorch_cuda_build_is_a_torch_of_that_cuda_and_cudnn():
    """pytorch#72957's collect_env: "[conda] pytorch 1.10.2 py3.7_cuda10.2_cudnn7.6.5_0 pytorch"."""
    found, paste, env = read(paste_body(COLLECT_ENV))
    assert env.frameworks == [Framework(name="torch", version="1.10.2", variant="cu102", cuda="10.2", cudnn="7.6.5",
                                        source="report:collect_env")]
    # the same paste twice: one torch (the first list wins)
    found, paste, env = read(paste_body(COLLECT_ENV) * 2)
    assert [f.name for f in env.frameworks] == ["torch"]


def test_a_conda_pytorch_build_without_its_cudnn_or_channel():
    """The same row without the cuDNN part of its build, and without its channel column (conda prints none for
    the defaults channel): the CUDA build is read the same, its cuDNN unknown."""
    found, paste, env = read(CONDA_PYTORCH.replace("_cudnn7.6.5", "") + "\n")
    assert [(f.variant, f.cuda, f.cudnn) for f in env.frameworks] == [("cu102", "10.2", None)]
    found, paste, env = read(CONDA_PYTORCH.rpartition(" ")[0] + "\n")
    assert [(f.variant, f.cuda, f.cudnn) for f in env.frameworks] == [("cu102", "10.2", "7.6.5")]


def test_a_conda_build_that_says_cuda_without_a_version_names_no_torch_build():
    """conda-forge's pytorch builds say "cuda112py39h..." (no dot): no CUDA version to read, no framework; nor
    from another package whose build says cuda (pytorch-mutex's "cuda")."""
    text = CONDA_PYTORCH.replace("py3.7_cuda10.2_cudnn7.6.5_0", "cuda112py37hb0b7ed7_200") + "\n"
    found, paste, env = read(text)
    assert env.frameworks == [] and env.packages == {"pytorch": "1.10.2"}
    faiss = "[conda] faiss-gpu 1.7.2 py3.7_h28a55e0_0_cuda10.2 pytorch\n"  # the pytorch channel's faiss build
    assert read(faiss)[2].frameworks == []


def test_a_conda_pytorch_cpu_build_is_a_cpu_torch_outside_collect_env():
    """The pytorch channel's CPU build ("py3.7_cpu_0", the smallest edit of pytorch#72957's CUDA build): in a
    conda list a CPU torch; in collect_env's [conda] lines nothing (collect_env's own fields say the build)."""
    row = CONDA_PYTORCH.replace("py3.7_cuda10.2_cudnn7.6.5_0", "py3.7_cpu_0").replace("[conda] ", "")
    lines = paste_body(CONDA_LIST).split("\n")
    found, paste, env = read("\n".join(lines[:-2] + [row] + lines[-2:]))
    assert env.frameworks == [Framework(name="torch", version="1.10.2", variant="cpu", source="report:conda list")]
    assert read("[conda] " + row + "\n")[2].frameworks == []
    # a torch already known (the CUDA row above it) stays the only one
    found, paste, env = read(CONDA_PYTORCH + "\n" + "[conda] " + row + "\n")
    assert [f.variant for f in env.frameworks] == ["cu102"]
    # a pytorch build that says neither: no framework
    plain = row.replace("py3.7_cpu_0", "py37_0")
    assert read("\n".join(lines[:-2] + [plain] + lines[-2:]))[2].frameworks == []


def test_a_header_less_row_that_says_version_is_a_row():
    """norse#375's fragment with its oauthlib row replaced by versioneer's (a package whose name holds "version":
    no header)."""
    text = fixture("pip/pip-list-fragment_cu11-wheels_norse375.txt").replace(
        "oauthlib                         3.2.2", "versioneer                       0.29")
    found, paste, env = read(text)
    assert env.packages["versioneer"] == "0.29" and set(claimed(paste).values()) == {"pip list"}


def test_a_cpu_torch_row_leaves_a_known_torch():
    """The pytorch channel's CPU row in pytorch3d#1538's conda list, with torch known from another reader."""
    row = CONDA_PYTORCH.replace("py3.7_cuda10.2_cudnn7.6.5_0", "py3.7_cpu_0").replace("[conda] ", "")
    lines = paste_body(CONDA_LIST).split("\n")
    env = Environment()
    env.frameworks.append(Framework(name="torch", version="1.10.2", variant="cu113", source="report:collect_env"))
    read("\n".join(lines[:-2] + [row] + lines[-2:]), env)
    assert [(f.name, f.variant) for f in env.frameworks] == [("torch", "cu113")]
    other = Environment()
    other.frameworks.append(Framework(name="tensorflow", version="2.3.0", source="report:pip"))
    read("\n".join(lines[:-2] + [row] + lines[-2:]), other)
    assert [(f.name, f.variant) for f in other.frameworks] == [("tensorflow", None), ("torch", "cpu")]


def test_a_torch_known_from_another_reader_keeps_its_build():
    env = Environment()
    env.frameworks.append(Framework(name="torch", version="1.10.2", variant="cu113", source="report:collect_env"))
    read(CONDA_PYTORCH + "\n", env)
    assert [f.variant for f in env.frameworks] == ["cu113"]
    other = Environment()
    other.frameworks.append(Framework(name="tensorflow", version="2.3.0", source="report:pip"))
    read(CONDA_PYTORCH + "\n", other)
    assert [f.name for f in other.frameworks] == ["tensorflow", "torch"]


# --- collect_env's [pip3] and [conda] lines ---------------------------------------------------------------------------

def test_collect_env_tagged_lines_are_collect_envs():
    found, paste, env = read(paste_body(COLLECT_ENV))
    assert claimed(paste) == {i: "collect_env" for i in range(3, 20)}
    assert env.packages["torch"] == "1.10.2" and env.packages["numpy"] == "1.21.5"  # the [pip3] line is first
    assert env.packages["pytorch-mutex"] == "1.0" and env.toolkits == [
        Toolkit(source="report:collect_env cudatoolkit", version="10.2.89")]


def test_collect_env_could_not_collect_and_an_empty_tag_are_claimed():
    """collect_env prints "[conda] Could not collect" where conda is missing (pytorch#42887's paste); a tag
    with nothing after it (pytorch#72957's pytorch-mutex line cut after its tag, the smallest edit) is collect_env's too;
    a tagged line that names no package is left unread."""
    text = paste_body("collect_env_no-torch_mac_py2.7_pip3_pytorch42887")
    lines = text.split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith("[conda] Could not collect"))
    found, paste, env = read(text)
    assert paste.kind[at] == "collect_env"
    lines = paste_body(COLLECT_ENV).split("\n")
    found, paste, env = read("\n".join(lines[:17] + ["[conda]"] + lines[18:]))
    assert paste.kind[17] == "collect_env" and "pytorch-mutex" not in env.packages and len(env.packages) == 13
    found, paste, env = read("\n".join(lines[:17] + ["[conda] pytorch-mutex (cuda)"] + lines[18:]))
    assert paste.kind[17] is None and "pytorch-mutex" not in env.packages and len(env.packages) == 13


def test_a_tagged_line_holds_a_pin_or_a_row():
    """"[pip3] torch==1.10.2" and "[conda] torch 1.6.0 <pip>" (pytorch#43058's fixture)."""
    text = fixture("collect_env/rhel7_1.6.0cu102_driver418.67_2xV100_pytorch43058.txt")
    found, paste, env = read(text)
    assert env.packages["torch"] == "1.6.0" and env.packages["numpy"] == "1.19.1"


# --- pip list and pip freeze ---------------------------------------------------------------------------------------

def test_a_pip_list_with_its_header_and_rule_reads_to_its_last_whole_row():
    """cuda-python#1038: the header, its rule, an editable row with a location, and a last row cut mid-name."""
    found, paste, env = read(paste_body(PIP_LIST))
    assert claimed(paste) == {i: "pip list" for i in range(2, 35)}
    assert env.packages["cuda-pathfinder"] == "1.5.5.dev28+g2ea4b26f7" and env.packages["nvidia-nvfatbin"] == "13.2.78"
    assert len(env.packages) == 31 and env.frameworks == [] and env.toolkits == []


def test_a_short_header_less_list_counts_when_it_names_what_matters():
    """norse#375's two nvidia-* rows and a third; the grep of nasbench301#9 (torch rows); two ordinary rows alone
    are no list, three are."""
    assert read(fixture("pip/pip-list-fragment_cu11-wheels_norse375.txt"))[2].packages["nvidia-cudnn-cu11"] == "8.5.0.96"
    lines = fixture("pip/pip-list-fragment_cu11-wheels_norse375.txt").split("\n")
    two = "\n".join(lines[:1] + lines[3:5] + lines[6:])  # oauth2client and oauthlib: nothing this project reads
    found, paste, env = read(two)
    assert found is False and env.packages == {} and claimed(paste) == {}
    three = "\n".join(lines[:1] + lines[3:])
    assert read(three)[2].packages == {"oauth2client": "4.1.3", "oauthlib": "3.2.2",
                                       "opencv-contrib-python": "4.8.0.76"}
    for name in ("nvidia-cudnn-cu11", "torch", "jax", "tensorflow", "cuda-python"):
        one = f"{name}                8.5.0.96\noauthlib                         3.2.2\n"
        assert read(one)[2].packages == {name: "8.5.0.96", "oauthlib": "3.2.2"}, name


def test_a_list_ends_where_another_line_comes_between():
    """norse#375's rows split by a line of prose (the smallest edit): two lists of one and two rows, neither a
    list on its own."""
    lines = fixture("pip/pip-list-fragment_cu11-wheels_norse375.txt").split("\n")
    text = "\n".join(lines[:3] + ["and then:"] + lines[3:5])  # the first two renamed: nothing this project reads
    found, paste, env = read(text.replace("nvidia-cuda-runtime-cu11", "runtime-cu11").replace("nvidia-cudnn-cu11", "dnn-cu11"))
    assert env.packages == {} and found is False


def test_pip_freeze_lines_are_pins():
    """tensorflow#33891's `pip freeze` of tensorflow-gpu 2.3.0."""
    text = paste_body("mixed_tf-gpu-2.3.0-freeze_nvcc-11.0_smi-450.51.06-gtx750_tensorflow33891")
    found, paste, env = read(text)
    assert env.packages["tensorflow-gpu"] == "2.3.0" and env.packages["tensorflow-estimator"] == "2.3.0"
    lines = text.split("\n")
    at = lines.index("tensorflow-gpu==2.3.0")
    assert paste.kind[at] == "pip freeze"


@pytest.mark.parametrize("line, pin", [
    ("tensorflow-gpu==2.3.0", ("tensorflow-gpu", "2.3.0", "")),
    ("tensorflow-gpu===2.3.0", ("tensorflow-gpu", "2.3.0", "")),  # PEP 440's arbitrary equality
    ("tensorflow-gpu====2.3.0", None),
    ("tensorflow-gpu==2.3.0;sys_platform=='linux'", ("tensorflow-gpu", "2.3.0", "")),  # a marker
    ("tensorflow-gpu==2.3.0#the GPU build", ("tensorflow-gpu", "2.3.0", "")),  # a comment
    ("tensorflow-gpu==", None),  # cut after its operator
    ("tensorflow-gpu==latest", None),
    ("tensorflow-gpu==2.3.0/2.4.0", None),
    ("tensorflow-gpu>=2.3.0", None),
    ("pip install tensorflow-gpu==2.3.0", None),
    ("tensorflow-gpu 2.3.0", None),
])
def test_one_pin(line, pin):
    """tensorflow#33891's pin as it is, and edited one way at a time."""
    assert packages._freeze(line) == pin


def test_pins_in_a_paste_that_are_no_pins_are_left():
    text = "tensorflow-gpu==2.3.0\ntensorflow-gpu==\ntensorflow==latest\nnumpy==1.18.5\n"
    found, paste, env = read(text)
    assert env.packages == {"tensorflow-gpu": "2.3.0", "numpy": "1.18.5"}
    assert claimed(paste) == {0: "pip freeze", 3: "pip freeze"}


@pytest.mark.parametrize("words, row", [
    (["nvidia-cudnn-cu11", "8.5.0.96"], ("nvidia-cudnn-cu11", "8.5.0.96", "")),
    (["cuda-pathfinder", "1.5.5.dev28+g2ea4b26f7", "/wrk/x"], ("cuda-pathfinder", "1.5.5.dev28+g2ea4b26f7", "/wrk/x")),
    (["numpy", "1.23.0", "pypi_0", "pypi"], ("numpy", "1.23.0", "pypi_0")),
    (["numpy", "1.23.0", "pypi_0", "pypi", "x"], None),  # five words
    (["numpy"], None),
    (["CUDA:", "11.8"], None),  # a field label
    (["CUDA", "11.8:"], None),
    (["numpy", "v1.23.0"], None),
    (["num/py", "1.23.0"], None),
])
def test_one_row(words, row):
    """Rows of cudatoolkit-dev#66 and cuda-python#1038 as they are, and edited one way at a time."""
    assert packages._row(words) == row


def test_a_row_line_of_400_characters_or_more_is_no_row():
    """cudatoolkit-dev#66's numpy row with its columns padded wider (conda pads them to its longest name)."""
    row = "numpy" + " " * 388 + "1.23.0"
    assert len(row) == 399 and read(f"{row}\nnvidia-cudnn-cu11 8.7.0.84\n")[2].packages["numpy"] == "1.23.0"
    row = "numpy" + " " * 389 + "1.23.0"
    assert len(row) == 400 and "numpy" not in read(f"{row}\nnvidia-cudnn-cu11 8.7.0.84\n")[2].packages


# --- Markdown ---------------------------------------------------------------------------------------------------

def test_a_markdown_list_item_of_a_pin_is_a_package():
    """berkeley-humanoid-lite#49: "- `torch==2.5.1`" in an issue template; the same item as "* " (Markdown's
    other bullet); an item of inline code that is a command is none."""
    text = paste_body("issue-template_markdown-backticks_5090-sm120_driver-590.48.01_torch2.5.1-cu121_berkeley-humanoid49")
    found, paste, env = read(text)
    assert env.packages == {"torch": "2.5.1"} and claimed(paste) == {10: "pip freeze"}
    found, paste, env = read(text.replace("- `torch==2.5.1`", "* `torch==2.5.1`"))
    assert env.packages == {"torch": "2.5.1"} and claimed(paste) == {10: "pip freeze"}
    for item in ("- `pip install torch==2.5.1`", "- `torch==2.5.1` and `numpy==2.0.0`", "- `torch==2.5.1",
                 "- torch==2.5.1`", "-  `torch==2.5.1`x"):
        found, paste, env = read(text.replace("- `torch==2.5.1`", item))
        assert env.packages == {} and claimed(paste) == {}, item


def test_a_markdown_heading_or_rule_is_no_list_item():
    text = "# `torch==2.5.1`\n---\n"
    found, paste, env = read(text)
    assert found is False and env.packages == {}


def test_a_markdown_item_joins_the_pins_around_it():
    """tensorflow#33891's pins with one written as a Markdown item between them: one list."""
    text = "tensorflow==2.3.0\n- `tensorflow-estimator==2.3.0`\ntensorflow-gpu==2.3.0\n"
    found, paste, env = read(text)
    assert env.packages == {"tensorflow": "2.3.0", "tensorflow-estimator": "2.3.0", "tensorflow-gpu": "2.3.0"}
    assert set(claimed(paste).values()) == {"pip freeze"}
