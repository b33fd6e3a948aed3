"""``check``'s container facts as a table, on the small matrix: the ``nvidia/cuda`` base image and the
``NVIDIA_REQUIRE_CUDA`` constraint for a requirements file and a target.

Expectations: the CUDA Compatibility guide (a build with SASS for every target GPU runs on any driver of its
CUDA major's minor-version floor, so it needs only ``cuda>=12.0``; one that reaches a GPU by PTX needs its own
CUDA); NVIDIA's published ``nvidia/cuda`` tags (``<version>-base-ubuntu<release>``, Ubuntu 24.04 from CUDA 12.5
on, 22.04 from 11.7 on); the python3 each Ubuntu release ships (20.04: 3.8, 22.04: 3.10, 24.04: 3.12).
"""
from __future__ import annotations

import pytest
from packaging.version import Version
from support.fakes import apply_advice
from support.smallmatrix import NOTES, build, release, replace, target, variant
from support.snapshot import named_snapshot

from cudamatrix.diagnose.findings import diagnose
from cudamatrix.matrix.data import CudaRelease
from cudamatrix.models import Driver, Environment, FrameworkChoice, GpuInfo, Pin, PythonInfo, Solution
from cudamatrix.solve.checks import base_image, check_requirements, nvidia_require_cuda
from cudamatrix.solve.target import from_flags, target_record
from cudamatrix.verify.run import gpu_present

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
    assert result["ways_out"][0] == (f"add the line --extra-index-url {PT}/cu121 to the file and pin "
                                     f"torch==2.5.1+cu121: pip then installs that build, which fits with the "
                                     f"file's other frameworks; other packages keep their index")
    assert result["advice"] == [{"add": [f"--extra-index-url {PT}/cu121"], "pin": {"torch": "torch==2.5.1+cu121"},
                                 "message": result["ways_out"][0]}]
    assert apply_and_check(MATRIX, [target("535.104.05", "9.0", python="3.10")], text, result)["fits"] is True


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
    assert nothing == {"checked": [], "targets": [target_record(MATRIX, t)], "problems": [], "ways_out": [],
                       "fits": True,
                       "note": "no framework requirement to check", "skipped": [], "unchecked": []}


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
        f"add the line --extra-index-url {PT}/cu121 to the file and pin torch==2.5.1+cu121: pip then installs that "
        f"build, which fits with the file's other frameworks; other packages keep their index"]
    apply_and_check(MATRIX2, [target("535.104.05", "9.0")], f"--index-url {PT}/cu124\ntorch==2.5.1\n", result)


# --- the container facts and the GPU probe ------------------------------------------------------------------
# The container facts and the GPU probe, as tables.
#
# Expectations: NVIDIA's published ``nvidia/cuda`` image tags (``12.5.0-base-ubuntu24.04``, ``12.4.1-base-ubuntu22.04``,
# ``11.7.1-base-ubuntu22.04``, ``11.6.2-base-ubuntu20.04``: Ubuntu 24.04 from CUDA 12.5, 22.04 from 11.7, 20.04
# before); the ``base`` flavour holds only what the driver needs, ``runtime`` adds the CUDA libraries, which a
# framework that brings no nvidia-* wheels (TensorFlow before 2.14) loads from the system. PEP 508 markers: a
# requirement behind ``extra == "X"`` applies when X was asked for.


def _rel(version: str) -> CudaRelease:
    return CudaRelease(version=Version(version), source=NOTES)


M = build()
M = replace(M, cuda=replace(M.cuda, releases=M.cuda.releases + [_rel("11.6.2"), _rel("11.7.1"), _rel("12.4.1"),
                                                                 _rel("12.5")]))

IMAGES = [
    ("12.5", [Pin(name="nvidia-cudnn-cu12", version="9.1.0.70")], "nvidia/cuda:12.5.0-base-ubuntu24.04"),
    ("12.4", [Pin(name="nvidia-cudnn-cu12", version="9.1.0.70")], "nvidia/cuda:12.4.1-base-ubuntu22.04"),
    ("11.8", [Pin(name="nvidia-cudnn-cu11", version="9.1.0.70")], "nvidia/cuda:11.8.0-base-ubuntu22.04"),
    ("11.7", [Pin(name="nvidia-cudnn-cu11", version="8.5.0.96")], "nvidia/cuda:11.7.1-base-ubuntu22.04"),
    ("11.6", [Pin(name="nvidia-cudnn-cu11", version="8.5.0.96")], "nvidia/cuda:11.6.2-base-ubuntu20.04"),
    ("11.8", [Pin(name="tensorflow", version="2.13.1")], "nvidia/cuda:11.8.0-runtime-ubuntu22.04"),
    ("12.9", [Pin(name="nvidia-cudnn-cu12", version="9.1.0.70")], None),   # no 12.9 row in this matrix
]


@pytest.mark.parametrize("cuda, packages, image", IMAGES)
def test_base_image_tag(cuda, packages, image):
    fw = [FrameworkChoice(name="tensorflow" if packages[0].name == "tensorflow" else "jax", version="1",
                          variant="v", cuda=cuda)]
    sol = Solution(request=["x"], targets=["t"], frameworks=fw, packages=packages, cuda=cuda)
    assert base_image(sol, M, [target("570.86.10", "8.0")])[0] == image


def test_a_torch_set_needs_only_the_base_flavour():
    sol = Solution(request=["torch"], targets=["t"], frameworks=[FrameworkChoice(name="torch", version="2.5.1",
                                                                                  variant="cu124", cuda="12.4")],
                   packages=[Pin(name="torch", version="2.5.1")], cuda="12.4")
    assert base_image(sol, M, [])[0] == "nvidia/cuda:12.4.1-base-ubuntu22.04"
    assert base_image(Solution(request=["torch"], targets=["t"]), M, []) == (None, None)


def test_python_notes_name_both_pythons():
    sol = Solution(request=["x"], targets=["t"], packages=[Pin(name="nvidia-cudnn-cu12", version="1")], cuda="12.4")
    _, note = base_image(sol, M, [target("570.86.10", "8.0", python="3.11"), target("570.86.10", "8.0",
                                                                                     python="3.12")])
    assert note == ("the image has no Python, and Ubuntu 22.04's python3 is 3.10, not the targets' 3.11, 3.12: "
                    "install Python 3.11, 3.12 into it (for example uv python install 3.11, 3.12)")


# NVIDIA_REQUIRE_CUDA for a chosen set (jax and tensorflow rows count as torch's do); a major without a
# minor-version compatibility row needs the build's own CUDA
JAX = variant("cuda12", "12.4", archs=["8.0", "9.0"], pip_extra="cuda12")
TF = variant("and-cuda", "12.1", archs=["8.0"], ptx=["8.0"], pip_extra="and-cuda")
REQUIRE = [
    ("jax", JAX, "8.0", True, "cuda>=12.0"),
    ("jax", JAX, "8.0", False, "cuda>=12.4"),
    ("tensorflow", TF, "9.0", True, "cuda>=12.1"),
    ("tensorflow", TF, "8.0", True, "cuda>=12.0"),
]


@pytest.mark.parametrize("family, v, cc, minor_compat, require", REQUIRE)
def test_nvidia_require_cuda_for_each_framework(family, v, cc, minor_compat, require):
    m = replace(build(), **{family: replace(build().torch, releases=[release("1.0", v, name=family)])})
    if not minor_compat:
        m = replace(m, cuda=replace(m.cuda, minor_compat=[r for r in m.cuda.minor_compat if r.cuda_major != 12]))
    sol = Solution(request=[family], targets=["t"], frameworks=[FrameworkChoice(name=family, version="1.0",
                                                                                variant=v.name, cuda=str(v.cuda))])
    assert nvidia_require_cuda(sol, m, [target("570.86.10", cc)]) == require
    other = Solution(request=["x"], targets=["t"], frameworks=[FrameworkChoice(name="mxnet", version="1.0",
                                                                               variant="v", cuda="12.4")])
    assert nvidia_require_cuda(other, m, [target("570.86.10", cc)]) is None


# the GPU probe, from a detected environment: a driver that answers with a GPU or a version is a GPU machine
PRESENT = [
    ("ok", [GpuInfo(name="H100")], None, True),
    ("ok", [], "550.54.15", True),
    ("ok", [], None, False),
    ("absent", [], None, False),
    ("error", [GpuInfo(name="H100")], "550.54.15", False),
    ("no_device", [], "550.54.15", False),
]


@pytest.mark.parametrize("status, gpus, version, present", PRESENT)
def test_gpu_present_from_the_environment(status, gpus, version, present):
    assert gpu_present(Environment(driver=Driver(status=status, version=version), gpus=gpus)) is present


# declared requirements behind markers (PEP 508): the interpreter's version and platform decide, and a
# requirement behind an extra applies when its distribution is installed (that extra was asked for)
MARKERS = [
    ('nvidia-cudnn-cu12==9.1.0.70; python_version < "3.12"', "3.11.9", "linux_x86_64", True),
    ('nvidia-cudnn-cu12==9.1.0.70; python_version < "3.12"', "3.12.1", "linux_x86_64", False),
    ('nvidia-cudnn-cu12==9.1.0.70; python_version >= "3.12"', None, "linux_x86_64", False),   # 3.11 assumed
    ('nvidia-cudnn-cu12==9.1.0.70; platform_system == "Linux"', "3.11.9", "win_amd64", False),
    ('nvidia-cudnn-cu12==9.1.0.70; platform_system == "Linux"', "3.11.9", None, True),         # Linux assumed
    ('nvidia-cudnn-cu12==9.1.0.70; extra == "with-cuda"', "3.11.9", "linux_x86_64", True),
    ('nvidia-cudnn-cu12==9.1.0.70; extra == "cuda"', "3.11.9", "linux_x86_64", True),
    ('nvidia-cudnn-cu12==9.1.0.70; extra == "cuda12"', "3.11.9", "linux_x86_64", True),
    ('nvidia-cudnn-cu12==9.1.0.70; extra == "cuda13"', "3.11.9", "linux_x86_64", True),
    ('nvidia-cudnn-cu12==9.1.0.70; extra == "docs"', "3.11.9", "linux_x86_64", False),
]


@pytest.mark.parametrize("requirement, python, platform, applies", MARKERS)
def test_declared_requirement_markers(requirement, python, platform, applies):
    e = Environment(origin="file", python=PythonInfo(version=python, platform=platform),
                    packages={"jax-cuda12-plugin": "0.4.30", "nvidia-cudnn-cu12": "9.0.0"},
                    requirements={"jax-cuda12-plugin": [requirement]})
    drift = [f for f in diagnose(e, build()) if f.code == "NVIDIA_WHEEL_DRIFT"]
    assert bool(drift) is applies
    if drift:
        assert drift[0].evidence == [f"jax-cuda12-plugin 0.4.30 requires {requirement}"]


def test_one_family_never_conflicts_with_itself():
    # jax and its CUDA plugin, torch and torchvision: one family each; jax against torch: two
    e = Environment(origin="file", python=PythonInfo(version="3.11.9", platform="linux_x86_64"),
                    packages={"nvidia-cudnn-cu12": "9.1.0.70"},
                    requirements={"jax": ["nvidia-cudnn-cu12>=9.8"], "jax-cuda12-plugin": ["nvidia-cudnn-cu12==9.1.0.70"],
                                  "torch": ["nvidia-cudnn-cu12==9.1.0.70"]})
    conflicts = [f.title for f in diagnose(e, build()) if f.code == "FRAMEWORK_CONFLICT"]
    assert conflicts == ["jax and torch need different nvidia-* wheels"]
    assert [f.evidence for f in diagnose(e, build()) if f.code == "NVIDIA_WHEEL_DRIFT"] == [
        ["jax requires nvidia-cudnn-cu12>=9.8"]]


def test_more_of_how_pip_reads_the_file():
    t = target("570.86.10", "8.0", python="3.11")
    # --no-index and no --find-links: pip finds nothing at all
    none = check_requirements(NO_DEFAULT, [t], None, "--no-index\ntorch==2.5.1\n", "r.txt")
    assert none["checked"] == [] and none["problems"] == [
        "torch==2.5.1: no torch build in the matrix matches it on the default index"]
    # two PyTorch indexes that do not serve the pinned release: both named
    text = f"--index-url {PT}/cu118\n--extra-index-url {PT}/cu117\ntorch==2.7.0\n"
    both = check_requirements(NO_DEFAULT, [t], None, text, "r.txt")
    assert both["problems"] == [f"torch==2.7.0: no torch build in the matrix matches it on {PT}/cu118, {PT}/cu117"]
    # several platforms without a known default-index build: all named, sorted
    plats = [target("570.86.10", "8.0", python="3.11", platform=p) for p in ("win_amd64", "linux_aarch64")]
    many = check_requirements(NO_DEFAULT, plats, None, "torch==2.5.1\n", "r.txt")
    assert many["problems"] == ["torch==2.5.1: which build of torch 2.5.1 the default index serves for "
                                "linux_aarch64, win_amd64 is not in the matrix"]


def test_every_targets_python_needs_a_wheel():
    three = [target("570.86.10", "8.0", python=p) for p in ("3.10", "3.11", "3.12")]
    ok = check_requirements(NO_DEFAULT, three, None, f"--index-url {PT}/cu128\ntorch>=2.5\n", "r.txt")
    assert ok["checked"] == ["torch==2.7.0+cu128"]
    # the newest release has no wheel for 3.10: pip takes the next one that has
    older = replace(NO_DEFAULT, torch=replace(NO_DEFAULT.torch, releases=[
        replace(r, python=["3.11", "3.12"]) if str(r.version) == "2.7.0" else r for r in NO_DEFAULT.torch.releases]))
    text = f"--index-url {PT}/cu124\n--extra-index-url {PT}/cu128\ntorch>=2.5\n"
    res = check_requirements(older, [target("570.86.10", "8.0", python="3.10")], None, text, "r.txt")
    assert res["checked"] == ["torch==2.5.1+cu124"]


def test_a_build_without_a_local_version_is_named_by_its_variant():
    bare = replace(MATRIX, torch=replace(MATRIX.torch, releases=[
        replace(r, variants=[replace(v, local_version=None) for v in r.variants]) for r in MATRIX.torch.releases]))
    res = check_requirements(bare, [target("550.54.15", "8.0")], None, f"-f {PT}/torch_stable.html\ntorch==2.5.1+cu121\n",
                             "r.txt")
    assert res["checked"] == ["torch==2.5.1+cu121"]


def test_the_fleet_problem_names_the_machines_it_blocks():
    import dataclasses

    old = dataclasses.replace(target("470.82.01", "8.0"), name="old-box")
    res = check_requirements(MATRIX2, [target("550.54.15", "8.0"), old], None,
                             f"--index-url {PT}/cu121\ntorch==2.5.1\n", "r.txt")
    assert res["fits"] is False and res["problems"][0].endswith("(it fits every other machine) (blocks: old-box)")
    good = check_requirements(MATRIX2, [target("550.54.15", "8.0")], None, f"--index-url {PT}/cu121\ntorch==2.5.1\n",
                              "r.txt")
    assert [(f["name"], f["variant"]) for f in good["solution"]["frameworks"]] == [("torch", "cu121")]


def test_the_installed_companions_take_the_detected_build():
    from cudamatrix.models import Framework

    t = target("550.54.15", "8.0", python="3.11")
    env = Environment(packages={"torch": "2.5.1", "torchvision": "0.20.1"},
                      frameworks=[Framework(name="jax", version="0.4.30", variant="cuda12"),
                                  Framework(name="torch", version="2.5.1", variant="cu121")])
    assert check_requirements(MATRIX2, [t], env, None, None)["checked"] == ["torch==2.5.1+cu121",
                                                                            "torchvision==0.20.1+cu121"]
    undetected = Environment(packages={"torch": "2.5.1"},
                             frameworks=[Framework(name="jax", version="0.4.30", variant="cuda12"),
                                         Framework(name="torch", version="2.5.1")])
    assert check_requirements(MATRIX2, [t], undetected, None, None)["checked"] == ["torch==2.5.1"]


def apply_and_check(matrix, targets, text: str, result: dict) -> dict:
    """Every piece of advice, applied, makes check pass (the advice converges); the last answer."""
    assert result["advice"], result
    for advice in result["advice"]:
        again = check_requirements(matrix, targets, None, apply_advice(text, advice), "r.txt")
        assert again["fits"] is True, (advice, again["problems"])
    return again


# Issue #23, "advice converges": the change check suggests, applied to the file, makes check pass; it adds an
# --extra-index-url line (the file's other packages keep their index) and pins the build's local version.
# PyTorch's RELEASE.md support matrix: torch 2.12 ships CUDA 12.6 and 13.0 wheels (13.0 on the default index);
# driver 535 runs CUDA 12.2 (CUDA release notes, table 3), and 12.x builds under minor-version compatibility.
# PyTorch "Get Started": the Windows pip line names a CUDA index (the default index's Windows torch is the CPU
# build). TensorFlow 2.15's and-cuda wheels pin CUDA 12 / cuDNN 8.9 libraries (its METADATA).
CONVERGE = [
    ("torch==2.12.0\ntorchvision==0.27.0\n", dict(driver="535.104.05", gpus=["Tesla T4"], python="3.12")),
    ("torch==2.14.1\n", dict(driver="580.65.06", gpus=["RTX 4090"], python="3.12", platform="win_amd64")),
]


@pytest.mark.parametrize("text, flags", CONVERGE)
def test_advice_applied_makes_check_pass(text, flags):
    from support.snapshot import named_snapshot

    from cudamatrix.solve.target import from_flags

    matrix = named_snapshot("issue23")
    t = from_flags(matrix, driver=flags["driver"], gpus=flags["gpus"], python=flags["python"],
                   platform=flags.get("platform"), cuda_toolkit=None)
    result = check_requirements(matrix, [t], None, text, "r.txt")
    assert result["fits"] is False
    assert all(a["add"][0].startswith("--extra-index-url ") for a in result["advice"])
    apply_and_check(matrix, [t], text, result)


def test_tensorflow_keeps_its_index_and_the_advice_never_loops():
    """tensorflow==2.15.0 + torch==2.14.1 on H100/R580 said "add --index-url .../cu132", then ".../cu130": an
    --index-url would hide TensorFlow from pip, and neither build shares one set of nvidia-* wheels with TF 2.15.
    Now: no index line that does not make the whole file fit is offered."""
    from support.snapshot import named_snapshot

    from cudamatrix.solve.target import from_flags

    matrix = named_snapshot("issue23")
    t = from_flags(matrix, driver="580.65.06", gpus=["H100"], python="3.11", platform=None, cuda_toolkit=None)
    text = "tensorflow==2.15.0\ntorch==2.14.1\n"
    result = check_requirements(matrix, [t], None, text, "r.txt")
    assert result["fits"] is False
    assert not any("--index-url" in w and "--extra-index-url" not in w for w in result["ways_out"])
    for advice in result["advice"]:
        assert check_requirements(matrix, [t], None, apply_advice(text, advice), "r.txt")["fits"] is True


# --- index_advice: another build of the pinned torch release, as a change to the file (the snapshot's torch 2.5.1
# rows: cu118, cu121 and cu124 on the PyTorch index folders, each wheel with its local version) -------------------
def _t4_on_535():
    from cudamatrix.solve.target import Target, TargetGpu

    return Target(name="t", driver="535.104.05", gpus=(TargetGpu("7.5", "Tesla T4"),), python="3.11",
                  platform="linux_x86_64")


def _advice(index: str, pins: dict[str, str]) -> list[dict]:
    line = f"--extra-index-url {PT}/{index}"
    return [{"add": [line], "pin": pins,
             "message": f"add the line {line} to the file and pin {' '.join(pins.values())}: pip then installs that "
                        f"build, which fits with the file's other frameworks; other packages keep their index"}]


@pytest.mark.parametrize("texts, expected", [
    # the pinned build's own folder is never the advice: the next CUDA down that solves is
    (["torch==2.5.1+cu124"], _advice("cu121", {"torch": "torch==2.5.1+cu121"})),
    # a line of another package before torch is passed over, and the companions move with torch
    (["numpy<2", "torch==2.5.1+cu124", "torchvision==0.20.1+cu124"],
     _advice("cu121", {"torch": "torch==2.5.1+cu121", "torchvision": "torchvision==0.20.1+cu121"})),
    # an exact pin without a local version gets the build's (the newest CUDA that solves)
    (["torch==2.5.1", "torchvision==0.20.1"],
     _advice("cu124", {"torch": "torch==2.5.1+cu124", "torchvision": "torchvision==0.20.1+cu124"})),
    (["torch==9.9.9+cu124"], []),  # a release the matrix does not hold: no advice
    (["torch>=2.5"], []),  # no exact pin: no release to move
])
def test_index_advice_moves_the_pinned_release_to_another_build(texts, expected):
    from support.snapshot import snapshot_matrix

    from cudamatrix.solve.checks import index_advice

    assert index_advice(snapshot_matrix(), texts, [_t4_on_535()]) == expected


def test_index_advice_keeps_the_other_specifiers_of_the_pin():
    from support.snapshot import snapshot_matrix

    from cudamatrix.solve.checks import index_advice

    [advice] = index_advice(snapshot_matrix(), ["torch>=2.5,==2.5.1"], [_t4_on_535()])
    pin = advice["pin"]["torch"]
    assert pin.startswith("torch") and set(pin[len("torch"):].split(",")) == {">=2.5", "==2.5.1+cu124"}


def test_index_advice_solves_with_the_memo_it_is_given():
    """check_requirements hands its solve's memo to the advice: each build tried is screened on it (the advice's
    requests are in it afterwards), and the advice is the one a fresh memo gives."""
    from support.snapshot import snapshot_matrix

    from cudamatrix.solve.checks import index_advice
    from cudamatrix.solve.driverclass import Memo

    memo = Memo()
    given = index_advice(snapshot_matrix(), ["torch==2.5.1+cu124"], [_t4_on_535()], memo)
    assert given == index_advice(snapshot_matrix(), ["torch==2.5.1+cu124"], [_t4_on_535()])
    assert {asked for (_, asked) in memo.requested} >= {("torch==2.5.1+cu121",)} and memo.verdicts


def test_check_requirements_shares_one_memo_between_its_solve_and_the_advice(monkeypatch):
    from cudamatrix.solve import checks

    memos: list = []
    real_solve, real_advice = checks.solve, checks.index_advice

    def solve(*args, **kw):
        memos.append(kw.get("memo"))
        return real_solve(*args, **kw)

    def advice(matrix, texts, targets, memo=None):
        memos.append(memo)
        return real_advice(matrix, texts, targets, memo)

    from support.snapshot import named_snapshot

    from cudamatrix.solve.target import from_flags

    matrix = named_snapshot("issue23")  # torch 2.12.0's default build needs a newer driver than a T4 on R535 has
    t4 = from_flags(matrix, driver="535.104.05", gpus=["Tesla T4"], python="3.12", platform=None, cuda_toolkit=None)
    monkeypatch.setattr(checks, "solve", solve)
    monkeypatch.setattr(checks, "index_advice", advice)
    result = checks.check_requirements(matrix, [t4], None, "torch==2.12.0\ntorchvision==0.27.0\n", "r.txt")
    assert result["fits"] is False and result["advice"]
    assert len(memos) == 2 and memos[0] is not None and memos[0] is memos[1]


def _issue23_target(platform: str, python: str | None = "3.12", gpus: tuple[str, ...] = ("RTX 4090",)):
    """A target of the issue23 snapshot: an RTX 4090 on driver 580.65.06, or a machine without a GPU."""
    from support.snapshot import named_snapshot

    from cudamatrix.solve.target import Target, from_flags

    return from_flags(named_snapshot("issue23"), driver="580.65.06" if gpus else None, gpus=list(gpus), python=python,
                      platform=platform, cuda_toolkit=None, base=Target(name="t"))


# --- the CPU build pip takes by default (PyTorch "Get Started": the Windows pip lines for CUDA name a PyTorch index;
# the default index's Windows wheel is the CPU build, the issue23 snapshot's per_platform win_amd64 row) ----------
@pytest.mark.parametrize("text, gpus, fits, problems", [
    ("torch==2.14.1\n", ("RTX 4090",), False,
     ["torch==2.14.1: pip installs torch==2.14.1+cpu from the file's indexes on win_amd64 (the CPU build), and the "
      "target has a GPU"]),
    # asked for by name, from the PyTorch CPU index: the user's choice, not a problem
    (f"--extra-index-url {PT}/cpu\ntorch==2.14.1+cpu\n", ("RTX 4090",), True, []),
    ("torch==2.14.1\n", (), True, []),  # no GPU: the CPU build is the right one
])
def test_the_default_cpu_build_on_a_gpu_target_is_a_problem(text, gpus, fits, problems):
    from support.snapshot import named_snapshot

    result = check_requirements(named_snapshot("issue23"), [_issue23_target("win_amd64", gpus=gpus)], None, text,
                                "r.txt")
    assert (result["fits"], result["checked"], result["problems"]) == (fits, ["torch==2.14.1+cpu"], problems)


def test_a_file_whose_default_build_differs_per_platform_is_checked_per_platform():
    """The issue23 snapshot's torch 2.14.1: the default index serves the CPU build on Windows and a CUDA build on
    Linux (per_platform rows), so one plain pin means two builds for a fleet of both."""
    from support.snapshot import named_snapshot

    result = check_requirements(named_snapshot("issue23"), [_issue23_target("linux_x86_64"),
                                                            _issue23_target("win_amd64")], None, "torch==2.14.1\n", "r.txt")
    assert (result["fits"], result["checked"]) == (False, [])
    assert result["problems"] == ["torch==2.14.1: the default index serves another build of torch 2.14.1 on each of "
                                  "the targets' platforms (cpu, cu130): check each platform on its own"]


def test_a_line_whose_marker_is_false_on_every_target_is_skipped_and_says_the_targets_facts():
    from support.snapshot import named_snapshot

    text = 'torch==2.14.1\nappnope==0.1.4; sys_platform == "darwin"\n'
    targets = [_issue23_target("linux_x86_64", "3.11"), _issue23_target("linux_x86_64", None)]
    result = check_requirements(named_snapshot("issue23"), targets, None, text, "r.txt")
    assert result["skipped"] == ['appnope==0.1.4; sys_platform == "darwin": its marker is false on every target '
                                 '(Python 3.11, linux_x86_64; Python any, linux_x86_64): pip skips the line, so check '
                                 'does too']


def test_the_files_names_are_asked_about_and_an_unknown_one_is_an_input_error_naming_the_file():
    """check's names callback (the CLI asks the file's indexes, tests/solve/test_known.py): it gets the parsed file
    and the requirement names; a name no index lists ends the check with the file's name in front, and one no
    index could answer ends it too (a gate never passes a name it could not check)."""
    from cudamatrix.errors import UsageError
    from cudamatrix.solve.known import NameCheck
    from cudamatrix.solve.requirements import RequirementsFile

    asked = []

    def names(unknown=(), unchecked=()):
        def ask(parsed, requested):
            asked.append((type(parsed), requested))
            return NameCheck(unknown=list(unknown), unchecked=list(unchecked), why_unchecked="the index did not answer")
        return ask

    t = target("570.86.10", "8.0", python="3.11")
    text = "torch==2.5.1\nmytool==1.0\n"
    result = check_requirements(NO_DEFAULT, [t], None, text, "r.txt", names=names())
    assert asked == [(RequirementsFile, ["torch", "mytool"])] and result["fits"] and result["unchecked"] == []
    with pytest.raises(UsageError) as err:
        check_requirements(NO_DEFAULT, [t], None, text, "r.txt", names=names(unchecked=["mytool"]))
    assert err.value.message.startswith("r.txt: cannot check 'mytool': not a distribution the matrix knows, and "
                                        "the index did not answer")
    for file_name, shown in (("r.txt", "r.txt"), (None, "requirements")):
        with pytest.raises(UsageError) as err:
            check_requirements(NO_DEFAULT, [t], None, text, file_name, names=names(unknown=[("mytool", [])]))
        assert err.value.message.startswith(f"{shown}: no distribution named 'mytool': ")


@pytest.mark.parametrize("text, python, applies", [
    ('numpy<2; python_version < "3.12"', "3.11", True),
    ('numpy<2; python_version < "3.12"', "3.12", False),
    ('numpy<2; python_version < "3.12"', None, None),  # the target states no Python: not known, never a guess
    ('numpy<2; python_full_version >= "3.8.1"', None, None),
    ('numpy<2; sys_platform == "linux"', None, True),  # a marker without Python is known without it
    ('numpy<2; sys_platform == "win32"', None, False),
    ("numpy<2", None, True),
])
def test_marker_applies_on_a_target(text, python, applies):
    from packaging.requirements import Requirement

    from cudamatrix.solve.checks import marker_applies

    assert marker_applies(Requirement(text), target(None, python=python)) is applies


def test_a_jetson_driver_runs_its_jetpack_lines_cuda_not_a_desktop_branchs():
    """JetPack 6.1/6.2's driver 540.4.0 runs CUDA 12.6 (cuda.json ``jetpack``, NVIDIA's JetPack release notes); the
    desktop branch table has no R540 and would read it as R535's 12.2: a CUDA 12.4 build on that board needs
    cuda>=12.4 (never capped to 12.2, which would start it on a board that cannot run it), and the target's record
    says 12.6 with its JetPack line."""
    m = named_snapshot("issue23")
    board = from_flags(m, driver="540.4.0", gpus=[], python="3.10", platform="linux_aarch64", cuda_toolkit=None)
    sol = Solution(request=["torch"], targets=["target"],
                   frameworks=[FrameworkChoice(name="torch", version="2.5.1", variant="cu124", cuda="12.4")])
    assert nvidia_require_cuda(sol, m, [board]) == "cuda>=12.4"
    record = target_record(m, board)
    assert record["driver"] == {"version": "540.4.0", "cuda_version": "12.6", "usable": True,
                                "jetpack": {"releases": ["6.1", "6.2"], "l4t": "36.4"}}
    desktop = from_flags(m, driver="535.104.05", gpus=[], python="3.10", platform="linux_x86_64", cuda_toolkit=None)
    assert nvidia_require_cuda(sol, m, [desktop]) == "cuda>=12.2"  # R535 runs 12.2 at most: never above it
    assert target_record(m, desktop)["driver"]["cuda_version"] == "12.2"
