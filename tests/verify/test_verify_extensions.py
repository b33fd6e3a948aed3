"""verify proves the stack on top of the framework: the child imports every installed torch extension after
torch's work (cudamatrix/verify/child.py ``run_extensions``), the parent turns one that does not import into
EXTENSION_IMPORT_FAILED with the extension's own words (cudamatrix/verify/run.py ``judge_extensions``).

Real parts: the real child script; the real xformers 0.0.29.post3 wheel (built for torch 2.6.0+cu124, pre-C++11
ABI) unpacked beside the real torch 2.14.1+cu130 of $CUDAMATRIX_TORCH_CUDA_PYTHON; the CPU build of torch this venv
has with a distribution made here whose import raises. The GPU operations run where a GPU is (marked ``gpu``).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from support.fakes import interpreter
from support.realwheels import CACHE, TORCH_PY

from cudamatrix.models import FrameworkReport
from cudamatrix.render import report_lines
from cudamatrix.verify import child
from cudamatrix.verify.run import check, judge_extensions, verify

HAS_GPU = os.path.exists("/proc/driver/nvidia/version")
_PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")


def _wheel(dist: str, version: str, python: str) -> Path:
    """The real wheel ``dist==version`` for ``python``'s CPython on linux x86_64, unpacked once into the cache."""
    folder = CACHE / "unpacked" / f"{dist}-{version}-{python}"
    if (folder / ".done").exists():
        return folder
    tag = subprocess.run([python, "-c", "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"],
                         capture_output=True, text=True, timeout=60).stdout.strip()
    downloads = CACHE / "wheels"
    got = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                          "--python-version", tag, *(a for p in _PLATFORMS for a in ("--platform", p)),
                          f"{dist}=={version}", "-d", str(downloads)], capture_output=True, text=True, timeout=600)
    wheels = sorted(downloads.glob(f"{dist.replace('-', '_')}-{version}-*.whl"))
    if got.returncode != 0 or not wheels:
        pytest.skip(f"{dist}=={version} could not be downloaded: {got.stderr.strip()[-300:]}")
    with zipfile.ZipFile(wheels[-1]) as whl:
        whl.extractall(folder)
    (folder / ".done").write_text("")
    return folder


@pytest.mark.slow
@pytest.mark.skipif(not TORCH_PY, reason="CUDAMATRIX_TORCH_CUDA_PYTHON (a torch CUDA build) is not set")
def test_xformers_built_for_another_torch_fails_to_import_with_its_own_words():
    """xformers 0.0.29.post3 (cpp_lib.json: torch 2.6.0+cu124, CUDA 1204; Requires-Dist torch==2.6.0) beside torch
    2.14.1+cu130. Evidence (nm -D): its _C.so needs 14 torch symbols torch 2.14.1's libc10/libtorch_* do not
    define, _ZN3c104cuda9SetDeviceEa and _ZN3c105ErrorC2ENS_14SourceLocationESs (pre-C++11 std::string) among
    them; and it links libcudart.so.12, which a CUDA 13 torch does not bring: the loader stops there first."""
    xformers = _wheel("xformers", "0.0.29.post3", TORCH_PY)
    report = verify(python=TORCH_PY, frameworks="torch", env={"PYTHONPATH": str(xformers)}, gpu=False)
    (fw,) = report.frameworks
    assert (report.status, fw.status, fw.finding_code) == ("failed", "failed", "EXTENSION_IMPORT_FAILED")
    (ext,) = fw.extensions
    assert (ext["package"], ext["version"], ext["module"], ext["status"]) == ("xformers", "0.0.29.post3", "xformers",
                                                                             "failed")
    assert "PyTorch 2.6.0+cu124 with CUDA 1204 (you have 2.14.1+cu130)" in ext["error"]
    assert "caused by OSError: libcudart.so.12: cannot open shared object file" in ext["error"]
    assert fw.cause.startswith("xformers 0.0.29.post3 does not import beside torch 2.14.1+cu130: ImportError: "
                               "xFormers can't load C++/CUDA extensions.")
    assert fw.cpu_checked  # torch's own work ran first
    assert "  extension xformers 0.0.29.post3: failed" in report_lines(report)
    control = verify(python=TORCH_PY, frameworks="torch", gpu=False)  # the same torch without it
    assert (control.status, control.frameworks[0].extensions) == ("not_possible", [])


def _dist(root: Path, name: str, version: str, module: str, body: str) -> None:
    """An installed distribution ``name==version`` (its dist-info) whose module ``module`` runs ``body``."""
    info = root / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (root / f"{module}.py").write_text(body)


@pytest.mark.slow
def test_each_installed_extension_is_imported_after_torchs_work(tmp_path):
    """The CPU torch of this venv; torch-scatter whose import raises the loader's words, pyg-lib that imports: the
    first fails the check with its words, the second is listed as imported, and an extension not installed is not
    listed."""
    pytest.importorskip("torch")
    site = tmp_path / "site"
    _dist(site, "torch-scatter", "2.1.2", "torch_scatter", "raise OSError('/x/torch_scatter/_version_cuda.so: "
          "undefined symbol: _ZN3c1017RegisterOperatorsD1Ev')\n")
    _dist(site, "pyg-lib", "0.4.0", "pyg_lib", "VALUE = 1\n")
    fw = check(sys.executable, "torch", gpu_expected=False, timeout=300,
               env={**os.environ, "PYTHONPATH": str(site)})
    judged = [(e["package"], e["status"]) for e in fw.extensions]
    assert judged == [("torch-scatter", "failed"), ("pyg-lib", "imported")]
    assert fw.extensions[0]["error"] == ("OSError: /x/torch_scatter/_version_cuda.so: undefined symbol: "
                                         "_ZN3c1017RegisterOperatorsD1Ev")
    assert (fw.status, fw.finding_code) == ("failed", "EXTENSION_IMPORT_FAILED")
    assert fw.cause.startswith("torch-scatter 2.1.2 does not import beside torch ")
    clean = check(sys.executable, "torch", gpu_expected=False, timeout=300, env=dict(os.environ))
    assert clean.status == "not_possible" and clean.extensions == []


@pytest.mark.slow
def test_an_extension_that_kills_the_child_is_named(tmp_path):
    """The child's last word is the extension it was importing: a crash there is that extension's."""
    python = interpreter(tmp_path, [{"stage": "started"}, {"stage": "imported", "version": "2.5.1"},
                                    {"stage": "extension flash-attn"}], signal="SEGV")
    fw = check(python, "torch", gpu_expected=False, timeout=30, env=dict(os.environ))
    assert (fw.status, fw.finding_code) == ("failed", "EXTENSION_IMPORT_FAILED")
    assert fw.cause == "importing flash-attn crashed the child with SIGSEGV, after torch's work"


# what the child reported on a real H200 (tests/data/gpu_h200/verify-stack.json): cupy-cuda13x 14.2.0's array
# operation on the GPU against NumPy's on the CPU, after torch 2.11.0+cu130's convolution
H200_TORCH = next(f for f in json.loads((Path(__file__).parents[1] / "data" / "gpu_h200" / "verify-stack.json")
                                        .read_text())["data"]["frameworks"] if f["framework"] == "torch")

# the framework's status, the extensions' -> the report's status and finding (a framework's own failure stays)
JUDGED = [
    (H200_TORCH["status"], H200_TORCH["extensions"], "verified", None),
    ("not_possible", [{"package": "xformers", "version": "0.0.29.post3", "status": "imported"}], "not_possible", None),
    ("not_possible", [{"package": "xformers", "version": "0.0.29.post3", "status": "failed", "error": "ImportError: x"}],
     "failed", "EXTENSION_IMPORT_FAILED"),
    ("verified", [{"package": "flash-attn", "version": "2.8.3", "status": "wrong", "max_abs_error": 0.5}],
     "failed", "WRONG_RESULT"),
    ("failed", [{"package": "xformers", "version": "0.0.29.post3", "status": "failed", "error": "ImportError: x"}],
     "failed", "ARCH_UNSUPPORTED"),
]


@pytest.mark.parametrize("status, extensions, judged, code", JUDGED)
def test_judge_extensions(status, extensions, judged, code):
    fw = FrameworkReport(framework="torch", version="2.5.1", status=status, extensions=extensions,
                         finding_code="ARCH_UNSUPPORTED" if status == "failed" else None)
    judge_extensions(fw)
    assert (fw.status, fw.finding_code) == (judged, code)
    if code == "EXTENSION_IMPORT_FAILED":
        assert fw.cause == "xformers 0.0.29.post3 does not import beside torch 2.5.1: ImportError: x"
    if code == "WRONG_RESULT":
        assert fw.cause == "flash-attn 2.8.3's GPU operation differs from the CPU's by 0.5 (beside torch 2.5.1)"


@pytest.mark.slow
def test_the_onnx_model_the_child_builds_runs_in_onnxruntime(tmp_path):
    """The child writes its ONNX model (Z = X + Y) without the onnx package: the real onnxruntime 1.20.1 wheel (and
    numpy) loads and runs it on the CPU provider, which every onnxruntime has (the CUDA provider is the GPU test's)."""
    ort = _wheel("onnxruntime", "1.20.1", sys.executable)
    numpy = _wheel("numpy", "2.2.6", sys.executable)
    model = tmp_path / "add.onnx"
    model.write_bytes(child._onnx_add_model())
    code = ("import numpy as np, onnxruntime as ort, sys\n"
            "s = ort.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider'])\n"
            "print(s.run(None, {'X': np.arange(4, dtype=np.float32), 'Y': np.full(4, 0.5, np.float32)})[0].tolist())\n")
    done = subprocess.run([sys.executable, "-c", code, str(model)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": f"{ort}{os.pathsep}{numpy}"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[0.5, 1.5, 2.5, 3.5]"


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not HAS_GPU, reason="needs an NVIDIA GPU and driver")
def test_extension_operations_on_the_gpu_match_the_cpu():
    """On a GPU, each installed extension's smallest operation runs and is compared with the CPU (in the
    interpreter of $CUDAMATRIX_TORCH_CUDA_PYTHON, else this one)."""
    report = verify(python=TORCH_PY or sys.executable, frameworks="torch")
    fw = report.frameworks[0]
    assert fw.status == "verified", fw.cause
    if not fw.extensions:
        pytest.skip("no torch extension is installed in that interpreter")
    with_op = {name for names, _, op in child.EXTENSIONS if op is not None for name in names}
    for ext in fw.extensions:  # one with an operation ran it on the GPU within its tolerance; the rest imported
        assert ext["status"] == ("verified" if ext["package"] in with_op else "imported"), ext
    if any(e["status"] == "verified" and e["package"].startswith("cupy") for e in fw.extensions):
        # the maps are taken after the operations: cupy's own compiled modules are among them
        assert any("/cupy/" in path for path in getattr(fw, "_maps", None) or []), "no file of cupy is mapped"
