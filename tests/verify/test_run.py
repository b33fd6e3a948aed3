"""Tests of cudamatrix/verify/run.py.

verify: a real CPU build of torch in a child interpreter; stand-in frameworks that crash, hang or lie.

verify's verdicts, as tables: what the child reports (or how it dies) and the result the README's exit-code
table and the runtime's documented error strings imply.

Two kinds of real child: an interpreter stand-in (a shell script printing the child's JSON lines, for the
parent's reading of them), and the real child script with the real CPU build of torch made to look like a CUDA
build on a GPU (what this machine lacks), for the child's own checks.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.fakes import interpreter

from cudamatrix.errors import Exit
from cudamatrix.models import Driver, Environment, FrameworkReport, GpuInfo, Report
from cudamatrix.verify import child
from cudamatrix.verify.run import CHILD, MARK, check, classify, exit_code, gpu_present, overall, parse_events, verify

# --- verify --------------------------------------------------------------------------------------------------------

HAS_GPU = os.path.exists("/proc/driver/nvidia/version")


ROOT = Path(__file__).parent.resolve().parents[1]


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


# --- table verify --------------------------------------------------------------------------------------------------

HAS_TORCH = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode == 0


needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="the test extra's CPU build of torch is not installed here")


def run(tmp_path, lines, **kw) -> FrameworkReport:
    return check(interpreter(tmp_path, lines, **kw), "torch", gpu_expected=True, timeout=60, env=dict(os.environ))


def lib(file: str, version: str) -> dict:
    return {"file": file, "path": f"/x/{file}", "version": version}


# cuDNN API compatibility (cuDNN Developer Guide): a framework runs with the cuDNN major it was built with, and
# one process must not map two cuDNN copies. A verified convolution is still a failure when that is broken.
CUDNN = [
    ("9.1.0", [lib("libcudnn.so.9", "9.1.0")], "verified", None),
    ("9.1.0", [lib("libcudnn.so.9", "9.5.1")], "verified", None),
    ("9.1.0", [lib("libcudnn.so.8", "8.9.2")], "failed", "CUDNN_MISMATCH"),
    ("9.1.0", [lib("libcudnn.so.9", "9.1.0"), lib("libcudnn.so.8", "8.9.2")], "failed", "CUDNN_MISMATCH"),
    (None, [lib("libcudnn.so.9", "9.1.0"), lib("libcudnn.so.8", "8.9.2")], "failed", "CUDNN_MISMATCH"),
    (None, [lib("libcudnn.so.9", "9.1.0")], "verified", None),
    ("9.1.0", [lib("libcublas.so.12", "12.4.5")], "verified", None),
]


@pytest.mark.parametrize("compiled, mapped, status, code", CUDNN)
def test_cudnn_mapped_in_the_child(tmp_path, compiled, mapped, status, code):
    result = {"stage": "result", "status": "verified", "version": "2.5.1+cu121", "cudnn": "9.1.0",
              "max_abs_error": 1e-6, "mapped_libraries": mapped}
    if compiled:
        result["cudnn_compiled"] = compiled
    fw = run(tmp_path, [{"stage": "cpu_checked", "cpu_error": 0.0}, result])
    assert (fw.status, fw.finding_code) == (status, code)
    assert fw.cpu_checked is True and fw.max_abs_error == 1e-6


# CUDA Runtime API error strings (cudaErrorNoKernelImageForDevice "no kernel image is available for execution
# on the device", cudaErrorInsufficientDriver "CUDA driver version is insufficient for CUDA runtime version"),
# torch's "Found no NVIDIA driver on your system" and cuDNN's version check message.
WORDS = [
    ("CUDA error: no kernel image is available for execution on the device", "ARCH_UNSUPPORTED"),
    ("CUDA driver version is insufficient for CUDA runtime version", "DRIVER_TOO_OLD"),
    ("The NVIDIA driver on your system is too old (found version 11040)", "DRIVER_TOO_OLD"),
    ("cuDNN version incompatibility: PyTorch was compiled against (9, 1, 0) but found runtime version (8, 9, 2)",
     "CUDNN_MISMATCH"),
    ("CUDNN_STATUS_VERSION_MISMATCH", "CUDNN_MISMATCH"),
    ("Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a driver",
     "NO_DRIVER"),
    ("RuntimeError: No CUDA GPUs are available", "NO_GPU"),
    ("undefined symbol: cublasLtGetVersion", "LIBRARY_MISMATCH"),
    ("libcublasLt.so.12: cannot open shared object file: No such file or directory", "LIBRARY_MISSING"),
    ("CUDA out of memory. Tried to allocate 2.00 GiB", "GPU_OUT_OF_MEMORY"),
    ("all good", None),
    ("", None),
]


@pytest.mark.parametrize("text, code", WORDS)
def test_runtime_words_to_finding_codes(text, code):
    assert classify(text) == code


@pytest.mark.parametrize("text, code", WORDS[:3])
def test_a_failed_result_without_a_code_is_classified_by_its_cause(tmp_path, text, code):
    fw = run(tmp_path, [{"stage": "result", "status": "failed", "cause": text}])
    assert (fw.status, fw.finding_code, fw.cause) == ("failed", code, text)


# how the child ends -> the result: a crash is named by its signal, an exit by its status, each with the last
# stage reached, and the runtime's words in stderr give the finding code.
ENDINGS = [
    ({"rc": 1, "stderr": "CUDA driver version is insufficient for CUDA runtime version"},
     "the child exited with status 1 after stage 'imported'", "DRIVER_TOO_OLD"),
    ({"rc": 3, "stderr": "something else"}, "the child exited with status 3 after stage 'imported'", "VERIFY_CRASHED"),
    ({"signal": "SEGV"}, "the child crashed with SIGSEGV after stage 'imported'", "VERIFY_CRASHED"),
    ({"signal": "ABRT", "stderr": "no kernel image is available"},
     "the child crashed with SIGABRT after stage 'imported'", "ARCH_UNSUPPORTED"),
]


@pytest.mark.parametrize("how, cause, code", ENDINGS)
def test_how_the_child_ends(tmp_path, how, cause, code):
    fw = run(tmp_path, [{"stage": "started"}, {"stage": "imported", "version": "2.5.1"}], **how)
    assert (fw.status, fw.cause, fw.finding_code, fw.version) == ("failed", cause, code, "2.5.1")
    assert fw.stderr_tail == (how.get("stderr") or None)


def test_a_missing_interpreter_is_python_not_found(tmp_path):
    fw = check(str(tmp_path / "nope"), "torch", gpu_expected=True, timeout=10, env=dict(os.environ))
    assert (fw.status, fw.finding_code) == ("failed", "PYTHON_NOT_FOUND")
    assert fw.cause.startswith(f"could not start {tmp_path / 'nope'}: ")


def test_the_cpu_error_stands_in_when_no_gpu_comparison_ran(tmp_path):
    fw = run(tmp_path, [{"stage": "cpu_checked", "cpu_error": 2e-7},
                        {"stage": "result", "status": "not_possible", "cause": "no GPU", "cpu_error": 2e-7}])
    assert (fw.status, fw.finding_code, fw.max_abs_error, fw.cpu_checked) == ("not_possible", None, 2e-7, True)
    assert fw.stderr_tail is None


def test_other_output_of_the_framework_is_ignored():
    text = f"hello\n{MARK}{{\"stage\": \"started\"}}\n{MARK}not json\nwarning: x\n{MARK}{{\"stage\": \"result\"}}\n"
    assert parse_events(text) == [{"stage": "started"}, {"stage": "result"}]


# README, exit codes: 0 verified, 5 verification failed, 6 verification not possible here. One failed framework
# fails the whole report; one not possible (and none failed) makes it not possible.
OVERALL = [
    (["verified"], "verified", 0),
    (["verified", "verified"], "verified", 0),
    (["verified", "not_possible"], "not_possible", 6),
    (["not_possible", "failed"], "failed", 5),
    (["verified", "not_installed"], "failed", 5),
    (["failed"], "failed", 5),
]


@pytest.mark.parametrize("statuses, status, code", OVERALL)
def test_overall_status_and_exit_code(statuses, status, code):
    reports = [FrameworkReport(framework="torch", status=s) for s in statuses]
    assert overall(reports) == status
    assert exit_code(Report(status=status, frameworks=reports)) == code


DRESS = """
    import os, sys
    root = os.path.dirname(__path__[0])
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != root]
    del sys.modules["torch"]
    import torch as real  # the installed build (CPU or CUDA); it replaces this module in sys.modules
    real.version.cuda = "12.4"
    AVAILABLE, OFFSET = {available}, {offset}
    real.cuda.is_available = lambda: AVAILABLE
    def init():
        raise RuntimeError("Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU "
                           "and installed a driver")
    real.cuda.init = init
    real.cuda.get_device_name = lambda i=0: "NVIDIA H100 80GB HBM3"
    real.cuda.get_device_capability = lambda i=0: (9, 0)
    real.cuda.synchronize = lambda: None
    # a CUDA build asked for its cuDNN with no GPU behind it fails inside torch; the CPU build answers None
    real.backends.cudnn.version = lambda: None
    cpu = real.device("cpu")
    real.device = lambda *a, **k: cpu
    conv, calls = real.nn.functional.conv2d, []
    def conv2d(x, w, *a, **k):
        y = conv(x, w, *a, **k)
        if k.get("padding") == 1:
            calls.append(1)
            if len(calls) == 1:  # the "GPU" convolution; the CPU one that follows is exact
                y = y + OFFSET
        return y
    real.nn.functional.conv2d = conv2d
"""


def dressed(tmp_path: Path, available: bool, offset: float) -> dict:
    pkg = tmp_path / "dress" / "torch"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(textwrap.dedent(DRESS.format(available=available, offset=offset)))
    return {"PYTHONPATH": str(tmp_path / "dress")}


# fp32 with TF32 off: the GPU and the CPU sum in different orders, so results agree to 1e-3 relative to the
# output's magnitude; a larger difference is a wrong result (WRONG_RESULT, exit 5).
TOLERANCE = [
    (0.0, "verified", None),
    (1e-6, "verified", None),
    (0.5, "failed", "WRONG_RESULT"),
]


@needs_torch
@pytest.mark.installs
@pytest.mark.parametrize("offset, status, code", TOLERANCE)
def test_gpu_result_is_checked_against_the_cpu(tmp_path, offset, status, code):
    report = verify(frameworks="torch", timeout=240, gpu=True, env=dressed(tmp_path, True, offset))
    (fw,) = report.frameworks
    assert (fw.status, fw.finding_code) == (status, code), fw.cause
    assert fw.device_name == "NVIDIA H100 80GB HBM3" and fw.compute_capability == "9.0"
    assert fw.max_abs_error >= offset * 0.99
    if code:
        assert fw.cause.startswith("GPU and CPU results differ by ")


# a CUDA build that cannot reach the GPU: on a machine with a GPU that is a failure with the runtime's words
# (exit 5), on one without it is "not possible here" (exit 6), README exit-code table.
INIT = [
    (True, "failed", "NO_DRIVER", 5),
    (False, "not_possible", None, 6),
]


@needs_torch
@pytest.mark.installs
@pytest.mark.parametrize("gpu, status, code, exit", INIT)
def test_failed_cuda_init(tmp_path, gpu, status, code, exit):
    report = verify(frameworks="torch", timeout=240, gpu=gpu, env=dressed(tmp_path, False, 0.0))
    (fw,) = report.frameworks
    assert (fw.status, fw.finding_code, exit_code(report)) == (status, code, exit)
    if gpu:
        assert "Found no NVIDIA driver" in fw.cause


def test_mapped_entries_without_a_file_name_are_not_cudnn(tmp_path):
    mapped = [{"path": "/x/libfoo.so"}, lib("libcudnn.so.9", "9.1.0")]
    fw = run(tmp_path, [{"stage": "result", "status": "verified", "cudnn_compiled": "9.1.0",
                         "mapped_libraries": mapped}])
    assert (fw.status, fw.finding_code) == ("verified", None)


def multi_interpreter(tmp_path: Path, answers: dict[str, dict]) -> str:
    """An interpreter stand-in: for ``<child> <framework> <gpu flag>`` it prints that framework's result line and
    the flag it was given (so the test sees what the parent asked)."""
    script = tmp_path / "python"
    cases = "".join(f"  {name}) echo '{MARK}{json.dumps(dict(answer, stage='result'))}' ;;\n"
                    for name, answer in answers.items())
    script.write_text("#!/bin/sh\necho \"gpu flag $3\" >&2\ncase \"$2\" in\n" + cases +
                      f"  *) echo '{MARK}{json.dumps({'stage': 'result', 'status': 'not_installed'})}' ;;\nesac\n")
    script.chmod(0o755)
    return str(script)


ALL = [
    # installed answers -> frameworks reported for "all", overall status
    ({"torch": {"status": "verified"}}, ["torch"], "verified"),
    ({"torch": {"status": "verified"}, "jax": {"status": "not_possible", "cause": "no GPU"}}, ["torch", "jax"],
     "not_possible"),
    ({"tensorflow": {"status": "failed", "cause": "x"}}, ["tensorflow"], "failed"),
    ({}, ["all"], "failed"),
]


@pytest.mark.parametrize("answers, reported, status", ALL)
def test_verify_all_reports_the_installed_frameworks(tmp_path, answers, reported, status):
    report = verify(python=multi_interpreter(tmp_path, answers), frameworks="all", timeout=30, gpu=True)
    assert [f.framework for f in report.frameworks] == reported and report.status == status
    if reported == ["all"]:
        (fw,) = report.frameworks
        assert (fw.status, fw.finding_code) == ("failed", "NOT_INSTALLED")
        assert fw.cause.startswith("none of torch, tensorflow, jax is installed for ")


NAMES = [("torch", ["torch"]), (["jax", "torch"], ["jax", "torch"]), ("tensorflow", ["tensorflow"])]


@pytest.mark.parametrize("frameworks, reported", NAMES)
def test_verify_named_frameworks_are_reported_even_when_missing(tmp_path, frameworks, reported):
    report = verify(python=multi_interpreter(tmp_path, {"torch": {"status": "verified"}}), frameworks=frameworks,
                    timeout=30, gpu=False)
    assert [f.framework for f in report.frameworks] == reported
    assert report.status == ("verified" if reported == ["torch"] else "failed")


def test_the_gpu_expectation_and_environment_reach_the_child(tmp_path):
    from cudamatrix.models import Driver, Environment, GpuInfo

    script = tmp_path / "python"
    script.write_text("#!/bin/sh\necho \"" + MARK + "{\\\"stage\\\": \\\"result\\\", \\\"status\\\": \\\"failed\\\", "
                      "\\\"cause\\\": \\\"flag=$3 var=$CUDAMATRIX_TEST_VAR\\\"}\"\n")
    script.chmod(0o755)
    gpu_env = Environment(driver=Driver(status="ok", version="550.54.15"), gpus=[GpuInfo(name="H100")])
    no_gpu = Environment(driver=Driver(status="absent"))
    causes = [verify(python=str(script), frameworks="torch", timeout=30, environment=e,
                     env={"CUDAMATRIX_TEST_VAR": "set"}).frameworks[0].cause for e in (gpu_env, no_gpu)]
    assert causes == ["flag=1 var=set", "flag=0 var=set"]
    forced = verify(python=str(script), frameworks="torch", timeout=30, environment=no_gpu, gpu=True)
    assert forced.frameworks[0].cause == "flag=1 var="


@pytest.mark.slow
def test_a_child_that_hangs_is_stopped_and_named(tmp_path):
    script = tmp_path / "python"
    script.write_text(f"#!/bin/sh\necho '{MARK}{{\"stage\": \"imported\"}}'\nexec sleep 30\n")
    script.chmod(0o755)
    fw = check(str(script), "jax", gpu_expected=False, timeout=1, env=dict(os.environ))
    assert (fw.framework, fw.status, fw.finding_code) == ("jax", "failed", "VERIFY_TIMEOUT")
    assert fw.cause == "no result within 1s (hung after stage 'imported')"


def test_a_child_that_says_nothing(tmp_path):
    fw = run(tmp_path, [], rc=0)
    assert (fw.status, fw.finding_code, fw.cause) == ("failed", "VERIFY_CRASHED",
                                                      "the child exited with status 0 after stage 'start-up'")


RESULTS = [
    # the child's result line -> status, finding code, the stderr tail (kept whatever the result: issue 42)
    ({"status": "verified"}, "verified", None, "warn"),
    ({}, "failed", None, "warn"),
    ({"status": "failed", "cause": "x", "finding_code": "WRONG_RESULT"}, "failed", "WRONG_RESULT", "warn"),
    ({"status": "not_possible", "cause": "no GPU or driver here"}, "not_possible", None, "warn"),
]


@pytest.mark.parametrize("result, status, code, tail", RESULTS)
def test_the_result_line_is_read_as_written(tmp_path, result, status, code, tail):
    mapped = [lib("libcublas.so.12", "12.4.5")]
    fw = run(tmp_path, [dict(result, stage="result", mapped_libraries=mapped)], stderr="warn")
    assert (fw.framework, fw.status, fw.finding_code, fw.stderr_tail) == ("torch", status, code, tail)
    assert fw.mapped_libraries == mapped
    if status == "failed" and code is None and "cause" not in result:
        assert fw.cause is None


def test_a_cudnn_mismatch_says_why(tmp_path):
    fw = run(tmp_path, [{"stage": "result", "status": "verified", "cudnn_compiled": "9.1.0",
                         "mapped_libraries": [lib("libcudnn.so.8", "8.9.2")]}], stderr="warn")
    assert fw.cause == "more than one cuDNN, or another major than the build's, is mapped"
    assert fw.stderr_tail == "warn"


def test_frameworks_default_to_all(tmp_path):
    # README: verify checks every installed framework unless --framework names some
    report = verify(python=multi_interpreter(tmp_path, {"jax": {"status": "verified"}}), timeout=30, gpu=True)
    assert ([f.framework for f in report.frameworks], report.status) == (["jax"], "verified")


@pytest.mark.slow
def test_the_timeout_reaches_the_child(tmp_path):
    script = tmp_path / "python"
    script.write_text(f"#!/bin/sh\n[ \"$1\" = '{CHILD}' ] || exit 1\necho '{MARK}{{\"stage\": \"imported\"}}'\n"
                      "exec sleep 8\n")
    script.chmod(0o755)
    (fw,) = verify(python=str(script), frameworks="jax", timeout=1, gpu=False).frameworks
    assert (fw.finding_code, fw.cause) == ("VERIFY_TIMEOUT", "no result within 1s (hung after stage 'imported')")


def test_the_child_runs_the_child_script_from_the_root_folder(tmp_path, monkeypatch):
    # from "/", a folder named like the framework in the caller's folder (on a PYTHONPATH of ".") cannot shadow it
    script = tmp_path / "python"
    script.write_text("#!/bin/sh\necho \"" + MARK + "{\\\"stage\\\": \\\"result\\\", \\\"status\\\": \\\"failed\\\", "
                      "\\\"cause\\\": \\\"$1 in $(pwd)\\\"}\"\n")
    script.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    fw = check(str(script), "torch", gpu_expected=False, timeout=30, env=dict(os.environ))
    assert fw.cause == f"{CHILD} in /"


STDERR = [
    # what the child wrote on stderr -> the tail kept with a failure: its last 20 lines, blank ends dropped
    ("", None),
    ("\n  \n", None),
    ("one\ntwo\n", "one\ntwo"),
    ("".join(f"line {i}\n" for i in range(1, 26)), "\n".join(f"line {i}" for i in range(6, 26))),
]


@pytest.mark.parametrize("stderr, tail", STDERR)
def test_the_stderr_tail_of_a_failure(tmp_path, stderr, tail):
    script = tmp_path / "python"
    (tmp_path / "err.txt").write_text(stderr)
    script.write_text(f"#!/bin/sh\ncat '{tmp_path / 'err.txt'}' >&2\nexit 1\n")
    script.chmod(0o755)
    fw = check(str(script), "torch", gpu_expected=False, timeout=30, env=dict(os.environ))
    assert (fw.finding_code, fw.stderr_tail) == ("VERIFY_CRASHED", tail)


# verify() compares the loader model's predictions for the target interpreter with the files its child mapped.
# Real ELF files (gcc): a TensorFlow layout whose CUDA libraries load at first use (dlopen by SONAME), a program
# with DT_RPATH $ORIGIN/../lib (as conda's python is linked), a cuDNN on LD_LIBRARY_PATH, and the file the child
# "mapped" instead: libcudnn.so.9.3.0, whose DT_SONAME is libcudnn.so.9. ld.so(8): a DT_RPATH of the program is
# searched before LD_LIBRARY_PATH when the object has no DT_RUNPATH; a file is the same library as another when
# their SONAMEs match, whatever its file name.
TF_REQUIRES = ['nvidia-cuda-runtime-cu12==12.5.82; extra == "and-cuda"',
               'nvidia-cudnn-cu12==9.3.0.75; extra == "and-cuda"']


@pytest.mark.slow
def test_verify_compares_the_model_with_what_the_child_mapped(tmp_path):
    from support.fakes import build_lib

    sp = tmp_path / "site-packages"
    build_lib(sp / "tensorflow" / "python", "_pywrap_tensorflow_internal.so", "int f(void) { return 0; }\n")
    cudart = build_lib(tmp_path / "env" / "lib", "libcudart.so.12", "int g(void) { return 0; }\n")
    on_path = build_lib(tmp_path / "ld", "libcudnn.so.9", "int h(void) { return 0; }\n")
    other = build_lib(tmp_path / "other", "libcudnn.so.9.3.0", "int k(void) { return 1; }\n", soname="libcudnn.so.9")
    program = tmp_path / "env" / "bin" / "python3"
    program.parent.mkdir(parents=True)
    (tmp_path / "main.c").write_text("int main(void) { return 0; }\n")
    subprocess.run(["gcc", "-o", str(program), str(tmp_path / "main.c"), "-Wl,--disable-new-dtags,-rpath,$ORIGIN/../lib"],
                   check=True, capture_output=True, timeout=60)
    probe = {"executable": str(program), "version": "3.11.7", "site_packages": [str(sp)],
             "dists": [{"name": "tensorflow", "version": "2.18.0", "requires": TF_REQUIRES},
                       {"name": "nvidia-cudnn-cu12", "version": "9.3.0.75", "requires": []},
                       {"name": "nvidia-cuda-runtime-cu12", "version": "12.5.82", "requires": []}]}
    result = {"stage": "result", "status": "verified", "maps": [str(cudart), str(other)]}
    (tmp_path / "probe.json").write_text(json.dumps(probe))
    (tmp_path / "child.out").write_text(f"{MARK}{json.dumps({'stage': 'imported'})}\n{MARK}{json.dumps(result)}\n")
    script = tmp_path / "python"  # the child script gets the child's lines; anything else (the probe) the probe's
    script.write_text(f"#!/bin/sh\nif [ \"$1\" = '{CHILD}' ]; then cat '{tmp_path / 'child.out'}'; "
                      f"else cat '{tmp_path / 'probe.json'}'; fi\n")
    script.chmod(0o755)
    report = verify(python=str(script), frameworks="tensorflow", timeout=30, gpu=True,
                    env={"LD_LIBRARY_PATH": str(tmp_path / "ld")})
    (fw,) = report.frameworks
    assert (fw.framework, fw.status) == ("tensorflow", "verified")
    assert fw.loads_compared == [
        {"soname": "libcudart.so.12", "predicted": str(cudart), "rule": "DT_RPATH of python3 (the program)",
         "when": "first use", "mapped": str(cudart), "agree": True},
        {"soname": "libcudnn.so.9", "predicted": str(on_path), "rule": "LD_LIBRARY_PATH", "when": "first use",
         "mapped": str(other), "agree": False},
    ]
    assert fw.model_errors == [{"soname": "libcudnn.so.9", "predicted": str(on_path), "mapped": str(other),
                                "rule": "LD_LIBRARY_PATH"}]
