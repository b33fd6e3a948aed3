"""Loader children forked at a command's start, before it imports the rest of the package or starts a thread.

A started loader child (``python -I -S _loader.py``) pays the interpreter's start and its imports before it
asks NVML anything: on a lent H100, 28 + 18 ms of an 81 ms NVML answer, and as much again for the libraries'
child, which detect could start only once it had found the copies. A forked child has its parent's interpreter
and imports already. So ``python -m cudamatrix detect`` (and each
command that detects this machine: :func:`cudamatrix.cli.detects_this_machine`) forks two children first thing:
one asks NVML and libcuda at once, the other waits on a pipe for the library copies detect finds later; where detect reads this interpreter's own distributions (no
``--python``), a third reads them (:func:`cudamatrix.detect._pyprobe.collect`, the same code detect runs
in-process otherwise) beside the parent's work, on another core. The loader children run the started child's
own code (:mod:`._loader`) in a process of their own (a crash or a hang costs what it costs the started child), and
:func:`cudamatrix.detect.loader.run_loader` reads their lines as it reads that child's; a step a forked child
did not answer is asked again of a started child, as before.

Forked only where that is safe and answers the same: Linux; one thread in this process (a fork copies a lock
another thread holds as held forever); an LD_LIBRARY_PATH without the entries the started child is denied
(:func:`cudamatrix.detect.libraries.safe_environ`: a forked child resolves libraries through the search path
this process started with, which cannot be cleaned afterwards); no saved environment standing in for the machine.
The library API (``cudamatrix.fix()`` in a notebook kernel, which has threads) always uses started children, and
so does a command whose environment changed before detect ran. Children nobody asked for are killed at exit.
"""
from __future__ import annotations

import os
import sys
import time
from typing import Any

from cudamatrix import proc
from cudamatrix.detect.libraries import safe_environ

__all__ = ["DETECT_ENV_VAR", "LOADER_SCRIPT", "PYTHON_PROBE", "Forked", "Started", "findable", "start",
           "started_libs", "stop_all", "take"]

DETECT_ENV_VAR = "CUDAMATRIX_DETECT_ENV"  # a saved `detect --json` that detect() returns instead of probing
# the loader child's own code, run as ``python -I -S _loader.py`` (a started child) or in a forked one
LOADER_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_loader.py")

_DEFAULT_DIRS = ("/lib64", "/usr/lib64", "/lib", "/usr/lib", "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
                 "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib/wsl/lib")


def findable(soname: str, environ: dict[str, str]) -> bool:
    """Could dlopen(soname) find a file? LD_LIBRARY_PATH, the ld.so cache (its bytes), default folders.

    Lets detect skip the NVML child on machines without a driver (cheap before expensive).
    """
    dirs = [d for d in environ.get("LD_LIBRARY_PATH", "").split(":") if d] + list(_DEFAULT_DIRS)
    if any(os.path.exists(os.path.join(d, soname)) for d in dirs):
        return True
    try:
        with open("/etc/ld.so.cache", "rb") as fh:
            return soname.encode() + b"\0" in fh.read(16 * 1024 * 1024)
    except OSError:
        return os.name != "posix"  # no cache to read: let the child try


class Forked:
    """One forked loader child: its pid (a session of its own), the pipe it writes its lines to, and, for the
    libraries' child, the pipe it reads its question from."""

    def __init__(self, pid: int, out_fd: int, in_fd: int | None, question: dict[str, Any] | None,
                 environ: dict[str, str], spawned: float, err_fd: int | None = None) -> None:
        self.pid, self.out_fd, self.in_fd, self.err_fd = pid, out_fd, in_fd, err_fd
        self.question, self.environ, self.spawned = question, environ, spawned

    def answer(self, config_text: str | None, timeout: float) -> proc.Result:
        """Send the question (the libraries' child), read every line until the child ends or ``timeout``
        passes (then it is killed), and reap it: a Result as :func:`cudamatrix.proc.run` gives."""
        argv = ["<forked loader child>"]
        deadline = time.monotonic() + timeout
        if self.in_fd is not None:
            try:
                if config_text is not None:
                    _write_all(self.in_fd, config_text.encode())
            except OSError:
                pass  # it died before reading: its exit status says how
            finally:
                os.close(self.in_fd)
                self.in_fd = None
        try:
            out, err, timed_out = _read_until(self.out_fd, deadline, self.err_fd)
        except BaseException:  # Ctrl-C: it must not outlive us (it is in a session of its own)
            self.stop()
            raise
        if timed_out:
            self.kill()
        code = self.reap()
        text, err_text = out.decode(errors="replace"), err.decode(errors="replace")
        if timed_out:
            return proc.Result(argv, None, text, err_text, timed_out=True, error=f"timed out after {timeout:g}s",
                               seconds=time.monotonic() - self.spawned)
        return proc.Result(argv, code, text, err_text, seconds=time.monotonic() - self.spawned)

    def stop(self) -> None:
        """Nothing will be asked of it: kill it and reap it."""
        self.kill()
        self.reap()

    def kill(self) -> None:
        import signal

        try:
            os.killpg(self.pid, signal.SIGKILL)
        except OSError:  # already reaped, or not yet its own group leader
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass

    def reap(self) -> int | None:
        """Wait for the child's end: its exit status, negative for a signal (as subprocess says it)."""
        for fd in (self.in_fd, self.out_fd, self.err_fd):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.in_fd = self.out_fd = self.err_fd = None  # type: ignore[assignment]
        try:
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:
            return None
        return os.waitstatus_to_exitcode(status)


class Started(Forked):
    """The libraries' child where none could be forked (the library API; threads; an unsafe LD_LIBRARY_PATH):
    started at detect's start, as ``python -I -S _loader.py -`` with the cleaned environment, it starts its
    interpreter and imports while detect searches, then reads its question on stdin. Its pipes are ours, as a
    forked child's are; the Popen is kept only to learn that it was reaped."""

    def __init__(self, popen: Any, out_fd: int, in_fd: int, environ: dict[str, str], spawned: float,
                 err_fd: int | None = None) -> None:
        super().__init__(popen.pid, out_fd, in_fd, None, environ, spawned, err_fd)
        self.popen = popen

    def reap(self) -> int | None:
        code = super().reap()
        self.popen.returncode = code  # reaped here: the Popen must not wait for it again
        return code


def started_libs(environ: dict[str, str]) -> Forked | None:
    """Start the waiting libraries' child (None when it cannot be started: detect starts one later)."""
    import subprocess

    out_r, out_w = os.pipe()
    in_r, in_w = os.pipe()
    err_r, err_w = os.pipe()  # what the libraries write on stderr is read, kept and said, never passed to ours
    spawned = time.monotonic()
    try:
        popen = subprocess.Popen([sys.executable, "-I", "-S", LOADER_SCRIPT, "-"], stdin=in_r, stdout=out_w,
                                 stderr=err_w, env=safe_environ(environ), start_new_session=True)
    except OSError:
        for fd in (out_r, in_w, err_r):
            os.close(fd)
        return None
    finally:
        os.close(in_r)
        os.close(out_w)
        os.close(err_w)
    return Started(popen, out_r, in_w, environ, spawned, err_r)


_children: dict[str, Forked] = {}

PYTHON_PROBE = "python-probe"  # the question of the child that reads this interpreter's distributions


def start(python_probe: bool = True) -> None:
    """Fork the NVML child, the waiting libraries' child and (``python_probe``: detect will read this interpreter)
    the Python probe's child, when forking is safe here. Called by the command line for a command that detects
    this machine (:func:`cudamatrix.cli.detects_this_machine`). Never raises: a child that could not be forked
    is a started child later."""
    if _children:
        return
    try:
        _start(python_probe)
    except Exception:  # any surprise: detect starts its children as it always did
        stop_all()


def _start(python_probe: bool) -> None:
    import json

    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return
    environ = dict(os.environ)
    if environ.get(DETECT_ENV_VAR) or safe_environ(environ) != environ or _threads() != 1:
        return
    import atexit

    question = {"nvml": findable("libnvidia-ml.so.1", environ), "libcuda": findable("libcuda.so.1", environ)}
    atexit.register(stop_all)
    if question["nvml"] or question["libcuda"]:
        config = {"nvml": question["nvml"], "libcuda": question["libcuda"], "libs": [], "skip": []}
        _children["nvml"] = _fork(json.dumps(config), question, environ)
    _children["libs"] = _fork(None, None, environ)
    if python_probe:  # this interpreter's packages, read beside us
        _children["python"] = _fork(PYTHON_PROBE, {"path": list(sys.path)}, environ)


def _threads() -> int:
    """Threads of this process (the kernel's count: C libraries' threads too); 0 when it cannot be read."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0


def _fork(config_text: str | None, question: dict[str, Any] | None, environ: dict[str, str]) -> Forked:
    """Fork one child running :func:`cudamatrix.detect._loader.main` on ``config_text`` (None: on what it reads
    from its stdin pipe), its lines going to a pipe of ours."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()  # its stderr (a library's own messages): read and kept, never our terminal's
    in_r, in_w = os.pipe() if config_text is None else (None, None)
    spawned = time.monotonic()
    pid = os.fork()
    if pid == 0:  # pragma: no cover  (the child: measured by its answers, it never returns)
        _child(config_text, out_w, in_r, (out_r, in_w, err_r), err_w)
    os.close(out_w)
    os.close(err_w)
    if in_r is not None:
        os.close(in_r)
    return Forked(pid, out_r, in_w, question, environ, spawned, err_r)


def _child(config_text: str | None, out_w: int, in_r: int | None, parent_ends: tuple,
           err_w: int) -> None:  # pragma: no cover
    """The forked child: its own session (a Ctrl-C at the terminal is the parent's to handle: it kills us),
    its stdout and stderr the pipes, then the loader child's main; it leaves by os._exit, never through the
    parent's code."""
    code = 1
    born = time.monotonic()
    try:
        os.setsid()
        for fd in parent_ends:
            if fd is not None:
                os.close(fd)
        os.dup2(out_w, 1)
        os.close(out_w)
        os.dup2(err_w, 2)
        os.close(err_w)
        if in_r is not None:
            os.dup2(in_r, 0)
            os.close(in_r)
        import io

        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", line_buffering=True)
        if config_text == PYTHON_PROBE:
            import json

            # lazy: a child script (it runs in other interpreters and imports no cudamatrix module): loaded where it runs
            from cudamatrix.detect import _pyprobe

            raw = _pyprobe.collect()
            raw["clock"] = [born, time.monotonic()]  # its start and its reading, as the loader children say theirs
            sys.stdout.write(json.dumps(raw) + "\n")
            code = 0
        else:
            # lazy: a child script (it runs in other interpreters and imports no cudamatrix module): loaded where it runs
            from cudamatrix.detect import _loader  # (ctypes) while the libraries' child waits for its question

            ready = time.monotonic()
            if config_text is None:
                config_text = _read_all(0).decode("utf-8", errors="replace")
            code = _loader.main(["_loader.py", config_text], ready) if config_text else 0  # no question: it ends
        sys.stdout.flush()
    except BaseException:
        code = 1
    finally:
        os._exit(code)


def take(kind: str, environ: dict[str, str], question: dict[str, Any] | None = None) -> Forked | None:
    """The forked child of ``kind`` ("nvml", "libs", "python") for a detect run in ``environ`` asking ``question``, once;
    None when there is none or it was forked for another environment or question (that one is stopped)."""
    child = _children.pop(kind, None)
    if child is None:
        return None
    if child.environ != environ or child.question != question:
        child.stop()
        return None
    return child


def stop_all() -> None:
    """Kill and reap the children nobody asked (a command that ended before detect, an error)."""
    while _children:
        _, child = _children.popitem()
        child.stop()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


STDERR_KEPT = 1 << 16  # the last bytes of a child's stderr that are kept


def _read_until(fd: int, deadline: float, err_fd: int | None = None) -> tuple[bytes, bytes, bool]:
    """Everything written to ``fd`` until its last writer closes it, and the last STDERR_KEPT bytes written to
    ``err_fd`` meanwhile (read as they come: a child never blocks on a full stderr pipe); (.., .., True) at the
    deadline, or when ``fd`` brings more than :data:`cudamatrix.proc.MAX_OUTPUT_BYTES`."""
    import select

    poller = select.poll()  # not select.select: it refuses descriptors past 1024
    open_fds = {fd} | ({err_fd} if err_fd is not None else set())
    for f in open_fds:
        poller.register(f, select.POLLIN)
    chunks: list[bytes] = []
    size = 0
    err = b""
    while fd in open_fds:
        left = deadline - time.monotonic()
        if left <= 0 or size > proc.MAX_OUTPUT_BYTES:
            return b"".join(chunks), err, True
        for ready, _event in poller.poll(left * 1000.0):
            chunk = os.read(ready, 65536)
            if not chunk:
                poller.unregister(ready)
                open_fds.discard(ready)
            elif ready == fd:
                chunks.append(chunk)
                size += len(chunk)
            else:
                err = (err + chunk)[-STDERR_KEPT:]
    if err_fd in open_fds:  # what it wrote on stderr before it closed its stdout (it is ending)
        err += _drain_now(err_fd)
    return b"".join(chunks), err[-STDERR_KEPT:], False


def _drain_now(fd: int) -> bytes:
    """What ``fd`` holds now, without waiting for more."""
    import select

    poller = select.poll()
    poller.register(fd, select.POLLIN)
    out = b""
    for _ in range(64):  # a writer left alive (a grandchild) is not read without end
        if not poller.poll(0):
            break
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        out = (out + chunk)[-STDERR_KEPT:]
    return out
