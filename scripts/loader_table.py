"""Print the loader model's closing table: for each test case, the predicted file and the file(s) mapped.

Runs tests/test_loader.py and tests/test_loader_torch.py (the latter needs $CUDAMATRIX_TORCH_CUDA_PYTHON)
with $CUDAMATRIX_LOADER_TABLE set, so each case writes its row; then prints them as a Markdown table.
Usage: python scripts/loader_table.py
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        rows_file = os.path.join(tmp, "rows.jsonl")
        env = dict(os.environ, CUDAMATRIX_LOADER_TABLE=rows_file)
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               "tests/test_loader.py", "tests/test_loader_torch.py"], cwd=REPO, env=env,
                              capture_output=True, text=True)
        rows = []
        if os.path.exists(rows_file):
            with open(rows_file) as fh:
                rows = [json.loads(line) for line in fh if line.strip()]
    tail = done.stdout.strip().splitlines()[-1:] if done.stdout.strip() else [done.stderr.strip()[-300:]]
    print(f"tests: {tail[0] if tail else '?'}\n")
    print("| case | predicted (rule) | mapped (/proc/self/maps) | agree |")
    print("| --- | --- | --- | --- |")
    for r in rows:
        mapped = r["mapped"]
        agree = (r["predicted"] in mapped) if r["predicted"] else not mapped
        print(f"| {r['case']} | {_short(r['predicted'])} ({r['rule']}) | "
              f"{', '.join(_short(m) for m in mapped) or 'nothing'} | {'yes' if agree else 'NO'} |")
    return done.returncode


def _short(path: str | None) -> str:
    if not path:
        return "not found"
    for marker in ("/site-packages/", "/ld0/", "/standin"):
        if marker in path:
            return "…" + marker + path.split(marker, 1)[1]
    return path


if __name__ == "__main__":
    sys.exit(main())
