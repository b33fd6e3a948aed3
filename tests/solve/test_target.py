"""The solve target read from a detected or saved environment (solve/target.from_environment)."""
from __future__ import annotations

import pytest
from support.snapshot import snapshot_matrix

from cudamatrix.models import Driver, Environment, GpuInfo
from cudamatrix.solve.target import from_environment


@pytest.mark.parametrize("cc", ["N/A", "[Not Supported]", "garbage"])
def test_a_compute_capability_that_is_no_version_falls_back_to_the_gpu_name(cc):
    # nvidia-smi prints "N/A" / "[Not Supported]" in cells it cannot fill; such a cell must not stop the diagnosis
    # (it raised ValueError from normalize_cc): the name decides, as for a GPU that stated nothing
    env = Environment(driver=Driver(version="580.65.06", status="ok"),
                      gpus=[GpuInfo(index=0, name="NVIDIA H100 80GB HBM3", compute_capability=cc)])
    target = from_environment(env, snapshot_matrix())
    assert [g.compute_capability for g in target.gpus] == ["9.0"]


def test_a_readable_compute_capability_is_kept_over_the_name():
    env = Environment(driver=Driver(version="580.65.06", status="ok"),
                      gpus=[GpuInfo(index=0, name="NVIDIA H100 80GB HBM3", compute_capability="sm_90")])
    assert [g.compute_capability for g in from_environment(env, snapshot_matrix()).gpus] == ["9.0"]
