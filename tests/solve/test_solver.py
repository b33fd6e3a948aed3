"""Tests of cudamatrix/solve/solver.py.

The solver is a pure function: the same inputs give the same Solution, and nothing given is changed.

Runs on the frozen matrix snapshot kept with the tests (tests/data/matrix_snapshot/).

Solver tables on the small matrix: which build is chosen, and why a pair of builds cannot share a set.

Facts: the CUDA Toolkit Release Notes' driver table (12.1 GA needs 530.30.02, 12.4 GA 550.54.14, any 12.x runs
on 525.60.13 under minor-version compatibility); the nvidia-* wheels of CUDA 11 and CUDA 12 of one library
(nvidia-cudnn-cu11 / -cu12) install the same files (nvidia/cudnn/lib/libcudnn.so.*), so two CUDA majors of one
library cannot be installed together.
"""
from __future__ import annotations

import copy

import pytest
from support.smallmatrix import build, release, replace, target, variant
from support.snapshot import snapshot_matrix

from cudamatrix.errors import NoSolution
from cudamatrix.models import Cause, Environment, Framework, Rejection, WayOut
from cudamatrix.solve.indexes import PYTORCH_INDEX_PREFIX
from cudamatrix.solve.search import Preference
from cudamatrix.solve.solver import parse_request, solve
from cudamatrix.solve.target import from_flags

# --- solver --------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def matrix():
    return snapshot_matrix()


def _newer_than_matrix_env(matrix) -> Environment:
    newest = max(r.version for r in matrix.frameworks("torch"))
    version = f"{newest.major}.{newest.minor + 50}.0+cu130"  # a release the snapshot cannot know
    return Environment(origin="file", packages={"torch": version, "torchvision": "0.99.0"},
                       frameworks=[Framework(name="torch", version=version, variant="cu130", cuda="13.0")])


def test_solve_twice_with_the_same_request_gives_the_same_answer(matrix):
    # the kept-installed path used to delete torch from the Request: a second call chose no torch
    env = _newer_than_matrix_env(matrix)
    target = from_flags(matrix, driver="580.65.06", gpus=[], python="3.11", platform=None, cuda_toolkit=None)
    request = parse_request(["torch", "jax"], env)
    before = copy.deepcopy(request)
    first = solve([target], request, matrix, installed=env)
    second = solve([target], request, matrix, installed=env)
    assert first.to_dict() == second.to_dict()
    assert request.texts == before.texts and set(request.families) == {"torch", "jax"}
    assert {k: [str(r) for r in v] for k, v in request.families.items()} == \
        {k: [str(r) for r in v] for k, v in before.families.items()}
    # torch is kept as installed both times, and says so
    assert [f.name for f in first.frameworks] == ["jax", "torch"]
    assert any("kept as it is" in line for line in first.trace)


def test_trace_and_rejections_are_part_of_the_result(matrix):
    target = from_flags(matrix, driver="470.82.01", gpus=["Tesla T4"], python="3.10", platform=None, cuda_toolkit=None)
    solution = solve([target], parse_request(["torch"]), matrix)
    assert solution.trace[0].startswith("target: NVIDIA T4 (sm 7.5); driver 470.82.01")  # said once, not twice
    assert solution.rejected and all(isinstance(r, Rejection) for r in solution.rejected)
    assert {"driver_floor"} <= {rule for r in solution.rejected for rule in r.rules}


@pytest.mark.slow
def test_no_solution_carries_typed_causes_and_ways_out(matrix):
    target = from_flags(matrix, driver="470.82.01", gpus=["Tesla T4"], python="3.10", platform=None, cuda_toolkit=None)
    request = parse_request(["torch>=2.8"])
    with pytest.raises(NoSolution) as info:
        solve([target], request, matrix)
    exc = info.value
    assert exc.causes and all(isinstance(c, Cause) for c in exc.causes)
    assert "driver_floor" in {c.rule for c in exc.causes}
    assert exc.ways_out and all(isinstance(w, WayOut) for w in exc.ways_out)
    assert "upgrade_driver" in {w.kind for w in exc.ways_out}
    # the envelope's JSON is the same objects, serialised
    assert exc.detail["causes"] == [c.to_dict() for c in exc.causes]
    # and a second call raises the same
    with pytest.raises(NoSolution) as again:
        solve([target], request, matrix)
    assert again.value.detail == exc.detail


def test_preference_is_named():
    assert Preference._fields == ("keeps_installed", "build_as_wanted", "facts_known", "version", "cuda_major",
                                  "full_driver_support", "cuda", "pypi_default")


@pytest.mark.parametrize("typed, cc", [("4090", "8.9"), ("rtx4090", "8.9"), ("RTX 4090", "8.9"), ("a100", "8.0"),
                                       ("8.6", "8.6"), ("sm_86", "8.6"), ("86", "8.6"), ("Tesla T4", "7.5")])
def test_gpu_as_people_type_it(matrix, typed, cc):
    """gpus.json names and aliases (NVIDIA's "CUDA GPUs" list: GeForce RTX 4090 is 8.9, A100 8.0, T4 7.5): a
    model number is a model, never a compute capability (4090 is not "409.0")."""
    t = from_flags(matrix, driver="580.65.06", gpus=[typed], python=None, platform=None, cuda_toolkit=None)
    assert t.gpus[0].compute_capability == cc


def test_an_ambiguous_gpu_name_lists_the_candidates(matrix):
    """"4000" is Quadro RTX 4000 (7.5) and RTX 4000 Ada (8.9) (NVIDIA's "CUDA GPUs" list): exit 2, listing them."""
    from cudamatrix.errors import UsageError

    with pytest.raises(UsageError) as err:
        from_flags(matrix, driver=None, gpus=["4000"], python=None, platform=None, cuda_toolkit=None)
    assert "different compute capabilities" in err.value.message
    assert "'Quadro RTX 4000' (sm 7.5)" in err.value.hint and "(sm 8.9)" in err.value.hint


@pytest.mark.parametrize("typed", ["R550", "r550", "550"])
def test_a_driver_branch_is_its_first_release(matrix, typed):
    """NVIDIA numbers the releases of branch R550 550.xx.yy; CUDA 12.4 needs 550.54.14 (CUDA release notes,
    table 3): a branch is checked as its first release, below 550.54.14, so no build needing full 12.4 support
    is assumed, and the target says how the value was read."""
    from cudamatrix.matrix.query import driver_version

    t = from_flags(matrix, driver=typed, gpus=["H100"], python=None, platform=None, cuda_toolkit=None)
    assert t.driver == "550" and driver_version(t.driver) < driver_version("550.54.14")
    assert "driver branch R550" in t.describe()


def test_a_cuda_version_given_as_driver_is_refused(matrix):
    """nvidia-smi prints "CUDA Version: 12.4" beside "Driver Version": 12.4 is not a driver; the first driver
    for CUDA 12.4 is 550.54.14 (CUDA release notes, table 3), named in the hint."""
    from cudamatrix.errors import UsageError

    with pytest.raises(UsageError) as err:
        from_flags(matrix, driver="12.4", gpus=["H100"], python=None, platform=None, cuda_toolkit=None)
    assert "is a CUDA version" in err.value.message and "550.54.14" in err.value.hint


KOHYA = "tests/data/pastes/torch-error_cudnn-incompatibility_8.7.0-vs-8.2.4_kohya-log-torch2.0.1cu118_kohya1096.txt"


def test_a_report_of_cuda_in_use_without_gpu_or_driver_is_not_a_cpu_machine(matrix):
    """kohya_ss issue 1096 (the paste's first line): torch 2.0.1+cu118 fails on a cuDNN mismatch; the report names
    no GPU and no driver. The GPU is unknown, not absent: solve answers with a GPU build, says the driver it needs,
    and never a CPU build."""
    from cudamatrix.pastes.reports import from_report_files
    from cudamatrix.solve.target import from_environment

    target = from_environment(from_report_files([KOHYA]), matrix, name="the pasted machine")
    assert target.gpu_unknown and target.wants_gpu and "GPU not stated" in target.describe()
    solution = solve([target], parse_request(["torch"]), matrix)
    assert all(fw.cuda for fw in solution.frameworks)
    assert any(n.startswith("the driver is not stated: torch") for n in solution.notes)
    assert any(line.startswith("the driver is not stated") for line in solution.trace)


def test_a_substitution_is_a_trace_line_and_a_note(matrix):
    """tensorflow-gpu is TensorFlow's old name (TensorFlow's pip guide); the answer installs tensorflow, and says so."""
    t = from_flags(matrix, driver="535.104.05", gpus=["T4"], python="3.10", platform=None, cuda_toolkit=None)
    solution = solve([t], parse_request(["tensorflow-gpu==2.10.0"]), matrix)
    said = [n for n in solution.notes if n.startswith("substituted: tensorflow-gpu==2.10.0")]
    assert said and said[0] in solution.trace


def test_a_build_passed_over_for_inferred_facts_is_said():
    """README "known / inferred": a build that rests on inferred facts ranks below one that rests on read ones.
    When that passes over a newer build that fits (issue #23: torch 2.11/2.12 cu128/cu129 on R570, whose facts
    were inferred), the answer says so, with the facts and their basis, in a note and the trace."""
    from support.smallmatrix import build, release, target, variant

    known = variant("cu124", "12.4", archs=["8.0", "9.0"], cudnn="9.1.0", index_url="https://download.pytorch.org/whl/cu124",
                    local_version="+cu124")
    guessed = variant("cu128", "12.8", archs=["8.0", "9.0", "12.0"], cudnn="9.1.0",
                      index_url="https://download.pytorch.org/whl/cu128", local_version="+cu128",
                      inferred={"archs": "copied from the cu126 build of the same release"})
    m = build(release("2.5.1", known), release("2.7.0", guessed))
    solution = solve([target("570.86.10", "9.0")], parse_request(["torch"]), m)
    assert [(f.version, f.variant) for f in solution.frameworks] == [("2.5.1", "cu124")]
    said = [n for n in solution.notes if n.startswith("passed over torch 2.7.0 cu128")]
    assert said and "copied from the cu126 build" in said[0] and said[0] in solution.trace


def test_a_yanked_release_only_when_pinned_exactly():
    """PEP 592: pip installs a yanked release only when a requirement pins it exactly. jax 0.4.32 was yanked (the
    JAX changelog, data/jax.json): jax<0.4.33 gets 0.4.31, jax==0.4.32 gets 0.4.32."""
    from support.snapshot import named_snapshot

    m = named_snapshot("issue23")
    t = from_flags(m, driver="550.54.14", gpus=["T4"], python="3.11", platform=None, cuda_toolkit=None)
    assert solve([t], parse_request(["jax<0.4.33"]), m).frameworks[0].version == "0.4.31"
    assert solve([t], parse_request(["jax==0.4.32"]), m).frameworks[0].version == "0.4.32"


PASSTHROUGH = ["einops[foo]>=0.7; python_version >= '3.8'", "Pillow==10.0.0"]


def _t4(matrix):
    return from_flags(matrix, driver="550.54.15", gpus=["Tesla T4"], python="3.11", platform=None, cuda_toolkit=None)


def test_solve_pip_line_keeps_passthrough_packages(matrix):
    """The request's other packages end the pip line with their name, extras, pins and markers, after the
    framework pins; the framework's index becomes an extra index so the default index can still serve them."""
    from packaging.requirements import Requirement

    sol = solve([_t4(matrix)], parse_request(["torch", *PASSTHROUGH], None), matrix)
    assert sol.pip_args[-2:] == [str(Requirement(r)) for r in PASSTHROUGH]
    tail = [Requirement(a) for a in sol.pip_args[-2:]]
    assert [(r.name, r.extras, str(r.specifier), str(r.marker) if r.marker else None) for r in tail] == \
        [("einops", {"foo"}, ">=0.7", 'python_version >= "3.8"'), ("Pillow", set(), "==10.0.0", None)]
    torch = next(p for p in sol.packages if p.name == "torch")
    assert torch.requirement() in sol.pip_args and sol.pip_args.index(torch.requirement()) < len(sol.pip_args) - 2
    assert "--index-url" not in sol.pip_args and sol.index_url is None
    assert sol.pip_args[:2] == ["--extra-index-url", sol.extra_index_urls[0]]
    assert any("einops" in line and "passed to the installer as given" in line for line in sol.trace)
    alone = solve([_t4(matrix)], parse_request(["torch"], None), matrix)
    assert alone.pip_args[0] == "--index-url" and not any("einops" in a for a in alone.pip_args)


def test_solve_pip_line_keeps_passthrough_when_the_framework_is_already_right(matrix):
    """Nothing of the framework to install: the pip line still installs the other packages."""
    sol = solve([_t4(matrix)], parse_request(["torch", *PASSTHROUGH], None), matrix)
    torch = next(p for p in sol.packages if p.name == "torch")
    have = Environment(packages={p.name: p.version for p in sol.packages})
    again = solve([_t4(matrix)], parse_request(["torch", *PASSTHROUGH], None), matrix, installed=have)
    assert again.to_install == [] and torch.requirement() not in again.pip_args
    assert again.pip_args[-2:] == sol.pip_args[-2:] and len(again.pip_args) == 2


# --- table solver --------------------------------------------------------------------------------------------------

ARCHS = ["5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0"]


LINUX = 'platform_system == "Linux" and platform_machine == "x86_64"'


def torch(*variants):
    return replace(release("2.5.1", *variants), companions={"torchvision": "0.20.1"})


CU118 = variant("cu118", "11.8", archs=ARCHS, cudnn="9.1.0.70", index_url="https://download.pytorch.org/whl/cu118",
                local_version="+cu118", nvidia_pins=[f"nvidia-cudnn-cu11==9.1.0.70; {LINUX}"])


CU121 = variant("cu121", "12.1", archs=ARCHS, cudnn="9.1.0.70", index_url="https://download.pytorch.org/whl/cu121",
                local_version="+cu121", nvidia_pins=[f"nvidia-cudnn-cu12==9.1.0.70; {LINUX}"])


CU124 = variant("cu124", "12.4", archs=ARCHS, cudnn="9.1.0.70", index_url="https://download.pytorch.org/whl/cu124",
                local_version="+cu124", nvidia_pins=[f"nvidia-cudnn-cu12==9.1.0.70; {LINUX}"])


CPU = variant("cpu", None, index_url="https://download.pytorch.org/whl/cpu", local_version="+cpu")


# preferences: the newest CUDA major whose build runs as under full support (the driver supports it fully, or the
# build carries SASS for every GPU of the target: minor-version compatibility leaves out PTX JIT only); then a build
# the driver supports fully over one that needs minor-version compatibility; then the newest CUDA. A CPU build is
# never the answer on a GPU machine unless asked for. ARCHS hold sm_75: every build has SASS for the 7.5 GPU.
PREFER = [
    ("560.35.03", "cu124"),   # 12.4 fully supported: newest CUDA
    ("550.54.14", "cu124"),
    ("550.54.13", "cu121"),   # 12.4 only under minor-version compatibility, 12.1 fully
    ("535.104.05", "cu121"),
    ("530.30.02", "cu121"),
    ("530.30.01", "cu124"),   # no 12.x fully, both run (SASS for the GPU): CUDA 12 over 11.8, then the newest
    ("525.60.13", "cu124"),   # the CUDA 12 minor-version-compatibility floor
    ("525.60.12", "cu118"),   # below it no 12.x build runs (11.8 GA needs 520.61.05)
]
# a target whose GPU is not known: no build is known to skip PTX JIT, so full support ranks first
PREFER_GPU_UNKNOWN = [
    ("560.35.03", "cu124"),
    ("550.54.13", "cu121"),
    ("530.30.02", "cu121"),
    ("530.30.01", "cu118"),   # neither 12.x fully
    ("525.60.13", "cu118"),
]


@pytest.mark.parametrize("driver, chosen", PREFER)
def test_full_support_or_sass_for_the_gpu_then_newest_cuda(driver, chosen):
    m = build(torch(CPU, CU118, CU121, CU124))
    sol = solve([target(driver, "7.5", python="3.11")], parse_request(["torch"]), m)
    assert [(f.name, f.variant) for f in sol.frameworks] == [("torch", chosen)]


@pytest.mark.parametrize("driver, chosen", PREFER_GPU_UNKNOWN)
def test_full_support_then_newest_cuda_where_the_gpu_is_unknown(driver, chosen):
    m = build(torch(CPU, CU118, CU121, CU124))
    sol = solve([target(driver, python="3.11", gpu_unknown=True)], parse_request(["torch"]), m)
    assert [(f.name, f.variant) for f in sol.frameworks] == [("torch", chosen)]


def test_at_the_cuda12_minor_compat_floor_the_newest_12x_build_with_sass_for_the_gpu(matrix):
    """The matrix's own rows: torch 2.4.1 cu118, cu121 and cu124 all carry SASS sm_86 (data/torch.json, from
    pytorch/builder release/2.4 manywheel/build_cuda.sh's TORCH_CUDA_ARCH_LIST); CUDA 12.4 needs 550.54.14 for full
    support and 12.1 530.30.02 (data/cuda.json, CUDA Toolkit Release Notes), any 12.x runs from 525.60.13 under
    minor-version compatibility (data/cuda.json minor_compat, the CUDA Compatibility guide), 11.8 fully from
    520.61.05. On 525.60.13 with an RTX 3090 (8.6) no PTX JIT is needed: the newest CUDA that runs, cu124, not
    cu118. Within CUDA 12, a build the driver supports fully still ranks first (530.30.02: cu121)."""
    def chosen(*gpus, driver="525.60.13"):
        t = from_flags(matrix, driver=driver, gpus=list(gpus), python="3.11", platform="linux_x86_64",
                       cuda_toolkit=None)
        return [(f.version, f.variant) for f in solve([t], parse_request(["torch==2.4.1"]), matrix).frameworks]

    assert chosen("8.6") == [("2.4.1", "cu124")]
    assert chosen("8.6", "7.5") == [("2.4.1", "cu124")]
    assert chosen("8.6", driver="530.30.02") == [("2.4.1", "cu121")]  # within CUDA 12, full support first
    assert chosen("8.6", driver="520.61.05") == [("2.4.1", "cu118")]  # below the 12.x floor


def test_cpu_build_only_when_asked_for():
    m = build(torch(CPU, CU121))
    gpu = solve([target("535.104.05", "7.5")], parse_request(["torch"]), m)
    assert gpu.frameworks[0].variant == "cu121"
    asked = solve([target("535.104.05", "7.5")], parse_request(["torch==2.5.1+cpu"]), m)
    assert asked.frameworks[0].variant == "cpu"
    assert [p.requirement() for p in asked.packages] == ["torch==2.5.1+cpu"]


def test_two_cuda_majors_of_nvidia_wheels_do_not_share_a_set():
    # torch builds for CUDA 11.8 (nvidia-cudnn-cu11) and a JAX build for CUDA 12 (nvidia-cublas-cu12): no wheel
    # name in common, but each brings its CUDA major's libraries, which install the same files
    jax = replace(release("0.4.30", variant("cuda12", "12.1", archs=ARCHS, cudnn="9.1.0",
                                            nvidia_pins=[f"nvidia-cublas-cu12==12.1.3.1; {LINUX}"],
                                            pip_extra="cuda12"), name="jax"), companions={"jaxlib": "0.4.30"})
    m = replace(build(torch(CU118)), jax=replace(build().jax, releases=[jax]))
    t = target("550.54.15", "7.5", python="3.11")
    with pytest.raises(NoSolution) as err:
        solve([t], parse_request(["torch", "jax"]), m)
    text = " ".join(c["message"] for c in err.value.detail["causes"])
    assert "two CUDA majors of one library install the same files" in text
    # with a CUDA 12 torch build available, the pair resolves to one CUDA major
    m12 = replace(m, torch=replace(m.torch, releases=[torch(CU118, CU121)]))
    sol = solve([t], parse_request(["torch", "jax"]), m12)
    assert {(f.name, f.variant) for f in sol.frameworks} == {("torch", "cu121"), ("jax", "cuda12")}


def test_env_changes_of_a_shadowed_cudnn(tmp_path):
    """LIBRARY_SHADOWED's fix: the folder that shadows the wheel's cuDNN leaves LD_LIBRARY_PATH. The change comes
    only from the loader model's prediction (detect/libpaths.library_path_fix over Environment.library_loads)."""
    from cudamatrix.models import Context, Driver, Environment, Library, LibraryLoad, PythonInfo

    wheel = "/v/nvidia/cudnn/lib/libcudnn.so.9"
    env = Environment(
        origin="file", driver=Driver(version="550.54.15", status="ok"),
        python=PythonInfo(version="3.11.9", platform="linux_x86_64"),
        context=Context(env={"LD_LIBRARY_PATH": "/opt/cudnn8/lib:/usr/local/nvidia/lib64"}),
        libraries=[Library(name="cudnn", soname="libcudnn.so.9", path="/opt/cudnn8/lib/libcudnn.so.9",
                           version="9.0.0", origin="LD_LIBRARY_PATH", loaded_first=True),
                   Library(name="cudnn", soname="libcudnn.so.9", path=wheel,
                           version="9.1.0", origin="wheel:nvidia-cudnn-cu12")])
    m = build(torch(CU121))
    t = target("550.54.15", "7.5", python="3.11")
    # a pasted environment without the model's prediction: whether torch's DT_RPATH wins is unknown, no change
    assert solve([t], parse_request(["torch"]), m, installed=env).env == {}
    env.library_loads = [LibraryLoad("torch", "libcudnn.so.9", "/opt/cudnn8/lib/libcudnn.so.9", "LD_LIBRARY_PATH",
                                     expected=wheel, expected_rule="DT_RUNPATH of libtorch_cuda.so")]
    sol = solve([t], parse_request(["torch"]), m, installed=env)
    assert sol.env == {"LD_LIBRARY_PATH": "/usr/local/nvidia/lib64"}
    assert sol.unchanged is False


# PEP 508 requirements grouped by framework family; what the matrix does not know is passed to the installer
REQUESTS = [
    (["torch"], {"torch": ["torch"]}, []),
    (["torch>=2.3", "torchvision"], {"torch": ["torch>=2.3", "torchvision"]}, []),
    (["tensorflow[and-cuda]==2.15.*"], {"tensorflow": ["tensorflow[and-cuda]==2.15.*"]}, []),
    (["jax[cuda12]", "jaxlib"], {"jax": ["jax[cuda12]", "jaxlib"]}, []),
    (["jax-cuda12-plugin"], {"jax": ["jax-cuda12-plugin"]}, []),
    (["numpy==1.26.4", "Torch"], {"torch": ["Torch"]}, ["numpy==1.26.4"]),
]


@pytest.mark.parametrize("texts, families, passthrough", REQUESTS)
def test_request_families(texts, families, passthrough):
    request = parse_request(texts)
    assert {f: [str(r) for r in rs] for f, rs in request.families.items()} == families
    assert [str(r) for r in request.passthrough] == passthrough
    assert request.texts == texts and request.implicit is False


def test_empty_request_is_what_is_installed_else_torch():
    from cudamatrix.models import Environment

    assert parse_request([]).texts == ["torch"] and parse_request([]).implicit is True
    env = Environment(packages={"tensorflow": "2.15.0", "torchvision": "0.20.1", "numpy": "1.26.4"})
    assert parse_request([], env).texts == ["torchvision", "tensorflow"]


def test_unparseable_request_is_a_usage_error():
    from cudamatrix.errors import UsageError

    with pytest.raises(UsageError) as err:
        parse_request(["torch>>2"])
    assert str(err.value).startswith("cannot parse requirement 'torch>>2'")
    assert err.value.hint == "write PEP 508 requirements, e.g. 'torch>=2.3' 'tensorflow==2.15.*'"


# a requested companion pins the torch release it comes with (PyTorch's pairing, from the matrix row)
COMPANIONS = [
    (["torch", "torchvision==0.20.1"], "2.5.1"),
    (["torch", "torchvision==0.20.1+cu121"], "2.5.1"),
    (["torch==2.5.1+cu121"], "2.5.1"),
]


@pytest.mark.parametrize("texts, version", COMPANIONS)
def test_companion_pins_the_release(texts, version):
    m = build(torch(CU121))
    sol = solve([target("550.54.15", "7.5", python="3.11")], parse_request(texts), m)
    assert [(f.name, f.version, f.variant) for f in sol.frameworks] == [("torch", version, "cu121")]


def test_companion_version_that_no_release_pairs_with():
    m = build(torch(CU121))
    with pytest.raises(NoSolution) as err:
        solve([target("550.54.15", "7.5")], parse_request(["torch", "torchvision==0.19.1"]), m)
    assert err.value.detail["causes"] == [{"rule": "request", "machines": [],
                                           "message": "no torch release in the matrix matches torch "
                                                      "torchvision==0.19.1"}]


# cuda-toolkit 13.0.3's wheel METADATA (Requires-Dist per extra): [cublas] brings nvidia-cublas==13.1.1.3.* and
# nvidia-cuda-nvrtc==13.0.88.*, [cudart] nvidia-cuda-runtime==13.0.96.*. Only an exact pin names one metapackage.
TOOLKIT_META = "artifact: cuda_toolkit-13.0.3.0 wheel METADATA"


EXPAND = [
    ("cuda-toolkit[cublas,cudart]==13.0.3", ["nvidia-cublas==13.1.1.3.*", "nvidia-cuda-nvrtc==13.0.88.*",
                                             "nvidia-cuda-runtime==13.0.96.*"]),
    ("cuda-toolkit[cudart]==13.0.3", ["nvidia-cuda-runtime==13.0.96.*"]),
    ("cuda-toolkit[nvtx]==13.0.3", []),          # an extra the matrix row does not list brings nothing known
    ("cuda_toolkit[cudart]==13.0.3.0", ["nvidia-cuda-runtime==13.0.96.*"]),
    ("cuda-toolkit[cudart]==13.0.*", None),
    ("cuda-toolkit[cudart]>=13.0.3", None),
    ("cuda-toolkit[cudart]==13.0.2", None),
]


@pytest.mark.parametrize("text, components", EXPAND)
def test_metapackage_expands_to_its_component_wheels(text, components):
    from packaging.requirements import Requirement
    from packaging.version import Version

    from cudamatrix.matrix.data import Metapackage
    from cudamatrix.solve.pins import expand_metapackage

    meta = Metapackage(name="cuda-toolkit", version=Version("13.0.3.0"), source=TOOLKIT_META, requires={
        "cublas": ["nvidia-cublas==13.1.1.3.*", "nvidia-cuda-nvrtc==13.0.88.*"],
        "cudart": ["nvidia-cuda-runtime==13.0.96.*"]})
    m = build()
    m = replace(m, cuda=replace(m.cuda, metapackages=[meta]))
    found = expand_metapackage(m, Requirement(text))
    assert (None if found is None else [str(r) for r in found]) == components


# a build that brings nvidia-* wheels whose pins the matrix holds neither as read nor as inferred is judged by the
# pins its known CUDA and cuDNN imply (torch: nvidia-cudnn-cu12==9.1.0.70, nvidia-cuda-runtime-cu12==12.1.*), when
# no set rests on declared pins alone; the answer lists that inference as unverified (README, "known, inferred,
# unknown"); implied pins that conflict are a conflict, and a build that implies none stays unknown
UNKNOWN_PINS = [
    ({}, "linux_x86_64", "nvidia-cublas-cu12==12.1.3.1", "inferred"),
    ({}, "linux_x86_64", "nvidia-cudnn-cu12==9.3.0.75", "conflict"),
    ({"nvidia_pins": "the cu121 wheel of the same release pins the same wheels"}, "linux_x86_64",
     "nvidia-cublas-cu12==12.1.3.1", None),
    ({}, "win_amd64", "nvidia-cublas-cu12==12.1.3.1", None),  # Windows builds bundle their CUDA libraries
]


@pytest.mark.parametrize("inferred, platform, jax_pin, rule", UNKNOWN_PINS)
def test_unknown_pins_are_judged_by_the_pins_known_facts_imply(inferred, platform, jax_pin, rule):
    bare = variant("cu121", "12.1", archs=ARCHS, cudnn="9.1.0.70", inferred=inferred,
                   index_url=f"{PYTORCH_INDEX_PREFIX}/cu121", local_version="+cu121")
    jax = replace(release("0.4.30", variant("cuda12", "12.1", archs=ARCHS, cudnn="9.1.0",
                                            nvidia_pins=[f"{jax_pin}; {LINUX}"],
                                            pip_extra="cuda12"), name="jax"), companions={})
    m = replace(build(torch(bare)), jax=replace(build().jax, releases=[jax]))
    t = target("550.54.15", "7.5", python="3.11", platform=platform)
    if rule == "conflict":
        with pytest.raises(NoSolution) as err:
            solve([t], parse_request(["torch", "jax"]), m)
        assert any("nvidia-cudnn-cu12==9.1.0.70" in r for j in err.value.detail["rejected"] for r in j["reasons"])
        return
    sol = solve([t], parse_request(["torch", "jax"]), m)
    assert {f.name for f in sol.frameworks} == {"torch", "jax"}
    facts = {u["fact"]: u["basis"] for u in sol.unverified}
    if rule == "inferred":
        assert facts["torch 2.5.1 cu121 nvidia_pins"] == (
            "its declared nvidia-* pins are not in the matrix: judged by the pins its known CUDA 12.1 and cuDNN "
            "9.1.0.70 imply (nvidia-cudnn-cu12==9.1.0.70, nvidia-cuda-runtime-cu12==12.1.*), which jax 0.4.30 "
            "cuda12 admits; its other nvidia-* wheels are not checked against them")
    else:  # the matrix's own inference (or none): no pins judged by implication
        assert not any("judged by the pins" in basis for basis in facts.values()), facts


def test_a_build_that_implies_no_pins_stays_unknown():
    """jax's cuda12 build with neither pins nor a cuDNN in the matrix implies no nvidia-* wheel: beside a torch
    build, whether they share one set is unknown, never a pass."""
    jax = replace(release("0.4.30", variant("cuda12", "12.1", archs=ARCHS, pip_extra="cuda12"), name="jax"),
                  companions={})
    pinned = variant("cu121", "12.1", archs=ARCHS, cudnn="9.1.0.70",
                     nvidia_pins=[f"nvidia-cudnn-cu12==9.1.0.70; {LINUX}"], index_url=f"{PYTORCH_INDEX_PREFIX}/cu121", local_version="+cu121")
    m = replace(build(torch(pinned)), jax=replace(build().jax, releases=[jax]))
    with pytest.raises(NoSolution) as err:
        solve([target("550.54.15", "7.5", python="3.11")], parse_request(["torch", "jax"]), m)
    assert ("the nvidia-* wheels jax 0.4.30 cuda12 pins are not in the matrix, so whether it shares one set of "
            "them with another framework is unknown") in [c["message"] for c in err.value.detail["causes"]]


# pins of two frameworks for one wheel: an exact pin (== or ===) must satisfy the other's specifier, pre-releases
# included when pinned (PEP 440: a pre-release named explicitly is accepted); two ranges are assumed to meet
SPECS = [
    ("nvidia-cudnn-cu12==9.1.0.70", "nvidia-cudnn-cu12>=9.1", True),
    ("nvidia-cudnn-cu12==9.1.0.70", "nvidia-cudnn-cu12==9.3.0.75", False),
    ("nvidia-cudnn-cu12===9.1.0.70", "nvidia-cudnn-cu12==9.3.0.75", False),
    ("nvidia-cudnn-cu12==9.1.0rc1", "nvidia-cudnn-cu12>=9.0", True),
    ("nvidia-cudnn-cu12>=9.0", "nvidia-cudnn-cu12==9.1.0rc1", True),
    ("nvidia-cudnn-cu12>=9.0", "nvidia-cudnn-cu12<9.5", True),
    ("nvidia-cudnn-cu12==9.*", "nvidia-cudnn-cu12==8.9.2.26", False),
    ("nvidia-cudnn-cu12==9.1.0.70", "nvidia-cudnn-cu11==9.1.0.70", False),  # two CUDA majors of one library
]


@pytest.mark.parametrize("a, b, meet", SPECS)
def test_two_pins_of_one_wheel(a, b, meet):
    from packaging.requirements import Requirement

    from cudamatrix.solve.pins import pin_conflicts

    assert (pin_conflicts([Requirement(a)], [Requirement(b)], "A", "B") == []) is meet


# the wheels a known CUDA/cuDNN implies (PyTorch's cuXYZ wheels pin nvidia-cudnn of the build's cuDNN and
# nvidia-cuda-runtime of its CUDA minor; from CUDA 13 the wheels drop the -cuXX suffix); none off Linux
IMPLIED = [
    ("12.4", "9.1.0.70", "linux_x86_64", ["nvidia-cudnn-cu12==9.1.0.70", "nvidia-cuda-runtime-cu12==12.4.*"]),
    ("13.0", "9.13.0.50", "linux_x86_64", ["nvidia-cudnn-cu13==9.13.0.50", "nvidia-cuda-runtime==13.0.*"]),
    ("12.4", "9.1.0", "linux_x86_64", ["nvidia-cudnn-cu12==9.1.0.*", "nvidia-cuda-runtime-cu12==12.4.*"]),
    ("12.4", "9.1.0.70", "win_amd64", []),
]


@pytest.mark.parametrize("cuda, cudnn, platform, pins", IMPLIED)
def test_implied_pins(cuda, cudnn, platform, pins):
    from cudamatrix.solve.pins import implied_pins

    v = variant("cuX", cuda, archs=ARCHS, cudnn=cudnn)
    t = target("580.65.06", "8.0", platform=platform)
    assert [str(r) for r in implied_pins(torch(v), v, t, [])] == pins


# PEP 508 environment markers on each platform: os.name, sys.platform, platform.system(), platform.machine()
# (Python documentation: "AMD64" on 64-bit Windows, "arm64" on Apple silicon macOS, "aarch64" on ARM Linux)
MARKER_ENV = [
    ("linux_x86_64", "3.12", ("Linux", "x86_64", "linux", "posix")),
    ("linux_aarch64", "3.10", ("Linux", "aarch64", "linux", "posix")),
    ("win_amd64", "3.11", ("Windows", "AMD64", "win32", "nt")),
    ("macos_arm64", "3.12", ("Darwin", "arm64", "darwin", "posix")),
    ("macos_x86_64", None, ("Darwin", "x86_64", "darwin", "posix")),
]


@pytest.mark.parametrize("platform, python, facts", MARKER_ENV)
def test_marker_environment(platform, python, facts):
    from cudamatrix.solve.pins import marker_env
    from cudamatrix.solve.target import Target

    env = marker_env(Target(name="t", platform=platform, python=python), "and-cuda")
    py = python or "3.11"
    assert env == {"platform_system": facts[0], "platform_machine": facts[1], "sys_platform": facts[2],
                   "os_name": facts[3], "python_version": py, "python_full_version": py + ".0",
                   "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": "and-cuda"}
    assert marker_env(Target(name="t", platform=platform), None)["extra"] == ""


# the packages a chosen build installs: JAX's install guide (pip install "jax[cuda12]") brings jaxlib and the
# CUDA 12 plugin and PJRT wheels at the same version; TensorFlow's (pip install "tensorflow[and-cuda]") keeps
# the extra; torchaudio comes from torch's index at torch's local version
def test_jax_tensorflow_and_torchaudio_pins():
    jax = replace(release("0.4.30", variant("cuda12", "12.1", archs=ARCHS, cudnn="9.1.0", pip_extra="cuda12",
                                            extra_packages=["jax-cuda12-plugin[with-cuda]==0.4.30",
                                                            "jax-cuda12-pjrt==0.4.30", "jax-extra>=1"]),
                          name="jax"), companions={"jaxlib": "0.4.30"})
    # (a constructed row: its cuDNN is one the small matrix holds)
    tf = release("2.15.0", variant("and-cuda", "12.2", archs=ARCHS, cudnn="9.1.0", pip_extra="and-cuda"),
                 name="tensorflow")
    m = replace(build(), jax=replace(build().jax, releases=[jax]), tensorflow=replace(build().jax, releases=[tf]))
    t = target("550.54.15", "8.0", python="3.11")
    sol = solve([t], parse_request(["jax"]), m)
    assert [p.requirement() for p in sol.packages] == ["jax[cuda12]==0.4.30", "jaxlib==0.4.30",
                                                       "jax-cuda12-plugin[with-cuda]==0.4.30", "jax-cuda12-pjrt==0.4.30"]
    assert all(p.index_url is None for p in sol.packages)
    sol = solve([t], parse_request(["tensorflow[and-cuda]"]), m)
    assert [(p.requirement(), p.index_url) for p in sol.packages] == [("tensorflow[and-cuda]==2.15.0", None)]
    paired = replace(torch(CU121), companions={"torchvision": "0.20.1", "torchaudio": "2.5.1"})
    sol = solve([t], parse_request(["torch", "torchaudio"]), build(paired))
    assert [p.requirement() for p in sol.packages][:2] == ["torch==2.5.1+cu121", "torchaudio==2.5.1+cu121"]


def test_the_solution_records_the_chosen_rows_and_its_trace():
    from cudamatrix.models import FrameworkChoice

    cpu = variant("cpu", None, index_url="https://download.pytorch.org/whl/cpu", local_version="+cpu")
    nocudnn = variant("cu124", "12.4", archs=ARCHS, index_url="https://download.pytorch.org/whl/cu124",
                      local_version="+cu124")
    m = build(torch(CU121, cpu))
    sol = solve([target("550.54.15", "8.0", python="3.11")], parse_request(["torch", "numpy==1.26.4"]), m)
    assert sol.frameworks == [FrameworkChoice(name="torch", version="2.5.1", variant="cu121", cuda="12.1",
                                              cudnn="9.1.0.70", index_url="https://download.pytorch.org/whl/cu121",
                                              matrix_source="constructed test input")]
    assert "chose torch 2.5.1 cu121 (CUDA 12.1, cuDNN 9.1.0.70)" in sol.trace
    assert "numpy==1.26.4 is not a framework the matrix knows: passed to the installer as given" in sol.trace
    cpu_sol = solve([target(None, python="3.11")], parse_request(["torch==2.5.1+cpu"]), m)
    assert "chose torch 2.5.1 cpu (CPU build)" in cpu_sol.trace and cpu_sol.frameworks[0].cudnn is None
    plain = solve([target(None, python="3.11")], parse_request(["torch"]), build(torch(nocudnn)))
    assert "chose torch 2.5.1 cu124 (CUDA 12.4, cuDNN unknown)" in plain.trace


# what is installed already is not installed again: the default index's plain 2.5.1 is the same build as
# 2.5.1+cu124 from the cu124 index when cu124 is the default variant (PEP 440: the local label names the build)
SAME = [
    ({"torch": "2.5.1+cu124"}, "cu124", True),
    ({"torch": "2.5.1"}, "cu124", True),
    ({"torch": "2.5.1+cu121"}, "cu124", False),
    ({"torch": "2.4.1+cu124"}, "cu124", False),
]


@pytest.mark.parametrize("packages, detected, unchanged", SAME)
def test_installed_build_is_kept(packages, detected, unchanged):
    from cudamatrix.models import Environment, Framework

    default = replace(CU124, pypi_default=True)
    env = Environment(packages=dict(packages, **{"nvidia-cudnn-cu12": "9.1.0.70"}),
                      frameworks=[Framework(name="torch", version=packages["torch"], variant=detected)])
    sol = solve([target("550.54.15", "8.0", python="3.11")], parse_request(["torch"]), build(torch(default)),
                installed=env)
    assert (sol.to_install == [] and sol.unchanged) is unchanged


def test_an_installed_companion_stays_in_the_set():
    from cudamatrix.models import Environment

    env = Environment(packages={"torch": "2.4.0", "torchvision": "0.19.0"})
    sol = solve([target("550.54.15", "8.0", python="3.11")], parse_request(["torch"]), build(torch(CU121)),
                installed=env)
    assert [p.requirement() for p in sol.to_install][:2] == ["torch==2.5.1+cu121", "torchvision==0.20.1+cu121"]


# a build's declared requirements apply where their markers hold; a requirement behind an extra applies when
# the build is installed with that extra (tensorflow[and-cuda]); torch's own with-cuda extra likewise (PEP 508)
PINS_FOR = [
    (None, 'extra == "with-cuda"', True),
    (None, 'extra == "and-cuda"', False),
    ("and-cuda", 'extra == "and-cuda"', True),
    ("and-cuda", 'extra == "cuda"', True),
    ("cuda12", 'extra == "cuda12"', True),
    ("cuda12", 'extra == "cuda13"', False),
    (None, 'platform_system == "Linux"', True),
    (None, 'platform_system == "Windows"', False),
]


@pytest.mark.parametrize("pip_extra, marker, applies", PINS_FOR)
def test_declared_pins_with_markers(pip_extra, marker, applies):
    from cudamatrix.solve.pins import pins_for

    v = variant("v", "12.1", nvidia_pins=[f"nvidia-cublas-cu12==12.1.3.1; {marker}"], pip_extra=pip_extra)
    found = [str(r) for r in pins_for(v, target("550.54.15", "8.0", python="3.11"))]
    assert found == ([f"nvidia-cublas-cu12==12.1.3.1; {marker}"] if applies else [])


# the inferred facts an answer rests on: only those the rules read for this target (README, "known, inferred,
# unknown"): nvidia pins always; Python when the target names one; CUDA with a GPU or driver; the arch lists and
# cuDNN with a GPU
INFERRED = {"archs": "from cu124", "ptx": "from cu124", "cudnn": "from cu124", "cuda": "from the tag",
            "nvidia_pins": "from cu124", "python": "from 2.5.0"}


FACTS = [
    (dict(driver=None), ["nvidia_pins"]),
    (dict(driver=None, python="3.11"), ["nvidia_pins", "python"]),
    (dict(driver="550.54.15"), ["cuda", "nvidia_pins"]),
    (dict(driver="550.54.15", gpu="8.0"), ["archs", "cuda", "cudnn", "nvidia_pins", "ptx"]),
    (dict(driver=None, gpu="8.0"), ["archs", "cuda", "cudnn", "nvidia_pins", "ptx"]),
]


@pytest.mark.parametrize("facts, read", FACTS)
def test_inferred_facts_read_for_the_target(facts, read):
    from cudamatrix.solve.rules import inferred_facts

    v = variant("cu126", "12.6", archs=ARCHS, inferred=INFERRED)
    gpus = (facts["gpu"],) if "gpu" in facts else ()
    t = target(facts["driver"], *gpus, python=facts.get("python"))
    assert inferred_facts(torch(v), v, t) == [(f"torch 2.5.1 cu126 {name}", INFERRED[name]) for name in read]
    cpu = variant("cpu", None, inferred={"python": "from 2.5.0"})
    assert inferred_facts(torch(cpu), cpu, target("550.54.15", "8.0")) == []


def test_requests_that_name_a_build_or_a_companion():
    m = build(replace(torch(CU121, CU124), companions={"torchvision": "0.20.1"}))
    t = target("550.54.15", "8.0", python="3.11")
    assert solve([t], parse_request(["torch==2.5.1+cu121"]), m).frameworks[0].variant == "cu121"
    with pytest.raises(NoSolution) as err:
        solve([t], parse_request(["torch", "torchaudio"]), m)
    # the matrix row names no torchaudio for 2.5.1: no release matches the request
    assert [c["message"] for c in err.value.detail["causes"]] == ["no torch release in the matrix matches torch "
                                                                  "torchaudio"]


def test_fits_screens_without_explanations_and_solve_fills_the_memo_it_is_given(monkeypatch):
    """fits() answers whether a set fits without the rules' explanations (every screen with explain=False, no
    cause built); solve() with a memo fills that memo, so that a caller's next solves on the targets reuse it."""
    from cudamatrix.solve import solver
    from cudamatrix.solve.driverclass import Memo

    matrix = snapshot_matrix()
    t4 = from_flags(matrix, driver="535.104.05", gpus=["7.5"], python="3.11", platform=None, cuda_toolkit=None)
    memo = Memo()
    solve([t4], parse_request(["torch"]), matrix, memo=memo)
    assert memo.verdicts and memo.candidates and memo.requested
    asked: list[bool] = []
    real_screen = solver.screen

    def screen(*args, **kw):
        asked.append(kw["explain"])
        return real_screen(*args, **kw)

    def no_cause(*args, **kw):
        raise AssertionError("fits() built the causes of a NoSolution")

    monkeypatch.setattr(solver, "screen", screen)
    monkeypatch.setattr(solver, "no_solution", no_cause)
    assert solver.fits([t4], parse_request(["torch==2.15.0"]), matrix) is None
    assert [f.version for f in solver.fits([t4], parse_request(["torch"]), matrix)] == ["2.14.1"]
    assert asked == [False, False]
