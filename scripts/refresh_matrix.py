#!/usr/bin/env python3
"""Regenerate and check the framework rows of the matrix (data/torch.json, tensorflow.json, jax.json).

Facts that live only in published tables (bundled cuDNN of a non-default variant, TORCH_CUDA_ARCH_LIST,
JAX's documented floors) are kept from the data files as they are. Facts that package artifacts carry are
read again from the default index through pip and merged over them:

* supported Python versions and platforms: ``pip index versions PKG --python-version X --platform TAG``;
* the exact ``nvidia-*`` pins of a wheel: ``pip install --dry-run --report`` (its ``requires_dist``);
* the default wheel's CUDA build: ``torch/version.py`` or TensorFlow's ``build_info.py``, read out of the
  wheel with HTTP range requests (a wheel is a zip; only its directory and one member are fetched);
* torchvision/torchaudio and jaxlib pairings: the companions' ``torch==`` / the plugin's ``jaxlib`` pins.

Prints a diff-like summary of what changed against data/*.json; writes only with ``--write``.
Exit codes: 0 no change (or written), 1 changes found (check mode), 2 pip or the index failed.

Standard library, ``packaging`` and this checkout's ``cudamatrix`` (its one subprocess helper, its
compute-capability parser). Pure functions first (tested in tests/test_refresh.py),
then the I/O (every subprocess and request has a timeout), then the CLI.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import re
import struct
import subprocess
import sys
import urllib.request
import zlib
from pathlib import Path
from typing import Any, Iterable

from packaging.requirements import Requirement
from packaging.version import InvalidVersion, Version

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data"
sys.path.insert(0, str(ROOT))  # this checkout's cudamatrix, installed or not
from cudamatrix import proc  # noqa: E402
from cudamatrix.schema import normalize_cc  # noqa: E402
PYTHONS = ("3.6", "3.7", "3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "3.14")
# platform tags pip is asked about, per cudamatrix Platform name
PLATFORM_TAGS = {
    "linux_x86_64": ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux2014_x86_64",
                     "manylinux2010_x86_64", "manylinux1_x86_64"),
    "linux_aarch64": ("manylinux_2_28_aarch64", "manylinux_2_27_aarch64", "manylinux2014_aarch64"),
    "win_amd64": ("win_amd64",),
    "macos_arm64": ("macosx_14_0_arm64", "macosx_13_0_arm64", "macosx_12_0_arm64", "macosx_11_0_arm64"),
    "macos_x86_64": ("macosx_10_15_x86_64", "macosx_10_14_x86_64", "macosx_10_13_x86_64",
                     "macosx_10_9_x86_64"),
}
TIMEOUT = 120


# --- pure functions ------------------------------------------------------------------------------

def parse_report(report: dict[str, Any]) -> dict[str, Any]:
    """The first install item of a ``pip install --dry-run --report`` JSON document.

    Returns {"name", "version", "requires_python", "requires_dist", "url"}. Raises ValueError if empty.
    """
    items = report.get("install") or []
    if not items:
        raise ValueError("the report installs nothing")
    item = items[0]
    meta = item.get("metadata") or {}
    return {
        "name": meta.get("name"),
        "version": meta.get("version"),
        "requires_python": meta.get("requires_python"),
        "requires_dist": list(meta.get("requires_dist") or []),
        "url": (item.get("download_info") or {}).get("url"),
    }


def _drop_extra(marker: str, extra: str) -> str:
    """Remove the ``extra == "x"`` clause from a marker string, keeping the environment part."""
    clause = r"extra\s*==\s*['\"]" + re.escape(extra) + r"['\"]"
    out = re.sub(r"\s+and\s+" + clause, "", marker)
    out = re.sub(clause + r"\s+and\s+", "", out)
    out = re.sub(clause, "", out).strip()
    return "" if out in ("", "()") else out


def nvidia_pins(requires_dist: Iterable[str], extra: str | None = None) -> list[str]:
    """The exact ``nvidia-*`` requirements of a wheel, as PEP 508 strings with their markers.

    With ``extra``, only the lines of that extra are kept and the extra clause is removed; without it,
    lines that belong to any extra are skipped.
    """
    pins = []
    for line in requires_dist:
        req = Requirement(line)
        if not req.name.lower().startswith("nvidia-"):
            continue
        marker = str(req.marker) if req.marker else ""
        in_extra = re.search(r"\bextra\s*==", marker) is not None
        if extra is None and in_extra:
            continue
        if extra is not None:
            if not re.search(r"extra\s*==\s*['\"]" + re.escape(extra) + r"['\"]", marker):
                continue
            marker = _drop_extra(marker, extra)
        text = f"{req.name}{req.specifier}"
        pins.append(f"{text}; {marker}" if marker else text)
    return pins


def pinned_version(requires_dist: Iterable[str], name: str) -> str | None:
    """The version a ``name==X`` line pins (the local ``+cu121`` part dropped), or None."""
    for line in requires_dist:
        req = Requirement(line)
        if req.name.lower() == name.lower() and not req.marker:
            for spec in req.specifier:
                if spec.operator in ("==", "==="):
                    return spec.version.split("+")[0]
    return None


def cuda_of_pins(pins: Iterable[str]) -> tuple[str | None, str | None]:
    """(CUDA "12.4", cuDNN "9.1.0.70") from ``nvidia-cuda-runtime-cuXX`` / ``nvidia-cudnn-cuXX`` pins."""
    cuda = cudnn = None
    for pin in pins:
        req = Requirement(pin)
        exact = [s.version for s in req.specifier if s.operator == "=="]
        if not exact:
            continue
        if re.fullmatch(r"nvidia-cuda-runtime(-cu\d+)?", req.name):
            cuda = ".".join(exact[0].split(".")[:2])
        elif re.fullmatch(r"nvidia-cudnn-cu\d+", req.name):
            cudnn = exact[0]
    return cuda, cudnn


def parse_index_versions(text: str) -> list[str]:
    """Versions from ``pip index versions`` output ("Available versions: 2.5.1, 2.5.0")."""
    for line in text.splitlines():
        if line.startswith("Available versions:"):
            return [v.strip() for v in line.split(":", 1)[1].split(",") if v.strip()]
    return []


def parse_torch_version_py(text: str) -> dict[str, str | None]:
    """``torch/version.py`` -> {"version": "2.5.1+cu124", "cuda": "12.4"} (cuda None for CPU builds)."""
    out: dict[str, str | None] = {}
    for key, name in (("version", "__version__"), ("cuda", "cuda")):
        m = re.search(rf"^{name}\s*(?::\s*[^=]+)?=\s*['\"]([^'\"]+)['\"]", text, re.M)
        out[key] = m.group(1) if m else None
    return out


def parse_tf_build_info(text: str) -> dict[str, Any]:
    """TensorFlow's ``build_info.py`` -> {"cuda": "12.2", "cudnn": "8", "archs": [...], "ptx": [...]}.

    ``cuda_compute_capabilities`` entries look like "sm_60" (SASS) or "compute_90" (PTX).
    """
    def field(key: str) -> str | None:
        m = re.search(rf"['\"]{key}['\"]\s*,\s*['\"]([^'\"]*)['\"]", text)
        return m.group(1) if m else None

    caps: list[str] = []
    m = re.search(r"['\"]cuda_compute_capabilities['\"]\s*,\s*\[([^\]]*)\]", text)
    if m:
        caps = re.findall(r"['\"]([^'\"]+)['\"]", m.group(1))
    archs = [_cc(c) for c in caps if not c.startswith("compute_")]
    ptx = [_cc(c) for c in caps if c.startswith("compute_")]
    return {"cuda": field("cuda_version") or None, "cudnn": field("cudnn_version") or None,
            "archs": archs, "ptx": ptx}


def _cc(tag: str) -> str:
    return normalize_cc(tag)  # "sm_90a" -> "9.0a", as the data writes arch-specific targets


def python_support(by_python: dict[str, set[str]]) -> dict[str, list[str]]:
    """{python: {versions}} -> {version: [pythons]} sorted by Python version."""
    out: dict[str, list[str]] = {}
    for py in sorted(by_python, key=Version):
        for v in by_python[py]:
            out.setdefault(v, []).append(py)
    return out


def merge_release(old: dict[str, Any] | None, art: dict[str, Any]) -> dict[str, Any]:
    """Merge artifact facts ``art`` over a published row ``old`` (or build a new row).

    ``art`` keys: name, version, source, python, platforms, companions, default (a variant dict for the
    default-index wheel: name, cuda, cudnn, nvidia_pins, source, ...), variants (dicts merged by name).
    Published fields absent from the artifacts (archs, ptx, cuDNN of other variants) are kept.
    """
    row = copy.deepcopy(old) if old else {
        "name": art["name"], "version": art["version"], "python": [], "variants": [],
        "source": art["source"],
        "notes": ["new release: published tables (variants, archs) not encoded yet"],
    }
    for key in ("python", "platforms"):
        if art.get(key):
            row[key] = list(art[key])
    if art.get("companions"):
        row["companions"] = {**row.get("companions", {}), **art["companions"]}
    variants = {v["name"]: v for v in row.get("variants", [])}
    order = [v["name"] for v in row.get("variants", [])]
    incoming = list(art.get("variants", []))
    if art.get("default"):
        for v in variants.values():
            v.pop("pypi_default", None)
        incoming.append({**art["default"], "pypi_default": True})
    for new in incoming:
        cur = variants.get(new["name"])
        if cur is None:
            variants[new["name"]] = {k: v for k, v in new.items() if v not in (None, [], False)}
            order.append(new["name"])
            continue
        for key, value in new.items():
            if key == "source":
                continue
            if value not in (None, [], False):
                cur[key] = value
        if new.get("source") and new["source"] not in cur.get("source", ""):
            cur["source"] = f"{cur['source']}; {new['source']}" if cur.get("source") else new["source"]
    row["variants"] = [variants[n] for n in order]
    return row


def merge_file(old: dict[str, Any], rows: list[dict[str, Any]], keep_unlisted: bool = True) -> dict[str, Any]:
    """Merge artifact rows into a whole ``{"releases": [...]}`` document, newest release first."""
    by_version = {r["version"]: r for r in old.get("releases", [])}
    out = dict(by_version) if keep_unlisted else {}
    for art in rows:
        out[art["version"]] = merge_release(by_version.get(art["version"]), art)
    return {"releases": sorted(out.values(), key=lambda r: _vkey(r["version"]), reverse=True)}


def _vkey(v: str) -> Version:
    try:
        return Version(v)
    except InvalidVersion:
        return Version("0")


def diff_files(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Human-readable changes between two framework documents: "+ 2.6.0", "~ 2.5.1 cu124.nvidia_pins"."""
    lines: list[str] = []
    a = {r["version"]: r for r in old.get("releases", [])}
    b = {r["version"]: r for r in new.get("releases", [])}
    for v in sorted(set(a) | set(b), key=_vkey):
        if v not in a:
            lines.append(f"+ {v} (new release)")
        elif v not in b:
            lines.append(f"- {v} (gone)")
        else:
            lines.extend(f"~ {v} {path}: {x!r} -> {y!r}" for path, x, y in _walk(a[v], b[v], ""))
    return lines


def _walk(x: Any, y: Any, path: str) -> Iterable[tuple[str, Any, Any]]:
    if isinstance(x, dict) and isinstance(y, dict):
        for k in sorted(set(x) | set(y)):
            yield from _walk(x.get(k), y.get(k), f"{path}.{k}" if path else k)
    elif (isinstance(x, list) and isinstance(y, list) and x and y
          and all(isinstance(i, dict) and "name" in i for i in x + y)):
        xa, ya = {i["name"]: i for i in x}, {i["name"]: i for i in y}
        for k in list(xa) + [k for k in ya if k not in xa]:
            yield from _walk(xa.get(k), ya.get(k), f"{path}[{k}]")
    elif x != y:
        yield path, x, y


# --- zip members over HTTP range requests --------------------------------------------------------

def _get(url: str, start: int, end: int) -> bytes:
    req = urllib.request.Request(url, headers={"Range": f"bytes={start}-{end}"})
    with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:
        data = resp.read()
        if resp.status != 206:
            raise OSError("the server ignores range requests")
        return data


def _size(url: str) -> int:
    req = urllib.request.Request(url, method="HEAD")
    with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:
        return int(resp.headers["Content-Length"])


def read_zip_member(url: str, suffix: str) -> str | None:
    """Read the first member whose name ends with ``suffix`` out of a remote zip, or None."""
    size = _size(url)
    tail = _get(url, max(0, size - 65557), size - 1)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0:
        raise OSError("no end of central directory")
    cd_size, cd_off = struct.unpack("<II", tail[at + 12:at + 20])
    if cd_off == 0xFFFFFFFF:  # zip64
        loc = tail.rfind(b"PK\x06\x07")
        (eocd64,) = struct.unpack("<Q", tail[loc + 8:loc + 16])
        rec = _get(url, eocd64, eocd64 + 55)
        cd_size, cd_off = struct.unpack("<QQ", rec[40:56])
    cd = _get(url, cd_off, cd_off + cd_size - 1)
    pos = 0
    while pos + 46 <= len(cd) and cd[pos:pos + 4] == b"PK\x01\x02":
        method, = struct.unpack("<H", cd[pos + 10:pos + 12])
        csize, _usize = struct.unpack("<II", cd[pos + 20:pos + 28])
        nlen, elen, clen = struct.unpack("<HHH", cd[pos + 28:pos + 34])
        (off,) = struct.unpack("<I", cd[pos + 42:pos + 46])
        name = cd[pos + 46:pos + 46 + nlen].decode("utf-8", "replace")
        if name.endswith(suffix):
            head = _get(url, off, off + 29)
            hn, he = struct.unpack("<HH", head[26:30])
            raw = _get(url, off + 30 + hn + he, off + 30 + hn + he + csize - 1)
            data = zlib.decompress(raw, -15) if method == 8 else raw
            return data.decode("utf-8", "replace")
        pos += 46 + nlen + elen + clen
    return None


# --- pip -----------------------------------------------------------------------------------------

def _env() -> dict[str, str]:
    # the machine's pip configuration (find-links, constraints capping versions) must not leak in:
    # the script asks the default index only
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def run(argv: list[str], timeout: int = TIMEOUT) -> proc.Result:
    """Through cudamatrix's one subprocess helper (no shell, captured output, a timeout); a hang or a
    missing program raises, so that the CLI reports the failure instead of reading it as "no wheel"."""
    result = proc.run(argv, timeout=timeout, env=_env())
    if result.timed_out:
        raise subprocess.TimeoutExpired(argv, timeout)
    if result.returncode is None:
        raise OSError(f"{argv[0]}: {result.error}")
    return result


def _target(python: str | None, platform: str | None) -> list[str]:
    out = ["--only-binary=:all:"]
    if python:
        out += ["--python-version", python]
    for tag in PLATFORM_TAGS.get(platform or "", ()):
        out += ["--platform", tag]
    return out


def pip_report(pip: list[str], requirement: str, python: str | None = None,
               platform: str | None = "linux_x86_64") -> dict[str, Any] | None:
    """``pip install --dry-run --report`` for one wheel (metadata read by range requests). None if none fits."""
    argv = pip + ["install", "--dry-run", "--ignore-installed", "--no-deps", "--no-cache-dir",
                  "--use-feature=fast-deps", "--quiet", "--report", "-", *_target(python, platform),
                  requirement]
    proc = run(argv)
    if proc.returncode != 0:
        return None
    return json.loads(proc.stdout)


def pip_versions(pip: list[str], package: str, python: str, platform: str) -> list[str]:
    proc = run(pip + ["index", "versions", package, "--no-cache-dir", *_target(python, platform)])
    return parse_index_versions(proc.stdout) if proc.returncode == 0 else []


def support_table(pip: list[str], package: str, log) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """({version: [pythons on any platform]}, {version: [platforms]}) from per-Python index listings."""
    per_platform: dict[str, dict[str, set[str]]] = {}
    for platform in PLATFORM_TAGS:
        per_platform[platform] = {py: set(pip_versions(pip, package, py, platform)) for py in PYTHONS}
        log(f"  {package} {platform}: {sum(len(s) for s in per_platform[platform].values())} wheels")
    pythons: dict[str, set[str]] = {}
    for table in per_platform.values():
        for py, versions in table.items():
            pythons.setdefault(py, set()).update(versions)
    platforms: dict[str, list[str]] = {}
    for platform, table in per_platform.items():
        for v in set().union(*table.values()):
            platforms.setdefault(v, []).append(platform)
    return python_support(pythons), platforms


def companions(pip: list[str], package: str, parent: str, log) -> dict[str, str]:
    """{parent version: newest companion version pinning it} (torchvision -> torch==X)."""
    out: dict[str, str] = {}
    seen: set[str] = set()
    for py in ("3.10", "3.12", "3.9", "3.8"):
        for v in pip_versions(pip, package, py, "linux_x86_64"):
            if v in seen:
                continue
            report = pip_report(pip, f"{package}=={v}", py)
            if report is None:
                continue
            seen.add(v)
            pin = pinned_version(parse_report(report)["requires_dist"], parent)
            if pin and (pin not in out or Version(v) > Version(out[pin])):
                out[pin] = v
    log(f"  {package}: {len(out)} pairings")
    return out


# --- per framework -------------------------------------------------------------------------------

def _first_report(pip: list[str], req: str, pythons: list[str]) -> dict[str, Any] | None:
    for py in reversed(pythons or ["3.11"]):
        report = pip_report(pip, req, py)
        if report is not None:
            return report
    return None


def torch_rows(pip: list[str], versions: list[str], log) -> list[dict[str, Any]]:
    py, plats = support_table(pip, "torch", log)
    vision = companions(pip, "torchvision", "torch", log)
    audio = companions(pip, "torchaudio", "torch", log)
    rows = []
    for v in versions:
        pythons = py.get(v, [])
        req = f"torch=={v}"
        report = _first_report(pip, req, pythons)
        art: dict[str, Any] = {"name": "torch", "version": v, "python": pythons,
                               "platforms": sorted(plats.get(v, [])),
                               "source": f"artifact: pip index versions torch per Python and platform; {req}"}
        comp = {k: m[v] for k, m in (("torchvision", vision), ("torchaudio", audio)) if v in m}
        if comp:
            art["companions"] = comp
        if report is not None:
            info = parse_report(report)
            pins = nvidia_pins(info["requires_dist"])
            cuda, cudnn = cuda_of_pins(pins)
            if cuda is None and info["url"]:
                text = read_zip_member(info["url"], "torch/version.py")
                cuda = parse_torch_version_py(text or "")["cuda"]
            if cuda:
                art["default"] = {
                    "name": "cu" + cuda.replace(".", ""), "cuda": cuda, "cudnn": cudnn, "nvidia_pins": pins,
                    "local_version": "+cu" + cuda.replace(".", ""),
                    "source": f"artifact: wheel metadata via pip install --dry-run --report {req}"}
        log(f"  torch {v}: python {pythons} default {art.get('default', {}).get('name')}")
        rows.append(art)
    return rows


def tensorflow_rows(pip: list[str], versions: list[str], log) -> list[dict[str, Any]]:
    py, plats = support_table(pip, "tensorflow", log)
    rows = []
    for v in versions:
        pythons = py.get(v, [])
        req = f"tensorflow[and-cuda]=={v}"
        art: dict[str, Any] = {"name": "tensorflow", "version": v, "python": pythons,
                               "platforms": sorted(plats.get(v, [])),
                               "source": "artifact: pip index versions tensorflow per Python and platform"}
        report = _first_report(pip, req, pythons)
        if report is not None:
            info = parse_report(report)
            pins = nvidia_pins(info["requires_dist"], extra="and-cuda")
            build = {}
            if info["url"]:
                build = parse_tf_build_info(read_zip_member(info["url"], "tensorflow/python/platform/build_info.py") or "")
            src = f"artifact: wheel metadata via pip install --dry-run --report {req}"
            name = "and-cuda" if pins else "gpu"
            variant = {"name": name, "source": src + "; build_info.py read from the wheel",
                       "cuda": build.get("cuda"), "cudnn": cuda_of_pins(pins)[1],
                       "archs": build.get("archs", []), "ptx": build.get("ptx", []), "nvidia_pins": pins,
                       "pip_extra": "and-cuda" if pins else None}
            if build.get("cuda") or pins:
                art["variants"] = [variant]
        log(f"  tensorflow {v}: python {pythons}")
        rows.append(art)
    return rows


def jax_rows(pip: list[str], versions: list[str], log) -> list[dict[str, Any]]:
    py, plats = support_table(pip, "jaxlib", log)
    rows = []
    for v in versions:
        pythons = py.get(v, [])
        art: dict[str, Any] = {"name": "jax", "version": v, "python": pythons,
                               "platforms": sorted(plats.get(v, [])),
                               "source": "artifact: pip index versions jaxlib per Python and platform"}
        variants = []
        for major in ("12", "13"):
            req = f"jax-cuda{major}-plugin[with-cuda]=={v}"
            report = _first_report(pip, req, pythons)
            if report is None:
                continue
            info = parse_report(report)
            pins = nvidia_pins(info["requires_dist"], extra="with-cuda")
            pjrt = pinned_version(info["requires_dist"], f"jax-cuda{major}-pjrt")
            extra = [f"jax-cuda{major}-plugin=={v}"] + ([f"jax-cuda{major}-pjrt=={pjrt}"] if pjrt else [])
            variants.append({"name": f"cuda{major}", "pip_extra": f"cuda{major}", "nvidia_pins": pins,
                             "extra_packages": extra,
                             "source": f"artifact: wheel metadata via pip install --dry-run --report {req}"})
        art["variants"] = variants
        jaxlib = pip_report(pip, f"jax=={v}", pythons[-1] if pythons else None)
        if jaxlib is not None:
            pin = pinned_version(parse_report(jaxlib)["requires_dist"], "jaxlib")
            if pin:
                art["companions"] = {"jaxlib": pin}
        log(f"  jax {v}: {[x['name'] for x in variants]}")
        rows.append(art)
    return rows


BUILDERS = {"torch": torch_rows, "tensorflow": tensorflow_rows, "jax": jax_rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("frameworks", nargs="*", default=list(BUILDERS), choices=list(BUILDERS))
    ap.add_argument("--versions", nargs="*", help="only these releases (default: those in the data file)")
    ap.add_argument("--pip", default=f"{sys.executable} -m pip", help="pip command (pip >= 23 for fast-deps)")
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--write", action="store_true", help="write the merged files")
    args = ap.parse_args(argv)
    pip = args.pip.split()

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    changed = False
    for fw in args.frameworks:
        path = args.data / f"{fw}.json"
        old = json.loads(path.read_text()) if path.exists() else {"releases": []}
        versions = args.versions or [r["version"] for r in old["releases"]]
        log(f"{fw}: {len(versions)} releases")
        try:
            rows = BUILDERS[fw](pip, versions, log)
        except (OSError, subprocess.TimeoutExpired, json.JSONDecodeError) as exc:
            log(f"{fw}: pip or the index failed: {exc}")
            return 2
        new = merge_file(old, rows)
        lines = diff_files(old, new)
        print(f"--- {fw}.json: {len(lines)} change(s)")
        for line in lines:
            print(line)
        if lines:
            changed = True
            if args.write:
                path.write_text(json.dumps(new, indent=2, ensure_ascii=False) + "\n")
    if args.write and changed:  # the run time trusts the shipped data: validate what was written
        from cudamatrix.errors import DataError
        from cudamatrix.matrix.data import load_matrix_from

        try:
            load_matrix_from(args.data)
        except DataError as exc:
            log(f"the written data does not validate:\n{exc.message}")
            return 2
    return 0 if args.write or not changed else 1


if __name__ == "__main__":
    sys.exit(main())
