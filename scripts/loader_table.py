"""Print the loader model's closing table: for each case, the file predicted for a library (with the rule that
made it win), the file(s) /proc/self/maps showed, and, where a framework ran, doctor's finding and env's output.

Runs the loader tests with $CUDAMATRIX_LOADER_TABLE set, so each case writes its rows: tests/detect/test_loader.py
(gcc-built libraries), tests/ldso/test_openers.py (real cuDNN 9.24/9.19/9.14/8.9.7 and NVRTC copies opened with
ctypes), tests/ldso/test_libpaths.py (the torch 2.14.1 and 2.11.0 CUDA venvs: $CUDAMATRIX_TORCH_CUDA_PYTHON,
$CUDAMATRIX_TORCH211_PYTHON); then prints them as a Markdown table.
Usage: python scripts/loader_table.py [pytest -k expression]
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = ["tests/detect/test_loader.py", "tests/ldso/test_openers.py", "tests/ldso/test_libpaths.py"]


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        rows_file = os.path.join(tmp, "rows.jsonl")
        env = dict(os.environ, CUDAMATRIX_LOADER_TABLE=rows_file)
        extra = ["-k", sys.argv[1]] if len(sys.argv) > 1 else []
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS, *extra],
                              cwd=REPO, env=env, capture_output=True, text=True)
        rows = []
        if os.path.exists(rows_file):
            with open(rows_file) as fh:
                rows = [json.loads(line) for line in fh if line.strip()]
    tail = done.stdout.strip().splitlines()[-1:] if done.stdout.strip() else [done.stderr.strip()[-300:]]
    print(f"tests: {tail[0] if tail else '?'}\n")
    print("| case | predicted (rule) | mapped (/proc/self/maps) | agree | doctor | env |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        mapped = r["mapped"]
        agree = "yes" if ((r["predicted"] in mapped) if r["predicted"] else not mapped) else "NO"
        if not mapped and r["predicted"] and r.get("when") == "first use":
            agree = "not reached (a first-use load; no GPU here)"
        print(f"| {r['case']} | {_short(r['predicted'])} ({r['rule']}) | "
              f"{', '.join(_short(m) for m in mapped) or 'nothing'} | {agree} | "
              f"{_words(r.get('doctor')) or '- (no framework)'} | {_words(r.get('env')) or '-'} |")
    return done.returncode


def _short(path: str | None) -> str:
    if not path:
        return "not found"
    if "/site-packages/" in path:  # the venv's folder name tells the two torch venvs apart
        venv = path.split("/lib/python", 1)[0].rsplit("/", 1)[-1]
        return f"{venv}/…/site-packages/" + path.split("/site-packages/", 1)[1]
    for marker in ("/ld0/", "/standin"):
        if marker in path:
            return "…" + marker + path.split(marker, 1)[1]
    parts = path.split("/")
    return "…/" + "/".join(parts[-3:]) if len(parts) > 4 else path


def _words(text: str | None) -> str:
    """Paths in doctor's and env's words shortened like the table's."""
    if not text:
        return ""
    return re.sub(r"(/[^\s'(),;]+)", lambda m: _short(m.group(1)), text).replace("|", "/")


if __name__ == "__main__":
    sys.exit(main())
