"""doctor end to end on EXTENSION_ARCH_UNSUPPORTED's floor half: a venv holding the real vllm 0.6.1.post2 and
bitsandbytes 0.49.2 distributions (their METADATA, WHEEL and RECORD from the real wheels, no shared object laid out:
no kernels read) and the GPU from a replayed nvidia-smi (tests/data, driver 570.195.03, with the --query-gpu line of
the GPU under test).

Evidence: vLLM's installation page for v0.6.1.post2's series states "GPU: compute capability 7.0 or higher"
(data/extensions.json gpu_floors, read at the v0.3.3 and v0.14.0 editions); bitsandbytes' installation.mdx at
0.48.0 and 0.50.1: "supported on NVIDIA GPUs with Compute Capability 6.0+", at 0.45.0 and 0.47.0 Maxwell (5.0+). A
Tesla P100 (6.0) is below vLLM's floor and at bitsandbytes'; a Tesla M60 (5.2) below both; the table's own T4G
(7.5) is the control.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.fakes import child_env, fake_smi, fixture
from support.realwheels import fetch

pytestmark = pytest.mark.slow

TABLE = "nvidia-smi/570.195.03_T4G_cuda13.0-in-container_eks.txt"
QUERY = {"P100": "0, Tesla P100-PCIE-16GB, 570.195.03, 16280, 0, 6.0, GPU-1, 00000000:00:1E.0, [N/A]\n",
         "M60": "0, Tesla M60, 570.195.03, 8129, 0, 5.2, GPU-2, 00000000:00:1E.0, [N/A]\n",
         "T4G": "0, NVIDIA T4G, 570.195.03, 15360, 0, 7.5, GPU-5a1b, 00000000:00:1F.0, [N/A]\n"}
DISTS = (("vllm", "0.6.1.post2"), ("bitsandbytes", "0.49.2"))


def _venv(tmp_path: Path) -> Path:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    site = next((venv / "lib").glob("python*/site-packages"))
    for dist, version in DISTS:
        meta = f"{dist.replace('-', '_')}-{version}.dist-info"
        folder = fetch(dist, version, [f"{meta}/METADATA", f"{meta}/WHEEL", f"{meta}/RECORD"])
        (site / meta).mkdir()
        for name in ("METADATA", "WHEEL", "RECORD"):
            shutil.copy(folder / name, site / meta / name)
    return venv / "bin" / "python"


@pytest.mark.parametrize("gpu, expected", [
    ("P100", ["vllm 0.6.1.post2 needs a GPU of compute capability 7.0 or higher; Tesla P100-PCIE-16GB is 6.0"]),
    ("M60", ["bitsandbytes 0.49.2 needs a GPU of compute capability 6.0 or higher; Tesla M60 is 5.2",
             "vllm 0.6.1.post2 needs a GPU of compute capability 7.0 or higher; Tesla M60 is 5.2"]),
    ("T4G", []),
])
def test_doctor_names_a_gpu_below_the_packages_own_floor(tmp_path, gpu, expected):
    python = _venv(tmp_path)
    fake_smi(tmp_path / "bin", fixture(TABLE), query=QUERY[gpu])
    done = subprocess.run([sys.executable, "-m", "cudamatrix", "doctor", "--python", str(python), "--json"],
                          env=child_env(path_prepend=[tmp_path / "bin"], ld_library_path=[tmp_path / "empty"],
                                        extra={"XDG_CACHE_HOME": str(tmp_path / "xdg")}),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1), done.stderr
    found = [f for f in json.loads(done.stdout)["data"]["findings"] if f["code"] == "EXTENSION_ARCH_UNSUPPORTED"]
    assert [f["title"] for f in found] == expected
    if gpu == "M60":
        assert found[0]["fix"].startswith("pip install 'bitsandbytes>=0.45.0,<0.48.0'")
