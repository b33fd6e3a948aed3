"""diagnose.extensions: the findings about installed extensions, whole (code, title, evidence, fix), on
environments built here.

Facts the expectations rest on: xformers 0.0.29.post3's METADATA declares ``torch==2.6.0`` and its
``cpp_lib.json`` names torch 2.6.0+cu124; torchvision 0.29.1's METADATA declares ``torch (>=2.14.0)``; PEP 508
markers (``python_version < "3.9"`` does not apply on 3.11; a requirement behind ``extra == "x"`` only with that
extra); JAX's installation guide (jaxlib, jax-cudaNN-plugin and jax-cudaNN-pjrt are released together at one
version); CuPy's installation guide (install exactly one cupy-cudaNNx package); libcudart's and libcublasLt's
soname major is the CUDA major (libcudart.so.12 for every CUDA 12.x).
"""
from __future__ import annotations

import pytest
from support.smallmatrix import build, release, replace, variant

from cudamatrix.diagnose import extensions
from cudamatrix.diagnose.context import Diagnosis
from cudamatrix.matrix.load import load_matrix
from cudamatrix.models import (
    Driver,
    Environment,
    Extension,
    ExtensionObject,
    Framework,
    GpuInfo,
    LibraryLoad,
    PythonInfo,
)

M = build(replace(release("2.5.1", variant("cu121", cuda="12.1")), companions={"torchvision": "0.20.1"}))


def env(torch: str | None = "2.5.1+cu121", cuda: str | None = "12.1", extensions_=(), **packages) -> Environment:
    e = Environment(origin="file", python=PythonInfo(version="3.11.9", platform="linux_x86_64"),
                    packages={k.replace("_", "-"): v for k, v in packages.items()}, extensions=list(extensions_))
    if torch:
        e.packages["torch"] = torch
        e.frameworks = [Framework(name="torch", version=torch, variant="cu" + (cuda or "").replace(".", ""),
                                  cuda=cuda)]
    return e


def ask(check, e: Environment) -> list[tuple]:
    return [(f.code, f.title, f.evidence, f.fix, f.fix_commands) for f in check(Diagnosis(e, M))]


def test_abi_mismatch_whole():
    ext = Extension(name="xformers", version="0.0.29.post3", built_for="2.6.0+cu124",
                    built_for_source="xformers/cpp_lib.json", declares=["torch==2.6.0"],
                    objects=[ExtensionObject(path="/sp/xformers/_C.so", needed=["libc10.so"], torch_symbols=165,
                                             missing=["_ZN3c104cuda9SetDeviceEa", "_ZN5torch3jit11parseSchemaERKSsb"],
                                             missing_count=2, demangled=["c10::cuda::SetDevice(signed char)",
                                                                         "torch::jit::parseSchema(std::string const&, bool)"]),
                             ExtensionObject(path="/sp/xformers/_C_flashattention3.so", needed=["libc10.so"],
                                             torch_symbols=62)])
    assert ask(extensions.extension_abi_mismatch, env(extensions_=[ext])) == [(
        "EXTENSION_ABI_MISMATCH",
        "xformers 0.0.29.post3 was not built for torch 2.5.1+cu121: 2 torch symbols it needs are undefined (import "
        "fails with \"undefined symbol\")",
        ["built for torch 2.6.0+cu124 (xformers/cpp_lib.json)",
         "_C.so: 2 of its 165 torch symbols are undefined in torch 2.5.1+cu121: c10::cuda::SetDevice(signed char) "
         "[_ZN3c104cuda9SetDeviceEa]; torch::jit::parseSchema(std::string const&, bool) "
         "[_ZN5torch3jit11parseSchemaERKSsb]"],
        "cudamatrix solve torch==2.5.1 xformers (the xformers built for the installed torch); or keep xformers "
        "0.0.29.post3 and move torch: cudamatrix solve 'torch==2.6.0' xformers==0.0.29.post3", [])]


def test_abi_mismatch_needs_torch_and_a_missing_symbol():
    broken = Extension(name="x", version="1", objects=[ExtensionObject(path="/sp/x/_C.so", missing=["_ZN2at1fEv"],
                                                                       missing_count=1, torch_symbols=3)])
    assert ask(extensions.extension_abi_mismatch, env(torch=None, extensions_=[broken])) == []
    fine = Extension(name="x", version="1", objects=[ExtensionObject(path="/sp/x/_C.so", torch_symbols=3)])
    assert ask(extensions.extension_abi_mismatch, env(extensions_=[fine])) == []
    raw = ask(extensions.extension_abi_mismatch, env(extensions_=[broken]))  # no c++filt: the raw name, no pin
    assert raw[0][2] == ["_C.so: 1 of its 3 torch symbols are undefined in torch 2.5.1+cu121: _ZN2at1fEv"]
    assert raw[0][3] == "cudamatrix solve torch==2.5.1 x (the x built for the installed torch)"


@pytest.mark.parametrize("declares, installed, expected", [
    (["torch==2.6.0"], {}, ["xf 1.0 requires torch==2.6.0; torch 2.5.1+cu121 is installed"]),
    (["torch (>=2.6)"], {}, ["xf 1.0 requires torch>=2.6; torch 2.5.1+cu121 is installed"]),
    (["torch>=2.5,<2.6"], {}, []),  # met (the local version +cu121 is ignored by the specifier)
    (["torch==2.6.0; python_version < '3.9'"], {}, []),  # the marker does not apply on 3.11
    (["torch==2.6.0; extra == 'train'"], {}, []),  # behind an extra: ignored
    (["jax==0.4.30"], {}, []),  # jax is not installed: nothing to break
    (["jaxlib<=0.4.30,>=0.4.27"], {"jaxlib": "0.4.20"},
     ["xf 1.0 requires jaxlib<=0.4.30,>=0.4.27; jaxlib 0.4.20 is installed"]),
    (["numpy<2"], {"numpy": "2.1.0"}, []),  # not a framework: pip check's business
])
def test_pin_mismatch(declares, installed, expected):
    e = env(extensions_=[Extension(name="xf", version="1.0", declares=declares)], **installed)
    assert [t for _c, t, *_ in ask(extensions.extension_pin_mismatch, e)] == expected


def test_pin_mismatch_leaves_a_companion_to_torchvision_mismatch_when_the_matrix_knows_the_torch():
    tv = Extension(name="torchvision", version="0.29.1", declares=["torch (>=2.14.0)"])
    assert ask(extensions.extension_pin_mismatch, env(extensions_=[tv])) == []
    found = ask(extensions.extension_pin_mismatch, env(torch="2.99.0+cu121", extensions_=[
        Extension(name="torchvision", version="0.29.1", declares=["torch (>=3.0)"])]))
    assert found[0][:2] == ("EXTENSION_PIN_MISMATCH", "torchvision 0.29.1 requires torch>=3.0; torch 2.99.0+cu121 is "
                                                      "installed")
    assert found[0][3].endswith("cudamatrix solve 'torch>=3.0' torchvision==0.29.1")


@pytest.mark.parametrize("needed, loads, expected", [
    (["libcublasLt.so.13", "libcudart.so.13"], [],
     ["libonnxruntime_providers_cuda.so needs libcublasLt.so.13 (CUDA 13)",
      "libonnxruntime_providers_cuda.so needs libcudart.so.13 (CUDA 13)"]),
    (["libcublasLt.so.12", "libcudnn.so.9"], [], []),
    (["libcufft.so.12"], [LibraryLoad("torch", "libcufft.so.11", "/sp/nvidia/cufft/lib/libcufft.so.11", "DT_RUNPATH")],
     ["libonnxruntime_providers_cuda.so needs libcufft.so.12 where torch maps libcufft.so.11"]),
    (["libcufft.so.11"], [LibraryLoad("torch", "libcufft.so.11", "/sp/nvidia/cufft/lib/libcufft.so.11", "DT_RUNPATH")],
     []),
])
def test_cuda_mismatch(needed, loads, expected):
    ext = Extension(name="onnxruntime-gpu", version="1.31.1", objects=[ExtensionObject(
        path="/sp/onnxruntime/capi/libonnxruntime_providers_cuda.so", needed=needed)])
    e = env(extensions_=[ext])
    e.library_loads = loads
    found = ask(extensions.extension_cuda_mismatch, e)
    assert [ev for f in found for ev in f[2]] == expected
    if expected:
        assert found[0][1] == "onnxruntime-gpu 1.31.1 links CUDA libraries of another major than torch 2.5.1+cu121 " \
                              "(CUDA 12)"
        assert found[0][3] == "cudamatrix solve torch==2.5.1 onnxruntime-gpu (the onnxruntime-gpu build for CUDA 12)"


def test_cuda_mismatch_needs_a_cuda_framework():
    ext = Extension(name="cupy-cuda13x", version="13.6.0", objects=[ExtensionObject(path="/sp/cupy/x.so",
                                                                                    needed=["libcudart.so.13"])])
    assert ask(extensions.extension_cuda_mismatch, env(cuda=None, extensions_=[ext])) == []


def test_variant_clash_drops_the_major_no_framework_uses():
    found = ask(extensions.extension_variant_clash, env(cupy_cuda12x="13.6.0", cupy_cuda13x="13.6.0"))
    assert found == [("EXTENSION_VARIANT_CLASH",
                      "cupy-cuda12x 13.6.0 and cupy-cuda13x 13.6.0 are installed together: CUDA 12 and 13 variants "
                      "of one package", ["cupy-cuda12x: the CUDA 12 build", "cupy-cuda13x: the CUDA 13 build"],
                      "pip uninstall cupy-cuda13x, then reinstall the one that is kept (the two wrote the same files)",
                      [["pip", "uninstall", "-y", "cupy-cuda13x"]])]
    assert ask(extensions.extension_variant_clash, env(cupy_cuda12x="13.6.0", jax_cuda12_plugin="0.4.35")) == []
    two = ask(extensions.extension_variant_clash, env(jax_cuda12_plugin="0.4.35", jax_cuda13_plugin="0.7.0"))
    assert two[0][4] == [["pip", "uninstall", "-y", "jax-cuda13-plugin"]]


def test_jax_plugin_mismatch():
    found = ask(extensions.jax_plugin_mismatch, env(jaxlib="0.4.35", jax_cuda12_plugin="0.4.34",
                                                    jax_cuda12_pjrt="0.4.35"))
    assert found == [("JAX_PLUGIN_MISMATCH", "jaxlib 0.4.35 is installed with jax-cuda12-plugin 0.4.34",
                      ["jax-cuda12-plugin 0.4.34 is not jaxlib's version 0.4.35"],
                      "pip install 'jax-cuda12-plugin==0.4.35'", [["pip", "install", "jax-cuda12-plugin==0.4.35"]])]
    assert ask(extensions.jax_plugin_mismatch, env(jax_cuda12_plugin="0.4.34")) == []  # no jaxlib



def test_a_version_no_one_can_compare_is_no_finding_and_no_error():
    """A METADATA pin of 5,000 digits (the int conversion limit refuses it): nothing is said, doctor goes on."""
    e = env(extensions_=[Extension(name="xf", version="1.0", declares=["torch==" + "9" * 5000])])
    assert ask(extensions.extension_pin_mismatch, e) == []
    one = Extension(name="x", version="1", declares=["torch==" + "9" * 5000],
                    objects=[ExtensionObject(path="/sp/x/_C.so", missing=["_ZN2at1fEv"], missing_count=1)])
    (found,) = ask(extensions.extension_abi_mismatch, env(extensions_=[one]))
    assert found[1].endswith(": a torch symbol it needs is undefined (import fails with \"undefined symbol\")")
    assert "move torch" not in found[3]  # no torch to move to that anyone could install


def test_the_fix_names_the_matrix_release_built_for_the_installed_torch():
    """data/extensions.json's rows (each release's Requires-Dist as its wheel states it): the newest release whose
    torch requirement the installed torch meets is named; a release pinning another torch, or naming torch without
    a version, is not."""
    from packaging.version import Version

    from cudamatrix.matrix.data import ExtensionFile, ExtensionRelease

    def row(version: str, torch: str) -> ExtensionRelease:
        return ExtensionRelease(name="xformers", version=Version(version), python=["3.11"], source="wheel METADATA",
                                requires={"torch": torch})

    m = replace(M, extensions=ExtensionFile(releases=[row("0.0.28.post3", "==2.5.1"), row("0.0.29.post3", "==2.6.0"),
                                                      row("0.0.28.post2", "==2.5.0"), row("0.0.99", "")]))
    ext = Extension(name="xformers", version="0.0.29.post3", declares=["torch==2.6.0"])
    found = [f.fix for f in extensions.extension_pin_mismatch(Diagnosis(env(extensions_=[ext]), m))]
    assert found == ["cudamatrix solve torch==2.5.1 xformers (the xformers built for the installed torch: xformers "
                     "0.0.28.post3 declares torch==2.5.1); or keep xformers 0.0.29.post3 and move torch: cudamatrix "
                     "solve 'torch==2.6.0' xformers==0.0.29.post3"]


# --- EXTENSION_ARCH_UNSUPPORTED from the packages' own floors (data/extensions.json gpu_floors, the shipped rows):
# flash-attn's README at v2.0.0 and v2.8.3.post1 ("FlashAttention-2 currently supports Ampere, Ada, or Hopper GPUs")
# and its flash_api.cpp at v2.8.3 (cc_major >= 8, "FlashAttention only supports Ampere GPUs or newer."); vLLM's
# installation page at v0.3.3 and v0.14.0 ("compute capability 7.0 or higher"); bitsandbytes' installation.mdx at
# 0.45.0/0.47.0 (Maxwell, 5.0+) and 0.48.0/0.50.1 (6.0+); CuPy's install.rst at v10.0.0 and v14.2.0 (3.0 or larger)

SHIPPED = load_matrix()
GPUS = {"T4": ("Tesla T4", "7.5"), "A100": ("NVIDIA A100-SXM4-80GB", "8.0"), "P100": ("Tesla P100-PCIE-16GB", "6.0"),
        "V100": ("Tesla V100-SXM2-16GB", "7.0"), "M60": ("Tesla M60", "5.2"), "GTX580": ("GeForce GTX 580", "2.0")}


def gpu_env(gpu: str, **packages) -> Environment:
    e = env(**packages)
    name, cc = GPUS[gpu]
    e.driver = Driver(version="570.195.03", cuda_version="12.8", status="ok")
    e.gpus = [GpuInfo(index=0, name=name, compute_capability=cc)]
    return e


def floors(e: Environment) -> list[tuple[str, str]]:
    return [(f.title, f.fix) for f in extensions.extension_arch_unsupported(Diagnosis(e, SHIPPED))]


@pytest.mark.parametrize("gpu, dist, version, expected", [
    ("T4", "flash-attn", "2.8.3", [("flash-attn 2.8.3 needs a GPU of compute capability 8.0 or higher; Tesla T4 is "
                                    "7.5", "run flash-attn on a GPU of compute capability 8.0 or higher")]),
    ("A100", "flash-attn", "2.8.3", []),
    ("T4", "flash-attn", "1.0.9", []),  # FlashAttention 1.x: the README sends Turing there
    ("P100", "vllm", "0.6.1.post2", [("vllm 0.6.1.post2 needs a GPU of compute capability 7.0 or higher; Tesla "
                                      "P100-PCIE-16GB is 6.0",
                                      "run vllm on a GPU of compute capability 7.0 or higher")]),
    ("V100", "vllm", "0.6.1.post2", []),
    ("M60", "bitsandbytes", "0.49.2", [("bitsandbytes 0.49.2 needs a GPU of compute capability 6.0 or higher; "
                                        "Tesla M60 is 5.2",
                                        "pip install 'bitsandbytes>=0.45.0,<0.48.0' (a release whose own words admit "
                                        "compute capability 5.2); or run bitsandbytes on a GPU of compute capability "
                                        "6.0 or higher")]),
    ("M60", "bitsandbytes", "0.47.0", []),
    ("GTX580", "cupy-cuda12x", "13.6.0", [("cupy-cuda12x 13.6.0 needs a GPU of compute capability 3.0 or higher; "
                                           "GeForce GTX 580 is 2.0",
                                           "run cupy-cuda12x on a GPU of compute capability 3.0 or higher")]),
    ("T4", "cupy-cuda12x", "13.6.0", []),
], ids=lambda v: v if isinstance(v, str) else "")
def test_a_gpu_below_the_floor_the_package_states_with_no_kernels_read(gpu, dist, version, expected):
    assert floors(gpu_env(gpu, **{dist: version})) == expected


def test_the_floor_finding_names_the_packages_own_words():
    (f,) = extensions.extension_arch_unsupported(Diagnosis(gpu_env("T4", flash_attn="2.8.3"), SHIPPED))
    assert f.code == "EXTENSION_ARCH_UNSUPPORTED" and f.severity == "error"
    assert f.evidence[0].startswith("flash-attn >=2.0.0,<=2.8.3.post1: its own words: FlashAttention-2 currently "
                                    "supports Ampere, Ada, or Hopper GPUs")
    assert f.evidence[0].endswith("(https://github.com/Dao-AILab/flash-attention/blob/v2.0.0/README.md)")
    assert len(f.evidence) == 3


def test_a_gpu_the_kernel_check_named_is_not_named_twice():
    # flash-attn's objects read (SASS sm_80 sm_90, no PTX): the T4 has no kernel image and is below the floor: one
    # finding, the kernels'
    e = gpu_env("T4", flash_attn="2.8.3")
    e.extensions = [Extension(name="flash-attn", version="2.8.3", objects=[ExtensionObject(
        path="/sp/flash_attn_2_cuda.so", needed=["libc10.so"], sass=["8.0", "9.0"])])]
    (f,) = extensions.extension_arch_unsupported(Diagnosis(e, SHIPPED))
    assert f.title.startswith("flash-attn 2.8.3 has no kernel image for Tesla T4")


@pytest.mark.parametrize("cc, version", [("9" * 500, "2.8.3"), ("", "2.8.3"), ("7.5", "x" * 300), ("7.5", ""),
                                         ("7.5", "9" * 5000)])
def test_a_compute_capability_or_version_no_one_can_read_is_no_floor_finding_and_no_error(cc, version):
    e = gpu_env("T4", flash_attn=version)
    e.gpus[0].compute_capability, e.gpus[0].name = cc, "a GPU no table names"
    assert floors(e) == []


def test_a_distribution_detect_read_as_an_extension_only_is_judged_by_its_floor():
    # vllm and bitsandbytes are not among the distributions detect lists in ``packages``: they reach doctor as
    # extensions (their METADATA declares torch)
    e = gpu_env("M60")
    e.extensions = [Extension(name="vllm", version="0.6.1.post2", declares=["torch==2.4.0"]),
                    Extension(name="bitsandbytes", version="0.47.0", declares=["torch<3,>=2.2"])]
    assert [t for t, _fix in floors(e)] == ["vllm 0.6.1.post2 needs a GPU of compute capability 7.0 or higher; "
                                            "Tesla M60 is 5.2"]
