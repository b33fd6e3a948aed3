#!/usr/bin/env python3
"""Read which PyG extension wheels each (torch, CUDA) find-links page is built with, from the packages' own build
workflows in a local git clone, and print the rows of data/extensions.json ``find_links``.

PyG's compiled extensions (torch-scatter, torch-sparse, torch-cluster, torch-spline-conv, pyg-lib) are not
on the package index as binaries per torch build: each build's wheel is uploaded to one page per torch release and
CUDA variant, its version carrying a local tag (``2.1.2+pt28cu128``). The pages themselves are not read here;
what is read is the workflow that builds and uploads them:

- rusty1s' packages (``--kind workflow``): ``.github/workflows/building.yml`` at each commit that changed it
  (its ``torch-version`` x ``cuda-version`` matrix, the exclusions, the Python versions, the Linux x86_64 runner)
  and the package's ``__version__`` at that commit (the workflow's "Set version" step reads it). A torch release
  is taken from the newest commit that builds it.
- pyg-lib (``--kind matrix``): ``.github/workflows/utils/full_matrix_linux.json`` at each release tag (the
  final release workflow reads it) and ``pyg_lib/__init__.py``'s ``__version__`` at the tag.

Usage: ``read_pyg_builds.py CLONE --name torch-scatter --kind workflow [--since 2.4.0] [--read DATE]`` prints one
JSON row per line (name, version, torch, variants, python, platforms, source). No network.
"""
from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from packaging.version import InvalidVersion, Version

WORKFLOW = ".github/workflows/building.yml"
MATRIX = ".github/workflows/utils/full_matrix_linux.json"
X86_RUNNER = re.compile(r"^ubuntu-\d+\.\d+$")  # ubuntu-22.04; not ubuntu-22.04-arm
VERSION_LINE = re.compile(r"^__version__ = '([^']+)'", re.M)


def _git(clone: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(clone), *args], check=True, capture_output=True, text=True,
                          timeout=60).stdout


def _show(clone: Path, rev: str, path: str) -> str | None:
    try:
        return _git(clone, "show", f"{rev}:{path}")
    except subprocess.CalledProcessError:
        return None


def version_of(text: str | None) -> str | None:
    """The ``__version__ = '...'`` a package's ``__init__.py`` states; None without one."""
    found = VERSION_LINE.search(text or "")
    return found.group(1) if found else None


def _excluded(combo: dict[str, str], exclude: list[dict[str, Any]]) -> bool:
    return any(all(str(combo.get(k)) == str(v) for k, v in rule.items()) for rule in exclude)


def workflow_builds(text: str) -> dict[str, dict[str, list[str]]]:
    """torch release -> {"variants": [...], "python": [...]} that a building.yml's matrix builds on its Linux
    x86_64 runner (its exclusions applied)."""
    try:
        doc = yaml.safe_load(text) or {}
    except yaml.YAMLError:
        return {}  # an old commit's file that is no YAML (torch_scatter's of 2020): it builds nothing read here
    matrix = ((doc.get("jobs") or {}).get("wheel") or {}).get("strategy", {}).get("matrix") or {}
    runners = [str(o) for o in matrix.get("os", []) if X86_RUNNER.match(str(o))]
    exclude = matrix.get("exclude", []) or []
    out: dict[str, dict[str, list[str]]] = {}
    for torch in (str(t) for t in matrix.get("torch-version", [])):
        variants = [str(c) for c in matrix.get("cuda-version", [])
                    if any(not _excluded({"os": r, "torch-version": torch, "cuda-version": str(c)}, exclude)
                           for r in runners)]
        if variants:
            out[torch] = {"variants": variants, "python": [str(p) for p in matrix.get("python-version", [])]}
    return out


def matrix_builds(text: str) -> dict[str, dict[str, list[str]]]:
    """torch release -> {"variants": [...], "python": [...]} of pyg-lib's full_matrix_linux.json (x86_64 rows;
    ``python`` empty where the file names none: its wheels then are built for no one Python)."""
    out: dict[str, dict[str, list[str]]] = {}
    for row in json.loads(text):
        if "x86_64" not in row.get("arch", ["x86_64"]):
            continue
        out[str(row["torch-version"])] = {"variants": [str(c) for c in row["cuda-version"]],
                                          "python": [str(p) for p in row.get("python-version", [])]}
    return out


def row(name: str, version: str, torch: str, built: dict[str, list[str]], url: str, states: str,
        read: str) -> dict[str, Any]:
    """One ``find_links`` row: a package release built for one torch release's pages."""
    out: dict[str, Any] = {"name": name, "version": version, "torch": torch, "variants": built["variants"]}
    if built["python"]:
        out["python"] = built["python"]
    out["platforms"] = ["linux_x86_64"]
    out["source"] = [{"url": url, "states": states, "read": read, "kind": "first_party"}]
    return out


def _repo_url(clone: Path) -> str:
    origin = _git(clone, "config", "--get", "remote.origin.url").strip() if _has_origin(clone) else ""
    return origin.removesuffix(".git")


def _has_origin(clone: Path) -> bool:
    try:
        _git(clone, "config", "--get", "remote.origin.url")
        return True
    except subprocess.CalledProcessError:
        return False


def read_workflows(clone: Path, name: str, since: Version, repo: str, read: str) -> list[dict[str, Any]]:
    """The rows of a package built by building.yml: per torch release, the newest commit that builds it."""
    module = name.replace("-", "_")
    seen: dict[str, dict[str, Any]] = {}
    for commit in _git(clone, "log", "--format=%H", "--", WORKFLOW).split():  # newest first
        text = _show(clone, commit, WORKFLOW)
        version = version_of(_show(clone, commit, f"{module}/__init__.py"))
        if text is None or version is None:
            continue
        for torch, built in workflow_builds(text).items():
            if torch in seen or _older(torch, since):
                continue
            states = (f"{WORKFLOW} builds torch-version {torch} x cuda-version {', '.join(built['variants'])} on "
                      f"its Linux x86_64 runner and uploads to the torch-{torch}+{{cuda}} page; {module}/__init__.py "
                      f"__version__ = '{version}' (the local tag +pt{{torch}}{{cuda}} is appended)")
            seen[torch] = row(name, version, torch, built, f"{repo}/blob/{commit}/{WORKFLOW}", states, read)
    return list(seen.values())


def read_matrices(clone: Path, name: str, since: Version, repo: str, read: str) -> list[dict[str, Any]]:
    """The rows of pyg-lib: per torch release, the newest release tag whose final matrix builds it."""
    seen: dict[str, dict[str, Any]] = {}
    tags = sorted(_git(clone, "tag").split(), key=_tag_key, reverse=True)
    for tag in tags:
        text = _show(clone, tag, MATRIX)
        version = version_of(_show(clone, tag, "pyg_lib/__init__.py"))
        if text is None or version is None:
            continue
        commit = _git(clone, "rev-list", "-1", tag).strip()
        for torch, built in matrix_builds(text).items():
            if torch in seen or _older(torch, since):
                continue
            states = (f"tag {tag}: {MATRIX} builds torch-version {torch} x cuda-version {', '.join(built['variants'])} "
                      f"(x86_64) for the final release, uploaded to the torch-{torch}+{{cuda}} page; "
                      f"pyg_lib/__init__.py __version__ = '{version}'")
            seen[torch] = row(name, version, torch, built, f"{repo}/blob/{commit}/{MATRIX}", states, read)
    return list(seen.values())


def _tag_key(tag: str) -> Version:
    try:
        return Version(tag)
    except InvalidVersion:
        return Version("0")


def _older(torch: str, since: Version) -> bool:
    try:
        return Version(torch) < since
    except InvalidVersion:
        return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("clone", type=Path, help="a git clone of the package's repository")
    ap.add_argument("--name", required=True, help="the distribution (torch-scatter, pyg-lib, ...)")
    ap.add_argument("--kind", choices=("workflow", "matrix"), required=True)
    ap.add_argument("--since", default="2.4.0", help="the oldest torch release read")
    ap.add_argument("--repo", default="", help="the repository's web address (default: the clone's origin)")
    ap.add_argument("--read", default=datetime.date.today().isoformat(), help="the date written as read")
    args = ap.parse_args(argv)
    repo = args.repo or _repo_url(args.clone)
    if not repo:
        print("no --repo given and the clone has no origin", file=sys.stderr)
        return 2
    reader = read_workflows if args.kind == "workflow" else read_matrices
    for r in reader(args.clone, args.name, Version(args.since), repo, args.read):
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
