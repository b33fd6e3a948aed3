"""The compatibility matrix: the models of ``data/`` and its loader.

One JSON file per family (``cuda.json``, ``gpus.json``, ``cudnn.json``, ``torch.json``,
``tensorflow.json``, ``jax.json``, ``advisories.json``, ``extensions.json``) plus ``meta.json`` (schema and data versions).
Every row carries ``source``: a list of source records (:mod:`cudamatrix.matrix.sources`: the URL of the document
or the package artifact it was read from, what it states, when it was read, whose word it is).
Unknown keys are refused; a load error names the file and the dotted path of the bad value.

Trust the shipped data, validate the user's: the data shipped inside the package is built straight into
the dataclasses (:func:`cudamatrix.schema.build`, no pydantic: the tests and ``scripts/refresh_matrix.py``
validate it), while a folder the user names (``--data``, ``matrix validate PATH``) goes through pydantic
(:func:`cudamatrix.schema.validate`). Nothing is cached on disk.
"""
# no `from __future__ import annotations`: the field types stay objects, so that building the shipped
# matrix (schema.build) reads them without evaluating strings (about 15 ms saved at every start)

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from cudamatrix.errors import DataError
from cudamatrix.matrix import shipped
from cudamatrix.matrix.sources import Source, Sources, SourceText, lazy_sources  # noqa: F401
from cudamatrix.safe.text import breaks_line
from cudamatrix.schema import FORBID, build, cc_key, field, normalize_cc, record, validate  # noqa: F401
from cudamatrix.schema.annotated import CC, Driver, IndexUrl, Label, Local, Name, Req, Spec, Ver, VersionText  # noqa: F401

# 2: every row's ``source`` is a list of source records (url, states, read, kind), not free text; variants
# carry ``per_platform``; cuda.json carries ``jetpack``, cudnn.json ``gpu_floors``
SCHEMA_VERSION = 2
FILES = ("meta", "cuda", "gpus", "cudnn", "torch", "tensorflow", "jax", "advisories", "extensions")
# files a data folder may leave out (one written before they existed): the file's record, empty, stands for it
OPTIONAL = frozenset({"extensions"})

InferredField = Literal["archs", "ptx", "cudnn", "cuda", "nvidia_pins", "python"]
Platform = Literal["linux_x86_64", "linux_aarch64", "win_amd64", "macos_arm64", "macos_x86_64"]


# --- CUDA toolkit and driver -------------------------------------------------------------------

@lazy_sources
@record(frozen=True)
class CudaRelease:
    """One CUDA toolkit release with its minimum drivers ("CUDA Toolkit and Corresponding Driver Versions")."""

    version: Ver
    source: Sources
    linux_min_driver: Driver | None = None
    windows_min_driver: Driver | None = None
    # compute capabilities this toolkit's compiler can generate code for
    compute_capabilities: list[CC] = field(default_factory=list)
    __pydantic_config__ = FORBID


@lazy_sources
@record(frozen=True)
class MinorCompat:
    """Minor-version compatibility floor of one CUDA major: any 12.x app runs on this driver (SASS only)."""

    cuda_major: int
    linux_min_driver: Driver
    limits: str
    source: Sources
    windows_min_driver: Driver | None = None
    __pydantic_config__ = FORBID


@lazy_sources
@record(frozen=True)
class DriverBranch:
    """The highest CUDA version a driver branch reports (``nvidia-smi`` "CUDA Version")."""

    branch: int
    max_cuda: Ver
    source: Sources
    __pydantic_config__ = FORBID


@lazy_sources
@record(frozen=True)
class Metapackage:
    """A wheel that only requires other wheels (``cuda-toolkit``): per extra, the component requirements its
    METADATA declares, so a framework's ``cuda-toolkit[cublas,...]==X`` pin is checked as the wheels it brings."""

    name: Name
    version: Ver
    requires: dict[Name, list[Req]]  # extra -> requirements (markers dropped: Linux and Windows alike)
    source: Sources
    __pydantic_config__ = FORBID


@lazy_sources
@record(frozen=True)
class JetPack:
    """A Jetson Linux (L4T) release line of JetPack: the driver its boards report, the CUDA version that driver
    reports (a Jetson driver is not a desktop branch: R540 of JetPack 6 reports 12.6, where the desktop table
    would say 12.2), the boards it drives, and where NVIDIA publishes framework wheels for it."""

    jetpack: list[str]  # the JetPack releases of this line ("6.1", "6.2")
    l4t: str  # Jetson Linux release line ("36.4")
    driver: Driver  # "Driver Version" as nvidia-smi prints it on the board ("540.4.0")
    cuda: Ver  # the CUDA version that driver reports ("CUDA Version" of nvidia-smi)
    compute_capabilities: list[CC]  # the boards' GPUs (Orin: 8.7)
    source: Sources
    # the package index NVIDIA names for this JetPack's framework wheels (pip --extra-index-url)
    index_url: IndexUrl | None = None
    __pydantic_config__ = FORBID


@record(frozen=True)
class CudaFile:
    """cuda.json: CUDA releases, minor-version compatibility, driver branches, metapackages, Jetson drivers."""

    releases: list[CudaRelease]
    minor_compat: list[MinorCompat]
    driver_branches: list[DriverBranch]
    metapackages: list[Metapackage] = field(default_factory=list)
    jetpack: list[JetPack] = field(default_factory=list)
    __pydantic_config__ = FORBID


# --- GPUs ----------------------------------------------------------------------------------------

@lazy_sources
@record(frozen=True)
class Architecture:
    """A GPU architecture: its compute capabilities, driver floor and end of support."""

    name: str
    compute_capabilities: list[CC]
    source: Sources
    # last driver branch that supports this architecture, where support has ended (None: still supported)
    last_driver_branch: int | None = None
    # last CUDA toolkit able to build for it, where that has ended
    last_cuda: Ver | None = None
    # compute capability -> the oldest Linux driver that drives it: the driver of the first CUDA release
    # whose compiler targets it ("CUDA Toolkit and Corresponding Driver Versions"); a hard floor
    min_driver: dict[CC, Driver] = field(default_factory=dict)
    min_driver_source: Sources | None = None
    __pydantic_config__ = FORBID


@lazy_sources
@record(frozen=True)
class Gpu:
    """A GPU model by name: compute capability, architecture, segment."""

    name: str
    compute_capability: CC
    architecture: str
    segment: Literal["datacenter", "workstation", "consumer", "jetson", "laptop", "embedded"]
    source: Sources
    aliases: list[str] = field(default_factory=list)
    memory_gib: float | None = None
    __pydantic_config__ = FORBID


@record(frozen=True)
class GpuFile:
    """gpus.json: architectures and GPU models."""

    architectures: list[Architecture]
    gpus: list[Gpu]
    __pydantic_config__ = FORBID


# --- cuDNN ---------------------------------------------------------------------------------------

@lazy_sources
@record(frozen=True)
class CudnnRelease:
    """A cuDNN release: the CUDA versions and compute capabilities it supports."""

    version: Ver
    # CUDA versions this build supports, as specifiers (">=12.0,<13")
    cuda_versions: list[Spec]
    compute_capabilities: list[CC]
    soname: Label
    source: Sources
    linux_min_driver: Driver | None = None
    __pydantic_config__ = FORBID


@lazy_sources
@record(frozen=True)
class CudnnGpuFloor:
    """A cap cuDNN puts on the GPU: from the versions ``versions`` on, its kernels are built for no compute
    capability below ``min_compute_capability`` (cuDNN 9.11 dropped Maxwell, Pascal and Volta). Its sources are
    NVIDIA's document and the binaries themselves (cuobjdump of the wheels on either side of the change)."""

    versions: Spec  # ">=9.11"
    min_compute_capability: CC
    source: Sources
    __pydantic_config__ = FORBID


@record(frozen=True)
class CudnnFile:
    """cudnn.json: cuDNN releases, how cudnnGetVersion() encodes a version, and the GPU floors of its kernels."""

    # how cudnnGetVersion() encodes a version, per major range
    version_encoding: dict[str, str]
    releases: list[CudnnRelease]
    gpu_floors: list[CudnnGpuFloor] = field(default_factory=list)
    __pydantic_config__ = FORBID


# --- Frameworks ----------------------------------------------------------------------------------

@lazy_sources
@record(frozen=True)
class PlatformFacts:
    """How the wheels of one platform (wheel tag) of a variant differ from the variant's own fields, read from
    that platform's wheels: the plain default-index wheel of that platform is this variant (``pypi_default``:
    PyPI's Windows torch is the CPU build, its Linux aarch64 torch a CUDA 13 build), and its own SASS/PTX, CUDA
    and Python versions. A field left out (None) is the variant's."""

    source: Sources
    pypi_default: bool = False  # the plain default-index wheel on this platform is this variant
    cuda: Ver | None = None
    archs: list[CC] | None = None  # SASS in this platform's binaries
    ptx: list[CC] | None = None
    python: list[VersionText] | None = None  # Python versions with a wheel on this platform
    __pydantic_config__ = FORBID


@lazy_sources
@record(frozen=True)
class Variant:
    """One published build of a framework release (``cu121``, ``cpu``, ``and-cuda``, ``cuda12``)."""

    name: Label
    source: Sources
    index_url: IndexUrl | None = None  # None: the default index
    cuda: Ver | None = None
    cudnn: Ver | None = None
    archs: list[CC] = field(default_factory=list)  # SASS compiled into the binaries
    ptx: list[CC] = field(default_factory=list)  # PTX shipped for JIT on newer GPUs
    nvidia_pins: list[Req] = field(default_factory=list)  # exact nvidia-* requirements the wheel declares
    extra_packages: list[Req] = field(default_factory=list)  # installed alongside (jax-cuda12-plugin==...)
    pip_extra: Name | None = None  # "and-cuda" -> tensorflow[and-cuda]
    local_version: Local | None = None  # "+cu121": the index needs it in exact pins
    pypi_default: bool = False  # the plain default-index wheel is this variant (linux_x86_64)
    platforms: list[Platform] = field(default_factory=list)  # empty: the release's platforms
    min_driver: Driver | None = None  # a floor the framework documents itself
    # the C++ ABI of the Linux x86_64 wheel (torch._C._GLIBCXX_USE_CXX11_ABI, or c10::Error's std::string in its
    # libc10.so symbols): True C++11, False pre-C++11; None: no artifact or first-party statement read says
    cxx11_abi: bool | None = None
    # facts of this row not read from an artifact but inferred from a named neighbour by a documented rule:
    # field name ("archs", "ptx", "cudnn", "cuda", "nvidia_pins", "python") -> the basis, one sentence.
    # A field that is empty and not listed here is unknown, and no rule passes on it.
    inferred: dict[InferredField, str] = field(default_factory=dict)
    # platform -> what that platform's wheels say where it differs from the fields above (read by the solver
    # work that follows schema 2: until then the solver applies the variant's own fields on every platform)
    per_platform: dict[Platform, PlatformFacts] = field(default_factory=dict)
    __pydantic_config__ = FORBID


@lazy_sources
@record(frozen=True)
class FrameworkRelease:
    """One framework release: supported Pythons and its build variants."""

    name: Literal["torch", "tensorflow", "jax"]
    version: Ver
    python: list[VersionText]  # "3.10", "3.11" ...
    variants: list[Variant]
    source: Sources
    released: str | None = None  # ISO date
    platforms: list[Platform] = field(default_factory=list)
    companions: dict[Name, VersionText] = field(default_factory=dict)  # torchvision/torchaudio; jaxlib
    notes: list[str] = field(default_factory=list)
    # why the index withdrew this release (PEP 592 yanked): pip installs it only when pinned exactly
    yanked: str | None = None
    __pydantic_config__ = FORBID


@record(frozen=True)
class FrameworkFile:
    """A framework file (torch.json, tensorflow.json, jax.json): its releases."""

    releases: list[FrameworkRelease]
    __pydantic_config__ = FORBID


# --- Advisories ----------------------------------------------------------------------------------

@lazy_sources
@record(frozen=True)
class Advisory:
    """A known-bad combination: what it affects, its symptom, its fix and source."""

    id: str
    # requirements that must all match installed packages ("torch==2.3.0")
    affects: list[Req]
    symptom: str
    fix: str
    source: Sources
    # optional conditions on the machine
    gpu_compute_capabilities: list[CC] = field(default_factory=list)
    driver: Spec | None = None
    # a library the failure needs to see ("cudnn"): loaded at a version of ``library_version`` ("<8.3.2"), or,
    # with ``library_missing``, not loaded at all; unknown when the facts show neither (a note, not an error)
    library: Label | None = None
    library_version: Spec | None = None
    library_missing: bool = False
    __pydantic_config__ = FORBID


@record(frozen=True)
class AdvisoryFile:
    """advisories.json: the known-bad combinations."""

    advisories: list[Advisory]
    __pydantic_config__ = FORBID


# --- Torch extensions ------------------------------------------------------------------------------

@lazy_sources
@record(frozen=True)
class ExtensionRelease:
    """One release of a package built against a framework (vllm, xformers, sglang, onnxruntime-gpu,
    cupy-cudaNNx), read from its wheels (``scripts/refresh_extensions.py``): what their METADATA requires of
    torch, its companions and the other extensions (Linux x86_64 markers applied), the CUDA major it is built
    for where the name, the METADATA or its libraries state one, and its wheels' Pythons and platforms."""

    name: Name
    version: Ver
    python: list[VersionText]  # Python versions with a wheel
    source: Sources
    platforms: list[Platform] = field(default_factory=list)
    # distribution -> the specifier its Requires-Dist states ("torch": "==2.8.0"; "" names no version)
    requires: dict[Name, Spec] = field(default_factory=dict)
    cuda_major: int | None = None  # None: it follows the framework's (it pins torch), or no artifact says
    index_url: IndexUrl | None = None  # None: the default index
    __pydantic_config__ = FORBID


@lazy_sources
@record(frozen=True)
class ReleaseFiles:
    """A package whose binary wheels are release files, not index entries (flash-attn): the file-name rule its
    own build script states at a tag, and what of it could not be read."""

    name: Name
    # the wheel's local version: ``{cuda_major}`` ``{torch}`` (major.minor) ``{abi}`` (TRUE/FALSE) filled in
    local: str
    source: Sources
    versions: Spec | None = None  # the releases the rule covers; None: not read (the build script at one commit)
    url: str = ""  # the release file URL with ``{version}``, ``{local}``, ``{python}`` and ``{platform}``
    unread: str = ""  # what could not be read (the release files themselves, their list per release)
    __pydantic_config__ = FORBID


@record(frozen=True)
class FileExclude:
    """One ``exclude`` entry of a release workflow's build matrix: the combination it leaves out (a key it does not
    name matches every value)."""

    python: VersionText | None = None
    torch: VersionText | None = None
    cuda: VersionText | None = None
    cxx11_abi: bool | None = None
    __pydantic_config__ = FORBID


@lazy_sources
@record(frozen=True)
class ReleaseFileSet:
    """The files one release of a release-file package (flash-attn) has: the build matrix of its own release
    workflow at the release's tag (``scripts/refresh_extensions.py --flash-attn-clone``), every combination of
    its values but the excludes, each file named by the package's ``ReleaseFiles`` rule."""

    name: Name
    version: Ver
    python: list[VersionText]
    torch: list[VersionText]  # the torch releases built against, as written ("2.4.0", "2.6.0.dev20241001")
    cuda: list[VersionText]  # the CUDA toolkits built with ("12.9.1"): the file's cu{major}
    cxx11_abi: list[bool]
    platforms: list[Platform]
    source: Sources
    exclude: list[FileExclude] = field(default_factory=list)
    __pydantic_config__ = FORBID


@lazy_sources
@record(frozen=True)
class ExtensionGpuFloor:
    """The lowest compute capability a package's own README or documentation states for its releases ``versions``
    (flash-attn 2: Ampere or newer; vLLM: 7.0 or higher): on a GPU below it the package does not run, whatever
    kernels its files carry. Its source is the package's first-party text at a tag."""

    names: list[Name]  # the distributions it covers (cupy-cuda11x, cupy-cuda12x, ...)
    versions: Spec  # the releases whose text states it (">=2.0.0")
    min_compute_capability: CC
    source: Sources
    __pydantic_config__ = FORBID


@lazy_sources
@record(frozen=True)
class LibraryChoice:
    """How a package that carries one library per CUDA release picks the one it loads, as its own loader code states
    for its releases ``versions`` (bitsandbytes: ``libbitsandbytes_cuda{major}{minor}``, named by torch's CUDA).
    ``choose``: ``exact`` loads the file of torch's CUDA major and minor only; ``same_major`` that file, else the
    highest of the same major below it, else the lowest above it, never another major. ``override``: the
    environment variable that names the release to load instead (``{major}{minor}``); ``missing``: what the package
    does when the file it chose is not among its files; ``carried``: the CUDA releases of the files each release's
    Linux x86_64 wheel has, as read from the wheel."""

    names: list[Name]
    versions: Spec
    prefix: Label  # the files' name before the release ("libbitsandbytes_cuda"): {prefix}{major}{minor}[_...].so
    choose: Literal["exact", "same_major"]
    missing: str
    source: Sources
    override: Label | None = None
    carried: dict[VersionText, list[VersionText]] = field(default_factory=dict)  # release -> CUDA ("13.0") its wheel has
    __pydantic_config__ = FORBID


@lazy_sources
@record(frozen=True)
class FindLinksBuild:
    """One release of a package built for one torch release's find-links pages, one per CUDA variant (PyG's
    torch-scatter 2.1.2 for torch 2.8.0: cpu, cu126, cu128, cu129), as the package's own build workflow states
    it at a commit (``scripts/read_pyg_builds.py``)."""

    name: Name
    version: Ver  # the public version; each page's wheel appends the pages' local tag
    torch: Ver  # the torch release the workflow builds against ("2.8.0": its page serves every 2.8.x)
    variants: list[Label]  # the CUDA variants built ("cpu", "cu128"): one page each
    source: Sources
    python: list[VersionText] = field(default_factory=list)  # empty: the workflow names none (one wheel for all)
    platforms: list[Platform] = field(default_factory=list)
    __pydantic_config__ = FORBID


@lazy_sources
@record(frozen=True)
class FindLinks:
    """Pages of compiled wheels that are not on the package index, one per (torch release, CUDA variant) (PyG's
    extensions): the page's URL and the wheels' local version tag, each a pattern of ``{torch}`` and
    ``{variant}``, the builds each page carries, and what of them could not be read (the pages themselves)."""

    name: Label  # "pyg"
    url: str  # "https://.../torch-{torch}+{variant}.html": {torch} is the build's torch release ("2.8.0")
    local: str  # "+pt{torch}{variant}": {torch} is major and minor without the dot ("28")
    source: Sources
    builds: list[FindLinksBuild] = field(default_factory=list)
    unread: str = ""
    __pydantic_config__ = FORBID

    def page(self, torch: str, variant: str) -> str:
        """The page's URL for a torch release ("2.8.0") and variant: the pattern's two names replaced, no other
        brace read (a pattern in a user's --data folder reaches nothing else)."""
        return self.url.replace("{torch}", torch).replace("{variant}", variant)

    def tag(self, torch: str, variant: str) -> str:
        """The wheels' local tag for a torch major and minor without the dot ("28") and variant ("+pt28cu128")."""
        return self.local.replace("{torch}", torch).replace("{variant}", variant)


@record(frozen=True)
class ExtensionFile:
    """extensions.json: the extensions' releases, the release-file rules, the packages' own GPU floors, the
    find-links pages of packages whose compiled wheels live there, and how a package with one library per CUDA
    release picks the one it loads."""

    releases: list[ExtensionRelease] = field(default_factory=list)
    release_files: list[ReleaseFiles] = field(default_factory=list)
    release_file_sets: list[ReleaseFileSet] = field(default_factory=list)  # per release: the files it has
    gpu_floors: list[ExtensionGpuFloor] = field(default_factory=list)
    find_links: list[FindLinks] = field(default_factory=list)
    library_choices: list[LibraryChoice] = field(default_factory=list)  # which per-CUDA library a package loads
    __pydantic_config__ = FORBID


@record(frozen=True)
class Meta:
    """meta.json: schema and data versions of the matrix."""

    schema_version: int
    data_version: Label  # "2026.11.26": one word
    date: str
    description: str = ""
    __pydantic_config__ = FORBID


@record(frozen=True, eq=False)
class Matrix:
    """The whole loaded matrix."""

    meta: Meta
    cuda: CudaFile
    gpus: GpuFile
    cudnn: CudnnFile
    torch: FrameworkFile
    tensorflow: FrameworkFile
    jax: FrameworkFile
    advisories: AdvisoryFile
    extensions: ExtensionFile = field(default_factory=ExtensionFile)

    __pydantic_config__ = FORBID

    def frameworks(self, name: str) -> list[FrameworkRelease]:
        return getattr(self, name).releases

    if not TYPE_CHECKING:  # the type checker keeps seeing the fields above, and a misspelt one as an error
        def __getattr__(self, name: str) -> Any:
            """A file of the shipped matrix built on first use (:func:`build_lazily`): a command reads only the
            files it asks about (doctor on a machine without a framework: the advisories, not the 600 KB of
            framework rows). Any other missing attribute is an AttributeError, as usual."""
            pending = self.__dict__.get("_pending")
            if pending is None:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            with _BUILDING:  # one thread builds a file; another asking meanwhile waits and finds it built
                if name in self.__dict__:
                    return self.__dict__[name]
                if name not in pending and name in OPTIONAL:  # a folder without it: the empty file
                    self.__dict__[name] = _FIELD_TYPES[name]()
                    return self.__dict__[name]
                if name not in pending:
                    raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
                value = _build_file(name, pending[name])
                self.__dict__[name] = value  # once: later reads find it in the instance (no __getattr__)
                del pending[name]  # its bytes are not held any longer
            return value


_FIELD_TYPES: dict[str, type] = {"meta": Meta, "cuda": CudaFile, "gpus": GpuFile, "cudnn": CudnnFile,
                                 "torch": FrameworkFile, "tensorflow": FrameworkFile, "jax": FrameworkFile,
                                 "advisories": AdvisoryFile, "extensions": ExtensionFile}  # each file's record: the Matrix field of its name


def default_data_dir() -> Path:
    """The shipped data: ``cudamatrix/data`` inside an installed wheel, or ``data/`` of a checkout
    (:func:`~cudamatrix.matrix.shipped.data_dir`)."""
    return Path(shipped.data_dir())


_BUILDING = threading.RLock()  # reentrant: a build that reads another file of the matrix does not wait on itself


def _check_schema(parsed: dict[str, Any]) -> None:
    meta = parsed.get("meta")
    if isinstance(meta, dict) and meta.get("schema_version") != SCHEMA_VERSION:
        raise DataError(f"meta.json: schema_version: is {meta.get('schema_version')!r}, "
                        f"this cudamatrix reads schema {SCHEMA_VERSION}")


def validate_files(raws: dict[str, bytes]) -> Matrix:
    """Validate raw file contents (name -> bytes) into a Matrix with pydantic. Raises DataError.

    For data a user supplies; one validator covers all files (pydantic builds it once). No text of it may
    hold a line break or another control character (it reaches lock files and terminals)."""
    parsed = {name: shipped.parse(f"{name}.json", raw) for name, raw in raws.items()}
    _check_schema(parsed)
    for name, doc in parsed.items():
        where = control_text(doc)
        if where is not None:
            raise DataError(f"{name}.json: {where}: holds a line break or a control character",
                            hint="matrix data is one-line text: index URLs, names, versions, sources")
    return validate(Matrix, parsed, None)


def control_text(doc: Any, path: str = "") -> str | None:
    """The dotted path of the first key or string in ``doc`` that holds a control character (a line
    break, an escape, a bidirectional override), or None (iterative: no recursion)."""
    stack: list[tuple[Any, str]] = [(doc, path)]
    while stack:
        value, where = stack.pop()
        if isinstance(value, str):
            if breaks_line(value):
                return where or "(top level)"
        elif isinstance(value, dict):
            for k, v in value.items():
                if isinstance(k, str) and breaks_line(k):
                    return f"{where}.{k!r}".lstrip(".")
                stack.append((v, f"{where}.{k}".lstrip(".")))
        elif isinstance(value, list):
            stack += [(v, f"{where}[{i}]") for i, v in enumerate(value)]
    return None


def build_files(raws: dict[str, bytes]) -> Matrix:
    """A Matrix of trusted raw file contents (the shipped data), every file built now (:func:`build_lazily`
    builds each on first use). Raises DataError when a file is not even of the right shape (a broken
    installation)."""
    matrix = build_lazily(raws)
    for name in FILES:
        getattr(matrix, name)
    return matrix


def build_lazily(raws: Mapping[str, bytes | Path]) -> Matrix:
    """A Matrix of trusted raw file contents (the shipped data) built without validation, each file parsed and
    built on first use (a file given by its path is read then, and its bytes are let go once it is built).
    ``meta.json`` is read now: a schema this release cannot read is refused at once. Raises DataError, now for
    the meta file and on first use for the others.

    This second loader beside pydantic pays for itself: validating the shipped data with pydantic instead made
    ``solve`` (four frameworks, one target) take 1.9 times the CPU time and ``doctor`` 1.8 times (paired runs,
    medians of 15); the tests check both loaders give the same Matrix. Building on first use spares ``doctor``
    on a machine without a framework, ``lock torch`` and ``matrix show`` the files they never read."""
    raw = raws["meta"]
    raw = shipped.read(raw) if isinstance(raw, Path) else raw
    meta = shipped.parse("meta.json", raw)
    _check_schema({"meta": meta})
    matrix = object.__new__(Matrix)
    matrix.__dict__["meta"] = _build_file("meta", raw, meta)
    matrix.__dict__["_pending"] = {name: raw for name, raw in raws.items() if name != "meta"}  # left to build
    return matrix


def _build_file(name: str, raw: bytes | Path, parsed: Any = None) -> Any:
    """One shipped file built as the Matrix field ``name`` holds it. Raises DataError as :func:`build_files`."""
    import gc

    if parsed is None:
        parsed = shipped.parse(f"{name}.json", shipped.read(raw) if isinstance(raw, Path) else raw)
    # some ten thousand objects and no cycle among them: the cyclic collector would only walk them again
    was_on = gc.isenabled()
    gc.disable()
    try:
        return build(_FIELD_TYPES[name], parsed)
    except (TypeError, ValueError, AttributeError, KeyError) as exc:
        raise DataError(f"the shipped matrix data is malformed ({name}.json: {exc}); run `cudamatrix matrix "
                        f"validate`", hint="reinstall cudamatrix") from None
    finally:
        if was_on:
            gc.enable()


def load_matrix_from(data_dir: Path, *, trusted: bool = False) -> Matrix:
    """Load every data file in ``data_dir``: validated (the default), or built as trusted data.

    Returns the Matrix. Raises DataError naming the file and the dotted path of a bad value."""
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise DataError(f"{data_dir}: not a matrix data folder")
    names = [n for n in FILES if n not in OPTIONAL or (data_dir / f"{n}.json").exists()]
    if not trusted:
        return validate_files({name: shipped.read(data_dir / f"{name}.json") for name in names})
    # a file missing is told at the load, as before; each file is read on first use (a command reads only what
    # it asks about)
    return build_lazily({name: shipped.present(data_dir / f"{name}.json") for name in names})
