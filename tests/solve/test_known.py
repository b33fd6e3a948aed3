"""Names are checked (issue #23): a requirement the matrix does not know and no index lists is an input error
with a did-you-mean; one no index could answer is listed as unchecked, never as fitting. The CLI cases run
against a real PEP 503 index on loopback (tests/support/localindex.py), with pip's own configuration switched off.

PEP 503 (https://peps.python.org/pep-0503/): an index lists a project at ``/<normalized name>/``; a project it
does not have answers 404, which is what pip reports as "from versions: none" for ``torhc``."""
from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest
from support.fakes import run_cli
from support.localindex import LocalIndex, build_wheel
from support.snapshot import snapshot_matrix

from cudamatrix.errors import UsageError
from cudamatrix.names import EXTENSIONS
from cudamatrix.solve.known import check_names, family_names, matrix_names, requirement_name, suggestions

H100 = ["--gpu", "H100", "--driver", "580.65.06", "--python", "3.12"]


# --- the pure check ------------------------------------------------------------------------------------------

def test_matrix_names_hold_frameworks_companions_plugins_and_pinned_wheels():
    known = matrix_names(snapshot_matrix())
    for name in ("torch", "torchvision", "torchaudio", "tensorflow", "tensorflow-gpu", "jax", "jaxlib",
                 "jax-cuda12-plugin", "nvidia-cudnn-cu12"):
        assert name in known, name


@pytest.mark.parametrize("text", [
    "nvidia-cudnn-cu12==9.1.0.70", "nvidia-nccl-cu12==2.21.5; platform_system == 'Linux' and platform_machine == 'x86_64'",
    "  triton == 3.1.0", "jax[cuda12]>=0.4.26", "Jax_Cuda12.Plugin>=0.6", "torch @ https://example.invalid/t.whl",
    "a", "a1-b2.c3_d4 (>=1)", "tensorflow[and-cuda]~=2.17.0",
])
def test_requirement_name_is_the_name_packaging_reads(text):
    from packaging.requirements import Requirement

    assert requirement_name(text) == Requirement(text).name


def test_requirement_name_of_every_pin_in_the_data_and_of_no_name():
    """Every nvidia pin and extra package of the shipped matrix (what matrix_names reads) named as packaging names
    it; a text that starts with no name is packaging's error, not a made-up name."""
    from packaging.requirements import InvalidRequirement, Requirement

    from cudamatrix.matrix.load import load_matrix

    matrix = load_matrix(None)
    texts = {t for fam in ("torch", "tensorflow", "jax") for r in matrix.frameworks(fam) for v in r.variants
             for t in (*v.nvidia_pins, *v.extra_packages)}
    assert len(texts) > 100
    for text in texts:
        assert requirement_name(text) == Requirement(text).name, text
    with pytest.raises(InvalidRequirement):
        requirement_name("==1.0")


def test_matrix_names_read_the_families_until_every_wanted_name_is_found():
    from cudamatrix.matrix.data import default_data_dir, load_matrix_from

    def fresh():  # the shipped data as commands load it, each file built on first use
        return load_matrix_from(default_data_dir(), trusted=True)

    def built(m):
        return {k for k in ("torch", "tensorflow", "jax") if k in vars(m)}

    m = fresh()
    assert matrix_names(m, ["Torch", "jaxlib"]) == family_names() and built(m) == set()  # framework names only
    assert matrix_names(m, []) == family_names() and built(m) == set()  # nothing asked: nothing read
    m = fresh()
    assert "nvidia-cudnn-cu12" in matrix_names(m, ["nvidia-cudnn-cu12", "Torch"]) and built(m) == {"torch"}
    m = fresh()
    known = matrix_names(m, ["nvidia-cudnn-cu12", "torhc"])  # one name no family knows: every family is read
    assert built(m) == {"torch", "tensorflow", "jax"} and known == matrix_names(fresh())
    m = fresh()
    assert matrix_names(m, ["jax-cuda12-plugin"]) >= {"jax-cuda12-plugin"} and built(m) == {"torch", "tensorflow", "jax"}


def test_family_names_are_known_without_the_matrix():
    # with the extensions solved from data/extensions.json (vllm, xformers, ...): never asked of an index
    assert family_names() == {"torch", "torchvision", "torchaudio", "tensorflow", "tensorflow-cpu", "tensorflow-gpu",
                              "jax", "jaxlib"} | EXTENSIONS
    assert family_names() <= matrix_names(snapshot_matrix())


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
    assert sorted(asked) == ["numpy", "somepkg", "torhc"]  # known names and repeats are not asked
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


def test_names_are_asked_at_once_and_each_distinct_name_once():
    """check -r of a long file asked its names one by one (issue 42: 1,000 lines took minutes): the names are
    asked ``workers`` at a time. Four lookups that each wait for the other three (a barrier) all answer only when
    they run at once; one by one, each would give up on the barrier and leave its name unchecked."""
    import threading

    together = threading.Barrier(4, timeout=30)
    asked: list[str] = []

    def lookup(name):
        asked.append(name)
        together.wait()
        return True

    names = ["a-1", "A_1", "b-2", "c-3", "d-4", "torch"]
    found = check_names(names, {"torch"}, lookup, workers=4)
    assert found.unknown == [] and found.unchecked == []
    assert sorted(asked) == ["a-1", "b-2", "c-3", "d-4"]


@pytest.mark.slow  # waits out a deadline: about 1 s
def test_names_not_answered_within_the_deadline_are_unchecked_and_fail_the_gate():
    """A bounded total deadline: a lookup that never returns leaves its name unchecked once the deadline has
    passed (the others keep their answers), and a gate refuses an unchecked name (exit 2)."""
    import threading

    from cudamatrix.solve.known import ask_all

    stuck = threading.Event()

    def lookup(name):
        if name == "slow":
            stuck.wait(60)
        return name != "gone"

    try:
        answers = ask_all(["fine", "slow", "gone"], lookup, workers=3, deadline_s=0.5)
        found = check_names(["fine", "slow"], set(), lookup, "the index did not answer in time", workers=2,
                            deadline_s=0.5)
    finally:
        stuck.set()
    assert answers == {"fine": True, "slow": None, "gone": False}
    assert found.unchecked == ["slow"]
    with pytest.raises(UsageError, match=r"cannot check 'slow': .* the index did not answer in time"):
        found.raise_unchecked("r.txt: ")


@pytest.mark.slow
def test_a_lookup_that_never_returns_does_not_hold_the_process_after_the_deadline():
    """An index that never finishes its answer (a drip) must not keep the command from ending once the deadline
    has left the name unchecked: the process exits (a pool whose threads are joined at exit would hang here)."""
    import sys

    code = ("import threading\nfrom cudamatrix.solve.known import ask_all\n"
            "forever = threading.Event()\n"
            "print(ask_all(['a', 'b'], lambda n: forever.wait() if n == 'b' else True, workers=2, deadline_s=0.5))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "{'a': True, 'b': None}", out.stdout + out.stderr


def test_a_lookup_that_raises_leaves_the_name_unchecked():
    def lookup(name):
        raise OSError("the index went away")

    assert check_names(["x", "y"], set(), lookup, workers=2).unchecked == ["x", "y"]


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
def test_an_index_that_does_not_answer_fails_the_gate(tmp_path: Path):
    """check is a gate: a name it could not ask any index about ends it with exit 2 naming the name, never
    "fits" (issue 42: an unreachable --index-url line and torhc==2.5.1 said "fits", exit 0). solve, which gates
    nothing, lists the name as unchecked."""
    dead = f"http://127.0.0.1:{_free_port()}/simple"
    req = tmp_path / "requirements.txt"
    req.write_text("torch==2.5.1\ntorchvison==0.20.1\n")
    out = cli(dead, "check", "-r", str(req), *H100, "--json")
    doc = json.loads(out.stdout)
    assert out.returncode == 2 and doc["exit_code"] == 2, out.stdout
    assert "cannot check 'torchvison'" in doc["errors"][0]["message"] and dead in doc["errors"][0]["message"]
    # the file: its own index line is unreachable, pip's configured index is not asked instead
    req.write_text(f"--index-url {dead}\ntorhc==2.5.1\n")
    for args in ([], ["--json"]):
        out = cli("http://127.0.0.1:9/simple", "check", "-r", str(req), *H100, *args)
        assert out.returncode == 2 and "fits" not in out.stdout, out.stdout + out.stderr
        assert "Traceback" not in out.stderr
    assert "cannot check 'torhc'" in out.stdout and "does not pass" in out.stdout
    human = cli(dead, "solve", "torch", "torhc", *H100)
    assert human.returncode == 0 and "torhc: unchecked" in human.stdout, human.stderr


@pytest.mark.slow
def test_names_not_on_the_first_index_are_asked_of_the_others(tmp_path: Path):
    """The first index (PIP_INDEX_URL) is asked while pip's configuration is read; a name it does not list, or
    cannot answer for, is asked of the extra indexes: listed there it passes; listed nowhere it is unknown only
    when every index answered, else it cannot be checked (exit 2)."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    build_wheel(tmp_path / "a", "numpy", "2.1.0")
    build_wheel(tmp_path / "b", "mytool", "1.0")
    req = tmp_path / "requirements.txt"
    with LocalIndex(tmp_path / "a") as first, LocalIndex(tmp_path / "b") as extra:
        def check(index: str, text: str) -> subprocess.CompletedProcess:
            req.write_text(text)
            env = {**os.environ, "PIP_INDEX_URL": index, "PIP_CONFIG_FILE": os.devnull, "PIP_FIND_LINKS": "",
                   "PIP_EXTRA_INDEX_URL": extra.url + "/simple"}
            return run_cli(["check", "-r", str(req), *H100], env=env, timeout=180, text=True)

        assert check(first.url + "/simple", "numpy==2.1.0\nmytool==1.0\n").returncode == 0
        out = check(first.url + "/simple", "numpy==2.1.0\nmytol==1.0\n")
        assert out.returncode == 2 and "no distribution named 'mytol' (did you mean 'mytool'?)" not in out.stderr
        assert "no distribution named 'mytol'" in out.stderr, out.stderr
        dead = f"http://127.0.0.1:{_free_port()}/simple"
        assert check(dead, "mytool==1.0\n").returncode == 0  # the first index is down, the extra one lists it
        out = check(dead, "mytol==1.0\n")
        assert out.returncode == 2 and "cannot check 'mytol'" in out.stderr and dead in out.stderr, out.stderr


@pytest.mark.slow
def test_a_no_index_file_reads_its_local_find_links(tmp_path: Path):
    """A file that says --no-index installs from its find-links alone: a local folder is read (a name there
    passes, a name not there is unknown), a web page is not (the name cannot be checked: exit 2)."""
    wheels = tmp_path / "wheels"
    build_wheel(wheels, "mytool", "1.0")
    req = tmp_path / "requirements.txt"
    req.write_text(f"--no-index\n--find-links {wheels}\nmytool==1.0\n")
    dead = "http://127.0.0.1:9/simple"
    assert cli(dead, "check", "-r", str(req), *H100).returncode == 0
    req.write_text(f"--no-index\n--find-links {wheels}\nmytol==1.0\n")
    out = cli(dead, "check", "-r", str(req), *H100)
    assert out.returncode == 2 and "no distribution named 'mytol'" in out.stderr, out.stdout + out.stderr
    req.write_text(f"--no-index\n--find-links {dead}\nmytool==1.0\n")
    out = cli(dead, "check", "-r", str(req), *H100)
    assert out.returncode == 2 and "cannot check 'mytool'" in out.stderr, out.stdout + out.stderr
