"""``check``'s container facts as a table, on the small matrix: the ``nvidia/cuda`` base image and the
``NVIDIA_REQUIRE_CUDA`` constraint for a requirements file and a target.

Expectations: the CUDA Compatibility guide (a build with SASS for every target GPU runs on any driver of its
CUDA major's minor-version floor, so it needs only ``cuda>=12.0``; one that reaches a GPU by PTX needs its own
CUDA); NVIDIA's published ``nvidia/cuda`` tags (``<version>-base-ubuntu<release>``, Ubuntu 24.04 from CUDA 12.5
on, 22.04 from 11.7 on); the python3 each Ubuntu release ships (20.04: 3.8, 22.04: 3.10, 24.04: 3.12).
"""
from __future__ import annotations

import pytest

from cudamatrix.solve.checks import check_requirements
from smallmatrix import build, release, replace, target, variant

PT = "https://download.pytorch.org/whl"
SASS = variant("cu121", "12.1", archs=["7.5", "8.0", "9.0"], cudnn="9.1.0", index_url=f"{PT}/cu121",
               local_version="+cu121")
PTX = variant("cu124", "12.4", archs=["7.5", "8.0"], ptx=["8.0"], cudnn="9.1.0", index_url=f"{PT}/cu124",
              local_version="+cu124")
NEW = variant("cu128", "12.8", archs=["7.5", "8.0", "9.0", "12.0"], cudnn="9.17.0", index_url=f"{PT}/cu128",
              local_version="+cu128")
MATRIX = build(replace(release("2.5.1", SASS, PTX), companions={}),
               replace(release("2.7.0", NEW), companions={}))

CONTAINER = [
    # file, driver, GPU, Python -> base image, NVIDIA_REQUIRE_CUDA, how Python gets in
    (f"--index-url {PT}/cu121\ntorch==2.5.1\n", "550.54.15", "9.0", "3.10",
     "nvidia/cuda:12.1.0-base-ubuntu22.04", "cuda>=12.0",
     "the image has no Python: apt-get install python3 python3-pip gives Python 3.10, the targets' Python"),
    (f"--index-url {PT}/cu124\ntorch==2.5.1\n", "550.54.15", "9.0", "3.10",
     "nvidia/cuda:12.4.0-base-ubuntu22.04", "cuda>=12.4",
     "the image has no Python: apt-get install python3 python3-pip gives Python 3.10, the targets' Python"),
    (f"--index-url {PT}/cu124\ntorch==2.5.1\n", "550.54.15", "8.0", "3.11",
     "nvidia/cuda:12.4.0-base-ubuntu22.04", "cuda>=12.0",
     "the image has no Python, and Ubuntu 22.04's python3 is 3.10, not the targets' 3.11: install Python 3.11 "
     "into it (for example uv python install 3.11)"),
    (f"--index-url {PT}/cu128\ntorch==2.7.0\n", "570.86.10", "12.0", "3.12",
     "nvidia/cuda:12.8.0-base-ubuntu24.04", "cuda>=12.0",
     "the image has no Python: apt-get install python3 python3-pip gives Python 3.12, the targets' Python"),
    (f"--index-url {PT}/cu128\ntorch==2.7.0\n", "570.86.10", "12.0", None,
     "nvidia/cuda:12.8.0-base-ubuntu24.04", "cuda>=12.0",
     "the image has no Python: apt-get install python3 python3-pip gives Python 3.12"),
]


@pytest.mark.parametrize("text, driver, cc, python, image, require, python_note", CONTAINER)
def test_base_image_and_nvidia_require_cuda(text, driver, cc, python, image, require, python_note):
    result = check_requirements(MATRIX, [target(driver, cc, python=python)], None, text, "r.txt")
    assert result["fits"] is True, result["problems"]
    assert (result["base_image"], result["nvidia_require_cuda"], result["python_in_image"]) == \
        (image, require, python_note)


def test_nvidia_require_cuda_never_above_what_a_driver_reports():
    # the H100 machine reaches the cu124 build by PTX (full driver), so the set needs CUDA 12.4; the A100 machine's
    # driver 535 reports CUDA 12.2 (Release Notes' branch table) and runs the build by SASS under minor-version
    # compatibility. A constraint above 12.2 would stop the container from starting there: capped at 12.2
    text = f"--index-url {PT}/cu124\ntorch==2.5.1\n"
    targets = [target("560.35.03", "9.0", python="3.10"), target("535.104.05", "8.0", python="3.10")]
    result = check_requirements(MATRIX, targets, None, text, "r.txt")
    assert result["fits"] is True and result["nvidia_require_cuda"] == "cuda>=12.2"
    alone = check_requirements(MATRIX, targets[:1], None, text, "r.txt")
    assert alone["nvidia_require_cuda"] == "cuda>=12.4"


def test_a_build_that_does_not_fit_names_the_index_line_that_does():
    # the cu124 build reaches compute capability 9.0 only by PTX, which minor-version compatibility (driver 535)
    # does not cover; the cu121 build has SASS for 9.0
    text = f"--index-url {PT}/cu124\ntorch==2.5.1\n"
    result = check_requirements(MATRIX, [target("535.104.05", "9.0", python="3.10")], None, text, "r.txt")
    assert result["fits"] is False
    assert result["ways_out"][0] == (f"add the line --index-url {PT}/cu121 to the file: pip then installs torch "
                                     f"2.5.1+cu121, which fits")


# pip's reading of a requirements file (pip documentation, "Requirements File Format" and "--find-links"):
# an index line decides which build pip installs; a PyTorch index (or its mirror, named with --mirror) serves one
# variant, with or without a trailing slash; a --find-links page of the PyTorch index lists every build; the
# default index holds no local versions (+cu124) and, for torch 2.5.1 on Linux x86_64, serves the CUDA 12.4
# build; with --no-index only the --find-links pages count. Local versions sort above the plain one (PEP 440).
MIRROR = "https://mirror.example/pt/"
NO_DEFAULT = replace(MATRIX, torch=replace(MATRIX.torch, releases=[
    replace(r, variants=[replace(v, pypi_default=(str(r.version) == "2.5.1" and v.name == "cu124"))
                         for v in r.variants]) for r in MATRIX.torch.releases]))
FILES = [
    (f"--index-url {MIRROR}cu121/\ntorch==2.5.1\n", MIRROR, "linux_x86_64", ["torch==2.5.1+cu121"], []),
    (f"--index-url {MIRROR}cu121\ntorch==2.5.1\n", MIRROR.rstrip("/"), "linux_x86_64", ["torch==2.5.1+cu121"], []),
    (f"--index-url {PT}/cu121/\ntorch==2.5.1\n", None, "linux_x86_64", ["torch==2.5.1+cu121"], []),
    (f"--index-url {MIRROR}cu121/\ntorch==2.5.1\n", None, "linux_x86_64", [],
     [f"torch==2.5.1: which torch build {MIRROR}cu121/ serves is not known (a mirror of the PyTorch index? pass "
      f"--mirror URL)"]),
    ("--extra-index-url https://other.example/simple\ntorch==2.5.1\n", MIRROR, "linux_x86_64", [],
     ["torch==2.5.1: which torch build https://other.example/simple serves is not known (a mirror of the PyTorch "
      "index? pass --mirror URL)"]),
    (f"-f {PT}/torch_stable.html\ntorch==2.5.1+cu121\n", None, "linux_x86_64", ["torch==2.5.1+cu121"], []),
    (f"--no-index\n-f {MIRROR}torch_stable.html\ntorch==2.5.1+cu121\n", MIRROR, "linux_x86_64",
     ["torch==2.5.1+cu121"], []),
    ("-f /wheels\ntorch==2.5.1\n", None, "linux_x86_64", [],
     ["torch==2.5.1: what /wheels (a --find-links page) offers is not known"]),
    ("torch==2.5.1\n", None, "linux_x86_64", ["torch==2.5.1+cu124"], []),
    ("torch==2.5.1+cu124\n", None, "linux_x86_64", [],
     ["torch==2.5.1+cu124: no torch build in the matrix matches it on the default index"]),
    ("torch==2.5.1\n", None, "win_amd64", [],
     ["torch==2.5.1: which build of torch 2.5.1 the default index serves for win_amd64 is not in the matrix"]),
    ("torch==2.7.0\n", None, "linux_x86_64", [],
     ["torch==2.7.0: which build of torch 2.7.0 the default index serves is not in the matrix"]),
    (f"--extra-index-url {PT}/cu128\ntorch>=2.5,<2.8\n", None, "linux_x86_64", ["torch==2.7.0+cu128"], []),
    (f"--extra-index-url {PT}/cu128\ntorch>=2.5,<2.7\n", None, "linux_x86_64", ["torch==2.5.1+cu124"], []),
]


@pytest.mark.parametrize("text, mirror, platform, checked, problems", FILES)
def test_which_build_pip_installs_from_the_file(text, mirror, platform, checked, problems):
    t = target("570.86.10", "8.0", python="3.11", platform=platform)
    result = check_requirements(NO_DEFAULT, [t], None, text, "r.txt", mirror=mirror)
    assert result["checked"] == checked
    if problems:
        assert result["problems"] == problems and result["fits"] is False
    else:
        assert result["problems"] == [] and result["fits"] is True, result["problems"]


def test_a_release_without_a_wheel_for_the_targets_python_is_skipped():
    t = target("570.86.10", "8.0", python="3.13")
    result = check_requirements(NO_DEFAULT, [t], None, f"--index-url {PT}/cu128\ntorch>=2.5\n", "r.txt")
    assert result["problems"] == [f"torch>=2.5: no torch build in the matrix matches it on {PT}/cu128"]


def test_check_names_the_file_in_errors_and_checks_the_installed_set():
    from cudamatrix.errors import UsageError
    from cudamatrix.models import Environment, Framework

    t = target("550.54.15", "8.0", python="3.11")
    with pytest.raises(UsageError) as err:
        check_requirements(MATRIX, [t], None, "torch>>2\n", "Dockerfile.req")
    assert str(err.value).startswith("Dockerfile.req:1: cannot parse requirement")
    with pytest.raises(UsageError) as err:
        check_requirements(MATRIX, [t], None, "torch>>2\n", None)
    assert str(err.value).startswith("requirements:1: cannot parse requirement")
    assert check_requirements(MATRIX, [t], None, None, None) == {
        "fits": False, "checked": [], "problems": ["no installed environment to check"], "ways_out": []}
    # the installed set: the detected build of torch (its variant) is the one checked
    env = Environment(packages={"torch": "2.5.1", "numpy": "1.26.4"},
                      frameworks=[Framework(name="torch", version="2.5.1", variant="cu121")])
    result = check_requirements(MATRIX, [t], env, None, None)
    assert result["checked"] == ["torch==2.5.1+cu121"] and result["fits"] is True
    plain = Environment(packages={"torch": "2.5.1"}, frameworks=[Framework(name="torch", version="2.5.1")])
    assert check_requirements(MATRIX, [t], plain, None, None)["checked"] == ["torch==2.5.1"]
    nothing = check_requirements(MATRIX, [t], Environment(packages={"numpy": "1.26.4"}), None, None)
    assert nothing == {"checked": [], "targets": [t.describe()], "problems": [], "ways_out": [], "fits": True,
                       "note": "no framework requirement to check"}


# PyTorch's install lines pair torch 2.5.1 with torchvision 0.20.1 and torchaudio 2.5.1 from the same index, so a
# companion's exact pin gets torch's local tag (0.20.1 -> 0.20.1+cu121 from whl/cu121); ranges, wildcards and
# pins that name a local version stay as written; other frameworks pass as written.
CU118 = variant("cu118", "11.8", archs=["7.5", "8.0", "9.0"], cudnn="9.1.0", index_url=f"{PT}/cu118",
                local_version="+cu118")
MATRIX2 = build(replace(release("2.5.1", CU118, SASS, PTX), companions={"torchvision": "0.20.1",
                                                                           "torchaudio": "2.5.1"}))
LINES = [
    (f"--index-url {PT}/cu121\ntorch[opt-einsum]==2.5.1\n", ["torch[opt-einsum]==2.5.1+cu121"]),
    (f"--index-url {PT}/cu121\ntorch==2.5.1\ntorchaudio==2.5.1\n", ["torch==2.5.1+cu121", "torchaudio==2.5.1+cu121"]),
    (f"--index-url {PT}/cu121\ntorch==2.5.1\ntorchvision>=0.20,!=0.20.0\n",
     ["torch==2.5.1+cu121", "torchvision>=0.20,!=0.20.0"]),
    (f"--index-url {PT}/cu121\ntorch==2.5.1\ntorchvision==0.20.*\n", ["torch==2.5.1+cu121", "torchvision==0.20.*"]),
    (f"--index-url {PT}/cu121\ntorch==2.5.1\ntorchvision==0.20.1+cu121\n",
     ["torch==2.5.1+cu121", "torchvision==0.20.1+cu121"]),
]


@pytest.mark.parametrize("text, checked", LINES)
def test_companion_lines_take_torchs_build(text, checked):
    result = check_requirements(MATRIX2, [target("550.54.15", "8.0", python="3.11")], None, text, "r.txt")
    assert result["checked"] == checked and result["fits"] is True, result["problems"]


def test_companion_without_torch_is_a_problem():
    result = check_requirements(MATRIX2, [target("550.54.15", "8.0")], None, "torchaudio==2.5.1\n", "r.txt")
    assert result["problems"] == ["torchaudio==2.5.1: the file pins no torch, so which torch build pip pairs it "
                                  "with is not known (add the torch line the image installs)"]


def test_the_index_line_offered_is_the_newest_cuda_that_fits():
    # cu124 reaches compute capability 9.0 only by PTX, not under driver 535's minor-version compatibility;
    # cu121 and cu118 both fit (full support): the newer CUDA is offered
    result = check_requirements(MATRIX2, [target("535.104.05", "9.0")], None, f"--index-url {PT}/cu124\ntorch==2.5.1\n",
                                "r.txt")
    assert result["fits"] is False
    assert [w for w in result["ways_out"] if w.startswith("add the line")] == [
        f"add the line --index-url {PT}/cu121 to the file: pip then installs torch 2.5.1+cu121, which fits"]
