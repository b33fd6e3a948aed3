"""Run every scenario file (``tests/scenarios/*.json``) through the command line, human and ``--json``, and record
or compare what it prints: a restructuring that must not change a word is checked against a recording taken
before it.

    python scripts/record_scenarios.py record DIR     # write DIR/<scenario>.human.txt and .json.txt
    python scripts/record_scenarios.py compare DIR    # exit 1 and name each output that differs

Each scenario runs against its own frozen matrix (``--data``, the snapshot the scenario names) in a subprocess
(``python -m cudamatrix``) with a private HOME, so that the user's overlay or state cannot change the answer.
A scenario maps to one command: ``requirements_txt`` -> ``check -r``; ``request`` -> ``solve`` (with ``--env``
where it has an environment, ``--env`` of a folder of saved targets where it has several); an environment alone
-> ``doctor --env``; several named targets -> one ``solve`` per target, their outputs joined.
"""
from __future__ import annotations

import argparse
import difflib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "tests" / "scenarios"
SNAPSHOTS = {None: ROOT / "tests" / "data" / "matrix_snapshot", "issue23": ROOT / "tests" / "data" / "matrix_snapshot_23"}


def _flags(target: dict) -> list[str]:
    argv: list[str] = []
    for key, opt in (("driver", "--driver"), ("python", "--python"), ("platform", "--platform"),
                     ("cuda_toolkit", "--cuda-toolkit")):
        if target.get(key):
            argv += [opt, str(target[key])]
    for gpu in target.get("gpus", []):
        argv += ["--gpu", str(gpu)]
    return argv


def argv_of(case: dict, work: Path) -> list[str]:
    """The command line a scenario maps to (files it needs written under ``work``)."""
    data = ["--data", str(SNAPSHOTS[case.get("snapshot")])]
    env: list[str] = []
    if "environment" in case:
        path = work / "environment.json"
        path.write_text(json.dumps(case["environment"]))
        env = ["--env", str(path)]
    if "requirements_txt" in case:
        req = work / "requirements.txt"
        req.write_text(case["requirements_txt"])
        return ["check", "-r", str(req), *_flags(case["target"]), *data]
    if "request" not in case:
        return ["doctor", *env, *data]
    return ["solve", *case["request"], *env, *_flags(case.get("target", {})), *data]


def run(case: dict, json_out: bool) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        home = work / "home"
        home.mkdir()
        env = {**os.environ, "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"),
               "XDG_STATE_HOME": str(home / ".state"), "XDG_CONFIG_HOME": str(home / ".config"),
               "COLUMNS": "120", "NO_COLOR": "1", "TERM": "dumb"}
        if "targets" in case:
            outs = []
            for name, flags in case["targets"].items():
                argv = ["solve", *case["request"], *_flags(flags), "--data", str(SNAPSHOTS[case.get("snapshot")])]
                outs.append(f"## {name}\n" + _one(argv, json_out, env, work))
            return "".join(outs)
        return _one(argv_of(case, work), json_out, env, work)


def _one(argv: list[str], json_out: bool, env: dict, work: Path) -> str:
    argv = [sys.executable, "-m", "cudamatrix", *argv, *(["--json"] if json_out else [])]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=work, timeout=120)
    text = f"exit {done.returncode}\n{done.stdout}\n--- stderr\n{done.stderr}"
    return text.replace(str(work), "<work>").replace(str(ROOT), "<root>")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=["record", "compare"])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--only", help="the scenarios whose name contains this")
    args = ap.parse_args(argv)
    args.folder.mkdir(parents=True, exist_ok=True)
    differ = 0
    for path in sorted(SCENARIOS.glob("*.json")):
        if args.only and args.only not in path.stem:
            continue
        case = json.loads(path.read_text())
        for kind, json_out in (("human", False), ("json", True)):
            got = run(case, json_out)
            out = args.folder / f"{path.stem}.{kind}.txt"
            if args.action == "record":
                out.write_text(got)
                continue
            want = out.read_text() if out.exists() else ""
            if got != want:
                differ += 1
                print(f"DIFFERS: {out.name}")
                sys.stdout.writelines(difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                                           "recorded", "now", n=1))
    if args.action == "compare":
        print(f"{differ} output(s) differ")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
