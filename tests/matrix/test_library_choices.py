"""extensions.json ``library_choices``: which of its per-CUDA libraries a package opens, as its own loader code states
at tags (bitsandbytes/cextension.py), and the CUDA releases of the files each release's wheel carries. A user's
--data folder is validated (a garbage row is a DataError naming the file and the dotted path); a row without the
package's own code, or with carried files but no wheel read, fails the lint; the refresh writes the rows back."""
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
    return extensionsfile.raws_with("library_choices", rows)


CODE = {"url": "https://example.org/pkg/blob/1.0/loader.py", "states": "opens lib_cuda{major}{minor}", "read": "2026-12-04",
        "kind": "first_party"}
WHEEL = {"states": "pkg-1.0 wheel carries lib_cuda128 and lib_cuda130", "read": "2026-12-04", "kind": "artifact"}
GOOD = {"names": ["pkg"], "versions": ">=1.0", "prefix": "lib_cuda", "choose": "exact", "missing": "it raises",
        "override": "PKG_CUDA", "carried": {"1.0": ["12.8", "13.0"]}, "source": [CODE, WHEEL]}


def test_the_shipped_rows():
    m = validate_files(raws_with(json.loads((DATA / "extensions.json").read_text())["library_choices"]))
    got = [(r.versions, r.choose, r.override, dict(r.carried)) for r in m.extensions.library_choices]
    assert got == [(">=0.43.1,<0.46.0", "exact", "BNB_CUDA_VERSION",
                    {"0.44.1": ["11.7", "11.8", "12.0", "12.1", "12.2", "12.3", "12.4", "12.5"]}),
                   (">=0.46.0,<0.50.0", "exact", "BNB_CUDA_VERSION",
                    {"0.49.2": ["11.8", "12.0", "12.1", "12.2", "12.3", "12.4", "12.5", "12.6", "12.8", "12.9", "13.0"]}),
                   (">=0.50.0,<=0.50.1", "same_major", "BNB_CUDA_VERSION",
                    {"0.50.1": ["11.8", "12.1", "12.4", "12.6", "12.8", "13.0", "13.2"]})]
    assert lint(m) == []


@pytest.mark.parametrize("change, where", [
    ({"choose": "closest"}, "library_choices[0].choose"),
    ({"versions": "not a spec"}, "library_choices[0].versions"),
    ({"prefix": "lib cuda\n"}, "library_choices[0].prefix"),
    ({"names": ["\x1b[31mx"]}, "library_choices[0].names"),
    ({"carried": {"one": ["13.0"]}}, "library_choices[0].carried"),
    ({"carried": {"1.0": ["thirteen"]}}, "library_choices[0].carried"),
    ({"bogus": 1}, "library_choices[0]"),
])
def test_a_garbage_row_is_a_data_error_naming_its_path(change, where):
    with pytest.raises(DataError) as info:
        validate_files(raws_with([{**GOOD, **change}]))
    assert f"extensions.json: {where}" in info.value.message


def test_a_row_without_the_packages_code_or_its_wheels_fails_the_lint():
    rows = [GOOD, {**GOOD, "source": [WHEEL]}, {**GOOD, "source": [CODE]}, {**GOOD, "source": [CODE], "carried": {}}]
    assert lint(validate_files(raws_with(rows))) == [
        "extensions.json: library_choices[1]: source: needs the package's own code (first_party) and its wheels "
        "(artifact), has artifact",
        "extensions.json: library_choices[2]: source: needs the package's own code (first_party) and its wheels "
        "(artifact), has first_party"]


def test_the_refresh_writes_the_rows_back():
    old = json.loads((DATA / "extensions.json").read_text())
    new = refresh.merge(old, [])
    assert new["library_choices"] == old["library_choices"] and json.loads(refresh.dump(new)) == new
    assert refresh.dump(old) == (DATA / "extensions.json").read_text()
