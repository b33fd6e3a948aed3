"""Target: the machine profile the solver solves for — from a live or saved Environment, or from flags.

A Dockerfile build step has no GPU; ``--driver 535.104.05 --gpu "Tesla T4" --python 3.10`` describes
the machine the image will run on.
"""
from __future__ import annotations

import os
import platform as _platform
import re
import sys
from pathlib import Path

from packaging.version import InvalidVersion, Version

from cudamatrix.errors import UsageError
from cudamatrix.matrix.data import Matrix
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

    def key(self) -> tuple:
        """Machines with the same key get the same answer: solve each key once (fleets). The rules look at each
        distinct compute capability, not at how many GPUs have it; the toolkit and a usable driver count too."""
        return (self.driver, tuple(sorted({g.compute_capability for g in self.gpus})), self.python, self.platform,
                self.cuda_toolkit, self.driver_usable)

    @property
    def has_gpu(self) -> bool:
        return bool(self.gpus)

    def describe(self) -> str:
        # with a driver and no GPU named, the machine has some GPU that driver runs (a paste that names none)
        gpus = ", ".join(f"{g.name or 'GPU'} (sm {g.compute_capability})" for g in self.gpus) or \
            ("GPU not stated" if self.driver and self.driver_usable else "no GPU")
        driver = f"driver {self.driver}" if self.driver else "driver unknown"
        said = "".join(f" ({n})" for n in self.notes)
        return f"{self.name}: {gpus}; {driver}; Python {self.python or 'any'}; {self.platform}{said}"

    def as_target(self) -> str:
        """:meth:`describe` led by the word "target" once: "target: T4 ...", "target this machine: ..." (a machine
        described by flags is named "target": "target target: ..." said it twice)."""
        text = self.describe()
        return text if self.name == "target" else f"target {text}"


def _py_minor(version: str | None) -> str | None:
    if not version:
        return None
    try:
        v = Version(version)
    except InvalidVersion:
        raise UsageError(f"--python {version!r} is not a Python version", hint="e.g. --python 3.10") from None
    return f"{v.major}.{v.minor}"


def host_platform() -> str:
    machine = _platform.machine().lower()
    if sys.platform.startswith("win"):
        return "win_amd64"
    if sys.platform == "darwin":
        return "macos_arm64" if machine == "arm64" else "macos_x86_64"
    return "linux_aarch64" if machine in ("aarch64", "arm64") else "linux_x86_64"


def from_environment(env: Environment, matrix: Matrix, name: str = "this machine") -> Target:
    """The Target of a detected (or saved) Environment."""
    from cudamatrix.matrix.query import find_gpu

    gpus = []
    for g in env.gpus:
        cc = g.compute_capability
        if not cc and g.name:
            known = find_gpu(matrix, g.name)
            cc = known.compute_capability if known else None
        if cc:
            gpus.append(TargetGpu(normalize_cc(cc), g.name))
    plat = env.python.platform or (host_platform() if env.origin == "live" else "linux_x86_64")
    toolkit = next((t.version for t in env.toolkits if t.version), None)
    usable = env.driver.status in ("ok", "unknown")
    driver: str | None = env.driver.version
    notes: tuple[str, ...] = ()
    if driver is None and env.driver.cuda_version:  # a paste that gives only the CUDA version the driver runs
        driver = driver_floor(matrix, env.driver.cuda_version, plat)
        notes = (f"the driver's version is not stated; it runs CUDA {env.driver.cuda_version}, so it is at least "
                 f"{driver}, that CUDA's first driver",) if driver else ()
    return Target(name=name, driver=driver, gpus=tuple(gpus), python=_py_minor(env.python.version),
                  platform=plat, cuda_toolkit=toolkit, driver_usable=usable, notes=notes)


def driver_floor(matrix: Matrix, cuda: str, platform: str) -> str | None:
    """The oldest driver that runs CUDA ``cuda`` (major.minor): the lowest minimum driver of its releases in NVIDIA's
    "CUDA Toolkit and Corresponding Driver Versions". A driver that reports this CUDA version is at least it, so
    every rule a build passes on this floor it passes on the real driver. None when the matrix has no such row."""
    from cudamatrix.matrix.query import driver_version

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
    """A Target from command-line flags, over ``base`` (the live machine) where a flag is absent."""
    from cudamatrix.matrix.query import find_gpu, suggest_gpus

    if driver is not None:
        parts = driver.strip().split(".")
        if not all(p.isdigit() for p in parts) or not parts[0]:
            raise UsageError(f"--driver {driver!r} is not a driver version", hint="e.g. --driver 535.104.05")
    if platform is not None and platform not in PLATFORMS:
        raise UsageError(f"--platform {platform!r} is not known", hint=f"one of: {', '.join(PLATFORMS)}")
    if cuda_toolkit is not None:
        try:
            Version(cuda_toolkit)
        except InvalidVersion:
            raise UsageError(f"--cuda-toolkit {cuda_toolkit!r} is not a version", hint="e.g. 12.4") from None
    target_gpus = []
    for text in dict.fromkeys(gpus):  # a flag repeated (one per node of a pool) says nothing more
        try:
            cc = normalize_cc(text)
            target_gpus.append(TargetGpu(cc, None))
            continue
        except ValueError:
            pass
        gpu = find_gpu(matrix, text)
        if gpu is None:
            close = suggest_gpus(matrix, text)
            raise UsageError(f"--gpu {text!r}: no GPU of that name in the matrix",
                             hint=("did you mean: " + ", ".join(repr(c) for c in close)) if close
                             else "give the compute capability instead, e.g. --gpu 8.6 or --gpu sm_86")
        target_gpus.append(TargetGpu(gpu.compute_capability, gpu.name))
    base = base or Target(name="target")
    return Target(
        name="target" if (driver or gpus or python or platform) else base.name,
        driver=driver if driver is not None else base.driver,
        gpus=tuple(dict.fromkeys(target_gpus)) if gpus else base.gpus,
        python=_py_minor(python) if python else base.python,
        platform=platform or base.platform,
        cuda_toolkit=cuda_toolkit or base.cuda_toolkit,
        driver_usable=True if (driver or gpus) else base.driver_usable,
    )


# Turning command-line options (or fix()'s arguments) into Environments and Targets: one home for
# doctor, solve, lock, check, env and fix.
_VERSIONISH = re.compile(r"^\d+(\.\d+){0,2}$")


@record
class Resolved:
    """The Targets to solve for, and the environments they came from."""

    targets: list[Target]
    installed: Environment | None  # the environment whose installed set counts (minimal change)
    environments: list[Environment]


def split_python(value: str | None) -> tuple[str | None, str | None]:
    """--python takes a version (a target's Python) or a path (an interpreter to inspect)."""
    if value is None:
        return None, None
    if _VERSIONISH.match(value.strip()):
        return value.strip(), None
    return None, os.path.abspath(value) if value else value  # a path: relative to the current folder, as everywhere


FLEET_INDEX = "fleet.json"  # written by `fleet gather` beside the node files; not itself an environment


def env_paths(env_files: list[Path]) -> list[Path]:
    """``--env`` values with every folder replaced by its node files: the files ``fleet.json`` lists when it
    is there (a `fleet gather` output), otherwise every ``*.json`` in it, sorted. Raises UsageError for a
    folder without node files or a ``fleet.json`` naming a file outside its folder."""
    out: list[Path] = []
    for path in env_files:
        path = Path(path)
        if not path.is_dir():
            out.append(path)
            continue
        index = path / FLEET_INDEX
        found = _listed_nodes(path, index) if os.path.lexists(index) else \
            [path / name for name in sorted(n for n in os.listdir(path) if n.endswith(".json") and n != FLEET_INDEX)]
        out += found
        if not found:
            raise UsageError(f"--env {path}: no node files (*.json) in this folder",
                             hint="gather them with: cudamatrix fleet gather -o DIR")
    return out


FLEET_INDEX_LIMIT = 64 * 1024 * 1024  # 100,000 nodes at ~600 bytes each fit well inside
FLEET_INDEX_DEPTH = 16  # fleet gather writes 4 levels


def _listed_nodes(folder: Path, index: Path) -> list[Path]:
    from cudamatrix.safe.files import parse_json, read_bytes

    hint = "regenerate it with `cudamatrix fleet gather`, or remove it to read every *.json"
    raw = read_bytes(index, limit=FLEET_INDEX_LIMIT, what="fleet index")  # bounded; a FIFO or device refused
    try:
        doc = parse_json(raw, max_depth=FLEET_INDEX_DEPTH)
        files = [node["file"] for node in doc["nodes"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{index}: not a fleet index ({type(exc).__name__}: {exc})", hint=hint) from None
    out = []
    for name in files:
        # only plain file names: an index must not point outside its folder
        if not isinstance(name, str) or Path(name).name != name or name in ("", ".", ".."):
            raise UsageError(f"{index}: nodes[].file {name!r} is not a file name in {folder}")
        out.append(folder / name)
    return out


def environments(env_files: list[Path], from_files: list[str], interpreter: str | None,
                 all_copies: bool = False) -> list[Environment]:
    """Saved, pasted or live environments. ``--env`` may name folders of node files (see :func:`env_paths`).
    Raises UsageError for contradictory options."""
    from cudamatrix.detect import detect, from_report_files, load_environment

    if env_files and from_files:
        raise UsageError("--env and --from cannot be combined",
                         hint="--env reads saved `detect --json` files; --from reads pasted tool outputs")
    if env_files:
        return [load_environment(str(p)) for p in env_paths(env_files)]
    if from_files:
        return [from_report_files(from_files)]
    return [detect(python=interpreter, all_copies=all_copies)]


def resolve(matrix: Matrix, *, env_files: list[Path], from_files: list[str] | None = None,
            driver: str | None, gpus: list[str], python: str | None, platform: str | None,
            cuda_toolkit: str | None, need_installed: bool = False) -> Resolved:
    """Targets and the installed environment for a command's options.

    Flags alone describe a machine you are not on (a Dockerfile's target): nothing is detected here, unless
    ``--python PATH`` names an interpreter whose installed set counts or ``need_installed`` asks for the
    live one. With ``--env``, flags override the saved machine's facts.
    """
    py_version, interpreter = split_python(python)
    env_files = env_paths(env_files)  # folders of node files count as their files
    flags = any([driver, gpus, py_version, platform, cuda_toolkit])
    if flags and len(env_files) > 1:
        raise UsageError("target flags (--driver/--gpu/--python/--platform) cannot be combined with several --env "
                         "files", hint="describe each machine in its own saved environment")
    if flags and not env_files and not from_files and interpreter is None and not need_installed:
        target = from_flags(matrix, driver=driver, gpus=gpus, python=py_version, platform=platform,
                            cuda_toolkit=cuda_toolkit, base=Target(name="target"))
        return Resolved([target], None, [])
    envs = environments(env_files, from_files or [], interpreter)
    names = [Path(p).stem for p in env_files] if env_files else (["the pasted machine"] if from_files
                                                                  else ["this machine"])
    targets = []
    for env, name in zip(envs, names, strict=False):
        base = from_environment(env, matrix, name=name)
        if flags:
            base = from_flags(matrix, driver=driver, gpus=gpus, python=py_version, platform=platform,
                              cuda_toolkit=cuda_toolkit, base=base)
        targets.append(base)
    installed = envs[0] if len(envs) == 1 else None
    return Resolved(targets, installed, envs)
