"""`cudamatrix fix` end to end: the real command, a real pip, a throwaway venv, and the framework index
served on loopback through --mirror. The machine is described by target flags (a T4 and a current
driver), so the solver asks for a CUDA build of torch while the venv holds a CPU one."""
from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest
from support.fakes import run_cli
from support.localindex import LocalIndex, build_wheel, copy_venv, pip_list
from support.uvtool import needs_uv, with_uv

from cudamatrix.install import journal as journals

ROOT = Path(__file__).parent.resolve().parents[1]
TARGET = ["--gpu", "Tesla T4", "--driver", "550.54.14"]

# A stand-in torch that computes a correct CPU convolution (the naive way): enough for verify's CPU path.
FAKE_TORCH = textwrap.dedent('''
    __version__ = "{version}"
    class version:
        cuda = {cuda!r}
    class _Flags:
        pass
    class backends:
        cudnn = _Flags()
        class cuda:
            matmul = _Flags()
    class cuda:
        @staticmethod
        def is_available():
            return False
    float32 = "float32"
    def tensor(x, dtype=None):
        return x
    class _T:
        def __init__(self, v):
            self.v = v
        def tolist(self):
            return self.v
    def _conv(x, w):
        out = []
        for xn in x:
            planes = []
            for wk in w:
                r = len(wk[0])
                size = len(xn[0]) - r + 1
                planes.append([[sum(xn[c][i + a][j + b] * wk[c][a][b] for c in range(len(xn))
                                    for a in range(r) for b in range(r)) for j in range(size)] for i in range(size)])
            out.append(planes)
        return out
    class nn:
        class functional:
            @staticmethod
            def conv2d(x, w, **kw):
                return _T(_conv(x, w))
''')


def _cli(*args: str, env: dict, timeout: float = 600) -> subprocess.CompletedProcess:
    """The CLI in this process (stdin empty, never a terminal); ``env`` replaces the environment for the call."""
    return run_cli(list(args), env=env, input="", timeout=timeout, text=True, cwd=ROOT)


@pytest.fixture()
def world(template_venv, tmp_path):
    """A venv with a stand-in CPU torch, the solved set for the target, and an environment for the CLI."""
    py = copy_venv(template_venv, tmp_path / "venv")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    env.update({"PIP_CONFIG_FILE": os.devnull, "PIP_CACHE_DIR": str(tmp_path / "pipcache"),
                "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_DEFAULT_TIMEOUT": "5", "PIP_RETRIES": "0",
                "XDG_CACHE_HOME": str(tmp_path / "xdg"), "XDG_STATE_HOME": str(tmp_path / "state"), "PATH": os.environ.get("PATH", ""),
                "PYTHONPATH": str(ROOT)})
    env.pop("LD_LIBRARY_PATH", None)
    start = tmp_path / "start"
    cpu = build_wheel(start, "torch", "2.4.1+cpu", files={"torch/__init__.py": FAKE_TORCH.format(version="2.4.1+cpu", cuda=None)})
    subprocess.run([str(py), "-m", "pip", "install", "--no-index", "--no-deps", str(cpu)], env=env, check=True,
                   capture_output=True, timeout=300)
    solved = _cli("solve", "--python", str(py), *TARGET, "--json", env=env)
    assert solved.returncode == 0, solved.stdout + solved.stderr
    solution = json.loads(solved.stdout)["data"]["solution"]
    return py, env, solution


def _wheels(folder: Path, solution: dict, *, corrupt: bool = False) -> dict[str, str]:
    """Stand-in wheels for every pin of the solution (torch depends on a stand-in cuDNN wheel)."""
    pins = {p["name"]: p["version"] for p in solution["packages"]}
    for name, version in pins.items():
        if name == "torch":
            cuda = (solution.get("cuda") or "12")
            build_wheel(folder, "nvidia-cudnn-cu12", "9.1.0.70", files={"nvidia/cudnn/lib/libcudnn.so.9": "stand-in"})
            build_wheel(folder, "torch", version, requires=["nvidia-cudnn-cu12==9.1.0.70"], corrupt=corrupt,
                        files={"torch/__init__.py": FAKE_TORCH.format(version=version, cuda=cuda)})
        else:
            build_wheel(folder, name, version)
    return pins


@pytest.mark.installs
def test_fix_installs_the_solved_set_then_is_a_no_op_with_a_remembered_verification(world, tmp_path):
    py, env, solution = world
    assert not solution["unchanged"] and "+cu" in next(p["version"] for p in solution["packages"] if p["name"] == "torch")
    pins = _wheels(tmp_path / "wheels", solution)
    with LocalIndex(tmp_path / "wheels") as index:
        env["PIP_INDEX_URL"] = index.url + "/simple"
        args = ["fix", "--python", str(py), *TARGET, "--mirror", index.url + "/whl", "--allow-http", "--yes", "--json"]
        first = _cli(*args, "--framework", "torch", env=env)
        data = json.loads(first.stdout)
        assert first.returncode == 6, first.stdout + first.stderr  # installed; the GPU check is not possible here
        assert data["data"]["status"] == "applied" and data["data"]["report"]["frameworks"][0]["cpu_checked"]
        installed = {d["name"]: d["version"] for d in pip_list(py, env)}
        assert all(installed[n] == v for n, v in pins.items())
        assert installed["nvidia-cudnn-cu12"] == "9.1.0.70"
        assert any("/whl/cu" in p for p in index.served)
        second = _cli(*args, "--framework", "torch", env=env)
    again = json.loads(second.stdout)["data"]
    assert second.returncode == 6
    assert again["status"] == "unchanged" and again["applied"] is None
    assert again["from_cache"] and again["report"]["cached_at"], again["messages"]


@pytest.mark.installs
def test_fix_rolls_back_a_failing_install_and_exits_4(world, tmp_path):
    py, env, solution = world
    env.update(with_uv(env))
    _wheels(tmp_path / "wheels", solution, corrupt=True)
    with LocalIndex(tmp_path / "wheels") as index:
        env["PIP_INDEX_URL"] = index.url + "/simple"
        before = pip_list(py, env)
        # pip installs the cuDNN wheel, then fails on torch's archive: a partial install to undo
        r = _cli("fix", "--python", str(py), *TARGET, "--mirror", index.url + "/whl", "--allow-http", "--yes",
                 "--installer", "pip", "--json", env=env)
        after = pip_list(py, env)
    assert r.returncode == 4, r.stdout + r.stderr
    out = json.loads(r.stdout)
    assert out["status"] == "install_failed"
    detail = out["errors"][0]["detail"]
    assert "error" in detail["installer_error"].lower() and detail["not_restored"] == []
    assert ("nvidia-cudnn-cu12", "9.1.0.70") in {(d["name"], d["version"]) for d in detail["restored"]}
    assert after == before


@pytest.mark.installs
@needs_uv
def test_fix_with_uv_reads_the_users_pip_index_and_rolls_back(world, tmp_path):
    py, env, solution = world
    env.update(with_uv(env))
    _wheels(tmp_path / "wheels", solution, corrupt=True)
    with LocalIndex(tmp_path / "wheels") as index:
        env["PIP_INDEX_URL"] = index.url + "/simple"  # uv is told of it through UV_INDEX_URL
        before = pip_list(py, env)
        r = _cli("fix", "--python", str(py), *TARGET, "--mirror", index.url + "/whl", "--allow-http", "--yes",
                 "--installer", "uv", "--json", env=env)
        after = pip_list(py, env)
        assert any(p.startswith("/files/torch-") for p in index.served), "uv fetched from the user's index"
    assert r.returncode == 4, r.stdout + r.stderr
    assert "uv" in json.loads(r.stdout)["errors"][0]["detail"]["argv"][0]
    assert after == before


@pytest.mark.installs
def test_fix_dry_run_and_http_refusal_change_nothing(world, tmp_path):
    py, env, solution = world
    before = pip_list(py, env)
    r = _cli("fix", "--python", str(py), *TARGET, "--dry-run", env=env)
    assert r.returncode == 0, r.stderr
    assert "pip install" in r.stdout and "dry run" in r.stdout
    refused = _cli("fix", "--python", str(py), *TARGET, "--mirror", "http://127.0.0.1:9/whl", "--yes", "--json",
                   env=env)
    assert refused.returncode == 2 and "not https" in refused.stdout
    assert pip_list(py, env) == before


def test_cache_remembers_per_fingerprint_in_xdg_cache_home(tmp_path, monkeypatch):
    from cudamatrix.models import Driver, Environment, FrameworkReport, Report
    from cudamatrix.verify import memory as cache

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    env = Environment(driver=Driver(version="550.54.14", status="ok"), packages={"torch": "2.5.1+cu121"})
    key = cache.fingerprint(env)
    assert cache.load(key) is None
    report = Report(status="verified", frameworks=[FrameworkReport(framework="torch", status="verified")])
    assert cache.store(key, report)
    got = cache.load(key)
    assert got.status == "verified" and got.cached_at and (tmp_path / "cudamatrix" / "verify.json").is_file()
    drifted = Environment(driver=env.driver, packages={"torch": "2.5.1+cu121", "nvidia-cudnn-cu12": "9.1.0.70"})
    assert cache.fingerprint(drifted) != key and cache.load(cache.fingerprint(drifted)) is None
    hung = Report(status="failed", frameworks=[FrameworkReport(framework="torch", status="failed",
                                                               finding_code="VERIFY_TIMEOUT")])
    assert not cache.store(key + "x", hung)  # a hang is worth running again


def test_fast_dispatch_takes_only_plain_invocations():
    from cudamatrix.cli.fast import fast_main, parse
    from cudamatrix.cli.options import COMMANDS

    # every declared option is taken (tests/cli/test_options.py checks typer would pass the same)
    assert parse(COMMANDS["fix"], ["--dry-run"])["dry_run"] is True
    assert parse(COMMANDS["fix"], ["--python", "p", "--mirror", "x"])["mirror"] == "x"
    assert parse(COMMANDS["fix"], ["torch>=2"])["requirements"] == ["torch>=2"]
    assert fast_main(["solve", "torch", "--no-such-option"]) is None
    assert fast_main(["lock", "--help"]) is None
    assert fast_main(["detect", "--python"]) is None  # a value is missing: typer reports the usage error


def test_cudamatrix_fix_stays_callable_after_the_submodule_is_imported(monkeypatch):
    import cudamatrix
    import cudamatrix.fix  # noqa: F401  (the command line does this)

    seen = {}
    monkeypatch.setattr(cudamatrix.fix, "fix", lambda **kw: seen.update(kw) or "the result")
    # the package attribute is now the module, and calling it runs the module's fix() with the arguments
    assert cudamatrix.fix(dry_run=True, python="p") == "the result"
    assert seen == {"dry_run": True, "python": "p"}


def test_fix_takes_one_options_record_or_its_fields_as_keywords(monkeypatch):
    import importlib

    fix_module = importlib.import_module("cudamatrix.fix")
    FixOptions = fix_module.FixOptions
    seen = []

    class Session:
        def __init__(self, options):
            seen.append(options)

        def run(self):
            return "the result"

    monkeypatch.setattr(fix_module, "_Session", Session)
    assert fix_module.fix(python="p", dry_run=True, gpus=["sm_90"]) == "the result"
    assert fix_module.fix(FixOptions(python="p", dry_run=True, gpus=["sm_90"])) == "the result"
    assert fix_module.fix(FixOptions(python="p", gpus=["sm_90"]), dry_run=True) == "the result"
    # not at a notebook cell or prompt: nothing is shown, nobody is asked (a script's call is consent)
    assert seen == [FixOptions(python="p", dry_run=True, gpus=["sm_90"], show=False)] * 3
    with pytest.raises(TypeError):
        fix_module.fix(no_such_keyword=1)
    # the record's fields are the keywords the README documents for cudamatrix.fix()
    from cudamatrix.schema import field_names

    assert field_names(FixOptions) == (
        "python", "request", "dry_run", "verify", "frameworks", "mirror", "allow_http", "installer",
        "write_activation", "use_cache", "timeout", "driver", "gpus", "data_dir", "confirm", "on_progress",
        "in_process", "show", "resume", "rollback", "yes", "interactive", "undo")
    assert FixOptions() == FixOptions(verify=True, frameworks="all", use_cache=True, timeout=300.0)


def _fix_then_take_the_index_away(py, env, solution, tmp_path) -> list[dict]:
    """Run a real fix with pip from the loopback index (which then stops), returning the starting set."""
    _wheels(tmp_path / "wheels", solution)
    before = pip_list(py, env)
    with LocalIndex(tmp_path / "wheels") as index:
        env["PIP_INDEX_URL"] = index.url + "/simple"
        r = _cli("fix", "--python", str(py), *TARGET, "--mirror", index.url + "/whl", "--allow-http", "--yes",
                 "--installer", "pip", "--no-verify", "--json", env=env)
    assert json.loads(r.stdout)["data"]["status"] == "applied", r.stdout + r.stderr
    assert pip_list(py, env) != before
    return before


@pytest.mark.installs
def test_fix_undo_goes_back_to_the_starting_set_offline_and_again_goes_forward(world, tmp_path):
    py, env, solution = world
    before = _fix_then_take_the_index_away(py, env, solution, tmp_path)
    fixed = pip_list(py, env)
    # the index is gone (its port is closed): the undo installs from the wheels the fix kept
    r = _cli("fix", "--undo", "--python", str(py), "--installer", "pip", "--yes", "--json", env=env)
    data = json.loads(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr
    assert data["data"]["status"] == "undone" and pip_list(py, env) == before
    steps = [s["argv"] for s in data["data"]["plan"]["steps"]]
    assert any("--no-index" in argv for argv in steps), steps
    human = _cli("fix", "--undo", "--python", str(py), "--installer", "pip", "--yes", env=env)  # the undo of the undo
    assert human.returncode == 0, human.stdout + human.stderr
    assert "undone: back to the starting set" in human.stdout and pip_list(py, env) == fixed


@pytest.mark.installs
def test_fix_undo_refuses_with_the_cause_and_changes_nothing(world, tmp_path):
    py, env, solution = world
    none = _cli("fix", "--undo", "--python", str(py), "--json", env=env)
    assert none.returncode == 2 and "no completed fix" in none.stdout
    env["CUDAMATRIX_UNDO_KEEP_GB"] = "0"  # the fix keeps no wheels: undo must name what it lacks
    _fix_then_take_the_index_away(py, env, solution, tmp_path)
    fixed = pip_list(py, env)
    r = _cli("fix", "--undo", "--python", str(py), "--installer", "pip", "--yes", "--json", env=env)
    error = json.loads(r.stdout)["errors"][0]
    assert r.returncode == 2 and "torch 2.4.1+cpu" in error["message"], r.stdout
    assert "CUDAMATRIX_UNDO_KEEP_GB" in error["message"] and pip_list(py, env) == fixed
    # the set moved since the fix: undo would take that back too, so it is refused
    extra = build_wheel(tmp_path / "extra", "late-arrival", "1.0")
    subprocess.run([str(py), "-m", "pip", "install", "--no-index", str(extra)], env=env, check=True,
                   capture_output=True, timeout=300)
    moved = _cli("fix", "--undo", "--python", str(py), "--json", env=env)
    assert moved.returncode == 2 and "late-arrival 1.0 added" in moved.stdout, moved.stdout


@pytest.mark.installs
def test_a_failing_undo_restores_the_fixed_set(world, tmp_path):
    py, env, solution = world
    _fix_then_take_the_index_away(py, env, solution, tmp_path)
    fixed = pip_list(py, env)
    state = Path(env["XDG_STATE_HOME"]) / "cudamatrix" / "journal"
    saved = next(state.glob("*.last/wheels/torch-*.whl"))
    raw = bytearray(saved.read_bytes())
    at = raw.index(b"x" * 64)  # build_wheel's payload, stored uncompressed by the repack: its CRC breaks
    raw[at] = ord("y")
    saved.write_bytes(bytes(raw))
    # recorded as saved (its hash in the journal, signed with the user's key): undo's checks pass, pip fails
    kept = journals.Journal(saved.parent.parent, json.loads((saved.parent.parent / journals.JOURNAL_FILE).read_text()))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", env["XDG_CACHE_HOME"])
        kept.record(sha256={**kept.data["sha256"], saved.name: journals.sha256_of(saved)})
    r = _cli("fix", "--undo", "--python", str(py), "--installer", "pip", "--yes", "--json", env=env)
    assert r.returncode == 4, r.stdout + r.stderr  # the uninstall ran, the install failed: put back, not half done
    assert json.loads(r.stdout)["errors"][0]["detail"]["not_restored"] == [], r.stdout
    assert pip_list(py, env) == fixed


def _counted(monkeypatch) -> dict[str, int]:
    """Counting wrappers around detect, diagnose and the loader model's entry point (libpaths.predict_loads),
    each patched where its callers look it up."""
    import importlib

    from cudamatrix.diagnose import findings
    from cudamatrix.ldso import libpaths

    calls = dict.fromkeys(("detect", "diagnose", "loader_model"), 0)
    fix = importlib.import_module("cudamatrix.fix")  # imports detect and diagnose by name at its top
    for name, owners, attr in (("detect", (importlib.import_module("cudamatrix.detect"), fix), "detect"),
                               ("diagnose", (findings, fix), "diagnose"), ("loader_model", (libpaths,), "predict_loads")):
        def counting(*args, _real=getattr(owners[0], attr), _name=name, **kwargs):
            calls[_name] += 1
            return _real(*args, **kwargs)

        for owner in owners:
            monkeypatch.setattr(owner, attr, counting)
    return calls


@pytest.mark.installs
def test_fix_detects_diagnoses_and_models_the_loader_once_per_state_of_the_machine(world, tmp_path, monkeypatch):
    """A dry run, an applied fix and a run with nothing to fix: detect, diagnose and the loader model run once
    for the machine as found and once more only after a change (before: twice, and the loader model up to four
    times: verify predicted again what detect had, and an unchanged machine was diagnosed twice)."""
    py, env, solution = world
    _wheels(tmp_path / "wheels", solution)
    with LocalIndex(tmp_path / "wheels") as index:
        env["PIP_INDEX_URL"] = index.url + "/simple"
        args = ["fix", "--python", str(py), *TARGET, "--mirror", index.url + "/whl", "--allow-http", "--json",
                "--framework", "torch", "--installer", "pip"]
        calls = _counted(monkeypatch)
        dry = _cli(*args, "--dry-run", env=env)
        assert json.loads(dry.stdout)["data"]["status"] == "dry_run", dry.stdout + dry.stderr
        assert calls == {"detect": 1, "diagnose": 1, "loader_model": 1}
        calls.update(dict.fromkeys(calls, 0))
        applied = _cli(*args, "--yes", env=env)
        data = json.loads(applied.stdout)["data"]
        assert data["status"] == "applied" and data["report"]["frameworks"][0]["cpu_checked"], applied.stdout
        assert calls == {"detect": 2, "diagnose": 2, "loader_model": 2}  # the machine before, and after the change
        calls.update(dict.fromkeys(calls, 0))
        again = _cli(*args, "--yes", "--no-cache", env=env)  # nothing to install; verified again (no memory)
    data = json.loads(again.stdout)["data"]
    assert data["status"] == "unchanged" and data["applied"] is None and data["report"], again.stdout
    assert calls == {"detect": 1, "diagnose": 1, "loader_model": 1}
