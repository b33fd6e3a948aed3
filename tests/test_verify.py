"""verify: a real CPU build of torch in a child interpreter; stand-in frameworks that crash, hang or lie."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cudamatrix.verify import child
from cudamatrix.errors import Exit
from cudamatrix.models import Driver, Environment, GpuInfo
from cudamatrix.verify.run import classify, exit_code, gpu_present, verify

HAS_GPU = os.path.exists("/proc/driver/nvidia/version")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def torch_python(tmp_path_factory) -> str:
    """An interpreter with the CPU build of torch: this one (the test extra installs it), else a venv."""
    ok = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode == 0
    if ok:
        return sys.executable
    venv = tmp_path_factory.mktemp("torchvenv") / "v"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = str(venv / "bin" / "python")
    r = subprocess.run([py, "-m", "pip", "install", "torch==2.13.0"], capture_output=True, timeout=900)
    if r.returncode != 0:
        pytest.skip("torch==2.13.0 could not be installed here")
    return py


def _stand_in(tmp_path: Path, body: str) -> dict:
    """A fake ``torch`` package first on PYTHONPATH, for the child to import."""
    pkg = tmp_path / "fake" / "torch"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(textwrap.dedent(body))
    return {"PYTHONPATH": str(tmp_path / "fake")}


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cudamatrix", *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, **(env or {})}, timeout=300)


def test_reference_convolution_is_a_real_convolution():
    x = [[[[1.0, 2.0, 0.0], [0.0, 1.0, 3.0], [2.0, 0.0, 1.0]]]]  # N=1 C=1 3x3
    w = [[[[1.0, 0.0], [0.0, -1.0]]]]  # K=1 C=1 2x2
    assert child.reference_conv(x, w) == [[[[0.0, -1.0], [0.0, 0.0]]]]


@pytest.mark.slow
@pytest.mark.skipif(HAS_GPU, reason="checks the no-GPU path")
def test_cpu_build_without_gpu_is_not_possible_here_with_the_cpu_path_checked(torch_python):
    report = verify(python=torch_python, frameworks="torch", timeout=240)
    (fw,) = report.frameworks
    assert report.status == "not_possible" and exit_code(report) == Exit.VERIFY_NOT_POSSIBLE == 6
    assert fw.cpu_checked and fw.version.startswith("2.13.0")
    assert fw.max_abs_error is not None and fw.max_abs_error < 1e-3
    assert "CPU path" in fw.cause


@pytest.mark.slow
def test_cpu_build_on_a_gpu_machine_is_cpu_only_build(torch_python):
    cuda = subprocess.run([torch_python, "-c", "import torch; print(torch.version.cuda)"], capture_output=True,
                          text=True, timeout=300).stdout.strip()
    if cuda not in ("", "None"):
        pytest.skip(f"the torch here is a CUDA {cuda} build: the CPU-build case needs the CPU wheel")
    report = verify(python=torch_python, frameworks=["torch"], timeout=240, gpu=True)
    assert report.status == "failed" and exit_code(report) == 5
    assert report.frameworks[0].finding_code == "CPU_ONLY_BUILD"
    assert report.frameworks[0].cpu_checked


@pytest.mark.slow
def test_all_leaves_out_frameworks_that_are_not_installed(torch_python):
    report = verify(python=torch_python, frameworks="all", timeout=240, gpu=False)
    assert [f.framework for f in report.frameworks] == ["torch"]
    missing = verify(python=torch_python, frameworks="tensorflow", timeout=60, gpu=False)
    assert missing.status == "failed" and missing.frameworks[0].status == "not_installed"


def test_a_framework_that_aborts_on_import_is_a_failed_result(tmp_path):
    env = _stand_in(tmp_path, "import os\nos.abort()\n")
    report = verify(frameworks="torch", timeout=60, gpu=False, env=env)
    (fw,) = report.frameworks
    assert report.status == "failed" and exit_code(report) == 5
    assert "SIGABRT" in fw.cause and "'started'" in fw.cause  # it died while importing
    assert fw.finding_code == "VERIFY_CRASHED"


@pytest.mark.slow
def test_a_framework_that_hangs_is_killed_and_failed(tmp_path):
    env = _stand_in(tmp_path, "import time\ntime.sleep(120)\n")
    report = verify(frameworks="torch", timeout=3, gpu=False, env=env)
    (fw,) = report.frameworks
    assert report.status == "failed" and fw.finding_code == "VERIFY_TIMEOUT"
    assert "no result within 3s" in fw.cause


@pytest.mark.slow
def test_a_framework_whose_cpu_convolution_is_wrong_fails(tmp_path):
    env = _stand_in(tmp_path, """
        __version__ = "0.0+fake"
        class version: cuda = None
        class _Flags: pass
        class backends:
            cudnn = _Flags()
            class cuda:
                matmul = _Flags()
        float32 = "f32"
        def tensor(x, dtype=None):
            return x
        class _Zero:
            def __init__(self, x, w):
                self.shape = (len(x), len(w), len(x[0][0]) - len(w[0][0]) + 1)
            def tolist(self):
                n, k, s = self.shape
                return [[[[0.0] * s for _ in range(s)] for _ in range(k)] for _ in range(n)]
        class nn:
            class functional:
                @staticmethod
                def conv2d(x, w, **kw):
                    return _Zero(x, w)
    """)
    report = verify(frameworks="torch", timeout=60, gpu=False, env=env)
    (fw,) = report.frameworks
    assert report.status == "failed" and not fw.cpu_checked
    assert "differs from the reference" in fw.cause


def test_classify_maps_runtime_words_to_finding_codes():
    assert classify("CUDA error: no kernel image is available for execution on the device") == "ARCH_UNSUPPORTED"
    assert classify("CUDA driver version is insufficient for CUDA runtime version") == "DRIVER_TOO_OLD"
    assert classify("RuntimeError: cuDNN version incompatibility: PyTorch was compiled against (9, 1, 0)") == "CUDNN_MISMATCH"
    assert classify("all good") is None


def test_gpu_present_reads_the_environment():
    env = Environment(driver=Driver(version="550.54", status="ok"), gpus=[GpuInfo(name="H100")])
    assert gpu_present(env) is True
    assert gpu_present(Environment(driver=Driver(status="absent"))) is False


@pytest.mark.slow
@pytest.mark.skipif(HAS_GPU, reason="checks the no-GPU path")
def test_cli_verify_json_exit_6(torch_python):
    r = _cli("verify", "--framework", "torch", "--json", "--python", torch_python, "--timeout", "240")
    assert r.returncode == 6, r.stderr
    out = json.loads(r.stdout)
    assert set(out) == {"schema_version", "command", "status", "exit_code", "data", "errors"}
    assert out["status"] == "verify_not_possible" and out["data"]["frameworks"][0]["cpu_checked"] is True


@pytest.mark.slow
def test_cli_verify_crash_exit_5(tmp_path):
    env = _stand_in(tmp_path, "import os\nos.abort()\n")
    r = _cli("verify", "--framework", "torch", "--timeout", "60", env=env)
    assert r.returncode == 5
    assert "SIGABRT" in r.stdout + r.stderr


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs an NVIDIA GPU and driver")
def test_gpu_convolution_verifies(torch_python):
    report = verify(python=torch_python, frameworks="torch", timeout=300)
    fw = report.frameworks[0]
    assert report.status == "verified", fw.cause
    assert fw.max_abs_error < 1e-3 and fw.time_to_first_result_s > 0 and fw.cudnn
    assert any(m["file"].startswith("libcudnn") for m in fw.mapped_libraries)
