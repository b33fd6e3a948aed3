"""install.extfix and fix's plan for the extension findings: the extension's release data/extensions.json holds for
the torch kept, or torch moved to the extension's pin, and a cupy variant of the other CUDA major uninstalled.

Facts the expectations rest on: xformers 0.0.29.post3's METADATA declares ``torch==2.6.0`` and its
``cpp_lib.json`` names torch 2.6.0+cu124 (its ``_C.so``: ``nm -D --undefined-only`` lists
``U _ZN3c104cuda9SetDeviceEa``, which torch 2.14.1's ``libc10_cuda.so`` does not define; ``readelf -d``: NEEDED
``libcudart.so.12`` beside torch 2.14.1 cu130); the expected releases are computed from the rows of
data/extensions.json (their torch specifier and CUDA major, read from the wheels' METADATA and libraries), never
typed; CuPy's installation guide: exactly one cupy-cudaNNx package.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from support.realwheels import TORCH_PY, fetch, site_packages

from cudamatrix.install import extfix
from cudamatrix.install.plan import make_plan
from cudamatrix.install.remedies import reinstalls, removals
from cudamatrix.matrix.load import load_matrix
from cudamatrix.models import (
    Environment,
    Extension,
    Finding,
    Framework,
    FrameworkChoice,
    Pin,
    PythonInfo,
    Solution,
)
from cudamatrix.names import canonical

M = load_matrix()
XFORMERS = ("xformers", "0.0.29.post3")


def newest(name: str, torch: str | None = None, cuda_major: int | None = None) -> str:
    """The newest release of ``name`` in data/extensions.json whose torch specifier admits ``torch`` and whose CUDA
    major is ``cuda_major`` (the rows, read here)."""
    rows = [r for r in M.extensions.releases if canonical(r.name) == name and "3.11" in r.python
            and (torch is None or SpecifierSet(r.requires.get("torch", "")).contains(torch))
            and (cuda_major is None or r.cuda_major == cuda_major)]
    return str(max(rows, key=lambda r: r.version).version)


def env(torch: str = "2.14.1", cuda: str = "13.0", extensions=(), **packages) -> Environment:
    e = Environment(origin="file", python=PythonInfo(version="3.11.9", platform="linux_x86_64"),
                    packages={"torch": torch, **{k.replace("_", "-"): v for k, v in packages.items()}},
                    extensions=list(extensions))
    e.frameworks = [Framework(name="torch", version=torch, variant="cu" + cuda.replace(".", ""), cuda=cuda)]
    return e


def solution(torch: str = "2.14.1", cuda: str = "13.0") -> Solution:
    return Solution(request=["torch"], targets=["t"], packages=[Pin(name="torch", version=torch)],
                    frameworks=[FrameworkChoice(name="torch", version=torch, variant="cu" + cuda.replace(".", ""),
                                                cuda=cuda)], unchanged=True)


def finding(code: str, title: str) -> Finding:
    return Finding(code=code, severity="error", title=title)


def test_xformers_for_the_kept_torch_is_chosen_from_the_data():
    ext = Extension(name="xformers", version="0.0.29.post3", declares=["torch==2.6.0"], built_for="2.6.0+cu124")
    e = env(extensions=[ext], xformers="0.0.29.post3")
    found = [finding("EXTENSION_PIN_MISMATCH", "xformers 0.0.29.post3 requires torch==2.6.0; torch 2.14.1 is "
                                               "installed")]
    (change,) = extfix.extension_changes(e, found, M, solution())
    assert (change.release.name, str(change.release.version)) == ("xformers", newest("xformers", "2.14.1"))
    assert change.sentence().startswith(f"xformers 0.0.29.post3 -> xformers {newest('xformers', '2.14.1')}: the "
                                        "newest release in data/extensions.json for torch 2.14.1 (")
    assert "source: " in change.sentence()
    assert extfix.torch_move(e, found, M, solution()) is None  # the extension moves: one distribution changes


def test_torch_moves_to_the_pin_when_the_data_holds_no_release_for_the_kept_torch():
    """vllm pins one exact torch per release; no row pins torch 2.14.1, so vllm 0.11.0 keeps and torch moves."""
    assert not [r for r in M.extensions.releases if r.name == "vllm" and r.requires.get("torch") == "==2.14.1"]
    ext = Extension(name="vllm", version="0.11.0", declares=["torch==2.8.0"])
    e = env(extensions=[ext], vllm="0.11.0")
    found = [finding("EXTENSION_PIN_MISMATCH", "vllm 0.11.0 requires torch==2.8.0; torch 2.14.1 is installed")]
    assert extfix.extension_changes(e, found, M, solution()) == []
    assert extfix.torch_move(e, found, M, solution()) == ["torch==2.8.0", "vllm==0.11.0"]


def test_cupy_of_the_other_cuda_major_is_swapped_for_the_frameworks_and_uninstalled():
    ext = Extension(name="cupy-cuda12x", version="13.6.0")
    e = env(extensions=[ext], cupy_cuda12x="13.6.0")
    found = [finding("EXTENSION_CUDA_MISMATCH", "cupy-cuda12x 13.6.0 links CUDA libraries of another major than "
                                                "torch 2.14.1 (CUDA 13)")]
    changes = extfix.extension_changes(e, found, M, solution())
    sol = extfix.with_changes(solution(), changes)
    want = newest("cupy-cuda13x", cuda_major=13)
    assert [p.requirement() for p in sol.to_install] == [f"cupy-cuda13x=={want}"]
    assert [r.name for r in removals(e, sol)] == ["cupy-cuda12x"]


def test_two_cupy_variants_lose_the_one_the_framework_does_not_use_and_the_kept_one_is_written_again():
    e = env(cupy_cuda12x="13.6.0", cupy_cuda13x="13.6.0")
    sol = solution()
    gone = removals(e, sol)
    assert [(r.name, r.version) for r in gone] == [("cupy-cuda12x", "13.6.0")]
    assert reinstalls(e, sol, gone, []) == [("cupy-cuda13x", "13.6.0")]
    plan = make_plan(e, sol, python="/venv/bin/python", installer="pip", verify=False,
                     findings=[finding("EXTENSION_VARIANT_CLASH", "cupy-cuda12x 13.6.0 and cupy-cuda13x 13.6.0 are "
                                                                  "installed together")])
    assert [(s.kind, s.argv[-1]) for s in plan.steps] == [("uninstall", "cupy-cuda12x"),
                                                          ("reinstall", "cupy-cuda13x==13.6.0")]
    assert [r.action for r in plan.remedies] == ["uninstall"]
    assert removals(env(cupy_cuda12x="13.6.0"), sol) == []  # a lone variant is the CUDA_MISMATCH's business


def test_no_row_no_change_and_no_framework_no_change():
    ext = Extension(name="unknownext", version="1.0", declares=["torch==2.6.0"])
    e = env(extensions=[ext], unknownext="1.0")
    found = [finding("EXTENSION_PIN_MISMATCH", "unknownext 1.0 requires torch==2.6.0; torch 2.14.1 is installed")]
    assert extfix.extension_changes(e, found, M, solution()) == []
    assert removals(env(cupy_cuda12x="13.6.0", cupy_cuda13x="13.6.0"), Solution(request=[], targets=[])) == []


# --- the real wheel beside the real torch: fix --dry-run ------------------------------------------------------------

def _venv_beside_torch(tmp_path: Path, torch_site: Path) -> Path:
    """A throwaway venv whose site-packages holds the real torch 2.14.1 (linked) and the members of the real
    xformers 0.0.29.post3 wheel (its _C.so, cpp_lib.json and dist-info), as pip lays them out."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    (site,) = (tmp_path / "venv" / "lib").glob("python*/site-packages")
    for name in os.listdir(torch_site):
        if name == "torch" or (name.startswith("torch-") and name.endswith(".dist-info")):
            os.symlink(torch_site / name, site / name)
    dist, version = XFORMERS
    meta = f"{dist}-{version}.dist-info"
    files = ["xformers/_C.so", "xformers/cpp_lib.json"]
    folder = fetch(dist, version, [f"{meta}/METADATA", f"{meta}/WHEEL", f"{meta}/RECORD", *files])
    (site / meta).mkdir()
    for name in ("METADATA", "WHEEL", "RECORD"):
        shutil.copy(folder / name, site / meta / name)
    (site / "xformers").mkdir()
    for member in files:
        os.symlink(folder / os.path.basename(member), site / member)
    (site / meta / "INSTALLER").write_text("pip\n")
    return tmp_path / "venv" / "bin" / "python"


@pytest.mark.slow
def test_fix_dry_run_plans_the_xformers_the_data_holds_for_torch_2_14_1(tmp_path):
    torch_site = site_packages(TORCH_PY, "CUDAMATRIX_TORCH_CUDA_PYTHON")
    python = _venv_beside_torch(tmp_path, torch_site)
    env_vars = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "xdg"), "XDG_STATE_HOME": str(tmp_path / "state")}
    out = subprocess.run([sys.executable, "-m", "cudamatrix", "fix", "--python", str(python), "--dry-run", "--json",
                          "--installer", "pip", "--driver", "580.65.06"], capture_output=True, text=True,
                         env=env_vars, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout)["data"]
    want = newest("xformers", "2.14.1")
    (install,) = [s for s in result["plan"]["steps"] if s["kind"] == "install"]
    assert f"xformers=={want}" in install["argv"]
    assert not any(a.startswith("torch==") for a in install["argv"])  # torch stays: one distribution changes
    answered = {r["code"]: r for r in result["plan"]["remedies"] if r["code"].startswith("EXTENSION_")}
    assert set(answered) == {"EXTENSION_ABI_MISMATCH", "EXTENSION_PIN_MISMATCH", "EXTENSION_CUDA_MISMATCH"}
    for r in answered.values():
        assert r["action"] == "install"
        assert r["detail"].startswith(f"install xformers {want}: xformers 0.0.29.post3 -> xformers {want}: the newest "
                                      "release in data/extensions.json for torch 2.14.1")
        assert "Requires-Dist of xformers-" in r["detail"]  # the row's source
    human = subprocess.run([sys.executable, "-m", "cudamatrix", "fix", "--python", str(python), "--dry-run",
                            "--installer", "pip", "--driver", "580.65.06"], capture_output=True, text=True,
                           env=env_vars, timeout=300)
    assert f"fixed by [install] install xformers {want}: " in human.stdout
