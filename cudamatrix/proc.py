"""The one subprocess helper: argv lists, a timeout always, never ``shell=True``, never raising
for a missing program or a hang (absence is data). And this process's garbage collector, paused for work that makes
many long-lived objects with no cycle among them (:class:`PausedGc`)."""
from __future__ import annotations

import gc
import os
import sys
import time
from typing import IO, TYPE_CHECKING, Callable

from cudamatrix.schema import record

if TYPE_CHECKING:
    import subprocess

# subprocess (with locale, selectors ...) is imported by the functions that run a child, on first use: a
# command that reads only files (detect --from, check on a requirements file) never loads it.


@record
class Result:
    """The outcome of one subprocess: exit status, output, and why it did not run."""

    argv: list[str]
    returncode: int | None  # None: did not run to an exit status (missing program, timeout)
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    error: str | None = None  # why it did not run: "not found", "timed out after 5s" ...
    overflow: str | None = None  # "stdout" / "stderr": the pipe on which it wrote more than was read (stopped)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def which(name: str, path: str | None = None) -> str | None:
    """``shutil.which(name, path=path)``, imported on first use. (A copy of its search used to live here to spare
    shutil's import; that measured 4-5 ms of detect's ~270 ms CPU, under the 10 % a replacement must earn.)"""
    import shutil

    return shutil.which(name, path=path)


MAX_OUTPUT_BYTES = 64 * 1024 * 1024  # what is read of each of a child's pipes: more, and the child is stopped


def run(argv: list[str], *, timeout: float, env: dict[str, str] | None = None, cwd: str | None = None,
        input: str | None = None, stream: bool = False, on_output: Callable[[str], None] | None = None,
        interrupt_grace: float = 0.0, on_start: Callable[[int], None] | None = None,
        die_with_parent: bool = False, max_output: int = MAX_OUTPUT_BYTES) -> Result:
    """Run ``argv`` with a timeout. The child gets its own process group so a hang is killed whole.

    ``env`` replaces the environment when given. ``stream`` lets the child write to our stdout/stderr
    (long installs), in which case ``stdout``/``stderr`` of the result stay empty.
    ``on_output`` is called with each line the child writes (stdout and stderr, from reader threads)
    while the output is still captured whole in the result. ``interrupt_grace``: on Ctrl-C, send the
    child SIGINT and give it that many seconds to clean up (pip rolls back the package it was
    installing) before the group is killed. ``on_start(pid)`` is called once the child runs (its process
    group id is its pid). ``die_with_parent`` (Linux): the kernel kills the child when this process dies,
    even by SIGKILL, which no handler of ours can see. ``max_output``: the bytes read of each pipe; a child
    that writes more is killed, and the result says so (``overflow``, ``error``; no exit status).
    Output is decoded as UTF-8 (undecodable bytes replaced) with newlines translated, as text mode does.
    """
    import subprocess

    if not stream:
        return _run_captured(argv, timeout=timeout, env=env, cwd=cwd, input=input, on_output=on_output,
                             interrupt_grace=interrupt_grace, on_start=on_start, die_with_parent=die_with_parent,
                             max_output=max_output)
    start = time.monotonic()
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL, env=env,
                                cwd=cwd, text=True, errors="replace", start_new_session=True)
    except FileNotFoundError:
        return Result(argv, None, error="not found", seconds=time.monotonic() - start)
    except OSError as exc:
        return Result(argv, None, error=exc.strerror or str(exc), seconds=time.monotonic() - start)
    try:
        proc.communicate(input=input, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        _drain(proc)
        return Result(argv, None, timed_out=True, error=f"timed out after {timeout:g}s",
                      seconds=time.monotonic() - start)
    except BaseException:  # Ctrl-C: do not leave the child running
        _interrupt(proc, interrupt_grace)
        raise
    return Result(argv, proc.returncode, seconds=time.monotonic() - start)


class _Pipe:
    """One of a child's output pipes, read in chunks by a thread of its own, up to ``limit`` bytes: the text
    (decoded incrementally, newlines translated), and each whole line handed to ``on_line``. More than
    ``limit`` bytes: ``over`` is set and ``on_over`` called (it stops the child); the rest is not read."""

    CHUNK = 65536

    def __init__(self, name: str, limit: int, on_line: Callable[[str], None] | None,
                 on_over: Callable[[str], None]) -> None:
        import codecs
        import io

        self.name, self.limit, self.on_line, self.on_over = name, limit, on_line, on_over
        self.decoder = io.IncrementalNewlineDecoder(codecs.getincrementaldecoder("utf-8")("replace"), translate=True)
        self.parts: list[str] = []
        self.size = 0
        self.over = False
        self.partial = ""  # the line not yet ended (on_line only)

    def pump(self, pipe: IO[bytes]) -> None:
        """Read ``pipe`` to its end or the limit, then close it (this thread owns it: a writer left alive, a
        grandchild out of the killed group, then gets EPIPE rather than a full pipe)."""
        try:
            while True:
                chunk = os.read(pipe.fileno(), self.CHUNK)
                if not chunk:
                    break
                room = self.limit - self.size
                self.size += len(chunk)
                if len(chunk) > room:
                    self._feed(chunk[:room])
                    self.over, self.on_line = True, None  # the line cut short is not handed on
                    self.on_over(self.name)
                    break
                self._feed(chunk)
        except OSError:
            pass
        finally:
            self._feed(b"", final=True)
            pipe.close()

    def _feed(self, data: bytes, final: bool = False) -> None:
        text = self.decoder.decode(data, final=final)
        if text:
            self.parts.append(text)
        if self.on_line is None:
            return
        *lines, self.partial = (self.partial + text).split("\n")
        if final and self.partial:
            lines.append(self.partial)
            self.partial = ""
        for line in lines:
            try:
                self.on_line(line)
            except Exception:  # a broken progress display must not break the install
                pass

    @property
    def text(self) -> str:
        return "".join(self.parts)


def _run_captured(argv: list[str], *, timeout: float, env: dict[str, str] | None, cwd: str | None,
                  input: str | None, on_output: Callable[[str], None] | None, interrupt_grace: float,
                  on_start: Callable[[int], None] | None, die_with_parent: bool, max_output: int) -> Result:
    import subprocess
    import threading

    start = time.monotonic()
    spawn = argv
    if die_with_parent and sys.platform.startswith("linux"):
        # prctl runs in a small launcher after exec, not in a preexec_fn: code between fork and exec can
        # deadlock in a process with threads (a notebook kernel has several)
        spawn = [sys.executable, "-c", _LAUNCHER, str(os.getpid()), *argv]
    try:
        proc = subprocess.Popen(spawn, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd,
                                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                start_new_session=True)
    except FileNotFoundError:
        return Result(argv, None, error="not found", seconds=time.monotonic() - start)
    except OSError as exc:
        return Result(argv, None, error=exc.strerror or str(exc), seconds=time.monotonic() - start)
    pipes = [_Pipe(name, max_output, on_output, lambda _name: _kill_group(proc)) for name in ("stdout", "stderr")]
    threads = [threading.Thread(target=p.pump, args=(f,), daemon=True)
               for p, f in zip(pipes, (proc.stdout, proc.stderr), strict=True)]
    if input is not None:
        threads.append(threading.Thread(target=_feed_input, args=(proc.stdin, input), daemon=True))
    try:  # from here on a Ctrl-C (even during on_start) stops the child: it must never outlive us unasked
        if on_start is not None:
            on_start(proc.pid)
        for t in threads:
            t.start()
        proc.wait(timeout=timeout)
        timed_out = not _join(threads, start + timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
    except BaseException:
        _interrupt(proc, interrupt_grace)
        raise
    if timed_out:  # a setsid grandchild may keep the pipes open: they are read DRAIN_SECONDS more
        _kill_group(proc)
        try:
            proc.wait(timeout=DRAIN_SECONDS)
        except subprocess.TimeoutExpired:
            pass
        _join(threads, time.monotonic() + DRAIN_SECONDS)
    out, err = pipes[0].text, pipes[1].text
    over = next((p for p in pipes if p.over), None)
    if over is not None:
        return Result(argv, None, out, err, error=f"printed more than {_size(max_output)} on {over.name}, and was "
                      "stopped", overflow=over.name, seconds=time.monotonic() - start)
    if timed_out:
        return Result(argv, None, out, err, timed_out=True, error=f"timed out after {timeout:g}s",
                      seconds=time.monotonic() - start)
    return Result(argv, proc.returncode, out, err, seconds=time.monotonic() - start)


def _size(n: int) -> str:
    return f"{n / 2**20:g} MiB" if n >= 2**20 else f"{n} bytes"


def _feed_input(pipe: IO[bytes], text: str) -> None:
    try:
        pipe.write(text.encode())
    except OSError:  # it did not read it all: its exit status says why
        pass
    finally:
        try:
            pipe.close()
        except OSError:
            pass


def _join(threads: list, deadline: float) -> bool:
    """Wait for the threads until ``deadline``; whether all ended."""
    for t in threads:
        t.join(timeout=max(0.0, deadline - time.monotonic()))
    return not any(t.is_alive() for t in threads)


DRAIN_SECONDS = 2.0  # after a kill: how long the pipes may still be read


def _drain(proc: subprocess.Popen) -> tuple[str, str]:
    """What a killed child left in its pipes, waiting at most DRAIN_SECONDS: a grandchild that left the
    process group (setsid) may hold the pipes open long after the kill, and must not hold us."""
    import subprocess

    try:
        return proc.communicate(timeout=DRAIN_SECONDS)
    except subprocess.TimeoutExpired:
        for pipe in (proc.stdout, proc.stderr, proc.stdin):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass
        try:
            proc.wait(timeout=DRAIN_SECONDS)
        except subprocess.TimeoutExpired:
            pass
        return "", ""


def _interrupt(proc: subprocess.Popen, grace: float) -> None:
    """Stop a child after Ctrl-C: SIGINT first when a grace period is given, then kill the group."""
    import signal
    import subprocess

    if grace > 0 and proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=grace)
        except (ProcessLookupError, PermissionError, subprocess.TimeoutExpired, KeyboardInterrupt):
            pass
    if proc.poll() is None:
        _kill_group(proc)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _kill_group(proc: subprocess.Popen) -> None:
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, AttributeError):
        proc.kill()


# Asks the kernel for SIGKILL when the parent dies (prctl PR_SET_PDEATHSIG = 1; kept across exec), checks the
# parent did not die before that, then becomes the program. Exit 127 and a message when the program is missing.
_LAUNCHER = """
import ctypes, os, sys

try:
    ctypes.CDLL(None, use_errno=True).prctl(1, 9, 0, 0, 0)
except (OSError, AttributeError):
    pass
if os.getppid() != int(sys.argv[1]):
    sys.exit(137)
try:
    os.execvp(sys.argv[2], sys.argv[2:])
except OSError as exc:
    sys.stderr.write("%s: %s\\n" % (sys.argv[2], exc.strerror))
    sys.exit(127)
"""


def group_alive(pgid: int) -> bool:
    """Whether any process of the group ``pgid`` still runs."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_group(pgid: int) -> None:
    """SIGKILL every process of the group ``pgid`` (an installer left over by a killed run)."""
    import signal

    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class PausedGc:
    """``with PausedGc():`` the cyclic garbage collector paused, and as it was afterwards. For a fleet's work:
    tens of thousands of objects that live on with no cycle among them (node Environments and Targets, verdicts
    per node), over which each full pass costs ~0.1 s and frees nothing; garbage that does form a cycle meanwhile
    is collected after, by the next pass."""

    def __init__(self) -> None:
        self.was = False

    def __enter__(self) -> None:
        self.was = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self.was:
                gc.enable()
