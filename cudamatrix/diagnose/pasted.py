"""Findings about the driver that a paste states in its own words, with fixes for where the paste was taken.

- **A container's CUDA requirement.** nvidia-container-cli refuses to start an image whose ``NVIDIA_REQUIRE_CUDA``
  the driver does not meet ("requirement error: unsatisfied condition: cuda>=12.8"): DRIVER_TOO_OLD, fixed by an
  image built for the CUDA the driver runs (the matrix's driver-branch table), a newer driver (the CUDA release's
  minimum driver), or the toolkit's documented override ``NVIDIA_DISABLE_REQUIRE``.
- **nvidia-smi without a driver.** "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"
  in a paste: NO_DRIVER, an error (the pasted machine's GPU stack is broken), its evidence quoted from the paste,
  its fix chosen by what the paste shows of the place (a container, WSL, a kernel without the driver's module).

No I/O.
"""
from __future__ import annotations

from cudamatrix.matrix.data import Matrix
from cudamatrix.matrix.query import driver_max_cuda
from cudamatrix.models import Environment, Finding, ToolMessage
from cudamatrix.safe.shells import Said
from cudamatrix.solve.rules import driver_floors
from cudamatrix.solve.target import from_environment

# NVIDIA Container Toolkit, "Specialized Configurations with Docker", Constraints: NVIDIA_DISABLE_REQUIRE is the
# single switch that disables every NVIDIA_REQUIRE_* constraint of an image
TOOLKIT_DOCS = "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html"


def container_requirement(env: Environment, matrix: Matrix, findings: list[Finding]) -> None:
    """DRIVER_TOO_OLD for every container CUDA requirement the paste shows refused (joined to a DRIVER_TOO_OLD the
    rules or another message found already)."""
    for said in env.messages:
        if said.kind != "container_requirement":
            continue
        evidence = [f"{said.tool} said: {said.text}", f"the image requires CUDA >= {said.minimum} (its "
                    "NVIDIA_REQUIRE_CUDA)"] + _driver_evidence(env, matrix)
        fix = _container_fix(env, matrix, said)
        same = next((f for f in findings if f.code == "DRIVER_TOO_OLD"), None)
        if same is None:
            findings.append(Finding(code="DRIVER_TOO_OLD", severity="error",
                                    title=f"The container image requires CUDA {said.minimum}; the driver runs an "
                                          "older CUDA (nvidia-container-cli refused to start it)",
                                    evidence=evidence, fix=fix))
        else:
            same.evidence += [e for e in evidence if e not in same.evidence]
            same.fix = Said(same.fix, "; for the container: ", fix) if same.fix else fix


def _driver_cuda(env: Environment, matrix: Matrix) -> tuple[str | None, str]:
    """The CUDA the driver runs, and where that comes from: nvidia-smi's "CUDA Version", else the matrix's
    driver-branch table for the driver's version."""
    drv = env.driver
    if drv.cuda_version:
        return drv.cuda_version, "the driver's CUDA Version"
    top = driver_max_cuda(matrix, drv.version) if drv.version else None
    return (str(top), "the matrix's driver-branch table") if top else (None, "")


def _driver_evidence(env: Environment, matrix: Matrix) -> list[str]:
    cuda, where = _driver_cuda(env, matrix)
    if not env.driver.version and not cuda:
        return []
    return [f"driver {env.driver.version or 'of unstated version'} runs CUDA {cuda or 'unknown'} at most"
            + (f" ({where})" if cuda else "")]


def _floor_text(env: Environment, matrix: Matrix, cuda: str) -> str:
    """">= 570.26 (the minimum driver of CUDA 12.8)" on the paste's platform; both systems' floors where the paste
    does not say which (a container host is Linux, or Windows under Docker Desktop)."""
    # packaging on first use only: doctor's start-up path does not load it (tests/schema/test_records.py)
    from packaging.version import InvalidVersion, Version

    try:
        version = Version(cuda)
    except InvalidVersion:
        return f"one that runs CUDA {cuda}"
    if env.python.platform:
        floor, _, _ = driver_floors(matrix, version, from_environment(env, matrix).platform)
        return f">= {floor} (the minimum driver of CUDA {cuda})" if floor else f"one that runs CUDA {cuda}"
    linux, _, _ = driver_floors(matrix, version, "linux_x86_64")
    windows, _, _ = driver_floors(matrix, version, "win_amd64")
    if not (linux and windows):
        return f"one that runs CUDA {cuda}"
    return f">= {linux} on Linux or >= {windows} on Windows (the minimum drivers of CUDA {cuda})"


def _container_fix(env: Environment, matrix: Matrix, said: ToolMessage) -> str:
    """An image for the driver's CUDA, the driver the image's CUDA needs, or the documented override."""
    cuda, _ = _driver_cuda(env, matrix)
    image = (f"use an image built for CUDA {cuda} or older, the newest the driver runs (for the nvidia/cuda base "
             f"images: a {cuda}.x tag)" if cuda else
             "use an image built for an older CUDA: one no newer than the CUDA Version nvidia-smi prints on the host")
    driver = f"upgrade the driver to {_floor_text(env, matrix, said.minimum or '')}"
    override = (f"or start the container with -e NVIDIA_DISABLE_REQUIRE=1 to skip the check ({TOOLKIT_DOCS}): its "
                "CUDA programs then run only as far as the driver supports them (minor-version compatibility)")
    return f"{image}; or {driver}; {override}"


# --- nvidia-smi without a driver, in a paste -------------------------------------------------------------------

_FIX_CONTAINER = ("start the container with the GPUs passed through: docker run --gpus all ... (the NVIDIA "
                  "Container Toolkit installed on the host and configured as Docker's runtime); install no driver "
                  "inside the image: the host's is mounted in")
_FIX_WSL = ("WSL 2 uses the Windows driver: install or update the NVIDIA driver on Windows (not a Linux driver "
            "inside WSL), then run `wsl --shutdown` and open the distribution again; its nvidia-smi is "
            "/usr/lib/wsl/lib/nvidia-smi")
_FIX_MODULE = ("the running kernel has no NVIDIA module (a kernel updated without the driver's module rebuilt): "
               "install the headers of the running kernel and rebuild the module (sudo dkms autoinstall, or "
               "reinstall the driver), then reboot")
_FIX_LOADED = ("the driver is installed but not loaded: reboot after a driver or kernel update; if the module "
               "still does not load, rebuild it for the running kernel (sudo dkms autoinstall) and check that "
               "Secure Boot accepts it (dmesg | grep -i nvidia)")
_PLACE = {"run_without_gpus": "container", "in_container": "container", "wsl": "wsl", "module_missing": "module"}
_WHERE = {"container": "in a Docker container", "wsl": "on WSL 2", "module": "on a kernel without the NVIDIA module"}


def pasted_no_driver(env: Environment) -> Finding:
    """NO_DRIVER for a paste: an error (the paste shows a GPU stack that does not work), the paste's own words as
    evidence, the fix for the place the paste shows (all three where it shows none)."""
    drv = env.driver
    places: dict[str, list[str]] = {}
    for said in env.messages:
        place = _PLACE.get(said.kind)
        if place:
            places.setdefault(place, []).append(f"{said.tool} said: {said.text}" if said.tool != "shell" else
                                                f"the paste shows {_WHERE[place]}: {said.text}")
    if env.context.wsl and "wsl" not in places:
        places["wsl"] = ["the paste shows WSL 2"]
    if env.context.container and "container" not in places:
        places["container"] = [f"the paste shows a {env.context.container} container"]
    evidence = [f"the paste says: {drv.error}" if drv.error else "the paste says the driver could not be reached"]
    for lines in places.values():
        evidence += lines
    fixes = {"container": _FIX_CONTAINER, "wsl": _FIX_WSL, "module": _FIX_MODULE}
    chosen = [fixes[p] for p in ("module", "container", "wsl") if p in places]
    fix = "; ".join(chosen) if chosen else (f"in a container: {_FIX_CONTAINER}; on WSL 2: {_FIX_WSL}; otherwise "
                                            f"{_FIX_LOADED}")
    where = " and ".join(_WHERE[p] for p in places) if places else None
    return Finding(code="NO_DRIVER", severity="error",
                   title="The pasted machine's NVIDIA driver could not be reached" + (f" ({where})" if where else ""),
                   evidence=evidence, fix=fix)
