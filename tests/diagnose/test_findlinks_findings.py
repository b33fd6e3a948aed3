"""diagnose.findlinks: an installed PyG wheel whose local tag names another torch or CUDA variant than the installed
torch (issue #39), whole (code, title, evidence, fix), on environments built here; and doctor end to end on a venv
holding such distributions.

Facts the expectations rest on: the wheels of PyG's find-links pages carry ``+pt{torch major and minor}{variant}``
(torch_scatter's building.yml "Set version" step: ``2.1.2+pt28cu128``); PyG's installation page says to take the
page of the torch release and CUDA torch was installed with; data/extensions.json ``find_links`` holds
torch-scatter 2.1.2 for torch 2.8.0 cpu/cu126/cu128/cu129 and 2.4.0 cpu/cu118/cu121/cu124.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.fakes import child_env

from cudamatrix.diagnose import findlinks
from cudamatrix.diagnose.context import Diagnosis
from cudamatrix.install import extfix
from cudamatrix.install.plan import make_plan
from cudamatrix.matrix.load import load_matrix
from cudamatrix.models import Environment, Extension, ExtensionObject, Framework, Pin, PythonInfo, Solution

M = load_matrix()
PAGES = M.extensions.find_links[0]


def page(torch: str, variant: str) -> str:
    return PAGES.url.format(torch=torch, variant=variant)


def env(torch: str | None, variant: str | None, cuda: str | None = None, **packages: str) -> Environment:
    e = Environment(origin="file", python=PythonInfo(version="3.11.9", platform="linux_x86_64"),
                    packages={k.replace("_", "-"): v for k, v in packages.items()})
    if torch:
        e.packages["torch"] = torch
        e.frameworks = [Framework(name="torch", version=torch, variant=variant, cuda=cuda)]
    return e


def ask(e: Environment) -> list[tuple]:
    return [(f.code, f.title, f.fix_commands) for f in findlinks.find_links_mismatch(Diagnosis(e, M))]


def test_a_wheel_of_another_torch_is_a_pin_mismatch_with_the_right_page_as_fix():
    e = env("2.8.0", "cu128", "12.8", torch_scatter="2.1.2+pt24cu121")
    (f,) = findlinks.find_links_mismatch(Diagnosis(e, M))
    assert (f.code, f.severity, f.title) == ("EXTENSION_PIN_MISMATCH", "error",
                                             "torch-scatter 2.1.2+pt24cu121 is built for torch 2.4; torch 2.8.0 is "
                                             "installed")
    assert f.evidence == ["torch-scatter 2.1.2+pt24cu121: its local tag +pt24cu121 names torch 2.4 and cu121 (the "
                          "pyg pages' wheels are tagged +pt{torch}{variant})", "torch 2.8.0 is installed (cu128)"]
    assert f.fix_commands == [["pip", "install", "--find-links", page("2.8.0", "cu128"),
                               "torch-scatter==2.1.2+pt28cu128"]]
    assert f.fix is not None and f.fix.startswith(f"pip install --find-links {page('2.8.0', 'cu128')} "
                                                  "'torch-scatter==2.1.2+pt28cu128'")
    assert "pytorch_scatter/blob/efbe465" in f.fix


@pytest.mark.parametrize("torch, variant, cuda, installed, expected", [
    # the same torch, another CUDA variant: the CUDA half, fixed by the page of torch's own variant
    ("2.8.0+cu126", "cu126", "12.6", "2.1.2+pt28cu128",
     [("EXTENSION_CUDA_MISMATCH", "torch-scatter 2.1.2+pt28cu128 is built for cu128; torch 2.8.0+cu126 is the cu126 "
       "build", [["pip", "install", "--find-links", page("2.8.0", "cu126"), "torch-scatter==2.1.2+pt28cu126"]])]),
    # a CPU wheel beside a CUDA torch
    ("2.8.0", "cu128", "12.8", "2.1.2+pt28cpu",
     [("EXTENSION_CUDA_MISMATCH", "torch-scatter 2.1.2+pt28cpu is built for cpu; torch 2.8.0 is the cu128 build",
       [["pip", "install", "--find-links", page("2.8.0", "cu128"), "torch-scatter==2.1.2+pt28cu128"]])]),
    # torch's variant unknown but its CUDA stated: the variant is the CUDA's
    ("2.8.0", None, "12.9", "2.1.2+pt28cu128",
     [("EXTENSION_CUDA_MISMATCH", "torch-scatter 2.1.2+pt28cu128 is built for cu128; torch 2.8.0 is the cu129 build",
       [["pip", "install", "--find-links", page("2.8.0", "cu129"), "torch-scatter==2.1.2+pt28cu129"]])]),
    ("2.8.0", "cu128", "12.8", "2.1.2+pt28cu128", []),  # the matching wheel
    ("2.8.1", "cu128", "12.8", "2.1.2+pt28cu128", []),  # a page serves every 2.8.x
    ("2.8.0", "cu128", "12.8", "2.1.2", []),  # no tag: a source build, not judged
    ("2.8.0", None, None, "2.1.2+pt28cu121", []),  # the same torch, its variant unknown: the CUDA half not judged
    ("2.12.0", "cu130", "13.0", "2.1.2+pt212cu130", []),  # torch 2.12's tag is pt212
])
def test_the_tag_against_the_installed_torch(torch, variant, cuda, installed, expected):
    assert ask(env(torch, variant, cuda, torch_scatter=installed)) == expected


def test_no_page_for_the_installed_torch_asks_for_a_solve():
    (f,) = findlinks.find_links_mismatch(Diagnosis(env("2.15.0", "cu130", "13.0", torch_scatter="2.1.2+pt28cu128"), M))
    assert f.code == "EXTENSION_PIN_MISMATCH" and f.fix_commands == []
    assert f.fix is not None and f.fix.startswith("cudamatrix solve torch==2.15.0 torch-scatter (no pyg page")


def test_no_torch_no_finding_and_undefined_symbols_left_to_the_abi_finding():
    assert ask(env(None, None, torch_scatter="2.1.2+pt24cu121")) == []
    e = env("2.8.0", "cu128", "12.8", torch_scatter="2.1.2+pt24cu121")
    e.extensions = [Extension(name="torch-scatter", version="2.1.2+pt24cu121", objects=[
        ExtensionObject(path="torch_scatter/_scatter_cuda.so", missing=["_ZN3c10x"], missing_count=1)])]
    assert ask(e) == []


@pytest.mark.parametrize("local, text, expected", [
    ("+pt{torch}{variant}", "pt28cu128", ("28", "cu128")),
    ("+pt{torch}{variant}", "pt212cpu", ("212", "cpu")),
    ("+pt{torch}{variant}", "cu128", None),
    ("+pt{torch}{variant}", "pt28rocm6.2", None),
    ("+torch{torch}.{variant}", "torch28.cu128", ("28", "cu128")),  # the literal parts escaped
])
def test_the_tag_pattern(local, text, expected):
    m = findlinks.tag_pattern(local).match(text)
    assert (m.group("torch", "variant") if m else None) == expected


# --- doctor end to end -----------------------------------------------------------------------------------------------

def _dist(site: Path, name: str, version: str, files: list[str]) -> None:
    meta = site / f"{name.replace('-', '_')}-{version}.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n")
    (meta / "RECORD").write_text("".join(f"{f},,\n" for f in [*files, f"{meta.name}/METADATA", f"{meta.name}/RECORD"]))


def _venv(tmp_path: Path) -> Path:
    """A venv with torch 2.8.0+cu128's and torch-scatter 2.1.2+pt24cu121's distributions, made here (METADATA and
    RECORD only: PyG's wheels are not on PyPI, where ``pip download --no-deps torch-scatter`` gets only the sdist,
    and torch's wheel is 900 MB); torch's version.py states its CUDA as torch's own wheel does."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    site = next((venv / "lib").glob("python*/site-packages"))
    (site / "torch").mkdir()
    (site / "torch" / "version.py").write_text("__version__ = '2.8.0+cu128'\ncuda = '12.8'\n")
    _dist(site, "torch", "2.8.0+cu128", ["torch/version.py"])
    _dist(site, "torch-scatter", "2.1.2+pt24cu121", [])
    return venv / "bin" / "python"


def _cli_json(tmp_path: Path, *args: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "cudamatrix", *args, "--json"], capture_output=True, text=True,
                          timeout=300, env=child_env(ld_library_path=[tmp_path / "empty"],
                                                     extra={"XDG_CACHE_HOME": str(tmp_path / "c")}))
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)["data"]


@pytest.mark.installs
def test_doctor_names_a_pyg_wheel_of_another_torch_and_fix_plans_the_right_one(tmp_path):
    python = _venv(tmp_path)
    found = [(f["code"], f["title"]) for f in _cli_json(tmp_path, "doctor", "--python", str(python))["findings"]
             if f["code"].startswith("EXTENSION_")]
    assert found == [("EXTENSION_PIN_MISMATCH", "torch-scatter 2.1.2+pt24cu121 is built for torch 2.4; torch "
                                                "2.8.0+cu128 is installed")]
    plan = _cli_json(tmp_path, "fix", "--dry-run", "--python", str(python))["plan"]
    (install,) = [s["argv"] for s in plan["steps"] if s["kind"] == "install"]
    assert install[-1] == "torch-scatter==2.1.2+pt28cu128" and page("2.8.0", "cu128") in install


# --- fix answers the finding (install/extfix.py) ------------------------------------------------------------------

def _planned(e: Environment, torch_pin: str | None = None):
    findings = findlinks.find_links_mismatch(Diagnosis(e, M))
    kept = [Pin(name="torch", version=torch_pin)] if torch_pin else []
    solution = Solution(request=[], targets=["here"], packages=kept, to_install=kept, pip_args=[])
    return findings, extfix.with_pages(solution, e, extfix.page_wheels(findings))


def test_fix_installs_the_pages_wheel_for_the_kept_torch():
    e = env("2.8.0", "cu128", "12.8", torch_scatter="2.1.2+pt24cu121")
    findings, sol = _planned(e)
    assert sol.pip_args == ["--find-links", page("2.8.0", "cu128")]
    assert [p.requirement() for p in sol.to_install] == ["torch-scatter==2.1.2+pt28cu128"]
    plan = make_plan(e, sol, python="python", findings=findings)
    (install,) = [s for s in plan.steps if s.kind == "install"]
    assert install.argv[-1] == "torch-scatter==2.1.2+pt28cu128" and page("2.8.0", "cu128") in install.argv
    assert [(r.code, r.action) for r in plan.remedies] == [("EXTENSION_PIN_MISMATCH", "install")]


def test_fix_leaves_the_wheel_when_the_plan_moves_torch():
    e = env("2.8.0", "cu128", "12.8", torch_scatter="2.1.2+pt24cu121")
    _findings, sol = _planned(e, torch_pin="2.7.1")
    assert sol.pip_args == [] and [p.name for p in sol.to_install] == ["torch"]
