"""What a pasted report's own words imply: the findings they state, and the concrete answer each finding's fix names.

Two things, both called once from :func:`cudamatrix.diagnose.findings.diagnose` (:func:`complete`):

- **Stated findings.** A framework's or the CUDA runtime's words in a paste (:class:`~cudamatrix.models.ToolMessage`)
  imply a finding even where the paste states too little for the rules to judge the build: torch's architecture
  warning and "no kernel image is available" imply ARCH_UNSUPPORTED, "the NVIDIA driver on your system is too old"
  and "CUDA driver version is insufficient" DRIVER_TOO_OLD, a cuDNN older than the one a framework was built with
  (or none found) CUDNN_MISMATCH, another CUDA library not found LIBRARY_MISSING or older than built against
  LIBRARY_MISMATCH. One finding per code; where the rules found the same code already, the words join its evidence.
- **Concrete fixes.** ARCH_UNSUPPORTED and DRIVER_TOO_OLD name the build that fits, from the same solve ``cudamatrix
  solve FAMILY`` gives for this machine (its pip command), and the driver floor; the cuDNN and library findings
  name the version to install.

No I/O; the solve is the pure solver's.
"""
from __future__ import annotations

from packaging.version import InvalidVersion, Version

from cudamatrix.diagnose import pasted
from cudamatrix.diagnose.context import match_installed
from cudamatrix.errors import NoSolution
from cudamatrix.matrix.data import Matrix
from cudamatrix.models import Environment, Finding, ToolMessage
from cudamatrix.safe.shells import Said, joined, pip, tool
from cudamatrix.solve.rules import driver_floors
from cudamatrix.solve.target import Target, from_environment

# what each kind of message implies
_CODES = {"arch_unsupported": "ARCH_UNSUPPORTED", "no_kernel_image": "ARCH_UNSUPPORTED",
          "driver_too_old": "DRIVER_TOO_OLD", "driver_insufficient": "DRIVER_TOO_OLD",
          "cpu_only_build": "CPU_ONLY_BUILD"}
_FAMILY_OF_TOOL = {"torch": "torch", "tensorflow": "tensorflow", "jax": "jax"}


def complete(env: Environment, matrix: Matrix, findings: list[Finding]) -> list[Finding]:
    """``findings`` with the findings the paste's words imply added (or joined to a finding of the same code),
    and the concrete answer in the fix of each finding that has one."""
    for said in env.messages:
        code = code_of(said)
        if code is None:
            continue
        same = next((f for f in findings if f.code == code), None)
        if same is None:
            same = stated_finding(said, code)
            findings.append(same)
            if code == "CUDNN_MISMATCH":
                _cudnn_pin(env, matrix, same)
        elif said.text and f"{said.tool} said: {said.text}" not in same.evidence:
            same.evidence.append(f"{said.tool} said: {said.text}")
    for f in findings:
        if f.code in ("ARCH_UNSUPPORTED", "DRIVER_TOO_OLD"):
            concrete_fix(env, matrix, f)
    pasted.container_requirement(env, matrix, findings)  # its fix is the image's, not a framework's
    pasted.extension_findings(env, findings, matrix)  # a torch extension's load error: its fix is the extension's
    return findings


def code_of(said: ToolMessage) -> str | None:
    """The finding code a message implies; None for one that implies none."""
    if said.kind in _CODES:
        return _CODES[said.kind]
    cudnn = said.library == "cudnn"
    if said.kind == "library_version" and said.library in _JAX_PARTS:
        return "JAX_PLUGIN_MISMATCH"  # JAX's CUDA plugin or PJRT of another release than jaxlib
    if said.kind == "library_version":
        return "CUDNN_MISMATCH" if cudnn else "LIBRARY_MISMATCH"
    if said.kind == "library_missing":
        return "CUDNN_MISMATCH" if cudnn else "LIBRARY_MISSING"
    return None


def stated_finding(said: ToolMessage, code: str) -> Finding:
    """The finding one message states, with its words as evidence and the fix its facts give."""
    title, fix = _STATED[code](said)
    return Finding(code=code, severity="error", title=title, evidence=[f"{said.tool} said: {said.text}"] +
                   _facts(said), fix=fix)


def _facts(said: ToolMessage) -> list[str]:
    """The facts a message states, as evidence lines."""
    out = []
    if said.gpu or said.compute_capability:
        out.append(f"GPU: {said.gpu or 'unnamed'}, compute capability {said.compute_capability or 'unknown'}")
    if said.archs or said.ptx:
        sass = " ".join(f"sm_{a.replace('.', '')}" for a in said.archs) or "none"
        ptx = " ".join(f"compute_{a.replace('.', '')}" for a in said.ptx) or "none"
        out.append(f"the installed build carries SASS {sass}, PTX {ptx}")
    if said.kind == "driver_too_old" and said.found:
        out.append(f"the driver runs CUDA {said.found} at most")
    elif said.library in _JAX_PARTS:
        part = "PJRT API: jaxlib's" if said.library == "pjrt" else "jaxlib"
        out.append(f"{part} {said.built or 'unknown'}, the plugin's {said.found or 'unknown'}")
    elif said.built or said.found or said.minimum:
        out.append(_versions(said))
    return out


def _versions(said: ToolMessage) -> str:
    """"built against 8.9.6, found 8.6.0, accepts 9.1.0 and newer"."""
    return ", ".join(x for x in (f"built against {said.built}" if said.built else None,
                                 f"found {said.found}" if said.found else None,
                                 f"accepts {said.minimum} and newer" if said.minimum else None) if x)


def _arch(said: ToolMessage) -> tuple[str, str]:
    if said.kind == "no_kernel_image":
        return ("A CUDA kernel has no image for this GPU (\"no kernel image is available for execution on the "
                "device\")", "install a build that covers the GPU: a framework's, or the CUDA extension's that "
                "raised it (rebuilt for the GPU's compute capability)")
    gpu = said.gpu or "the GPU"
    cc = f" (compute capability {said.compute_capability})" if said.compute_capability else ""
    return (f"The installed torch has no kernel image for {gpu}{cc}: torch says it is not compatible",
            "install a torch build that covers the GPU")


def _driver(said: ToolMessage) -> tuple[str, str]:
    if said.kind == "driver_too_old":
        return (f"The driver is too old for the installed torch: it runs CUDA {said.found or 'unknown'} at most "
                "(torch's words)", "upgrade the driver, or install a torch built for the CUDA this driver runs")
    return ("The driver is older than the CUDA runtime the program uses (\"CUDA driver version is insufficient for "
            "CUDA runtime version\")", "upgrade the driver to one whose CUDA version (nvidia-smi's \"CUDA Version\") "
            "is at least the program's; inside a container, run it with the GPU passed through (--gpus all): the "
            "runtime says the same when it finds no driver at all")


def _cudnn(said: ToolMessage) -> tuple[str, str]:
    who = {"xla": "XLA (TensorFlow or JAX)"}.get(said.tool, said.tool)
    if said.kind == "library_missing":
        name = said.soname or "cuDNN"
        return (f"{who}: cuDNN could not be loaded ({name})", _missing_cudnn_fix(said))
    floor = said.minimum or said.built
    return (f"{who} was built with cuDNN {said.built or 'unknown'} but found cuDNN {said.found or 'unknown'}",
            Said(f"make cuDNN {floor} or a later {_major(floor)}.x the one loaded: remove the older copy from "
                 "LD_LIBRARY_PATH (pip wheels bring their own), or install it (the nvidia-cudnn wheel the framework "
                 "declares; ", tool("fix"), " reinstalls it)"))


def _missing_cudnn_fix(said: ToolMessage) -> str:
    major = said.soname.split(".so.")[1].split(".")[0] if said.soname and ".so." in said.soname else None
    which = f"cuDNN {major}" if major else "cuDNN"
    return Said(f"install {which} where the loader finds it: the nvidia-cudnn wheel the framework declares (",
                tool("fix"), " reinstalls it), or the system package, with its folder on LD_LIBRARY_PATH")


def _library(said: ToolMessage) -> tuple[str, str]:
    if said.library in _JAX_PARTS:
        return _jax_parts(said)
    if said.kind == "library_missing" and not (said.soname or said.library):
        return (f"{said.tool} could not open some CUDA libraries (\"Cannot dlopen some GPU libraries\"); the log "
                "lines above it, not in the paste, name them", "install the CUDA libraries the framework needs (its "
                "CUDA wheels: e.g. pip install 'tensorflow[and-cuda]'), or put their folder on LD_LIBRARY_PATH; "
                "run with TF_CPP_MAX_VLOG_LEVEL=3 to see which one fails")
    if said.kind == "library_missing":
        name = said.soname or said.library or "a CUDA library"
        if said.library in ("cuda", "nvidia"):  # libcuda, libnvidia-ml: the driver's own libraries
            return (f"The driver's library {name} could not be loaded",
                    "on WSL it is in /usr/lib/wsl/lib: add that folder to LD_LIBRARY_PATH; elsewhere install the "
                    "NVIDIA driver (in a container: run it with --gpus all)")
        return (f"{name} could not be loaded ({said.tool})",
                Said(f"install the CUDA libraries it belongs to ({name}), or a build that brings its own (a "
                     "framework's CUDA wheels: e.g. ", pip("install", "tensorflow[and-cuda]"), ")"))
    return (f"{said.tool} was built against {said.library} {said.built}; the one found is {said.found} (older)",
            Said(f"install the {said.library} {said.tool} declares (its CUDA wheels: ", tool("fix"),
                 " reinstalls them), or remove the older copy from LD_LIBRARY_PATH"))


# JAX's CUDA plugin and its PJRT API: parts of JAX that must be of jaxlib's release
_JAX_PARTS = ("jax-cuda12-plugin", "jax-cuda12-pjrt", "jax-cuda13-plugin", "jax-cuda13-pjrt", "pjrt")


def _jax_parts(said: ToolMessage) -> tuple[str, str]:
    fix = ("install jax, jaxlib and JAX's CUDA plugin (jax-cudaNN-plugin, jax-cudaNN-pjrt) of one release: pip "
           f"install 'jax[cuda12]=={said.built}'" if said.library != "pjrt" and said.built else
           "install jax, jaxlib and JAX's CUDA plugin (jax-cudaNN-plugin, jax-cudaNN-pjrt) of one release: pip "
           "install -U 'jax[cuda12]' (or uninstall the plugin and run on the CPU with JAX_PLATFORMS=cpu)")
    if said.library == "pjrt":
        return (f"JAX's CUDA plugin speaks PJRT API {said.found}, jaxlib {said.built}: they are of different "
                "releases", fix)
    return (f"JAX's CUDA plugin {said.library} {said.found} is not of the installed jaxlib's release "
            f"({said.built})", fix)


def _cpu_only(said: ToolMessage) -> tuple[str, str]:
    return ("jaxlib is a CPU build: JAX says a CUDA-enabled jaxlib is not installed and falls back to the CPU",
            "install JAX's CUDA plugin for the driver's CUDA: pip install -U 'jax[cuda12]' (`cudamatrix solve jax` "
            "names the build for this machine)")


_STATED = {"ARCH_UNSUPPORTED": _arch, "DRIVER_TOO_OLD": _driver, "CUDNN_MISMATCH": _cudnn,
           "LIBRARY_MISSING": _library, "LIBRARY_MISMATCH": _library, "CPU_ONLY_BUILD": _cpu_only,
           "JAX_PLUGIN_MISMATCH": _library}


def _major(version: str | None) -> str:
    return (version or "?").split(".")[0]


# --- concrete fixes -------------------------------------------------------------------------------------

def concrete_fix(env: Environment, matrix: Matrix, finding: Finding) -> None:
    """Name the build that fits in an ARCH_UNSUPPORTED or DRIVER_TOO_OLD finding's fix: the one ``cudamatrix solve
    FAMILY`` picks for this machine, its pip command, and the driver it needs."""
    family = _family(env, finding)
    target = from_environment(env, matrix, name="the pasted machine" if env.origin == "report" else "this machine")
    if finding.code == "ARCH_UNSUPPORTED" and not target.gpus:
        finding.fix = Said(f"{finding.fix}" if not isinstance(finding.fix, str) else finding.fix,
                           "; the GPU's compute capability is not stated: `nvidia-smi --query-gpu=name,compute_cap "
                           "--format=csv` gives it, and `", tool("solve", family, "--gpu", "CC"), "` the build")
        return
    build, args = solved(env, matrix, target, family)
    if finding.code == "ARCH_UNSUPPORTED":
        finding.fix = Said(build, " (", tool("fix"), " installs it)") if args and build else (build or finding.fix)
    else:  # a driver to install is the answer even where no build fits the old one
        finding.fix = joined("; or ", [x for x in (_driver_part(env, matrix, target, finding), build if args else None)
                                       if x])
    if args:
        finding.fix_commands = [["pip", "install", *args]]


def _driver_part(env: Environment, matrix: Matrix, target: Target, finding: Finding) -> str:
    """The driver to install: the rule's floor when a rule found the finding, the installed torch's otherwise."""
    if (finding.fix or "").startswith("upgrade the driver to >="):
        return (finding.fix or "").split(", or install")[0]
    return _driver_floor(env, matrix, target) or "upgrade the driver"


def _family(env: Environment, finding: Finding) -> str:
    """The framework family a finding is about: the installed one its title names, else torch (the words of the
    messages that state these findings are torch's, or a CUDA program's)."""
    for fw in env.frameworks:
        if f"{fw.name} {fw.version}" in finding.title and fw.name in ("torch", "tensorflow", "jax"):
            return fw.name
    return "torch"


def solved(env: Environment, matrix: Matrix, target: Target, family: str) -> tuple[str | None, list[str]]:
    """("install torch 2.9.1 (cu130, CUDA 13.0) from https://...: pip install ...", the pip arguments): the set
    ``cudamatrix solve FAMILY`` gives for the target; or why there is none (no arguments)."""
    try:
        solution = _solve(env, matrix, target, family)
    except NoSolution as exc:
        why = f" ({exc.causes[0].message})" if exc.causes else ""
        ways = [w.message for w in exc.ways_out if w.kind != "cpu_build"]  # a CPU build answers no GPU finding
        way = Said("; way out: ", ways[0]) if ways else ""
        return Said(f"no {family} build in the matrix fits this machine{why}", way), []
    choice = next((f for f in solution.frameworks if f.name == family), None)
    if choice is None:
        return None, []
    if _keeps(env, solution, choice):
        return (f"the installed {family} {choice.version} ({choice.variant}) fits this machine: the failing "
                f"kernel is another package's (a CUDA extension built for other GPUs): reinstall or rebuild it for "
                f"the GPU"), []
    where = choice.index_url or "the default index (PyPI)"
    cuda = f", CUDA {choice.cuda}" if choice.cuda else ""
    needs = _needs_driver(matrix, target, choice.cuda)
    return (Said(f"install {family} {choice.version} ({choice.variant}{cuda}) from {where}, what `",
                 tool("solve", family), f"` gives for this machine{needs}: ", pip("install", *solution.pip_args)),
            list(solution.pip_args))


def _keeps(env: Environment, solution, choice) -> bool:
    """The solve keeps the installed build (the same release and variant; wheels aside)."""
    have = next((f for f in env.frameworks if f.name == choice.name), None)
    same = have is not None and have.version.split("+")[0] == choice.version.split("+")[0] and \
        have.variant == choice.variant
    return solution.unchanged or not solution.pip_args or same


def _solve(env: Environment, matrix: Matrix, target: Target, family: str):
    # lazy: `doctor` would load 56 ms more (python -X importtime; the hoisting's budget per command is 3% of its run): packaging._tokenizer, packaging.specifiers, cudamatrix.solve.assemble
    from cudamatrix.solve.solver import parse_request, solve

    return solve([target], parse_request([family], env), matrix, installed=env)


def _needs_driver(matrix: Matrix, target: Target, cuda: str | None) -> str:
    """", which needs driver >= 580.65.06" when the target's driver is not known (else the solve checked it)."""
    if target.driver or not cuda:
        return ""

    try:
        full, _, _ = driver_floors(matrix, Version(cuda), target.platform)
    except InvalidVersion:
        return ""
    return f", which needs driver >= {full}" if full else ""


def _driver_floor(env: Environment, matrix: Matrix, target: Target) -> str | None:
    """"upgrade the driver to >= 525.60.13 (530.30.02 for full support of CUDA 12.1)" for the installed torch's
    CUDA, when the paste names the build."""
    torch = next((f for f in env.frameworks if f.name == "torch" and f.cuda), None)
    if torch is None or torch.cuda is None:
        return None
    try:
        full, minor, _ = driver_floors(matrix, Version(torch.cuda), target.platform)
    except InvalidVersion:
        return None
    if not (full or minor):
        return None
    more = f" ({full} for full support of CUDA {torch.cuda})" if minor and full and minor != full else ""
    return f"upgrade the driver to >= {minor or full}{more}, the floor of the installed torch {torch.version}"


def _cudnn_pin(env: Environment, matrix: Matrix, finding: Finding) -> None:
    """The cuDNN wheel the installed framework's build declares (the matrix's pins), when the paste names the build:
    the exact thing to install. A build the matrix holds that declares no cuDNN wheel (TensorFlow before 2.14: the
    plain wheel loads the system's cuDNN) gets the cuDNN its row was built with instead, and no wheel is named."""
    for inst in match_installed(env, matrix):
        if inst.variant is None or inst.name not in ("torch", "tensorflow", "jax"):
            continue
        pin = next((p for p in inst.variant.nvidia_pins if p.startswith("nvidia-cudnn")), None)
        if pin:
            install = pip("install", pin.split(";")[0].strip(), always_quoted=(1,))  # the words and the argv
            finding.fix = Said(f"{finding.fix}" if not isinstance(finding.fix, str) else finding.fix,
                               f"; for {inst.name} {inst.version}: ", install)
            finding.fix_commands = [list(install.argv)]
            return
        if inst.variant.cuda is not None and inst.variant.cudnn is not None:
            finding.fix = (f"{inst.name} {inst.version} declares no nvidia-cudnn wheel: it loads the system's "
                           f"cuDNN, and was built with cuDNN {inst.variant.cudnn} for CUDA {inst.variant.cuda} (matrix "
                           f"row {inst.name} {inst.version} {inst.variant.name}): install cuDNN "
                           f"{inst.variant.cudnn} for CUDA {inst.variant.cuda.major}.x where the loader finds it "
                           "(the system library folders, or a folder on LD_LIBRARY_PATH; conda: cudnn="
                           f"{inst.variant.cudnn})")
            return
