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

from cudamatrix.diagnose.libchoice import release_carrying, release_of
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


# --- a torch extension that cannot load, in a paste ----------------------------------------------------------------
#
# The words read by cudamatrix/pastes/extensions.py: xFormers' "built for" block, an undefined torch symbol,
# ONNX Runtime's CUDA provider that cannot open a CUDA library, pip's "requires torch==X, but you have torch Y".

_PIN_PACKAGES = ("xformers", "vllm", "sglang", "sgl-kernel", "vllm-flash-attn")  # they declare torch==X exactly
_PYG = ("torch-scatter", "torch-sparse", "torch-cluster", "torch-spline-conv", "pyg-lib")
_COMPANIONS = ("torchvision", "torchaudio")  # TORCHVISION_MISMATCH's


def extension_findings(env: Environment, findings: list[Finding], matrix: Matrix | None = None) -> None:
    """EXTENSION_ABI_MISMATCH, EXTENSION_CUDA_MISMATCH, EXTENSION_PIN_MISMATCH (and LIBRARY_MISSING or
    TORCHVISION_MISMATCH where those are what the words say) for every extension message of the paste: one finding per
    code and package, a later message of the same joined to its evidence."""
    made: dict[tuple[str, str], Finding] = {}
    for said in env.messages:
        code = extension_code(env, said)
        if code is None:
            continue
        evidence = [f"{said.tool} said: {said.text}"] + _extension_facts(env, said)
        key = (code, said.package or "")
        same = made.get(key) or next((f for f in findings if f.code == code and said.package and
                                      said.package in f.title), None)
        if same is None and code in ("LIBRARY_MISSING", "TORCHVISION_MISMATCH"):
            same = next((f for f in findings if f.code == code), None)
        if same is not None:
            same.evidence += [e for e in evidence if e not in same.evidence]
            continue
        title, fix, commands = _library_words(said, matrix) if said.kind == "library_not_found" else \
            _extension_words(env, said, code)
        made[key] = Finding(code=code, severity="error", title=title, evidence=evidence, fix=fix,
                            fix_commands=commands)
        findings.append(made[key])


def extension_code(env: Environment, said: ToolMessage) -> str | None:
    """The finding an extension's message states; None for one that states none (xFormers' block when the versions it
    names agree: its extensions failed for another reason, which XFORMERS_MORE_DETAILS=1 prints)."""
    if said.kind == "undefined_symbol":
        return "EXTENSION_ABI_MISMATCH"
    if said.kind == "extension_built_for":
        return _built_for_code(said)
    if said.kind == "requirement_conflict":
        return "TORCHVISION_MISMATCH" if said.package in _COMPANIONS else "EXTENSION_PIN_MISMATCH"
    if said.kind == "library_not_found":
        return "EXTENSION_CUDA_MISMATCH"
    if said.kind == "provider_load_failed":
        framework = _framework_cuda_major(env)
        mismatch = said.library != "cudnn" and said.built and framework and framework != said.built
        return "EXTENSION_CUDA_MISMATCH" if mismatch else "LIBRARY_MISSING"
    return None


def _built_for_code(said: ToolMessage) -> str | None:
    built, found = said.built or "", said.found or ""
    if said.library == "python":  # a build for CPython 3.10 does not load in 3.11; patch releases share the ABI
        return "EXTENSION_ABI_MISMATCH" if built.split(".")[:2] != found.split(".")[:2] else None
    if built.split("+")[0] != found.split("+")[0]:
        return "EXTENSION_ABI_MISMATCH"
    return "EXTENSION_CUDA_MISMATCH" if _local(built) != _local(found) else None


def _local(version: str) -> str:
    return version.partition("+")[2]


def _framework_cuda_major(env: Environment) -> str | None:
    """The CUDA major of the paste's torch (or other framework) build, where the paste states it."""
    for fw in env.frameworks:
        if fw.cuda:
            return fw.cuda.split(".")[0]
    return None


def _torch_version(env: Environment, said: ToolMessage) -> str | None:
    """The installed torch: what the message found, else the paste's torch."""
    if said.library == "torch" and said.found:
        return said.found
    torch = next((f for f in env.frameworks if f.name == "torch"), None)
    return torch.version if torch is not None else env.packages.get("torch")


def _extension_facts(env: Environment, said: ToolMessage) -> list[str]:
    """The facts of a message as evidence lines."""
    out = []
    if said.kind == "undefined_symbol":
        torch = _torch_version(env, said)
        out.append(f"{said.package or 'the extension'} ({said.soname}) needs {said.demangled or said.symbol}, which "
                   f"the installed torch{' ' + torch if torch else ''} does not export")
        abi = symbol_abi(said)
        if abi:
            out.append(abi)
    elif said.kind == "extension_built_for":
        what = "torch" if said.library == "torch" else "Python"
        out.append(f"{said.package} was built for {what} {said.built}; the installed {what} is {said.found}")
    elif said.kind == "requirement_conflict":
        out.append(f"{said.package} {said.package_version} declares {said.library}{said.requirement}; the installed "
                   f"{said.library} is {said.found}")
    elif said.kind == "provider_load_failed":
        out.append(_provider_fact(env, said))
    elif said.kind == "library_not_found":
        by = "BNB_CUDA_VERSION" if said.library == "BNB_CUDA_VERSION" else "torch's CUDA"
        out.append(f"bitsandbytes opens the file of the CUDA release {by} names ({said.built}): {said.soname}, which "
                   "is not among its files")
    return out


def symbol_abi(said: ToolMessage) -> str | None:
    """What the symbol's name says of the C++ ABI the extension was built with: std::__cxx11 names only exist in
    the C++11 ABI (the pre-C++11 std::string demangles as "std::string")."""
    symbol, demangled = said.symbol or "", said.demangled or ""
    if "__cxx11" in symbol:
        return ("the symbol is of the C++11 ABI (std::__cxx11): the extension was built with the C++11 ABI, and a "
                "torch built with the pre-C++11 ABI (torch.compiled_with_cxx11_abi() False) does not export it")
    if "std::string" in demangled or "std::basic_string<char" in demangled and "__cxx11" not in demangled:
        return ("the symbol is of the pre-C++11 ABI (std::string): the extension was built with the pre-C++11 ABI, "
                "and a torch built with the C++11 ABI (torch.compiled_with_cxx11_abi() True) does not export it")
    return None


def _provider_fact(env: Environment, said: ToolMessage) -> str:
    framework = _framework_cuda_major(env)
    if said.library == "cudnn":
        return f"ONNX Runtime's CUDA provider links cuDNN {said.built or '?'} ({said.soname}), which is not found"
    need = f"ONNX Runtime's CUDA provider was built for CUDA {said.built}: it opens {said.soname}" if said.built else \
        f"ONNX Runtime's CUDA provider opens {said.soname}"
    torch = next((f for f in env.frameworks if f.cuda), None)
    return need + (f"; {torch.name} {torch.version} is a CUDA {torch.cuda} build" if torch and framework else "")


def _extension_words(env: Environment, said: ToolMessage, code: str) -> tuple[str, str, list[list[str]]]:
    """The title, the fix and the fix's commands of the finding a message states."""
    if said.kind == "provider_load_failed":
        return _provider_words(env, said, code)
    if said.kind == "requirement_conflict":
        return _pin_words(said)
    package = said.package or "an extension"
    torch = _torch_version(env, said)
    if said.kind == "extension_built_for" and said.library == "python":
        return (f"{package} was built for Python {said.built}; the interpreter is Python {said.found}",
                f"install the {package} wheel of this Python ({_cp(said.found)}): pip install --force-reinstall "
                f"--no-deps {package}=={env.packages.get(package, '<version>')}", [])
    if code == "EXTENSION_CUDA_MISMATCH":
        return (f"{package} was built for torch {said.built}; the installed torch is {said.found} (another build)",
                f"install torch {said.built}, the build {package} was built for (`cudamatrix solve 'torch=="
                f"{said.built}'` names its index), or the {package} built for the installed torch's "
                f"{_local(said.found or '') or 'build'}", [])
    if said.kind == "extension_built_for":
        title = f"{package} was built for torch {said.built}; the installed torch is {said.found}: its C++/CUDA " \
                "extensions cannot load"
    else:
        title = f"{package} was built against another torch than the installed one{' (' + torch + ')' if torch else ''}" \
                ": its compiled library does not load (undefined symbol)"
    fix, commands = _rebuild_fix(said, package, torch)
    return title, fix, commands


def _library_words(said: ToolMessage, matrix: Matrix | None) -> tuple[str, str, list[list[str]]]:
    """bitsandbytes without a library for the CUDA release named: the newest release read whose wheel has one it
    opens for it (data/extensions.json ``library_choices``), or the override variable unset."""
    asked = release_of((said.built or "").replace(".", ""))  # "13.1", as the paste reader wrote the file's "131"
    other = release_carrying(matrix, "bitsandbytes", asked) if matrix is not None and asked else None
    ways = [f"pip install 'bitsandbytes=={other[0]}' (its wheel carries libbitsandbytes_cuda{other[1][0]}"
            f"{other[1][1]}, which it opens for CUDA {said.built})" if other else
            f"a bitsandbytes release whose wheel carries a library it opens for CUDA {said.built}"]
    if said.library == "BNB_CUDA_VERSION":
        ways.insert(0, "unset BNB_CUDA_VERSION (it names a CUDA release this bitsandbytes has no file for; without it "
                       "bitsandbytes opens the file of torch's CUDA)")
    return (f"bitsandbytes has no library for CUDA {said.built}: {said.soname} is not among its files",
            "; or ".join(ways), [])


def _cp(python: str | None) -> str:
    parts = (python or "").split(".")
    return f"cp{parts[0]}{parts[1]}" if len(parts) >= 2 else "this interpreter's tag"


def _rebuild_fix(said: ToolMessage, package: str, torch: str | None) -> tuple[str, list[list[str]]]:
    """The package built for the installed torch, or torch moved to the one the package was built for."""
    base = (torch or "").split("+")[0]
    back = f"; or move torch to {said.built}, the one it was built for: pip install 'torch=={said.built.split('+')[0]}'" \
        if said.built else ""
    if package in _PIN_PACKAGES and base:
        return (f"install the {package} release built for torch {base} ({package} declares the exact torch it was "
                f"built for, so pip picks it): pip install {package} 'torch=={base}'{back}",
                [["pip", "install", package, f"torch=={base}"]])
    if package == "flash-attn":
        abi = symbol_abi(said) or ""
        flag = "cxx11abiFALSE" if "C++11 ABI (std::__cxx11)" in abi else "cxx11abiTRUE" if "pre-C++11" in abi else \
            "cxx11abiTRUE or FALSE as torch.compiled_with_cxx11_abi() says"
        minor = ".".join(base.split(".")[:2]) if base else "X.Y"
        return (f"install the flash-attn release wheel built for torch {minor}, the installed torch's CUDA major and "
                f"{flag} (flash-attention's GitHub release files, flash_attn-V+cuXXtorch{minor}{flag.split()[0]}-...), "
                f"or build it against the installed torch: pip install flash-attn --no-build-isolation "
                f"--no-cache-dir{back}", [])
    if package in _PYG:
        return (f"install {package} from PyG's wheel page for torch {base or 'X.Y.Z'} and its CUDA build (the -f link of "
                f"PyG's installation guide), or build it against the installed torch: pip install --no-cache-dir "
                f"--no-build-isolation {package}{back}", [])
    return (f"reinstall {package} built for the installed torch{' ' + base if base else ''} (a release whose wheel was "
            f"built for it, or a build from source against it: pip install --force-reinstall --no-cache-dir "
            f"--no-build-isolation {package}){back}", [])


def _pin_words(said: ToolMessage) -> tuple[str, str, list[list[str]]]:
    package, library = said.package or "a package", said.library or "torch"
    base = (said.found or "").split("+")[0]
    title = f"{package} {said.package_version} declares {library}{said.requirement}; the installed {library} is " \
            f"{said.found}"
    move = f"or install the {library} it declares: pip install '{library}{said.requirement}'"
    if package in _COMPANIONS or not base:
        return title, f"install the {package} of the installed {library}, {move}", []
    return (title, f"install the {package} release that declares the installed {library} {base}: pip install "
            f"{package} '{library}=={base}' (pip picks the release whose pin it meets; none for a {library} too new or "
            f"too old for every release); {move}", [["pip", "install", package, f"{library}=={base}"]])


def _provider_words(env: Environment, said: ToolMessage, code: str) -> tuple[str, str, list[list[str]]]:
    framework = _framework_cuda_major(env)
    if said.library == "cudnn":
        return (f"ONNX Runtime's CUDA provider cannot load cuDNN {said.built or ''} ({said.soname})".replace("  ", " "),
                f"install cuDNN {said.built or ''} where the loader finds it (pip install nvidia-cudnn-cu"
                f"{framework or 'XX'}, its folder on LD_LIBRARY_PATH, or import torch first, which loads its own), or "
                "an onnxruntime-gpu built for the cuDNN major installed".replace("  ", " "), [])
    if code == "EXTENSION_CUDA_MISMATCH":
        return (f"onnxruntime-gpu was built for CUDA {said.built}; the framework is a CUDA {framework} build "
                f"({said.soname} not found)",
                f"install an onnxruntime-gpu built for CUDA {framework}, the framework's (ONNX Runtime's CUDA "
                f"execution provider requirements list the release of each CUDA major), so both use one set of CUDA "
                f"libraries; or install the CUDA {said.built} libraries it opens (nvidia-cublas-cu{said.built})", [])
    cuda = f"CUDA {said.built}" if said.built else "CUDA"
    return (f"ONNX Runtime's CUDA provider cannot load {said.soname} ({cuda} is not found)",
            f"install the {cuda} libraries it opens where the loader finds them (pip install nvidia-cublas-cu"
            f"{said.built or 'XX'} nvidia-cuda-runtime-cu{said.built or 'XX'}, or a torch of {cuda}, imported before "
            f"onnxruntime), or an onnxruntime-gpu built for the CUDA installed", [])
