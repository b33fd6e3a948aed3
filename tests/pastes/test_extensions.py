"""detect.extensions and ldso.elfsyms against real wheels beside a real torch: an installed extension's torch
symbols resolved against the installed torch's own libraries, never imported.

The pair: xformers 0.0.29.post3 (its ``cpp_lib.json``: built for torch 2.6.0+cu124, CUDA 12.4; its METADATA:
``Requires-Dist: torch==2.6.0``) unpacked into a throwaway site-packages beside the torch 2.14.1 CUDA 13 build of
$CUDAMATRIX_TORCH_CUDA_PYTHON. nm-level evidence (binutils 2.x, the same files):

- ``nm -D --undefined-only xformers/_C.so`` lists ``U _ZN3c104cuda9SetDeviceEa`` (c10::cuda::SetDevice(signed
  char)) and ``U _ZN3c105ErrorC2ENS_14SourceLocationESs`` (c10::Error's constructor with the pre-C++11 ABI's
  std::string, ``Ss``), 15 torch symbols in all of its 165 that no torch 2.14.1 library defines;
- ``nm -D --defined-only torch/lib/libc10_cuda.so`` of torch 2.14.1 has ``T _ZN3c104cuda9SetDeviceEab``
  (SetDevice(signed char, bool)) and no ``_ZN3c104cuda9SetDeviceEa``; no library of ``torch/lib`` defines
  ``_ZN3c105ErrorC2ENS_14SourceLocationESs`` (torch 2.14 is built with the C++11 ABI);
- ``readelf -d xformers/_C.so``: NEEDED libc10.so, libtorch*.so and ``libcudart.so.12`` (torch 2.14.1 here is
  CUDA 13: ``libcudart.so.13``).

The matched control: torchvision 0.29.1+cu130 (the PyPI wheel for torch 2.14; its ``_C_stable.so`` links
libc10.so and libtorch*.so and needs 60 torch symbols, all defined: ``nm -D --undefined-only`` of it against
``nm -D --defined-only`` of torch/lib lists none missing), and torch's own ``libtorch_python.so`` checked against
the rest of torch/lib. Real members are read once into $CUDAMATRIX_WHEEL_CACHE (tests/support/realwheels.py).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.realwheels import TORCH211_PY, TORCH_PY, fetch, site_packages

from cudamatrix.detect import _pyprobe, cxxfilt, extensions, fatbin, python_env
from cudamatrix.diagnose import diagnose
from cudamatrix.ldso import elf, elfcache, elfsyms
from cudamatrix.models import Driver, Environment, GpuInfo

pytestmark = pytest.mark.slow

XFORMERS = ("xformers", "0.0.29.post3")
TORCHVISION = ("torchvision", "0.29.1")
CUPY12, CUPY13 = ("cupy-cuda12x", "13.6.0"), ("cupy-cuda13x", "13.6.0")


@pytest.fixture(autouse=True)
def fresh(tmp_path, monkeypatch):
    """No facts kept from another test, in memory or in the user cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    elfcache.forget()
    elfsyms.forget()
    elf._CACHE.clear()
    fatbin.forget()
    yield
    elfcache.forget()
    elfsyms.forget()
    elf._CACHE.clear()
    fatbin.forget()


@pytest.fixture(scope="module")
def torch_site() -> Path:
    return site_packages(TORCH_PY, "CUDAMATRIX_TORCH_CUDA_PYTHON")


def _install(site: Path, dist: str, version: str, package_files: list[str]) -> None:
    """Lay out ``dist==version`` in ``site`` from the cached members of its real wheel: the package's files and
    its METADATA, WHEEL and RECORD (RECORD names more files than are laid out: those are simply absent)."""
    meta = f"{dist.replace('-', '_')}-{version}.dist-info"
    folder = fetch(dist, version, [f"{meta}/METADATA", f"{meta}/WHEEL", f"{meta}/RECORD", *package_files])
    (site / meta).mkdir(parents=True)
    for name in ("METADATA", "WHEEL", "RECORD"):
        shutil.copy(folder / name, site / meta / name)
    for member in package_files:
        (site / os.path.dirname(member)).mkdir(parents=True, exist_ok=True)
        if os.path.lexists(site / member):
            os.unlink(site / member)  # as pip does: the distribution installed last wrote the file
        os.symlink(folder / os.path.basename(member), site / member)


def _site(tmp_path: Path, torch_site: Path, *dists: tuple[str, str, list[str]]) -> Path:
    """A throwaway site-packages: the real torch (linked) and the given distributions."""
    site = tmp_path / "site-packages"
    site.mkdir(parents=True)
    for name in os.listdir(torch_site):
        if name == "torch" or (name.startswith("torch-") and name.endswith(".dist-info")):
            os.symlink(torch_site / name, site / name)
    for dist, version, files in dists:
        _install(site, dist, version, files)
    return site


def _doctor(site: Path) -> tuple[Environment, list]:
    raw = _pyprobe.collect([str(site)])
    side = python_env.build(raw)
    env = Environment(origin="file", python=side.python, packages=side.packages, frameworks=side.frameworks,
                      requirements=side.requirements)
    env.extensions = extensions.scan(side.candidates, side.python.site_packages)
    from support.snapshot import snapshot_matrix

    return env, diagnose(env, snapshot_matrix())


def test_xformers_built_for_torch_2_6_beside_torch_2_14_is_an_abi_pin_and_cuda_mismatch(tmp_path, torch_site):
    site = _site(tmp_path, torch_site, (*XFORMERS, ["xformers/_C.so", "xformers/cpp_lib.json"]))
    env, found = _doctor(site)
    (ext,) = [e for e in env.extensions if e.name == "xformers"]
    assert (ext.version, ext.built_for, ext.built_for_source) == ("0.0.29.post3", "2.6.0+cu124", "xformers/cpp_lib.json")
    (obj,) = ext.objects  # _C_flashattention3.so is in RECORD but not laid out here
    assert obj.torch_symbols == 165 and obj.missing_count == 15
    assert {"_ZN3c104cuda9SetDeviceEa", "_ZN3c105ErrorC2ENS_14SourceLocationESs"} <= set(obj.missing)
    assert "libcudart.so.12" in obj.needed
    if shutil.which("c++filt"):
        assert "c10::cuda::SetDevice(signed char)" in obj.demangled
    codes = {f.code: f for f in found}
    abi = codes["EXTENSION_ABI_MISMATCH"]
    assert abi.title.startswith("xformers 0.0.29.post3 was not built for torch 2.14.1: 15 torch symbols")
    assert abi.evidence[0] == "built for torch 2.6.0+cu124 (xformers/cpp_lib.json)"
    assert abi.fix.startswith("cudamatrix solve torch==2.14.1 xformers ")
    assert codes["EXTENSION_PIN_MISMATCH"].title == "xformers 0.0.29.post3 requires torch==2.6.0; torch 2.14.1 is installed"
    assert codes["EXTENSION_CUDA_MISMATCH"].evidence == ["_C.so needs libcudart.so.12 (CUDA 12)"]


def test_extensions_built_for_the_installed_torch_have_no_finding(tmp_path, torch_site):
    """torchvision 0.29.1 (built for torch 2.14, CUDA 13) beside torch 2.14.1: every torch symbol it needs is
    defined, its CUDA is torch's and it declares torch>=2.14.0."""
    site = _site(tmp_path, torch_site, (*TORCHVISION, ["torchvision/_C_stable.so"]))
    env, found = _doctor(site)
    (ext,) = [e for e in env.extensions if e.name == "torchvision"]
    (obj,) = ext.objects
    assert obj.torch_symbols == 60 and obj.missing == [] and obj.missing_count == 0 and obj.unchecked is None
    assert not [f.code for f in found if f.code.startswith("EXTENSION_")]


def _cublas_module(dist: str, version: str) -> list[str]:
    """The path of cupy's cuBLAS module in the wheel (its name carries the wheel's Python tag), from its RECORD."""
    meta = f"{dist.replace('-', '_')}-{version}.dist-info"
    record = (fetch(dist, version, [f"{meta}/RECORD"]) / "RECORD").read_text()
    return [row.split(",")[0] for row in record.splitlines() if row.startswith("cupy_backends/cuda/libs/cublas.")]


def test_cupy_for_cuda_12_beside_a_cuda_13_torch_and_both_cupy_variants_together(tmp_path, torch_site):
    """``readelf -d cupy_backends/cuda/libs/cublas.*.so``: cupy-cuda12x 13.6.0 NEEDS libcublas.so.12 and
    cupy-cuda13x 13.6.0 libcublas.so.13, beside torch 2.14.1 built for CUDA 13.0 (its variant cu130)."""
    site = _site(tmp_path / "a", torch_site, (*CUPY12, _cublas_module(*CUPY12)))
    env, found = _doctor(site)
    (cuda,) = [f for f in found if f.code == "EXTENSION_CUDA_MISMATCH"]
    assert cuda.title == "cupy-cuda12x 13.6.0 links CUDA libraries of another major than torch 2.14.1 (CUDA 13)"
    assert cuda.evidence[0].endswith("needs libcublas.so.12 (CUDA 12)")
    site = _site(tmp_path / "b", torch_site, (*CUPY13, _cublas_module(*CUPY13)))
    env, found = _doctor(site)
    assert [e.objects[0].needed for e in env.extensions] == [["libcublas.so.13"]]
    assert not [f.code for f in found if f.code.startswith("EXTENSION_")]
    site = _site(tmp_path / "c", torch_site, (*CUPY12, _cublas_module(*CUPY12)), (*CUPY13, _cublas_module(*CUPY13)))
    env, found = _doctor(site)
    (clash,) = [f for f in found if f.code == "EXTENSION_VARIANT_CLASH"]
    assert clash.fix_commands == [["pip", "uninstall", "-y", "cupy-cuda12x"]]  # torch is CUDA 13: 12x goes


def test_beside_torch_2_11_xformers_breaks_and_torchvision_on_the_stable_abi_loads_but_is_pinned_away(tmp_path):
    """The same two wheels beside torch 2.11.0 (cu130, $CUDAMATRIX_TORCH211_PYTHON): xformers' _C.so needs 12
    torch symbols torch 2.11.0's libraries do not define (``nm -D --defined-only`` of its torch/lib lacks
    ``_ZN3c105ErrorC2ENS_14SourceLocationESs``); torchvision 0.29.1's _C_stable.so uses torch's stable C interface
    (``aoti_torch_*``) and resolves whole, yet declares ``torch (>=2.14.0)``: TORCHVISION_MISMATCH (the matrix pairs
    torch 2.11.0 with torchvision 0.26.0), no ABI finding."""
    torch_site = site_packages(TORCH211_PY, "CUDAMATRIX_TORCH211_PYTHON")
    site = _site(tmp_path, torch_site, (*XFORMERS, ["xformers/_C.so", "xformers/cpp_lib.json"]),
                 (*TORCHVISION, ["torchvision/_C_stable.so"]))
    env, found = _doctor(site)
    objects = {e.name: e.objects[0] for e in env.extensions}
    assert (objects["xformers"].missing_count, objects["torchvision"].missing_count) == (12, 0)
    assert "_ZN3c105ErrorC2ENS_14SourceLocationESs" in objects["xformers"].missing
    abi = [f.title.split(" was ")[0] for f in found if f.code == "EXTENSION_ABI_MISMATCH"]
    assert abi == ["xformers 0.0.29.post3"]
    assert {f.code for f in found} >= {"EXTENSION_PIN_MISMATCH", "TORCHVISION_MISMATCH"}


def test_torch_own_python_library_resolves_against_torch(torch_site):
    """libtorch_python.so needs some 5,000 torch symbols of libc10/libtorch_cpu/libtorch_cuda: all defined, each
    library's table read once (a second ask reads nothing: no table is built again)."""
    libs = extensions.torch_libraries([str(torch_site)])
    assert os.path.basename(libs[0]) == "libtorch_cpu.so"
    need = [n for n in elfsyms.undefined(str(torch_site / "torch/lib/libtorch_python.so"))
            if extensions.TORCH_SYMBOL.match(n)]
    assert len(need) > 1000
    found, unread = elfsyms.defined(libs, need)
    assert unread == [] and found == set(need)
    tables = dict(elfsyms._TABLES)
    assert elfsyms.defined(libs, need)[0] == set(need)
    assert elfsyms._TABLES == tables and all(elfsyms._TABLES[k] is tables[k] for k in tables)


def test_the_answer_is_kept_across_runs_and_read_again_when_torch_changes(tmp_path, torch_site, monkeypatch):
    """The second run recalls the object's answer, demangled names included, from the user cache (no symbol table
    read, no c++filt, no fatbin header read); a torch library with another stamp makes it read again."""
    site = _site(tmp_path, torch_site, (*XFORMERS, ["xformers/_C.so"]))
    cand = python_env.Candidate("xformers", "0.0.29.post3", str(site / "xformers-0.0.29.post3.dist-info"))
    (first,) = extensions.scan([cand], [str(site)])
    assert first.objects[0].missing_count == 15
    assert elfcache.save() is None
    elfcache.forget()
    elfsyms.forget()
    elf._CACHE.clear()
    fatbin.forget()
    with monkeypatch.context() as m:
        m.setattr(cxxfilt, "filtered", lambda tool, names, timeout: pytest.fail(f"{tool} run again"))
        m.setattr(fatbin, "_read", lambda path, size: pytest.fail(f"{path}'s fatbin read again"))
        assert extensions.scan([cand], [str(site)]) == [first] and elfsyms._TABLES == {}
        assert first.objects[0].sass == ["6.0", "7.0", "7.5", "8.0", "9.0"]  # recalled, as read the first time
    real = extensions._stamp  # torch's libraries (only they) as if rewritten: another modification time
    monkeypatch.setattr(extensions, "_stamp", lambda lib: [*real(lib)[:1], real(lib)[1] + 1, *real(lib)[2:]])
    assert extensions.scan([cand], [str(site)]) == [first] and elfsyms._TABLES != {}


@pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("nm") is None, reason="needs gcc and nm")
def test_gnu_hash_lookups_agree_with_nm(tmp_path):
    """A provider library defining three names in torch's namespaces and a consumer that needs them and one more:
    the consumer's undefined symbols are what ``nm -D --undefined-only`` lists (weak ones left out), and the
    provider defines exactly what ``nm -D --defined-only`` lists."""
    (tmp_path / "p.cc").write_text("namespace c10 { int one() { return 1; } int two() { return 2; } }\n"
                                   "namespace at { int three() { return 3; } }\n")
    (tmp_path / "u.cc").write_text("namespace c10 { int one(); int two(); int gone(); }\nnamespace at { int three(); }\n"
                                   "extern \"C\" int maybe() __attribute__((weak));\n"
                                   "int use() { return c10::one() + c10::two() + at::three() + c10::gone() + "
                                   "(maybe ? maybe() : 0); }\n")
    for args in (["-shared", "-fPIC", "-o", "libprov.so", "p.cc"],
                 ["-shared", "-fPIC", "-o", "libuse.so", "u.cc", "-L.", "-lprov"]):
        subprocess.run(["g++" if shutil.which("g++") else "gcc", *args], cwd=tmp_path, check=True, timeout=60,
                       capture_output=True)
    nm_u = subprocess.run(["nm", "-D", "--undefined-only", str(tmp_path / "libuse.so")], capture_output=True,
                          text=True, check=True).stdout.split("\n")
    strong = {line.split()[-1].split("@")[0] for line in nm_u if line.strip().startswith("U ")}
    undefined = elfsyms.undefined(str(tmp_path / "libuse.so"))
    assert set(undefined) == strong and "maybe" not in undefined
    torch_names = [n for n in undefined if extensions.TORCH_SYMBOL.match(n)]
    assert sorted(torch_names) == sorted(["_ZN3c103oneEv", "_ZN3c103twoEv", "_ZN2at5threeEv", "_ZN3c104goneEv"])
    found, unread = elfsyms.defined([str(tmp_path / "libprov.so")], torch_names)
    assert unread == [] and found == {"_ZN3c103oneEv", "_ZN3c103twoEv", "_ZN2at5threeEv"}
    assert elfsyms.defined([str(tmp_path / "libuse.so")], torch_names)[0] == set()  # undefined is not defined


def test_an_unreadable_or_foreign_library_is_said_not_guessed(tmp_path):
    text = tmp_path / "libc10.so"
    text.write_text("not an ELF file\n")
    found, unread = elfsyms.defined([str(text), str(tmp_path / "absent.so")], ["_ZN3c103oneEv"])
    assert found == set() and len(unread) == 2 and "not an ELF file" in unread[0]
    with pytest.raises(elf.ElfError):
        elfsyms.undefined(str(text))


def test_the_torch_an_extension_was_built_for_is_a_version_or_nothing(tmp_path):
    """cpp_lib.json's version.torch, else an exact Requires-Dist pin; text that is no version (a terminal escape,
    5,000 digits, nested brackets) is not taken."""
    folder = tmp_path / "pkg"
    folder.mkdir()
    obj = [extensions.ExtensionObject(path=str(folder / "_C.so"))]

    def built_for(record: str | None, declares: list[str]) -> tuple:
        if record is not None:
            (folder / "cpp_lib.json").write_text(record)
        return extensions._built_for(declares, obj)

    assert built_for('{"version": {"torch": "2.6.0+cu124"}}', ["torch==2.5.0"]) == ("2.6.0+cu124", "pkg/cpp_lib.json")
    assert built_for('{"version": {"torch": "\\u001b]0;x\\u0007"}}', ["torch (==2.5.0)"]) == ("2.5.0", "Requires-Dist")
    assert built_for("[" * 100_000, ["torch==" + "9" * 5000]) == (None, None)
    assert built_for("{}", ["torch>=2.5", "torch===2.5.1\x1b[31m", "torch==2.5.1; extra == 'x'"]) == (None, None)


def test_a_pure_distribution_is_an_extension_by_what_it_declares_outside_an_extra(tmp_path):
    """A pure-Python distribution that requires torch (torchmetrics' kind) is kept for the pin findings; one that
    names torch only behind an extra (a test extra) is not an extension."""
    site = tmp_path / "site-packages"
    for name, requires in (("metrics", "torch>=2.0"), ("tool", "torch==2.13.0; extra == 'test'")):
        meta = site / f"{name}-1.0.dist-info"
        meta.mkdir(parents=True)
        (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\nRequires-Dist: {requires}\n\n")
        (meta / "WHEEL").write_text("Wheel-Version: 1.0\nRoot-Is-Purelib: true\n")
        (meta / "RECORD").write_text(f"{name}/__init__.py,,\n")
    side = python_env.build(_pyprobe.collect([str(site)]))
    assert [(e.name, e.declares, e.objects) for e in extensions.scan(side.candidates, [str(site)])] == [
        ("metrics", ["torch>=2.0"], [])]


def test_xformers_kernels_read_from_its_fatbin_miss_a_maxwell_gpu_and_cover_an_h100(tmp_path, torch_site):
    """xformers 0.0.29.post3's real _C.so: ``cuobjdump --list-elf`` lists cubins sm_60 sm_70 sm_75 sm_80 sm_90 and
    ``--list-ptx`` compute_60 compute_80 (the headers of its .nv_fatbin, as scripts/read_wheel_archs.py reads them,
    say the same). A Tesla M60 (Maxwell, 5.2) has no SASS of major 5 and no PTX at or below 5.2 in it:
    EXTENSION_ARCH_UNSUPPORTED; the control, an H100 (9.0), runs its sm_90 SASS. torchvision 0.29.1's
    _C_stable.so (SASS sm_75 ... sm_120, PTX compute_120) lacks both the M60 and a V100 (7.0)."""
    site = _site(tmp_path, torch_site, (*XFORMERS, ["xformers/_C.so", "xformers/cpp_lib.json"]),
                 (*TORCHVISION, ["torchvision/_C_stable.so"]))
    env, _found = _doctor(site)
    xf = next(e for e in env.extensions if e.name == "xformers").objects[0]
    assert (xf.sass, xf.ptx) == (["6.0", "7.0", "7.5", "8.0", "9.0"], ["6.0", "8.0"])
    tv = next(e for e in env.extensions if e.name == "torchvision").objects[0]
    assert (tv.sass, tv.ptx) == (["7.5", "8.0", "8.6", "9.0", "10.0", "12.0"], ["12.0"])
    from support.snapshot import snapshot_matrix

    env.driver = Driver(version="580.95.05", cuda_version="13.0", status="ok")
    for gpus, expected in (([("Tesla M60", "5.2")], {("xformers", "5.2"), ("torchvision", "5.2")}),
                           ([("NVIDIA H100 80GB HBM3", "9.0")], set()),
                           ([("Tesla V100-SXM2-16GB", "7.0")], {("torchvision", "7.0")})):
        env.gpus = [GpuInfo(index=i, name=n, compute_capability=c) for i, (n, c) in enumerate(gpus)]
        found = [f for f in diagnose(env, snapshot_matrix()) if f.code == "EXTENSION_ARCH_UNSUPPORTED"]
        assert {(f.title.split()[0], f.title.split("compute capability ")[1][:3]) for f in found} == expected


def _venv_with(tmp_path: Path, torch_site: Path, *dists: tuple[str, str, list[str]]) -> Path:
    """A throwaway venv (no pip) whose site-packages holds the real torch (linked) and the given distributions."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    site = next((venv / "lib").glob("python*/site-packages"))
    site.rmdir()
    made = _site(tmp_path, torch_site, *dists)
    made.rename(site)
    return venv / "bin" / "python"


@pytest.mark.parametrize("table, query, expected", [
    # a real nvidia-smi table (tests/data/nvidia-smi, driver 570.195.03) and the GPU its --query-gpu names: a V100
    # (7.0): torchvision 0.29.1's _C_stable.so has SASS from sm_75 and PTX compute_120 only; the control, the
    # table's own T4G (7.5), runs its sm_75 SASS
    ("nvidia-smi/570.195.03_T4G_cuda13.0-in-container_eks.txt",
     "0, Tesla V100-SXM2-16GB, 570.195.03, 16130, 0, 7.0, GPU-1, 00000000:00:1E.0, [N/A]\n",
     ["torchvision 0.29.1 has no kernel image for Tesla V100-SXM2-16GB (compute capability 7.0): "
      "\"no kernel image is available\""]),
    ("nvidia-smi/570.195.03_T4G_cuda13.0-in-container_eks.txt",
     "0, NVIDIA T4G, 570.195.03, 15360, 0, 7.5, GPU-5a1b, 00000000:00:1F.0, [N/A]\n", []),
])
def test_doctor_on_a_venv_reads_the_gpu_from_nvidia_smi_and_the_kernels_from_the_fatbin(
        tmp_path, torch_site, table, query, expected):
    from support.fakes import child_env, fake_smi, fixture

    python = _venv_with(tmp_path, torch_site, (*TORCHVISION, ["torchvision/_C_stable.so"]))
    fake_smi(tmp_path / "bin", fixture(table), query=query)
    done = subprocess.run([sys.executable, "-m", "cudamatrix", "doctor", "--python", str(python), "--json"],
                          env=child_env(path_prepend=[tmp_path / "bin"], ld_library_path=[tmp_path / "empty"],
                                        extra={"XDG_CACHE_HOME": str(tmp_path / "xdg")}),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1), done.stderr
    doc = json.loads(done.stdout)
    found = [f for f in doc["data"]["findings"] if f["code"] == "EXTENSION_ARCH_UNSUPPORTED"]
    assert [f["title"] for f in found] == expected
    if found:
        assert found[0]["evidence"] == ["_C_stable.so: SASS sm_75 sm_80 sm_86 sm_90 sm_100 sm_120, PTX compute_120"]
