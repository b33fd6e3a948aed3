"""Trust the shipped data, validate the user's.

The run time builds the shipped matrix straight from its JSON, without pydantic; these tests are where that
data is validated (as is ``scripts/refresh_matrix.py --write``). Data a user names (``--data``) is validated
with pydantic at run time. Nothing is pickled or cached on disk.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cudamatrix.errors import DataError
from cudamatrix.matrix.data import (
    FILES,
    Matrix,
    build_files,
    default_data_dir,
    load_matrix,
    load_matrix_from,
    validate_files,
)
from cudamatrix.schema import build, to_dict
from snapshot import SNAPSHOT

PACKAGE = Path(__file__).resolve().parent.parent / "cudamatrix"


def _raws(folder: Path) -> dict[str, bytes]:
    return {name: (folder / f"{name}.json").read_bytes() for name in FILES}


@pytest.mark.slow
@pytest.mark.parametrize("folder", [default_data_dir(), SNAPSHOT], ids=["shipped", "snapshot"])
def test_data_validates_and_the_unvalidated_build_is_the_same(folder: Path):
    raws = _raws(folder)
    validated = validate_files(raws)  # raises DataError naming the file and dotted path of a bad value
    built = build_files(raws)
    assert isinstance(built, Matrix)
    assert to_dict(built, records=True) == to_dict(validated, records=True)
    # the same types too: versions parsed, rows are the dataclasses
    release = built.torch.releases[0]
    assert type(release.version) is type(validated.torch.releases[0].version)
    assert type(release.variants[0]) is type(validated.torch.releases[0].variants[0])


def test_the_shipped_matrix_is_built_without_pydantic():
    code = ("import sys; from cudamatrix.matrix.data import load_matrix; m = load_matrix(); "
            "print(len(m.torch.releases), 'pydantic' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    count, pydantic_loaded = out.stdout.split()
    assert int(count) > 10 and pydantic_loaded == "False", out.stderr


@pytest.mark.slow
def test_a_user_data_folder_is_validated(tmp_path: Path):
    folder = tmp_path / "data"
    shutil.copytree(default_data_dir(), folder)
    doc = json.loads((folder / "cuda.json").read_text())
    doc["releases"][0]["version"] = 12.1  # a float: validation refuses it, the trusted build would not
    (folder / "cuda.json").write_text(json.dumps(doc))
    with pytest.raises(DataError) as info:
        load_matrix(str(folder))
    assert "cuda.json: releases[0].version" in info.value.message


def test_a_malformed_shipped_file_is_a_data_error_not_a_traceback():
    raws = _raws(default_data_dir())
    doc = json.loads(raws["gpus"])
    doc["gpus"][0]["bogus"] = 1
    raws["gpus"] = json.dumps(doc).encode()
    with pytest.raises(DataError):
        build_files(raws)


def test_build_refuses_unknown_keys():
    from cudamatrix.matrix.data import Meta

    with pytest.raises(TypeError):
        build(Meta, {"schema_version": 1, "data_version": "x", "date": "d", "extra": 1})


def test_no_pickle_anywhere():
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text()
        assert "import pickle" not in text and "pickle.load" not in text, path


def test_no_validator_names_injected_into_module_globals():
    # the annotated types are defined once in cudamatrix.schema and imported; nothing binds them at run time
    schema = "".join(p.read_text() for p in (PACKAGE / "schema").glob("*.py"))
    assert "setdefault(key, value)" not in schema and "sys.modules" not in schema
    from cudamatrix.matrix import data
    from cudamatrix import schema as schema_module

    assert data.Ver is schema_module.Ver and data.CC is schema_module.CC


@pytest.mark.slow
def test_matrix_show_without_arguments_lists_the_families():
    out = subprocess.run([sys.executable, "-m", "cudamatrix", "matrix", "show", "--json"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)["data"]
    assert data["families"] == ["torch", "tensorflow", "jax", "cuda", "cudnn", "gpu"]
    assert data["counts"]["torch"] > 10 and data["meta"]["schema_version"] == 2
    human = subprocess.run([sys.executable, "-m", "cudamatrix", "matrix", "show"], capture_output=True, text=True,
                           timeout=60)
    assert human.returncode == 0 and "torch" in human.stdout and "Traceback" not in human.stderr
    load_matrix_from(default_data_dir())  # and the shipped data still validates
