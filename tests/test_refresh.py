"""Tests of scripts/refresh_matrix.py's pure functions on captured real pip reports and wheel members."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
REPORTS = Path(__file__).parent / "data" / "pip_reports"

_spec = importlib.util.spec_from_file_location("refresh_matrix", ROOT / "scripts" / "refresh_matrix.py")
refresh = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(refresh)


def report(name: str) -> dict:
    return json.loads((REPORTS / f"{name}.json").read_text())


def test_parse_report_reads_the_installed_wheel():
    info = refresh.parse_report(report("torch-2.5.1"))
    assert info["name"] == "torch"
    assert info["version"] == "2.5.1"
    assert info["requires_python"] == ">=3.8.0"
    assert info["url"].endswith(".whl")


def test_parse_report_refuses_an_empty_report():
    with pytest.raises(ValueError):
        refresh.parse_report({"install": []})


def test_torch_251_default_wheel_pins_cuda_124_and_cudnn_9170():
    pins = refresh.nvidia_pins(refresh.parse_report(report("torch-2.5.1"))["requires_dist"])
    assert 'nvidia-cudnn-cu12==9.1.0.70; platform_system == "Linux" and platform_machine == "x86_64"' in pins
    assert all(p.startswith("nvidia-") for p in pins)
    assert not any("triton" in p for p in pins)
    assert refresh.cuda_of_pins(pins) == ("12.4", "9.1.0.70")


def test_torch_1121_default_wheel_has_no_pins_and_cuda_comes_from_version_py():
    info = refresh.parse_report(report("torch-1.12.1"))
    assert refresh.nvidia_pins(info["requires_dist"]) == []
    text = (REPORTS / "torch-1.12.1-version.py.txt").read_text()
    assert refresh.parse_torch_version_py(text) == {"version": "1.12.1+cu102", "cuda": "10.2"}


def test_tensorflow_and_cuda_extra_pins_lose_the_extra_marker():
    info = refresh.parse_report(report("tensorflow-and-cuda-2.15.0"))
    assert refresh.nvidia_pins(info["requires_dist"]) == []  # nothing outside the extra
    pins = refresh.nvidia_pins(info["requires_dist"], extra="and-cuda")
    assert "nvidia-cublas-cu12==12.2.5.6" in pins
    assert not any("extra" in p for p in pins)
    assert refresh.cuda_of_pins(pins)[1] is not None


def test_tensorflow_build_info_gives_cuda_and_sass_ptx_split():
    text = (REPORTS / "tensorflow-2.15.0-build_info.py.txt").read_text()
    info = refresh.parse_tf_build_info(text)
    assert info["cuda"] == "12.2"
    assert info["cudnn"] == "8"
    assert info["archs"] == ["5.0", "6.0", "7.0", "7.5"]
    assert info["ptx"] == ["8.0"]


def test_jax_plugin_with_cuda_pins_and_pjrt_companion():
    info = refresh.parse_report(report("jax-cuda12-plugin-with-cuda-0.5.3"))
    pins = refresh.nvidia_pins(info["requires_dist"], extra="with-cuda")
    assert pins and all(p.startswith("nvidia-") and "extra" not in p for p in pins)
    assert refresh.pinned_version(info["requires_dist"], "jax-cuda12-pjrt") == "0.5.3"


def test_torchvision_pins_its_torch():
    info = refresh.parse_report(report("torchvision-0.20.1"))
    assert refresh.pinned_version(info["requires_dist"], "torch") == "2.5.1"


def test_marker_with_environment_and_extra_keeps_the_environment():
    line = 'nvidia-nccl-cu12==2.21.5; platform_system == "Linux" and extra == "cuda"'
    assert refresh.nvidia_pins([line], extra="cuda") == ['nvidia-nccl-cu12==2.21.5; platform_system == "Linux"']
    assert refresh.nvidia_pins([line]) == []


def test_parse_index_versions():
    text = "torch (2.5.1)\nAvailable versions: 2.5.1, 2.5.0, 2.4.1\n"
    assert refresh.parse_index_versions(text) == ["2.5.1", "2.5.0", "2.4.1"]
    assert refresh.parse_index_versions("ERROR: No matching distribution") == []


def test_python_support_inverts_per_python_listings():
    table = refresh.python_support({"3.9": {"2.5.1"}, "3.10": {"2.5.1", "2.6.0"}, "3.8": {"2.4.0"}})
    assert table == {"2.4.0": ["3.8"], "2.5.1": ["3.9", "3.10"], "2.6.0": ["3.10"]}


PUBLISHED = {
    "name": "torch", "version": "2.5.1", "python": ["3.9"], "source": "RELEASE.md",
    "variants": [
        {"name": "cu121", "source": "build_cuda.sh", "cuda": "12.1", "archs": ["9.0"], "pypi_default": True},
        {"name": "cu124", "source": "build_cuda.sh", "cuda": "12.4", "cudnn": "9.1.0.70", "archs": ["9.0"]},
    ],
}


def test_merge_moves_the_default_and_keeps_published_archs():
    pins = refresh.nvidia_pins(refresh.parse_report(report("torch-2.5.1"))["requires_dist"])
    art = {"name": "torch", "version": "2.5.1", "python": ["3.9", "3.10"], "source": "pip",
           "companions": {"torchvision": "0.20.1"},
           "default": {"name": "cu124", "cuda": "12.4", "cudnn": "9.1.0.70", "nvidia_pins": pins,
                       "source": "artifact: wheel metadata"}}
    row = refresh.merge_release(PUBLISHED, art)
    by = {v["name"]: v for v in row["variants"]}
    assert by["cu124"]["pypi_default"] is True
    assert "pypi_default" not in by["cu121"]
    assert by["cu124"]["archs"] == ["9.0"]  # published, kept
    assert by["cu124"]["nvidia_pins"] == pins  # artifact, merged
    assert by["cu124"]["source"] == "build_cuda.sh; artifact: wheel metadata"
    assert row["python"] == ["3.9", "3.10"]
    assert row["companions"] == {"torchvision": "0.20.1"}
    assert PUBLISHED["variants"][0]["pypi_default"] is True  # input untouched


def test_merge_of_a_new_release_says_the_published_part_is_missing():
    row = refresh.merge_release(None, {"name": "torch", "version": "9.0.0", "python": ["3.14"], "source": "pip"})
    assert row["variants"] == [] and row["notes"]


def test_diff_reports_new_releases_and_changed_fields():
    old = {"releases": [PUBLISHED]}
    changed = json.loads(json.dumps(PUBLISHED))
    changed["variants"][1]["cudnn"] = "9.1.1"
    new = {"releases": [changed, {**PUBLISHED, "version": "2.6.0"}]}
    lines = refresh.diff_files(old, new)
    assert "+ 2.6.0 (new release)" in lines
    assert "~ 2.5.1 variants[cu124].cudnn: '9.1.0.70' -> '9.1.1'" in lines
    assert refresh.diff_files(old, old) == []


def test_merge_file_sorts_newest_first_and_keeps_unlisted_rows():
    doc = refresh.merge_file({"releases": [PUBLISHED]},
                             [{"name": "torch", "version": "2.10.0", "python": [], "source": "pip"}])
    assert [r["version"] for r in doc["releases"]] == ["2.10.0", "2.5.1"]


def test_shipped_framework_files_validate_and_name_real_cuda_releases():
    from cudamatrix.matrix.data import FrameworkFile
    from cudamatrix.schema import normalize_cc, validate

    known = {"10.2", "11.0", "11.2", "11.3", "11.6", "11.7", "11.8", "12.1", "12.2", "12.3", "12.4",
             "12.5", "12.6", "12.8", "12.9", "13.0", "13.2"}
    for name in ("torch", "tensorflow", "jax"):
        raw = json.loads((ROOT / "data" / f"{name}.json").read_text())
        validate(FrameworkFile, raw, f"{name}.json")
        for rel in raw["releases"]:
            for v in rel["variants"]:
                if v.get("cuda"):
                    major_minor = ".".join(v["cuda"].split(".")[:2])
                    assert major_minor in known, (name, rel["version"], v["name"], v["cuda"])
                for cc in v.get("archs", []) + v.get("ptx", []):
                    normalize_cc(cc)
    torch = {r["version"]: r for r in json.loads((ROOT / "data" / "torch.json").read_text())["releases"]}
    variants = {v["name"]: v for v in torch["2.5.1"]["variants"]}
    assert {"cpu", "cu118", "cu121", "cu124"} <= set(variants)
    assert [n for n, v in variants.items() if v.get("pypi_default")] == ["cu124"]
    for n in ("cu118", "cu121", "cu124"):
        assert variants[n]["cuda"] and variants[n]["cudnn"] and variants[n]["archs"]


def test_arch_specific_targets_are_written_as_the_data_writes_them():
    # TensorFlow's build_info lists "sm_90a"; the matrix writes arch-specific targets as "9.0a"
    assert [refresh._cc(t) for t in ("sm_60", "sm_90a", "compute_90", "sm_100f", "sm_120")] == \
        ["6.0", "9.0a", "9.0", "10.0f", "12.0"]
