"""Names are checked (issue #23): a requirement the matrix does not know and no index lists is an input error
with a did-you-mean; one no index could answer is listed as unchecked, never as fitting. The CLI cases run
against a real PEP 503 index on loopback (tests/localindex.py), with pip's own configuration switched off.

PEP 503 (https://peps.python.org/pep-0503/): an index lists a project at ``/<normalized name>/``; a project it
does not have answers 404, which is what pip reports as "from versions: none" for ``torhc``."""
from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest
from fakes import run_cli
from localindex import LocalIndex, build_wheel
from snapshot import snapshot_matrix

from cudamatrix.errors import UsageError
from cudamatrix.solve.known import check_names, matrix_names, suggestions

H100 = ["--gpu", "H100", "--driver", "580.65.06", "--python", "3.12"]


# --- the pure check ------------------------------------------------------------------------------------------

def test_matrix_names_hold_frameworks_companions_plugins_and_pinned_wheels():
    known = matrix_names(snapshot_matrix())
    for name in ("torch", "torchvision", "torchaudio", "tensorflow", "tensorflow-gpu", "jax", "jaxlib",
                 "jax-cuda12-plugin", "nvidia-cudnn-cu12"):
        assert name in known, name


@pytest.mark.parametrize("typed, meant", [("torhc", ["torch"]), ("torchvison", ["torchvision"]),
                                          ("tensorflw", ["tensorflow"]), ("numpy", [])])
def test_suggestions(typed, meant):
    got = suggestions(typed, matrix_names(snapshot_matrix()))
    assert got[:1] == meant


def test_check_names_sorts_known_unknown_and_unchecked():
    known = {"torch", "torchvision"}
    answers = {"numpy": True, "torhc": False, "somepkg": None}
    asked: list[str] = []

    def lookup(name):
        asked.append(name)
        return answers[name]

    found = check_names(["torch", "numpy", "torhc", "somepkg", "TorHC"], known, lookup, "the index did not answer")
    assert asked == ["numpy", "torhc", "somepkg"]  # known names and repeats are not asked
    assert found.unknown == [("torhc", ["torch"])]
    assert found.unchecked == ["somepkg"]
    assert found.sentences() == ["somepkg: unchecked: not a distribution the matrix knows, and the index did not "
                                 "answer"]
    with pytest.raises(UsageError, match=r"no distribution named 'torhc' \(did you mean 'torch'\?\)"):
        found.raise_unknown()
    # no index at all: every unknown name is unchecked, none is an error
    offline = check_names(["torhc"], known, None)
    assert offline.unknown == [] and offline.unchecked == ["torhc"]
    offline.raise_unknown()


# --- through the command line, on a real index ---------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cli(index_url: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PIP_INDEX_URL": index_url, "PIP_CONFIG_FILE": os.devnull, "PIP_FIND_LINKS": "",
           "PIP_EXTRA_INDEX_URL": ""}
    return run_cli(list(args), env=env, timeout=180, text=True)  # the CLI in this process


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    wheels = tmp_path_factory.mktemp("wheels")
    build_wheel(wheels, "numpy", "2.1.0")
    with LocalIndex(wheels) as ix:
        yield ix.url + "/simple"


@pytest.mark.slow
def test_solve_and_lock_refuse_a_name_no_index_lists(index):
    for command in ("solve", "lock"):
        out = cli(index, command, "torhc", *H100)
        assert out.returncode == 2, (command, out.stdout, out.stderr)
        assert "no distribution named 'torhc' (did you mean 'torch'?)" in out.stderr


@pytest.mark.slow
def test_solve_passes_a_listed_name(index):
    out = cli(index, "solve", "torch", "numpy", *H100, "--json")
    assert out.returncode == 0, out.stderr
    sol = json.loads(out.stdout)["data"]["solution"]
    assert sol["pip_args"][-1] == "numpy" and sol["unchecked"] == []


@pytest.mark.slow
@pytest.mark.parametrize("text, typo, meant", [("torhc==2.5.1\n", "torhc", "torch"),
                                               ("torch==2.5.1\ntorchvison==0.20.1\n", "torchvison", "torchvision")])
def test_check_refuses_a_file_with_a_misspelt_name(index, tmp_path: Path, text, typo, meant):
    req = tmp_path / "requirements.txt"
    req.write_text(text)
    out = cli(index, "check", "-r", str(req), *H100)
    assert out.returncode == 2, out.stdout
    assert f"no distribution named '{typo}' (did you mean '{meant}'?)" in out.stderr
    # the file's own index line is the one asked: the name listed there passes
    req.write_text(f"--index-url {index}\nnumpy==2.1.0\n")
    out = cli("http://127.0.0.1:9/simple", "check", "-r", str(req), *H100)
    assert out.returncode == 0 and "unchecked" not in out.stdout, out.stdout + out.stderr


@pytest.mark.slow
def test_an_index_that_does_not_answer_leaves_names_unchecked(tmp_path: Path):
    dead = f"http://127.0.0.1:{_free_port()}/simple"
    req = tmp_path / "requirements.txt"
    req.write_text("torch==2.5.1\ntorchvison==0.20.1\n")
    out = cli(dead, "check", "-r", str(req), *H100, "--json")
    doc = json.loads(out.stdout)["data"]
    assert doc["checked"] == ["torch==2.5.1+cu124"]  # the name is not among what fits
    assert len(doc["unchecked"]) == 1 and doc["unchecked"][0].startswith("torchvison: unchecked")
    human = cli(dead, "solve", "torch", "torhc", *H100)
    assert human.returncode == 0 and "torhc: unchecked" in human.stdout, human.stderr
