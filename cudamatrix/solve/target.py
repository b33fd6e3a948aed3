"""Target: the machine profile the solver solves for — from a live or saved Environment, or from flags.

A Dockerfile build step has no GPU; ``--driver 535.104.05 --gpu "Tesla T4" --python 3.10`` describes
the machine the image will run on.
"""
from __future__ import annotations

import sys

from packaging.version import InvalidVersion, Version

from cudamatrix.errors import UsageError
from cudamatrix.matrix.data import JetPack, Matrix
from cudamatrix.matrix.query import (
    driver_max_cuda,
    driver_version,
    find_gpu,
    jetpack_for_driver,
    lookup_gpu,
    suggest_gpus,
)
from cudamatrix.models import Environment
from cudamatrix.schema import field, normalize_cc, record

PLATFORMS = ("linux_x86_64", "linux_aarch64", "win_amd64")


@record(frozen=True)
class TargetGpu:
    """A GPU of a Target: its compute capability and, where known, its name."""

    compute_capability: str  # "7.5"
    name: str | None = None


@record(frozen=True)
class Target:
    """What the solver needs to know about one machine."""

    name: str
    driver: str | None = None  # "535.104.05"; None: unknown (assumed new enough, with a warning)
    gpus: tuple[TargetGpu, ...] = ()
    python: str | None = None  # "3.11"
    platform: str = "linux_x86_64"
    cuda_toolkit: str | None = None
    driver_usable: bool = True  # False: mismatch / no device visible
    notes: tuple[str, ...] = field(default=())
    # a report shows CUDA in use (a CUDA build, its cuDNN or CUDA libraries) and names neither GPU nor driver:
    # the GPU is unknown, not absent
    gpu_unknown: bool = False

    def key(self) -> tuple:
        """Machines with the same key get the same answer: solve each key once (fleets). The rules look at each
        distinct compute capability, not at how many GPUs have it; the toolkit and a usable driver count too."""
        return (self.driver, tuple(sorted({g.compute_capability for g in self.gpus})), self.python, self.platform,
                self.cuda_toolkit, self.driver_usable, self.gpu_unknown)

    @property
    def has_gpu(self) -> bool:
        return bool(self.gpus)

    @property
    def wants_gpu(self) -> bool:
        """A GPU build is the answer: a GPU named, a driver stated, or a GPU in use that the report does not name
        (unknown is not absent); and the driver is usable."""
        return bool(self.gpus or self.driver or self.gpu_unknown) and self.driver_usable

    def describe(self) -> str:
        # with a driver and no GPU named, the machine has some GPU that driver runs (a paste that names none)
        gpus = ", ".join(f"{g.name or 'GPU'} (sm {g.compute_capability})" for g in self.gpus) or \
            ("GPU not stated" if (self.driver or self.gpu_unknown) and self.driver_usable else "no GPU")
        driver = f"driver {self.driver}" if self.driver else "driver unknown"
        said = "".join(f" ({n})" for n in self.notes)
        return f"{self.name}: {gpus}; {driver}; Python {self.python or 'any'}; {self.platform}{said}"

    def as_target(self) -> str:
        """:meth:`describe` led by the word "target" once: "target: T4 ...", "target this machine: ..." (a machine
        described by flags is named "target": "target target: ..." said it twice)."""
        text = self.describe()
        return text if self.name == "target" else f"target {text}"


def board_of(matrix: Matrix, target: Target) -> JetPack | None:
    """The JetPack line of a Jetson target (linux_aarch64, a driver a JetPack line reports: cuda.json ``jetpack``,
    from NVIDIA's JetPack release notes), or None."""
    if target.platform != "linux_aarch64" or not target.driver:
        return None
    return jetpack_for_driver(matrix, target.driver)


def driver_cuda(matrix: Matrix, target: Target) -> Version | None:
    """The newest CUDA the target's driver runs: a Jetson driver's is its JetPack line's (JetPack 6.1/6.2's
    540.4.0 runs CUDA 12.6), never the desktop branch table's (where R540 would read as R535's 12.2); None
    without a driver or a row for it."""
    board = board_of(matrix, target)
    if board is not None:
        return board.cuda
    return driver_max_cuda(matrix, target.driver) if target.driver else None


def target_record(matrix: Matrix, target: Target) -> dict:
    """The target as data (the JSON ``targets[]`` of solve and check): its GPUs (name, compute capability), driver
    (version, the CUDA it runs, whether it is usable, its JetPack line on a Jetson), CUDA toolkit, Python and
    platform, the notes on how its facts were read, and ``description``, the line people read."""
    board = board_of(matrix, target)
    cuda = driver_cuda(matrix, target)
    return {
        "name": target.name,
        "description": target.describe(),
        "gpus": [{"name": g.name, "compute_capability": g.compute_capability} for g in target.gpus],
        "gpu_unknown": target.gpu_unknown,
        "driver": {"version": target.driver, "cuda_version": str(cuda) if cuda is not None else None,
                   "usable": target.driver_usable,
                   "jetpack": {"releases": list(board.jetpack), "l4t": board.l4t} if board is not None else None},
        "cuda_toolkit": target.cuda_toolkit,
        "python": target.python,
        "platform": target.platform,
        "notes": list(target.notes),
    }


def _py_minor(version: str | None) -> str | None:
    if not version:
        return None
    try:
        v = Version(version)
    except InvalidVersion:
        raise UsageError(f"--python {version!r} is not a Python version", hint="e.g. --python 3.10") from None
    return f"{v.major}.{v.minor}"


def host_platform() -> str:
    import platform  # here: its import compiles nine regular expressions that doctor never uses

    machine = platform.machine().lower()
    if sys.platform.startswith("win"):
        return "win_amd64"
    if sys.platform == "darwin":
        return "macos_arm64" if machine == "arm64" else "macos_x86_64"
    return "linux_aarch64" if machine in ("aarch64", "arm64") else "linux_x86_64"


def from_environment(env: Environment, matrix: Matrix, name: str = "this machine") -> Target:
    """The Target of a detected (or saved) Environment."""
    gpus = []
    for g in env.gpus:
        cc = _readable_cc(g.compute_capability)
        if not cc and g.name:
            known = find_gpu(matrix, g.name)
            cc = known.compute_capability if known else None
        if cc:
            gpus.append(TargetGpu(normalize_cc(cc), g.name))
    plat = env.python.platform or (host_platform() if env.origin == "live" else "linux_x86_64")
    toolkit = next((t.version for t in env.toolkits if t.version), None)
    usable = env.driver.status in ("ok", "unknown")
    # a Jetson's Jetson Linux release decides its driver's CUDA before anything a probe reported
    driver, plat, notes = _jetson_linux(matrix, env.driver.jetson_linux, env.driver.version, plat)
    if driver is None and env.driver.cuda_version:  # a paste that gives only the CUDA version the driver runs
        driver = driver_floor(matrix, env.driver.cuda_version, plat)
        notes += (f"the driver's version is not stated; it runs CUDA {env.driver.cuda_version}, so it is at least "
                  f"{driver}, that CUDA's first driver",) if driver else ()
    unknown = not gpus and driver is None and env.origin == "report" and cuda_in_use(env)
    if unknown:
        notes += ("the report shows CUDA in use but names neither the GPU nor the driver: answered for some GPU "
                  "a current driver runs; the GPU's kernels and the driver were not checked",)
    return Target(name=name, driver=driver, gpus=tuple(gpus), python=_py_minor(env.python.version),
                  platform=plat, cuda_toolkit=toolkit, driver_usable=usable, notes=notes, gpu_unknown=unknown)


def _readable_cc(value: str | None) -> str | None:
    """A detected compute capability, or None where it is no version ("N/A", "[Not Supported]"): the GPU's
    name then decides it from the matrix, as for a GPU that stated none."""
    if not value:
        return None
    try:
        return normalize_cc(value)
    except ValueError:
        return None


def _jetson_linux(matrix: Matrix, release: str | None, driver: str | None, plat: str
                  ) -> tuple[str | None, str, tuple[str, ...]]:
    """(driver, platform, notes) of a Jetson whose Jetson Linux release the board names (/etc/nv_tegra_release).

    The release decides the board's CUDA driver (it ships in the BSP: NVIDIA's JetPack release table gives the
    CUDA of each release line, cuda.json ``jetpack``): the driver becomes that line's, so that the rules read its
    CUDA (JetPack 6.1/6.2, Jetson Linux 36.4: 12.6), never a desktop branch's for a version a probe reported
    (R540 would read as R535's 12.2). A release line the table does not hold is said, and nothing is guessed."""
    if not release:
        return driver, plat, ()
    line = ".".join(release.split(".")[:2])
    board = next((jp for jp in matrix.cuda.jetpack if jp.l4t == line), None)
    if board is None:
        return driver, plat, (f"Jetson Linux {release} (/etc/nv_tegra_release) is not in the matrix's JetPack table: "
                              f"the CUDA its driver runs is not known from it",)
    if driver is not None and jetpack_for_driver(matrix, driver) is board:
        return driver, "linux_aarch64", ()
    said = f"driver {driver} as detected; " if driver else ""
    return str(board.driver), "linux_aarch64", (
        f"Jetson Linux {release} (/etc/nv_tegra_release): JetPack {'/'.join(board.jetpack)}, whose driver "
        f"{board.driver} runs CUDA {board.cuda} ({said}the board's release decides)",)


def cuda_in_use(env: Environment) -> bool:
    """Whether a report proves CUDA is in use on the machine: a framework or package of a CUDA build, a CUDA
    library found or named in a framework's message (torch's "cuDNN version incompatibility", a CUDA library
    that could not be opened), a GPU or architecture message."""
    if any(f.cuda or (f.variant or "").startswith("cu") for f in env.frameworks):
        return True
    if any("+cu" in v for v in env.packages.values()) or env.libraries:
        return True
    return any(m.library or m.gpu or m.compute_capability or m.kind in ("no_kernel_image", "arch_unsupported")
               for m in env.messages)


def driver_floor(matrix: Matrix, cuda: str, platform: str) -> str | None:
    """The oldest driver that runs CUDA ``cuda`` (major.minor): the lowest minimum driver of its releases in NVIDIA's
    "CUDA Toolkit and Corresponding Driver Versions". A driver that reports this CUDA version is at least it, so
    every rule a build passes on this floor it passes on the real driver. None when the matrix has no such row."""
    try:
        want = Version(cuda).release[:2]
    except InvalidVersion:
        return None
    windows = platform.startswith("win")
    floors = [r.windows_min_driver if windows else r.linux_min_driver for r in matrix.cuda.releases
              if r.version.release[:2] == want]
    known = [f for f in floors if f]
    return min(known, key=driver_version) if known else None


def from_flags(matrix: Matrix, *, driver: str | None, gpus: list[str], python: str | None,
               platform: str | None, cuda_toolkit: str | None, base: Target | None = None) -> Target:
    """A Target from command-line flags, over ``base`` (the live machine) where a flag is absent.
    Raises UsageError for a value that is not a driver version, a platform, a version or a GPU."""
    _check_flags(platform, cuda_toolkit)
    note: tuple[str, ...] = ()
    if driver is not None:
        driver, note = flag_driver(matrix, driver, platform or (base.platform if base else "linux_x86_64"))
    target_gpus = [_flag_gpu(matrix, text) for text in dict.fromkeys(gpus)]  # a flag repeated (one per node) says nothing more
    base = base or Target(name="target")
    return Target(
        name="target" if (driver or gpus or python or platform) else base.name,
        notes=note if driver is not None else base.notes,
        gpu_unknown=False if (driver or gpus) else base.gpu_unknown,
        driver=driver if driver is not None else base.driver,
        gpus=tuple(dict.fromkeys(target_gpus)) if gpus else base.gpus,
        python=_py_minor(python) if python else base.python,
        platform=platform or base.platform,
        cuda_toolkit=cuda_toolkit or base.cuda_toolkit,
        driver_usable=True if (driver or gpus) else base.driver_usable,
    )


def flag_driver(matrix: Matrix, text: str, platform: str) -> tuple[str, tuple[str, ...]]:
    """A ``--driver`` value as people type it -> (the driver version the rules read, a note saying how it was read).

    ``535.104.05``: that driver. ``R550`` or ``550``: a driver branch (NVIDIA numbers every release of branch R550
    550.xx[.yy]); the rules then read the branch's first release, below every numbered release of it, so an answer
    holds for any driver of the branch (a build that needs 550.54.14, CUDA 12.4's first driver, is not assumed).
    ``12.4``: a CUDA version (nvidia-smi's "CUDA Version"), not a driver: refused with the first driver of that
    CUDA, since any driver from there up reports it. Raises UsageError."""
    import re

    t = text.strip()
    branch = re.fullmatch(r"[Rr]?(\d{3})", t)
    if branch:
        return branch.group(1), (f"driver branch R{branch.group(1)}: checked as its first release, so the answer "
                                 f"holds for every driver of the branch",)
    parts = t.split(".")
    if not all(p.isdigit() for p in parts) or not parts[0]:
        raise UsageError(f"--driver {text!r} is not a driver version",
                         hint="e.g. --driver 535.104.05 (nvidia-smi's Driver Version), or a branch: --driver R550")
    if int(parts[0]) < 100 and len(parts) == 2:
        first = driver_floor(matrix, t, platform)
        raise UsageError(f"--driver {text!r} is a CUDA version (nvidia-smi's \"CUDA Version\"), not a driver version",
                         hint="give the \"Driver Version\" nvidia-smi prints" +
                              (f"; every driver from {first} on runs CUDA {t}: --driver {first} answers for the oldest"
                               if first else ""))
    board = jetpack_for_driver(matrix, t) if platform == "linux_aarch64" else None
    if board is not None:
        return t, (f"a Jetson driver: JetPack {'/'.join(board.jetpack)} (Jetson Linux {board.l4t}), CUDA {board.cuda}",)
    return t, ()


def _check_flags(platform: str | None, cuda_toolkit: str | None) -> None:
    if platform is not None and platform not in PLATFORMS:
        raise UsageError(f"--platform {platform!r} is not known", hint=f"one of: {', '.join(PLATFORMS)}")
    if cuda_toolkit is not None:
        try:
            Version(cuda_toolkit)
        except InvalidVersion:
            raise UsageError(f"--cuda-toolkit {cuda_toolkit!r} is not a version", hint="e.g. 12.4") from None


def _flag_gpu(matrix: Matrix, text: str) -> TargetGpu:
    """A ``--gpu`` value: a compute capability (``8.6``, ``sm_86``, ``compute_90``) or a GPU as people name it
    (``4090``, ``rtx4090``, ``a100``, ``"Tesla T4"``: :func:`cudamatrix.matrix.query.lookup_gpu`). A bare number
    is a model number, never a compute capability ("4090" is not 409.0). A name that fits models of different
    compute capabilities is refused, listing them."""
    import re

    t = text.strip()
    _refuse_major_only(matrix, text, t)
    if re.fullmatch(r"\d+\.\d+|(?:sm|compute)_\d+[af]?", t, re.IGNORECASE):
        try:
            return TargetGpu(normalize_cc(t), None)
        except ValueError:
            pass
    gpu = lookup_gpu(matrix, t)
    if gpu is not None:
        return TargetGpu(gpu.compute_capability, gpu.name)
    several = _models_named(matrix, t)
    if len({g.compute_capability for g in several}) > 1:
        raise UsageError(f"--gpu {text!r} names GPUs of different compute capabilities",
                         hint="one of: " + ", ".join(f"{g.name!r} (sm {g.compute_capability})" for g in several[:8]))
    if t.isdigit() and len(t) <= 3:  # "86", "120": a compute capability written without its dot (sm_86)
        return TargetGpu(normalize_cc(t), None)  # one digit is refused above: two or three digits normalise
    gpu = None if t.isdigit() else find_gpu(matrix, t)
    if gpu is None:
        close = suggest_gpus(matrix, text)
        raise UsageError(f"--gpu {text!r}: no GPU of that name in the matrix",
                         hint=("did you mean: " + ", ".join(repr(c) for c in close)) if close
                         else "give the compute capability instead, e.g. --gpu 8.6 or --gpu sm_86")
    return TargetGpu(gpu.compute_capability, gpu.name)


def _refuse_major_only(matrix: Matrix, text: str, t: str) -> None:
    """Refuse a compute capability given as its major alone (``7``, ``sm_9``, and ``12`` where 1.2 is no GPU the
    matrix knows but 12.x are): the minors of one major are different GPUs with different kernels (7.0 V100, 7.2
    Xavier, 7.5 T4), so the flag names none of them. The UsageError lists the choices."""
    digits = t.lower().removeprefix("sm_").removeprefix("compute_")
    if not digits.isdigit() or len(digits) > 2:
        return
    known = [cc for arch in matrix.gpus.architectures for cc in arch.compute_capabilities]
    if len(digits) == 2 and (digits != t.lower() or f"{int(digits[0])}.{digits[1]}" in known):
        return  # sm_86 / 86 is 8.6
    major = int(digits)
    choices = [cc for cc in known if cc.split(".")[0] == str(major)]
    if len(digits) == 2 and not choices:
        return  # not a major the matrix knows: read as written (13 is 1.3)
    if not choices:
        raise UsageError(f"--gpu {text!r} is not a compute capability: a major alone, and no GPU the matrix knows "
                         f"has compute capability {major}.x", hint="give major.minor, e.g. --gpu 8.6 or --gpu sm_86")
    named = {cc: next((g.name for g in matrix.gpus.gpus if g.compute_capability == cc), None) for cc in choices}
    differ = f": {', '.join(choices)} are different GPUs with different kernels" if len(choices) > 1 else \
        f" (the matrix knows {choices[0]}; a major names no one GPU)"
    raise UsageError(f"--gpu {text!r} gives only the major of a compute capability{differ}",
                     hint="one of: " + ", ".join(f"--gpu {cc}" + (f" ({named[cc]})" if named[cc] else "")
                                                 for cc in choices))


def _models_named(matrix: Matrix, text: str) -> list:
    """The GPU models whose name or alias holds ``text`` as a word ("4000": Quadro RTX 4000, RTX 4000 Ada ...)."""
    words = " " + " ".join(text.lower().split()) + " "
    return [g for g in matrix.gpus.gpus
            if any(words in " " + " ".join(n.lower().replace("-", " ").split()) + " " for n in (g.name, *g.aliases))]
