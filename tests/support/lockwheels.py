"""The complete set ``torch==2.14.1`` pulls in on Linux, as wheels for a loopback index (tests/support/localindex.py).

- Real distributions where they are small: filelock, typing-extensions, setuptools, sympy, mpmath, networkx,
  jinja2, MarkupSafe, fsspec, repacked from the files this interpreter has installed (the test extra's torch
  brings them) by the journal's ``repack``: their real code, METADATA and dependencies (sympy needs mpmath,
  jinja2 needs MarkupSafe, a platform wheel for MarkupSafe).
- Stand-ins for what is too large to serve (torch, triton, the nvidia-* and cuda-* wheels), with their real
  names and versions. torch's Requires-Dist is the one of torch 2.14.1's wheels on the default index
  (``torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl``, ``torch-2.14.1.dist-info/METADATA``); its CUDA pins
  are the ones the matrix read from that METADATA (data/torch.json). nvidia-nccl-cu13 2.30.7 is published only
  as ``py3-none-manylinux_2_18_<arch>`` (its index listing), so its stand-in carries that tag.
"""
from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

from support import brokenvenv
from support.localindex import build_wheel

REAL = ("filelock", "typing-extensions", "setuptools", "sympy", "mpmath", "networkx", "jinja2", "markupsafe", "fsspec")
TORCH_REQUIRES = ["filelock", "typing-extensions>=4.10.0", "setuptools>=77.0.3", "sympy>=1.13.3",
                  "networkx>=2.5.1", "jinja2", "fsspec>=0.8.5",
                  'triton~=3.8.0; platform_system == "Linux" and python_version < "3.15"']
ARCH = brokenvenv.ARCH
CP = f"cp{sys.version_info[0]}{sys.version_info[1]}"


def repack_installed(name: str, folder: Path) -> Path:
    """A wheel of the distribution ``name`` as this interpreter has it installed."""
    from cudamatrix.install.journal import repack

    dist = metadata.distribution(name)
    meta = next(f for f in dist.files or [] if f.name == "METADATA" and f.parent.name.endswith(".dist-info"))
    return repack(Path(str(dist.locate_file(meta))).parent, folder)


def build(folder: Path) -> Path:
    """Every wheel of the closure into ``folder``; returns it."""
    for name in REAL:
        repack_installed(name, folder)
    torch_pins = brokenvenv._matrix_pins("torch", "2.14.1", "cu130")
    build_wheel(folder, "torch", "2.14.1", requires=TORCH_REQUIRES + torch_pins,
                tag=f"{CP}-{CP}-manylinux_2_28_{ARCH}", files={"torch/version.py": "cuda = '13.0'\n"})
    build_wheel(folder, "triton", "3.8.0", tag=f"{CP}-{CP}-manylinux_2_28_{ARCH}")
    for pin in torch_pins:
        req = Requirement(pin)
        version = next(sp.version for sp in req.specifier if sp.operator in ("==", ">="))
        tag = f"py3-none-manylinux_2_18_{ARCH}" if req.name == "nvidia-nccl-cu13" else "py3-none-any"
        build_wheel(folder, req.name, version, tag=tag)
    return folder


def installed_versions(names=REAL) -> dict[str, str]:
    """Canonical name -> version of the real distributions as installed here."""
    from support.localindex import canonical

    return {canonical(n): metadata.version(n) for n in names}
