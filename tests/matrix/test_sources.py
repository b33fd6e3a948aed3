"""Sources as data (cudamatrix/matrix/sources.py, scripts/convert_sources.py): every row's source is a list of
records (url, states, read, kind), validated, readable as text where code quotes a row, and never third-party
alone."""
from __future__ import annotations

import copy
import json
import shutil
import sys
import typing
from pathlib import Path

import pytest

from cudamatrix.errors import DataError
from cudamatrix.matrix.data import default_data_dir, load_matrix_from
from cudamatrix.matrix.query import lint, sourced_rows
from cudamatrix.matrix.sources import KINDS, SourceText, all_third_party, merge_sources, records_of, source_record
from cudamatrix.schema import to_dict

ROOT = Path(__file__).parent.resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import convert_sources  # noqa: E402

COG = "https://github.com/replicate/cog/blob/main/pkg/config/torch_compatibility.json"
RAW = [{"url": "https://github.com/pytorch/pytorch/pull/175253", "states": "RELEASE.md CUDA Support Matrix for 2.11",
        "read": "2026-11-26", "kind": "first_party"},
       {"states": "wheel metadata via pip install --dry-run --report torch==2.11.0", "read": "2026-11-26",
        "kind": "artifact"}]


@pytest.fixture(scope="module")
def shipped():
    return load_matrix_from(default_data_dir())


# --- the value code reads -------------------------------------------------------------------------

def test_sources_read_as_one_line_and_keep_their_records():
    text = SourceText(RAW)
    assert text == ("https://github.com/pytorch/pytorch/pull/175253 (RELEASE.md CUDA Support Matrix for 2.11); "
                    "artifact: wheel metadata via pip install --dry-run --report torch==2.11.0")
    assert f"matrix row: {text}".endswith("torch==2.11.0")  # how doctor and the solver quote a row
    assert [r.kind for r in text.records] == ["first_party", "artifact"] and text.records[1].url is None
    assert to_dict(text, records=True) == [{**RAW[0]}, {"url": None, **RAW[1]}]  # the data files' shape
    assert to_dict(text) == text and type(to_dict(text)) is SourceText  # a Solution's matrix_source: the text
    clone = copy.deepcopy(text)
    assert clone == text and clone.records == text.records
    assert records_of(text) == text.records and records_of("plain text") == ()


def test_all_third_party_and_merge():
    cog = source_record("variants scraped from the PyTorch index", kind="third_party", url=COG, read="2026-01-01")
    assert all_third_party(SourceText([cog])) and not all_third_party(SourceText([cog, RAW[1]]))
    assert not all_third_party("a plain string")  # unknown, not a verdict
    assert merge_sources([cog], [cog, RAW[1]]) == [cog, RAW[1]]
    assert source_record("x")["read"] and "url" not in source_record("x")


def test_built_and_validated_sources_are_the_same(shipped):
    built = load_matrix_from(default_data_dir(), trusted=True)
    assert to_dict(built.torch.releases[0].source, records=True) == \
        to_dict(shipped.torch.releases[0].source, records=True)
    assert isinstance(built.cuda.releases[0].source, SourceText)
    assert isinstance(shipped.cuda.releases[0].source, SourceText)


def _row_classes():
    """Every row class of the matrix with a source field, and those fields."""
    import cudamatrix.matrix.data as data
    from cudamatrix.matrix.sources import Sources
    from cudamatrix.schema.records import is_record

    for cls in vars(data).values():
        if isinstance(cls, type) and is_record(cls) and cls.__module__ == data.__name__:
            names = [n for n, s in cls.__record_specs__.items()
                     if s.type is Sources or Sources in typing.get_args(s.type)]
            if names:
                yield cls, names


def test_every_source_field_of_the_matrix_is_joined_on_first_read():
    from cudamatrix.matrix.sources import LazySource

    found = dict(_row_classes())
    assert {"Variant", "FrameworkRelease", "CudaRelease", "Architecture", "Advisory"} <= {c.__name__ for c in found}
    for cls, names in found.items():
        assert all(isinstance(vars(cls)[n], LazySource) for n in names), cls
    built = load_matrix_from(default_data_dir(), trusted=True)
    row = built.torch.releases[0].variants[0]
    assert type(row.__dict__["source"]) is list  # the JSON list, untouched until read
    text = row.source
    assert type(text) is SourceText and row.source is text and row.__dict__["source"] is text  # made once
    floors = [a for a in built.gpus.architectures if a.__dict__["min_driver_source"] is not None]
    assert floors and all(type(a.min_driver_source) is SourceText for a in floors)  # an optional field too


def test_a_lazily_built_row_equals_its_read_one_and_survives_copy_pickle_and_the_dataclass_upgrade(shipped):
    import dataclasses
    import pickle

    built = load_matrix_from(default_data_dir(), trusted=True)
    fresh, seen = built.torch.releases[1], shipped.torch.releases[1]
    assert pickle.loads(pickle.dumps(fresh)) == fresh == seen and copy.copy(fresh) == seen
    again = load_matrix_from(default_data_dir(), trusted=True).tensorflow.releases[0]
    cls = type(again.variants[0])
    dataclasses.fields(cls)  # the first such read makes the class a standard dataclass in place
    assert type(vars(cls)["source"]).__name__ == "LazySource"
    assert type(again.variants[0].__dict__["source"]) is list and type(again.variants[0].source) is SourceText
    assert again.variants[0].source == shipped.tensorflow.releases[0].variants[0].source


# --- validation -------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("bad,message", [
    ("https://docs.nvidia.com/cuda/", "a list of source records is needed"),
    ([], "at least one source record"),
    ([{"states": "x", "read": "2026-11-26", "kind": "vendor"}], "kind"),
    ([{"states": "x", "read": "26/11/2026", "kind": "artifact"}], "not an ISO date"),
    ([{"url": "http://example.org", "states": "x", "read": "2026-11-26", "kind": "first_party"}], "https URL"),
    ([{"states": " ", "read": "2026-11-26", "kind": "artifact"}], "empty text"),
    ([{"states": "x", "read": "2026-11-26", "kind": "artifact", "note": "y"}], "unknown key"),
])
def test_a_bad_source_is_refused_with_its_path(tmp_path, bad, message):
    folder = tmp_path / "data"
    shutil.copytree(default_data_dir(), folder)
    doc = json.loads((folder / "cuda.json").read_text())
    doc["releases"][0]["source"] = bad
    (folder / "cuda.json").write_text(json.dumps(doc))
    with pytest.raises(DataError) as exc:
        load_matrix_from(folder)
    assert "cuda.json: releases[0].source" in exc.value.message and message in exc.value.message


def test_shipped_rows_all_have_a_first_party_or_artifact_record(shipped):
    rows = sourced_rows(shipped)
    assert len(rows) > 700
    lonely = [where for where, source in rows if all_third_party(source)]
    assert lonely == []  # replicate/cog's table, pastes in other projects: never a row's only source
    assert {r.kind for _, s in rows for r in records_of(s)} == set(KINDS)
    assert all(records_of(s) for _, s in rows)


@pytest.mark.slow
def test_lint_refuses_a_row_whose_sources_are_all_third_party(tmp_path):
    folder = tmp_path / "data"
    shutil.copytree(default_data_dir(), folder)
    doc = json.loads((folder / "torch.json").read_text())
    doc["releases"][3]["variants"][0]["source"] = [
        {"url": COG, "states": "variants scraped from the PyTorch index", "read": "2026-11-26", "kind": "third_party"}]
    (folder / "torch.json").write_text(json.dumps(doc))
    problems = lint(load_matrix_from(folder))
    assert problems == ["torch.json: releases[3].variants[0]: source: only third-party records; add the "
                        "first-party document or the artifact that states the same"]


# --- the conversion script, on free-text sources as data/ carried them --------------------------------

OLD_251 = ("https://github.com/pytorch/builder/blob/release/2.5/manywheel/build_cuda.sh (TORCH_CUDA_ARCH_LIST); "
           "https://github.com/pytorch/pytorch/issues/134015 (cuDNN 9.1.0.70 for CUDA 11.8, 12.1, 12.4); artifact: "
           "wheel metadata via pip install --dry-run --report torch==2.5.1")
OLD_24 = ("https://github.com/pytorch/builder/blob/release/2.4/manywheel/build_cuda.sh (TORCH_CUDA_ARCH_LIST); "
          "common/install_cuda.sh (cuDNN)")


def test_conversion_splits_sources_and_names_their_kind():
    recs = convert_sources.records(OLD_251, "row", "2026-11-26")
    assert [(r.get("url"), r["kind"]) for r in recs] == [
        ("https://github.com/pytorch/builder/blob/release/2.5/manywheel/build_cuda.sh", "first_party"),
        ("https://github.com/pytorch/pytorch/issues/134015", "first_party"), (None, "artifact")]
    assert recs[1]["states"] == "cuDNN 9.1.0.70 for CUDA 11.8, 12.1, 12.4"
    assert recs[2]["states"] == "wheel metadata via pip install --dry-run --report torch==2.5.1"
    # a repository path beside a GitHub file URL is that repository at the same ref
    assert convert_sources.records(OLD_24, "row", "2026-11-26")[1]["url"] == \
        "https://github.com/pytorch/builder/blob/release/2.4/common/install_cuda.sh"


def test_conversion_keeps_lists_and_parentheses_whole_and_reads_the_row_for_a_bare_url():
    recs = convert_sources.records("https://github.com/pytorch/pytorch/pull/182849 (matrix for 2.12): 12.6.3 row "
                                   "5.0;6.0;7.0 for x86; aarch64 row 8.0;9.0 only", "row", "2026-11-26")
    assert len(recs) == 1 and "5.0;6.0;7.0" in recs[0]["states"] and recs[0]["states"].endswith("8.0;9.0 only")
    bare = convert_sources.records("https://developer.nvidia.com/cuda-gpus", "GeForce RTX 3090: compute "
                                   "capability 8.6", "2026-11-26")
    assert bare == [{"url": "https://developer.nvidia.com/cuda-gpus", "states": "GeForce RTX 3090: compute "
                     "capability 8.6", "read": "2026-11-26", "kind": "first_party"}]
    assert convert_sources.records(f"{COG} (variants scraped)", "r", "2026-11-26")[0]["kind"] == "third_party"
    paste = convert_sources.records("nvidia-smi output of driver 565.57.01 in public repositories", "r", "2026-11-26")
    assert paste[0]["kind"] == "artifact"  # the driver's own report, wherever it was pasted


def test_conversion_is_idempotent_on_converted_data():
    doc = json.loads((default_data_dir() / "torch.json").read_text())
    before = json.dumps(doc)
    assert not sum(convert_sources.convert_file(doc, lambda text: "2026-11-26").values())
    assert json.dumps(doc) == before
