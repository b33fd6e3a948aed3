"""Tests of cudamatrix/install/apply.py.

plan + apply against a real pip, a throwaway venv and a PEP 503 index served on loopback.

apply, restore and rollback, fast and in this process, with real uv: a bare venv in tmp_path (a real
interpreter, a real site-packages, the real snapshot probe; no pip in it), real wheels (tests/support/localindex.py),
a real journal (saved wheels repacked from the installed files) and real ``uv pip`` for the starting set, the
plans' steps and the rollback, so one test takes tens of milliseconds instead of pip's seconds. Each test asserts
the files site-packages holds afterwards, the exact commands the rollback ran, and what the error, the result
and the journal say. uv never reaches the network here (``UV_OFFLINE``): the plans name wheel folders. Plans run by
pip (``--report`` dry runs, ``uninstall -y``) are run with real pip in tests/install/test_undo.py and
tests/install/test_apply.py (slow); here pip's restore commands are only seen failing in a venv without pip.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import venv as venv_inproc
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from support.interrupt import WHEN_RECORDED
from support.localindex import LocalIndex, build_wheel, copy_venv, pip_list
from support.uvtool import IN_CI, UV_DIR, with_uv

from cudamatrix import proc
from cudamatrix.errors import Exit, InstallFailed, UsageError
from cudamatrix.install import apply as apply_mod
from cudamatrix.install import journal as journals
from cudamatrix.install.apply import (
    _saved,
    _source,
    apply,
    diff,
    installer_error,
    predicted_changes,
    restore,
    rollback,
    snapshot,
    touched_names,
)
from cudamatrix.install.plan import make_plan, rewrite_mirror
from cudamatrix.models import Environment, InstalledDist, Pin, Plan, Removal, Solution, Step
from cudamatrix.proc import Result

# --- plan apply ----------------------------------------------------------------------------------------------------

TORCH_INDEX = "https://download.pytorch.org/whl/cu121"


SOLVED = [Pin("torch", "2.5.1+cu121", index_url=TORCH_INDEX), Pin("nvidia-cudnn-cu12", "9.1.0.70"),
          Pin("nvidia-cublas-cu12", "12.1.3.1")]


def _solution(**kw) -> Solution:
    base = dict(request=["torch"], targets=["local"], packages=SOLVED, to_install=SOLVED,
                pip_args=["--extra-index-url", TORCH_INDEX] + [p.requirement() for p in SOLVED])
    base.update(kw)
    return Solution(**base)


def test_plan_pip_argv_targets_the_interpreter_and_only_adds_index_args():
    env = Environment(packages={"torch": "2.5.1+cpu"})
    plan = make_plan(env, _solution(), python="/venv/bin/python", installer="pip")
    install = [s for s in plan.steps if s.kind == "install"]
    assert len(install) == 1 and not plan.nothing_to_do
    assert install[0].argv == ["/venv/bin/python", "-m", "pip", "install", "--extra-index-url", TORCH_INDEX,
                               "torch==2.5.1+cu121", "nvidia-cudnn-cu12==9.1.0.70", "nvidia-cublas-cu12==12.1.3.1"]
    assert "torch 2.5.1+cpu -> 2.5.1+cu121" in install[0].reason
    assert "--index-url" not in install[0].argv  # the user's own index configuration stays in charge


def test_plan_uv_backend_and_mirror():
    plan = make_plan(Environment(), _solution(), python="/p/python", installer="uv",
                     mirror="https://mirror.example/pytorch")
    argv = plan.steps[0].argv
    assert argv[:5] == ["uv", "pip", "install", "--python", "/p/python"]
    assert "https://mirror.example/pytorch/cu121" in argv
    assert rewrite_mirror("https://download.pytorch.org/whl/cpu", "http://127.0.0.1:1/whl/") == "http://127.0.0.1:1/whl/cpu"
    assert rewrite_mirror("https://other.example/simple", "http://m") == "https://other.example/simple"


def test_plan_refuses_plain_http_unless_allowed():
    with pytest.raises(UsageError, match="not https"):
        make_plan(Environment(), _solution(), python="p", installer="pip", mirror="http://127.0.0.1:9/whl")
    plan = make_plan(Environment(), _solution(), python="p", installer="pip", mirror="http://127.0.0.1:9/whl",
                     allow_http=True)
    assert "http://127.0.0.1:9/whl/cu121" in plan.steps[0].argv


def test_plan_minimal_change_and_nothing_to_do():
    env = Environment(packages={"torch": "2.5.1+cu121", "nvidia-cublas-cu12": "12.1.3.1", "nvidia-cudnn-cu12": "8.9.2.26"})
    drift = _solution(to_install=[SOLVED[1]])
    plan = make_plan(env, drift, python="p", installer="pip")
    assert plan.steps[0].argv[-1] == "nvidia-cudnn-cu12==9.1.0.70"
    assert not any(a.startswith("torch") for a in plan.steps[0].argv)
    same = _solution(to_install=[], unchanged=True, env={"LD_LIBRARY_PATH": "/x"})
    plan = make_plan(env, same, python="p", installer="pip")
    assert plan.nothing_to_do and [s.kind for s in plan.steps] == ["env", "verify"]
    assert apply(plan).ok  # nothing to run: no snapshot, no subprocess


def test_diff_names_added_removed_changed():
    a = [InstalledDist("torch", "2.5.1+cpu"), InstalledDist("six", "1.0")]
    b = [InstalledDist("torch", "2.5.1+cu121"), InstalledDist("nvidia-cudnn-cu12", "9")]
    d = diff(a, b)
    assert [x.name for x in d["added"]] == ["nvidia-cudnn-cu12"]
    assert [x.name for x in d["removed"]] == ["six"]
    assert [(x.name, x.version) for x in d["changed"]] == [("torch", "2.5.1+cpu")]


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> Path:
    """The stand-in wheels: a CPU torch, the cu121 torch and its nvidia-* wheels, an older cuDNN."""
    w = tmp_path_factory.mktemp("wheels")
    build_wheel(w, "torch", "2.5.1+cpu")
    build_wheel(w, "torch", "2.5.1+cu121", requires=["nvidia-cudnn-cu12==9.1.0.70", "nvidia-cublas-cu12==12.1.3.1"])
    build_wheel(w, "nvidia-cudnn-cu12", "8.9.2.26", requires=["nvidia-cublas-cu12"],
                files={"nvidia/cudnn/lib/libcudnn.so.8": "stand-in"})
    build_wheel(w, "nvidia-cudnn-cu12", "9.1.0.70", requires=["nvidia-cublas-cu12"],
                files={"nvidia/cudnn/lib/libcudnn.so.9": "stand-in"})
    build_wheel(w, "nvidia-cublas-cu12", "12.1.3.1", files={"nvidia/cublas/lib/libcublas.so.12": "stand-in"})
    return w


@pytest.fixture()
def venv(template_venv, tmp_path, monkeypatch):
    """A fresh venv, with pip reading only the loopback index that the test sets (PIP_INDEX_URL)."""
    py = copy_venv(template_venv, tmp_path / "venv")
    for k in list(os.environ):
        if k.startswith(("PIP_", "UV_")):
            monkeypatch.delenv(k)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_CACHE_DIR", str(tmp_path / "pipcache"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # the install journal
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    monkeypatch.setenv("PIP_DEFAULT_TIMEOUT", "5")
    monkeypatch.setenv("PIP_RETRIES", "0")
    return py


def _use_index(monkeypatch, index: LocalIndex) -> dict:
    monkeypatch.setenv("PIP_INDEX_URL", index.url + "/simple")
    return dict(os.environ)


def _start(py: Path, env: dict, *reqs: str) -> list[dict]:
    import subprocess

    subprocess.run([str(py), "-m", "pip", "install", "--no-deps", *reqs], env=env, check=True,
                   capture_output=True, timeout=300)
    return pip_list(py, env)


def _plan(py: Path, index: LocalIndex, pins=SOLVED) -> Plan:
    env = Environment(packages={d.name: d.version for d in snapshot(str(py))})
    return make_plan(env, _solution(to_install=list(pins)), python=str(py), installer="pip",
                     mirror=index.url + "/whl", allow_http=True)


@pytest.mark.installs
def test_apply_turns_the_inconsistent_set_into_the_solved_set(venv, wheels, monkeypatch):
    with LocalIndex(wheels) as index:
        env = _use_index(monkeypatch, index)
        _start(venv, env, "torch==2.5.1+cpu", "nvidia-cudnn-cu12==8.9.2.26")
        plan = _plan(venv, index)
        lines: list[tuple[str, str]] = []
        applied = apply(plan, on_progress=lambda e, t: lines.append((e, t)))
    got = {d["name"]: d["version"] for d in pip_list(venv, env)}
    assert got["torch"] == "2.5.1+cu121"
    assert got["nvidia-cudnn-cu12"] == "9.1.0.70" and got["nvidia-cublas-cu12"] == "12.1.3.1"
    assert applied.ok and {d.name for d in applied.after} >= {"torch", "nvidia-cublas-cu12"}
    assert ("torch", "2.5.1+cpu") in {(d.name, d.version) for d in applied.before}
    assert any(e == "output" for e, _ in lines)  # the installer's lines reached the progress callback
    assert any("/whl/cu121/" in p for p in index.served)  # the mirrored framework index was used


@pytest.mark.installs
def test_apply_rolls_back_when_a_wheel_fails_to_install(venv, wheels, tmp_path, monkeypatch):
    bad = tmp_path / "bad"
    bad.mkdir()
    for w in wheels.glob("*.whl"):
        if not w.name.startswith("torch-2.5.1+cu121"):
            (bad / w.name).write_bytes(w.read_bytes())
    build_wheel(bad, "torch", "2.5.1+cu121", corrupt=True,
                requires=["nvidia-cudnn-cu12==9.1.0.70", "nvidia-cublas-cu12==12.1.3.1"])
    with LocalIndex(bad) as index:
        env = _use_index(monkeypatch, index)
        before = _start(venv, env, "torch==2.5.1+cpu", "nvidia-cudnn-cu12==8.9.2.26")
        with pytest.raises(InstallFailed) as err:
            apply(_plan(venv, index))
        after = pip_list(venv, env)
    assert after == before
    assert err.value.exit_code == Exit.INSTALL_FAILED
    assert "ERROR" in err.value.detail["installer_error"]  # pip's own words
    restored = {(d["name"], d["version"]) for d in err.value.detail["restored"]}
    # the nvidia wheels went in before torch failed: the new cuBLAS was removed, the old cuDNN put back
    assert ("nvidia-cublas-cu12", "12.1.3.1") in restored and ("nvidia-cudnn-cu12", "8.9.2.26") in restored
    assert err.value.detail["not_restored"] == []


@pytest.mark.installs
def test_apply_rolls_back_when_the_index_dies_mid_way(venv, wheels, monkeypatch):
    cudnn8 = next(wheels.glob("nvidia_cudnn_cu12-8.9*.whl"))
    with LocalIndex(wheels) as index:
        env = _use_index(monkeypatch, index)
        # the starting cuDNN came from a file: the restore takes it from there, the index being gone
        before = _start(venv, env, "torch==2.5.1+cpu", str(cudnn8))
        plan = _plan(venv, index)
        install = plan.steps[0]
        libs = [a for a in install.argv if a.startswith("nvidia-")]
        first = Step(kind="install", reason="nvidia libraries", argv=[a for a in install.argv if not a.startswith("torch==")])
        second = Step(kind="install", reason="torch", argv=[a for a in install.argv if a not in libs])
        plan.steps = [first, second]
        # the installer's dry runs fetch 2 + 3 files (the journal asks what each step replaces); then step 1
        # fetches the two nvidia wheels, and the index goes away
        index.die_after(7)
        with pytest.raises(InstallFailed) as err:
            apply(plan)
    after = pip_list(venv, env)
    assert after == before
    assert "step 2 failed" in err.value.message
    assert err.value.detail["not_restored"] == []
    restored = {(d["name"], d["version"], d["source"]) for d in err.value.detail["restored"]}
    assert ("nvidia-cudnn-cu12", "8.9.2.26", cudnn8.as_uri()) in restored


@pytest.mark.installs
def test_ctrl_c_between_steps_restores(venv, wheels, monkeypatch):
    with LocalIndex(wheels) as index:
        env = _use_index(monkeypatch, index)
        before = _start(venv, env, "torch==2.5.1+cpu", "nvidia-cudnn-cu12==8.9.2.26")
        plan = _plan(venv, index, pins=[SOLVED[2]])
        plan.steps.insert(1, Step(kind="install", reason="second", argv=[str(venv), "-c", "pass"]))

        def progress(event, text):
            if event == "step" and text.startswith("[2/"):
                raise KeyboardInterrupt

        with pytest.raises(InstallFailed, match="interrupted") as err:
            apply(plan, on_progress=progress)
        after = pip_list(venv, env)
    assert after == before
    assert [d["name"] for d in err.value.detail["restored"]] == ["nvidia-cublas-cu12"]


@pytest.mark.slow
def test_snapshot_reads_versions_and_sources(tmp_path):
    import sys

    dists = {d.name: d for d in apply_mod.snapshot(sys.executable)}
    assert "pytest" in dists and dists["pytest"].version
    with pytest.raises(InstallFailed):
        apply_mod.snapshot(str(tmp_path / "no-python"))


def test_uv_gets_the_users_pip_index_and_pip_config_keeps_pip(tmp_path, monkeypatch):
    from cudamatrix.install.plan import choose_installer, pip_config_files, uv_env_from_pip

    assert uv_env_from_pip({"PIP_INDEX_URL": "https://mirror.example/simple", "PIP_EXTRA_INDEX_URL": "x",
                            "UV_EXTRA_INDEX_URL": "mine"}) == {"UV_INDEX_URL": "https://mirror.example/simple"}
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nindex-url = https://mirror.example/simple\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    assert pip_config_files() == [str(conf)]
    assert choose_installer(None) == "pip"  # uv would not read that file
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    assert pip_config_files() == []
    assert choose_installer("uv") == "uv"


@pytest.fixture(scope="module")
def failing(template_venv, tmp_path_factory):
    """Run pip and uv into a venv against: a corrupt wheel, conflicting pins, a dead loopback index, and a host
    name that cannot resolve (RFC 6761 reserves .invalid). Returns {(case, tool): combined output}."""
    import shutil
    import subprocess

    tmp = tmp_path_factory.mktemp("failing")
    py = copy_venv(template_venv, tmp / "venv")
    w = tmp / "w"
    build_wheel(w, "torch", "2.5.1+cu121", corrupt=True)
    build_wheel(w, "aa", "1.0")
    build_wheel(w, "aa", "2.0")
    build_wheel(w, "bb", "1.0", requires=["aa==2.0"])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    env.update({"PIP_CONFIG_FILE": os.devnull, "PIP_CACHE_DIR": str(tmp / "pc"), "UV_CACHE_DIR": str(tmp / "uc"),
                "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_DEFAULT_TIMEOUT": "3", "PIP_RETRIES": "1",
                "UV_HTTP_RETRIES": "0"})
    uv = shutil.which("uv")
    out = {}
    with LocalIndex(w) as index:
        cases = {"corrupt": (index.url + "/simple", ["torch==2.5.1+cu121"]),
                 "conflict": (index.url + "/simple", ["aa==1.0", "bb==1.0"]),
                 "dead index": ("http://127.0.0.1:9/simple", ["aa"]),
                 "dns": ("https://index.invalid/simple", ["aa"])}
        for case, (url, reqs) in cases.items():
            for tool in ("pip", "uv"):
                if tool == "uv" and not uv:
                    continue
                argv = ([str(py), "-m", "pip", "install", "--index-url", url, *reqs] if tool == "pip" else
                        [uv, "pip", "install", "--python", str(py), "--index-url", url, *reqs])
                r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
                assert r.returncode != 0, (case, tool)
                out[(case, tool)] = r.stdout + r.stderr
    return out


@pytest.mark.installs
@pytest.mark.parametrize("case,tool,kind,shows", [
    ("corrupt", "pip", "corrupt download", "Bad CRC-32 for file 'torch/_payload.txt'"),
    ("corrupt", "uv", "corrupt download", "Bad CRC"),
    ("conflict", "pip", "resolution conflict", "Cannot install aa==1.0 and bb==1.0"),
    ("conflict", "uv", "resolution conflict", "No solution found"),
    ("dead index", "pip", "network", "Connection refused"),
    ("dead index", "uv", "network", "Connection refused"),
    ("dns", "pip", "index host does not resolve (DNS)", "Name or service not known"),
    ("dns", "uv", "index host does not resolve (DNS)", "Name or service not known"),
])
def test_explain_finds_the_root_cause_in_real_installer_output(failing, case, tool, kind, shows):
    from cudamatrix.install.explain import explain

    if (case, tool) not in failing:
        pytest.skip("uv is not on PATH")
    output = failing[(case, tool)]
    cause = explain(output)
    assert cause is not None, output
    assert (cause.kind, shows in cause.line) == (kind, True), (cause, output[-1500:])
    last = output.strip().splitlines()[-1]
    assert cause.line != last or case == "corrupt"  # not merely the installer's last line


def test_explain_full_disk_and_unknown():
    from cudamatrix.install.explain import explain

    text = ("Installing collected packages: torch\nERROR: Could not install packages due to an OSError: "
            "[Errno 28] No space left on device\n")
    assert explain(text).kind == "no space left"
    assert explain("something else went wrong") is None


@pytest.mark.installs
def test_install_failed_shows_the_cause_first(venv, wheels, tmp_path, monkeypatch):
    bad = tmp_path / "bad"
    build_wheel(bad, "nvidia-cublas-cu12", "12.1.3.1", corrupt=True)
    with LocalIndex(bad) as index:
        _use_index(monkeypatch, index)
        plan = make_plan(Environment(), _solution(to_install=[SOLVED[2]]), python=str(venv), installer="pip")
        with pytest.raises(InstallFailed) as err:
            apply(plan)
    assert err.value.message.startswith("install failed, step 1 failed")
    assert "corrupt download: " in err.value.message and "Bad CRC-32" in err.value.message
    assert "cache" in err.value.hint and err.value.detail["cause"]["kind"] == "corrupt download"


def _clash_env(cudnn13: str) -> Environment:
    from cudamatrix.models import FileConflict, Framework

    return Environment(
        packages={"torch": "2.14.1", "nvidia-cudnn-cu13": cudnn13, "nvidia-cudnn-cu12": "9.8.0.87",
                  "jax": "0.10.2", "jaxlib": "0.10.2", "jax-cuda12-plugin": "0.10.2", "jax-cuda12-pjrt": "0.10.2"},
        requirements={"torch": ['nvidia-cudnn-cu13==9.24.0.43; platform_system == "Linux"'],
                      "jax-cuda12-plugin": ["nvidia-cudnn-cu12<10.0,>=9.8"]},
        frameworks=[Framework("torch", "2.14.1", "cu130", "13.0"), Framework("jax", "0.10.2")],
        file_conflicts=[FileConflict("nvidia/cudnn/lib/libcudnn.so.9",
                                     ["nvidia-cudnn-cu13==" + cudnn13, "nvidia-cudnn-cu12==9.8.0.87"])])


def _jax13(to_install) -> Solution:
    from cudamatrix.models import FrameworkChoice

    pins = [Pin("torch", "2.14.1"), Pin("nvidia-cudnn-cu13", "9.24.0.43"), Pin("jax", "0.10.2", ["cuda13"]),
            Pin("jax-cuda13-plugin", "0.10.2"), Pin("jax-cuda13-pjrt", "0.10.2")]
    return Solution(request=["torch", "jax"], targets=["t"], packages=pins, to_install=to_install,
                    frameworks=[FrameworkChoice("torch", "2.14.1", "cu130", "13.0"),
                                FrameworkChoice("jax", "0.10.2", "cuda13", "13.0")])


def test_plan_uninstalls_the_clash_and_reinstalls_the_survivor():
    from cudamatrix.models import Finding

    env = _clash_env("9.24.0.43")  # torch's cuDNN is at its pin, but its file holds the cu12 copy
    findings = [Finding("FILE_CLOBBER", "error", "nvidia-cudnn-cu12==9.8.0.87 and nvidia-cudnn-cu13==9.24.0.43 "
                                                 "install the same file"),
                Finding("NO_DRIVER", "error", "No NVIDIA driver is installed or loaded", fix="install the driver"),
                Finding("PYTHON_UNSUPPORTED", "error", "torch 2.14.1 is not built for Python 3.9", fix="use 3.11"),
                Finding("UNKNOWN_FRAMEWORK_BUILD", "info", "jax 0.10.2 is not in the matrix")]
    plan = make_plan(env, _jax13([Pin("jax-cuda13-plugin", "0.10.2"), Pin("jax-cuda13-pjrt", "0.10.2")]),
                     python="/p", installer="pip", verify=False, findings=findings)
    assert [s.kind for s in plan.steps] == ["uninstall", "install", "reinstall"]
    assert plan.steps[0].argv[-3:] == ["jax-cuda12-pjrt", "jax-cuda12-plugin", "nvidia-cudnn-cu12"]
    assert plan.steps[2].argv[-3:] == ["--force-reinstall", "--no-deps", "nvidia-cudnn-cu13==9.24.0.43"]
    by_code = {r.code: r for r in plan.remedies}
    assert set(by_code) == {"FILE_CLOBBER", "NO_DRIVER", "PYTHON_UNSUPPORTED"}  # error findings only
    assert by_code["FILE_CLOBBER"].action == "uninstall"
    assert "uninstall nvidia-cudnn-cu12" in by_code["FILE_CLOBBER"].detail
    assert "reinstall nvidia-cudnn-cu13 9.24.0.43" in by_code["FILE_CLOBBER"].detail
    assert by_code["NO_DRIVER"].action == "not_fixable" and "install the driver" in by_code["NO_DRIVER"].detail
    assert "host" in by_code["NO_DRIVER"].detail
    assert by_code["PYTHON_UNSUPPORTED"].detail.startswith("not fixable here: use 3.11")
    uv = make_plan(env, _jax13([]), python="/p", installer="uv", verify=False)
    assert uv.steps[0].argv[:4] == ["uv", "pip", "uninstall", "--python"] and "--reinstall" in uv.steps[-1].argv


def test_plan_keeps_what_a_remaining_framework_declares():
    env = _clash_env("9.24.0.43")
    env.requirements["tensorflow"] = ["nvidia-cudnn-cu12==9.8.0.87"]  # another framework still needs the cu12 copy
    env.packages["tensorflow"] = "2.20.0"
    plan = make_plan(env, _jax13([]), python="/p", installer="pip", verify=False)
    assert "nvidia-cudnn-cu12" not in {r.name for r in plan.to_remove}
    assert {r.name for r in plan.to_remove} == {"jax-cuda12-plugin", "jax-cuda12-pjrt"}


def test_a_finding_the_plan_does_not_touch_is_named_not_fixable():
    from cudamatrix.models import Finding

    env = Environment(packages={"torch": "2.5.1+cu121", "torchvision": "0.19.0+cu118"})
    sol = _solution(to_install=[], unchanged=True)
    found = [Finding("TORCHVISION_MISMATCH", "error", "torchvision 0.19.0+cu118 does not match torch 2.5.1+cu121",
                     fix="pip install torchvision==0.20.1+cu121")]
    plan = make_plan(env, sol, python="/p", installer="pip", findings=found)
    assert plan.nothing_to_do and plan.remedies[0].action == "not_fixable"
    assert "torchvision" in plan.remedies[0].detail and "pip install torchvision==0.20.1+cu121" in plan.remedies[0].detail


def test_a_cudnn_mismatch_in_a_wheel_folder_is_answered_by_the_step_that_installs_that_wheel():
    """The plan installs nvidia-cudnn-cu12 at torch's pin; the finding names the file in that wheel's folder, not the
    wheel: the remedy is that step, not "not fixable here" (issue #26: fix --dry-run said both)."""
    from cudamatrix.models import Finding

    env = Environment(packages={"torch": "2.5.1+cu121", "nvidia-cudnn-cu12": "8.9.2.26"})
    pins = [Pin("torch", "2.5.1+cu121"), Pin("nvidia-cudnn-cu12", "9.1.0.70")]
    sol = _solution(packages=pins, to_install=pins[1:], pip_args=[p.requirement() for p in pins])
    path = "/v/lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.9"
    found = [Finding("CUDNN_MISMATCH", "error", f"torch 2.5.1+cu121 was built with cuDNN 9.1.0 but will run cuDNN "
                                                f"8.9.2 from {path}", evidence=[f"libcudnn.so.9: {path} (RUNPATH)"],
                     fix="reinstall the cuDNN wheel torch declares (cuDNN 9.1.0): cudamatrix fix")]
    plan = make_plan(env, sol, python="/p", installer="pip", verify=False, findings=found)
    (remedy,) = plan.remedies
    assert remedy.action == "install" and remedy.detail == "install nvidia-cudnn-cu12 9.1.0.70", remedy
    assert any("nvidia-cudnn-cu12==9.1.0.70" in s.argv for s in plan.steps)
    # a folder of another wheel is not taken for this one
    other = Finding("CUDNN_MISMATCH", "error", "torch ... from /v/site-packages/nvidia/cublas/lib/libcublas.so.12")
    assert make_plan(env, sol, python="/p", installer="pip", verify=False,
                     findings=[other]).remedies[0].action == "not_fixable"


@pytest.mark.installs
def test_a_crash_mid_apply_restores_then_shows_the_bug(venv, wheels, monkeypatch):
    """An exception of ours between steps (a bug) still puts the starting set back, then keeps its traceback."""
    from cudamatrix import proc

    with LocalIndex(wheels) as index:
        env = _use_index(monkeypatch, index)
        before = _start(venv, env, "torch==2.5.1+cpu", "nvidia-cudnn-cu12==8.9.2.26")
        plan = _plan(venv, index, pins=[SOLVED[2]])
        plan.steps.insert(1, Step(kind="install", reason="second", argv=[str(venv), "-c", "pass"]))
        real = proc.run
        calls = []

        def flaky(argv, **kw):
            if argv == [str(venv), "-c", "pass"]:
                calls.append(argv)
                raise RuntimeError("a bug of ours")
            return real(argv, **kw)

        monkeypatch.setattr(apply_mod.proc, "run", flaky)
        with pytest.raises(RuntimeError, match="a bug of ours"):
            apply(plan)
        monkeypatch.setattr(apply_mod.proc, "run", real)
        after = pip_list(venv, env)
    assert calls and after == before
    assert not list(Path(os.environ["XDG_STATE_HOME"]).glob("cudamatrix/journal/*/journal.json"))


@pytest.mark.installs
def test_rollback_of_an_upgraded_dependency_needs_no_index(venv, tmp_path, monkeypatch):
    """The install upgrades a dependency the plan does not name; the installer's dry run told the journal, which
    saved it, so the rollback works with the index gone."""
    w = tmp_path / "deps"
    build_wheel(w, "app", "1.0", requires=["dep>=1"])
    build_wheel(w, "app", "2.0", requires=["dep>=2"])
    build_wheel(w, "dep", "1.0")
    build_wheel(w, "dep", "2.0")
    with LocalIndex(w) as index:
        env = _use_index(monkeypatch, index)
        before = _start(venv, env, "app==1.0", "dep==1.0")
        plan = Plan(python=str(venv), steps=[
            Step(kind="install", reason="app 2", argv=[str(venv), "-m", "pip", "install", "app==2.0"]),
            Step(kind="install", reason="fails", argv=[str(venv), "-c", "raise SystemExit(1)"])])
        served = index.files_served()
        index.die_after(4)  # the dry run and the install fetch app 2.0 and dep 2.0 each; then the index is gone
        with pytest.raises(InstallFailed) as err:
            apply(plan)
        assert index.files_served() == served + 4
    after = pip_list(venv, env)
    assert after == before, err.value.detail
    assert {(d["name"], d["version"]) for d in err.value.detail["restored"]} >= {("dep", "1.0"), ("app", "1.0")}


def test_an_installer_that_dies_with_its_parent_still_reports_a_missing_program():
    from cudamatrix import proc

    r = proc.run(["no-such-installer-xyz", "install"], timeout=30, on_output=lambda line: None, die_with_parent=True)
    assert r.returncode == 127 and "no-such-installer-xyz" in r.stderr
    ok = proc.run(["sh", "-c", "echo $PPID; echo $$"], timeout=30, on_output=lambda line: None, die_with_parent=True)
    assert ok.ok and ok.stdout.split()[0] == str(os.getpid())  # the launcher became the program (exec, same pid)


@pytest.mark.parametrize("stop", [KeyboardInterrupt, OSError])
def test_a_stop_while_the_installer_is_being_recorded_still_stops_the_installer(tmp_path, stop):
    """Ctrl-C (or a journal that cannot be written) in on_start, after the installer started: the installer is
    stopped, never left running on its own."""
    import signal

    from cudamatrix import proc

    started: list[int] = []

    def on_start(pid: int) -> None:
        started.append(pid)
        raise stop("stopped while recording the installer")

    with pytest.raises(stop):
        proc.run([sys.executable, "-c", "import time; time.sleep(60)"], timeout=120, on_output=lambda line: None,
                 interrupt_grace=5.0, on_start=on_start, die_with_parent=True)
    assert started
    try:
        os.killpg(started[0], 0)
    except ProcessLookupError:
        return
    os.killpg(started[0], signal.SIGKILL)
    pytest.fail("the installer kept running after the run was stopped")


# --- mut install ---------------------------------------------------------------------------------------------------

UV_CACHE = "uv_cache.json"  # uv writes it into each .dist-info it installs


@dataclass
class World:
    py: str
    site: Path
    wheels: Path  # the plan's --find-links folder
    calls: list[tuple[list[str], dict]] = field(default_factory=list)  # every proc.run of the code under test

    def uv(self, verb: str, *args: str) -> list[str]:
        return ["uv", "pip", verb, "--python", self.py, *args]

    def setup(self, verb: str, *args: str) -> None:
        """Change the venv outside the code under test (the starting set, a later change) with real uv."""
        r = subprocess.run(self.uv(verb, *args), capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr

    def tree(self) -> dict[str, str]:
        """Every file of site-packages with its text, but for the time in uv's own ``uv_cache.json`` (when uv
        unpacked the wheel into its cache: a copy put back from another wheel file has a later one) and that
        file's hash and size in ``RECORD``."""
        out = {}
        for p in sorted(self.site.rglob("*")):
            if not p.is_file() or "__pycache__" in p.parts:
                continue
            text = p.read_text()
            if p.name == UV_CACHE:
                text = json.dumps({k: v for k, v in json.loads(text).items() if k != "timestamp"})
            elif p.name == "RECORD":
                text = re.sub(rf"^(.*/{UV_CACHE}),.*$", r"\1", text, flags=re.M)
            out[str(p.relative_to(self.site))] = text
        return out

    def versions(self) -> dict[str, str]:
        return {d.name: d.version for d in snapshot(self.py)}

    def ran(self) -> list[list[str]]:
        """The installer commands run (the snapshot probes left out)."""
        return [argv for argv, _ in self.calls if argv[1:2] != ["-c"]]

    @property
    def journal_dir(self) -> Path:
        return journals.folder_for(self.py)


@pytest.fixture()
def world(tmp_path, monkeypatch) -> World:
    """A bare venv (no pip) holding a 1.0 and b 1.0, installed by uv from the wheel folder; uv first on PATH,
    with its cache under tmp_path and no index; the journal under tmp_path; ``proc.run`` recorded (and run)."""
    if UV_DIR is None and not IN_CI:
        pytest.skip("uv is not installed (the test extra installs it; in CI this test fails instead)")
    for k in list(os.environ):
        if k.startswith(("PIP_", "UV_")):
            monkeypatch.delenv(k)
    monkeypatch.setenv("PATH", with_uv(dict(os.environ))["PATH"])
    monkeypatch.setenv("UV_NO_CONFIG", "1")
    monkeypatch.setenv("UV_OFFLINE", "1")  # no index is asked: the plans name wheel folders
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uvc"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    venv_inproc.EnvBuilder(with_pip=False, symlinks=True).create(tmp_path / "venv")
    site = next((tmp_path / "venv").glob("lib/python*/site-packages"))
    wheels = tmp_path / "w"
    for name, version in (("a", "1.0"), ("a", "2.0"), ("b", "1.0")):
        build_wheel(wheels, name, version)
    w = World(str(tmp_path / "venv" / "bin" / "python"), site, wheels)
    w.setup("install", "--no-deps", "--find-links", str(wheels), "a==1.0", "b==1.0")
    real = proc.run

    def spy(argv, **kw):
        w.calls.append((list(argv), kw))
        return real(argv, **kw)

    monkeypatch.setattr(proc, "run", spy)
    return w


def fails(reason: str = "fails", stash: Path | None = None) -> Step:
    """An install step that fails with an installer-like error line; with ``stash``, it leaves a stash folder
    behind as an installer killed mid-uninstall does (``~a-2.0.dist-info`` with a file in it)."""
    code = "import sys; print('ERROR: no such wheel', file=sys.stderr); sys.exit(1)"
    if stash is not None:
        code = f"import os; os.mkdir({str(stash)!r}); open(os.path.join({str(stash)!r}, 'RECORD'), 'w').close(); " + code
    return Step(kind="install", reason=reason, argv=[sys.executable, "-c", code])


def events(seen: list[tuple[str, str]], kind: str) -> list[str]:
    return [t for e, t in seen if e == kind]


@pytest.mark.slow
def test_a_failed_plan_puts_every_file_back_from_the_saved_wheels(world):
    for name in ("c", "d"):
        build_wheel(world.wheels, name, "1.0")
    world.setup("install", "--no-deps", "--find-links", str(world.wheels), "c==1.0", "d==1.0")
    start = world.tree()
    plan = Plan(python=world.py, to_remove=[Removal(name="d", version="1.0", reason="leftover"),
                                            Removal(name="b", version="1.0", reason="leftover")], steps=[
        Step(kind="uninstall", reason="drop b, c and d", argv=world.uv("uninstall", "b", "c", "d")),
        Step(kind="install", reason="upgrade a", argv=world.uv("install", "--no-deps", "--find-links",
                                                               str(world.wheels), "a==2.0"), timeout_s=77.0),
        fails("a wheel that is not there", stash=world.site / "~a-2.0.dist-info")])
    seen: list[tuple[str, str]] = []
    with pytest.raises(InstallFailed) as err:
        apply(plan, on_progress=lambda e, t: seen.append((e, t)), site_packages=[str(world.site)])
    # the same files with the same bytes, INSTALLER and RECORD included (a saved wheel carrying uv's uv_cache.json
    # would leave RECORD listing it twice); the failed step's stash is gone
    assert world.tree() == start and not (world.site / "~a-2.0.dist-info").exists()
    saved = str(world.journal_dir / "wheels")
    # a was changed (2.0 is there): uninstalled first; the journal saved the pinned a and the plan's removals
    # b and d: they come back from there, offline; c, which the plan did not name, from the plan's own folder
    assert world.ran()[-3:] == [world.uv("uninstall", "a"),
                                world.uv("install", "--no-deps", "--no-index", "--find-links", saved,
                                         "b==1.0", "d==1.0", "a==1.0"),
                                world.uv("install", "--no-deps", "--find-links", str(world.wheels), "c==1.0")]
    assert events(seen, "step") == [
        "asking the installer what the plan changes (dry run)", "saving a 1.0 for a rollback without network",
        "saving b 1.0 for a rollback without network", "saving d 1.0 for a rollback without network",
        "[1/3] drop b, c and d", "[2/3] upgrade a", "[3/3] a wheel that is not there"]
    assert events(seen, "restore") == ["restoring the starting set", "uninstall a",
                                       "reinstall from the saved wheels: a, b, d", "reinstall c 1.0"]
    assert ("output", " + a==2.0") in seen and not events(seen, "done")  # uv's words for what it installed
    e = err.value
    assert e.exit_code == 4
    assert str(e) == "install failed, step 3 failed: a wheel that is not there: ERROR: no such wheel"
    assert e.hint == "the environment is back to its starting set (restored b 1.0, c 1.0, d 1.0, a 1.0)"
    assert e.detail["argv"] == plan.steps[2].argv and e.detail["not_restored"] == []
    assert e.detail["installer_error"] == "ERROR: no such wheel" and e.detail["cause"] is None
    assert [(d["name"], d["version"], d["installer"]) for d in e.detail["restored"]] == [
        ("b", "1.0", "uv"), ("c", "1.0", "uv"), ("d", "1.0", "uv"), ("a", "1.0", "uv")]
    assert not world.journal_dir.exists()  # everything is back: the journal and its wheels are gone
    # every command has its time limit: the step its own, the restore the long one, the probe the short one
    limits = {tuple(argv): kw["timeout"] for argv, kw in world.calls}
    assert limits[tuple(plan.steps[1].argv)] == 77.0
    assert limits[tuple(world.uv("uninstall", "a"))] == apply_mod.RESTORE_TIMEOUT_S
    assert [kw["timeout"] for argv, kw in world.calls if argv[1:2] == ["-c"] and argv[0] == world.py] == \
        [apply_mod.SNAPSHOT_TIMEOUT_S] * 3  # before, during the restore, after it
    dry = plan.steps[1].argv[:3] + ["--dry-run"] + plan.steps[1].argv[3:]  # uv's dry run: no --report
    assert limits[tuple(dry)] == apply_mod.SNAPSHOT_TIMEOUT_S * 10
    assert limits[tuple(world.uv("install", "--no-deps", "--no-index", "--find-links", saved,
                                 "b==1.0", "d==1.0", "a==1.0"))] == apply_mod.RESTORE_TIMEOUT_S
    assert limits[tuple(world.uv("install", "--no-deps", "--find-links", str(world.wheels), "c==1.0"))] == \
        apply_mod.RESTORE_TIMEOUT_S


@pytest.mark.slow
def test_what_is_not_put_back_is_named_and_fix_rollback_finishes_it(world, tmp_path):
    start = world.tree()
    links = tmp_path / "links"  # the plan's --find-links folder: empty for now
    links.mkdir()
    (world.site / "~ld-0.1.dist-info").mkdir()  # a stash left before this run: not ours to remove
    plan = Plan(python=world.py, steps=[
        Step(kind="uninstall", reason="drop b", argv=world.uv("uninstall", "b")),
        Step(kind="install", reason="nothing there", argv=world.uv("install", "--no-deps", "--find-links",
                                                                   str(links), "c==1.0"))])
    with pytest.raises(InstallFailed) as err:
        apply(plan, site_packages=[str(world.site)])
    # b is not in the plan's to_remove and not pinned: no wheel of it was saved; the plan's folder lacks it
    reinstall_b = world.uv("install", "--no-deps", "--find-links", str(links), "b==1.0")
    assert world.ran()[-2:] == [reinstall_b, reinstall_b]  # all together, then one by one
    e = err.value
    assert e.detail["not_restored"] == ["b 1.0"] and e.detail["restored"] == []
    assert e.hint.endswith(f"; could not restore: b 1.0; the journal keeps what is needed: "
                           f"cudamatrix fix --rollback --python {world.py}")
    assert world.versions() == {"a": "1.0"}
    journal = journals.load(world.py)
    assert journal is not None
    # no installer runs now (a rollback must not kill whatever process later gets that group id); step 1 is done
    assert journal.data["child_pgid"] is None and journal.data["steps_done"] == 1
    assert [(d.name, d.version) for d in journal.before] == [("a", "1.0"), ("b", "1.0")]

    # fix --rollback while the wheel is still missing: nothing changes, the journal stays for the next try
    assert rollback(journal, python=world.py, site_packages=[str(world.site)]) == (
        [], {"added": [], "changed": [], "removed": journal.before[1:]})
    assert journals.load(world.py) is not None

    # later: the wheel is back in the folder, and an installer killed mid-way left its stash behind
    build_wheel(links, "b", "1.0")
    (world.site / "~b").mkdir()
    (world.site / "~b" / "x.py").write_text("half")
    seen: list[tuple[str, str]] = []
    restored, left = rollback(journal, python=world.py, site_packages=[str(world.site)],
                              on_progress=lambda e, t: seen.append((e, t)))
    assert [(d.name, d.version) for d in restored] == [("b", "1.0")] and not any(left.values())
    assert events(seen, "restore") == ["restoring the starting set", "reinstall b 1.0"]
    assert world.ran()[-1] == reinstall_b
    assert not (world.site / "~b").exists() and (world.site / "~ld-0.1.dist-info").is_dir()
    (world.site / "~ld-0.1.dist-info").rmdir()
    assert world.tree() == start and not world.journal_dir.exists()


@pytest.mark.slow
def test_what_can_be_put_back_is_put_back_one_by_one(world):
    build_wheel(world.wheels, "c", "1.0")
    world.setup("install", "--no-deps", "--find-links", str(world.wheels), "c==1.0")
    start = world.tree()
    (world.wheels / "b-1.0-py3-none-any.whl").unlink()  # the only copy of b 1.0 is gone
    plan = Plan(python=world.py, steps=[
        Step(kind="uninstall", reason="drop b and c", argv=world.uv("uninstall", "b", "c")),
        Step(kind="install", reason="pin", argv=world.uv("install", "--no-deps", "--find-links", str(world.wheels),
                                                         "a==1.0")),
        fails()])
    with pytest.raises(InstallFailed) as err:
        apply(plan, site_packages=[str(world.site)])
    base = world.uv("install", "--no-deps", "--find-links", str(world.wheels))
    assert world.ran()[-3:] == [base + ["b==1.0", "c==1.0"], base + ["b==1.0"], base + ["c==1.0"]]
    assert world.versions() == {"a": "1.0", "c": "1.0"}
    assert {k: v for k, v in world.tree().items() if not k.startswith("b")} == \
        {k: v for k, v in start.items() if not k.startswith("b")}
    assert err.value.detail["not_restored"] == ["b 1.0"]
    assert [d["name"] for d in err.value.detail["restored"]] == ["c"]
    assert err.value.hint == ("could not restore: b 1.0; the journal keeps what is needed: cudamatrix fix --rollback "
                              f"--python {world.py}")
    assert (world.journal_dir / journals.JOURNAL_FILE).is_file()


@pytest.mark.slow
def test_restore_with_pip_runs_the_interpreters_pip_and_names_what_it_could_not_put_back(world):
    """A plan not run by uv is put back with the target's own pip (``python -m pip``, ``uninstall -y``); this venv
    has none, so every command fails for real ("No module named pip") and nothing is counted as restored."""
    build_wheel(world.wheels, "c", "1.0")
    before = snapshot(world.py)
    world.setup("uninstall", "b")
    world.setup("install", "--no-deps", "--find-links", str(world.wheels), "c==1.0")
    world.calls.clear()
    restored, left = restore(world.py, before, index_options=["--find-links", str(world.wheels)])  # tool: pip
    pip = [world.py, "-m", "pip"]
    assert world.ran() == [pip + ["uninstall", "-y", "c"],
                           pip + ["install", "--no-deps", "--find-links", str(world.wheels), "b==1.0"],
                           pip + ["install", "--no-deps", "--find-links", str(world.wheels), "b==1.0"]]
    assert restored == [] and [d.name for d in left["added"]] == ["c"] and left["removed"] == before[1:]
    assert world.versions() == {"a": "1.0", "c": "1.0"}


@pytest.mark.slow
def test_rollback_of_a_pip_plan_uses_the_interpreters_pip(world):
    """fix --rollback of a plan whose steps run ``python -m pip``: pip puts it back, with the plan's folder; this
    venv has no pip, so nothing comes back and the journal stays for the next try."""
    pip = [world.py, "-m", "pip"]
    plan = Plan(python=world.py, steps=[Step(kind="uninstall", reason="drop b", argv=pip + ["uninstall", "-y", "b"]),
                                        Step(kind="install", reason="x", argv=pip + ["install", "--find-links",
                                                                                     str(world.wheels), "a==2.0"])])
    journal = journals.begin(world.py, plan, snapshot(world.py), set(), [])
    world.setup("uninstall", "b")  # step 1 ran (by another hand), then a kill
    world.calls.clear()
    restored, left = rollback(journal, python=world.py)
    assert world.ran() == [pip + ["install", "--no-deps", "--find-links", str(world.wheels), "b==1.0"]] * 2
    assert restored == [] and [d.name for d in left["removed"]] == ["b"]
    assert journals.load(world.py) is not None


@pytest.mark.slow
def test_a_distribution_from_a_url_goes_back_to_its_url(world, tmp_path):
    """PEP 610: an install from a URL records it in direct_url.json; the rollback reinstalls "name @ URL" (not
    the journal's copy, which has no such record), with the plan's index options (a URL needs none)."""
    wheel = build_wheel(tmp_path / "elsewhere", "c", "1.0")
    build_wheel(world.wheels, "c", "2.0")
    world.setup("install", "--no-deps", f"c @ {wheel.as_uri()}")
    start = world.tree()
    assert json.loads(start["c-1.0.dist-info/direct_url.json"])["url"] == wheel.as_uri()
    plan = Plan(python=world.py, steps=[
        Step(kind="install", reason="upgrade c", argv=world.uv("install", "--no-deps", "--index-url",
                                                               "https://i.example/simple", "--find-links",
                                                               str(world.wheels), "c==2.0")),
        fails()])
    seen: list[tuple[str, str]] = []
    with pytest.raises(InstallFailed):
        apply(plan, on_progress=lambda e, t: seen.append((e, t)))
    assert "saving c 1.0 for a rollback without network" in events(seen, "step")  # pinned: saved all the same
    assert world.ran()[-2:] == [world.uv("uninstall", "c"),
                                world.uv("install", "--no-deps", "--index-url", "https://i.example/simple",
                                         "--find-links", str(world.wheels), f"c @ {wheel.as_uri()}")]
    assert events(seen, "restore") == ["restoring the starting set", "uninstall c", "reinstall c 1.0"]
    assert world.tree() == start


@pytest.mark.slow
def test_a_step_runs_with_the_journal_naming_it_and_dies_with_us(world):
    """While a step runs the journal names its process group and step number, and the kernel is asked to kill
    it if this process dies (PR_SET_PDEATHSIG, read back with PR_GET_PDEATHSIG = 2, prctl(2))."""
    path = world.journal_dir / journals.JOURNAL_FILE
    check = ("import ctypes, json, os, sys\n"
             "d = json.load(open(os.environ['JOURNAL']))\n"
             "sig = ctypes.c_int(0)\n"
             "ctypes.CDLL(None).prctl(2, ctypes.byref(sig), 0, 0, 0)\n"
             "got = [d['child_pgid'] == os.getpgrp(), d['step'], d['steps_done'], d['state'], sig.value]\n"
             "sys.exit(0 if got == [True, int(sys.argv[1]), int(sys.argv[1]) - 1, 'applying', 9] else str(got))\n")
    plan = Plan(python=world.py, steps=[
        Step(kind="install", reason=f"check {i}", argv=[sys.executable, "-c", check, str(i)],
             env={"JOURNAL": str(path)}) for i in (1, 2)])
    applied = apply(plan)
    assert applied.ok and applied.steps_run == ["check 1", "check 2"]
    assert [(d.name, d.version) for d in applied.before] == [("a", "1.0"), ("b", "1.0")] == \
        [(d.name, d.version) for d in applied.after]
    assert not world.journal_dir.exists()


@pytest.mark.slow
def test_resume_skips_the_steps_done_and_keeps_the_starting_set(world):
    plan = Plan(python=world.py, steps=[
        Step(kind="install", reason="upgrade a", argv=world.uv("install", "--no-deps", "--find-links",
                                                               str(world.wheels), "a==2.0")),
        Step(kind="uninstall", reason="drop b", argv=world.uv("uninstall", "b"))])
    before = snapshot(world.py)
    journal = journals.begin(world.py, plan, before, {"a"}, [])
    world.setup("install", "--no-deps", "--find-links", str(world.wheels), "a==2.0")  # step 1 ran, then a kill
    journal.record(steps_done=1, resumed=True)
    world.calls.clear()
    applied = apply(plan, journal=journal)
    assert applied.steps_run == ["drop b"] and world.ran() == [plan.steps[1].argv]
    assert applied.before == before and [(d.name, d.version) for d in applied.after] == [("a", "2.0")]
    assert not world.journal_dir.exists()


@pytest.mark.slow
def test_a_journal_not_marked_resumed_runs_every_step(world):
    plan = Plan(python=world.py, steps=[Step(kind="uninstall", reason="drop b", argv=world.uv("uninstall", "b")),
                                        Step(kind="uninstall", reason="drop a", argv=world.uv("uninstall", "a"))])
    journal = journals.begin(world.py, plan, snapshot(world.py), set(), [])
    journal.record(steps_done=1)
    applied = apply(plan, journal=journal)
    assert applied.steps_run == ["drop b", "drop a"] and applied.after == []


@pytest.mark.slow
def test_ctrl_c_gives_the_installer_its_grace_then_puts_back(world, tmp_path):
    """On Ctrl-C the installer first gets SIGINT and time to clean up (pip rolls back the package it was in);
    then the starting set is put back."""
    marker = tmp_path / "cleaned-up"
    code = (WHEN_RECORDED + "import os, signal, sys, time\n"
            "def bye(*_):\n"
            f"    open({str(marker)!r}, 'w').write('yes')\n"
            "    sys.exit(1)\n"
            "signal.signal(signal.SIGINT, bye)\n"
            "os.kill(os.getppid(), signal.SIGINT)\n"
            "time.sleep(20)\n")
    start = world.tree()
    plan = Plan(python=world.py, steps=[
        Step(kind="install", reason="upgrade a", argv=world.uv("install", "--no-deps", "--find-links",
                                                               str(world.wheels), "a==2.0")),
        Step(kind="install", reason="interrupted", argv=[sys.executable, "-c", code])])
    with pytest.raises(InstallFailed) as err:
        apply(plan)
    assert marker.read_text() == "yes"
    assert str(err.value) == "install failed, interrupted (Ctrl-C): interrupted by the user"
    assert err.value.hint == "the environment is back to its starting set (restored a 1.0)"
    assert err.value.detail["argv"] is None and err.value.detail["installer_error"] == "interrupted by the user"
    assert world.tree() == start and not world.journal_dir.exists()


@pytest.mark.slow
def test_a_bug_mid_apply_still_puts_back_then_shows_itself(world):
    start = world.tree()
    plan = Plan(python=world.py, steps=[
        Step(kind="install", reason="upgrade a", argv=world.uv("install", "--no-deps", "--find-links",
                                                               str(world.wheels), "a==2.0")),
        Step(kind="uninstall", reason="drop b", argv=world.uv("uninstall", "b"))])

    def progress(event: str, text: str) -> None:
        if text == "[2/2] drop b":
            raise RuntimeError("a display that broke")

    with pytest.raises(RuntimeError, match="^a display that broke$"):
        apply(plan, on_progress=progress)
    assert world.tree() == start and not world.journal_dir.exists()


@pytest.mark.slow
def test_rollback_stops_a_left_over_installer_and_removes_a_clean_journal(world):
    plan = Plan(python=world.py, steps=[Step(kind="uninstall", reason="drop b",
                                             argv=world.uv("uninstall", "b"))])
    journal = journals.begin(world.py, plan, snapshot(world.py), set(), [])
    left_over = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    journal.record_installer(left_over.pid, [sys.executable, "-c", "import time; time.sleep(60)"], 1)
    try:
        assert rollback(journals.load(world.py), python=world.py) == ([], {"added": [], "removed": [], "changed": []})
        assert left_over.wait(timeout=10) == -signal.SIGKILL
    finally:
        if left_over.poll() is None:
            left_over.kill()
    assert not world.journal_dir.exists()


@pytest.mark.slow
def test_rollback_of_a_uv_plan_uses_uv_and_the_plans_indexes(world, tmp_path):
    links = tmp_path / "links"
    build_wheel(links, "b", "1.0")
    plan = Plan(python=world.py, steps=[Step(kind="uninstall", reason="drop b", argv=world.uv("uninstall", "b")),
                                        Step(kind="install", reason="x", argv=world.uv("install", "--find-links",
                                                                                       str(links), "a==2.0"))])
    journal = journals.begin(world.py, plan, snapshot(world.py), {"a"}, [])  # a was saved
    world.setup("uninstall", "b")
    world.setup("install", "--no-deps", "--find-links", str(world.wheels), "a==2.0")
    world.calls.clear()
    restored, left = rollback(journal, python=world.py)
    assert world.ran() == [world.uv("uninstall", "a"),
                           world.uv("install", "--no-deps", "--no-index", "--find-links", str(journal.wheels),
                                    "a==1.0"),
                           world.uv("install", "--no-deps", "--find-links", str(links), "b==1.0")]
    assert [(d.name, d.version, d.installer) for d in restored] == [("b", "1.0", "uv"), ("a", "1.0", "uv")]
    assert world.versions() == {"a": "1.0", "b": "1.0"} and not any(left.values())
    assert not world.journal_dir.exists()


@pytest.mark.slow
def test_restore_ignores_ctrl_c_while_it_works_and_then_gives_it_back(world):
    world.setup("uninstall", "b")
    before = [InstalledDist(name="a", version="1.0"), InstalledDist(name="b", version="1.0")]
    during: list[object] = []
    mine = signal.getsignal(signal.SIGINT)
    restored, left = restore(world.py, before, tool="uv", index_options=["--find-links", str(world.wheels)],
                             on_progress=lambda e, t: during.append(signal.getsignal(signal.SIGINT)))
    assert during and set(during) == {signal.SIG_IGN} and signal.getsignal(signal.SIGINT) is mine
    assert [d.name for d in restored] == ["b"] and not any(left.values())
    # from another thread (a notebook's worker) signals cannot be touched: it restores all the same
    world.setup("uninstall", "b")
    out: list = []
    t = threading.Thread(target=lambda: out.append(restore(world.py, before, tool="uv",
                                                           index_options=["--find-links", str(world.wheels)])))
    t.start()
    t.join(30)
    assert [d.name for d in out[0][0]] == ["b"] and world.versions() == {"a": "1.0", "b": "1.0"}


@pytest.mark.slow
def test_restore_puts_back_an_added_distribution_by_removing_it(world):
    build_wheel(world.wheels, "c", "1.0")
    start = world.tree()
    before = snapshot(world.py)
    world.setup("install", "--no-deps", "--find-links", str(world.wheels), "c==1.0")
    seen: list[tuple[str, str]] = []
    world.calls.clear()
    restored, left = restore(world.py, before, tool="uv", on_progress=lambda e, t: seen.append((e, t)))
    assert world.ran() == [world.uv("uninstall", "c")]
    assert [(d.name, d.version) for d in restored] == [("c", "1.0")] and not any(left.values())
    assert seen == [("restore", "restoring the starting set"), ("restore", "uninstall c")]
    assert world.tree() == start


def test_a_restore_that_cannot_read_the_set_names_everything(world):
    before = snapshot(world.py)
    restored, left = restore(str(world.site / "no-python"), before, tool="uv")
    assert restored == [] and left == {"added": [], "removed": before, "changed": []}


@pytest.mark.slow
def test_the_dry_run_names_an_upgraded_dependency_and_the_journal_saves_it(world):
    build_wheel(world.wheels, "app", "1.0", requires=["dep>=1"])
    build_wheel(world.wheels, "app", "2.0", requires=["dep>=2"])
    build_wheel(world.wheels, "dep", "1.0")
    build_wheel(world.wheels, "dep", "2.0")
    world.setup("install", "--no-deps", "--find-links", str(world.wheels), "app==1.0", "dep==1.0")
    start = world.tree()
    # the step's own environment names the folder (uv's UV_FIND_LINKS): its dry run must see it too
    plan = Plan(python=world.py, steps=[Step(kind="install", reason="app 2", argv=world.uv("install", "app==2.0"),
                                             env={"UV_FIND_LINKS": str(world.wheels)}),
                                        fails()])
    seen: list[tuple[str, str]] = []
    with pytest.raises(InstallFailed):
        apply(plan, on_progress=lambda e, t: seen.append((e, t)))
    assert events(seen, "step")[:3] == ["asking the installer what the plan changes (dry run)",
                                        "saving app 1.0 for a rollback without network",
                                        "saving dep 1.0 for a rollback without network"]
    assert events(seen, "restore")[-1] == "reinstall from the saved wheels: app, dep"
    assert world.tree() == start


@pytest.mark.slow
def test_predicted_changes_skips_steps_that_install_nothing_and_dry_runs_that_fail(world):
    """Only installed distributions the installer would replace count: a new one (c) has nothing to save."""
    build_wheel(world.wheels, "c", "1.0")
    steps = [Step(kind="uninstall", reason="u", argv=world.uv("uninstall", "a")),
             Step(kind="install", reason="new", argv=world.uv("install", "--find-links", str(world.wheels), "c==1.0")),
             Step(kind="install", reason="not an installer", argv=[world.py, "-c", "print('install')"]),
             Step(kind="install", reason="missing", argv=world.uv("install", "--find-links", str(world.wheels),
                                                                  "zzz==1")),
             Step(kind="reinstall", reason="r", argv=world.uv("install", "--reinstall", "--no-deps",
                                                              "--find-links", str(world.wheels), "b==1.0"))]
    said: list[str] = []
    assert predicted_changes(steps, {"a", "b"}, lambda e, t: said.append(t)) == {"b"}
    assert said == ["asking the installer what the plan changes (dry run)"] * 3  # one for each uv install step
    dry = ["uv", "pip", "install", "--dry-run", "--python", world.py]
    assert world.ran() == [dry + ["--find-links", str(world.wheels), "c==1.0"],
                           dry + ["--find-links", str(world.wheels), "zzz==1"],
                           dry + ["--reinstall", "--no-deps", "--find-links", str(world.wheels), "b==1.0"]]
    assert world.versions() == {"a": "1.0", "b": "1.0"}  # a dry run changes nothing


def test_a_dry_run_whose_output_is_not_a_report_predicts_nothing():
    """An install step whose program is not uv is asked for pip's JSON report; a program that prints something
    else (here a Python one-liner that names "install") predicts nothing rather than failing."""
    step = Step(kind="install", reason="i", argv=[sys.executable, "-c", "print('not a report')", "install", "a==1"])
    assert predicted_changes([step], {"a"}) == set()


# PEP 503 names: the plan's pins are matched to installed distributions by normalised name
TOUCHED = [
    (["pip", "install", "A_B==1.0"], set(), {"a-b"}),
    (["pip", "install", "a-b[extra]==1.0", "c==2; python_version>'3'"], set(), {"a-b", "c"}),
    (["pip", "install", "x==1.0"], set(), set()),  # not installed: nothing to save
    (["pip", "install", "a-b>=1.0"], set(), set()),  # not an exact pin
    (["pip", "install", "--constraint==a-b"], set(), set()),  # an option, not a requirement
    (["pip", "install", "--no-deps"], {"a-b"}, {"a-b"}),  # what the plan uninstalls
]


@pytest.mark.parametrize("argv, removed, touched", TOUCHED)
def test_touched_names(argv, removed, touched):
    before = [InstalledDist(name="a-b", version="1.0"), InstalledDist(name="c", version="1.0")]
    plan = Plan(python="p", to_remove=[Removal(name=n) for n in removed],
                steps=[Step(kind="env", reason="e", argv=["c==1"]), Step(kind="install", reason="i", argv=argv)])
    assert touched_names(plan, before) == touched


# the journal's wheel file names: "<escaped name>-<version>-<tags>.whl" (binary distribution format); a
# half-written ".part" or another version with the same prefix is not a saved copy
SAVED = [
    (["a_b-1.0-py3-none-any.whl"], "a-b", "1.0", True),
    (["A_B-1.0-py3-none-any.whl"], "a-b", "1.0", True),
    (["a_b-1.0-py3-none-any.part"], "a-b", "1.0", False),
    (["a_b-1.0.1-py3-none-any.whl"], "a-b", "1.0", False),
    (["a_bc-1.0-py3-none-any.whl"], "a-b", "1.0", False),
    ([], "a-b", "1.0", False),
]


@pytest.mark.parametrize("files, name, version, saved", SAVED)
def test_saved_wheel(tmp_path, files, name, version, saved):
    for f in files:
        (tmp_path / f).write_text("")
    assert _saved(tmp_path, InstalledDist(name=name, version=version)) is saved
    assert _saved(tmp_path / "gone", InstalledDist(name=name, version=version)) is False


# PEP 610: vcs_info.vcs names the VCS ("git", "hg" ...); without a commit id the URL stands alone
SOURCES = [
    (json.dumps({"url": "https://h/r.hg", "vcs_info": {"vcs": "hg", "commit_id": "c0ffee"}}), "hg+https://h/r.hg@c0ffee"),
    (json.dumps({"url": "https://h/LaTeX", "vcs_info": {"requested_revision": "main"}}), "git+https://h/LaTeX"),
    (json.dumps({"url": "", "archive_info": {}}), None),
    ("", None),
]


@pytest.mark.parametrize("direct_url, source", SOURCES)
def test_pep610_vcs_source(direct_url, source):
    assert _source(direct_url) == source


WORDS = [
    (Result(["pip"], None, stderr="partial"), "partial"),  # no exit status but no reason either: its output
    (Result(["uv"], 1, stderr="Resolving\n× No solution\nCaused by: no b\n"), "× No solution\nCaused by: no b"),
    (Result(["pip"], 1, stderr="note\n", error="odd"), "note"),
]


@pytest.mark.parametrize("result, words", WORDS)
def test_installer_error_words(result, words):
    assert installer_error(result) == words


def test_snapshot_runs_outside_the_current_folder(world, tmp_path, monkeypatch):
    """``python -c`` puts the current folder first on sys.path: a .dist-info there must not count."""
    stray = tmp_path / "here" / "stray-1.0.dist-info"
    stray.mkdir(parents=True)
    (stray / "METADATA").write_text("Metadata-Version: 2.1\nName: stray\nVersion: 1.0\n")
    monkeypatch.chdir(tmp_path / "here")
    dists = snapshot(world.py)
    assert [(d.name, d.version, d.installer, d.source) for d in dists] == [("a", "1.0", "uv", None),
                                                                          ("b", "1.0", "uv", None)]
    assert dists[0].path == str(world.site / "a-1.0.dist-info")


def test_snapshot_error_keeps_the_last_500_characters(tmp_path):
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\nprintf 'x%.0s' $(seq 600) >&2\necho ' the end' >&2\nexit 1\n")
    broken.chmod(0o755)
    with pytest.raises(InstallFailed) as err:
        snapshot(str(broken))
    assert str(err.value) == f"could not read the installed set of {broken}: {('x' * 600 + ' the end')[-500:]}"


def test_pip_configuration_files_pip_reads_with_nothing_set(monkeypatch, tmp_path):
    """pip's documentation, "Configuration" / "Location": with no variable set the global files are
    /etc/xdg/pip/pip.conf (XDG_CONFIG_DIRS defaults to /etc/xdg) and /etc/pip.conf, the user's
    ~/.config/pip/pip.conf and the legacy ~/.pip/pip.conf. Which files exist is the machine's: every candidate
    is reported as present here, so the test sees the list that is checked."""
    from cudamatrix.install import plan as plan_mod

    for k in ("PIP_CONFIG_FILE", "XDG_CONFIG_HOME", "XDG_CONFIG_DIRS", "VIRTUAL_ENV"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(plan_mod.os.path, "isfile", lambda p: True)
    assert sorted(plan_mod.pip_config_files()) == sorted([
        "/etc/pip.conf", "/etc/xdg/pip/pip.conf", f"{tmp_path}/.config/pip/pip.conf", f"{tmp_path}/.pip/pip.conf"])


# an index URL may carry "=" itself (a token in the query): only the option's own "=" splits; an http index is
# refused unless allowed, in pip_args and in the fallback from the solution's index fields alike
INDEX_CASES = [
    (dict(pip_args=["--index-url=https://i.example/simple?token=a=b"]), False,
     ["--index-url=https://i.example/simple?token=a=b"]),
    (dict(pip_args=[], index_url="http://i.example/simple", to_install=[]), True,
     ["--extra-index-url", "http://i.example/simple"]),
    (dict(pip_args=["--trusted-host", "i.example", "--find-links", "/w"]), False,
     ["--trusted-host", "i.example", "--find-links", "/w"]),
]


@pytest.mark.parametrize("fields, allow_http, args", INDEX_CASES)
def test_index_args_cases(fields, allow_http, args):
    from cudamatrix.install.plan import index_args
    from cudamatrix.models import Solution

    sol = Solution(**{"request": ["torch"], "targets": ["t"], "packages": [], "to_install": [], **fields})
    assert index_args(sol, allow_http=allow_http) == args


def test_a_plan_targets_this_interpreter_by_its_absolute_path(monkeypatch, tmp_path):
    from cudamatrix.install.plan import default_python

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "executable", os.path.join("bin", "python3"))
    assert default_python() == str(tmp_path / "bin" / "python3")


@pytest.mark.slow
def test_the_cause_is_read_from_all_the_installer_said(world):
    """pip's last words are often a consequence ("ERROR: Exception:" over a traceback); the cause sits in the
    rest of its output, here the OSError of a full disk (cudamatrix/install/explain.py)."""
    code = ("import sys; print('OSError: [Errno 28] No space left on device'); "
            "print('ERROR: Exception:', file=sys.stderr); sys.exit(2)")
    plan = Plan(python=world.py, steps=[Step(kind="install", reason="full", argv=[sys.executable, "-c", code])])
    with pytest.raises(InstallFailed) as err:
        apply(plan)
    way_out = ("free space where the installer writes (site-packages, its cache, the temp folder), or point TMPDIR and "
               "PIP_CACHE_DIR / UV_CACHE_DIR at a larger disk, then run fix again")
    assert str(err.value) == "install failed, step 1 failed: full: no space left: OSError: [Errno 28] No space left on device"
    assert err.value.hint == f"{way_out}; the environment is back to its starting set"
    assert err.value.detail["installer_error"] == "ERROR: Exception:"
    assert err.value.detail["cause"] == {"kind": "no space left", "line": "OSError: [Errno 28] No space left on device",
                                         "way_out": way_out}


@pytest.mark.slow
def test_an_added_distribution_that_cannot_be_removed_is_named(world):
    """The plan added c; its RECORD is gone, so the installer cannot uninstall it: c is named as not restored."""
    build_wheel(world.wheels, "c", "1.0")
    record = world.site / "c-1.0.dist-info" / "RECORD"
    plan = Plan(python=world.py, steps=[
        Step(kind="install", reason="add c", argv=world.uv("install", "--no-deps", "--find-links", str(world.wheels),
                                                           "c==1.0")),
        Step(kind="install", reason="lose the record", argv=[
            sys.executable, "-c", f"import os, sys; os.unlink({str(record)!r}); sys.exit(1)"])])
    with pytest.raises(InstallFailed) as err:
        apply(plan)
    assert world.ran()[-1] == world.uv("uninstall", "c")  # uv: "Cannot uninstall package; `RECORD` file not found"
    assert err.value.detail["not_restored"] == ["c 1.0"] and err.value.detail["restored"] == []
    assert err.value.hint == ("could not restore: c 1.0; the journal keeps what is needed: cudamatrix fix --rollback "
                              f"--python {world.py}")
    assert world.versions() == {"a": "1.0", "b": "1.0", "c": "1.0"}


@pytest.mark.parametrize("tool", ["pip", "uv"])
def test_a_clash_plan_exact(monkeypatch, tool):
    """The three steps of a file-clash plan (uninstall the cause, install the pins, reinstall the survivor), in
    full: pip's ``uninstall -y`` and ``--force-reinstall``, uv's ``--python`` and ``--reinstall`` (uv's
    "Compatibility with pip" page); every step with the mirrored, checked index options, the install time
    limit, and, for uv, the user's pip index variables under uv's names."""
    pass  # _clash_env and _jax13 are defined above

    from cudamatrix.install.plan import INSTALL_TIMEOUT_S, make_plan
    from cudamatrix.models import Pin

    for k in list(os.environ):
        if k.startswith(("PIP_", "UV_")):
            monkeypatch.delenv(k)
    monkeypatch.setenv("PIP_INDEX_URL", "https://corp.example/simple")
    sol = _jax13([Pin("jax-cuda13-plugin", "0.10.2"), Pin("jax-cuda13-pjrt", "0.10.2")])
    sol.pip_args = ["--extra-index-url", "https://download.pytorch.org/whl/cu130", "--find-links",
                    "http://w.example/wheels"]
    plan = make_plan(_clash_env("9.24.0.43"), sol, python="/p", installer=tool, verify=False,
                     mirror="https://m.example/pt", allow_http=True)
    head = ["uv", "pip", "install", "--python", "/p"] if tool == "uv" else ["/p", "-m", "pip", "install"]
    indexes = ["--extra-index-url", "https://m.example/pt/cu130", "--find-links", "http://w.example/wheels"]
    uninstall = ["uv", "pip", "uninstall", "--python", "/p"] if tool == "uv" else ["/p", "-m", "pip", "uninstall", "-y"]
    env = {"UV_INDEX_URL": "https://corp.example/simple"} if tool == "uv" else {}
    assert [(s.kind, s.argv, s.env, s.timeout_s, s.reason) for s in plan.steps] == [
        ("uninstall", uninstall + ["jax-cuda12-pjrt", "jax-cuda12-plugin", "nvidia-cudnn-cu12"], env, INSTALL_TIMEOUT_S,
         "uninstall jax-cuda12-pjrt 0.10.2, jax-cuda12-plugin 0.10.2 (jax 0.10.2 cuda13 does not use the cuda12 "
         "plugin; left installed it would load its own CUDA libraries); nvidia-cudnn-cu12 9.8.0.87 (CUDA 12 wheel no "
         "framework of the solved set uses (it uses CUDA 13))"),
        ("install", head + indexes + ["jax-cuda13-plugin==0.10.2", "jax-cuda13-pjrt==0.10.2"], env, INSTALL_TIMEOUT_S,
         f"install the solved set with {tool}: jax-cuda13-plugin 0.10.2 (new), jax-cuda13-pjrt 0.10.2 (new)"),
        ("reinstall", head + indexes + ["--reinstall" if tool == "uv" else "--force-reinstall", "--no-deps",
                                        "nvidia-cudnn-cu13==9.24.0.43"], env, INSTALL_TIMEOUT_S,
         "reinstall nvidia-cudnn-cu13 9.24.0.43 to restore the files the clash overwrote")]


@pytest.mark.slow
def test_a_pip_plan_asks_pip_for_its_report_and_is_put_back_by_pip(world):
    """A plan run by pip (``python -m pip``) is asked for pip's JSON report (pip's documentation, "pip install":
    ``--dry-run``, ``--quiet``, ``--report -`` writes the report to stdout) and put back by the same pip, not by
    uv that is also on PATH. This venv has no pip, so every pip command fails for real; b is removed by another
    hand (real uv) when step 1 starts, so there is something to put back."""
    pip = [world.py, "-m", "pip"]
    step = Step(kind="install", reason="upgrade a", argv=pip + ["install", "--find-links", str(world.wheels), "a==2.0"])

    def progress(event, text):
        if text == "[1/1] upgrade a":
            world.setup("uninstall", "b")

    with pytest.raises(InstallFailed) as err:
        apply(Plan(python=world.py, steps=[step]), on_progress=progress)
    reinstall_b = pip + ["install", "--no-deps", "--find-links", str(world.wheels), "b==1.0"]
    assert world.ran() == [pip + ["install", "--dry-run", "--quiet", "--report", "-", "--find-links",
                                  str(world.wheels), "a==2.0"],
                           step.argv, reinstall_b, reinstall_b]
    assert err.value.detail["not_restored"] == ["b 1.0"] and world.versions() == {"a": "1.0"}


@pytest.mark.slow
def test_a_resumed_journal_of_a_run_killed_in_its_first_step_runs_every_step(world):
    """``fix --resume`` after a kill during step 1: no step is done (steps_done 0), so step 1 runs again."""
    plan = Plan(python=world.py, steps=[Step(kind="uninstall", reason="drop b", argv=world.uv("uninstall", "b")),
                                        Step(kind="uninstall", reason="drop a", argv=world.uv("uninstall", "a"))])
    journal = journals.begin(world.py, plan, snapshot(world.py), set(), [])
    journal.record(resumed=True)
    applied = apply(plan, journal=journal)
    assert applied.steps_run == ["drop b", "drop a"] and applied.after == []


@pytest.mark.slow
def test_predicted_changes_adds_up_every_step_past_one_that_is_not_a_report(world):
    """Each install step's prediction adds to the others: a program that prints no report predicts nothing and
    the next steps are still asked; a later step that replaces nothing installed takes nothing away."""
    build_wheel(world.wheels, "c", "1.0")
    steps = [Step(kind="install", reason="i", argv=[sys.executable, "-c", "print('not a report')", "install", "b==1"]),
             Step(kind="install", reason="up", argv=world.uv("install", "--no-deps", "--find-links", str(world.wheels),
                                                             "a==2.0")),
             Step(kind="install", reason="new", argv=world.uv("install", "--find-links", str(world.wheels), "c==1.0"))]
    assert predicted_changes(steps, {"a", "b"}) == {"a"}


@pytest.mark.slow
def test_several_not_put_back_are_all_named(world):
    """The plan added c and d and removed a and b, whose wheels are gone (none was saved: the plan neither pins
    nor lists them): c and d are uninstalled together, a and b reinstalled together then one by one, each with
    the restore's time limit, and both are named as not restored."""
    for name in ("c", "d"):
        build_wheel(world.wheels, name, "1.0")
    for wheel in ("a-1.0-py3-none-any.whl", "a-2.0-py3-none-any.whl", "b-1.0-py3-none-any.whl"):
        (world.wheels / wheel).unlink()
    plan = Plan(python=world.py, steps=[
        Step(kind="install", reason="add c and d", argv=world.uv("install", "--no-deps", "--find-links",
                                                                 str(world.wheels), "c", "d")),
        Step(kind="uninstall", reason="drop a and b", argv=world.uv("uninstall", "a", "b")),
        fails()])
    seen: list[tuple[str, str]] = []
    with pytest.raises(InstallFailed) as err:
        apply(plan, on_progress=lambda e, t: seen.append((e, t)))
    base = world.uv("install", "--no-deps", "--find-links", str(world.wheels))
    assert world.ran()[-4:] == [world.uv("uninstall", "c", "d"), base + ["a==1.0", "b==1.0"], base + ["a==1.0"],
                                base + ["b==1.0"]]
    assert [kw["timeout"] for _, kw in world.calls[-5:-1]] == [apply_mod.RESTORE_TIMEOUT_S] * 4
    assert events(seen, "restore") == ["restoring the starting set", "uninstall c d", "reinstall a 1.0, b 1.0"]
    assert err.value.detail["not_restored"] == ["a 1.0", "b 1.0"]
    assert err.value.hint == ("could not restore: a 1.0, b 1.0; the journal keeps what is needed: cudamatrix fix "
                              f"--rollback --python {world.py}")
    assert world.versions() == {}


@pytest.mark.slow
def test_a_step_past_its_time_limit_is_explained_by_the_time_out(world):
    """A step that outlives its own time limit is stopped; proc's "timed out after 0.5s" is where the cause is read
    from, as it printed nothing itself (cudamatrix/install/explain.py: "timed out" is the network row, a stalled
    download being the usual reason)."""
    plan = Plan(python=world.py, steps=[Step(kind="install", reason="slow", timeout_s=0.5,
                                             argv=[sys.executable, "-c", "import time; time.sleep(30)"])])
    with pytest.raises(InstallFailed) as err:
        apply(plan)
    assert str(err.value) == "install failed, step 1 failed: slow: network: timed out after 0.5s"
    assert err.value.detail["installer_error"] == "timed out after 0.5s"
    assert err.value.detail["cause"]["kind"] == "network"


def test_a_clash_with_a_partner_that_is_not_installed_and_two_survivors():
    """A file clash can name a distribution the environment does not list (no version): it is uninstalled by name
    alone; two clash survivors are both reinstalled, named in one reason."""
    pass  # _clash_env and _jax13 are defined above

    from cudamatrix.install.plan import make_plan
    from cudamatrix.models import FileConflict, Pin

    env = _clash_env("9.24.0.43")
    env.file_conflicts.append(FileConflict("torch/lib/libtorch_cuda.so", ["torch==2.14.1", "torch-ghost==0.1"]))
    plan = make_plan(env, _jax13([Pin("jax-cuda13-plugin", "0.10.2"), Pin("jax-cuda13-pjrt", "0.10.2")]),
                     python="/p", installer="pip", verify=False)
    uninstall, _, reinstall = plan.steps
    assert uninstall.argv[-1] == "torch-ghost"
    assert uninstall.reason.endswith("; torch-ghost (installs torch/lib/libtorch_cuda.so over torch's copy, and "
                                     "nothing in the solved set needs it)")
    assert reinstall.argv[-2:] == ["nvidia-cudnn-cu13==9.24.0.43", "torch==2.14.1"]
    assert reinstall.reason == "reinstall nvidia-cudnn-cu13 9.24.0.43, torch 2.14.1 to restore the files the clash overwrote"
