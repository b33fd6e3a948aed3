"""fix applies its plan for the extension findings with real pip into a throwaway venv, against a loopback index of
stand-in wheels with the real names: torch 2.14.1 (the default-index CUDA 13 build, its nvidia-* pins as
data/torch.json records them) beside cupy-cuda12x 13.6.0 and cupy-cuda13x 13.6.0 installed together (CuPy's
installation guide: exactly one cupy-cudaNNx; the two install the same ``cupy`` package, so the one installed last
wins the shared file). fix uninstalls the variant whose CUDA major torch does not use and writes the kept one
again; ``fix --undo`` puts the starting set back."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from support import brokenvenv
from support.fakes import run_cli
from support.localindex import LocalIndex, build_wheel, make_venv

ROOT = Path(__file__).parent.resolve().parents[1]
pytestmark = [pytest.mark.slow, pytest.mark.installs]
SHARED = "cupy/_version.py"


def _env(tmp: Path, index: str = "http://127.0.0.1:9/simple") -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    env.update({"PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": index, "PIP_CACHE_DIR": str(tmp / "pipcache"),
                "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_DEFAULT_TIMEOUT": "5", "PIP_RETRIES": "0",
                "XDG_CACHE_HOME": str(tmp / "xdg"), "XDG_STATE_HOME": str(tmp / "state"), "PYTHONPATH": str(ROOT)})
    env.pop("LD_LIBRARY_PATH", None)
    return env


def _cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    return run_cli(list(args), env=env, input="", timeout=600, text=True, cwd=ROOT)


def _freeze(py: Path, env: dict) -> str:
    return subprocess.run([str(py), "-m", "pip", "freeze", "--all"], env=env, capture_output=True, text=True,
                          check=True, timeout=120).stdout


def test_fix_drops_the_cupy_variant_of_the_other_cuda_major_and_undo_puts_it_back(tmp_path):
    wheels = brokenvenv.build_wheels(tmp_path / "wheels")
    for major in ("12", "13"):
        build_wheel(wheels, f"cupy-cuda{major}x", "13.6.0", files={SHARED: f"cuda = {major}\n"})
    py = make_venv(tmp_path / "venv", brokenvenv.interpreter())
    env = _env(tmp_path)
    for args in (["torch==2.14.1"], ["cupy-cuda13x==13.6.0"], ["cupy-cuda12x==13.6.0"]):
        subprocess.run([str(py), "-m", "pip", "install", "--no-index", "--find-links", str(wheels), *args], env=env,
                       check=True, capture_output=True, timeout=300)
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    assert (site / SHARED).read_text() == "cuda = 12\n"  # written last
    before = _freeze(py, env)
    with LocalIndex(wheels) as index:
        env = _env(tmp_path, index.url + "/simple")
        dry = json.loads(_cli("fix", "--allow-http", "--python", str(py), *brokenvenv.TARGET, "--dry-run",
                              "--installer", "pip", "--json", env=env).stdout)["data"]
        clash = [r for r in dry["plan"]["remedies"] if r["code"] == "EXTENSION_VARIANT_CLASH"]
        assert [r["action"] for r in clash] == ["uninstall"], dry["plan"]["remedies"]
        assert [r["name"] for r in dry["plan"]["to_remove"]] == ["cupy-cuda12x"]
        done = _cli("fix", "--allow-http", "--python", str(py), *brokenvenv.TARGET, "--yes", "--no-verify",
                    "--installer", "pip", "--json", env=env)
        assert done.returncode in (0, 1), done.stdout[-2000:] + done.stderr[-2000:]
        after = _freeze(py, env)
        assert "cupy-cuda12x" not in after and "cupy-cuda13x==13.6.0" in after
        assert (site / SHARED).read_text() == "cuda = 13\n"  # the kept variant written again
        left = {f["code"] for f in json.loads(done.stdout)["data"]["left"]}
        assert "EXTENSION_VARIANT_CLASH" not in left
        undo = _cli("fix", "--undo", "--python", str(py), "--yes", "--installer", "pip", env=env)
        assert undo.returncode == 0, undo.stdout[-2000:] + undo.stderr[-2000:]
    assert sorted(_freeze(py, env).splitlines()) == sorted(before.splitlines())
