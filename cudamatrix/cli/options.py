"""One declaration per option of the commands whose bodies run without typer.

Both parsers read this table: the typer declarations in :mod:`cudamatrix.cli.commands` (help, flags and
defaults come from here) and the typer-free fast path in :mod:`cudamatrix.cli.fast`. A test
(``tests/cli/test_options.py``) walks every typer command and option and checks that both parsers pass
the command function the same values. No typer import here: the fast path must start without it.
"""
from __future__ import annotations

from typing import Any, Literal

from cudamatrix.schema import record, replace

# flag: a boolean switch · value: a string · float · path: a pathlib.Path · list / paths: repeatable
Kind = Literal["flag", "value", "float", "path", "list", "paths"]


@record(frozen=True)
class Opt:
    """One command-line option: the parameter it fills, its flags, how its value is read, its default."""

    param: str
    flags: tuple[str, ...]
    kind: Kind
    default: Any
    help: str
    hidden: bool = False
    metavar: str | None = None  # what to type, shown in the help (None: by kind, see :meth:`shown_metavar`)

    def with_help(self, help: str, metavar: str | None = None) -> Opt:
        return replace(self, help=help, metavar=metavar or self.metavar)

    def shown_metavar(self) -> str | None:
        """The metavar the help shows: the declared one, else one by kind (none for a flag)."""
        if self.metavar is not None or self.kind == "flag":
            return self.metavar
        return {"float": "SECONDS", "path": "PATH", "paths": "PATH"}.get(self.kind, "TEXT")


@record(frozen=True)
class Arg:
    """The positional arguments of a command (all collected in one list parameter)."""

    param: str
    help: str
    metavar: str = "REQUIREMENT"


@record(frozen=True)
class Command:
    """A command: where its body lives (module in ``cudamatrix.cli``, function), its arguments and options."""

    module: str
    function: str
    options: tuple[Opt, ...]
    positional: Arg | None = None

    def option(self, param: str) -> Opt:
        return next(o for o in self.options if o.param == param)


JSON = Opt("as_json", ("--json",), "flag", False, "Print the JSON envelope.")
ALL_COPIES = Opt("all_copies", ("--all-copies",), "flag", False,
                 "Also list the CUDA library copies no loader reaches (CUDA_HOME, CUDA_PATH, /usr/local/cuda* "
                 "outside the ldconfig cache): a scan of every toolkit folder.")
DATA = Opt("data_dir", ("--data",), "path", None, "Read the matrix from this folder.", hidden=True, metavar="DIR")
ENV_FLEET = Opt("env", ("--env",), "paths", [],
                "A saved `detect --json`, or a folder of them (a fleet; repeatable: the answer must hold on every "
                "machine).", metavar="PATH")
DRIVER = Opt("driver", ("--driver",), "value", None, "Target driver version, e.g. 535.104.05.", metavar="VERSION")
GPU = Opt("gpu", ("--gpu",), "list", [], 'Target GPU: a name ("Tesla T4"), sm_75 or 7.5 (repeatable).', metavar="GPU")
PYTHON = Opt("python", ("--python",), "value", None,
             "Target Python version (3.10), or the path of an interpreter to inspect.", metavar="VERSION|PATH")
PLATFORM = Opt("platform", ("--platform",), "value", None, "linux_x86_64 | linux_aarch64 | win_amd64",
               metavar="PLATFORM")
TOOLKIT = Opt("cuda_toolkit", ("--cuda-toolkit",), "value", None,
              "Target CUDA toolkit version, if one is installed there.", metavar="VERSION")
MIRROR = Opt("mirror", ("--mirror",), "value", None,
             "Replace the PyTorch wheel index in index URLs with this mirror (its whl/ prefix).", metavar="URL")
FROM = Opt("from_", ("--from",), "list", [], "Pasted tool outputs (nvidia-smi, collect_env, pip list...) describing the "
           "target; '-' for stdin; repeatable.", metavar="FILE")
TARGET = (ENV_FLEET, FROM, DRIVER, GPU, PYTHON, PLATFORM, TOOLKIT)
REQUIREMENTS = Arg("requirements", "PEP 508 requirements: torch>=2.3 torchvision tensorflow==2.15.*")
VERIFY_TIMEOUT_S = 300.0

COMMANDS: dict[str, Command] = {
    "solve": Command("solve_cmd", "run_solve", positional=REQUIREMENTS, options=(
        *TARGET, Opt("explain", ("--explain",), "flag", False, "Show the decision trace and rejected candidates."),
        MIRROR, JSON, DATA)),
    "lock": Command("lock_cmd", "run_lock", positional=Arg("requirements", "PEP 508 requirements."), options=(
        Opt("output", ("-o", "--output"), "path", None, "Write here (default: stdout); a pylock must be named "
            "pylock.toml or pylock.NAME.toml.", metavar="FILE"),
        Opt("fmt", ("--format",), "value", "requirements", "requirements | uv | pylock", metavar="FORMAT"),
        *TARGET, Opt("glibc", ("--glibc",), "value", None, "The target's glibc, e.g. 2.35 (default: the saved "
                     "machine's, else this machine's, said in the lock).", metavar="VERSION"),
        Opt("pins_only", ("--pins-only",), "flag", False, "Write only the solved pins, without hashes or the other "
            "dependencies (no index needed; not a complete lock)."),
        Opt("allow_local", ("--allow-local-files",), "flag", False, "Write a lock that names paths of this machine "
            "(a file:// index or wheel folder pip is configured with); refused without it. The lock and the JSON say so."),
        MIRROR, JSON, DATA,
        Opt("per_class", ("--per-class",), "flag", False, "Fleets: one lock per node class when no single set "
            "fits, in the folder -o, with locks.json (class -> lock, Ray and Slurm selectors)."))),
    "check": Command("check_cmd", "run_check", options=(
        Opt("requirement_file", ("-r", "--requirement"), "path", None, "A requirements file to check.",
            metavar="FILE"),
        *TARGET, MIRROR, JSON, DATA)),
    "env": Command("env_cmd", "run_env", options=(
        Opt("shell", ("--shell",), "value", "bash", "bash | zsh | sh | fish | powershell (pwsh).", metavar="SHELL"),
        ENV_FLEET, PYTHON.with_help("Inspect the interpreter at this path.", "PATH"), JSON)),
    "detect": Command("detect_cmd", "run_detect", options=(
        JSON.with_help("Print the JSON envelope (data.environment)."),
        PYTHON.with_help("Inspect the Python environment of this interpreter.", "PATH"),
        Opt("reports", ("--from",), "list", None, "Read pasted tool output from FILE (- for stdin); repeatable.",
            metavar="FILE"),
        Opt("env_file", ("--env",), "value", None, "Read a saved `detect --json` file and print it again.",
            metavar="FILE"),
        Opt("timeout", ("--timeout",), "float", 5.0, "Seconds allowed to each probe's subprocess."), ALL_COPIES)),
    "doctor": Command("doctor_cmd", "run_doctor", options=(
        ENV_FLEET.with_help("A saved `detect --json`, or a folder of them (findings per node class)."),
        Opt("from_", ("--from",), "list", [],
            "Pasted tool outputs (nvidia-smi, collect_env, ldconfig -p, pip freeze...); '-' for stdin.",
            metavar="FILE"),
        PYTHON.with_help("Inspect the interpreter at this path.", "PATH"), JSON, DATA.with_help(""), ALL_COPIES)),
    "fix": Command("fix_cmd", "run_fix", positional=Arg(
        "requirements", "PEP 508 requirements (default: the frameworks installed)."), options=(
        PYTHON.with_help("Fix the interpreter at this path.", "PATH"),
        Opt("dry_run", ("--dry-run",), "flag", False, "Print the plan and change nothing."),
        FROM.with_help("Plan for the machine in these pasted tool outputs (with --dry-run); '-' for stdin; "
                       "repeatable."),
        Opt("yes", ("--yes", "-y"), "flag", False, "Do not ask before installing."),
        MIRROR.with_help("Replace the PyTorch wheel index prefix of framework index URLs (a mirror)."),
        Opt("allow_http", ("--allow-http",), "flag", False, "Allow plain-http index URLs (trusted networks)."),
        Opt("installer", ("--installer",), "value", None, "uv | pip (default: uv when on PATH).", metavar="NAME"),
        Opt("write_activation", ("--write-activation",), "flag", False,
            "Write the library-path changes as a shell snippet beside the environment."),
        Opt("no_verify", ("--no-verify",), "flag", False, "Skip the GPU verification."),
        Opt("no_cache", ("--no-cache",), "flag", False, "Verify again even if the environment is unchanged."),
        Opt("framework", ("--framework",), "value", "all", "torch | tensorflow | jax | all (verification).",
            metavar="NAME"),
        Opt("timeout", ("--timeout",), "float", VERIFY_TIMEOUT_S, "Seconds the verification may take."),
        DRIVER.with_help("Solve for this driver version instead of the detected one."),
        GPU.with_help("Solve for this GPU (name, sm_XX or X.Y; repeatable)."),
        JSON, Opt("data_dir", ("--data",), "value", None, "", hidden=True, metavar="DIR"),
        Opt("resume", ("--resume",), "flag", False, "Finish a change a killed run left in its journal."),
        Opt("rollback", ("--rollback",), "flag", False, "Undo a change a killed run left in its journal "
            "(from saved wheels, no network)."),
        Opt("undo", ("--undo",), "flag", False, "Go back to the starting set of the last completed fix "
            "(from its saved wheels, no network)."))),
    "verify": Command("fix_cmd", "run_verify", options=(
        Opt("framework", ("--framework",), "value", "all", "torch | tensorflow | jax | all", metavar="NAME"),
        PYTHON.with_help("Verify the interpreter at this path.", "PATH"),
        Opt("timeout", ("--timeout",), "float", VERIFY_TIMEOUT_S, "Seconds each framework's check may take."),
        JSON)),
}
