"""extensions.json ``find_links``: the pages of PyG's compiled wheels (one per torch release and CUDA variant) and the
builds each carries, as the packages' own build workflows state them at a commit. A user's --data folder is
validated (garbage is a DataError naming the dotted path), a page family or build the lint refuses is named, and the
refresh script writes the key back unchanged."""
from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

from cudamatrix.errors import DataError
from cudamatrix.matrix.data import FILES, OPTIONAL, default_data_dir, load_matrix_from, validate_files
from cudamatrix.matrix.query import lint, sourced_rows

REPO = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPO / "scripts"))
import refresh_extensions as refresh  # noqa: E402

DATA = default_data_dir()
SHIPPED = json.loads((DATA / "extensions.json").read_text())


def raws_with(find_links) -> dict[str, bytes]:
    raws = {n: (DATA / f"{n}.json").read_bytes() for n in FILES if n not in OPTIONAL}
    doc = dict(SHIPPED, find_links=find_links)
    raws["extensions"] = json.dumps(doc).encode()
    return raws


def shipped_pages() -> dict:
    return copy.deepcopy(SHIPPED["find_links"][0])


def test_the_shipped_pages_hold_each_workflows_builds():
    matrix = validate_files(raws_with(SHIPPED["find_links"]))
    (pages,) = matrix.extensions.find_links
    got = {(b.name, str(b.version), str(b.torch)): b.variants for b in pages.builds}
    # torch-scatter's building.yml at efbe465 (2.8.0 minus its excluded cu118 and cu124), as its README's table
    assert got[("torch-scatter", "2.1.2", "2.8.0")] == ["cpu", "cu126", "cu128", "cu129"]
    # pyg-lib's full_matrix_linux.json at tag 0.8.0
    assert got[("pyg-lib", "0.8.0", "2.13.0")] == ["cpu", "cu126", "cu130", "cu132"]
    assert got[("torch-sparse", "0.6.18", "2.7.0")] == ["cpu", "cu118", "cu126", "cu128"]
    assert {b.name for b in pages.builds} == {"pyg-lib", "torch-scatter", "torch-sparse", "torch-cluster",
                                               "torch-spline-conv"}
    assert pages.url.format(torch="2.8.0", variant="cu128").endswith("/whl/torch-2.8.0+cu128.html")
    assert pages.local.format(torch="28", variant="cu128") == "+pt28cu128"
    assert "not reachable from here" in pages.unread
    assert lint(matrix) == []


def test_both_loaders_build_the_same_pages():
    trusted = load_matrix_from(DATA, trusted=True).extensions.find_links
    assert trusted == load_matrix_from(DATA).extensions.find_links and trusted[0].builds


def test_every_build_is_a_sourced_row():
    rows = dict(sourced_rows(validate_files(raws_with(SHIPPED["find_links"]))))
    j = next(j for j, b in enumerate(shipped_pages()["builds"]) if (b["name"], b["torch"]) == ("torch-scatter", "2.8.0"))
    assert "pytorch_scatter/blob/efbe465" in rows[f"extensions.json: find_links[0].builds[{j}]"]
    assert sum(w.startswith("extensions.json: find_links[0].builds[") for w in rows) == len(shipped_pages()["builds"])


@pytest.mark.parametrize("change, where", [
    (lambda p: p["builds"][0].update(torch="banana"), "find_links[0].builds[0].torch"),
    (lambda p: p["builds"][0].update(variants="cu128"), "find_links[0].builds[0].variants"),
    (lambda p: p["builds"][0].update(platforms=["linux_sparc"]), "find_links[0].builds[0].platforms"),
    (lambda p: p["builds"][0].update(bogus=1), "find_links[0].builds[0]"),
    (lambda p: p.update(url=None), "find_links[0].url"),
    (lambda p: p.update(local="\x1b[31m"), "find_links[0].local"),
])
def test_a_garbage_page_is_a_data_error_naming_its_path(change, where):
    pages = shipped_pages()
    change(pages)
    with pytest.raises(DataError) as info:
        validate_files(raws_with([pages]))
    assert f"extensions.json: {where}" in info.value.message


def test_the_lint_names_a_bad_pattern_variant_source_or_twin():
    pages = shipped_pages()
    pages["url"] = pages["url"].replace("{variant}", "cu128")
    pages["builds"][1]["variants"] = ["cuda12"]
    pages["builds"][2]["source"] = [{**pages["builds"][2]["source"][0], "kind": "third_party"}]
    pages["builds"].append(pages["builds"][0])
    problems = [p for p in lint(validate_files(raws_with([pages]))) if "find_links" in p]
    assert problems == [
        "extensions.json: find_links[0]: url: names no {torch} or no {variant}",
        "extensions.json: find_links[0].builds[1]: variants: ['cuda12'] are not cpu or cuNNN",
        "extensions.json: find_links[0].builds[2]: source: needs the package's own build workflow (first_party)",
        f"extensions.json: find_links[0].builds[{len(pages['builds']) - 1}]: duplicate row pyg-lib for torch 2.13.0",
        "extensions.json: find_links[0].builds[2]: source: only third-party records; add the first-party document "
        "or the artifact that states the same",
    ]


def test_the_refresh_writes_the_pages_back():
    new = refresh.merge(SHIPPED, [])
    assert new["find_links"] == SHIPPED["find_links"] and json.loads(refresh.dump(new)) == new
    assert refresh.dump(SHIPPED) == (DATA / "extensions.json").read_text()


def test_a_patterns_other_braces_are_left_as_they_are():
    """A user's --data pattern is filled by name, never by str.format: ``{0}`` or ``{torch.__class__}`` reach
    nothing (and raise nothing)."""
    pages = shipped_pages()
    pages["url"] = "https://example.org/{0}/{torch.__class__}/torch-{torch}+{variant}.html"
    pages["local"] = "+{x}pt{torch}{variant}"
    (validated,) = validate_files(raws_with([pages])).extensions.find_links
    assert validated.page("2.8.0", "cu128") == "https://example.org/{0}/{torch.__class__}/torch-2.8.0+cu128.html"
    assert validated.tag("28", "cu128") == "+{x}pt28cu128"
