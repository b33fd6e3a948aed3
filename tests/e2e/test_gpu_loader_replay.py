"""The loader case of scripts/gpu_selftest.sh, replayed: for each saved run (tests/data/gpu_loader/<case>/, made by
scripts/gpu_loader_fixture.py) and each setting (``plain``: the machine as it is; ``system``: a system cuDNN's
folder first on LD_LIBRARY_PATH), doctor's named files, env's output and the maps a convolution left agree.

The truth is ``maps-<framework>.txt``: the libcudnn files a child mapped after its cuDNN work. Every one of them
is the file doctor's environment predicted for that SONAME; a file of the system folder mapped means a finding
naming it and an env change that drops that folder; none means no library finding and "nothing to change". The
saved environment, diagnosed again by this code, gives the saved findings and env change.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cudamatrix.cli.env_cmd import env_advice
from cudamatrix.detect import load_environment
from cudamatrix.diagnose.findings import diagnose
from cudamatrix.ldso.libpaths import library_path_fix
from cudamatrix.matrix.load import load_matrix

ROOT = Path(__file__).parent.parent / "data" / "gpu_loader"
CASES = sorted(p for p in ROOT.iterdir() if (p / "summary.json").exists()) if ROOT.is_dir() else []
LIBRARY_CODES = {"LIBRARY_SHADOWED", "LIBRARY_PRELOADED", "CUDNN_MISMATCH"}


def runs() -> list[tuple[Path, str, str]]:
    out = []
    for case in CASES:
        for setting in ("plain", "system"):
            for maps in sorted((case / setting).glob("maps-*.txt")):
                out.append((case, setting, maps.stem[len("maps-"):]))
    return out


def mapped(case: Path, setting: str, framework: str) -> list[str]:
    """The libcudnn files the child mapped (the first line is what it ran)."""
    lines = (case / setting / f"maps-{framework}.txt").read_text().splitlines()
    return [line.split(None, 5)[5] for line in lines if not line.startswith("#") and len(line.split(None, 5)) == 6]


def soname_of(path: str) -> str:
    """libcudnn_graph.so.9.14.0 -> libcudnn_graph.so.9 (the SONAME cuDNN's files carry: name and major)."""
    m = re.match(r"^(lib[\w-]+\.so\.\d+)", path.rsplit("/", 1)[1])
    assert m, path
    return m.group(1)


def saved(case: Path, setting: str, name: str) -> dict:
    return json.loads((case / setting / name).read_text())["data"]


@pytest.mark.parametrize("case,setting,framework", runs(), ids=lambda x: x.name if isinstance(x, Path) else x)
def test_doctor_predicted_every_file_the_work_mapped(case, setting, framework):
    env = saved(case, setting, "doctor.json")["environment"]
    predicted = {x["soname"]: x for x in env["library_loads"] if x["framework"] == framework}
    files = mapped(case, setting, framework)
    assert files, "the child mapped no cuDNN file"
    for path in files:
        load = predicted.get(soname_of(path))
        assert load is not None and load["path"] == path, (path, load)


@pytest.mark.parametrize("case,setting,framework", runs(), ids=lambda x: x.name if isinstance(x, Path) else x)
def test_findings_and_env_name_the_folder_that_wins(case, setting, framework):
    summary = json.loads((case / "summary.json").read_text())
    system = summary["system_dir"]  # as LD_LIBRARY_PATH names it; the maps show real paths (/lib -> usr/lib)
    real = summary.get("system_dir_real", system)
    doctor = saved(case, setting, "doctor.json")
    env_out = saved(case, setting, "env.json")
    from_system = [p for p in mapped(case, setting, framework) if p.startswith(real + "/")]
    findings = [f for f in doctor["findings"] if f["code"] in LIBRARY_CODES and framework in f["title"]]
    if from_system:
        named = " ".join(f["title"] + " " + " ".join(f["evidence"]) for f in findings)
        assert all(p in named for p in from_system), findings
        assert all(f"remove {system} from LD_LIBRARY_PATH" in f["fix"] for f in findings), findings
        kept = env_out["env"]["LD_LIBRARY_PATH"].split(":") if env_out["env"].get("LD_LIBRARY_PATH") else []
        assert system not in kept and any(system in line for line in env_out["advice"])
    else:
        assert findings == []
    if not any(p.startswith(real + "/") for fw in ("torch", "jax") if (case / setting / f"maps-{fw}.txt").exists()
               for p in mapped(case, setting, fw)):
        assert env_out["env"] == {} and env_out["advice"][0].startswith("nothing to change")


@pytest.mark.parametrize("case,setting,framework", runs(), ids=lambda x: x.name if isinstance(x, Path) else x)
def test_verify_compared_the_maps_after_the_work(case, setting, framework):
    report = next(f for f in saved(case, setting, "verify.json")["frameworks"] if f["framework"] == framework)
    assert report["model_errors"] == []
    folders = {p.rsplit("/", 1)[0] for p in mapped(case, setting, framework)}
    compared = {row["soname"]: row for row in report["loads_compared"]}
    for path in mapped(case, setting, framework):
        row = compared.get(soname_of(path))
        assert row is not None and row["predicted"] == path, row  # the model named the file the work mapped
        if row["mapped"] is None:  # verify's child stopped before that first use (torch's own cuDNN check failed)
            assert report["status"] == "failed", row
        else:
            assert row["agree"] is True and row["mapped"] == path, row
    # a shim from one copy and sub-libraries from another: a failure, whatever the work did
    assert bool(report["mixed_loads"]) == (len(folders) > 1)
    if len(folders) > 1:
        assert report["status"] == "failed"


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
@pytest.mark.parametrize("setting", ["plain", "system"])
def test_this_code_judges_the_saved_machine_as_it_did(case, setting):
    env = load_environment(str(case / setting / "doctor.json"))
    before = sorted((f["code"], f["title"]) for f in saved(case, setting, "doctor.json")["findings"]
                    if f["code"] in LIBRARY_CODES)
    again = sorted((f.code, f.title) for f in diagnose(env, load_matrix()) if f.code in LIBRARY_CODES)
    assert again == before
    env_out = saved(case, setting, "env.json")
    changes = library_path_fix(env)
    assert changes == env_out["env"]
    assert env_advice(env, changes)[0] == env_out["advice"][0]
