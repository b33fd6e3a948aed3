"""extensions.json ``gpu_floors``: the lowest compute capability a package's own README or documentation states for
its releases. A user's --data folder is validated: a floor that is garbage is a DataError naming the file and the
dotted path; one without the package's own words fails the lint; the refresh script writes them back unchanged."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support import extensionsfile

from cudamatrix.errors import DataError
from cudamatrix.matrix.data import default_data_dir, validate_files
from cudamatrix.matrix.query import lint

REPO = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPO / "scripts"))
import refresh_extensions as refresh  # noqa: E402

DATA = default_data_dir()


def raws_with(rows) -> dict[str, bytes]:
    return extensionsfile.raws_with("gpu_floors", rows)


GOOD = {"names": ["flash-attn"], "versions": ">=2.0.0", "min_compute_capability": "8.0",
        "source": [{"url": "https://example.org/README.md", "states": "Ampere or newer", "read": "2026-12-04",
                    "kind": "first_party"}]}


def test_the_shipped_floors():
    floors = validate_files(raws_with(json.loads((DATA / "extensions.json").read_text())["gpu_floors"]))
    got = {(tuple(f.names), f.versions, f.min_compute_capability) for f in floors.extensions.gpu_floors}
    assert (("flash-attn",), ">=2.0.0,<=2.8.3.post1", "8.0") in got and (("vllm",), ">=0.3.3,<=0.14.0", "7.0") in got
    assert lint(floors) == []


@pytest.mark.parametrize("change, where", [
    ({"min_compute_capability": "banana"}, "gpu_floors[0].min_compute_capability"),
    ({"min_compute_capability": "9" * 5000}, "gpu_floors[0].min_compute_capability"),
    ({"versions": "not a spec"}, "gpu_floors[0].versions"),
    ({"names": ["\x1b[31mx"]}, "gpu_floors[0].names"),
    ({"bogus": 1}, "gpu_floors[0]"),
])
def test_a_garbage_floor_is_a_data_error_naming_its_path(change, where):
    with pytest.raises(DataError) as info:
        validate_files(raws_with([{**GOOD, **change}]))
    assert f"extensions.json: {where}" in info.value.message


def test_a_floor_without_the_packages_own_words_fails_the_lint():
    third = {**GOOD, "source": [{**GOOD["source"][0], "kind": "third_party"}]}
    assert lint(validate_files(raws_with([GOOD, third]))) == [
        "extensions.json: gpu_floors[1]: source: needs the package's own README or documentation (first_party), "
        "has third_party",
        "extensions.json: gpu_floors[1]: source: only third-party records; add the first-party document or the "
        "artifact that states the same"]


def test_the_refresh_writes_the_floors_back():
    old = json.loads((DATA / "extensions.json").read_text())
    new = refresh.merge(old, [])
    assert new["gpu_floors"] == old["gpu_floors"] and json.loads(refresh.dump(new)) == new
    assert refresh.dump(old) == (DATA / "extensions.json").read_text()
