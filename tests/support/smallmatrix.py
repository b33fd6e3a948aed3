"""A small compatibility matrix built in the test, so rule tables do not move when the shipped data/ changes.

Every fact below is copied from the public NVIDIA document named next to it (the same documents data/ cites);
the framework rows are constructed inputs (a build's CUDA, SASS and PTX lists), not claims about a real wheel.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from packaging.version import Version

from cudamatrix.matrix.data import (
    FILES,
    SCHEMA_VERSION,
    AdvisoryFile,
    Architecture,
    CudaFile,
    CudaRelease,
    CudnnFile,
    CudnnRelease,
    DriverBranch,
    FrameworkFile,
    FrameworkRelease,
    Gpu,
    GpuFile,
    Matrix,
    Meta,
    MinorCompat,
    Variant,
)
from cudamatrix.solve.target import Target, TargetGpu

# CUDA Toolkit Release Notes, table "CUDA Toolkit and Corresponding Driver Versions" (Linux, Windows columns)
NOTES = "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html"
# CUDA Compatibility guide: minor-version compatibility needs the major's floor driver and SASS for the GPU
COMPAT = "https://docs.nvidia.com/deploy/cuda-compatibility/index.html"
# cuDNN Support Matrix, per release
CUDNN_910 = "https://docs.nvidia.com/deeplearning/cudnn/support-matrix/ (cuDNN 9.1.0 edition)"
CUDNN_917 = "https://docs.nvidia.com/deeplearning/sdk/cudnn-support-matrix/index.html (cuDNN 9.17.0 edition)"
ARCHS = "https://docs.nvidia.com/datacenter/tesla/drivers/cuda-toolkit-driver-and-architecture-matrix.html"
ROW = "constructed test input"

CC_12 = ["5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "8.9", "9.0"]


def _cuda(version: str, linux: str, windows: str, ccs: list[str]) -> CudaRelease:
    return CudaRelease(version=Version(version), source=NOTES, linux_min_driver=linux, windows_min_driver=windows,
                       compute_capabilities=ccs)


def build(*releases: FrameworkRelease) -> Matrix:
    """The small matrix, with the given torch releases."""
    cuda = CudaFile(
        releases=[
            _cuda("11.8", "520.61.05", "520.06", ["3.5", "3.7"] + CC_12),
            _cuda("12.1", "530.30.02", "531.14", CC_12),
            _cuda("12.4", "550.54.14", "551.61", CC_12),
            _cuda("12.8", "570.26", "570.65", CC_12 + ["10.0", "12.0"]),
        ],
        minor_compat=[
            MinorCompat(cuda_major=11, linux_min_driver="450.80.02", windows_min_driver="452.39", limits="SASS only",
                        source=NOTES),
            MinorCompat(cuda_major=12, linux_min_driver="525.60.13", windows_min_driver="527.41", limits="SASS only",
                        source=COMPAT),
        ],
        driver_branches=[DriverBranch(branch=b, max_cuda=Version(c), source=NOTES) for b, c in
                         ((450, "11.0"), (470, "11.4"), (520, "11.8"), (525, "12.0"), (530, "12.1"), (535, "12.2"),
                          (550, "12.4"), (570, "12.8"))],
    )
    gpus = GpuFile(architectures=[
        Architecture(name="Kepler", compute_capabilities=["3.5", "3.7"], source=ARCHS, last_driver_branch=470),
        Architecture(name="Maxwell", compute_capabilities=["5.0", "5.2"], source=ARCHS),
        Architecture(name="Pascal", compute_capabilities=["6.0", "6.1"], source=ARCHS),
        Architecture(name="Volta", compute_capabilities=["7.0"], source=ARCHS),
        # the first driver of an architecture: the driver of the first CUDA release whose compiler targets it
        Architecture(name="Turing", compute_capabilities=["7.5"], source=ARCHS, min_driver={"7.5": "410.48"},
                     min_driver_source=NOTES),
        Architecture(name="Ampere", compute_capabilities=["8.0", "8.6"], source=ARCHS,
                     min_driver={"8.0": "450.51.05", "8.6": "455.23"}, min_driver_source=NOTES),
        Architecture(name="Ada Lovelace", compute_capabilities=["8.9"], source=ARCHS, min_driver={"8.9": "520.61.05"},
                     min_driver_source=NOTES),
        Architecture(name="Hopper", compute_capabilities=["9.0"], source=ARCHS, min_driver={"9.0": "520.61.05"},
                     min_driver_source=NOTES),
        Architecture(name="Blackwell", compute_capabilities=["10.0", "12.0"], source=ARCHS,
                     min_driver={"10.0": "570.26", "12.0": "570.26"}, min_driver_source=NOTES),
    ], gpus=[Gpu(name="Tesla T4", compute_capability="7.5", architecture="Turing", segment="datacenter", source=ARCHS),
             Gpu(name="NVIDIA H100 80GB HBM3", compute_capability="9.0", architecture="Hopper",
                 segment="datacenter", source=ARCHS, aliases=["H100"])])
    cudnn = CudnnFile(version_encoding={">=9": "major*10000+minor*100+patch"}, releases=[
        # cuDNN 9.1.0: CUDA 11.8 and 12.x, compute capability 5.0 and newer
        CudnnRelease(version=Version("9.1.0"), cuda_versions=[">=11.0,<12", ">=12.0,<13"],
                     compute_capabilities=["5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "8.9", "9.0"],
                     soname="libcudnn.so.9", source=CUDNN_910),
        # cuDNN 9.17.0: CUDA 12.x and 13.x, compute capability 7.5 and newer
        CudnnRelease(version=Version("9.17.0"), cuda_versions=[">=12.0,<13", ">=13.0,<14"],
                     compute_capabilities=["7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "12.0"],
                     soname="libcudnn.so.9", source=CUDNN_917),
    ])
    return Matrix(meta=Meta(schema_version=SCHEMA_VERSION, data_version="test", date="2026-01-01"), cuda=cuda, gpus=gpus,
                  cudnn=cudnn, torch=FrameworkFile(releases=list(releases)), tensorflow=FrameworkFile(releases=[]),
                  jax=FrameworkFile(releases=[]), advisories=AdvisoryFile(advisories=[]))


def variant(name: str, cuda: str | None, archs=(), ptx=(), cudnn: str | None = None, **kw) -> Variant:
    """A constructed build: its CUDA, SASS list, PTX list and cuDNN."""
    return Variant(name=name, source=ROW, cuda=Version(cuda) if cuda else None,
                   cudnn=Version(cudnn) if cudnn else None, archs=list(archs), ptx=list(ptx), **kw)


def release(version: str, *variants: Variant, name: str = "torch") -> FrameworkRelease:
    return FrameworkRelease(name=name, version=Version(version), python=["3.10", "3.11", "3.12"],
                            variants=list(variants), source=ROW, platforms=["linux_x86_64", "win_amd64"])


def target(driver: str | None, *ccs: str, platform: str = "linux_x86_64", **kw) -> Target:
    return Target(name="t", driver=driver, gpus=tuple(TargetGpu(cc) for cc in ccs), platform=platform, **kw)


def replace(obj, **changes):
    return dataclasses.replace(obj, **changes)


def _records(text: str) -> list[dict]:
    """A row's source text of this module as the data files' source records (schema 2)."""
    url, _, rest = text.partition(" ")
    if url.startswith("https://"):
        return [{"url": url, "states": rest.strip(" ()") or "the row's facts", "read": "2026-01-01",
                 "kind": "first_party"}]
    return [{"states": text, "read": "2026-01-01", "kind": "artifact"}]


def _with_records(doc):
    if isinstance(doc, dict):
        return {k: _records(v) if k in ("source", "min_driver_source") and isinstance(v, str) else _with_records(v)
                for k, v in doc.items()}
    if isinstance(doc, list):
        return [_with_records(v) for v in doc]
    return doc


def write(matrix: Matrix, folder: Path) -> Path:
    """The matrix as a data folder (one JSON file per family), for ``--data``."""
    from cudamatrix.schema import to_dict

    folder.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        (folder / f"{name}.json").write_text(json.dumps(_with_records(to_dict(getattr(matrix, name)))))
    return folder
