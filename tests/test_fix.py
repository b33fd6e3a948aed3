"""fix's human output: the plan printed once at the prompt, verify's library versions read right."""
from __future__ import annotations

import contextlib
import io
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from support.fakes import HAVE_GCC, build_lib, run_cli

from cudamatrix.models import FrameworkReport, Report
from cudamatrix.render import human_report
from cudamatrix.verify import child

ROOT = Path(__file__).resolve().parents[1]

NCCL = """
int ncclGetVersion(int *version) { *version = CODE; return 0; }
"""


def _report_text(report: Report) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        human_report(report)
    return out.getvalue()


def test_cudnn_comes_from_the_mapped_library_and_soname_numbers_are_not_versions():
    fw = FrameworkReport(framework="torch", status="verified", version="2.14.1", cuda="13.0", cudnn=None,
                         mapped_libraries=[
                             {"path": "/s/nvidia/cudnn/lib/libcudnn.so.9", "file": "libcudnn.so.9",
                              "version": "9.24.0", "version_source": "library"},
                             {"path": "/s/nvidia/nccl/lib/libnccl.so.2", "file": "libnccl.so.2", "version": "2",
                              "version_source": "soname"},
                             {"path": "/s/nvidia/cu13/lib/libcublas.so.13", "file": "libcublas.so.13",
                              "version": "13.1.0.3", "version_source": "wheel nvidia-cublas"}])
    text = _report_text(Report(status="verified", frameworks=[fw]))
    assert "cuDNN 9.24.0 (mapped)" in text and "cuDNN -" not in text
    assert "libnccl.so.2 2\n" not in text and "soname 2; the library reports no version" in text
    assert "13.1.0.3 (from wheel nvidia-cublas)" in text


@pytest.mark.skipif(not HAVE_GCC, reason="gcc is needed to build the fake NCCL")
@pytest.mark.parametrize("code,version", [(22307, "2.23.7"), (2804, "2.8.4")])
def test_nccl_answers_its_own_version(tmp_path, code, version):
    # nccl.h: NCCL_VERSION(X,Y,Z) is X*1000+Y*100+Z up to 2.8, X*10000+Y*100+Z from 2.9
    lib = build_lib(tmp_path, "libnccl.so.2", NCCL, CODE=code)
    assert child._lib_version(str(lib), "libnccl.so.2") == (version, "library")


def test_a_wheel_library_without_a_version_call_reads_its_wheel(tmp_path):
    site = tmp_path / "site-packages"
    lib = site / "nvidia" / "nccl" / "lib" / "libnccl.so.2"
    lib.parent.mkdir(parents=True)
    lib.write_bytes(b"not an ELF file")  # dlopen fails: the version comes from the wheel that owns the file
    info = site / "nvidia_nccl_cu12-2.21.5.dist-info"
    info.mkdir()
    (info / "RECORD").write_text("nvidia/nccl/lib/libnccl.so.2,sha256=x,15\n")
    assert child._lib_version(str(lib), "libnccl.so.2") == ("2.21.5", "wheel nvidia-nccl-cu12")
    other = tmp_path / "usr" / "libnccl.so.2"
    other.parent.mkdir()
    other.write_bytes(b"x")
    assert child._lib_version(str(other), "libnccl.so.2") == ("2", "soname")


@pytest.mark.installs
def test_the_prompt_shows_the_plan_once(template_venv, tmp_path):
    """At a terminal (a pseudo-terminal here) fix prints the plan, asks, and on "n" changes nothing."""
    from support.localindex import LocalIndex, build_wheel, copy_venv

    py = copy_venv(template_venv, tmp_path / "venv")
    cpu = build_wheel(tmp_path / "w", "torch", "2.4.1+cpu")
    subprocess.run([str(py), "-m", "pip", "install", "--no-index", "--no-deps", str(cpu)], check=True,
                   capture_output=True, timeout=300)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    env.update({"PIP_CONFIG_FILE": os.devnull, "XDG_STATE_HOME": str(tmp_path / "state"),
                "XDG_CACHE_HOME": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)})
    target = ["--python", str(py), "--gpu", "Tesla T4", "--driver", "550.54.14"]
    solved = subprocess.run([sys.executable, "-m", "cudamatrix", "solve", *target, "--json"], capture_output=True,
                            text=True, env=env, cwd=ROOT, timeout=300)
    for pin in json.loads(solved.stdout)["data"]["solution"]["packages"]:  # every file the plan needs is listed
        build_wheel(tmp_path / "index", pin["name"], pin["version"])
    main, side = pty.openpty()
    os.write(main, b"n\n")
    with LocalIndex(tmp_path / "index") as index:
        env["PIP_INDEX_URL"] = index.url + "/simple"
        r = subprocess.run([sys.executable, "-m", "cudamatrix", "fix", *target, "--installer", "pip",
                            "--mirror", index.url + "/whl", "--allow-http"], stdin=side, capture_output=True,
                           text=True, env=env, cwd=ROOT, timeout=300)
    os.close(main)
    os.close(side)
    assert "Apply this plan?" in r.stderr, r.stderr
    assert r.stdout.count("1. [install]") == 1, r.stdout
    assert r.returncode == 1 and "cancelled: nothing was changed" in r.stdout


@pytest.mark.slow
def test_version_flag():
    r = run_cli(["--version"], env=dict(os.environ), text=True)  # in this process
    assert r.returncode == 0 and r.stdout.startswith("cudamatrix ") and "matrix 20" in r.stdout
    from importlib import metadata

    assert metadata.version("cudamatrix") in r.stdout


def test_summary_is_the_text_the_command_prints():
    """FixResult.summary() joins the lines the command prints (render.fix_lines); nothing is captured from stdout."""
    from cudamatrix.fix import FixResult
    from cudamatrix.models import Plan, Step
    from cudamatrix.render import fix_lines, human_fix

    plan = Plan(python="/v/bin/python", steps=[Step(kind="install", argv=["pip", "install", "torch==2.5.1"],
                                                    reason="install the solved set with pip: torch 2.5.1 (new)")])
    result = FixResult(python="/v/bin/python", status="dry_run", plan=plan, messages=["dry run: nothing was changed"])
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        human_fix(result)
    assert printed.getvalue() == "\n".join(fix_lines(result)) + "\n"
    assert result.summary() == str(result) == printed.getvalue().rstrip()
    assert result.summary().splitlines() == [
        "python: /v/bin/python", "1. [install] install the solved set with pip: torch 2.5.1 (new)",
        "     pip install torch==2.5.1", "dry run: nothing was changed"]


def test_fix_for_another_interpreter_prints_commands_that_run_there(monkeypatch):
    """fix(python=X): the messages, what is left and the plan's remedies carry X (issue #26: pasted as printed,
    `pip install` and `cudamatrix fix` changed the tool's own venv)."""
    import importlib
    import shlex

    from cudamatrix.models import Finding, Plan, Remedy
    from cudamatrix.safe.shells import Said, pip, tool

    fix_module = importlib.import_module("cudamatrix.fix")
    x = "/srv/the env/bin/python"
    q = shlex.quote(x)

    class Session:
        def __init__(self, options):
            self.options = options

        def run(self):
            result = fix_module.FixResult(python=x, status="dry_run", plan=Plan(python=x, remedies=[
                Remedy("TORCHVISION_MISMATCH", "t", "not_fixable",
                       Said("not fixable here: ", pip("install", "torchvision==0.20.1"),
                            " (the solved set leaves it as it is)"))]))
            result.messages = [fix_module._path_needs({"A": "b"})]
            result.left = [Finding("CUDNN_MISMATCH", "error", "t", fix=Said("reinstall it: ", tool("fix")))]
            return result

    monkeypatch.setattr(fix_module, "_Session", Session)
    out = fix_module.fix(python=x, dry_run=True)
    assert out.messages == [f"the library search path needs: A=b (cudamatrix env --python {q}, or fix "
                            "--write-activation)"]
    assert out.left[0].fix == f"reinstall it: cudamatrix fix --python {q}"
    assert out.plan.remedies[0].detail.startswith(f"not fixable here: {q} -m pip install torchvision==0.20.1")
    assert f"{q} -m pip install" in out.summary()
    here = fix_module.fix(dry_run=True)  # this interpreter: the commands stay as written
    assert "cudamatrix env," in here.messages[0]


def test_what_is_left_after_a_fix_is_answered_by_the_remedy_for_its_own_subject():
    """fix._left matches a finding left after the fix to the plan's remedy by code and subject (the distribution the
    finding is about), not by its words: the title quotes the version, which the fix changed. Before, the title
    missed and the first remedy of the code answered: cuDNN's step for the cuBLAS finding."""
    import importlib

    from cudamatrix.models import Environment, Finding, Plan, PythonInfo, Remedy

    fix_module = importlib.import_module("cudamatrix.fix")
    plan = Plan(python="/p", remedies=[
        Remedy("LIBRARY_MISMATCH", "nvidia-cudnn-cu12 9.0.0 is older than torch needs", "install",
               "install nvidia-cudnn-cu12 9.1.0.70"),
        Remedy("LIBRARY_MISMATCH", "nvidia-cublas-cu12 12.1.0 is older than torch needs", "install",
               "install nvidia-cublas-cu12 12.4.5.8")])
    after = [Finding("LIBRARY_MISMATCH", "error", "nvidia-cublas-cu12 12.4.5.8 is older than torch needs",
                     fix="pip install nvidia-cublas-cu12==12.6.4.1")]
    env = Environment(python=PythonInfo(executable="/p"),
                      packages={"nvidia-cublas-cu12": "12.4.5.8", "nvidia-cudnn-cu12": "9.1.0.70", "torch": "2.5.1"})
    left = fix_module._left(after, env, plan)
    assert [f.fix for f in left] == ["still present after: install nvidia-cublas-cu12 12.4.5.8; pip install "
                                     "nvidia-cublas-cu12==12.6.4.1"]
