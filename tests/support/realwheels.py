"""Real library files for the loader tests: members of real nvidia-* wheels, read from the package index pip uses
by HTTP range requests (only the named members, not the whole wheel) and kept in a cache folder, and the
torch CUDA venvs .ci/run makes ($CUDAMATRIX_TORCH_CUDA_PYTHON: torch 2.14.1 with cuDNN 9.24.0.43;
$CUDAMATRIX_TORCH211_PYTHON: torch 2.11.0 with cuDNN 9.19.0.56).

The cache is $CUDAMATRIX_WHEEL_CACHE, else ``.wheel-members/`` in the checkout (ignored by git, kept by .ci/run
between runs). A member that cannot be read skips the test, and fails it where CI=true.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("CUDAMATRIX_WHEEL_CACHE") or REPO / ".wheel-members")
TORCH_PY = os.environ.get("CUDAMATRIX_TORCH_CUDA_PYTHON")
TORCH211_PY = os.environ.get("CUDAMATRIX_TORCH211_PYTHON")


def _unavailable(why: str):
    if os.environ.get("CI") == "true":
        pytest.fail(why, pytrace=False)
    pytest.skip(why)


def fetch(dist: str, version: str, members: list[str]) -> Path:
    """A folder holding ``members`` (paths inside the wheel, e.g. ``nvidia/cudnn/lib/libcudnn.so.9``) of the
    linux x86_64 wheel ``dist==version``, under their base names."""
    from packaging.version import Version

    from cudamatrix.matrix import discover
    from cudamatrix.matrix.index import IndexClient, IndexReadError, pip_default_index

    folder = CACHE / f"{dist}-{version}"
    missing = [m for m in members if not (folder / os.path.basename(m)).exists()]
    if not missing:
        return folder
    try:
        client = IndexClient(pip_default_index(), member_max=2 << 30)  # CUDA libraries: hundreds of MB each
        f = discover.pick(discover.releases(client.project(dist)).get(Version(version), []))
        if f is None:
            _unavailable(f"{dist}=={version}: no linux x86_64 wheel on the index")
        folder.mkdir(parents=True, exist_ok=True)
        for member in missing:
            got = client.member(f, member)
            if got is None:
                _unavailable(f"{f.filename} has no member {member}")
            tmp = folder / f"{os.path.basename(member)}.{os.getpid()}.part"  # parallel test workers write apart
            tmp.write_bytes(got[1])
            tmp.rename(folder / os.path.basename(member))
    except (IndexReadError, OSError) as exc:
        _unavailable(f"could not read {dist}=={version} from the index: {exc}")
    return folder


def site_packages(python: str | None, what: str) -> Path:
    """The site-packages of a torch CUDA venv named by an environment variable (skip when unset)."""
    if not python:
        _unavailable(f"{what} is not set: .ci/run makes that venv")
    out = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, timeout=60)
    return Path(out.stdout.strip())


def system_layout(src: Path, version: str, dest: Path, names: list[str]) -> Path:
    """``dest`` laid out like a distribution's cuDNN package: each library as ``libX.so.<version>`` (a real copy)
    with the ``libX.so.<major>`` symlink the package ships (``/lib/x86_64-linux-gnu`` on Debian and Ubuntu)."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in names:
        full = f"{name[:name.index('.so') + 3]}.{version}"
        if not (dest / full).exists():
            shutil.copy2(src / name, dest / full)
            (dest / name).symlink_to(full)
    return dest
