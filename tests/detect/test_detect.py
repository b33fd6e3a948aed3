"""On a machine with an NVIDIA GPU: the live cascade (NVML) agrees with nvidia-smi read by our parsers."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from cudamatrix.detect import detect, smi

pytestmark = pytest.mark.gpu


def _smi_table() -> str:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        pytest.skip("no nvidia-smi: not a GPU machine")
    done = subprocess.run([exe], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        pytest.skip(f"nvidia-smi fails here: {done.stdout.strip()[:200]}")
    return done.stdout


def test_live_detect_agrees_with_nvidia_smi():
    table = smi.parse_table(_smi_table())
    env = detect()
    assert env.driver.status == "ok"
    assert env.driver.version == table.driver.version
    assert env.driver.cuda_version == table.driver.cuda_version
    assert len(env.gpus) == len(table.gpus)
    for live, shown in zip(env.gpus, table.gpus, strict=True):
        # the table cuts long names ("NVIDIA GeForce RTX 3060 ..."): compare what it shows
        assert live.name.startswith(shown.name.rstrip(". ")), (live.name, shown.name)
        assert live.memory_total_mib == shown.memory_total_mib
        assert live.compute_capability
