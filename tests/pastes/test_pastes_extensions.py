"""What the packages built against one torch print when they cannot load, read from a paste
(pastes/extensions.py), and the findings doctor gives on them (diagnose/pasted.py): each reader's edge cases
on a real line of the corpus (tests/data/pastes; the source issue in each file's first line) or the smallest edit of
one, said where it is made. The whole pastes are checked by tests/pastes/test_reports.py's corpus tests."""
from __future__ import annotations

import shutil

import pytest
from support.fakes import DATA
from support.snapshot import snapshot_matrix

from cudamatrix.detect.text import Paste
from cudamatrix.diagnose.findings import diagnose
from cudamatrix.models import Environment
from cudamatrix.pastes import extensions
from cudamatrix.pastes.reports import from_reports


def body(stem):
    return (DATA / "pastes" / f"{stem}.txt").read_text(encoding="utf-8").partition("\n")[2]


def read(text, reader=extensions.read):
    paste, env = Paste(text), Environment()
    return reader(paste, env), paste, env


def findings(text):
    return {f.code: f for f in diagnose(from_reports([("paste", text)]), snapshot_matrix())}


XF971 = "xformers-built-for_torch2.1.2cu121_have-2.1.0cpu_info_xformers971"
FA1691 = "undefined-symbol_flash-attn-2.7.4.post1-cxx11abiTRUE_c10-Error-cxx11_flash-attention1691"
SCATTER462 = "undefined-symbol_torch-scatter-2.1.2_pre-cxx11-parseSchemaOrName_ngc-torch2.4.0a0_pytorch_scatter462"
ORT8195 = "onnxruntime-provider_libcublasLt.so.11_paddle2onnx_PaddleNLP8195"
PIP53 = "pip-resolver_vllm-0.6.3-requires-torch2.4.0_xformers-0.0.27.post2_have-2.2.0_SimpleVLA-RL53"
VLLM11623 = "collect_env_2.4.0cu121_driver-too-old-11040_undefined-symbol_vllm11623"


# --- xFormers' block ------------------------------------------------------------------------------------------------

def test_xformers_block_states_both_torches_and_both_pythons():
    found, paste, env = read(body(XF971))
    assert found is True
    said = [(m.library, m.built, m.found) for m in env.messages]
    assert said == [("torch", "2.1.2+cu121", "2.1.0+cpu"), ("python", "3.9.13", "3.9.13")]
    assert env.packages == {"torch": "2.1.0+cpu", "xformers": "0.0.23.post1"}
    # the warning's 6 lines and xformers.info's version line; the dcgm note and the operator table are not read
    assert [i for i, k in enumerate(paste.kind) if k] == [1, 2, 3, 4, 5, 6, 8]


def test_xformers_block_finding_names_both_versions_and_the_release_to_install():
    f = findings(body(XF971))["EXTENSION_ABI_MISMATCH"]
    assert f.title == ("xformers was built for torch 2.1.2+cu121; the installed torch is 2.1.0+cpu: its C++/CUDA "
                       "extensions cannot load")
    assert "xformers was built for torch 2.1.2+cu121; the installed torch is 2.1.0+cpu" in f.evidence
    assert f.fix_commands == [["pip", "install", "xformers", "torch==2.1.0"]]
    assert "pip install 'torch==2.1.2'" in f.fix


@pytest.mark.parametrize("edit, code", [
    (("(you have 2.1.0+cpu)", "(you have 2.1.2+cu121)"), None),  # the torch it was built for: no finding
    (("(you have 2.1.0+cpu)", "(you have 2.1.2+cu118)"), "EXTENSION_CUDA_MISMATCH"),  # same release, other CUDA
    (("Python  3.9.13 (you have 3.9.13)", "Python  3.9.13 (you have 3.11.2)"), "EXTENSION_ABI_MISMATCH"),
])
def test_xformers_block_versions_decide_the_code(edit, code):
    text = body(XF971).replace("(you have 2.1.0+cpu)", "(you have 2.1.2+cu121)") if edit[0].startswith("Python") \
        else body(XF971)
    got = findings(text.replace(*edit))
    ext = {c for c in got if c.startswith("EXTENSION_")}
    assert ext == ({code} if code else set())


def test_xformers_python_line_alone_is_a_python_finding():
    """The Python line (edited to another minor) with the torch line made to agree: the finding names Python."""
    text = body(XF971).replace("(you have 2.1.0+cpu)", "(you have 2.1.2+cu121)").replace(
        "Python  3.9.13 (you have 3.9.13)", "Python  3.9.13 (you have 3.11.2)")
    f = findings(text)["EXTENSION_ABI_MISMATCH"]
    assert f.title == "xformers was built for Python 3.9.13; the interpreter is Python 3.11.2"
    assert "cp311" in f.fix


def test_xformers_head_without_its_version_lines_reads_nothing_of_them():
    head = "WARNING[XFORMERS]: xFormers can't load C++/CUDA extensions. xFormers was built for:\n    something else\n"
    found, paste, env = read(head)
    assert env.messages == [] and paste.kind[0] == "xFormers warning"


# --- undefined torch symbols --------------------------------------------------------------------------------------

def test_undefined_symbol_names_the_package_from_the_path():
    found, paste, env = read(body(FA1691))
    (m,) = env.messages
    assert (m.package, m.soname) == ("flash-attn", "flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so")
    assert m.symbol == "_ZN3c105ErrorC2ENS_14SourceLocationENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"
    assert paste.kind[7] == "loader error"


@pytest.mark.parametrize("path, package", [
    ("/usr/local/lib/python3.9/site-packages/vllm/quantization_ops.cpython-39-x86_64-linux-gnu.so", "vllm"),
    ("/home/u/env/lib/python3.10/site-packages/torch_scatter/_version_cuda.so", "torch-scatter"),
    ("/usr/local/lib/python3.10/dist-packages/transformer_engine_extensions.cpython-310-x86_64-linux-gnu.so",
     "transformer-engine"),
    ("/ramyapra/vllm/vllm/_C.cpython-310-x86_64-linux-gnu.so", "vllm"),  # a source checkout (vllm#2747's title)
    ("flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so", "flash-attn"),  # no folder
    ("C:\\env\\Lib\\site-packages\\xformers\\_C.pyd", "xformers"),
])
def test_package_of_a_compiled_file(path, package):
    assert extensions.package_of(path.replace("\\", "/")) == package


@pytest.mark.parametrize("line", [
    # vllm#11623's line: a CUDA driver symbol, not torch's (the paste's finding is DRIVER_TOO_OLD)
    "WARNING 12-30 17:06:52 _custom_ops.py:19] Failed to import from vllm._C with ImportError('/usr/local/app/.local/"
    "lib/python3.8/site-packages/vllm/_C.abi3.so: undefined symbol: cuTensorMapEncodeTiled')",
    # pytorch_scatter#234's line: a libstdc++ symbol
    "OSError: */_version.so: undefined symbol: _ZNSt7__cxx1119basic_ostringstreamIcSt11char_traitsIcESaIcEEC1Ev",
    "undefined symbol: _ZN3c104cuda9SetDeviceEi",  # no file named
])
def test_other_undefined_symbols_are_not_read(line):
    found, paste, env = read(line)
    assert found is False and env.messages == [] and paste.kind == [None]


def test_a_repr_quoted_path_is_cut_at_its_quote():
    """vllm#11623's line with a torch symbol in place of the driver's (the smallest edit)."""
    line = ("WARNING 12-30 17:06:52 _custom_ops.py:19] Failed to import from vllm._C with ImportError('/usr/local/app/"
            ".local/lib/python3.8/site-packages/vllm/_C.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEi')")
    (m,) = read(line)[2].messages
    assert (m.package, m.soname, m.symbol) == ("vllm", "_C.abi3.so", "_ZN3c104cuda9SetDeviceEi")


def test_the_vllm_paste_with_a_driver_symbol_keeps_its_finding():
    assert {c for c, f in findings(body(VLLM11623)).items() if f.severity == "error"} == {"DRIVER_TOO_OLD"}


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="binutils' c++filt is not installed")
def test_the_symbol_is_demangled_and_its_abi_named():
    """flash-attention#1691: a C++11-ABI symbol (wheel cxx11abiTRUE on a pre-C++11 torch) -> the cxx11abiFALSE
    wheel; pytorch_scatter#462: a pre-C++11 one (std::string) on NVIDIA's torch 2.4.0a0, built with the C++11 ABI."""
    f = findings(body(FA1691))["EXTENSION_ABI_MISMATCH"]
    assert any("c10::Error::Error(c10::SourceLocation, std::__cxx11::basic_string" in e for e in f.evidence)
    assert any(e.startswith("the symbol is of the C++11 ABI") for e in f.evidence)
    assert "cxx11abiFALSE" in f.fix
    g = findings(body(SCATTER462))["EXTENSION_ABI_MISMATCH"]
    assert any("torch::jit::parseSchemaOrName(" in e for e in g.evidence)
    assert any(e.startswith("the symbol is of the pre-C++11 ABI") for e in g.evidence)
    assert "PyG's wheel page" in g.fix


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="binutils' c++filt is not installed")
def test_the_symbols_of_a_paste_are_demangled_by_one_cpp_filt_as_one_by_one(monkeypatch):
    """Several undefined symbols (the two above, vLLM's, and a name c++filt gives back unchanged): one c++filt
    process for all of them, each the name c++filt gives it alone."""
    from cudamatrix import proc

    symbols = ["_ZN3c104cuda9SetDeviceEa", "_ZN3c104cuda9SetDeviceEi", "_ZN3c105ErrorC2ENS_14SourceLocationESs",
               "_ZN3c104cuda9SetDeviceEa", "_Znotasymbol"]
    alone = {}
    for sym in symbols:
        monkeypatch.setattr(extensions, "_DEMANGLED", {})
        alone[sym] = extensions.demangle_all([sym])[sym]
    runs = []
    real = proc.run
    monkeypatch.setattr(proc, "run", lambda argv, **kw: runs.append(argv) or real(argv, **kw))
    monkeypatch.setattr(extensions, "_DEMANGLED", {})
    assert extensions.demangle_all(symbols) == alone
    assert len(runs) == 1 and runs[0][1:] == ["--", *dict.fromkeys(symbols)]
    assert alone["_ZN3c104cuda9SetDeviceEa"] == "c10::cuda::SetDevice(signed char)" and alone["_Znotasymbol"] is None


def test_without_cpp_filt_the_symbol_stays_mangled(tmp_path, monkeypatch):
    """No c++filt on PATH (an empty folder): a symbol c++filt would read stays mangled, and nothing raises."""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(extensions, "_DEMANGLED", {})
    assert extensions.demangle_all(["_ZN3c104cuda9SetDeviceEa"]) == {"_ZN3c104cuda9SetDeviceEa": None}


# --- ONNX Runtime's CUDA provider --------------------------------------------------------------------------------

def test_provider_line_states_the_cuda_major_and_claims_the_warning_after_it():
    found, paste, env = read(body(ORT8195))
    (m,) = env.messages
    assert (m.soname, m.library, m.built) == ("libcublasLt.so.11", "cublaslt", "11")
    assert [i for i, k in enumerate(paste.kind) if k] == [1, 3]


def test_provider_of_another_cuda_than_torch_is_a_cuda_mismatch():
    """PaddleNLP#8195's provider line (CUDA 11) beside collect_env's torch 2.4.0+cu121 (vllm#11623's line)."""
    text = body(ORT8195) + "\nPyTorch version: 2.4.0+cu121\nCUDA used to build PyTorch: 12.1\n"
    got = findings(text)
    f = got["EXTENSION_CUDA_MISMATCH"]
    assert f.title == ("onnxruntime-gpu was built for CUDA 11; the framework is a CUDA 12 build (libcublasLt.so.11 "
                       "not found)")
    assert f.fix.startswith("install an onnxruntime-gpu built for CUDA 12")
    assert "LIBRARY_MISSING" not in got
    alone = findings(body(ORT8195))["LIBRARY_MISSING"]  # no framework stated: the CUDA 11 libraries are missing
    assert alone.title == "ONNX Runtime's CUDA provider cannot load libcublasLt.so.11 (CUDA 11 is not found)"


@pytest.mark.parametrize("soname, expected", [
    ("libcublasLt.so.12", ("cublaslt", "12")), ("libcudart.so.11.0", ("cudart", "11")),
    ("libcudnn.so.9", ("cudnn", "9")), ("cublasLt64_12.dll", ("cublaslt", "12")), ("cudart64_110.dll", ("cudart", "11")),
    ("libcufft.so.11", ("cufft", None)),  # cuFFT 11 is CUDA 12's: its file's major is not the CUDA major
])
def test_cuda_library_major(soname, expected):
    assert extensions.cuda_library_major(soname) == expected


def test_windows_provider_line():
    line = ('Error loading "C:\\venv\\lib\\site-packages\\onnxruntime\\capi\\onnxruntime_providers_cuda.dll" which '
            'depends on "cublasLt64_12.dll" which is missing. (Error 126)')
    (m,) = read(line)[2].messages
    assert (m.soname, m.built) == ("cublasLt64_12.dll", "12")


# --- pip's resolver and vLLM's versions --------------------------------------------------------------------------

def test_resolver_lines_on_torch_are_pins_and_the_rest_are_versions():
    found, paste, env = read(body(PIP53))
    assert [(m.package, m.requirement, m.found) for m in env.messages] == [
        ("tensordict", ">=2.4.0", "2.2.0"), ("vllm", "==2.4.0", "2.2.0"), ("xformers", "==2.4.0", "2.2.0")]
    assert env.packages["transformers"] == "4.40.1" and env.packages["torchvision"] == "0.17.0"
    assert all(kind for kind, line in zip(paste.kind, paste.lines, strict=True) if line.strip())


def test_resolver_finding_per_package_with_its_fix():
    got = [f for f in diagnose(from_reports([("p", body(PIP53))]), snapshot_matrix())
           if f.code == "EXTENSION_PIN_MISMATCH"]
    assert [f.title for f in got] == ["tensordict 0.5.0 declares torch>=2.4.0; the installed torch is 2.2.0",
                                      "vllm 0.6.3 declares torch==2.4.0; the installed torch is 2.2.0",
                                      "xformers 0.0.27.post2 declares torch==2.4.0; the installed torch is 2.2.0"]
    assert got[1].fix_commands == [["pip", "install", "vllm", "torch==2.2.0"]]


def test_a_companion_pin_is_torchvisions_finding():
    line = "torchvision 0.19.0 requires torch==2.4.0, but you have torch 2.5.1 which is incompatible."
    assert "TORCHVISION_MISMATCH" in findings(line) and "EXTENSION_PIN_MISMATCH" not in findings(line)


@pytest.mark.parametrize("line, version", [
    ("INFO 02-25 10:00:00 api_server.py:912] vLLM API server version 0.7.3", "0.7.3"),
    ("INFO 06-01 12:00:00 llm_engine.py:161] Initializing an LLM engine (v0.4.3) with config: model='m'", "0.4.3"),
    ("INFO 03-01 12:00:00 llm_engine.py:234] Initializing a V0 LLM engine (v0.7.3) with config: model='m'", "0.7.3"),
])
def test_vllm_version_lines(line, version):
    found, paste, env = read(line)
    assert found is True and env.packages == {"vllm": version}


@pytest.mark.parametrize("text", ["", "x" * 100_000, ": undefined symbol: " * 5000, "xFormers was built for:\n" * 3000,
                                  "a 1 requires torch==1, but you have torch " * 2000,
                                  "libonnxruntime_providers_cuda with error: " * 3000])
def test_hostile_text_reads_nothing_or_something_quickly(text):
    read(text)  # no exception; timing is scripts/hostile_inputs.py's


def test_the_issues_example_gives_both_findings_with_the_release_for_the_installed_torch():
    """Issue #39's example, xformers 0.0.29.post3 (cpp_lib.json: torch 2.6.0+cu124, CUDA 1204; Requires-Dist
    torch==2.6.0) next to torch 2.8.0: its block and pip's resolver line, in xformers#971's and SimpleVLA-RL#53's
    words with those versions (the smallest edits). ABI and pin findings; the fix lets pip pick the xformers that
    declares torch 2.8.0 (0.0.32.post1 on the index)."""
    block = body(XF971).replace("PyTorch 2.1.2+cu121 with CUDA 1201 (you have 2.1.0+cpu)",
                                "PyTorch 2.6.0+cu124 with CUDA 1204 (you have 2.8.0+cu128)")
    line = "xformers 0.0.29.post3 requires torch==2.6.0, but you have torch 2.8.0 which is incompatible.\n"
    got = findings(block + line)
    assert got["EXTENSION_ABI_MISMATCH"].fix_commands == [["pip", "install", "xformers", "torch==2.8.0"]]
    pin = got["EXTENSION_PIN_MISMATCH"]
    assert pin.title == "xformers 0.0.29.post3 declares torch==2.6.0; the installed torch is 2.8.0"
    assert pin.fix_commands == [["pip", "install", "xformers", "torch==2.8.0"]]


# --- bitsandbytes' per-CUDA library ---------------------------------------------------------------------------------

BNB1848 = "bitsandbytes-error_configured-cuda-binary-not-found_cuda131_bitsandbytes1848"
BNB1559 = "bitsandbytes-error_could-not-find-cuda-binary_override124_bitsandbytes1559"


def test_the_missing_file_names_the_cuda_release_torch_asked_for():
    found, paste, env = read(body(BNB1848))
    assert found is True
    assert [(m.kind, m.soname, m.built, m.library) for m in env.messages] == [
        ("library_not_found", "libbitsandbytes_cuda131.so", "13.1", "torch")]
    assert paste.kind[10] == "bitsandbytes error"  # the last line


def test_the_override_line_names_who_asked_and_the_cpu_library_is_its_own():
    """0.43-0.45's words: the override warning, "Could not find the bitsandbytes CUDA binary at PosixPath(...)", then
    its CPU library, which is bitsandbytes' own file and no CUDA library (no LIBRARY_MISSING)."""
    found, paste, env = read(body(BNB1559))
    assert [(m.soname, m.built, m.library) for m in env.messages] == [
        ("libbitsandbytes_cuda124.so", "12.4", "BNB_CUDA_VERSION")]
    codes = findings(body(BNB1559))
    assert list(codes) == ["EXTENSION_CUDA_MISMATCH"]
    assert codes["EXTENSION_CUDA_MISMATCH"].fix.startswith("unset BNB_CUDA_VERSION")


def test_a_nocublaslt_file_is_the_release_of_its_first_digits():
    """unslothai/unsloth#412's line: 0.43's override appended the digits after _nocublaslt."""
    line = ("Could not find the bitsandbytes CUDA binary at PosixPath('/home/llm/miniconda3/envs/unsloth_env/lib/"
            "python3.10/site-packages/bitsandbytes/libbitsandbytes_cuda121_nocublaslt121.so')")
    _found, _paste, env = read(line)
    assert [(m.soname, m.built) for m in env.messages] == [("libbitsandbytes_cuda121_nocublaslt121.so", "12.1")]


def test_the_finding_names_the_release_whose_wheel_has_a_file_it_opens():
    from cudamatrix.matrix.load import load_matrix

    (said,) = from_reports([("paste", body(BNB1848))]).messages
    got = {f.code: f for f in diagnose(from_reports([("paste", body(BNB1848))]), load_matrix())}
    finding = got["EXTENSION_CUDA_MISMATCH"]
    assert finding.title == "bitsandbytes has no library for CUDA 13.1: libbitsandbytes_cuda131.so is not among its files"
    # 0.50.1's wheel carries cuda130 and cuda132, and from 0.50.0 it opens the highest file of the major below 13.1
    assert finding.fix == ("pip install 'bitsandbytes==0.50.1' (its wheel carries libbitsandbytes_cuda130, which it "
                           "opens for CUDA 13.1)")
    assert said.kind == "library_not_found"


@pytest.mark.parametrize("line", [
    "Configured CUDA binary not found at /x/libbitsandbytes_cpu.so",
    "Configured CUDA binary not found at /x/libbitsandbytes_cuda.so",
    "Could not find the bitsandbytes CUDA binary at " + "a" * 5000,
])
def test_other_lines_of_those_words_read_nothing(line):
    found, _paste, env = read(line)
    assert found is False and env.messages == []
