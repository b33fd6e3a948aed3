"""diagnose.libchoice: of its per-CUDA libraries, the one a package opens (data/extensions.json ``library_choices``),
and what the extension findings make of it.

Facts the expectations rest on, each from bitsandbytes' own files:

- bitsandbytes/cextension.py, get_cuda_bnb_library_path: from 0.43.1 to 0.49.2 it opens
  ``libbitsandbytes_cuda{major}{minor}.so`` of ``torch.version.cuda`` and no other file (``BNB_CUDA_VERSION``
  replaces the digits); up to 0.45.5 a missing file logs "Could not find the bitsandbytes CUDA binary" and the CPU
  library is opened, from 0.46.0 it raises "Configured CUDA binary not found"; from 0.50.0 it opens that file, else
  the highest of the same major below it, else the lowest above it, never another major.
- The Linux x86_64 wheels' files: 0.44.1 carries cuda117 to cuda125; 0.49.2 cuda118, 120 to 126, 128, 129, 130;
  0.50.1 cuda118, 121, 124, 126, 128, 130, 132.
- ``readelf -d`` of 0.49.2's libbitsandbytes_cuda118.so: NEEDED libcudart.so.11.0, libcublas.so.11,
  libcublasLt.so.11, libcusparse.so.11; of its libbitsandbytes_cuda130.so: libcudart.so.13, libcublas.so.13,
  libcublasLt.so.13, libcusparse.so.12; of 0.44.1's libbitsandbytes_cuda125.so: libcudart.so.12, libcublas.so.12.
"""
from __future__ import annotations

import pytest

from cudamatrix.diagnose import extensions, libchoice
from cudamatrix.diagnose.context import Diagnosis
from cudamatrix.matrix.load import load_matrix
from cudamatrix.models import Environment, Extension, ExtensionObject, Framework, GpuInfo, PythonInfo

M = load_matrix()
NEEDED = {"118": ["libcudart.so.11.0", "libcublas.so.11", "libcublasLt.so.11", "libcusparse.so.11"],
          "125": ["libcudart.so.12", "libcublas.so.12", "libcublasLt.so.12", "libcusparse.so.12"],
          "128": ["libcudart.so.12", "libcublas.so.12", "libcublasLt.so.12", "libcusparse.so.12"],
          "130": ["libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13", "libcusparse.so.12"],
          "132": ["libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13", "libcusparse.so.12"]}


def bnb(version: str, *releases: str, sass: tuple[str, ...] = ()) -> Extension:
    return Extension(name="bitsandbytes", version=version, declares=["torch<3,>=2.2"],
                     objects=[ExtensionObject(path=f"/sp/bitsandbytes/libbitsandbytes_cuda{r}.so",
                                              needed=NEEDED.get(r, [f"libcudart.so.{r[:-1]}"]), sass=list(sass))
                              for r in releases])


def env(ext: Extension, cuda: str | None = "13.0", torch: str = "2.14.1", **variables: str) -> Environment:
    e = Environment(origin="file", python=PythonInfo(version="3.11.9", platform="linux_x86_64"),
                    packages={"torch": torch, "bitsandbytes": ext.version}, extensions=[ext])
    e.frameworks = [Framework(name="torch", version=torch, variant=f"cu{cuda.replace('.', '')}" if cuda else "cpu",
                              cuda=cuda)]
    e.context.env.update(variables)
    return e


def codes(e: Environment) -> list[tuple[str, str]]:
    d = Diagnosis(e, M)
    return [(f.code, f.title) for check in (extensions.extension_cuda_mismatch, extensions.extension_abi_mismatch,
                                            extensions.extension_arch_unsupported) for f in check(d)]


@pytest.mark.parametrize("choose, carried, asked, loaded", [
    ("exact", {(13, 0), (11, 8)}, (13, 0), (13, 0)),
    ("exact", {(13, 0), (11, 8)}, (13, 2), None),
    ("same_major", {(13, 0), (12, 8)}, (13, 2), (13, 0)),  # the highest below, same major
    ("same_major", {(12, 8), (12, 1), (13, 0)}, (12, 9), (12, 8)),
    ("same_major", {(11, 8), (12, 1)}, (12, 0), (12, 1)),  # none below: the lowest above
    ("same_major", {(11, 8), (12, 8)}, (13, 0), None),  # never another major
])
def test_the_rule_picks_the_file(choose, carried, asked, loaded):
    rule = next(r for r in M.extensions.library_choices if r.choose == choose)
    assert libchoice.choose(rule, carried, asked, overridden=False) == loaded


def test_an_override_names_one_file_with_no_fallback():
    rule = next(r for r in M.extensions.library_choices if r.choose == "same_major")
    assert libchoice.choose(rule, {(13, 0)}, (13, 2), overridden=True) is None


@pytest.mark.parametrize("version, rule", [("0.43.1", ">=0.43.1,<0.46.0"), ("0.45.5", ">=0.43.1,<0.46.0"),
                                           ("0.49.2", ">=0.46.0,<0.50.0"), ("0.50.1", ">=0.50.0,<=0.50.1"),
                                           ("0.42.0", None), ("0.51.0", None)])
def test_the_rows_cover_the_releases_read(version, rule):
    row = libchoice.rule_for(M, "bitsandbytes", version)
    assert (row.versions if row else None) == rule


def test_the_files_of_other_cuda_releases_are_not_judged():
    """0.49.2 beside torch 2.14.1 (CUDA 13.0): it opens libbitsandbytes_cuda130.so only; its CUDA 11 file, which
    NEEDS libcudart.so.11.0, is never opened (before the rows, doctor called this pair EXTENSION_CUDA_MISMATCH)."""
    e = env(bnb("0.49.2", "118", "128", "130"))
    assert codes(e) == []
    assert [o.path for o in Diagnosis(e, M).judged_objects(e.extensions[0])] == \
        ["/sp/bitsandbytes/libbitsandbytes_cuda130.so"]


def test_a_cpu_torch_opens_none_of_them():
    e = env(bnb("0.49.2", "118", "130"), cuda=None, torch="2.14.1+cpu", BNB_CUDA_VERSION="118")
    assert Diagnosis(e, M).judged_objects(e.extensions[0]) == []
    assert codes(e) == []


def test_no_file_for_torchs_cuda_is_a_finding_with_the_release_that_has_one():
    e = env(bnb("0.44.1", "118", "125"))
    (finding,) = extensions.extension_cuda_mismatch(Diagnosis(e, M))
    assert finding.code == "EXTENSION_CUDA_MISMATCH"
    assert finding.title == ("bitsandbytes 0.44.1 has no library for torch 2.14.1's CUDA 13.0: it looks for "
                             "libbitsandbytes_cuda130, which is not among its files")
    assert finding.evidence[0] == "it carries libbitsandbytes_cuda118, libbitsandbytes_cuda125"
    assert finding.evidence[1].endswith("loads libbitsandbytes_cuda130 for torch 2.14.1's CUDA 13.0 and no other file")
    assert "Could not find the bitsandbytes CUDA binary" in finding.evidence[2]
    assert "/blob/0.43.1/bitsandbytes/cextension.py" in finding.evidence[2]
    # no CUDA 13 file of its own to name with BNB_CUDA_VERSION: the newest release read whose wheel has one
    assert finding.fix == ("pip install 'bitsandbytes==0.50.1' (its wheel carries libbitsandbytes_cuda130); or a "
                           "torch build of a CUDA release it carries (11.8, 12.5)")


def test_a_file_of_the_same_major_is_offered_by_the_override_variable():
    """0.49.2 beside torch 2.15.0's CUDA 13.2: no cuda132 file, and 0.49.2 takes no other on its own; its cuda130
    file is named by BNB_CUDA_VERSION=130; 0.50.1's wheel has cuda132."""
    (finding,) = extensions.extension_cuda_mismatch(Diagnosis(env(bnb("0.49.2", "128", "130"), "13.2", "2.15.0"), M))
    assert finding.fix.startswith("set BNB_CUDA_VERSION=130 (it then loads libbitsandbytes_cuda130, which it "
                                  "carries); or pip install 'bitsandbytes==0.50.1' (its wheel carries "
                                  "libbitsandbytes_cuda132)")


def test_from_050_the_nearest_file_of_the_major_is_opened():
    e = env(bnb("0.50.1", "128", "130"), "13.2", "2.15.0")
    assert codes(e) == []
    assert [o.path for o in Diagnosis(e, M).judged_objects(e.extensions[0])] == \
        ["/sp/bitsandbytes/libbitsandbytes_cuda130.so"]


def test_the_variable_opens_its_file_whatever_torch_says():
    """BNB_CUDA_VERSION=125 beside torch's CUDA 13.0: 0.44.1 opens libbitsandbytes_cuda125.so, which NEEDS
    libcudart.so.12."""
    e = env(bnb("0.44.1", "118", "125"), BNB_CUDA_VERSION="125")
    assert [c for c, _t in codes(e)] == ["EXTENSION_CUDA_MISMATCH"]
    (finding,) = extensions.extension_cuda_mismatch(Diagnosis(e, M))
    assert finding.evidence[0] == "libbitsandbytes_cuda125.so needs libcudart.so.12 (CUDA 12)"
    e = env(bnb("0.44.1", "118", "125"), BNB_CUDA_VERSION="130")
    (finding,) = extensions.extension_cuda_mismatch(Diagnosis(e, M))
    assert finding.title.startswith("bitsandbytes 0.44.1 has no library for BNB_CUDA_VERSION=130")


def test_only_the_opened_files_kernels_count_for_the_gpu():
    """The GPU check reads the kernels of the file opened: here its CUDA 13.0 file carries none for a 7.0 GPU
    (made-up kernel lists: the rule, not a release, is under test), its CUDA 11.8 file would have."""
    ext = bnb("0.49.2", "118", "130")
    ext.objects[0].sass, ext.objects[1].sass = ["7.0"], ["7.5", "8.0"]
    e = env(ext)
    e.gpus = [GpuInfo(index=0, name="Tesla V100-SXM2-16GB", compute_capability="7.0")]
    found = extensions.extension_arch_unsupported(Diagnosis(e, M))
    assert [f.code for f in found] == ["EXTENSION_ARCH_UNSUPPORTED"]
    assert found[0].evidence == ["libbitsandbytes_cuda130.so: SASS sm_75 sm_80, PTX none"]
