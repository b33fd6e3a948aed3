"""plan + apply against a real pip, a throwaway venv and a PEP 503 index served on loopback."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from cudamatrix.install import apply as apply_mod
from cudamatrix.install.apply import apply, diff, snapshot
from cudamatrix.errors import Exit, InstallFailed, UsageError
from cudamatrix.models import Environment, InstalledDist, Pin, Plan, Solution, Step
from cudamatrix.install.plan import make_plan, rewrite_mirror

from localindex import LocalIndex, build_wheel, copy_venv, pip_list

TORCH_INDEX = "https://download.pytorch.org/whl/cu121"
SOLVED = [Pin("torch", "2.5.1+cu121", index_url=TORCH_INDEX), Pin("nvidia-cudnn-cu12", "9.1.0.70"),
          Pin("nvidia-cublas-cu12", "12.1.3.1")]


# --- plan: pure --------------------------------------------------------------------------------------

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


# --- apply: real pip, real venv, real HTTP index --------------------------------------------------------

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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


# --- the installer's root cause, from real pip and uv runs -------------------------------------------

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


@pytest.mark.slow
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


@pytest.mark.slow
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


# --- removals, reinstalls and remedies: pure ---------------------------------------------------------

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


@pytest.mark.slow
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


@pytest.mark.slow
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
