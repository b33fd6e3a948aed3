"""Fakes of the hardware, not of our code: shared libraries compiled here with gcc that export the
NVIDIA entry points our probes call, a fake nvidia-smi that replays a real output, a /proc-like root,
and a runner for ``python -m cudamatrix`` in a child with its own PATH / LD_LIBRARY_PATH."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent.parent / "data"

HAVE_GCC = shutil.which("gcc") is not None

CUDNN_C = """
#include <stddef.h>
size_t cudnnGetVersion(void) { return VERSION; }
size_t cudnnGetCudartVersion(void) { return 12040; }
"""

CUDART_C = """
int cudaRuntimeGetVersion(int *v) { *v = VERSION; return 0; }
"""

LIBCUDA_C = """
int cuDriverGetVersion(int *v) { *v = VERSION; return RC; }
"""

HANG_C = """
#include <unistd.h>
__attribute__((constructor)) static void hang(void) { sleep(60); }
int cudaRuntimeGetVersion(int *v) { *v = 1; return 0; }
"""

CRASH_C = """
#include <signal.h>
__attribute__((constructor)) static void crash(void) { raise(SIGSEGV); }
size_t cudnnGetVersion(void) { return 1; }
"""

# enough of NVML (nvml.h's entry points and structures) to list one GPU; FAKE_NVML_INIT_RC makes init fail like
# a sick driver, FAKE_NVML_PROC_NA reports a process's memory as NVML_VALUE_NOT_AVAILABLE (as under WDDM).
# Memory as a driver 580 H200 reported it: v1 counts the driver's reserved memory as used, the v2 structure (whose
# version word must be NVML_STRUCT_VERSION(Memory, 2)) keeps it apart.
NVML_C = r"""
#include <stdlib.h>
#include <string.h>
typedef struct { unsigned long long total, free, used; } mem_t;
typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } mem2_t;
typedef struct { char legacy[16]; unsigned int domain, bus, device, id, subsys; char bus_id[32]; } pci_t;
typedef struct { unsigned int pid; unsigned long long used; unsigned int gi, ci; } proc_t;
static int init_rc(void) { const char *s = getenv("FAKE_NVML_INIT_RC"); return s ? atoi(s) : 0; }
int nvmlInitWithFlags(unsigned int f) { (void)f; return init_rc(); }
int nvmlInit_v2(void) { return init_rc(); }
int nvmlInit(void) { return init_rc(); }
int nvmlShutdown(void) { return 0; }
const char *nvmlErrorString(int rc) {
    if (rc == 18) return "Driver/library version mismatch";
    if (rc == 999) return "Unknown Error";
    return "fake error";
}
int nvmlSystemGetDriverVersion(char *buf, unsigned int n) { strncpy(buf, "DRIVER", n); return 0; }
int nvmlSystemGetCudaDriverVersion(int *v) { *v = CUDA; return 0; }
int nvmlSystemGetCudaDriverVersion_v2(int *v) { *v = CUDA; return 0; }
int nvmlDeviceGetCount_v2(unsigned int *c) { *c = 1; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **h) { *h = (void *)(size_t)(i + 1); return 0; }
int nvmlDeviceGetName(void *h, char *buf, unsigned int n) { (void)h; strncpy(buf, "NVIDIA A100-SXM4-80GB", n); return 0; }
int nvmlDeviceGetUUID(void *h, char *buf, unsigned int n) { (void)h; strncpy(buf, "GPU-fake-0000", n); return 0; }
int nvmlDeviceGetMemoryInfo(void *h, mem_t *m) {
    (void)h; m->total = 81920ULL << 20; m->used = 1640ULL << 20; m->free = m->total - m->used; return 0;
}
int nvmlDeviceGetMemoryInfo_v2(void *h, mem2_t *m) {
    (void)h;
    if (m->version != (sizeof(mem2_t) | (2u << 24))) return 25;  /* NVML_ERROR_ARGUMENT_VERSION_MISMATCH */
    m->total = 81920ULL << 20; m->reserved = 616ULL << 20; m->used = 1024ULL << 20;
    m->free = m->total - m->reserved - m->used; return 0;
}
int nvmlDeviceGetPciInfo_v3(void *h, pci_t *p) {
    (void)h; memset(p, 0, sizeof(*p)); strcpy(p->legacy, "0000:19:00.0"); strcpy(p->bus_id, "00000000:19:00.0");
    p->bus = 0x19; p->id = 0x20B510DE; return 0;
}
int nvmlDeviceGetCudaComputeCapability(void *h, int *major, int *minor) { (void)h; *major = 8; *minor = 0; return 0; }
int nvmlDeviceGetMigMode(void *h, unsigned int *cur, unsigned int *pend) { (void)h; *cur = 0; *pend = 0; return 0; }
int nvmlDeviceGetComputeRunningProcesses_v3(void *h, unsigned int *count, proc_t *infos) {
    (void)h;
    if (infos == NULL || *count < 1) { *count = 1; return 7; }
    infos[0].pid = 4242; infos[0].gi = 0xFFFFFFFF; infos[0].ci = 0xFFFFFFFF;
    infos[0].used = getenv("FAKE_NVML_PROC_NA") ? ~0ULL : 500ULL << 20;
    *count = 1; return 0;
}
int nvmlSystemGetProcessName(unsigned int pid, char *buf, unsigned int n) { (void)pid; strncpy(buf, "python", n); return 0; }
"""


def build_lib(folder: Path, filename: str, source: str, soname: str | None = None, **defines) -> Path:
    """Compile ``source`` into ``folder/filename`` (a real ELF shared object with DT_SONAME)."""
    folder.mkdir(parents=True, exist_ok=True)
    src = folder / (filename + ".c")
    body = source
    for key, value in defines.items():
        body = body.replace(key, str(value))
    src.write_text(body)
    out = folder / filename
    subprocess.run(["gcc", "-shared", "-fPIC", "-O0", f"-Wl,-soname,{soname or filename}", "-o", str(out),
                    str(src)], check=True, capture_output=True, timeout=60)
    return out


def fake_nvml(folder: Path, driver: str = "550.54.15", cuda: int = 12040) -> Path:
    """libnvidia-ml.so.1: one A100, the given driver version and CUDA (as NVML encodes it)."""
    return build_lib(folder, "libnvidia-ml.so.1", NVML_C.replace("DRIVER", driver).replace("CUDA", str(cuda)))


def fake_smi(folder: Path, table: str, *, query: str = "", rc: int = 0, sleep: float = 0.0) -> Path:
    """An executable ``nvidia-smi`` that prints ``table`` (or ``query`` when called with --query-gpu)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "smi-table.txt").write_text(table)
    (folder / "smi-query.txt").write_text(query)
    script = folder / "nvidia-smi"
    script.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        here=$(dirname "$0")
        {'sleep ' + str(sleep) if sleep else ''}
        case "$1" in
          --query-gpu=*) cat "$here/smi-query.txt" ;;
          *) cat "$here/smi-table.txt" ;;
        esac
        exit {rc}
        """))
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return script


def fixture(rel: str) -> str:
    """A captured real output from tests/data, without its first ``# source:`` line."""
    text = (DATA / rel).read_text(encoding="utf-8")
    first, _, rest = text.partition("\n")
    assert first.startswith("# source:"), f"{rel} lacks its source line"
    return rest


def proc_root(folder: Path, *, module_version: str | None = None, dockerenv: bool = False,
              wsl: bool = False) -> Path:
    """A /proc-like root: proc/driver/nvidia/version (the kernel module), container and WSL markers."""
    folder.mkdir(parents=True, exist_ok=True)
    if module_version:
        p = folder / "proc/driver/nvidia/version"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {module_version}  Thu Oct  6 21:38:55 UTC 2022\n"
                     "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")
    if dockerenv:
        (folder / ".dockerenv").write_text("")
    if wsl:
        (folder / "usr/lib/wsl/lib").mkdir(parents=True, exist_ok=True)
        (folder / "proc/sys/kernel").mkdir(parents=True, exist_ok=True)
        (folder / "proc/sys/kernel/osrelease").write_text("5.15.153.1-microsoft-standard-WSL2\n")
    return folder


def child_env(*, path_prepend: list[Path] = (), ld_library_path: list[Path] | None = None,
              extra: dict[str, str] | None = None,
              drop: tuple[str, ...] = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if path_prepend:
        env["PATH"] = os.pathsep.join([str(p) for p in path_prepend] + [env.get("PATH", "")])
    if ld_library_path is not None:
        env["LD_LIBRARY_PATH"] = os.pathsep.join(str(p) for p in ld_library_path)
    for key in drop:
        env.pop(key, None)
    env.update(extra or {})
    return env


class _Timeout(Exception):
    """Raised by the alarm of :func:`run_cli` when the command outlives its ``timeout``."""


def run_cli(args: list[str], env: dict[str, str] | None = None, input: bytes | str | None = None,
            timeout: float = 120, *, text: bool = False, cwd: str | Path | None = None
            ) -> subprocess.CompletedProcess:
    """``cudamatrix ARGS`` in THIS process (:func:`cudamatrix.cli.main`), answered as :func:`spawn_cli` answers:
    exit code, stdout, stderr (bytes, or str with ``text``); an exception the CLI lets out becomes exit 1 and its
    traceback on stderr, as the interpreter would print it. ``env`` replaces ``os.environ`` for the call (default:
    :func:`child_env`'s), ``input`` is stdin (never a terminal), ``cwd`` the working folder; all three, the
    per-process caches the CLI fills (matrix, real paths, ELF headers) and the collector are put back afterwards,
    and a command that outlives ``timeout`` raises :class:`subprocess.TimeoutExpired`.

    Not for a test that needs a process of its own: variables read at process start (LD_LIBRARY_PATH, the
    locale, PYTHONIOENCODING), libraries the command loads (a live ``detect``: ``/proc/self/maps``, dlopen),
    signals, imports a command must not make, or a real console script: :func:`spawn_cli` for those."""
    import io

    from cudamatrix.cli import main

    data = input.encode() if isinstance(input, str) else (input or b"")
    out, err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
    with _process_state(env if env is not None else child_env(), cwd, out, err, stdin), _alarm(timeout, args):
        try:
            code = main([str(a) for a in args])
        except (Exception, SystemExit) as exc:  # what would end the process: its exit code, the traceback
            code = _exit_code(exc, err)
    stdout, stderr = _drained(out), _drained(err)
    if text:
        return subprocess.CompletedProcess(args, code, stdout.decode(errors="replace"), stderr.decode(errors="replace"))
    return subprocess.CompletedProcess(args, code, stdout, stderr)


def _exit_code(exc: BaseException, err) -> int:
    """The exit code of a process that ends with ``exc`` (a SystemExit's code; anything else 1, traceback shown)."""
    import traceback

    if isinstance(exc, SystemExit):
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    err.write("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    return 1


def _drained(stream) -> bytes:
    stream.flush()
    return stream.buffer.getvalue()


@contextlib.contextmanager
def _process_state(env: dict[str, str], cwd, out, err, stdin):
    """The streams, environment and folder of a call of :func:`run_cli`, and afterwards the process as it was:
    the caches that a process would have started without (keyed by path or by data folder, not by the overlay in
    HOME) emptied, and the objects a command froze out of the collector given back to it."""
    import gc

    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    saved = sys.stdout, sys.stderr, sys.stdin
    _forget_caches()
    os.environ.clear()
    os.environ.update(env)
    sys.stdout, sys.stderr, sys.stdin = out, err, stdin
    try:
        if cwd is not None:
            os.chdir(cwd)
        yield
    finally:
        sys.stdout, sys.stderr, sys.stdin = saved
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        gc.unfreeze()
        _forget_caches()


def _forget_caches() -> None:
    """Empty what the CLI remembers per process and a fresh process would not have: the loaded matrices (the
    overlay lives in HOME, which each test has its own of), the real paths and the ELF headers read."""
    from cudamatrix.ldso import elf, elfcache, paths
    from cudamatrix.matrix import load

    load.load_matrix.cache_clear()
    paths.forget()
    elf._CACHE.clear()
    elfcache._entries = None
    elfcache._fresh.clear()
    elfcache._used.clear()


@contextlib.contextmanager
def _alarm(timeout: float, args):
    """:class:`subprocess.TimeoutExpired` when the call outlives ``timeout`` (SIGALRM: the main thread only;
    elsewhere no limit)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expired(signum, frame):
        raise _Timeout()

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        yield
    except _Timeout:
        raise subprocess.TimeoutExpired(["cudamatrix", *map(str, args)], timeout) from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def spawn_cli(args: list[str], env: dict[str, str] | None = None, input: bytes | str | None = None,
              timeout: float = 120, *, text: bool = False, cwd: str | Path | None = None
              ) -> subprocess.CompletedProcess:
    """``python -m cudamatrix ARGS`` in a child process: for a test that needs one (see :func:`run_cli`)."""
    return subprocess.run([sys.executable, "-m", "cudamatrix", *map(str, args)], cwd=cwd or REPO,
                          env=env or child_env(), input=input, capture_output=True, timeout=timeout, text=text)


def run_detect(env: dict[str, str], root: Path | None = None, timeout_s: float = 5.0,
               python: Path | None = None) -> dict:
    """``detect(root=...)`` in a child process (LD_LIBRARY_PATH must be set before a process starts).
    ``python``: the interpreter whose environment is examined (default: the test's own, with its frameworks)."""
    which = repr(str(python)) if python else "None"
    code = ("import json, sys; from cudamatrix.detect import detect; "
            f"print(json.dumps(detect({which}, root={str(root or '/')!r}, timeout={timeout_s}).to_dict()))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


def apply_advice(text: str, advice: dict) -> str:
    """The file with a piece of check's advice applied: its index lines added, its pinned lines replaced."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    lines = []
    for line in text.splitlines():
        if any(line.startswith(d + " ") for d in advice.get("drop", [])):
            continue
        name = None
        if line.strip() and not line.startswith("-"):
            name = canonicalize_name(Requirement(line.split(";")[0]).name)
        lines.append(advice["pin"].get(name, line) if name else line)
    return "\n".join(advice["add"] + lines) + "\n"


def interpreter(tmp_path: Path, lines: list[dict], *, stderr: str = "", rc: int = 0, signal: str | None = None) -> str:
    """An executable standing in for the target interpreter: prints the child's JSON lines, then exits."""
    from cudamatrix.verify.run import MARK

    out = "".join(MARK + json.dumps(x) + "\n" for x in lines)
    script = tmp_path / "python"
    body = f"cat <<'EOF'\n{out}EOF\ncat >&2 <<'EOF'\n{stderr}\nEOF\n"
    body += f"kill -{signal} $$\n" if signal else f"exit {rc}\n"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)
