"""Merging discovered rows into published ones: artifact facts over a row, and a new patch release's fields
filled from its minor release under the ``inferred`` rule. Shared by scripts/refresh_matrix.py and the overlay."""
from __future__ import annotations

import copy
from typing import Any, Iterable

from packaging.version import Version

from cudamatrix.matrix.sources import merge_sources


def merge_release(old: dict[str, Any] | None, art: dict[str, Any]) -> dict[str, Any]:
    """Merge artifact facts ``art`` over a published row ``old`` (or build a new row).

    ``art`` keys: name, version, source, python, platforms, companions, default (a variant dict for the
    default-index wheel: name, cuda, cudnn, nvidia_pins, source, ...), variants (dicts merged by name).
    Published fields absent from the artifacts (archs, ptx, cuDNN of other variants) are kept.
    """
    row = copy.deepcopy(old) if old else {
        "name": art["name"], "version": art["version"], "python": [], "variants": [],
        "source": art["source"],
        "notes": ["new release: only the index's artifacts are encoded (published tables not read)"],
    }
    for note in art.get("notes") or []:
        if note not in row.setdefault("notes", []):
            row["notes"].append(note)
    if "notes" in row and not row["notes"]:
        del row["notes"]
    for key in ("python", "platforms"):
        if art.get(key):
            row[key] = list(art[key])
    if art.get("companions"):
        row["companions"] = {**row.get("companions", {}), **art["companions"]}
    row["variants"] = _merge_variants(row.get("variants", []), art)
    return row


def _merge_variants(published: list[dict[str, Any]], art: dict[str, Any]) -> list[dict[str, Any]]:
    """The published variants with the artifacts' merged in by name (new ones appended); the default-index
    wheel's variant becomes the only ``pypi_default``."""
    variants = {v["name"]: v for v in published}
    order = [v["name"] for v in published]
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
        else:
            _merge_variant(cur, new)
    return [variants[n] for n in order]


def _merge_variant(cur: dict[str, Any], new: dict[str, Any]) -> None:
    """The artifact's non-empty facts over a published variant; its sources merged into the variant's."""
    for key, value in new.items():
        if key != "source" and value not in (None, [], False):
            cur[key] = value
    cur["source"] = merge_sources(cur.get("source"), new.get("source"))


INHERIT = ("cuda", "cudnn", "archs", "ptx", "platforms", "min_driver", "index_url")


def inherit(row: dict[str, Any], rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Fill a new patch release's variant fields the index does not carry from the newest older row of the
    same minor release, each such field recorded under ``inferred`` with its basis.

    A patch release is rebuilt from its minor release's branch with the same build configuration (the
    TensorFlow "tested build configurations" and JAX's installation notes are per minor release)."""
    v = Version(row["version"])
    same = [r for r in rows if Version(r["version"]).release[:2] == v.release[:2] and Version(r["version"]) < v]
    if not same:
        return row
    base = max(same, key=lambda r: Version(r["version"]))
    by = {x["name"]: x for x in base.get("variants", [])}
    for var in row.get("variants", []):
        old = by.get(var["name"])
        if old is None:
            continue
        for key in INHERIT:
            if var.get(key) in (None, [], "") and old.get(key) not in (None, [], ""):
                var[key] = copy.deepcopy(old[key])
                if key not in ("cuda", "cudnn", "archs", "ptx"):
                    note = f"{var['name']} {key} copied from {row['name']} {base['version']} (same minor release)"
                    row.setdefault("notes", []).append(note)
                else:
                    var.setdefault("inferred", {})[key] = (
                        f"copied from {row['name']} {base['version']} {old['name']}: a patch release keeps "
                        f"its minor release's build configuration")
        if var.get("cudnn") and old.get("cudnn") and old["cudnn"].startswith(var["cudnn"] + ".") \
                and len(var["cudnn"].split(".")) == 1:
            var["cudnn"] = old["cudnn"]  # build_info.py gave only the major; the minor's row is more precise
            var.setdefault("inferred", {})["cudnn"] = (
                f"{row['name']} {base['version']} {old['name']} has cuDNN {old['cudnn']}; this wheel's "
                f"build_info.py names the same major: a patch release keeps its minor's cuDNN")
    return row
