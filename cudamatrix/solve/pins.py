"""The CUDA wheels a framework build brings: its declared ``nvidia-*`` requirements (markers evaluated on
a Target), the ``cuda-toolkit[...]`` metapackage expanded to its component wheels, the pins a known
CUDA/cuDNN version implies, and whether two sets of them can be installed together. No I/O."""
from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from packaging.version import Version

from cudamatrix.matrix.data import FrameworkRelease, Matrix, Variant
from cudamatrix.names import canonical
from cudamatrix.names import requirement as _requirement  # packaging imported on first use
from cudamatrix.schema import cc_key
from cudamatrix.solve.target import Target

if TYPE_CHECKING:
    from packaging.markers import Marker
    from packaging.requirements import Requirement


@lru_cache(maxsize=4096)
def _declared(text: str) -> Requirement:
    """A declared requirement parsed once: the rules ask for a build's pins on every class of targets (a fleet's
    screens parsed the same few hundred texts thousands of times). Shared: its readers never change it."""
    return _requirement(text)


@lru_cache(maxsize=4096)
def _marker(text: str) -> Marker:
    from packaging.markers import Marker

    return Marker(text)


# the CPU at the end of a platform tag, as platform.machine() names it on that system
_MACHINES = ("x86_64", "aarch64", "ppc64le", "s390x", "riscv64", "armv7l", "arm64", "i686", "amd64")


def _machine_of(plat: str, system: str) -> str:
    """platform_machine for a platform tag ("linux_aarch64" -> "aarch64", "win_amd64" -> "AMD64",
    "macosx_14_0_arm64" -> "arm64", "linux_ppc64le" -> "ppc64le"); x86_64 when the tag names no CPU this knows."""
    arch = next((a for a in _MACHINES if plat.endswith("_" + a)), "x86_64")
    return arch.upper() if system == "Windows" and arch in ("amd64", "arm64") else arch


def marker_env(target: Target, extra: str | None) -> dict[str, str]:
    plat = target.platform
    system = "Windows" if plat.startswith("win") else ("Darwin" if plat.startswith("macos") else "Linux")
    machine = _machine_of(plat, system)
    py = target.python or "3.11"
    return {"platform_system": system, "platform_machine": machine, "python_version": py,
            "python_full_version": py + ".0", "sys_platform": {"Linux": "linux", "Windows": "win32",
                                                                "Darwin": "darwin"}[system],
            "os_name": "nt" if system == "Windows" else "posix", "implementation_name": "cpython",
            "platform_python_implementation": "CPython", "extra": extra or ""}


def pins_for(variant: Variant, target: Target) -> list[Requirement]:
    """The variant's nvidia-* requirements that apply on the target (markers evaluated)."""
    out = []
    extras = [variant.pip_extra, "with-cuda", "and-cuda", "cuda"] if variant.pip_extra else [None, "with-cuda"]
    for text in variant.nvidia_pins:
        req = _declared(text)
        if req.marker is None or any(req.marker.evaluate(marker_env(target, e)) for e in extras):
            out.append(req)
    return out


def bundles_nvidia_wheels(release: FrameworkRelease, variant: Variant, target: Target) -> bool:
    """Whether the build pulls CUDA libraries as nvidia-* wheels (so co-installed builds must share them)."""
    if variant.cuda is None or not target.platform.startswith("linux"):
        return False
    if variant.nvidia_pins or variant.pip_extra or variant.extra_packages:
        return True
    # PyTorch GPU wheels for Linux declare nvidia-* wheels from 2.1 on (wheel metadata)
    return release.name == "torch" and release.version >= Version("2.1")


def expand_metapackage(matrix: Matrix, req: Requirement) -> list[Requirement] | None:
    """The component wheels a pinned metapackage (``cuda-toolkit[cublas,cudart]==13.0.3``) brings, read from
    its METADATA (``cuda.json`` metapackages). None when the matrix does not hold that metapackage version."""
    exact = [s.version for s in req.specifier if s.operator == "==" and "*" not in s.version]
    if not exact:
        return None
    name = canonical(req.name)
    for row in matrix.cuda.metapackages:
        if canonical(row.name) == name and row.version == Version(exact[0]):
            out: list[Requirement] = []
            for extra in sorted(req.extras):
                out.extend(_requirement(text) for text in row.requires.get(extra, []))
            return out
    return None


def implied_pins(release: FrameworkRelease, variant: Variant, target: Target, declared: list[Requirement]) \
        -> list[Requirement]:
    """nvidia-* wheels a build's known CUDA/cuDNN versions imply, where the matrix holds no declared pin for
    that library: the cuDNN wheel of exactly the build's cuDNN (PyTorch wheels pin it exactly, e.g. every CUDA
    build of torch 2.5.1 requires nvidia-cudnn-cu12/cu11==9.1.0.70), and, for torch, the CUDA runtime wheel
    of the build's CUDA minor (its cuXYZ wheels pin nvidia-cuda-runtime of that minor). For conflict checks."""
    if variant.cuda is None or not bundles_nvidia_wheels(release, variant, target):
        return []
    have = {library_key(r.name) for r in declared}
    major = variant.cuda.major
    out = []
    if variant.cudnn is not None and "nvidia-cudnn" not in have:
        spec = str(variant.cudnn) if len(variant.cudnn.release) >= 4 else \
            ".".join(str(x) for x in variant.cudnn.release) + ".*"
        out.append(_requirement(f"nvidia-cudnn-cu{major}=={spec}"))
    if release.name == "torch" and "nvidia-cuda-runtime" not in have:
        name = f"nvidia-cuda-runtime-cu{major}" if major < 13 else "nvidia-cuda-runtime"
        out.append(_requirement(f"{name}=={major}.{variant.cuda.minor}.*"))
    return out


def conflict_pins(matrix: Matrix, release: FrameworkRelease, variant: Variant, target: Target) -> list[Requirement]:
    """Every CUDA wheel requirement of the build for co-installation checks: its declared pins (nvidia-*,
    ``cuda-bindings``, ``cuda-toolkit[...]`` expanded to its component wheels) and the implied ones."""
    out: list[Requirement] = []
    for req in pins_for(variant, target):
        out.append(req)
        if req.extras:
            out.extend(expand_metapackage(matrix, req) or [])
    return out + implied_pins(release, variant, target, out)


def library_key(name: str) -> str:
    """nvidia-cudnn-cu12 -> nvidia-cudnn: distributions that install the same files share a key."""
    name = canonical(name)
    parts = name.split("-")
    if len(parts) > 2 and parts[-1].startswith("cu") and parts[-1][2:].isdigit():
        parts = parts[:-1]
    return "-".join(parts)


def pin_conflicts(a: list[Requirement], b: list[Requirement], a_label: str, b_label: str) -> list[str]:
    """Why two sets of nvidia-* requirements cannot be installed together. Empty when they can."""
    problems = []
    by_name = {canonical(r.name): r for r in a}
    by_key: dict[str, list[Requirement]] = {}
    for r in a:
        by_key.setdefault(library_key(r.name), []).append(r)
    for r in b:
        name = canonical(r.name)
        other = by_name.get(name)
        if other is not None:
            if not _specs_meet(other, r):
                problems.append(f"{a_label} needs {other.name}{other.specifier}, {b_label} needs {r.name}{r.specifier}")
            continue
        for o in by_key.get(library_key(r.name), []):
            if canonical(o.name) != name:
                problems.append(f"{a_label} needs {o.name}, {b_label} needs {r.name}: two CUDA majors of one "
                                f"library install the same files")
    return problems


def _specs_meet(x: Requirement, y: Requirement) -> bool:
    """Whether some version satisfies both requirements' specifiers (exact pins checked exactly)."""
    for first, second in ((x, y), (y, x)):
        for spec in first.specifier:
            if spec.operator in ("==", "===") and "*" not in spec.version:
                return second.specifier.contains(spec.version, prereleases=True) and \
                    first.specifier.contains(spec.version, prereleases=True)
    return True  # two ranges: assume they meet


def _exact(req: Requirement) -> str | None:
    return next((s.version for s in req.specifier if s.operator == "==" and "*" not in s.version), None)


_KNOWN: dict[tuple[int, str], tuple[Matrix, list[Version]]] = {}  # read once per matrix: the rules ask per target


def known_wheel_versions(matrix: Matrix, name: str) -> list[Version]:
    """Versions of one nvidia-* wheel the matrix has read: the exact pins of its builds and the floors of their
    ranges (each a version a framework's METADATA names, so a published wheel)."""
    hit = _KNOWN.get((id(matrix), name))
    if hit is not None and hit[0] is matrix:
        return list(hit[1])
    found = _known_wheel_versions(matrix, name)
    _KNOWN[(id(matrix), name)] = (matrix, found)
    return list(found)


def _known_wheel_versions(matrix: Matrix, name: str) -> list[Version]:
    out: set[Version] = set()
    for family in ("torch", "tensorflow", "jax"):
        for release in matrix.frameworks(family):
            for v in release.variants:
                for text in v.nvidia_pins:
                    req = _requirement(text)
                    if canonical(req.name) != name:
                        continue
                    for s in req.specifier:
                        if s.operator in ("==", ">=") and "*" not in s.version:
                            out.add(Version(s.version))
    return sorted(out)


def cudnn_for_gpus(matrix: Matrix, variant: Variant, target: Target) -> tuple[Requirement | None, str | None]:
    """The cuDNN wheel to pin when the build's cuDNN requirement is a range that reaches versions with no kernels
    for a target GPU (cudnn.json ``gpu_floors``: from cuDNN 9.11 on, none below compute capability 7.5; NVIDIA's
    cuDNN support matrix and the wheels' binaries): (the exact requirement of the newest known version in the range
    that has them, why), or (None, why not) when the matrix knows none. (None, None): nothing to pin."""
    if not target.gpus or not variant.nvidia_pins:
        return None, None
    low = min((g.compute_capability for g in target.gpus), key=cc_key)
    caps = [f for f in matrix.cudnn.gpu_floors if cc_key(low) < cc_key(f.min_compute_capability)]
    if not caps:  # every GPU is above every floor (an H100): no pin to read, so packaging is not imported
        return None, None
    ranges = [r for r in pins_for(variant, target) if library_key(r.name) == "nvidia-cudnn" and not _exact(r)]
    if not ranges:
        return None, None
    from packaging.specifiers import SpecifierSet

    req = ranges[0]
    spans = [SpecifierSet(f.versions) for f in caps]
    ok = [v for v in known_wheel_versions(matrix, canonical(req.name))
          if req.specifier.contains(v, prereleases=True) and not any(s.contains(v, prereleases=True) for s in spans)]
    floor = caps[0]
    because = (f"cuDNN {floor.versions} has no kernels below compute capability {floor.min_compute_capability} "
               f"(the GPU is {low}), and {req} lets pip take the newest")
    if not ok:
        return None, because + f"; the matrix knows no {canonical(req.name)} version in that range that has them"
    return _requirement(f"{req.name}=={max(ok)}"), because
