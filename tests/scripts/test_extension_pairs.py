"""scripts/extension_pairs.py, the proof table of issue #39, on a few real pairs: the codes the files imply (nm,
readelf, packaging, the fatbin headers) are the codes doctor finds, for mismatched pairs and matched controls.

Real members of real wheels (tests/support/realwheels.py's cache) beside the real torch 2.14.1 CUDA 13.0 build of
$CUDAMATRIX_TORCH_CUDA_PYTHON; skipped with the reason where it is unset. Evidence, the same files:

- xformers 0.0.29.post3: ``Requires-Dist: torch==2.6.0``; ``nm -D --undefined-only xformers/_C.so`` needs
  ``_ZN3c104cuda9SetDeviceEa`` which no torch 2.14.1 library defines (15 of its 165 torch symbols); ``readelf -d``:
  NEEDED libcudart.so.12; its fatbin: SASS sm_60..sm_90, PTX compute_60 compute_80 (none for a Tesla M60, 5.2);
- cupy-cuda13x 13.6.0's cuBLAS module NEEDS libcublas.so.13 (torch's CUDA major): no finding; cupy-cuda12x 13.6.0
  installed before it (libcublas.so.12) wrote the same file, which cupy-cuda13x replaced: the two variants only;
- onnxruntime-gpu 1.26.0's ``onnxruntime/capi/libonnxruntime_providers_cuda.so`` (``readelf -d``): NEEDED
  libcublasLt.so.12, libcublas.so.12, libcudart.so.12, libcufft.so.11, libcudnn.so.9 beside torch's CUDA 13.0 (the
  provider fails to load with "libcublasLt.so.12: cannot open shared object file" where only torch's CUDA 13 wheels
  are installed); 1.31.1's NEEDED libcublasLt.so.13, libcublas.so.13, libcudart.so.13: the matched control. The
  provider (284 MB) is cached by its ends only (its first MiB and last 64 KiB, a sparse file of its real size):
  its .dynamic section lies at 0x10ed41c8 of 1.31.1's 0x10edb8a0 bytes, .dynstr at 0x2250;
- bitsandbytes 0.49.2 carries one library per CUDA release: ``readelf -d`` of libbitsandbytes_cuda118.so NEEDS
  libcudart.so.11.0 and libcublas.so.11, of libbitsandbytes_cuda130.so libcudart.so.13 and libcublas.so.13; its
  cextension.py (get_cuda_bnb_library_path at 0.49.2) opens libbitsandbytes_cuda{major}{minor}.so of
  torch.version.cuda only, so beside torch 2.14.1 (CUDA 13.0) the CUDA 11 file is never opened: no finding (doctor
  said EXTENSION_CUDA_MISMATCH here before the data's ``library_choices``); bitsandbytes 0.44.1's newest file is
  libbitsandbytes_cuda125.so: there is no file for CUDA 13.0 (it falls back to its CPU library).
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from support.realwheels import CACHE, TORCH_PY, site_packages

REPO = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPO / "scripts"))
import extension_pairs as ep  # noqa: E402

pytestmark = pytest.mark.slow

ABI, PIN, CUDA, ARCH, CLASH = ("EXTENSION_ABI_MISMATCH", "EXTENSION_PIN_MISMATCH", "EXTENSION_CUDA_MISMATCH",
                               "EXTENSION_ARCH_UNSUPPORTED", "EXTENSION_VARIANT_CLASH")


@pytest.fixture(autouse=True)
def real(tmp_path, monkeypatch):
    site_packages(TORCH_PY, "CUDAMATRIX_TORCH_CUDA_PYTHON")  # skips with the reason when unset
    monkeypatch.setattr(ep, "CACHE", CACHE)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


@pytest.mark.parametrize("pair, codes", [
    (ep.Pair((ep.XF29,), "2.14.1"), [ABI, CUDA, PIN]),
    (ep.Pair((ep.XF29,), "2.14.1", ("Tesla M60", "5.2")), [ABI, ARCH, CUDA, PIN]),
    (ep.Pair((ep.XF29,), "2.14.1", ("NVIDIA H100 80GB HBM3", "9.0")), [ABI, CUDA, PIN]),
    (ep.Pair((ep.CP13,), "2.14.1"), []),
    (ep.Pair((ep.CP12, ep.CP13), "2.14.1"), [CLASH]),
    (ep.Pair((ep.ORT126,), "2.14.1"), [CUDA]),
    (ep.Pair((ep.ORT1311,), "2.14.1"), []),
    (ep.Pair((ep.BNB49,), "2.14.1"), []),
    (ep.Pair((ep.BNB44,), "2.14.1"), [CUDA]),
])
def test_the_files_and_doctor_agree(tmp_path, pair, codes):
    row = ep.run_pair(pair, tmp_path)
    assert row.skipped is None
    assert row.expected == codes  # what nm, readelf, packaging and the fatbin headers say of these files
    assert row.found == row.expected and row.right
    assert "DIFFERS" not in ep.table([row])


def test_an_unset_torch_is_a_skipped_row_and_no_run_is_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("CUDAMATRIX_TORCH_CPU_PYTHON", raising=False)
    ep.torch_site.cache_clear()
    row = ep.run_pair(ep.Pair((ep.CP13,), "cpu"), tmp_path)
    assert row.skipped == "CUDAMATRIX_TORCH_CPU_PYTHON is not set"
    monkeypatch.setattr(ep, "PAIRS", [ep.Pair((ep.CP13,), "cpu")])
    assert ep.main([]) == 2
    assert "skipped" in capsys.readouterr().out


def test_a_member_kept_by_its_ends_is_a_sparse_file_of_its_real_size(tmp_path):
    """onnxruntime-gpu 1.26.0's CUDA provider in the cache: its real size, its ends on disk, DT_NEEDED readable."""
    folder = ep.fetch(ep.ORT126)
    so = folder / "libonnxruntime_providers_cuda.so"
    assert so.stat().st_size > 200 << 20 and so.stat().st_blocks * 512 < 4 << 20
    needed = ep.subprocess.run(["readelf", "-d", str(so)], capture_output=True, text=True, timeout=60).stdout
    assert "[libcublasLt.so.12]" in needed and "[libcudart.so.12]" in needed
