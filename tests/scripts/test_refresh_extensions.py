"""scripts/refresh_extensions.py's readers on real METADATA (tests/data/extensions/: each file names its origin, the
wheel it was read from) and the shipped data/extensions.json read back with the matrix's models."""
from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest

from cudamatrix.errors import DataError
from cudamatrix.matrix.data import (
    FILES,
    ExtensionFile,
    ExtensionRelease,
    ReleaseFileSet,
    build_files,
    default_data_dir,
    validate_files,
)
from cudamatrix.matrix.index import IndexFile, parse_metadata
from cudamatrix.schema import validate

ROOT = Path(__file__).parent.resolve().parent.parent
FIXTURES = Path(__file__).parent.parent / "data" / "extensions"

_spec = importlib.util.spec_from_file_location("refresh_extensions", ROOT / "scripts" / "refresh_extensions.py")
refresh = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(refresh)


def fixture(name: str):
    doc = json.loads((FIXTURES / f"{name}.json").read_text())
    assert doc["origin"].startswith("the METADATA member")
    meta = parse_metadata(doc["metadata"], f"{doc['wheels'][0]} (fixture)")
    files = [IndexFile(filename=f, url=f, project=meta.name, version=meta.version, pythons=(t[0],), abis=(t[1],),
                       platforms=tuple(t[2].split(".")), requires_python=meta.requires_python)
             for f in doc["wheels"] for t in [f[:-4].split("-")[-3:]]]
    return meta, files


def test_xformers_metadata_states_its_exact_torch():
    meta, files = fixture("xformers-0.0.29.post3")
    assert refresh.requires_of(meta.requires_dist, "3.12") == {"torch": "==2.6.0"}
    row = refresh.extension_row("xformers", "0.0.29.post3", files, meta)
    assert row["requires"] == {"torch": "==2.6.0"} and "cuda_major" not in row
    assert row["python"] == ["3.9", "3.10", "3.11", "3.12"] and "linux_x86_64" in row["platforms"]
    assert validate(ExtensionRelease, row, "row").requires == {"torch": "==2.6.0"}


def test_vllm_metadata_pins_torch_and_xformers_under_linux_markers():
    meta, files = fixture("vllm-0.11.0")
    # xformers==0.0.32.post1 applies only where platform_system == "Linux" and platform_machine == "x86_64"
    assert refresh.requires_of(meta.requires_dist, "3.12") == {
        "torch": "==2.8.0", "torchaudio": "==2.8.0", "torchvision": "==0.23.0", "xformers": "==0.0.32.post1"}
    row = refresh.extension_row("vllm", "0.11.0", files, meta, (12, "the libraries' string table (test)"))
    assert row["cuda_major"] == 12 and row["source"][-1]["states"] == "the libraries' string table (test)"


def test_onnxruntime_metadata_states_its_cuda_major():
    meta, files = fixture("onnxruntime_gpu-1.31.1")
    assert refresh.cuda_major_of_requires(meta.requires_dist) == (13, 'nvidia-cuda-runtime~=13.0; extra == "cuda"')
    row = refresh.extension_row("onnxruntime-gpu", "1.31.1", files, meta)
    assert row["cuda_major"] == 13 and "requires" not in row


@pytest.mark.parametrize("name, major", [("cupy-cuda12x", 12), ("cupy_cuda13x", 13), ("cupy", None), ("vllm", None)])
def test_cuda_major_of_name(name, major):
    assert refresh.cuda_major_of_name(name) == major


def test_cuda_major_of_a_string_table():
    assert refresh.cuda_major_of_needed(b"\0libc10.so\0libcudart.so.13\0libc.so.6\0") == 13
    assert refresh.cuda_major_of_needed(b"\0libcublasLt.so.12\0libcudart.so.13\0") == 12  # cuBLASLt first
    assert refresh.cuda_major_of_needed(b"\0libcudart.so.12\0libcudart.so.13\0") is None  # two majors: unknown
    assert refresh.cuda_major_of_needed(b"libcudart.so.12.") is None  # not a whole name


def test_merge_keeps_unread_rows_and_the_release_files():
    old = {"releases": [{"name": "vllm", "version": "0.1.0"}], "release_files": [{"name": "flash-attn"}]}
    new = refresh.merge(old, [{"name": "vllm", "version": "0.2.0"}, {"name": "xformers", "version": "0.0.1"}])
    assert [(r["name"], r["version"]) for r in new["releases"]] == [("vllm", "0.2.0"), ("vllm", "0.1.0"),
                                                                    ("xformers", "0.0.1")]
    assert new["release_files"] == old["release_files"] and json.loads(refresh.dump(new)) == new


def test_the_shipped_file_validates_and_builds_alike():
    folder = default_data_dir()
    raws = {n: (folder / f"{n}.json").read_bytes() for n in FILES}
    validated, built = validate_files(raws), build_files(raws)
    assert validated.extensions == built.extensions and len(validated.extensions.releases) > 100
    assert refresh.dump(json.loads(raws["extensions"])) == raws["extensions"].decode()  # the script's own layout
    names = {r.name for r in validated.extensions.releases}
    assert {"vllm", "xformers", "sglang", "onnxruntime-gpu", "cupy-cuda12x", "cupy-cuda13x"} <= names
    for r in validated.extensions.releases:
        assert any(s.kind == "artifact" for s in r.source.records), (r.name, r.version)
        assert refresh.cuda_major_of_name(r.name) in (None, r.cuda_major)
    (rule,) = validated.extensions.release_files
    assert rule.name == "flash-attn" and "cxx11abi{abi}" in rule.local and rule.unread
    assert rule.source.records[0].kind == "first_party" and "/blob/" in rule.source.records[0].url
    sets = validated.extensions.release_file_sets
    assert {str(s.version) for s in sets} >= {"2.7.0.post2", "2.8.3", "2.8.3.post1"} and len(sets) >= 18
    for s in sets:
        rec = s.source.records[0]
        assert rec.kind == "first_party" and rec.url.endswith("/.github/workflows/publish.yml"), s.version
        assert s.platforms == ["linux_x86_64"] and set(s.cxx11_abi) <= {True, False}


def test_a_bad_extensions_file_is_refused_naming_the_path():
    folder = default_data_dir()
    raws = {n: (folder / f"{n}.json").read_bytes() for n in FILES}
    raws["extensions"] = json.dumps({"releases": [{"name": "vllm", "version": "0.1", "python": [], "source": [],
                                                   "requires": {"torch": "==>2"}}]}).encode()
    with pytest.raises(DataError, match=r"extensions\.json: releases\[0\]\.requires"):
        validate_files(raws)
    assert ExtensionFile().releases == []


# --- flash-attn's release workflow ------------------------------------------------------------------------------
# the shape of a release workflow's build job (written for this test: two jobs, a comment, a second exclude entry)
WORKFLOW = """name: release
jobs:
  make_release:
    runs-on: ubuntu-latest
  build_wheels:
    runs-on: ${{ matrix.os }}
    strategy:
      matrix:
          os: [ubuntu-22.04]
          # a comment: ['9.9']
          python-version: ['3.10', '3.11', "3.12"]
          torch-version: ['2.4.0', '2.8.0', '2.6.0.dev20241001']
          cuda-version: ['12.9.1']
          cxx11_abi: ['FALSE', 'TRUE']
          exclude:
            - torch-version: '2.4.0'
              python-version: '3.12'
            - cxx11_abi: 'TRUE'
              torch-version: '2.8.0'
    steps:
      - name: Build
        run: python setup.py bdist_wheel
  publish:
    strategy:
      matrix:
          python-version: ['3.7']
"""


def test_workflow_matrix_reads_the_build_job_and_its_excludes():
    m = refresh.workflow_matrix(WORKFLOW)
    assert m == {"python": ["3.10", "3.11", "3.12"], "torch": ["2.4.0", "2.8.0", "2.6.0.dev20241001"],
                 "cuda": ["12.9.1"], "cxx11_abi": [False, True],
                 "exclude": [{"torch": "2.4.0", "python": "3.12"}, {"cxx11_abi": True, "torch": "2.8.0"}]}
    assert refresh.workflow_matrix(WORKFLOW.replace("build_wheels", "other")) is None
    row = refresh.release_set_row("2.8.3", "a" * 40, m, "2026-12-04")
    rec = row["source"][0]
    assert rec["url"].endswith(f"/blob/{'a' * 40}/.github/workflows/publish.yml") and rec["kind"] == "first_party"
    assert "exclude: torch 2.4.0, python 3.12; cxx11_abi True, torch 2.8.0" in rec["states"]
    validated = validate(ReleaseFileSet, row, "row")
    assert validated.exclude[1].cxx11_abi is True and validated.platforms == ["linux_x86_64"]


def test_release_sets_are_read_from_a_clone_at_each_tag(tmp_path):
    """A clone with two release tags and one older than the first read: one row per tag from 2.7.0.post2 on,
    newest first, each citing the tag's own commit."""
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    wf = tmp_path / ".github" / "workflows" / "publish.yml"
    wf.parent.mkdir(parents=True)
    commits = {}
    for tag, torch in (("v2.6.3", "2.3.1"), ("v2.7.0.post2", "2.5.1"), ("v2.8.0", "2.7.1")):
        wf.write_text(WORKFLOW.replace("'2.8.0', ", f"'{torch}', "))
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-q", "-m", tag], check=True)
        subprocess.run([*git, "tag", tag], check=True)
        commits[tag] = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True,
                                      text=True).stdout.strip()
    rows = refresh.read_release_sets(tmp_path, "2026-12-04", lambda _m: None)
    assert [(r["version"], r["torch"][1]) for r in rows] == [("2.8.0", "2.7.1"), ("2.7.0.post2", "2.5.1")]
    assert commits["v2.8.0"] in rows[0]["source"][0]["url"]
