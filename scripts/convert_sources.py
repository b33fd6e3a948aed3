#!/usr/bin/env python3
"""Turn the matrix's free-text sources into source records (schema 2), by written rules; idempotent.

    python scripts/convert_sources.py [DATA_DIR ...] [--write]

A row's ``source`` (and an architecture's ``min_driver_source``) was one string, several sources joined by
"; ". Each becomes a list of records ``{url, states, read, kind}``:

- split: the text is cut at every "; " outside parentheses and quotes, and before every further URL joined with
  " + "; a piece starts a new record when it holds a URL, starts with ``artifact``, names a file read out of a
  wheel (``... read from <wheel>``, ``cuobjdump``, ``ctypes``), quotes tool output (``nvidia-smi ...``), or is a
  repository path right after a GitHub file URL (``common/install_cuda.sh`` beside
  ``.../blob/release/2.4/manywheel/build_cuda.sh``: the same repository at the same ref). Any other piece says
  more about the record before it and is kept in its ``states``;
- ``url``: the first URL of the piece; ``states``: the rest of the text (the parentheses around it dropped, an
  ``artifact:`` prefix dropped: ``kind`` says it). A bare URL states the row's own facts, which are written
  out from the row (a GPU row: its name and compute capability; a CUDA row: its driver floors ...);
- ``kind``: ``artifact`` for pieces naming the package's own files or a command's reading of them, and for
  tool output captured from a real driver or device (``nvidia-smi ...`` quoted in public repositories, the
  issues listed in ``PASTES``): the driver's own report, wherever it was pasted; ``first_party`` for NVIDIA's,
  PyTorch's, TensorFlow's and JAX's own sites and repositories; ``third_party`` for everything else (another
  project's table, statement or issue);
- ``read``: the date of the commit that recorded the text (the earliest line carrying it, ``git blame``), else
  the data's ``meta.json`` date.

Already converted rows are left alone; ``meta.json``'s ``schema_version`` becomes 2. Without ``--write`` it prints
a summary (records per kind, rows whose sources are all third-party) and writes nothing.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parent.parent
FILES = ("cuda", "gpus", "cudnn", "torch", "tensorflow", "jax", "advisories")
SOURCE_KEYS = ("source", "min_driver_source")

URL = re.compile(r"https?://[^\s;,)\]\"']+")
FIRST_PARTY_HOSTS = ("nvidia.com", "pytorch.org", "tensorflow.org", "jax.readthedocs.io", "docs.jax.dev")
FIRST_PARTY_GITHUB = ("pytorch", "tensorflow", "jax-ml", "google/jax", "NVIDIA")
ARTIFACT_START = re.compile(r"^(artifact\b|cuobjdump\b|ctypes\b|\S*(version|build_info)\.py read from\b|"
                            r"torch/version\.py\b|include/cudnn_version\.h\b|cudnn_version\.h\b|"
                            r"fatbin headers\b|compute capabilities: artifact\b|archs and ptx: artifact\b)")
PASTE_START = re.compile(r"^nvidia-smi\b.*\b(output|quoted)\b")
REPO_PATH = re.compile(r"^[\w.-]+(/[\w.-]+)+\.(sh|py|md|json|txt|yml|yaml|bzl)\b")
GITHUB_FILE = re.compile(r"^(https://github\.com/[^/]+/[^/]+/blob/(?:release/[^/]+|[^/]+))/")


def split_top(text: str) -> list[str]:
    """Cut at "; " outside parentheses, brackets and double quotes (a ";" without a space is a list inside one
    statement: "5.0;6.0;7.0"); then before each further " + URL"."""
    parts, depth, quoted, cur = [], 0, False, []
    for i, ch in enumerate(text):
        if ch == '"':
            quoted = not quoted
        elif not quoted and ch in "([":
            depth += 1
        elif not quoted and ch in ")]":
            depth = max(0, depth - 1)
        if ch == ";" and depth == 0 and not quoted and text[i + 1:i + 2] in (" ", ""):
            parts.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    parts.append("".join(cur))
    out: list[str] = []
    for part in (p.strip() for p in parts):
        out.extend(p.strip() for p in re.split(r"\s\+\s(?=https?://)", part) if p.strip())
    return out


# issues quoted for the tool output a user pasted there (nvidia-smi of a real driver): the driver's own report,
# an artifact, whatever repository holds the paste
PASTES = {
    "https://github.com/pytorch/pytorch/issues/43058": "a user's nvidia-smi output (driver 418, CUDA 10.1)",
    "https://github.com/NVIDIA/nvidia-docker/issues/1256": "a user's nvidia-smi output (driver 440, CUDA 10.2)",
}


def kind_of(text: str, url: str | None) -> str:
    """artifact / first_party / third_party by the written rules above."""
    if url in PASTES or PASTE_START.match(text):
        return "artifact"
    if url is None:
        if ARTIFACT_START.match(text) or re.search(r"\.whl\b|\bwheel\b|\bMETADATA\b", text):
            return "artifact"
        return "third_party"
    host = url.split("/")[2]
    if host == "github.com":
        path = "/".join(url.split("/")[3:5])
        return "first_party" if path.split("/")[0] in FIRST_PARTY_GITHUB or path in FIRST_PARTY_GITHUB \
            else "third_party"
    return "first_party" if host.endswith(FIRST_PARTY_HOSTS) else "third_party"


def _unwrap(text: str) -> str:
    text = text.strip().strip(",").strip()
    while text.startswith("(") and text.endswith(")") and _balanced(text[1:-1]):
        text = text[1:-1].strip()
    return text


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if depth < 0:
            return False
    return depth == 0


def _starts_record(piece: str, prev_url: str | None) -> bool:
    return bool(URL.search(piece) or ARTIFACT_START.match(piece) or PASTE_START.match(piece)
                or (prev_url and GITHUB_FILE.match(prev_url) and REPO_PATH.match(piece)))


def records(text: str, row_states: str, read: str) -> list[dict[str, Any]]:
    """The source records of one free-text source."""
    recs: list[dict[str, Any]] = []
    for piece in split_top(text):
        prev_url = recs[-1]["url"] if recs else None
        if recs and not _starts_record(piece, prev_url):
            recs[-1]["states"] = f"{recs[-1]['states']}; {piece}" if recs[-1]["states"] else piece
            continue
        m = URL.search(piece)
        url: str | None = m.group(0).rstrip(".") if m else None
        if url is None and prev_url and GITHUB_FILE.match(prev_url) and REPO_PATH.match(piece):
            path = REPO_PATH.match(piece).group(0)  # type: ignore[union-attr]
            base = GITHUB_FILE.match(prev_url).group(1)  # type: ignore[union-attr]
            url = f"{base}/{path}"
            piece = piece[len(path):]
        states = piece if url is None else (piece[:m.start()] + piece[m.end():] if m else piece)
        states = _unwrap(re.sub(r"\s+from\s*$", "", _unwrap(states)).strip())
        kind = kind_of(piece, url)
        if kind == "artifact":
            states = re.sub(r"^artifact:\s*", "", states)
        recs.append({"url": url, "states": states, "read": read, "kind": kind})
    for rec in recs:
        if not rec["states"]:
            rec["states"] = row_states
    return [{k: v for k, v in r.items() if v is not None} for r in recs]


# --- what a bare URL states: the row's own facts ----------------------------------------------------

def _row_states(path: str, row: dict[str, Any], key: str) -> str:
    if key == "min_driver_source":
        return "first driver per compute capability: " + ", ".join(f"{cc} {d}" for cc, d in row["min_driver"].items())
    if "compute_capability" in row and "architecture" in row:
        return f"{row['name']}: compute capability {row['compute_capability']}"
    if "compute_capabilities" in row and "name" in row and "version" not in row:
        last = f"; last driver branch R{row['last_driver_branch']}" if row.get("last_driver_branch") else ""
        return f"{row['name']}: compute capabilities {', '.join(row['compute_capabilities'])}{last}"
    if "branch" in row:
        return f"driver branch R{row['branch']} reports CUDA {row['max_cuda']}"
    if "cuda_major" in row:
        return f"CUDA {row['cuda_major']}.x minor-version compatibility from driver {row['linux_min_driver']}"
    if "soname" in row:
        return f"cuDNN {row['version']}: CUDA {', '.join(row['cuda_versions'])}; compute capabilities " \
               f"{', '.join(row['compute_capabilities'])}"
    if "linux_min_driver" in row and "version" in row:
        return f"CUDA {row['version']}: minimum driver Linux {row.get('linux_min_driver')}, Windows " \
               f"{row.get('windows_min_driver')}"
    if "affects" in row:
        return f"{row['id']}: {row['symptom'][:120].rstrip()}"
    if "variants" in row:
        return f"{row['name']} {row['version']}: variants {', '.join(v['name'] for v in row['variants'])}"
    return f"{path}"


def walk(doc: Any, path: str = "", shape: type = str) -> Iterator[tuple[str, dict[str, Any], str]]:
    """(dotted path, row, key) of every source of a data file held as ``shape``: ``str`` (free text, still to
    convert) or ``list`` (records)."""
    if isinstance(doc, dict):
        for key in SOURCE_KEYS:
            if isinstance(doc.get(key), shape):
                yield path, doc, key
        for k, v in doc.items():
            if k not in SOURCE_KEYS:
                yield from walk(v, f"{path}.{k}" if path else k, shape)
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from walk(v, f"{path}[{i}]", shape)


def variant_states(rel: dict[str, Any], var: dict[str, Any]) -> str:
    """What a bare URL states for a variant row."""
    facts = [f"{rel['name']} {rel['version']} {var['name']}"]
    if var.get("cuda"):
        facts.append(f"CUDA {var['cuda']}")
    if var.get("archs"):
        facts.append("archs " + " ".join(var["archs"]))
    return ", ".join(facts)


# --- read dates from git ----------------------------------------------------------------------------

def blame_dates(path: Path) -> dict[str, str]:
    """Free-text source string -> the earliest commit date (YYYY-MM-DD) of a line of ``path`` carrying it."""
    try:
        out = subprocess.run(["git", "blame", "--line-porcelain", "--", path.name], cwd=path.parent,
                             capture_output=True, text=True, timeout=120, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    dates: dict[str, str] = {}
    when = ""
    for ln in out.splitlines():
        if ln.startswith("committer-time "):
            import datetime

            stamp = int(ln.split()[1])
            when = datetime.datetime.fromtimestamp(stamp, datetime.timezone.utc).date().isoformat()
        elif ln.startswith("\t"):
            m = re.match(r'\s*"(?:min_driver_)?source":\s*("(?:[^"\\]|\\.)*")', ln[1:])
            if m:
                text = json.loads(m.group(1))
                dates[text] = min(dates.get(text, when), when)
    return dates


def convert_file(doc: Any, read_of: Callable[[str], str]) -> Counter:
    """Convert every free-text source of one parsed data file in place; count records per kind."""
    counts: Counter = Counter()
    releases = {id(v): r for r in doc.get("releases", []) if isinstance(r, dict) for v in r.get("variants", [])}
    for path, row, key in list(walk(doc)):
        text = row[key]
        rel = releases.get(id(row))
        row_states = variant_states(rel, row) if rel else _row_states(path, row, key)
        recs = records(text, row_states, read_of(text))
        for rec in recs:  # "last_cuda from URL": the record states that field of the row
            field = rec["states"].removesuffix(" also in")
            if field in row and field not in SOURCE_KEYS:
                rec["states"] = f"{field}: {row[field]}"
        row[key] = recs
        counts.update(r["kind"] for r in recs)
    return counts


def third_party_only(doc: Any, name: str) -> list[str]:
    """Dotted paths of rows whose sources are all third-party records."""
    out = []
    for path, row, key in walk(doc, shape=list):
        if row[key] and all(r.get("kind") == "third_party" for r in row[key]):
            out.append(f"{name}.json: {path}.{key}")
    return out


def convert_dir(folder: Path, write: bool) -> int:
    meta_path = folder / "meta.json"
    meta = json.loads(meta_path.read_text())
    fallback = meta.get("date", "")
    total: Counter = Counter()
    lonely: list[str] = []
    for name in FILES:
        path = folder / f"{name}.json"
        doc = json.loads(path.read_text())
        dates = blame_dates(path)
        total += convert_file(doc, lambda text, dates=dates: dates.get(text, fallback))
        lonely += third_party_only(doc, name)
        if write:
            path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    if write and meta.get("schema_version") != 2:
        meta["schema_version"] = 2
        meta_path.write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n")
    print(f"{folder}: {sum(total.values())} records converted ({', '.join(f'{k} {v}' for k, v in sorted(total.items()))})")
    for line in lonely:
        print(f"  all third-party: {line}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="*", type=Path, default=[ROOT / "data"])
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args(argv)
    for folder in args.folders:
        convert_dir(folder, args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
