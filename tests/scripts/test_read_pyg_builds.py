"""scripts/read_pyg_builds.py on a git repository made in the test: two commits of a rusty1s-style building.yml
(its matrix, exclusions and Linux runners as torch_scatter's at efbe465 and 10144cc state them) and a pyg-lib-style
tag with its final matrix; each torch release is taken from the newest commit or tag that builds it."""
from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).parent.resolve().parent.parent
_spec = importlib.util.spec_from_file_location("read_pyg_builds", ROOT / "scripts" / "read_pyg_builds.py")
reader = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reader)

WORKFLOW = """name: Building Wheels
on: [workflow_dispatch]
jobs:
  wheel:
    runs-on: ${{{{ matrix.os }}}}
    strategy:
      matrix:
        os: [ubuntu-22.04, macos-14, windows-2022, ubuntu-22.04-arm]
        python-version: ['3.9', '3.10', '3.11', '3.12', '3.13']
        torch-version: [{torch}]
        cuda-version: ['cpu', 'cu118', 'cu124', 'cu126', 'cu128', 'cu129']
        exclude:
          - torch-version: 2.6.0
            cuda-version: 'cu128'
          - torch-version: 2.6.0
            cuda-version: 'cu129'
          - torch-version: 2.8.0
            cuda-version: 'cu124'
          - torch-version: 2.8.0
            cuda-version: 'cu118'
          - os: ubuntu-22.04-arm
            cuda-version: 'cu126'
"""


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                   capture_output=True)


def commit(repo: Path, files: dict[str, str], tag: str | None = None) -> None:
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "step")
    if tag:
        git(repo, "tag", tag)


def test_workflow_builds_apply_the_exclusions_on_the_x86_runner():
    got = reader.workflow_builds(WORKFLOW.format(torch="2.8.0"))
    assert got == {"2.8.0": {"variants": ["cpu", "cu126", "cu128", "cu129"],
                             "python": ["3.9", "3.10", "3.11", "3.12", "3.13"]}}
    assert reader.workflow_builds("jobs: {other: 1}") == {}
    assert reader.workflow_builds("name: Install: x:\n  - : :") == {}  # no YAML: nothing read


def test_each_torch_from_the_newest_commit_that_builds_it(tmp_path):
    repo = tmp_path / "pytorch_scatter"
    repo.mkdir()
    git(repo, "init", "-q")
    commit(repo, {reader.WORKFLOW: WORKFLOW.format(torch="2.6.0"), "torch_scatter/__init__.py": "__version__ = '2.1.1'\n"})
    commit(repo, {reader.WORKFLOW: WORKFLOW.format(torch="2.6.0, 2.8.0"),
                  "torch_scatter/__init__.py": "__version__ = '2.1.2'\n"})
    commit(repo, {reader.WORKFLOW: WORKFLOW.format(torch="2.3.0")})  # older than --since
    rows = reader.read_workflows(repo, "torch-scatter", reader.Version("2.4.0"), "https://example.org/r", "2026-12-04")
    assert [(r["torch"], r["version"], r["variants"]) for r in rows] == [
        ("2.6.0", "2.1.2", ["cpu", "cu118", "cu124", "cu126"]), ("2.8.0", "2.1.2", ["cpu", "cu126", "cu128", "cu129"])]
    assert rows[1]["platforms"] == ["linux_x86_64"] and rows[1]["source"][0]["kind"] == "first_party"
    assert rows[1]["source"][0]["url"].startswith("https://example.org/r/blob/")


def test_pyg_lib_rows_from_release_tags(tmp_path, capsys):
    repo = tmp_path / "pyg-lib"
    repo.mkdir()
    git(repo, "init", "-q")
    old = [{"torch-version": "2.8.0", "python-version": ["3.10"], "cuda-version": ["cpu", "cu129"]}]
    new = [{"torch-version": "2.13.0", "cuda-version": ["cpu", "cu132"], "arch": ["x86_64", "aarch64"]},
           {"torch-version": "2.12.0", "cuda-version": ["cu130"], "arch": ["aarch64"]}]
    commit(repo, {reader.MATRIX: json.dumps(old), "pyg_lib/__init__.py": "__version__ = '0.6.0'\n"}, tag="0.6.0")
    commit(repo, {reader.MATRIX: json.dumps(new), "pyg_lib/__init__.py": "__version__ = '0.8.0'\n"}, tag="0.8.0")
    commit(repo, {"pyg_lib/__init__.py": "__version__ = '0.9.0.dev'\n"})  # no tag: not a release
    assert reader.main([str(repo), "--name", "pyg-lib", "--kind", "matrix", "--repo", "https://example.org/p",
                        "--read", "2026-12-04"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["torch"], r["version"], r["variants"], r.get("python")) for r in rows] == [
        ("2.13.0", "0.8.0", ["cpu", "cu132"], None), ("2.8.0", "0.6.0", ["cpu", "cu129"], ["3.10"])]


def test_no_repository_address_is_exit_2(tmp_path):
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q")
    assert reader.main([str(repo), "--name", "pyg-lib", "--kind", "matrix"]) == 2
