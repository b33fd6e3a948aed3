"""Tests of scripts/refresh_matrix.py's pure functions on captured real pip reports and wheel members."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.resolve().parent.parent
REPORTS = Path(__file__).parent.parent / "data" / "pip_reports"

_spec = importlib.util.spec_from_file_location("refresh_matrix", ROOT / "scripts" / "refresh_matrix.py")
refresh = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(refresh)

from packaging.version import Version  # noqa: E402

from cudamatrix.matrix import discover  # noqa: E402
from cudamatrix.matrix.index import parse_pip_config  # noqa: E402
from cudamatrix.matrix.merge import inherit  # noqa: E402


def report(name: str) -> dict:
    return json.loads((REPORTS / f"{name}.json").read_text())


def requires(name: str) -> list[str]:
    """Requires-Dist of a captured real ``pip install --dry-run --report`` (the wheel's METADATA)."""
    return report(name)["install"][0]["metadata"]["requires_dist"]


def test_torch_251_default_wheel_pins_cuda_124_and_cudnn_9170():
    pins = discover.cuda_pins(requires("torch-2.5.1"))
    assert 'nvidia-cudnn-cu12==9.1.0.70; platform_system == "Linux" and platform_machine == "x86_64"' in pins
    assert all(p.startswith("nvidia-") for p in pins)
    assert not any("triton" in p for p in pins)
    assert (discover.cuda_of(pins), discover.cudnn_of(pins)) == ("12.4", "9.1.0.70")


def test_cuda_toolkit_and_cuda_bindings_pins_are_kept_and_give_the_cuda_version():
    # the Requires-Dist lines of the torch 2.15.0 manylinux x86_64 wheel's METADATA
    lines = ['cuda-toolkit[cublas,cudart,cufft]==13.2.2; platform_system == "Linux"',
             'cuda-bindings<14,>=13.0.3; platform_system == "Linux" and python_version < "3.15"',
             'nvidia-cudnn-cu13==9.26.0.51; platform_system == "Linux"', 'triton~=3.9.0',
             'optree>=0.13.0; extra == "optree"']
    pins = discover.cuda_pins(lines)
    assert pins[0] == 'cuda-toolkit[cublas,cudart,cufft]==13.2.2; platform_system == "Linux"'
    assert any(p.startswith("cuda-bindings<14,>=13.0.3") for p in pins)
    assert len(pins) == 3
    assert discover.cuda_of(pins) == "13.2" and discover.cudnn_of(pins) == "9.26.0.51"


def test_torch_1121_default_wheel_has_no_pins_and_cuda_comes_from_version_py():
    assert discover.cuda_pins(requires("torch-1.12.1")) == []
    text = (REPORTS / "torch-1.12.1-version.py.txt").read_text()
    assert discover.parse_torch_version_py(text) == {"version": "1.12.1+cu102", "cuda": "10.2"}


def test_tensorflow_and_cuda_extra_pins_lose_the_extra_marker():
    lines = requires("tensorflow-and-cuda-2.15.0")
    assert discover.cuda_pins(lines) == []  # nothing outside the extra
    pins = discover.cuda_pins(lines, extra="and-cuda")
    assert "nvidia-cublas-cu12==12.2.5.6" in pins
    assert not any("extra" in p for p in pins)
    assert discover.cudnn_of(pins) is not None


def test_tensorflow_build_info_gives_cuda_and_sass_ptx_split():
    text = (REPORTS / "tensorflow-2.15.0-build_info.py.txt").read_text()
    info = discover.parse_tf_build_info(text)
    assert info["cuda"] == "12.2"
    assert info["cudnn"] == "8"
    assert info["archs"] == ["5.0", "6.0", "7.0", "7.5"]
    assert info["ptx"] == ["8.0"]


def test_jax_plugin_with_cuda_floors_and_pjrt_companion():
    lines = requires("jax-cuda12-plugin-with-cuda-0.5.3")
    pins = discover.cuda_pins(lines, extra="with-cuda")
    assert pins and all(p.startswith("nvidia-") and "extra" not in p for p in pins)
    assert str(discover.requirement_of(lines, "jax-cuda12-pjrt")) == "==0.5.3"
    assert discover.cuda_of(pins) == "12.1"  # the runtime's floor


def test_torchvision_pins_its_torch():
    spec = discover.requirement_of(requires("torchvision-0.20.1"), "torch")
    assert spec.contains("2.5.1") and not spec.contains("2.5.0")


def test_pairing_by_specifier_whatever_its_form():
    from packaging.specifiers import SpecifierSet

    # torchvision 0.29.0 pins torch==2.14.0; 0.29.1 and 0.29.2 ask torch>=2.14.0 (their METADATA on the index)
    comps = {"0.29.0": SpecifierSet("==2.14.0"), "0.29.1": SpecifierSet(">=2.14.0"),
             "0.29.2": SpecifierSet(">=2.14.0"), "0.28.0": SpecifierSet("==2.13.0")}
    got = discover.pair(["2.15.0", "2.14.1", "2.14.0", "2.13.0", "2.12.0"], comps)
    assert {k: v[0] for k, v in got.items()} == {"2.15.0": "0.29.2", "2.14.1": "0.29.2", "2.14.0": "0.29.2",
                                                "2.13.0": "0.28.0"}
    # torchaudio 2.11.0 names no torch requirement at all: equal version only, and the rule says so
    got = discover.pair(["2.12.0", "2.11.0"], {"2.11.0": None, "2.10.0": SpecifierSet("==2.10.0")})
    assert list(got) == ["2.11.0"] and "no torch requirement" in got["2.11.0"][1]


def test_marker_with_environment_and_extra_keeps_the_environment():
    line = 'nvidia-nccl-cu12==2.21.5; platform_system == "Linux" and extra == "cuda"'
    assert discover.cuda_pins([line], extra="cuda") == ['nvidia-nccl-cu12==2.21.5; platform_system == "Linux"']
    assert discover.cuda_pins([line]) == []


def test_pythons_and_platforms_come_from_wheel_tags():
    from cudamatrix.matrix.index import parse_json_listing

    doc = {"files": [
        {"filename": "x-1.0-cp311-cp311-manylinux_2_28_x86_64.whl", "url": "a"},
        {"filename": "x-1.0-cp312-cp312-win_amd64.whl", "url": "b"},
        {"filename": "x-1.0-cp313-cp313t-macosx_11_0_arm64.whl", "url": "c"},
        {"filename": "x-1.0rc1-cp314-cp314-manylinux_2_28_aarch64.whl", "url": "d"},
        {"filename": "x-0.9-py3-none-any.whl", "url": "e", "requires-python": ">=3.12"},
        {"filename": "x-0.8-cp311-cp311-manylinux_2_28_x86_64.whl", "url": "f", "yanked": "broken"},
    ]}
    files = parse_json_listing("x", doc, "https://index.invalid/simple/x/")
    rels = discover.releases(files)
    assert sorted(str(v) for v in rels) == ["0.9", "1.0"]  # no pre-release, no yanked file
    pys, plats = discover.support(rels[Version("1.0")])
    assert pys == ["3.11", "3.12", "3.13"] and plats == ["linux_x86_64", "macos_arm64", "win_amd64"]
    assert discover.support(rels[Version("0.9")])[0] == ["3.12", "3.13", "3.14", "3.15"]
    assert files[0].url == "https://index.invalid/simple/x/a"


def test_pip_config_index_url_precedence():
    text = "global.index-url='https://g.invalid/simple'\nuser.index-url='https://u.invalid/simple'\n"
    assert parse_pip_config(text) == "https://u.invalid/simple"
    assert parse_pip_config(text + ":env:.index-url='https://e.invalid/simple'") == "https://e.invalid/simple"
    assert parse_pip_config("global.find-links='/x'\n") is None


def test_check_lists_only_releases_in_the_matrix_scope():
    assert refresh.missing_releases(["2.4.0", "2.6.0"], ["2.3.0", "2.4.0", "2.6.2", "2.19.1"]) == ["2.19.1", "2.6.2"]
    doc = {"releases": [{"version": "9.10.2"}, {"version": "9.28.0"}]}
    assert refresh.missing_cudnn(doc, ["9.28.1", "9.29.0", "9.1.0"], {"9.26.0.51", "9.10.2.21"}) == \
        ["9.29.0", "9.26.0"]


def test_new_patch_release_inherits_its_minor_and_says_so():
    base = {"name": "tensorflow", "version": "2.6.0", "python": [], "source": "s", "variants": [
        {"name": "gpu", "source": "s", "cuda": "11.2", "cudnn": "8.1", "archs": ["3.5"], "ptx": ["8.0"],
         "platforms": ["linux_x86_64", "win_amd64"]}]}
    new = {"name": "tensorflow", "version": "2.6.2", "python": ["3.9"], "source": "s", "variants": [
        {"name": "gpu", "source": "t", "cuda": "11.2", "cudnn": "8", "archs": ["3.5"]}]}
    row = inherit(new, [base])
    var = row["variants"][0]
    assert var["cudnn"] == "8.1" and "2.6.0" in var["inferred"]["cudnn"]
    assert var["ptx"] == ["8.0"] and "ptx" in var["inferred"]
    assert "cuda" not in var["inferred"] and "archs" not in var["inferred"]  # read from the wheel itself
    assert var["platforms"] == ["linux_x86_64", "win_amd64"] and any("platforms" in n for n in row["notes"])


def _src(states: str, kind: str = "first_party") -> list[dict]:
    return [{"states": states, "read": "2026-11-26", "kind": kind}]


PUBLISHED = {
    "name": "torch", "version": "2.5.1", "python": ["3.9"], "source": _src("RELEASE.md"),
    "variants": [
        {"name": "cu121", "source": _src("build_cuda.sh"), "cuda": "12.1", "archs": ["9.0"], "pypi_default": True},
        {"name": "cu124", "source": _src("build_cuda.sh"), "cuda": "12.4", "cudnn": "9.1.0.70", "archs": ["9.0"]},
    ],
}


def test_merge_moves_the_default_and_keeps_published_archs():
    pins = discover.cuda_pins(requires("torch-2.5.1"))
    art = {"name": "torch", "version": "2.5.1", "python": ["3.9", "3.10"], "source": _src("pip", "artifact"),
           "companions": {"torchvision": "0.20.1"},
           "default": {"name": "cu124", "cuda": "12.4", "cudnn": "9.1.0.70", "nvidia_pins": pins,
                       "source": _src("wheel metadata", "artifact")}}
    row = refresh.merge_release(PUBLISHED, art)
    by = {v["name"]: v for v in row["variants"]}
    assert by["cu124"]["pypi_default"] is True
    assert "pypi_default" not in by["cu121"]
    assert by["cu124"]["archs"] == ["9.0"]  # published, kept
    assert by["cu124"]["nvidia_pins"] == pins  # artifact, merged
    # the published record kept, the artifact's added after it (sources as data: one record each)
    assert by["cu124"]["source"] == _src("build_cuda.sh") + _src("wheel metadata", "artifact")
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


def test_infer_variants_fills_only_empty_fields_and_says_from_where():
    spec = importlib.util.spec_from_file_location("infer_variants", ROOT / "scripts" / "infer_variants.py")
    infer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(infer)
    doc = {"releases": [
        {"version": "2.9.0", "variants": [
            {"name": "cu126", "cuda": "12.6", "source": "s"},
            {"name": "cu128", "cuda": "12.8", "source": "s", "archs": ["8.0"],
             "nvidia_pins": ['nvidia-cudnn-cu12==9.10.2.21; platform_system == "Linux"']}]},
        {"version": "2.8.0", "variants": [{"name": "cu126", "cuda": "12.6", "source": "s", "cudnn": "9.5.1.17",
                                           "archs": ["5.0", "9.0"]}]},
        {"version": "2.7.0", "variants": [{"name": "cu128", "cuda": "12.8", "source": "s"},
                                          {"name": "cu129", "cuda": "12.9", "source": "s"}]},
    ]}
    infer.infer(doc)
    v29 = {v["name"]: v for v in doc["releases"][0]["variants"]}
    assert v29["cu126"]["cudnn"] == "9.10.2.21" and "cu128" in v29["cu126"]["inferred"]["cudnn"]  # rule 1
    assert v29["cu126"]["archs"] == ["5.0", "9.0"] and "2.8.0" in v29["cu126"]["inferred"]["archs"]  # rule 2
    assert "inferred" not in v29["cu128"] or "archs" not in v29["cu128"]["inferred"]  # sourced: untouched
    v27 = {v["name"]: v for v in doc["releases"][2]["variants"]}
    assert v27["cu128"]["archs"] == ["8.0"]  # nearest release with a sourced cu128
    assert "cudnn" not in v27["cu128"]  # 2.7 is before rule 1 applies and no release has a sourced cu128 cuDNN
    assert "cudnn" not in v27["cu129"] and "archs" not in v27["cu129"]  # no neighbour: stays empty


@pytest.mark.slow
def test_check_and_write_against_a_loopback_index(tmp_path, capsys):
    """The whole refresh on a real HTTP index (JSON listings, range reads): a torch release the data lacks is
    listed by --check, then written with its CUDA pins (cuda-toolkit and cuda-bindings kept) and its
    companions paired by their own requirement, whatever its form."""
    import shutil

    from support.localindex import LocalIndex, build_wheel

    wheels = tmp_path / "wheels"
    tag = "cp312-cp312-manylinux_2_28_x86_64"
    build_wheel(wheels, "torch", "2.99.0", tag=tag, requires_python=">=3.12", requires=[
        'cuda-toolkit[cublas,cudart]==13.2.2; platform_system == "Linux"',
        'cuda-bindings<14,>=13.0.3; platform_system == "Linux"',
        'nvidia-cudnn-cu13==9.26.0.51; platform_system == "Linux"', "filelock"])
    build_wheel(wheels, "torch", "2.99.0", tag="cp312-cp312-win_amd64", requires_python=">=3.12")
    build_wheel(wheels, "torchvision", "0.99.0", tag=tag, requires=["torch>=2.99.0", "numpy"])
    build_wheel(wheels, "torchaudio", "2.99.0", tag=tag)  # names no torch requirement at all
    data = tmp_path / "data"
    shutil.copytree(ROOT / "data", data)
    with LocalIndex(wheels, json_api=True, ranges=True) as index:
        url = index.url + "/simple"
        assert refresh.main(["torch", "--index-url", url, "--data", str(data), "--check"]) == 1
        assert "torch: 1 release(s) on the index not in the matrix: 2.99.0" in capsys.readouterr().out
        assert refresh.main(["torch", "--index-url", url, "--data", str(data), "--write"]) == 0
        assert any(s.startswith("/simple/torchvision") for s in index.served)
        assert refresh.main(["torch", "--index-url", url, "--data", str(data), "--check"]) == 0
    row = {r["version"]: r for r in json.loads((data / "torch.json").read_text())["releases"]}["2.99.0"]
    assert row["python"] == ["3.12"] and row["platforms"] == ["linux_x86_64", "win_amd64"]
    assert row["companions"] == {"torchvision": "0.99.0", "torchaudio": "2.99.0"}
    (var,) = row["variants"]
    assert var["name"] == "cu132" and var["pypi_default"] and var["cuda"] == "13.2" and var["cudnn"] == "9.26.0.51"
    assert var["nvidia_pins"][:2] == ['cuda-toolkit[cublas,cudart]==13.2.2; platform_system == "Linux"',
                                      'cuda-bindings<14,>=13.0.3; platform_system == "Linux"']
    assert any("torch-2.99.0-cp312-cp312-manylinux_2_28_x86_64.whl" in r["states"] for r in var["source"])
    assert any("no torch requirement" in n for n in row["notes"])


@pytest.mark.slow
def test_write_refuses_data_that_does_not_validate(tmp_path, capsys):
    import shutil

    from support.localindex import LocalIndex, build_wheel

    wheels = tmp_path / "wheels"
    # a CUDA runtime pin the CUDA table has no row for: the merged matrix fails lint, nothing is written
    build_wheel(wheels, "torch", "2.99.0", tag="cp312-cp312-manylinux_2_28_x86_64",
                requires=['nvidia-cuda-runtime-cu99==99.1.0; platform_system == "Linux"'])
    data = tmp_path / "data"
    shutil.copytree(ROOT / "data", data)
    before = (data / "torch.json").read_bytes()
    with LocalIndex(wheels, json_api=True, ranges=True) as index:
        assert refresh.main(["torch", "--index-url", index.url + "/simple", "--data", str(data), "--write"]) == 2
    assert (data / "torch.json").read_bytes() == before
    assert "not in the CUDA table" in capsys.readouterr().err


def test_arch_specific_targets_are_written_as_the_data_writes_them():
    # TensorFlow's build_info lists "sm_90a"; the matrix writes arch-specific targets as "9.0a"
    from cudamatrix.matrix.discover import cc_of

    assert [cc_of(t) for t in ("sm_60", "sm_90a", "compute_90", "sm_100f", "sm_120")] == \
        ["6.0", "9.0a", "9.0", "10.0f", "12.0"]


def _wheel(project: str, version: str, python: str, platform: str):
    from cudamatrix.matrix.index import IndexFile

    name = project.replace("-", "_")
    filename = f"{name}-{version}-{python}-{'none' if python == 'py3' else python}-{platform}.whl"
    return IndexFile(filename=filename, url=f"https://index.invalid/{filename}", project=project,
                     version=Version(version), pythons=(python,), abis=("none" if python == "py3" else python,),
                     platforms=(platform,))


class _JaxIndex:
    """An index holding jax 0.5.3 and 0.5.2, jaxlib 0.5.3 and 0.5.1, and the jax-cuda12-plugin 0.5.3 wheel whose
    METADATA is the captured real one; jax's own Requires-Dist lines are constructed inputs (the jaxlib pin)."""

    FILES = {"jax": [_wheel("jax", "0.5.3", "py3", "any"), _wheel("jax", "0.5.2", "py3", "any")],
             "jaxlib": [_wheel("jaxlib", "0.5.3", "cp312", "manylinux2014_x86_64"),
                        _wheel("jaxlib", "0.5.1", "cp311", "manylinux2014_x86_64")],
             "jax-cuda12-plugin": [_wheel("jax-cuda12-plugin", "0.5.3", "cp312", "manylinux2014_x86_64")]}
    REQUIRES = {("jax", "0.5.3"): ["jaxlib<=0.5.3,>=0.5.3"], ("jax", "0.5.2"): ["jaxlib<=0.5.2,>=0.5.1"],
                ("jax-cuda12-plugin", "0.5.3"): requires("jax-cuda12-plugin-with-cuda-0.5.3")}

    def project(self, name):
        return self.FILES.get(name, [])

    def metadata(self, f):
        from cudamatrix.matrix.index import Metadata

        return Metadata(f.project, str(f.version), None, self.REQUIRES[(f.project, str(f.version))], f.filename)


def test_jax_rows_pair_jaxlib_and_read_the_plugin_variant():
    """jaxlib pairs by jax's own pin (its version when admitted, else the newest admitted one); the cuda12 variant
    comes from the plugin wheel's with-cuda extra (cuda and cudnn are its floors) with the pjrt pin it declares."""
    rows = discover.jax_rows(_JaxIndex(), lambda _: None)
    assert [(r["version"], r.get("companions"), [v["name"] for v in r["variants"]]) for r in rows] == [
        ("0.5.3", {"jaxlib": "0.5.3"}, ["cpu", "cuda12"]), ("0.5.2", {"jaxlib": "0.5.1"}, ["cpu"])]
    assert (rows[0]["python"], rows[0]["platforms"]) == (["3.12"], ["linux_x86_64"])
    # no jaxlib 0.5.2 wheel: the jax wheel's own tags stand (py3, any: every Python the matrix knows, no platform)
    assert (rows[1]["python"], rows[1]["platforms"]) == (list(discover.PYTHONS), [])
    cuda12 = rows[0]["variants"][1]
    assert cuda12["extra_packages"] == ["jax-cuda12-plugin==0.5.3", "jax-cuda12-pjrt==0.5.3"]
    assert (cuda12["pip_extra"], cuda12["cuda"], cuda12["platforms"]) == ("cuda12", "12.1", ["linux_x86_64"])
    assert "nvidia-cudnn-cu12<10.0,>=9.1" in cuda12["nvidia_pins"]
    assert [r["kind"] for r in cuda12["source"]] == ["artifact"]
    assert cuda12["source"][0]["states"].endswith("(the with-cuda extra; cuda and cudnn are its floors)")
    assert discover.jax_rows(_JaxIndex(), lambda _: None, only={"0.5.2"})[0]["version"] == "0.5.2"


@pytest.mark.slow
def test_pip_default_index_comes_from_pip_itself_not_its_internals(tmp_path, monkeypatch):
    """With no PIP_INDEX_URL and no pip configuration, the default is the one pip's own --index-url help names."""
    import os
    import subprocess
    import sys

    from cudamatrix.matrix.index import parse_pip_help_default, pip_default_index

    text = ("  -i, --index-url <url>       Base URL of the Python Package Index (default\n"
            "                              https://index.invalid/simple). This should point to a\n")
    assert parse_pip_help_default(text) == "https://index.invalid/simple"
    assert parse_pip_help_default("  --extra-index-url <url>  Extra URLs (default none)\n") is None
    real = subprocess.run([sys.executable, "-m", "pip", "install", "--help"], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "200"}).stdout
    default = parse_pip_help_default(real)
    assert default and default.startswith("https://") and default.endswith("/simple")
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # pip reads no configuration file
    for var in ("PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"):
        monkeypatch.delenv(var, raising=False)
    assert pip_default_index() == default
    source = (ROOT / "cudamatrix" / "matrix" / "index.py").read_text()
    assert "pip._internal" not in source
