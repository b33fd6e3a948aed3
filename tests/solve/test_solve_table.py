"""The solve table of issue #39: extension requests solved on stated targets, each answer checked against the data
row that sources it (data/extensions.json's release rows and flash-attn's release-file rule, data/torch.json's
``cxx11_abi``), every expectation worked out from those rows here, never typed.

The rows themselves were read from artifacts: vllm's and xformers' METADATA ``torch==X``, the CUDA major their
libraries link (``libcudart.so.N``), cupy's name and onnxruntime-gpu's CUDA provider; flash-attn's ``setup.py``
(``get_wheel_url``); torch's C++ ABI from ``nm -D --defined-only torch/lib/libc10.so`` (c10::Error's constructor
takes ``Ss``, the pre-C++11 std::string, in torch 2.4.0's and 2.6.0's default wheels, and
``NSt7__cxx1112basic_string...`` in 2.7.0's) or ``torch._C._GLIBCXX_USE_CXX11_ABI`` of an installed torch.
``python -m pytest tests/solve/test_solve_table.py -s -k print`` prints the table.
"""
from __future__ import annotations

from dataclasses import dataclass

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from cudamatrix.errors import NoSolution
from cudamatrix.matrix.data import ExtensionRelease, Variant, default_data_dir, load_matrix_from
from cudamatrix.solve import solver as solver_module
from cudamatrix.solve.solver import parse_request, solve
from cudamatrix.solve.target import from_flags

M = load_matrix_from(default_data_dir(), trusted=True)
R580, R570, R560 = "580.65.06", "570.86.10", "560.35.03"
PY = "3.11"


def floor_runs(driver: str, major: int | None) -> bool:
    """Whether ``driver`` runs CUDA ``major`` (cuda.json's minor-version compatibility floor)."""
    if major is None:
        return True
    floor = next(m.linux_min_driver for m in M.cuda.minor_compat if m.cuda_major == major)
    return tuple(int(x) for x in driver.split(".")) >= tuple(int(x) for x in floor.split("."))


def newest(name: str, spec: str = "", torch: str | None = None, cuda: int | None = None,
           driver: str | None = None) -> ExtensionRelease:
    """The newest row of ``name`` the specifier admits, with a wheel for Python 3.11, whose torch requirement admits
    ``torch``, whose CUDA major is ``cuda`` and which ``driver`` runs."""
    rows = [r for r in M.extensions.releases if (r.name == name or (name == "cupy" and r.name.startswith("cupy-")))
            and PY in r.python and SpecifierSet(spec).contains(r.version, prereleases=True)
            and (torch is None or SpecifierSet(r.requires.get("torch", "")).contains(torch))
            and (cuda is None or r.cuda_major == cuda) and (driver is None or floor_runs(driver, r.cuda_major))]
    return max(rows, key=lambda r: (r.version, r.cuda_major or 0))


def torch_variant(version: str, name: str) -> Variant:
    release = next(r for r in M.torch.releases if str(r.version) == version)
    return next(v for v in release.variants if v.name == name)


def flash_release(torch: str, variant: str, spec: str = "") -> str:
    """The newest flash-attn release ``spec`` admits whose release workflow's matrix (release_file_sets) builds the
    file for this torch build on Python 3.11, linux_x86_64: its torch major.minor (a torch release), cu12, its ABI."""
    v = torch_variant(torch, variant)
    mm = ".".join(torch.split(".")[:2])
    rows = [r for r in M.extensions.release_file_sets if SpecifierSet(spec).contains(r.version, prereleases=True)
            and PY in r.python and v.cxx11_abi in r.cxx11_abi and "linux_x86_64" in r.platforms
            and any(".".join(t.split(".")[:2]) == mm and t.count(".") == 2 and "dev" not in t
                    and not any(e.torch == t and e.python in (None, PY) for e in r.exclude) for t in r.torch)
            and any(c.startswith("12.") for c in r.cuda)]
    return str(max(rows, key=lambda r: r.version).version)


def flash_url(version: str, torch: str, variant: str) -> str:
    """flash-attn's release file for a torch build, from the rule and the torch row's cxx11_abi."""
    rule = next(r for r in M.extensions.release_files if r.name == "flash-attn")
    v = torch_variant(torch, variant)
    assert v.cxx11_abi is not None and v.cuda is not None
    local = rule.local.format(cuda_major="11" if v.cuda.major == 11 else "12", torch=".".join(torch.split(".")[:2]),
                              abi="TRUE" if v.cxx11_abi else "FALSE")
    return rule.url.format(version=version, local=local, python="cp311", platform="linux_x86_64")


@dataclass
class Case:
    request: list[str]
    driver: str
    expected: str  # "name version" / "torch==X" / a URL / "no build: ..." (exit 3)
    source: str  # the data row it rests on
    check: str = "pin"  # pin: the named distribution pinned at that version; url; torch; none (exit 3)


def cases() -> list[Case]:
    out = []
    vllm = newest("vllm", driver=R580)
    out.append(Case(["torch", "vllm"], R580, f"vllm {vllm.version}", f"extensions.json vllm {vllm.version}: torch"
                    f"{vllm.requires['torch']}, CUDA {vllm.cuda_major}"))
    out.append(Case(["torch", "vllm"], R580, f"torch{vllm.requires['torch']}", f"extensions.json vllm {vllm.version}",
                    "torch"))
    old = newest("vllm", ">=0.12", driver=R570)
    out.append(Case(["vllm>=0.12"], R570, f"vllm {old.version}", f"extensions.json vllm {old.version}: CUDA "
                    f"{old.cuda_major} (R580 is CUDA 13's floor)"))
    out.append(Case(["vllm>=0.12"], R570, f"torch{old.requires['torch']}", f"extensions.json vllm {old.version}",
                    "torch"))
    xf = newest("xformers", torch="2.8.0")
    out.append(Case(["torch==2.8.0", "xformers"], R580, f"xformers {xf.version}",
                    f"extensions.json xformers {xf.version}: torch{xf.requires['torch']}"))
    ort = newest("onnxruntime-gpu", cuda=13)
    out.append(Case(["torch==2.14.1", "onnxruntime-gpu"], R580, f"onnxruntime-gpu {ort.version}",
                    f"extensions.json onnxruntime-gpu {ort.version}: CUDA {ort.cuda_major} (torch 2.14.1's default "
                    "build is cu130)"))
    ort12 = newest("onnxruntime-gpu", driver=R570)
    out.append(Case(["onnxruntime-gpu"], R570, f"onnxruntime-gpu {ort12.version}",
                    f"extensions.json onnxruntime-gpu {ort12.version}: CUDA {ort12.cuda_major}"))
    cupy = newest("cupy", cuda=12)
    out.append(Case(["torch==2.8.0", "cupy"], R580, f"{cupy.name} {cupy.version}",
                    f"extensions.json {cupy.name} {cupy.version}: CUDA 12 (torch 2.8.0's builds are CUDA 12)"))
    sg = newest("sglang", driver=R580)
    out.append(Case(["sglang"], R580, f"torch{sg.requires['torch']}", f"extensions.json sglang {sg.version}",
                    "torch"))
    out.append(Case(["torch==2.4.0", "flash-attn==2.8.3"], R560, flash_url("2.8.3", "2.4.0", "cu121"),
                    "extensions.json flash-attn rule + torch.json 2.4.0 cu121 cxx11_abi="
                    f"{torch_variant('2.4.0', 'cu121').cxx11_abi}", "url"))
    out.append(Case(["torch==2.7.0", "flash-attn==2.8.3"], R580, flash_url("2.8.3", "2.7.0", "cu126"),
                    "extensions.json flash-attn rule + torch.json 2.7.0 cu126 cxx11_abi="
                    f"{torch_variant('2.7.0', 'cu126').cxx11_abi}", "url"))
    fa = flash_release("2.4.0", "cu121")
    out.append(Case(["torch==2.4.0", "flash-attn"], R580, flash_url(fa, "2.4.0", "cu121"),
                    f"extensions.json release_file_sets flash-attn {fa}: torch 2.4, cu12, cxx11abi FALSE, cp311", "url"))
    fa = flash_release("2.7.0", "cu126")
    out.append(Case(["flash-attn"], R580, flash_url(fa, "2.7.0", "cu126"),
                    f"release_file_sets flash-attn {fa} has torch 2.7 files; torch.json 2.7.0 cu126 is the newest "
                    "build with a read cxx11_abi", "url"))
    fa = flash_release("2.4.0", "cu121", "<2.8")
    out.append(Case(["torch==2.4.0", "flash-attn<2.8"], R580, flash_url(fa, "2.4.0", "cu121"),
                    f"release_file_sets flash-attn {fa}: the newest below 2.8 with a torch 2.4 file", "url"))
    out.append(Case(["torch==2.6.0", "flash-attn<2.7.4"], R580, "no build: no release of flash-attn that "
                    "flash-attn<2.7.4 admits has a file for torch 2.6.0",
                    "release_file_sets flash-attn 2.7.0.post2-2.7.3: torch 2.6 only as 2.6.0.dev builds", "none"))
    assert all(v.cxx11_abi is None for v in next(r for r in M.torch.releases if str(r.version) == "2.5.1").variants)
    out.append(Case(["torch==2.5.1", "flash-attn==2.8.3"], R580, "no build: the C++ ABI of torch 2.5.1",
                    "torch.json 2.5.1: no cxx11_abi in any variant", "none"))
    out.append(Case(["torch==2.14.1", "flash-attn==2.8.3"], R580, "no build: flash-attn's build script maps CUDA 13",
                    "flash-attn rule: CUDA 13 -> the cu12 file", "none"))
    out.append(Case(["torch==2.8.0", "xformers==0.0.29.post3"], R580, "no consistent set",
                    "extensions.json xformers 0.0.29.post3: torch==2.6.0", "none"))
    return out


def answer(case: Case) -> str:
    target = from_flags(M, driver=case.driver, gpus=["H100"], python=PY, platform="linux_x86_64", cuda_toolkit=None)
    try:
        sol = solve([target], parse_request(case.request), M)
    except NoSolution as exc:
        return f"exit 3: {exc}"
    pins = {p.name: p.version for p in sol.packages}
    if case.check == "torch":
        return "torch==" + next(f.version for f in sol.frameworks if f.name == "torch")
    if case.check == "url":
        return next(Requirement(a).url or "" for a in sol.pip_args if a.startswith("flash-attn @"))
    name = case.expected.split()[0]
    return f"{name} {pins.get(name)}"


@pytest.mark.slow
@pytest.mark.parametrize("case", cases(), ids=lambda c: " ".join(c.request) + "@" + c.driver + ":" + c.check)
def test_solve_table(case):
    got = answer(case)
    if case.check == "none":
        assert got.startswith("exit 3: ") and case.expected in got, got
    else:
        assert got == case.expected


def test_print_the_table(capsys):
    assert len(cases()) >= 10
    with capsys.disabled():
        print()
        for c in cases():
            print(f"| {' '.join(c.request)} | H100, driver {c.driver}, Python {PY} | {c.expected} | {c.source} |")


@pytest.mark.slow
@pytest.mark.parametrize("request_, python, platform, cause", [
    (["torch==2.4.0", "flash-attn<2.7"], PY, "linux_x86_64", "admits has its files read here"),
    (["torch==2.7.0", "flash-attn<2.8"], "3.13", "linux_x86_64", "has a file for torch 2.7.0 cu126"),
    (["torch==2.4.0", "flash-attn==2.8.3"], None, "linux_x86_64", "states no Python"),
    (["torch==2.4.0", "flash-attn==2.8.3"], PY, "linux_aarch64", "vouched for on linux_x86_64 only"),
])
def test_flash_attn_is_refused_where_the_rule_cannot_vouch(request_, python, platform, cause):
    target = from_flags(M, driver=R560, gpus=["H100"], python=python, platform=platform, cuda_toolkit=None)
    with pytest.raises(NoSolution) as err:
        solve([target], parse_request(request_), M)
    assert any(cause in c.message for c in err.value.causes), err.value.causes


def test_torch_rows_state_a_cxx11_abi_only_with_a_source_that_says_it():
    """Each variant with ``cxx11_abi`` names, in its sources, the symbol or the attribute it was read from."""
    stated = [(r.version, v) for r in M.torch.releases for v in r.variants if v.cxx11_abi is not None]
    assert len(stated) >= 6
    for version, v in stated:
        assert "_GLIBCXX_USE_CXX11_ABI" in v.source or "CXX11_ABI=1" in v.source, (version, v.name)


@pytest.mark.slow
def test_flash_attn_ways_out_are_re_solved_and_the_users_name_is_kept():
    """The other release offered when no admitted release has a file survives its re-solve (the release-file
    package is swapped in the request's pass-through list), and the answer keeps the name and extras as typed."""
    target = from_flags(M, driver=R580, gpus=["H100"], python=PY, platform="linux_x86_64", cuda_toolkit=None)
    with pytest.raises(NoSolution) as err:
        solve([target], parse_request(["torch==2.6.0", "flash-attn<2.7.4"]), M)
    pins = [w.change.get("requirement", "") for w in err.value.ways_out if w.change.get("extension") == "flash-attn"]
    assert pins == [f"flash-attn=={flash_release('2.6.0', 'cu124')}"], err.value.ways_out
    sol = solve([target], parse_request(["torch==2.4.0", "flash_attn[x]>=2.8"]), M)
    (arg,) = [a for a in sol.pip_args if "flash" in a]
    assert arg.startswith("flash_attn[x] @ ") and flash_url(flash_release("2.4.0", "cu121"), "2.4.0", "cu121") in arg


@pytest.mark.slow
def test_vllm_backtracks_to_a_release_whose_torch_shares_tensorflows_cuda_major(monkeypatch):
    """torch, TensorFlow and vllm: the newest vllm pins a CUDA 13 torch, TensorFlow's wheels are CUDA 12; the
    answer is the newest vllm built for CUDA 12 (extensions.json), with the releases passed over named. The tries
    are bounded: with fewer sets of torch builds allowed than it takes, no set is found."""
    target = from_flags(M, driver=R580, gpus=["H100"], python=PY, platform="linux_x86_64", cuda_toolkit=None)
    tf_majors = {v.cuda.major for r in M.tensorflow.releases if r.version >= Version("2.16") for v in r.variants
                 if v.cuda is not None}
    assert tf_majors == {12}
    top, fit = newest("vllm", driver=R580), newest("vllm", cuda=12)
    assert top.cuda_major == 13
    sol = solve([target], parse_request(["torch", "tensorflow>=2.16", "vllm"]), M)
    pins = {p.name: p.version for p in sol.packages}
    assert pins["vllm"] == str(fit.version) and fit.requires["torch"] == f"=={pins['torch']}"
    passed = [n for n in sol.notes if n.startswith("passed over vllm")]
    assert passed[0].startswith(f"passed over vllm {top.version}") and "CUDA 13" in passed[0]
    pinned = {r.requires["torch"] for r in M.extensions.releases if r.name == "vllm" and r.version > fit.version}
    monkeypatch.setattr(solver_module, "MAX_EXTENSION_TRIES", len(pinned) - 1)
    with pytest.raises(NoSolution):
        solve([target], parse_request(["torch", "tensorflow>=2.16", "vllm"]), M)
