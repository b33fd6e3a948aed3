"""A Jetson detected live: its Jetson Linux (L4T) release, read from the board's /etc/nv_tegra_release, decides the
CUDA its driver runs, through the JetPack table of the data (cuda.json ``jetpack``, from NVIDIA's JetPack release
notes); never the desktop branch table, where R540 (JetPack 6's driver) would read as R535's CUDA 12.2.

The file's first line as Jetson Linux writes it: "# R36 (release), REVISION: 4.3, GCID: ..., BOARD: generic, EABI:
aarch64, DATE: ..." (release 36.4.3, JetPack 6.2)."""
from __future__ import annotations

from pathlib import Path

import pytest
from support.snapshot import named_snapshot

from cudamatrix.detect.driver import parse_tegra_release, read_tegra_release
from cudamatrix.errors import NoSolution
from cudamatrix.models import Driver, Environment, GpuInfo, PythonInfo
from cudamatrix.solve.solver import parse_request, solve
from cudamatrix.solve.target import from_environment, target_record

JP62 = ("# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic, EABI: aarch64, "
        "DATE: Wed Jan  8 01:49:37 UTC 2025\n")


@pytest.mark.parametrize("text, release", [
    (JP62, "36.4.3"),
    ("# R35 (release), REVISION: 5.0, GCID: 35550185, BOARD: t186ref, EABI: aarch64, DATE: Tue Feb 20 2024\n",
     "35.5.0"),
    ("# R36 (release), REVISION: 4, GCID: 1\n", "36.4"),
    ("", None),
    ("R36 release 4.3\n", None),  # not the file's form: nothing is guessed
    ("\x00" * 10000, None),
])
def test_the_release_line_of_nv_tegra_release(text, release):
    assert parse_tegra_release(text) == release


def test_read_from_the_boards_file(tmp_path: Path):
    assert read_tegra_release(str(tmp_path)) is None  # not a Jetson
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "nv_tegra_release").write_text(JP62)
    assert read_tegra_release(str(tmp_path)) == "36.4.3"
    (tmp_path / "etc" / "nv_tegra_release").unlink()
    (tmp_path / "etc" / "nv_tegra_release").mkdir()  # unreadable as a file: no release, no error
    assert read_tegra_release(str(tmp_path)) is None


def _orin(driver: Driver) -> Environment:
    """An AGX Orin as detect sees it live where NVML gives no driver version (libcuda answers CUDA 12.6)."""
    return Environment(origin="live", driver=driver, gpus=[GpuInfo(index=0, name="Orin (nvgpu)",
                                                                   compute_capability="8.7")],
                       python=PythonInfo(version="3.10.12", platform="linux_aarch64"))


def test_a_live_jetson_is_judged_by_its_jetpack_line():
    m = named_snapshot("issue23")
    t = from_environment(_orin(Driver(cuda_version="12.6", status="ok", jetson_linux="36.4.3")), m)
    record = target_record(m, t)
    assert record["driver"] == {"version": "540.4.0", "cuda_version": "12.6", "usable": True,
                                "jetpack": {"releases": ["6.1", "6.2"], "l4t": "36.4"}}
    assert record["notes"] == ["Jetson Linux 36.4.3 (/etc/nv_tegra_release): JetPack 6.1/6.2, whose driver 540.4.0 "
                               "runs CUDA 12.6 (the board's release decides)"]
    # the solver reads the board: no index build has Orin kernels, and the way out names JetPack 6's own index
    with pytest.raises(NoSolution) as exc:
        solve([t], parse_request(["torch"], None), m)
    ways = [w.message for w in exc.value.ways_out if w.kind == "jetpack"]
    assert ways and "jp6/cu126" in ways[0], ways


def test_a_release_line_the_table_lacks_is_said_not_guessed():
    m = named_snapshot("issue23")
    t = from_environment(_orin(Driver(version="540.3.0", status="ok", jetson_linux="36.3.0")), m)
    assert t.driver == "540.3.0" and target_record(m, t)["driver"]["jetpack"] is None
    assert t.notes == ("Jetson Linux 36.3.0 (/etc/nv_tegra_release) is not in the matrix's JetPack table: the CUDA "
                       "its driver runs is not known from it",)
