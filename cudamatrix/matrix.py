"""The compatibility matrix: pydantic models for ``data/`` and its loader.

The data files are JSON, one per family (``cuda.json``, ``gpus.json``, ``cudnn.json``, ``torch.json``,
``tensorflow.json``, ``jax.json``, ``advisories.json``) plus ``meta.json`` with the schema and data
versions. Every row carries ``source``: the URL of the document or the package artifact it was read from.
Unknown keys are refused; a load error names the file and the dotted path of the bad value.
"""
from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, BeforeValidator, ConfigDict, PlainSerializer, ValidationError, field_validator

from .errors import DataError

SCHEMA_VERSION = 1
FAMILIES = ("cuda", "gpus", "cudnn", "torch", "tensorflow", "jax", "advisories")


def _to_version(value: Any) -> Version:
    if isinstance(value, Version):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        raise ValueError("versions are strings, never numbers (write \"12.1\", not 12.1)")
    try:
        return Version(str(value))
    except InvalidVersion as exc:
        raise ValueError(f"not a version: {value!r}") from exc


def _to_specifier(value: Any) -> str:
    try:
        SpecifierSet(str(value))
    except InvalidSpecifier as exc:
        raise ValueError(f"not a version specifier: {value!r}") from exc
    return str(value)


Ver = Annotated[Version, BeforeValidator(_to_version), PlainSerializer(str, return_type=str)]
Spec = Annotated[str, BeforeValidator(_to_specifier)]
ComputeCapability = Annotated[str, BeforeValidator(lambda v: _cc(v))]


def _cc(value: Any) -> str:
    """Normalise "7.5", "sm_75", "75", "sm_90a" to "7.5" / "9.0a"."""
    if not isinstance(value, str):
        raise ValueError("compute capabilities are strings like \"7.5\"")
    s = value.strip().lower()
    for prefix in ("sm_", "compute_", "sm"):
        if s.startswith(prefix):
            s = s[len(prefix):]
            break
    suffix = ""
    if s and s[-1] in "af":
        suffix, s = s[-1], s[:-1]
    if "." in s:
        major, _, minor = s.partition(".")
    elif s.isdigit() and len(s) >= 2:
        major, minor = s[:-1], s[-1]
    else:
        raise ValueError(f"not a compute capability: {value!r}")
    if not (major.isdigit() and minor.isdigit()):
        raise ValueError(f"not a compute capability: {value!r}")
    return f"{int(major)}.{int(minor)}{suffix}"


def cc_key(cc: str) -> tuple[int, int]:
    """Sort key of a compute capability ("8.6" -> (8, 6)), ignoring an a/f suffix."""
    core = cc.rstrip("af")
    major, _, minor = core.partition(".")
    return int(major), int(minor or 0)


class Row(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)


# --- CUDA toolkit and driver -------------------------------------------------------------------

class CudaRelease(Row):
    """One CUDA toolkit release with its minimum drivers (NVIDIA release notes, table 3)."""

    version: Ver
    linux_min_driver: str | None = None
    windows_min_driver: str | None = None
    # compute capabilities this toolkit's compiler can generate code for (nvcc --list-gpu-arch)
    compute_capabilities: list[ComputeCapability] = []
    source: str


class MinorCompat(Row):
    """Minor-version compatibility floor of one CUDA major: any 12.x runs on this driver (SASS only)."""

    cuda_major: int
    linux_min_driver: str
    windows_min_driver: str | None = None
    limits: str
    source: str


class DriverBranch(Row):
    """The highest CUDA version a driver branch reports (``nvidia-smi`` "CUDA Version")."""

    branch: int
    max_cuda: Ver
    source: str


class CudaFile(Row):
    releases: list[CudaRelease]
    minor_compat: list[MinorCompat]
    driver_branches: list[DriverBranch]


# --- GPUs ----------------------------------------------------------------------------------------

class Architecture(Row):
    name: str
    compute_capabilities: list[ComputeCapability]
    # last driver branch that supports this architecture, where support has ended (None: still supported)
    last_driver_branch: int | None = None
    # last CUDA toolkit major.minor able to build for it, where it has ended
    last_cuda: Ver | None = None
    source: str


class Gpu(Row):
    name: str
    aliases: list[str] = []
    compute_capability: ComputeCapability
    architecture: str
    segment: Literal["datacenter", "workstation", "consumer", "jetson", "laptop", "embedded"]
    memory_gib: float | None = None
    source: str


class GpuFile(Row):
    architectures: list[Architecture]
    gpus: list[Gpu]


# --- cuDNN ---------------------------------------------------------------------------------------

class CudnnRelease(Row):
    version: Ver
    # CUDA versions this build supports, as specifiers (">=12.0,<13")
    cuda_versions: list[Spec]
    compute_capabilities: list[ComputeCapability]
    soname: str
    linux_min_driver: str | None = None
    source: str


class CudnnFile(Row):
    # cudnnGetVersion(): major*1000 + minor*100 + patch up to 8.x; major*10000 + minor*100 + patch from 9.0
    version_encoding: dict[str, str]
    releases: list[CudnnRelease]


# --- Frameworks ----------------------------------------------------------------------------------

Platform = Literal["linux_x86_64", "linux_aarch64", "win_amd64", "macos_arm64", "macos_x86_64"]


class Variant(Row):
    """One published build of a framework release (``cu121``, ``cpu``, ``and-cuda``, ``cuda12``)."""

    name: str
    index_url: str | None = None  # None: the default index (PyPI)
    cuda: Ver | None = None
    cudnn: Ver | None = None
    archs: list[ComputeCapability] = []  # SASS compiled into the binaries
    ptx: list[ComputeCapability] = []  # PTX shipped for JIT on newer GPUs
    nvidia_pins: list[str] = []  # exact nvidia-* requirements the wheel declares
    extra_packages: list[str] = []  # e.g. "jax-cuda12-plugin==0.4.30"; installed alongside
    pip_extra: str | None = None  # "and-cuda" -> tensorflow[and-cuda]
    local_version: str | None = None  # "+cu121": the index needs it in exact pins
    pypi_default: bool = False  # the plain PyPI wheel is this variant (on linux_x86_64)
    platforms: list[Platform] = []
    min_driver: str | None = None  # documented floor where the framework states its own
    source: str

    @field_validator("nvidia_pins", "extra_packages")
    @classmethod
    def _requirements_parse(cls, value: list[str]) -> list[str]:
        from packaging.requirements import InvalidRequirement, Requirement

        for item in value:
            try:
                Requirement(item)
            except InvalidRequirement as exc:
                raise ValueError(f"not a requirement: {item!r} ({exc})") from exc
        return value


class FrameworkRelease(Row):
    name: Literal["torch", "tensorflow", "jax"]
    version: Ver
    released: str | None = None  # ISO date
    python: list[str]  # "3.10", "3.11" ...
    platforms: list[Platform] = []
    companions: dict[str, str] = {}  # torchvision/torchaudio exact versions; jaxlib
    variants: list[Variant]
    notes: list[str] = []
    source: str


class FrameworkFile(Row):
    releases: list[FrameworkRelease]


# --- Advisories ----------------------------------------------------------------------------------

class Advisory(Row):
    id: str
    # requirements that all must match installed packages (PEP 508, e.g. "torch==2.3.0")
    affects: list[str]
    # optional conditions on the machine
    gpu_compute_capabilities: list[ComputeCapability] = []
    driver: Spec | None = None
    symptom: str
    fix: str
    source: str


class AdvisoryFile(Row):
    advisories: list[Advisory]


class Meta(Row):
    schema_version: int
    data_version: str
    date: str
    description: str = ""


_FILE_MODELS: dict[str, type[Row]] = {
    "cuda": CudaFile,
    "gpus": GpuFile,
    "cudnn": CudnnFile,
    "torch": FrameworkFile,
    "tensorflow": FrameworkFile,
    "jax": FrameworkFile,
    "advisories": AdvisoryFile,
}


class Matrix(BaseModel):
    """The whole loaded matrix."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    meta: Meta
    cuda: CudaFile
    gpus: GpuFile
    cudnn: CudnnFile
    torch: FrameworkFile
    tensorflow: FrameworkFile
    jax: FrameworkFile
    advisories: AdvisoryFile

    def frameworks(self, name: str) -> list[FrameworkRelease]:
        return getattr(self, name).releases


def _dotted(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def default_data_dir() -> Path:
    """The shipped data: ``cudamatrix/data`` inside an installed wheel, or ``data/`` of a checkout."""
    packaged = resources.files("cudamatrix").joinpath("data")
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parent.parent / "data"


def _read_json(path: Path) -> Any:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path.name}: missing from the matrix data folder {path.parent}") from None
    except OSError as exc:
        raise DataError(f"{path.name}: cannot be read ({exc.strerror})") from None
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        where = f" at line {exc.lineno} column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
        raise DataError(f"{path.name}: not valid JSON{where}: {exc}") from None


def load_matrix_from(data_dir: Path) -> Matrix:
    """Load and validate every data file in ``data_dir``. Raises DataError naming file and dotted path."""
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise DataError(f"{data_dir}: not a matrix data folder")
    parts: dict[str, Any] = {}
    for name, model in [("meta", Meta), *_FILE_MODELS.items()]:
        path = data_dir / f"{name}.json"
        raw = _read_json(path)
        try:
            parts[name] = model.model_validate(raw)
        except ValidationError as exc:
            problems = [f"{path.name}: {_dotted(err['loc']) or '(top level)'}: {err['msg']}"
                        for err in exc.errors()]
            raise DataError("\n".join(problems[:20]), detail=problems) from None
    if parts["meta"].schema_version != SCHEMA_VERSION:
        raise DataError(f"meta.json: schema_version: is {parts['meta'].schema_version}, "
                        f"this cudamatrix reads schema {SCHEMA_VERSION}")
    return Matrix(**parts)


@lru_cache(maxsize=4)
def load_matrix(data_dir: str | None = None) -> Matrix:
    """The shipped matrix (cached per process), or the one in ``data_dir``."""
    return load_matrix_from(Path(data_dir) if data_dir else default_data_dir())
