"""CUDA toolkits: ``nvcc --version`` and the version files of /usr/local/cuda*, CUDA_HOME and CUDA_PATH.

A toolkit is what compiles CUDA code; it is kept apart from ``Driver.cuda_version`` (the newest CUDA the
driver runs), which is a different fact: a 12.4 toolkit on a driver that supports 12.2 is a common report.
"""
from __future__ import annotations

import os

from cudamatrix import proc
from cudamatrix.errors import CudamatrixError
from cudamatrix.ldso.paths import glob_one
from cudamatrix.models import Note, Toolkit
from cudamatrix.safe.files import parse_json, read_bytes
from cudamatrix.safe.text import lazy

_RELEASE = lazy(r"release (?P<short>\d+\.\d+), V(?P<full>\d+\.\d+\.\d+)")
_RELEASE_SHORT = lazy(r"Cuda compilation tools, release (?P<short>\d+\.\d+)")
_VERSION_TXT = lazy(r"CUDA Version (?P<v>\d+\.\d+(?:\.\d+)?)")


def parse_nvcc(text: str) -> str | None:
    """The toolkit version from ``nvcc --version`` ("13.0.88", or "11.5" when only the short form is there)."""
    m = _RELEASE.search(text)
    if m:
        return m.group("full")
    m = _RELEASE_SHORT.search(text)
    return m.group("short") if m else None


def read_version_file(base: str) -> tuple[str | None, str | None]:
    """(version, file name) of the toolkit at ``base``: version.json (CUDA >= 11.1) or version.txt (older)."""
    try:  # bounded, and a FIFO or device planted at the name is refused before it is read
        data = parse_json(read_bytes(os.path.join(base, "version.json"), limit=1 << 20, error=CudamatrixError))
        v = (data.get("cuda") or data.get("cuda_cudart") or {}).get("version")
        if isinstance(v, str):
            return v, "version.json"
    except (CudamatrixError, ValueError, AttributeError):
        pass
    try:
        raw = read_bytes(os.path.join(base, "version.txt"), limit=1000, error=CudamatrixError, truncate=True)
    except CudamatrixError:
        return None, None
    m = _VERSION_TXT.search(raw.decode("utf-8", "replace"))
    return (m.group("v"), "version.txt") if m else (None, None)


def probe(environ: dict[str, str], root: str, timeout: float) -> tuple[list[Toolkit], list[Note]]:
    """Toolkits found through nvcc on PATH and through the usual install folders."""
    toolkits: list[Toolkit] = []
    notes: list[Note] = []
    nvcc = proc.which("nvcc", path=environ.get("PATH"))
    if nvcc:
        result = proc.run([nvcc, "--version"], timeout=timeout)
        version = parse_nvcc(result.stdout)
        if version:
            toolkits.append(Toolkit(source="nvcc --version", version=version, path=os.path.realpath(nvcc)))
        else:
            notes.append(Note("nvcc", f"nvcc --version gave no version: {result.error or result.stdout.strip()[:200]}"))
    bases: list[str] = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if environ.get(var):
            bases.append(environ[var])
    bases += sorted(glob_one(os.path.join(root, "usr/local"), "cuda*"))
    seen: set[str] = set()
    for base in bases:
        real = os.path.realpath(base)
        if real in seen or not os.path.isdir(real):
            continue
        seen.add(real)
        version, source = read_version_file(base)
        if version and source:  # read_version_file gives both or neither
            toolkits.append(Toolkit(source=source, version=version, path=base))
    return toolkits, notes
