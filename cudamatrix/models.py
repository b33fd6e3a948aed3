"""Values passed between the pipeline's stages: Environment, Request, Solution, Finding, Plan, Report.

``detect() -> Environment`` · ``solve(environment, matrix, request) -> Solution`` ·
``make_plan(environment, solution) -> Plan`` · ``apply(plan) -> Applied`` · ``verify() -> Report``.
Every model forbids unknown keys so that a saved ``detect --json`` read back by ``--env FILE`` is checked.
"""
from __future__ import annotations

from typing import Any, Literal

from cudamatrix.schema import FORBID, field, record, to_dict

ENV_SCHEMA_VERSION = 1
# this package's version, as pyproject.toml and cudamatrix.__version__ state it (tests/test_names.py holds the three
# equal): the stages read it here, below the package's API, which they never import
TOOL_VERSION = "0.1.0"


class Model:
    """Base of every model: records (dataclasses to whoever asks); validation through
    :func:`cudamatrix.schema.validate`."""

    __pydantic_config__ = FORBID

    def to_dict(self) -> dict:
        return to_dict(self)


@record
class Note(Model):
    """Something a probe could not read, or an oddity worth telling: absence is data."""

    probe: str  # "nvml", "nvidia-smi", "ldconfig", "report:nvidia-smi" ...
    message: str
    level: Literal["info", "warning", "error"] = "info"


# --- Environment ---------------------------------------------------------------------------------

DriverStatus = Literal[
    "ok",  # driver loaded and at least one device usable
    "absent",  # no NVIDIA driver installed / loaded
    "no_device",  # driver present, no device visible (container without passthrough, CUDA_VISIBLE_DEVICES="")
    "mismatch",  # NVML "Driver/library version mismatch"
    "error",  # device visible but unusable ("Unknown Error", ERR!)
    "unknown",  # nothing could tell (a pasted report without nvidia-smi)
]


@record
class Driver(Model):
    """The NVIDIA driver: its version, the highest CUDA it runs, and whether it answered."""

    version: str | None = None  # "580.65.06"
    cuda_version: str | None = None  # highest CUDA the driver supports: "13.0"
    status: DriverStatus = "unknown"
    kernel_module_version: str | None = None  # /proc/driver/nvidia/version (can differ from user space)
    library_version: str | None = None  # user-space libnvidia-ml / libcuda version when it differs
    source: str | None = None  # which probe gave the version
    error: str | None = None  # the driver's own words when it failed
    jetson_linux: str | None = None  # a Jetson's Jetson Linux (L4T) release, from /etc/nv_tegra_release ("36.4.3")


@record
class GpuProcess(Model):
    """A process holding memory on a GPU (from nvidia-smi)."""

    pid: int | None = None
    name: str | None = None
    used_memory_mib: int | None = None


@record
class GpuInfo(Model):
    """One GPU: name, compute capability, memory, and the processes on it."""

    index: int | None = None
    name: str | None = None
    compute_capability: str | None = None  # "9.0"
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    mig_mode: str | None = None  # "Enabled" / "Disabled" / None
    processes: list[GpuProcess] = field(default_factory=list)
    source: str | None = None


@record
class Library(Model):
    """One copy of a CUDA-stack shared library found on this machine."""

    name: str  # "cudart", "cudnn", "cublas", "cuda" (driver API), "nvml" ...
    soname: str  # "libcudnn.so.9"
    path: str
    origin: str  # "ldconfig", "LD_LIBRARY_PATH", "CUDA_HOME", "/usr/local/cuda", "conda", "wheel:nvidia-cudnn-cu12"
    version: str | None = None  # its own answer through ctypes (cudnnGetVersion -> "9.1.0")
    loaded_first: bool = False  # the copy of this soname the loader would pick first
    shadowed_by: str | None = None  # path of the copy that wins, when this one loses
    stub: bool = False  # a link-time stub (…/stubs/libcuda.so)


@record
class LibraryLoad(Model):
    """The loader model's prediction: the file a framework maps for one SONAME, and the rule that chose it."""

    framework: str  # "torch"
    soname: str  # "libcudnn.so.9"
    path: str | None  # real path of the file that will be mapped (None: not found, the load fails)
    rule: str  # "DT_RPATH of libtorch_cuda.so", "LD_LIBRARY_PATH", "already loaded (LD_PRELOAD)", "ld.so cache" ...
    requested_by: str | None = None  # the object whose DT_NEEDED or dlopen asked for it
    how: str = "DT_NEEDED"  # "DT_NEEDED" | "dlopen" | "preload" (the framework's own by-path load) | "LD_PRELOAD"
    found_as: str | None = None  # the path as the search found it (before symlinks), naming the folder that won
    expected: str | None = None  # the file mapped without LD_PRELOAD, LD_LIBRARY_PATH and earlier loads
    expected_rule: str | None = None
    when: str = "import"  # "import" | "first use" (a lazy dlopen)
    version: str | None = None  # of the file that will be mapped (its name, or the wheel that installed it)
    expected_version: str | None = None  # of ``expected``


@record
class Toolkit(Model):
    """A CUDA toolkit found on the machine (nvcc or version.json), or stated in a report."""

    source: str  # "nvcc --version", "version.json", "report:nvcc"
    version: str | None = None
    path: str | None = None


@record
class Framework(Model):
    """An installed framework distribution and the build it is (its variant)."""

    name: str  # torch, torchvision, torchaudio, tensorflow, jax, jaxlib
    version: str
    variant: str | None = None  # "cu121", "cpu", "and-cuda", "cuda12"
    cuda: str | None = None  # CUDA the build targets
    cudnn: str | None = None
    source: str | None = None  # "metadata", "local version", "report:collect_env"


@record
class ToolMessage(Model):
    """A warning or error a framework, the CUDA runtime or the loader printed about the machine, read from a paste:
    torch's architecture warning, "no kernel image is available", TensorFlow's and JAX's cuDNN lines, a library
    that could not be opened. It keeps the facts the words state; the finding they imply is the diagnose stage's."""

    tool: str  # who said it: "torch", "tensorflow", "xla", "jax", "cuda runtime", "onnxruntime", "loader"
    # arch_unsupported, no_kernel_image, driver_too_old, driver_insufficient, library_version, library_missing;
    # a torch extension's: extension_built_for, undefined_symbol, provider_load_failed, requirement_conflict,
    # library_not_found (bitsandbytes has no library for the CUDA release named: ``built``; ``library`` names who
    # named it, "torch" or "BNB_CUDA_VERSION")
    kind: str
    text: str  # the words, as printed (at most 300 characters)
    gpu: str | None = None  # the GPU named ("NVIDIA GeForce RTX 5090")
    compute_capability: str | None = None  # its compute capability ("12.0")
    archs: list[str] = field(default_factory=list)  # the build's SASS targets it lists ("5.0" ... "9.0")
    ptx: list[str] = field(default_factory=list)  # the build's PTX targets it lists ("3.7")
    library: str | None = None  # "cudnn", "cudart", "cusolver" ...: the library the words are about
    soname: str | None = None  # the file that could not be opened ("libcudnn.so.8")
    built: str | None = None  # the version the program was built against ("8.9.6")
    found: str | None = None  # the version found at run time ("8.6.0"; the driver's CUDA, "11.4", for the driver)
    minimum: str | None = None  # the lowest version the program accepts, where it says
    package: str | None = None  # the distribution the words are about ("xformers", "flash-attn", "vllm")
    package_version: str | None = None  # its version, where the words say it ("0.7.3")
    requirement: str | None = None  # what it declares of ``library`` ("==2.5.1"), as pip's resolver quotes it
    symbol: str | None = None  # the symbol the loader could not resolve ("_ZN3c104cuda9SetDeviceEi")
    demangled: str | None = None  # that symbol demangled by c++filt ("c10::cuda::SetDevice(int)"), where it ran


@record
class FileConflict(Model):
    """Two distributions that install the same file (they clobber each other)."""

    path: str  # relative to site-packages: "nvidia/cudnn/lib/libcudnn.so.9"
    distributions: list[str]


@record
class ExtensionObject(Model):
    """A shared object of an installed distribution that links torch's or CUDA's libraries, as its ELF file says
    (DT_NEEDED, dynamic symbols): read, never loaded."""

    path: str
    needed: list[str] = field(default_factory=list)  # its DT_NEEDED naming torch's (libc10.so) or CUDA's libraries
    torch_symbols: int = 0  # the torch symbols it needs (c10, at, torch namespaces; aoti_torch_*)
    missing: list[str] = field(default_factory=list)  # the first of them no library of the installed torch defines
    missing_count: int = 0
    demangled: list[str] = field(default_factory=list)  # ``missing`` as c++filt reads them (empty without c++filt)
    unchecked: str | None = None  # why its symbols were not resolved (no torch installed, an unreadable table)
    sass: list[str] = field(default_factory=list)  # compute capabilities of the cubins of its .nv_fatbin ("8.0")
    ptx: list[str] = field(default_factory=list)  # ... and of its PTX (JIT-compiled for an equal or higher one)


@record
class Extension(Model):
    """An installed distribution built against a framework or CUDA: what it declares (Requires-Dist naming torch,
    jax, jaxlib or tensorflow), the torch its build record names, and its shared objects that link torch or CUDA."""

    name: str
    version: str
    declares: list[str] = field(default_factory=list)  # its requirements naming a framework, as written
    built_for: str | None = None  # the torch it was built for, as its files say ("2.6.0+cu124")
    built_for_source: str | None = None  # the file that says so ("xformers/cpp_lib.json", "Requires-Dist")
    objects: list[ExtensionObject] = field(default_factory=list)


@record
class PythonInfo(Model):
    """The interpreter being examined: executable, version, platform tag."""

    executable: str | None = None
    version: str | None = None  # "3.11.7"
    implementation: str | None = None
    platform: str | None = None  # "linux_x86_64" / "linux_aarch64" / "win_amd64"
    tags: list[str] = field(default_factory=list)  # the first few supported wheel tags, most preferred first
    site_packages: list[str] = field(default_factory=list)
    in_virtualenv: bool | None = None
    installer: str | None = None  # "pip", "uv", "conda"


@record
class Context(Model):
    """Where the machine runs: OS, WSL, container, notebook service."""

    os: str | None = None  # "linux", "windows", "darwin"
    wsl: bool = False
    container: str | None = None  # "docker", "podman", "kubernetes", None
    colab: bool = False
    kaggle: bool = False
    jupyter: bool = False
    env: dict[str, str] = field(default_factory=dict)  # relevant variables only: LD_LIBRARY_PATH, CUDA_VISIBLE_DEVICES ...


@record
class DiskSpace(Model):
    """Free space of one file system an install writes to."""

    purpose: str  # "site-packages", "temp", "pip cache"
    path: str
    free_mib: int
    total_mib: int


@record
class HostResources(Model):
    """Host memory (/proc/meminfo) and the disks an install writes to (statvfs); empty when unread."""

    memory_total_mib: int | None = None
    memory_available_mib: int | None = None
    disks: list[DiskSpace] = field(default_factory=list)


@record
class Environment(Model):
    """Everything detected about one machine and one Python environment."""

    schema_version: int = ENV_SCHEMA_VERSION
    captured_at: str | None = None  # ISO time
    origin: Literal["live", "report", "file", "target"] = "live"
    hostname: str | None = None
    driver: Driver = field(default_factory=Driver)
    gpus: list[GpuInfo] = field(default_factory=list)
    libraries: list[Library] = field(default_factory=list)
    toolkits: list[Toolkit] = field(default_factory=list)
    python: PythonInfo = field(default_factory=PythonInfo)
    packages: dict[str, str] = field(default_factory=dict)  # canonical distribution name -> version
    requirements: dict[str, list[str]] = field(default_factory=dict)  # distribution -> its declared nvidia-* requirements (torch etc.)
    frameworks: list[Framework] = field(default_factory=list)
    file_conflicts: list[FileConflict] = field(default_factory=list)
    library_loads: list[LibraryLoad] = field(default_factory=list)  # the loader model's predictions (ldso.libpaths)
    extensions: list[Extension] = field(default_factory=list)  # installed distributions built against a framework
    messages: list[ToolMessage] = field(default_factory=list)  # warnings and errors read from pasted reports
    context: Context = field(default_factory=Context)
    notes: list[Note] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)  # probe -> milliseconds spent
    # probe ("libraries", "driver") -> what its child process wrote on stderr (the last 64 KiB: a library's own
    # messages, such as cuDNN's "Unable to load any of {...}"), kept here and never passed to the terminal
    child_stderr: dict[str, str] = field(default_factory=dict)
    host: HostResources = field(default_factory=HostResources)  # memory and disk headroom (live detection only)


# --- Findings (doctor) ---------------------------------------------------------------------------

Severity = Literal["error", "warning", "info"]


@record
class Finding(Model):
    """One diagnosis: a stable code, a severity, the evidence and the fix."""

    code: str  # stable: NO_DRIVER, DRIVER_TOO_OLD, ...
    severity: Severity
    title: str
    evidence: list[str] = field(default_factory=list)
    fix: str | None = None
    fix_commands: list[list[str]] = field(default_factory=list)


# --- Solution (solve) ----------------------------------------------------------------------------

@record
class Pin(Model):
    """One exact distribution of a Solution, with the index it comes from."""

    name: str
    version: str  # exact, with the local version where the index needs it ("2.5.1+cu121")
    extras: list[str] = field(default_factory=list)
    index_url: str | None = None  # None: the default index

    def requirement(self) -> str:
        extras = f"[{','.join(self.extras)}]" if self.extras else ""
        return f"{self.name}{extras}=={self.version}"


@record
class Rejection(Model):
    """A candidate the solver did not choose, with the rules that rejected it."""

    candidate: str  # "torch 2.5.1+cu124"
    reasons: list[str]
    rules: list[str] = field(default_factory=list)  # rule ids: driver_floor, arch, cudnn_gpu, python, platform, request, shared_nvidia


@record
class Cause(Model):
    """Why no set fits: the rule and a whole sentence."""

    rule: str
    message: str
    machines: list[str] = field(default_factory=list)  # target names that block it (fleet solves)


@record
class WayOut(Model):
    """A change that would let a set fit (upgrade the driver, pin older, a CPU build ...)."""

    message: str
    kind: Literal["upgrade_driver", "pin_older", "cpu_build", "split_environments", "change_python", "jetpack",
                  "other"]
    # the change, as the solver re-solves it before the way out is printed: {"driver": "570.26"},
    # {"python": "3.13 3.12"} (tried in that order), {"family": "torch", "requirement": "torch==2.7.1+cu118"};
    # empty: a change outside the matrix (another index, separate environments), printed as it is
    change: dict[str, str] = field(default_factory=dict)


@record
class FrameworkChoice(Model):
    """The release and variant chosen for one requested framework."""

    name: str
    version: str
    variant: str
    cuda: str | None = None
    cudnn: str | None = None
    index_url: str | None = None
    matrix_source: str | None = None
    # the CUDA/cuDNN wheels the label names that the answer leaves as a range (pip takes the newest in it):
    # "nvidia-cudnn-cu12<10.0,>=9.3.0.75"; empty: what the label says is pinned
    unpinned: list[str] = field(default_factory=list)

    def label(self) -> str:
        """"CUDA 12.5.1, cuDNN 9.3.0.75" (with what is unpinned said), or "CPU build"."""
        if not self.cuda:
            return "CPU build"
        free = f" (unpinned: pip takes the newest of {', '.join(self.unpinned)})" if self.unpinned else ""
        return f"CUDA {self.cuda}, cuDNN {self.cudnn or 'unknown'}{free}"


@record
class Solution(Model):
    """The chosen set for a Request on its Targets, or the causes of no solution."""

    request: list[str]
    targets: list[str]  # names of the machines solved for
    frameworks: list[FrameworkChoice] = field(default_factory=list)
    packages: list[Pin] = field(default_factory=list)
    variant: str | None = None  # the torch variant, else the first framework's
    cuda: str | None = None
    cudnn: str | None = None
    index_url: str | None = None
    extra_index_urls: list[str] = field(default_factory=list)
    pip_args: list[str] = field(default_factory=list)  # arguments after "pip install"
    env: dict[str, str] = field(default_factory=dict)  # environment changes needed (LD_LIBRARY_PATH ...)
    unchanged: bool = False  # what is installed already is this solution
    to_install: list[Pin] = field(default_factory=list)  # the minimal change: only what differs from what is installed
    rejected: list[Rejection] = field(default_factory=list)
    trace: list[str] = field(default_factory=list)
    matrix_version: str | None = None
    # inferred matrix facts the answer rests on: [{"fact": ..., "basis": ...}] (empty: all known)
    unverified: list[dict[str, str]] = field(default_factory=list)
    # requested names neither the matrix knows nor an index could be asked about (one sentence each)
    unchecked: list[str] = field(default_factory=list)
    # sentences people must read with the answer: every substitution the solver made, every rule it applied
    # that changes what was asked (a build passed over for inferred facts, a driver left unknown); each is a
    # trace line too
    notes: list[str] = field(default_factory=list)


# --- Plan and apply ------------------------------------------------------------------------------

@record
class Step(Model):
    """One action of a Plan (install, uninstall, env, preload, verify, note)."""

    kind: Literal["install", "uninstall", "reinstall", "env", "preload", "verify", "note"]
    reason: str
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 1800.0


@record
class Removal(Model):
    """A distribution a plan uninstalls, and why (a leftover of another variant, the cause of a file clash)."""

    name: str
    version: str | None = None
    reason: str = ""


@record
class Remedy(Model):
    """How a plan answers one error finding: the step that fixes it, or why it cannot be fixed here."""

    code: str
    title: str
    action: Literal["install", "reinstall", "uninstall", "env", "not_fixable"]
    detail: str  # the step's reason, or "not fixable here: <what to do> (<why>)"


@record
class Plan(Model):
    """The ordered Steps that take one interpreter to a Solution."""

    python: str  # interpreter being changed
    steps: list[Step] = field(default_factory=list)
    solution: Solution | None = None
    nothing_to_do: bool = False
    to_remove: list[Removal] = field(default_factory=list)  # uninstalled before the solved set goes in
    remedies: list[Remedy] = field(default_factory=list)  # one per error finding of the starting environment


@record
class InstalledDist(Model):
    """A distribution installed before a Plan ran (for rollback and the journal)."""

    name: str
    version: str
    source: str | None = None  # direct_url.json URL, or index
    installer: str | None = None
    path: str | None = None  # its .dist-info folder (the journal repacks the installed files from it)


@record
class Applied(Model):
    """The outcome of applying a Plan: the steps run and, on failure, the error and the rollback."""

    ok: bool
    steps_run: list[str] = field(default_factory=list)
    error: str | None = None
    restored: list[InstalledDist] = field(default_factory=list)
    before: list[InstalledDist] = field(default_factory=list)
    after: list[InstalledDist] = field(default_factory=list)
    journal_error: str | None = None  # ok, but the journal could not be completed (why): no undo; it is left
    journal: str | None = None  # where that journal is left (fix --resume completes it, --rollback goes back)


# --- Verify --------------------------------------------------------------------------------------

@record
class FrameworkReport(Model):
    """What verify found for one framework (a real GPU computation, or why not)."""

    framework: str
    status: Literal["verified", "failed", "not_possible", "not_installed"]
    version: str | None = None
    cuda: str | None = None
    cudnn: str | None = None
    device_name: str | None = None
    compute_capability: str | None = None
    mapped_libraries: list[dict[str, Any]] = field(default_factory=list)
    time_to_first_result_s: float | None = None
    max_abs_error: float | None = None
    cpu_checked: bool = False
    cause: str | None = None
    finding_code: str | None = None
    stderr_tail: str | None = None  # the child's last 20 lines on stderr (numpy warnings, cuDNN's own messages)
    stderr_lines: int = 0  # how many lines it wrote there (shown on failure; said in one line otherwise)
    # the loader model checked against the child's /proc/self/maps: one row per predicted CUDA library
    # ({soname, predicted, mapped, rule, agree}); the rows where they differ, again, as model errors
    loads_compared: list[dict[str, Any]] = field(default_factory=list)
    model_errors: list[dict[str, Any]] = field(default_factory=list)
    # one library family mapped from several copies of different (or unknown) versions after the work: a shim
    # from one copy, sub-libraries from another ({family, copies: [{folder, version, files}]})
    mixed_loads: list[dict[str, Any]] = field(default_factory=list)
    # each installed torch extension the child imported after the framework's work ({package, version, module,
    # status: imported / failed / verified / wrong, error: its own words, max_abs_error: its GPU op against the CPU})
    extensions: list[dict[str, Any]] = field(default_factory=list)


@record
class Report(Model):
    """The result of verify over every installed framework."""

    status: Literal["verified", "failed", "not_possible"]
    frameworks: list[FrameworkReport] = field(default_factory=list)
    cached_at: str | None = None  # when the result was obtained, if it came from the cache
