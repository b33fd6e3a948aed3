"""Tests of cudamatrix/matrix/data.py.

The matrix: it loads, it is consistent (lint), and bad data fails precisely.

Trust the shipped data, validate the user's.

The run time builds the shipped matrix straight from its JSON, without pydantic; these tests are where that
data is validated (as is ``scripts/refresh_matrix.py --write``). Data a user names (``--data``) is validated
with pydantic at run time. Nothing is pickled or cached on disk.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version
from support.fakes import run_cli
from support.snapshot import SNAPSHOT

from cudamatrix.errors import DataError
from cudamatrix.matrix.data import (
    FILES,
    OPTIONAL,
    Matrix,
    build_files,
    default_data_dir,
    load_matrix_from,
    validate_files,
)
from cudamatrix.matrix.load import load_matrix
from cudamatrix.matrix.query import find_gpu, lint
from cudamatrix.schema import build, cc_key, to_dict

# --- matrix --------------------------------------------------------------------------------------------------------

DATA = default_data_dir()


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """The CLI in this process; ``env`` replaces the environment for the call."""
    return run_cli(list(args), env=dict(os.environ) if env is None else env, text=True)


@pytest.fixture(scope="module")
def matrix():
    return load_matrix()


def test_shipped_matrix_is_clean(matrix):
    assert lint(matrix) == []


def test_every_row_is_sourced(matrix):
    rows = [*matrix.cuda.releases, *matrix.cuda.minor_compat, *matrix.cuda.driver_branches,
            *matrix.gpus.architectures, *matrix.gpus.gpus, *matrix.cudnn.releases, *matrix.advisories.advisories]
    for fam in ("torch", "tensorflow", "jax"):
        for rel in matrix.frameworks(fam):
            rows.append(rel)
            rows.extend(rel.variants)
    assert all(r.source.strip() for r in rows)
    assert len(rows) > 300


def test_cuda_table_covers_10_0_to_13(matrix):
    versions = {str(r.version) for r in matrix.cuda.releases}
    for v in ("10.0", "10.1", "10.2", "11.0", "11.8", "12.0", "12.4", "12.8", "13.0"):
        assert any(x == v or x.startswith(v + ".") for x in versions), v
    for major in (10, 11, 12, 13):
        rels = sorted((r for r in matrix.cuda.releases if r.version.major == major and r.linux_min_driver),
                      key=lambda r: r.version)
        drivers = [tuple(int(p) for p in r.linux_min_driver.split(".")) for r in rels]
        assert drivers == sorted(drivers), f"minimum drivers decrease within CUDA {major}"
    assert {m.cuda_major for m in matrix.cuda.minor_compat} >= {11, 12, 13}
    branches = {b.branch: str(b.max_cuda) for b in matrix.cuda.driver_branches}
    assert branches.get(565) == "12.7"  # a CUDA version no toolkit was released for


def test_gpus_known_and_compiled_for(matrix):
    assert len(matrix.gpus.gpus) >= 90
    toolkit_ccs = {c.rstrip("af") for r in matrix.cuda.releases for c in r.compute_capabilities}
    for gpu in matrix.gpus.gpus:
        assert gpu.compute_capability.rstrip("af") in toolkit_ccs, gpu.name
    assert find_gpu(matrix, "Tesla T4").compute_capability == "7.5"
    assert find_gpu(matrix, "NVIDIA H100 80GB HBM3").compute_capability == "9.0"
    assert find_gpu(matrix, "NVIDIA GeForce RTX 5090").compute_capability == "12.0"
    kepler = next(a for a in matrix.gpus.architectures if a.name == "Kepler")
    assert kepler.last_driver_branch == 470


def test_cudnn_encoding_and_drops(matrix):
    assert any(r.version.major == 7 for r in matrix.cudnn.releases)
    assert any(r.version.major == 9 for r in matrix.cudnn.releases)
    newest = max(matrix.cudnn.releases, key=lambda r: r.version)
    old = [r for r in matrix.cudnn.releases if Version("9.0") <= r.version < Version("9.11")]
    # cuDNN 9.11 dropped Maxwell, Pascal and Volta
    if newest.version >= Version("9.11"):
        assert min(newest.compute_capabilities, key=cc_key) == "7.5"
    assert old and all("6.0" in r.compute_capabilities for r in old)
    assert {r.soname for r in matrix.cudnn.releases} >= {"libcudnn.so.7", "libcudnn.so.8", "libcudnn.so.9"}


def test_framework_rows(matrix):
    versions = {str(r.version) for r in matrix.frameworks("torch")}
    assert {"1.12.0", "2.0.0", "2.5.1"} <= versions
    for fam in ("torch", "tensorflow", "jax"):
        for rel in matrix.frameworks(fam):
            for var in rel.variants:
                for pin in var.nvidia_pins:
                    Requirement(pin)  # parses
                if var.cuda is not None:
                    assert any(r.version.release[:2] == var.cuda.release[:2] for r in matrix.cuda.releases)
    tf = {str(r.version) for r in matrix.frameworks("tensorflow")}
    assert "2.4.0" in tf and "2.15.0" in tf


@pytest.mark.slow
def test_show_torch_251_json():
    out = cli("matrix", "show", "torch", "2.5.1", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert set(doc) == {"schema_version", "command", "status", "exit_code", "data", "errors"}
    (row,) = doc["data"]["rows"]
    variants = {v["name"]: v for v in row["variants"]}
    assert {"cu118", "cu121", "cu124"} <= set(variants)
    assert variants["cu121"]["cuda"] == "12.1"
    assert variants["cu124"]["cudnn"].startswith("9.1")
    assert "8.6" in variants["cu124"]["archs"] and "9.0" in variants["cu124"]["archs"]
    for key in ("name", "index_url", "cuda", "cudnn", "archs", "ptx", "nvidia_pins", "pypi_default"):
        assert key in variants["cu118"]


@pytest.mark.slow
def test_show_gpu_t4():
    out = cli("matrix", "show", "gpu", "Tesla T4")
    assert out.returncode == 0, out.stderr
    assert "7.5" in out.stdout and "Turing" in out.stdout
    doc = json.loads(cli("matrix", "show", "gpu", "Tesla T4", "--json").stdout)
    assert doc["data"]["rows"][0]["compute_capability"] == "7.5"


@pytest.mark.slow
def test_show_cuda_and_cudnn_json():
    doc = json.loads(cli("matrix", "show", "cuda", "12.4", "--json").stdout)
    row = doc["data"]["rows"][0]
    assert row["version"].startswith("12.4") and row["linux_min_driver"] and "windows_min_driver" in row
    doc = json.loads(cli("matrix", "show", "cudnn", "--json").stdout)
    assert all({"version", "cuda_versions", "compute_capabilities"} <= set(r) for r in doc["data"]["rows"])


@pytest.mark.slow
def test_unknown_family_is_usage_error():
    out = cli("matrix", "show", "pytorch")
    assert out.returncode == 2
    assert "unknown matrix family" in out.stderr and "Traceback" not in out.stderr


@pytest.fixture()
def data_copy(tmp_path: Path) -> Path:
    dst = tmp_path / "data"
    shutil.copytree(DATA, dst)
    return dst


def _edit(path: Path, fn) -> None:
    doc = json.loads(path.read_text())
    fn(doc)
    path.write_text(json.dumps(doc))


@pytest.mark.slow
@pytest.mark.parametrize("mutate, expected", [
    (lambda d: d["releases"][2]["variants"][0].__setitem__("bogus", 1), "torch.json: releases[2].variants[0].bogus: unknown key"),
    (lambda d: d["releases"][0].__setitem__("version", 2.5), "torch.json: releases[0].version"),
    (lambda d: d["releases"][1]["variants"][0].__setitem__("archs", ["sm_x"]), "torch.json: releases[1].variants[0].archs[0]"),
])
def test_broken_data_names_file_and_path(data_copy: Path, mutate, expected):
    _edit(data_copy / "torch.json", mutate)
    out = cli("matrix", "validate", str(data_copy))
    assert out.returncode == 2
    assert expected in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.slow
def test_invalid_json_and_missing_file(data_copy: Path):
    (data_copy / "gpus.json").write_text("{ not json")
    out = cli("matrix", "validate", str(data_copy))
    assert out.returncode == 2 and "gpus.json: not valid JSON at line 1" in out.stderr
    (data_copy / "gpus.json").unlink()
    out = cli("matrix", "validate", str(data_copy), "--json")
    assert out.returncode == 2
    doc = json.loads(out.stdout)
    assert doc["status"] == "usage_error" and "gpus.json" in doc["errors"][0]["message"]


@pytest.mark.slow
def test_lint_finds_duplicates_and_decreasing_drivers(data_copy: Path):
    def dup(d):
        d["releases"].append(d["releases"][0])
    _edit(data_copy / "cudnn.json", dup)

    def decrease(d):
        rows = [r for r in d["releases"] if r["version"].startswith("12.") and r.get("linux_min_driver")]
        rows[-1]["linux_min_driver"] = "400.1"
    _edit(data_copy / "cuda.json", decrease)
    problems = lint(load_matrix_from(data_copy))
    assert any("duplicate row" in p for p in problems)
    assert any("decreases within CUDA 12" in p for p in problems)
    out = cli("matrix", "validate", str(data_copy))
    assert out.returncode == 2 and "duplicate row" in out.stderr


@pytest.mark.slow
def test_validate_shipped_ok():
    out = cli("matrix", "validate", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["data"]["problems"] == []


PLUGIN_REQS = ["jax-cuda12-pjrt==99.0.0",
               'nvidia-cuda-runtime-cu12>=12.1.105; sys_platform == "linux" and extra == "with-cuda"',
               'nvidia-cudnn-cu12<10.0,>=9.10.2.21; sys_platform == "linux" and extra == "with-cuda"']


@pytest.fixture(scope="module")
def jax_index(tmp_path_factory):
    """An https index on loopback serving jax 99.0.0 (a release the shipped data lacks): the JSON Simple API,
    PEP 658 metadata for the plugin, range requests for the rest."""
    from support.localindex import LocalIndex, build_wheel

    folder = tmp_path_factory.mktemp("jaxindex") / "wheels"
    build_wheel(folder, "jax", "99.0.0", requires=["jaxlib<=99.0.0,>=99.0.0", "numpy>=2"],
                requires_python=">=3.12")
    build_wheel(folder, "jaxlib", "99.0.0", tag="cp312-cp312-manylinux_2_27_x86_64")
    build_wheel(folder, "jaxlib", "99.0.0", tag="cp313-cp313-manylinux_2_27_aarch64")
    build_wheel(folder, "jax_cuda12_plugin", "99.0.0", tag="cp312-cp312-manylinux_2_27_x86_64",
                requires=PLUGIN_REQS)
    with LocalIndex(folder, json_api=True, metadata_for=("jax-cuda12-plugin",), ranges=True, tls=True) as index:
        yield index


def overlay_env(tmp_path: Path, index) -> dict:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update({"XDG_CACHE_HOME": str(tmp_path / "cache"), "REQUESTS_CA_BUNDLE": str(index.cafile),
                "PIP_CONFIG_FILE": os.devnull})
    return env


@pytest.mark.slow
def test_update_reads_a_new_release_and_show_marks_it(tmp_path, jax_index):
    import os
    import stat

    env = overlay_env(tmp_path, jax_index)
    before = cli("matrix", "show", "jax", "99.0.0", "--json", env=env)
    assert json.loads(before.stdout)["data"]["rows"] == []
    out = cli("matrix", "update", "--mirror", jax_index.url + "/simple", "--json", env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    data = json.loads(out.stdout)["data"]
    assert data["added"] == {"torch": [], "tensorflow": [], "jax": ["99.0.0"]}
    path = Path(data["path"])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert not [p for p in path.parent.iterdir() if p.name != "overlay.json"]  # no temp file left
    # the listing was asked as JSON; the plugin's METADATA came from its .metadata file, jax's by ranges
    assert any(s.endswith(".whl.metadata") for s in jax_index.served)
    assert not any(s.startswith("/files/jax-99") and s.endswith(".metadata") for s in jax_index.served)

    shown = json.loads(cli("matrix", "show", "jax", "99.0.0", "--json", env=env).stdout)["data"]
    row = shown["rows"][0]
    assert row["overlay"] == data["created"] and shown["overlay"]["releases"]["jax"] == ["99.0.0"]
    assert row["python"] == ["3.12", "3.13"] and row["platforms"] == ["linux_aarch64", "linux_x86_64"]
    assert row["companions"] == {"jaxlib": "99.0.0"}
    cuda12 = {v["name"]: v for v in row["variants"]}["cuda12"]
    assert cuda12["cudnn"] == "9.10.2.21" and cuda12["cuda"] == "12.1"
    assert cuda12["extra_packages"] == ["jax-cuda12-plugin==99.0.0", "jax-cuda12-pjrt==99.0.0"]
    assert any("jax_cuda12_plugin-99.0.0" in r["states"] and r["kind"] == "artifact" for r in cuda12["source"])
    human = cli("matrix", "show", "jax", "99.0.0", env=env).stdout
    assert "(overlay " in human
    # a shipped release is never replaced by the overlay
    assert "overlay" not in json.loads(cli("matrix", "show", "jax", "0.10.2", "--json", env=env).stdout)["data"]["rows"][0]

    # tampered rows: the hash no longer matches, the overlay is ignored with a note
    doc = json.loads(path.read_text())
    doc["families"]["jax"][0]["variants"][1]["cudnn"] = "7.0"
    path.write_text(json.dumps(doc))
    os.chmod(path, 0o600)
    shown = json.loads(cli("matrix", "show", "jax", "99.0.0", "--json", env=env).stdout)["data"]
    assert shown["rows"] == [] and "sha256" in shown["overlay"]["ignored"]
    # readable by others: ignored as well
    doc["families"]["jax"][0]["variants"][1]["cudnn"] = "9.10.2.21"
    path.write_text(json.dumps(doc))
    os.chmod(path, 0o644)
    shown = json.loads(cli("matrix", "show", "jax", "99.0.0", "--json", env=env).stdout)["data"]
    assert shown["rows"] == [] and "open to other users" in shown["overlay"]["ignored"]


@pytest.mark.slow
def test_update_refuses_http_and_reports_offline(tmp_path, jax_index):
    import socket

    env = overlay_env(tmp_path, jax_index)
    out = cli("matrix", "update", "--mirror", "http://127.0.0.1:9/simple", "--json", env=env)
    assert out.returncode == 2 and "not an https URL" in out.stdout
    with socket.socket() as s:  # a port nothing listens on: the index is unreachable
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = cli("matrix", "update", "--mirror", f"https://127.0.0.1:{port}/simple", env=env)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "shipped matrix" in out.stderr
    assert not (tmp_path / "cache" / "cudamatrix" / "overlay").exists()


@pytest.mark.slow
def test_update_refuses_an_open_overlay_folder(tmp_path, jax_index):
    env = overlay_env(tmp_path, jax_index)
    folder = tmp_path / "cache" / "cudamatrix" / "overlay"
    folder.mkdir(parents=True, mode=0o755)
    folder.chmod(0o755)
    out = cli("matrix", "update", "--mirror", jax_index.url + "/simple", env=env)
    assert out.returncode == 2 and "open to other users" in out.stderr
    assert list(folder.iterdir()) == []


PRINTED = [
    # names as nvidia-smi / NVML print them (fixtures in the shared set; laptop and Jetson names from the boards)
    ("NVIDIA GeForce RTX 4050 Laptop GPU", "GeForce RTX 4050", "8.9"),
    ("NVIDIA GeForce RTX 3050", "GeForce RTX 3050", "8.6"),
    ("NVIDIA GeForce GTX 950", "GeForce GTX 950", "5.2"),
    ("Quadro K2200", "Quadro K2200", "5.0"),
    ("Quadro K6000", "Quadro K6000", "3.5"),
    ("Tesla K10", "Tesla K10", "3.0"),
    ("GeForce GTX 780 Ti", "GeForce GTX 780 Ti", "3.5"),
    ("Tesla V100-PCIE-16GB", "Tesla V100 PCIe 16GB", "7.0"),
    ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 SXM4 80GB", "8.0"),
    ("GeForce RTX 207...", "GeForce RTX 2070", "7.5"),  # nvidia-smi's table cut it (WSL fixture)
    ("NVIDIA GeForce RTX 3060 ...", "GeForce RTX 3060", "8.6"),
    ("NVIDIA GeForce RTX 2080 with Max-Q Design", "GeForce RTX 2080", "7.5"),
    ("Orin (nvgpu)", "Jetson AGX Orin", "8.7"),
    ("NVIDIA Tegra X1", "Jetson Nano", "5.3"),
]


@pytest.mark.parametrize("printed, model, cc", PRINTED)
def test_find_gpu_by_printed_names(matrix, printed, model, cc):
    gpu = find_gpu(matrix, printed)
    assert gpu is not None and gpu.name == model and gpu.compute_capability == cc


def test_find_gpu_refuses_ambiguous_or_unknown_names(matrix):
    assert find_gpu(matrix, "NVIDIA RTX ...") is None  # a cut name that stands for many compute capabilities
    assert find_gpu(matrix, "NVIDIA Foo 9000") is None


def test_the_shipped_gpu_tables_json_rows_name_what_the_matrix_names(matrix):
    """detect --from reads gpus.json as JSON (gpunames.shipped), the other commands the Matrix's records: the same
    rules over both give the same model, compute capability and source line for every name and alias of the table,
    and for each name as nvidia-smi prints it suffixed or cut."""
    from cudamatrix.matrix import data, gpunames, shipped

    table = gpunames.shipped()
    names = [n for g in matrix.gpus.gpus for n in (g.name, *g.aliases)]
    printed = [p for p, _, _ in PRINTED] + ["NVIDIA RTX ...", "NVIDIA Foo 9000", "Tesla T4-PCIE-16GB", "A100 8...",
                                            "NVIDIA H100 80GB HBM3", "rtx 4090 laptop gpu"]
    for name in names + [n + "..." for n in names] + [n[:-2] + "..." for n in names] + printed:
        gpu, row = find_gpu(matrix, name), table.find(name)
        assert (gpu is None) == (row is None), name
        if gpu is not None:
            assert (row["name"], row["compute_capability"], shipped.source_line(row["source"])) == \
                (gpu.name, gpu.compute_capability, str(gpu.source)), name
    assert len(table.rows) == len(matrix.gpus.gpus) > 100
    assert shipped.data_dir() == str(data.default_data_dir())


def test_gpu_names_are_normalised_as_the_pattern_would():
    r"""norm() joins words by str methods: the same text as re.sub(r"[\s_\-]+", " ", name).strip() after the vendor
    prefixes, for every character (Unicode spaces too)."""
    import re

    from cudamatrix.matrix.gpunames import norm

    def by_pattern(name):
        s = name.strip().lower()
        while s.startswith(("nvidia ", "geforce ", "tesla ", "quadro ")):
            s = s.split(" ", 1)[1]
        return re.sub(r"[\s_\-]+", " ", s).strip()

    texts = ["NVIDIA GeForce RTX 4090", "Tesla_V100-SXM2__32GB", " a\u3000b\x1c-c\x85 ", "-_-", "", "GeForce  GTX-1080"]
    texts += [f"x{chr(c)}y{chr(c)}" for c in range(0x3100) if not 0xd800 <= c <= 0xdfff]
    assert [norm(t) for t in texts] == [by_pattern(t) for t in texts]


def test_jetson_is_sent_to_jetpack_wheels(matrix):
    adv = [a for a in matrix.advisories.advisories if "8.7" in a.gpu_compute_capabilities]
    assert adv and "JetPack" in adv[0].fix and [str(r) for r in adv[0].affects] == ["torch"]
    orin = find_gpu(matrix, "Orin (nvgpu)")
    assert orin.segment == "jetson"
    from cudamatrix.matrix.query import jetpack_only

    assert jetpack_only(matrix, "torch", orin.compute_capability) is adv[0]
    assert jetpack_only(matrix, "torch", "8.6") is None and jetpack_only(matrix, "jax", "8.7") is None
    # PyTorch's own aarch64 build of the newest release carries no sm_87 SASS
    torch = {str(r.version): r for r in matrix.frameworks("torch")}["2.15.0"]
    assert all("8.7" not in v.archs for v in torch.variants)


# --- GPU models as people type them ------------------------------------------------------------------------
# compute capabilities from NVIDIA's "CUDA GPU Compute Capability" page (https://developer.nvidia.com/cuda-gpus):
# GeForce RTX 5090 12.0, RTX 4090 8.9, RTX 3090 8.6, A100 8.0, H100 9.0, T4 7.5, Quadro RTX 4000 7.5, RTX 4000
# Ada 8.9; and its legacy page (https://developer.nvidia.com/cuda-legacy-gpus): V100 7.0, P100 6.0, GTX 1080 6.1
@pytest.mark.parametrize("typed, model, cc", [
    ("4090", "GeForce RTX 4090", "8.9"), ("rtx4090", "GeForce RTX 4090", "8.9"),
    ("RTX 4090", "GeForce RTX 4090", "8.9"), ("rtx-4090", "GeForce RTX 4090", "8.9"),
    ("3090", "GeForce RTX 3090", "8.6"), ("5090", "GeForce RTX 5090", "12.0"),
    ("1080 Ti", "GeForce GTX 1080 Ti", "6.1"), ("gtx1080", "GeForce GTX 1080", "6.1"),
    ("a100", None, "8.0"), ("h100", None, "9.0"), ("t4", "NVIDIA T4", "7.5"), ("v100", None, "7.0"),
    ("p100", None, "6.0"), ("A100-SXM4-80GB", "NVIDIA A100 SXM4 80GB", "8.0"),
])
def test_lookup_gpu_reads_model_numbers(matrix, typed, model, cc):
    from cudamatrix.matrix.query import lookup_gpu

    gpu = lookup_gpu(matrix, typed)
    assert gpu is not None and gpu.compute_capability == cc and (model is None or gpu.name == model)


def test_lookup_gpu_refuses_what_names_no_single_model(matrix):
    from cudamatrix.matrix.query import lookup_gpu

    # "4000": Quadro RTX 4000 (7.5) and RTX 4000 Ada (8.9); a compute capability is not a model
    assert [lookup_gpu(matrix, t) for t in ("4000", "8.6", "sm_86", "", "rtx9999")] == [None] * 5
    aliases = {a for g in matrix.gpus.gpus for a in g.aliases}
    assert {"4090", "rtx4090", "3090", "5090", "RTX 4090"} <= aliases  # data, not code


# --- Jetson drivers --------------------------------------------------------------------------------------
def test_jetpack_6_driver_reports_cuda_12_6_and_names_nvidias_index(matrix):
    from cudamatrix.matrix.query import driver_max_cuda, jetpack_for_driver

    # JetPack 6.1 incorporates CUDA 12.6 (https://pytorch.org/TensorRT/getting_started/jetpack.html); nvidia-smi on
    # a JetPack 6.2.1 Orin prints Driver Version 540.4.0, CUDA Version 12.6 (jetson-containers#1403); NVIDIA names
    # https://pypi.jetson-ai-lab.dev/jp6/cu126 for JetPack 6.1's torch wheels (forums.developer.nvidia.com 318629/7)
    jp = jetpack_for_driver(matrix, "540.4.0")
    assert jp is not None and str(jp.cuda) == "12.6" and jp.index_url == "https://pypi.jetson-ai-lab.dev/jp6/cu126"
    assert "8.7" in jp.compute_capabilities and {"6.1", "6.2"} <= set(jp.jetpack)
    assert str(driver_max_cuda(matrix, "540.4.0")) == "12.2"  # what the desktop branch table alone would say
    assert jetpack_for_driver(matrix, "550.54.15") is None and jetpack_for_driver(matrix, "not a driver") is None


# --- facts per platform ----------------------------------------------------------------------------------
PYPI_AARCH64 = ("2.11.0", "2.12.0", "2.12.1", "2.13.0", "2.14.0", "2.14.1", "2.15.0")


@pytest.mark.parametrize("version", PYPI_AARCH64)
def test_pypi_aarch64_torch_is_a_cuda13_build_with_sm110_and_no_sm75(matrix, version):
    from cudamatrix.matrix.query import default_variant, on_platform

    # cuobjdump of libtorch_cuda.so in each release's manylinux_2_28_aarch64 wheel on the default index (the
    # record quotes it): SASS sm_80 sm_90 sm_100 sm_110 sm_120 in every fatbin, no sm_75, no PTX
    rel = next(r for r in matrix.torch.releases if str(r.version) == version)
    var = default_variant(rel, "linux_aarch64")
    facts = on_platform(var, "linux_aarch64")
    assert var.cuda.major == 13 and facts.archs == ["8.0", "9.0", "10.0", "11.0", "12.0"] and facts.ptx == []
    record = var.per_platform["linux_aarch64"].source.records[0]
    assert record.kind == "artifact" and "sm_110" in record.states and "no sm_75" in record.states
    assert "7.5" in on_platform(var, "linux_x86_64").archs  # the x86 list is another list


def test_windows_default_torch_is_the_cpu_build(matrix):
    from cudamatrix.matrix.query import default_variant

    # torch/version.py of each release's win_amd64 wheel on the default index reads "<version>+cpu", cuda None
    for rel in matrix.torch.releases:
        var = default_variant(rel, "win_amd64")
        assert var is not None and var.name == "cpu", rel.version
        assert "+cpu" in var.per_platform["win_amd64"].source.records[0].states


def test_per_platform_lint(data_copy: Path):
    doc = json.loads((data_copy / "torch.json").read_text())
    rel = next(r for r in doc["releases"] if r["version"] == "2.14.1")
    cu126 = next(v for v in rel["variants"] if v["name"] == "cu126")
    cu126["per_platform"]["linux_aarch64"]["pypi_default"] = True  # two defaults on one platform
    cu126["per_platform"]["macos_x86_64"] = {"source": cu126["source"], "archs": []}  # no such wheels
    (data_copy / "torch.json").write_text(json.dumps(doc))
    problems = [p for p in lint(load_matrix_from(data_copy)) if "releases[1]" in p]
    assert any("more than one variant is the default-index wheel on linux_aarch64 (cu126, cu130)" in p
               for p in problems), problems
    assert any("per_platform.macos_x86_64: the release has no macos_x86_64 wheels" in p for p in problems)


# --- cuDNN's cap on the GPU --------------------------------------------------------------------------------
def test_cudnn_911_and_later_start_at_turing_and_the_rule_cites_document_and_binaries(matrix, data_copy):
    from cudamatrix.matrix.query import cudnn_gpu_floor
    from cudamatrix.matrix.sources import records_of

    # cuobjdump of libcudnn_ops.so.9: 9.10.2.21 has SASS sm_50 .. sm_70, 9.11.0.98 starts at sm_75 (the record
    # quotes both); the 9.17.0 support matrix lists compute capabilities from 7.5
    assert cudnn_gpu_floor(matrix, "9.10.2.21") is None
    floor = cudnn_gpu_floor(matrix, "9.11.0.98")
    assert floor is not None and floor.min_compute_capability == "7.5"
    assert cudnn_gpu_floor(matrix, "9.26.0.51") is floor
    assert {r.kind for r in records_of(floor.source)} >= {"first_party", "artifact"}
    doc = json.loads((data_copy / "cudnn.json").read_text())
    doc["gpu_floors"][0]["source"] = [s for s in doc["gpu_floors"][0]["source"] if s["kind"] != "artifact"]
    (data_copy / "cudnn.json").write_text(json.dumps(doc))
    assert any("gpu_floors[0]: source: needs NVIDIA's document (first_party) and the binaries (artifact)" in p
               for p in lint(load_matrix_from(data_copy)))


# --- flash-attn's release files -------------------------------------------------------------------------------
def test_release_file_sets_lint(data_copy: Path):
    """A release's file set whose exclude names a value its own matrix lacks (a misread workflow), or that names a
    package without a file-name rule, is a problem the lint states."""
    doc = json.loads((data_copy / "extensions.json").read_text())
    doc["release_file_sets"][0]["exclude"] = [{"torch": "2.0.1", "python": "3.12"}]
    doc["release_file_sets"][1]["name"] = "xformers"
    (data_copy / "extensions.json").write_text(json.dumps(doc))
    problems = lint(load_matrix_from(data_copy))
    assert any("release_file_sets[0].exclude[0].torch: 2.0.1 is not in the release's torch list" in p
               for p in problems), problems
    assert any("release_file_sets[1]: name: xformers has no release_files rule" in p for p in problems), problems


def test_a_release_file_set_with_an_unknown_key_is_refused(data_copy: Path):
    doc = json.loads((data_copy / "extensions.json").read_text())
    doc["release_file_sets"][0]["exclude"] = [{"torch": "2.4.0", "os": "ubuntu-22.04"}]
    (data_copy / "extensions.json").write_text(json.dumps(doc))
    with pytest.raises(DataError, match=r"extensions\.json: release_file_sets\[0\]\.exclude\[0\]\.os"):
        load_matrix_from(data_copy)


# --- rows that were missing ---------------------------------------------------------------------------------
@pytest.mark.parametrize("version, variant, first_party", [
    ("2.11.0", "cu129", "https://github.com/pytorch/pytorch/issues/185269"),
    ("2.12.0", "cu126", "https://github.com/pytorch/pytorch/pull/182849"),
    ("2.12.0", "cu132", "https://github.com/pytorch/pytorch/pull/182849"),
    ("2.15.0", "cu130", "https://github.com/pytorch/pytorch/issues/190385"),
])
def test_missing_torch_rows_are_there_with_pytorchs_own_source(matrix, version, variant, first_party):
    rel = next(r for r in matrix.torch.releases if str(r.version) == version)
    var = next(v for v in rel.variants if v.name == variant)
    assert var.index_url == f"https://download.pytorch.org/whl/{variant}"
    assert any(r.url == first_party and r.kind == "first_party" for r in var.source.records)


def test_torch_211_cu128_and_cu129_cudnn_and_archs_are_sourced_not_inferred(matrix):
    # pytorch#172680 (CuDNN 9.15.1 for CUDA-12.8 builds) and #171793 (9.15 for 12.9) landed before the 2.11 cut;
    # #173677 names the wheel 9.15.1.9; #172598 took 7.0 out of the 12.8/12.9 arch lists
    rel = next(r for r in matrix.torch.releases if str(r.version) == "2.11.0")
    by = {v.name: v for v in rel.variants}
    for name in ("cu128", "cu129"):
        assert str(by[name].cudnn) == "9.15.1.9" and "cudnn" not in by[name].inferred
        assert by[name].archs == ["7.5", "8.0", "8.6", "9.0", "10.0", "12.0"] and "archs" not in by[name].inferred


def test_jax_0_4_22_to_0_4_32_are_there(matrix):
    versions = {str(r.version): r for r in matrix.jax.releases}
    for minor in range(22, 33):
        rel = versions[f"0.4.{minor}"]
        assert rel.source.records[0].url == f"https://github.com/jax-ml/jax/blob/jax-v0.4.{minor}/docs/installation.md"
    # the JAX changelog: 0.4.32 was yanked from PyPI (a data corruption bug on TPU)
    assert versions["0.4.32"].yanked and versions["0.4.31"].yanked is None
    # jax-cuda12-plugin 0.4.22 has no PJRT plugin: no CUDA variant from the default index
    assert [v.name for v in versions["0.4.22"].variants] == ["cpu"]
    assert versions["0.4.23"].variants[1].archs == ["5.0", "6.0", "7.0", "8.0", "9.0"]


@pytest.mark.slow
def test_show_gives_sources_as_records_and_per_platform_facts():
    out = cli("matrix", "show", "torch", "2.14.1", "--json")
    row = json.loads(out.stdout)["data"]["rows"][0]
    assert {"url", "states", "read", "kind"} == set(row["source"][0])
    cu130 = next(v for v in row["variants"] if v["name"] == "cu130")
    assert cu130["per_platform"]["linux_aarch64"]["archs"] == ["8.0", "9.0", "10.0", "11.0", "12.0"]
    human = cli("matrix", "show", "torch", "2.14.1").stdout
    assert "cu130 on linux_aarch64: the default-index wheel; archs 8.0 9.0 10.0 11.0 12.0" in " ".join(human.split())
    assert "cpu on win_amd64: the default-index wheel" in human


def test_update_says_what_it_added_in_words(tmp_path):
    from cudamatrix.cli.matrix_cmd import _update_line

    none = _update_line({"torch": [], "jax": []}, "2026.11.26", "https://idx.invalid/simple", tmp_path / "o.json")
    assert none.startswith("https://idx.invalid/simple has no release newer than the shipped matrix 2026.11.26")
    assert "0 release" not in none and "none" not in none
    one = _update_line({"jax": ["0.99.0"]}, "2026.11.26", "https://idx.invalid/simple", tmp_path / "o.json")
    assert one.startswith("1 release newer than the shipped matrix 2026.11.26 from https://idx.invalid/simple: jax 0.99.0")
    two = _update_line({"jax": ["0.99.0", "0.99.1"]}, "x", "i", tmp_path / "o.json")
    assert two.startswith("2 releases newer")


# --- matrix load ---------------------------------------------------------------------------------------------------

PACKAGE = Path(__file__).parent.resolve().parent.parent / "cudamatrix"


def _raws(folder: Path) -> dict[str, bytes]:
    # an optional file (data.OPTIONAL: extensions) may be absent from a folder, the frozen snapshots among them
    return {name: (folder / f"{name}.json").read_bytes() for name in FILES
            if name not in OPTIONAL or (folder / f"{name}.json").exists()}


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
    code = ("import sys; from cudamatrix.matrix.load import load_matrix; m = load_matrix(); "
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


def test_the_shipped_matrix_builds_each_file_on_first_use():
    """A command reads only the files it asks about: doctor's advisories build nothing else; a file built on
    first use is the file the eager build gives; a name that is no file is an AttributeError."""
    from cudamatrix.matrix.data import build_lazily

    raws = _raws(default_data_dir())
    lazy = build_lazily(raws)
    assert sorted(k for k in vars(lazy) if not k.startswith("_")) == ["meta"]
    assert lazy.advisories.advisories
    assert sorted(k for k in vars(lazy) if not k.startswith("_")) == ["advisories", "meta"]
    eager = build_files(raws)
    assert all(name in vars(eager) for name in FILES)
    assert lazy.torch is lazy.torch  # built once
    assert to_dict(lazy, records=True) == to_dict(eager, records=True)
    assert not hasattr(lazy, "nonesuch") and not hasattr(lazy, "_nonesuch")


def test_a_file_of_a_data_folder_is_read_when_first_used_and_let_go_once_built(tmp_path, monkeypatch):
    """load_matrix_from(trusted=True) tells a missing file at the load, reads each file on first use (so a file
    no command asks about is never read) and holds no file's bytes once it is built; threads asking for a file
    at once get the one build (the build is slowed so that they do ask at once)."""
    import threading
    import time

    from cudamatrix.matrix import data
    from cudamatrix.matrix.data import load_matrix_from

    builds: list[str] = []
    real = data._build_file

    def slow_build(name, raw, parsed=None):
        builds.append(name)
        time.sleep(0.05)
        return real(name, raw, parsed)

    monkeypatch.setattr(data, "_build_file", slow_build)

    folder = tmp_path / "data"
    shutil.copytree(default_data_dir(), folder)
    matrix = load_matrix_from(folder, trusted=True)
    assert set(vars(matrix)["_pending"]) == set(FILES) - {"meta"}
    assert all(isinstance(v, Path) for v in vars(matrix)["_pending"].values())  # nothing read yet
    (folder / "jax.json").write_text("{not json")  # changed after the load: read as it is at first use
    seen: list = []
    threads = [threading.Thread(target=lambda: seen.append(matrix.torch)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 4 and all(s is seen[0] for s in seen) and builds == ["meta", "torch"]  # meta at the load
    assert "torch" not in vars(matrix)["_pending"]
    with pytest.raises(DataError, match=r"jax\.json: not valid JSON"):
        _ = matrix.jax
    (folder / "cudnn.json").unlink()
    with pytest.raises(DataError, match=r"cudnn\.json: missing from the matrix data folder"):
        load_matrix_from(folder, trusted=True)


def test_a_malformed_shipped_file_is_a_data_error_when_first_read_and_a_new_schema_at_once():
    from cudamatrix.matrix.data import build_lazily

    raws = _raws(default_data_dir())
    doc = json.loads(raws["gpus"])
    doc["gpus"][0]["bogus"] = 1
    raws["gpus"] = json.dumps(doc).encode()
    lazy = build_lazily(raws)
    assert lazy.torch.releases  # the other files are read as before
    with pytest.raises(DataError, match=r"gpus\.json: .*bogus"):
        _ = lazy.gpus
    meta = json.loads(raws["meta"])
    raws["meta"] = json.dumps({**meta, "schema_version": meta["schema_version"] + 1}).encode()
    with pytest.raises(DataError, match="schema_version"):
        build_lazily(raws)


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
    from cudamatrix import schema as schema_module
    from cudamatrix.matrix import data

    assert data.Ver is schema_module.Ver and data.CC is schema_module.CC


@pytest.mark.slow
def test_matrix_show_without_arguments_lists_the_families():
    out = cli("matrix", "show", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)["data"]
    assert data["families"] == ["torch", "tensorflow", "jax", "cuda", "cudnn", "gpu"]
    assert data["counts"]["torch"] > 10 and data["meta"]["schema_version"] == 2
    human = cli("matrix", "show")
    assert human.returncode == 0 and "torch" in human.stdout and "Traceback" not in human.stderr
    load_matrix_from(default_data_dir())  # and the shipped data still validates
