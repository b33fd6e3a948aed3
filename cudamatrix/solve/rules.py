"""The hard rules: does one framework build (release × variant) run on one Target?

Each rule returns Reasons naming the rule, what failed, and the matrix row it came from. Used by the
solver for every candidate and by ``doctor`` for what is installed. No I/O.

Sources of the rules:
- driver floors and minor-version compatibility: NVIDIA CUDA Toolkit release notes (table
  "CUDA Toolkit and Corresponding Driver Versions") and the CUDA Compatibility guide, which says an
  application running under minor-version compatibility needs SASS for the GPU: PTX JIT is not covered.
- SASS runs on GPUs of the same major compute capability with an equal or higher minor; PTX for an
  architecture can be JIT-compiled for any equal or higher one (CUDA C++ Programming Guide,
  "Binary Compatibility" and "PTX Compatibility"). Arch-specific targets ("9.0a") run on that GPU only.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Callable

from packaging.version import Version

from cudamatrix.matrix.data import CudnnRelease, FrameworkRelease, Matrix, Variant
from cudamatrix.matrix.query import (
    architecture,
    cuda_release,
    driver_max_cuda,
    driver_version,
    jetpack_only,
    on_platform,
)
from cudamatrix.schema import cc_key, field, record

# the CUDA wheel requirements of a build live in pins; re-exported for the rules' callers
from cudamatrix.solve.pins import (  # noqa: F401
    bundles_nvidia_wheels,
    conflict_pins,
    cudnn_for_gpus,
    expand_metapackage,
    implied_pins,
    library_key,
    marker_env,
    pin_conflicts,
    pins_for,
)
from cudamatrix.solve.target import Target, TargetGpu, board_of


@record(frozen=True)
class Reason:
    """Why a rule rejects a candidate (or cannot judge it): the rule id and a sentence."""

    # driver_floor, gpu_driver, arch, jetson, cudnn_gpu, python, platform, request, shared_nvidia, co_installed;
    # "unknown": the rule reads a fact the matrix does not hold, so it cannot pass
    rule: str
    message: str
    row: str | None = None  # the matrix row's source
    need_driver: str | None = None  # for driver_floor: the driver that would do
    # the words around each place the message quotes the target's driver (``message`` is the driver joining
    # them), None where it quotes none: a target alike for the rules but for its driver gets the reason with its
    # own driver put there (solve/driverclass), a fact substituted, never a sentence searched
    around_driver: tuple[str, ...] | None = field(default=None, repr=False, compare=False)

    def words(self) -> str:
        """The message, as :class:`DriverWords` where it quotes the target's driver (made when a NoSolution is
        put together: the screens read ``message``)."""
        around = self.around_driver
        if around is None:
            return self.message
        size = (len(self.message) - sum(map(len, around))) // (len(around) - 1)
        return DriverWords(self.message[len(around[0]):len(around[0]) + size], around)

    def for_driver(self, driver: str) -> Reason:
        """The same reason about ``driver`` (itself when its words quote no driver), made without the record's
        ``__init__`` (a fleet's verdicts make one per node and reason quoting its driver: tens of thousands)."""
        if self.around_driver is None:
            return self
        new = object.__new__(Reason)
        fields = new.__dict__
        fields.update(self.__dict__)
        fields["message"] = driver.join(self.around_driver)
        return new


class DriverWords(str):
    """Words that quote a target's driver: the text, the driver and the words around each place it stands
    (``around``), so that the same words about another driver are made from these facts (:meth:`for_driver`; a
    fleet's classes alike but for their driver share one answer), never by searching the text."""

    driver: str
    around: tuple[str, ...]

    def __new__(cls, driver: str, around: tuple[str, ...]) -> DriverWords:
        self = super().__new__(cls, driver.join(around))
        self.driver, self.around = driver, around
        return self

    def __reduce__(self) -> tuple:
        return DriverWords, (self.driver, self.around)

    def for_driver(self, driver: str) -> DriverWords:
        return DriverWords(driver, self.around)


def joined_words(*pieces: str) -> str:
    """The pieces as one text: :class:`DriverWords` when some quote a driver, all the same one (their places
    kept), else a plain str."""
    quoting = [p for p in pieces if isinstance(p, DriverWords)]
    if not quoting or any(p.driver != quoting[0].driver for p in quoting):
        return "".join(pieces)
    around = [""]
    for piece in pieces:
        if isinstance(piece, DriverWords):
            around[-1] += piece.around[0]
            around += piece.around[1:]
        else:
            around[-1] += piece
    return DriverWords(quoting[0].driver, tuple(around))


def about_driver(rule: str, driver: str, words: tuple[str, ...], row: str | None = None,
                 need_driver: str | None = None) -> Reason:
    """A Reason whose sentence quotes the target's ``driver`` between each two of ``words``."""
    return Reason(rule, driver.join(words), row, need_driver, words)


def sass_covers(archs: list[str], cc: str) -> bool:
    major, minor = cc_key(cc)
    for arch in archs:
        a_major, a_minor = cc_key(arch)
        if arch[-1:] in ("a", "f"):
            if (a_major, a_minor) == (major, minor) or (arch.endswith("f") and a_major == major and a_minor <= minor):
                return True
            continue
        if a_major == major and a_minor <= minor:
            return True
    return False


def ptx_covers(ptx: list[str], cc: str) -> bool:
    return any(not p.endswith(("a", "f")) and cc_key(p) <= cc_key(cc) for p in ptx)


@lru_cache(maxsize=1024)  # asked for each candidate and target when builds are ranked (search.preference)
def driver_floors(matrix: Matrix, cuda: Version, platform: str) -> tuple[str | None, str | None, str | None]:
    """(full floor, minor-version-compatibility floor, source) for a CUDA version on a platform."""
    rel = cuda_release(matrix, cuda)
    windows = platform.startswith("win")
    full = (rel.windows_min_driver if windows else rel.linux_min_driver) if rel else None
    minor = None
    for row in matrix.cuda.minor_compat:
        if row.cuda_major == cuda.major:
            minor = row.windows_min_driver if windows else row.linux_min_driver
    return full, minor, rel.source if rel else None


@lru_cache(maxsize=1024)
def cudnn_row(matrix: Matrix, version: Version) -> CudnnRelease | None:
    """The cuDNN row for a version: the same major.minor, else the nearest lower one of the same major."""
    best = None
    for row in matrix.cudnn.releases:
        if row.version.major == version.major and row.version.release[:2] <= version.release[:2] and \
                (best is None or row.version > best.version):
            best = row
    return best


def _ge(driver: str, floor: str) -> bool:
    try:
        return driver_version(driver) >= driver_version(floor)
    except ValueError:
        return False


_VIEWS: dict[tuple[int, str], tuple[Variant, Variant]] = {}


def platform_variant(variant: Variant, platform: str) -> Variant:
    """The variant as its wheels for ``platform`` are (:func:`cudamatrix.matrix.query.on_platform`: PyPI's aarch64
    torch 2.11-2.15 is a CUDA 13 build with sm_80 ... sm_120 and no sm_75; PyPI's Windows torch is the CPU build):
    its CUDA, SASS, PTX and whether the plain default-index wheel is it, read from that platform's wheels. The
    variant itself where the matrix records nothing of its own for that platform."""
    facts = variant.per_platform.get(platform)  # type: ignore[call-overload]
    if facts is None:
        return variant
    key = (id(variant), platform)
    cached = _VIEWS.get(key)
    if cached is not None and cached[0] is variant:
        return cached[1]

    seen = on_platform(variant, platform)
    view = Variant(**{**vars(variant), "cuda": seen.cuda, "archs": list(seen.archs or []), "ptx": list(seen.ptx or []),
                      "pypi_default": seen.pypi_default})
    _VIEWS[key] = (variant, view)
    return view


class Build:
    """One candidate build (release x variant) on one Target: what every rule reads, with the driver facts more
    than one rule needs worked out once."""

    __slots__ = ("matrix", "release", "variant", "target", "label", "_floors", "python")

    def __init__(self, matrix: Matrix, release: FrameworkRelease, variant: Variant, target: Target) -> None:
        self.matrix, self.release, self.target = matrix, release, target
        self.variant = platform_variant(variant, target.platform)
        facts = variant.per_platform.get(target.platform)  # type: ignore[call-overload]
        own = facts.python if facts is not None else None
        self.python: list[str] = [str(p) for p in (own or release.python)]
        self.label = f"{release.name} {release.version} {variant.name}"
        self._floors: tuple[str | None, str | None, str | None] | None = None

    @property
    def floors(self) -> tuple[str | None, str | None, str | None]:
        """:func:`driver_floors` of the build's CUDA on the target's platform (a CUDA build only)."""
        if self._floors is None:
            assert self.variant.cuda is not None  # the CUDA rules run for CUDA builds only
            self._floors = driver_floors(self.matrix, self.variant.cuda, self.target.platform)
        return self._floors

    def minor_compat_only(self) -> bool:
        """The target's driver runs the build's CUDA only under minor-version compatibility (SASS only, no PTX
        JIT), and no driver floor of the build fails."""
        driver = self.target.driver
        if not driver:
            return False
        full, minor, _ = self.floors
        if (full and _ge(driver, full)) or not (minor and _ge(driver, minor)):
            return False
        min_driver = self.variant.min_driver
        return not (min_driver and not _ge(driver, min_driver))


BuildRule = Callable[[Build], list[Reason]]
GpuRule = Callable[[Build, TargetGpu], list[Reason]]


def check(matrix: Matrix, release: FrameworkRelease, variant: Variant, target: Target) -> list[Reason]:
    """Every hard rule the build breaks on the target; empty when it fits. The rules are the functions of
    :data:`BUILD_RULES`, :data:`CUDA_RULES` and :data:`GPU_RULES` (defined below them), asked in that order."""
    build = Build(matrix, release, variant, target)
    reasons: list[Reason] = []
    for build_rule in BUILD_RULES:
        reasons += build_rule(build)
    if build.variant.cuda is None or not (target.has_gpu or target.driver):
        return reasons
    for cuda_rule in CUDA_RULES:
        reasons += cuda_rule(build)
    for gpu in target.gpus:
        for gpu_rule in GPU_RULES:
            found = gpu_rule(build, gpu)
            reasons += found
            if found and gpu_rule in DECISIVE:
                break
    return reasons


def platform(build: Build) -> list[Reason]:
    """Rule ``platform``: the build is published for the target's platform. PyTorch "Get Started": macOS
    binaries carry no CUDA; otherwise the platforms the matrix row lists (the index's wheel tags), and those whose
    wheels it records facts of (``per_platform``)."""
    variant, platform = build.variant, build.target.platform
    platforms = variant.platforms or build.release.platforms
    if variant.cuda is not None and platform.startswith("macos"):
        return [Reason("platform", f"{build.label} is a CUDA build; CUDA builds are not published for macOS",
                       variant.source)]
    if platforms and platform not in platforms and platform not in variant.per_platform:  # facts read there
        return [Reason("platform", f"{build.label} is not published for {platform} "
                                   f"(only {', '.join(platforms)})", variant.source)]
    return []


def python(build: Build) -> list[Reason]:
    """Rule ``python``: the release has wheels for the target's Python (the index's wheel tags, as the matrix row
    lists them); ``unknown`` when the row lists none."""
    release, want, pythons = build.release, build.target.python, build.python
    if want and pythons and want not in pythons:
        on = f" on {build.target.platform}" if pythons != [str(p) for p in release.python] else ""
        return [Reason("python", f"{build.label} supports Python {', '.join(pythons)}{on}, not {want}",
                       release.source)]
    if want and not pythons:
        return [Reason("unknown", f"the Python versions {build.label} is published for are not in the matrix, "
                                  f"so Python {want} cannot be checked", release.source)]
    return []


def system_cuda(build: Build) -> list[Reason]:
    """Rule ``system_cuda``: TensorFlow builds without nvidia-* wheels load the system's CUDA libraries, so the
    target's toolkit must be of the major they were built with (TensorFlow "Tested build configurations")."""
    release, variant, target = build.release, build.variant, build.target
    if release.name != "tensorflow" or not target.cuda_toolkit or bundles_nvidia_wheels(release, variant, target):
        return []
    try:
        have = Version(target.cuda_toolkit)
    except Exception:
        return []
    assert variant.cuda is not None  # a CUDA rule
    if have.major == variant.cuda.major:
        return []
    return [Reason("system_cuda", f"{build.label} loads the system's CUDA {variant.cuda} libraries; "
                                  f"the target's toolkit is CUDA {target.cuda_toolkit}", variant.source)]


def driver_floor(build: Build) -> list[Reason]:
    """Rule ``driver_floor``: the driver runs the build's CUDA, fully or under minor-version compatibility
    (NVIDIA CUDA Toolkit release notes, table "CUDA Toolkit and Corresponding Driver Versions", and the CUDA
    Compatibility guide); ``unknown`` when the matrix holds no floor for that CUDA."""
    driver, variant = build.target.driver, build.variant
    if not driver:
        return []
    board = jetpack_of(build.matrix, build.target)
    if board is not None:
        return _jetpack_floor(build, board)
    full, minor, row = build.floors
    if (full and _ge(driver, full)) or (minor and _ge(driver, minor)):
        return []
    if not (full or minor):
        return [about_driver("unknown", driver, (f"{build.label} is built with CUDA {variant.cuda}, whose minimum "
                                                 "driver is not in the matrix, so driver ",
                                                 " cannot be checked against it"), variant.source)]
    top = driver_max_cuda(build.matrix, driver)
    runs = f"runs CUDA {top} at most" if top else "is older than every CUDA release in the matrix"
    fully = f", and {full} for full support" if minor and full and minor != full else ""
    return [about_driver(
        "driver_floor", driver,
        ("driver ", f" {runs}; {build.label} needs CUDA {variant.cuda}, which needs driver "
                    f">= {minor or full}{' under minor-version compatibility' if minor else ''}{fully}"),
        row, need_driver=minor or full)]


def jetpack_of(matrix: Matrix, target: Target):
    """The JetPack line of a Jetson target (:func:`cudamatrix.solve.target.board_of`), or None."""
    return board_of(matrix, target)


def _jetpack_floor(build: Build, board) -> list[Reason]:
    """A Jetson driver is not a desktop branch: it runs the CUDA its JetPack line ships (R540 of JetPack 6 runs
    CUDA 12.6, where the desktop table would say 12.2), and no newer one."""
    cuda = build.variant.cuda
    assert cuda is not None  # a CUDA rule
    if cuda.release[:2] <= board.cuda.release[:2]:
        return []
    line = "/".join(board.jetpack)
    assert build.target.driver  # a Jetson board is known by its driver
    return [about_driver("driver_floor", build.target.driver,
                         ("driver ", f" is JetPack {line}'s (Jetson Linux {board.l4t}), which runs CUDA {board.cuda} "
                                     f"at most; {build.label} needs CUDA {cuda}"), board.source)]


def documented_min_driver(build: Build) -> list[Reason]:
    """Rule ``driver_floor`` again, for a minimum driver the framework documents for the build itself (the
    matrix row's ``min_driver``, with the framework's page as its source)."""
    driver, variant = build.target.driver, build.variant
    if not driver or not variant.min_driver or _ge(driver, variant.min_driver):
        return []
    return [about_driver("driver_floor", driver, (f"{build.label} documents a minimum driver of {variant.min_driver}; "
                                                  "the target has ", ""), variant.source,
                         need_driver=variant.min_driver)]


def gpu_driver(build: Build) -> list[Reason]:
    """Rule ``gpu_driver``, for every target GPU: see :func:`gpu_driver_reason`."""
    target = build.target
    if not target.driver:
        return []
    found = (gpu_driver_reason(build.matrix, gpu.compute_capability, gpu.name, target.driver, target.platform)
             for gpu in target.gpus)
    return [reason for reason in found if reason is not None]


def _gpu_name(gpu: TargetGpu) -> str:
    return gpu.name or f"sm_{gpu.compute_capability.replace('.', '')}"


def jetson(build: Build, gpu: TargetGpu) -> list[Reason]:
    """Rule ``jetson``: a Jetson board runs only the builds NVIDIA makes for its JetPack release; the
    default-index and PyTorch-index aarch64 builds target server (SBSA) aarch64 and carry no Tegra kernels,
    whatever SASS of the same major they ship (the advisory cites PyTorch's arch list and NVIDIA's page).
    Decisive: the board's other GPU rules are not asked."""
    cc = gpu.compute_capability
    board = jetpack_only(build.matrix, build.release.name, cc)
    if board is None:
        return []
    return [Reason(
        "jetson", f"{_gpu_name(gpu)} (compute capability {cc}) is a Jetson board: {build.label} from the default or "
                  f"PyTorch index has no kernels for it; install NVIDIA's JetPack wheels of {build.release.name} "
                  f"for the board's JetPack release ({board.id})", board.source)]


def arch(build: Build, gpu: TargetGpu) -> list[Reason]:
    """Rule ``arch``: the build has a kernel image for the GPU: SASS of the same major and an equal or lower
    minor, or PTX of a lower architecture JIT-compiled by a driver that fully supports the build's CUDA (CUDA C++
    Programming Guide, "Binary Compatibility" and "PTX Compatibility"; the CUDA Compatibility guide: minor-version
    compatibility does not cover PTX JIT). A build whose arch list the matrix lacks is judged on its toolkit's
    lowest target only (CUDA Toolkit release notes), else ``unknown``."""
    variant, cc = build.variant, gpu.compute_capability
    if not (variant.archs or variant.ptx):
        return _arch_unlisted(build, gpu)
    if sass_covers(variant.archs, cc):
        return []
    if ptx_covers(variant.ptx, cc):
        if build.minor_compat_only():
            return [Reason("arch", f"{build.label} reaches {_gpu_name(gpu)} (compute capability {cc}) only by PTX "
                                   f"JIT, which the driver's minor-version compatibility does not cover",
                           variant.source)]
        return []
    sass = " ".join(f"sm_{a.replace('.', '')}" for a in variant.archs)
    ptx = " ".join(f"compute_{a.replace('.', '')}" for a in variant.ptx) or "none"
    return [Reason("arch", f"{build.label} has no kernel image for {_gpu_name(gpu)} (compute capability {cc}): "
                           f"SASS {sass or 'none'}, PTX {ptx}", variant.source)]


def _arch_unlisted(build: Build, gpu: TargetGpu) -> list[Reason]:
    """The build's arch list is not in the matrix: only its toolkit's lower bound is a known fact."""
    variant, cc = build.variant, gpu.compute_capability
    assert variant.cuda is not None  # a CUDA rule
    toolkit = cuda_release(build.matrix, variant.cuda)
    known = [c.rstrip("af") for c in toolkit.compute_capabilities] if toolkit else []
    lo = min(known, key=cc_key) if known else None
    if lo and toolkit and cc_key(cc) < cc_key(lo):  # lo is known only when toolkit is
        return [Reason(
            "arch", f"{build.label} is built with CUDA {variant.cuda}, which compiles for compute capability "
                    f"{lo} and newer; {_gpu_name(gpu)} ({cc}) is older, so the build has no kernel image for it",
            toolkit.source)]
    return [Reason(
        "unknown", f"the GPU architectures {build.label} was compiled for are not in the matrix, so whether "
                   f"it has a kernel image for {_gpu_name(gpu)} (compute capability {cc}) is unknown",
        variant.source)]


def cudnn_gpu(build: Build, gpu: TargetGpu) -> list[Reason]:
    """Rule ``cudnn_gpu``: the build's cuDNN supports the GPU (cuDNN Support Matrix: each release's lowest
    supported compute capability; cuDNN 9.11 dropped Maxwell, Pascal and Volta). See :func:`_cudnn_reasons`."""
    return _cudnn_reasons(build.matrix, build.label, build.variant, gpu.compute_capability, _gpu_name(gpu))


def cudnn_range(build: Build, gpu: TargetGpu) -> list[Reason]:
    """Rule ``cudnn_gpu``, for a build whose cuDNN wheel is a range (TensorFlow's and-cuda: nvidia-cudnn-cu12
    >=9.3.0.75,<10): pip takes the newest, and cuDNN from 9.11 on carries no kernels below compute capability 7.5
    (cudnn.json ``gpu_floors``, from NVIDIA's cuDNN support matrix and the wheels' binaries). The build fits when
    the matrix knows a version in the range that has kernels for the GPU (the answer then pins it)."""
    one = Target(name=build.target.name, driver=build.target.driver, gpus=(gpu,), platform=build.target.platform,
                 python=build.target.python)
    pin, why = cudnn_for_gpus(build.matrix, build.variant, one)
    if pin is None and why:
        return [Reason("cudnn_gpu", f"{build.label}: {why}", build.variant.source)]
    return []


# The registries :func:`check` runs, in this order; the order is the order of the Reasons it returns.
BUILD_RULES: list[BuildRule] = [platform, python]  # every build on every target
# a CUDA build on a target with a GPU or a driver
CUDA_RULES: list[BuildRule] = [system_cuda, driver_floor, documented_min_driver, gpu_driver]
GPU_RULES: list[GpuRule] = [jetson, arch, cudnn_gpu, cudnn_range]  # a CUDA build, once per target GPU
DECISIVE: set[GpuRule] = {jetson}  # a GPU rule that, when it fires, leaves that GPU's later rules unasked


def _cudnn_reasons(matrix: Matrix, label: str, variant: Variant, cc: str, gname: str) -> list[Reason]:
    """cuDNN's own lowest supported compute capability (cuDNN Support Matrix)."""
    if variant.cudnn is not None:
        row = cudnn_row(matrix, variant.cudnn)
        if row is None or not row.compute_capabilities:
            return [Reason("unknown", f"the compute capabilities cuDNN {variant.cudnn} of {label} supports are "
                                      f"not in the matrix, so {gname} ({cc}) cannot be checked against them",
                           variant.source)]
        lowest = min(row.compute_capabilities, key=cc_key)
        if cc_key(cc) < cc_key(lowest):
            return [Reason("cudnn_gpu", f"cuDNN {row.version} bundled with {label} supports compute capability "
                                        f">= {lowest}, not {gname} ({cc})", row.source)]
        return []
    # the cuDNN version is unknown: the rule still decides when every cuDNN release that supports the
    # build's CUDA would give the same answer (all of them support this GPU)
    floor = _cudnn_floor_for_cuda(matrix, variant.cuda)
    if floor is not None and cc_key(cc) >= floor:
        return []
    return [Reason("unknown", f"the cuDNN version of {label} is not in the matrix, and some cuDNN releases for "
                              f"CUDA {variant.cuda} do not support {gname} ({cc}), so the build cannot be checked",
                   variant.source)]


@lru_cache(maxsize=256)
def _cudnn_floor_for_cuda(matrix: Matrix, cuda: Version) -> tuple[int, int] | None:
    """The highest "lowest supported compute capability" over the cuDNN releases that support ``cuda``:
    a GPU at or above it is supported by any of them. None when no release in the matrix says."""
    from packaging.specifiers import SpecifierSet

    floors = [cc_key(min(r.compute_capabilities, key=cc_key))
              for r in matrix.cudnn.releases if r.compute_capabilities and
              any(SpecifierSet(spec).contains(cuda, prereleases=True) for spec in r.cuda_versions)]
    return max(floors) if floors else None


def gpu_driver_floor(matrix: Matrix, cc: str) -> tuple[str | None, str | None, str | None]:
    """(the oldest driver that drives the compute capability, its architecture name, the source).

    ``(None, name, None)`` when the architecture predates the oldest CUDA release in the matrix: its floor is
    then below every CUDA floor the rules check. ``(None, None, None)``: the architecture is not known."""
    arch = architecture(matrix, cc)
    if arch is None:
        return None, None, None
    base = cc.rstrip("af")
    floor = arch.min_driver.get(base)
    if floor:
        return floor, arch.name, arch.min_driver_source
    return None, arch.name, None


def gpu_driver_reason(matrix: Matrix, cc: str, name: str | None, driver: str, platform: str) -> Reason | None:
    """The rule "the driver drives the GPU at all": the first driver branch of an architecture is a hard floor,
    which minor-version compatibility never lowers. None when the driver is new enough."""
    floor, arch, source = gpu_driver_floor(matrix, cc)
    gname = name or f"sm_{cc.replace('.', '')}"
    if floor is None:
        if arch is None:
            return Reason("unknown", f"compute capability {cc} ({gname}) is not in the matrix, so the driver "
                                     f"that drives it is unknown")
        return None  # older than every CUDA floor: the CUDA rule is the stricter one
    if platform.startswith("win"):
        have_branch, floor_branch = _branch(driver), _branch(floor)
        ok = have_branch is not None and floor_branch is not None and have_branch >= floor_branch
    else:
        ok = _ge(driver, floor)
    if ok:
        return None
    return about_driver("gpu_driver", driver, ("driver ", f" does not drive {gname} ({arch}, compute capability "
                                                          f"{cc}): the first driver for it is {floor} (branch "
                                                          f"R{_branch(floor)})"), source, need_driver=floor)


def _branch(driver: str) -> int | None:
    try:
        return int(driver.split(".")[0])
    except ValueError:
        return None


def inferred_facts(release: FrameworkRelease, variant: Variant, target: Target) -> list[tuple[str, str]]:
    """The facts the rules read for this build on this target that the matrix holds as inferred (from a
    named neighbour by a documented rule), not read from an artifact: ``[(fact, basis)]``. Empty: every fact
    the answer rests on is known."""
    if not variant.inferred:
        return []
    read = {"nvidia_pins"}
    if target.python:
        read.add("python")
    if variant.cuda is not None and (target.has_gpu or target.driver):
        read.add("cuda")
        if target.has_gpu:
            read.update(("archs", "ptx", "cudnn"))
    label = f"{release.name} {release.version} {variant.name}"
    return [(f"{label} {name}", basis) for name, basis in sorted(variant.inferred.items()) if name in read]


def full_support(matrix: Matrix, variant: Variant, target: Target) -> bool:
    """The driver supports the variant's CUDA fully (no minor-version compatibility needed)."""
    if variant.cuda is None or not target.driver:
        return True
    full, _, _ = driver_floors(matrix, variant.cuda, target.platform)
    return full is None or _ge(target.driver, full)


def runs_as_fully_supported(matrix: Matrix, variant: Variant, target: Target) -> bool:
    """The driver supports the variant's CUDA fully, or the build carries SASS for every GPU of the target: under
    minor-version compatibility it then runs as it would under full support (what that compatibility leaves out
    is PTX JIT, which such a build does not need; the CUDA Compatibility guide). A target without a known GPU
    gets no such benefit of the doubt."""
    if full_support(matrix, variant, target):
        return True
    archs = platform_variant(variant, target.platform).archs
    return bool(target.gpus) and all(sass_covers(archs, g.compute_capability) for g in target.gpus)
