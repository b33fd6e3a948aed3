"""The one subprocess helper: argv lists, a timeout always, never ``shell=True``, never raising
for a missing program or a hang (absence is data)."""
from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING, Callable

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
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def which(name: str, path: str | None = None) -> str | None:
    """``shutil.which(name, path=path)``, imported on first use. (A copy of its search used to live here to spare
    shutil's import; that measured 4-5 ms of detect's ~270 ms CPU, under the 10 % a replacement must earn.)"""
    import shutil

    return shutil.which(name, path=path)


def run(argv: list[str], *, timeout: float, env: dict[str, str] | None = None, cwd: str | None = None,
        input: str | None = None, stream: bool = False, on_output: Callable[[str], None] | None = None,
        interrupt_grace: float = 0.0, on_start: Callable[[int], None] | None = None,
        die_with_parent: bool = False) -> Result:
    """Run ``argv`` with a timeout. The child gets its own process group so a hang is killed whole.

    ``env`` replaces the environment when given. ``stream`` lets the child write to our stdout/stderr
    (long installs), in which case ``stdout``/``stderr`` of the result stay empty.
    ``on_output`` is called with each line the child writes (stdout and stderr, from reader threads)
    while the output is still captured whole in the result. ``interrupt_grace``: on Ctrl-C, send the
    child SIGINT and give it that many seconds to clean up (pip rolls back the package it was
    installing) before the group is killed. ``on_start(pid)`` is called once the child runs (its process
    group id is its pid). ``die_with_parent`` (Linux): the kernel kills the child when this process dies,
    even by SIGKILL, which no handler of ours can see.
    """
    import subprocess

    if on_output is not None and not stream:
        return _run_lines(argv, timeout=timeout, env=env, cwd=cwd, on_output=on_output,
                          interrupt_grace=interrupt_grace, on_start=on_start, die_with_parent=die_with_parent)
    start = time.monotonic()
    pipe = None if stream else subprocess.PIPE
    try:
        proc = subprocess.Popen(argv, stdout=pipe, stderr=pipe, stdin=subprocess.PIPE if input is not None
                                else subprocess.DEVNULL, env=env, cwd=cwd, text=True, errors="replace",
                                start_new_session=True)
    except FileNotFoundError:
        return Result(argv, None, error="not found", seconds=time.monotonic() - start)
    except OSError as exc:
        return Result(argv, None, error=exc.strerror or str(exc), seconds=time.monotonic() - start)
    try:
        out, err = proc.communicate(input=input, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = _drain(proc)
        return Result(argv, None, out or "", err or "", timed_out=True, error=f"timed out after {timeout:g}s",
                      seconds=time.monotonic() - start)
    except BaseException:  # Ctrl-C: do not leave the child running
        _interrupt(proc, interrupt_grace)
        raise
    return Result(argv, proc.returncode, out or "", err or "", seconds=time.monotonic() - start)


def _run_lines(argv: list[str], *, timeout: float, env: dict[str, str] | None, cwd: str | None,
               on_output: Callable[[str], None], interrupt_grace: float,
               on_start: Callable[[int], None] | None = None, die_with_parent: bool = False) -> Result:
    import subprocess
    import threading

    start = time.monotonic()
    spawn = argv
    if die_with_parent and sys.platform.startswith("linux"):
        # prctl runs in a small launcher after exec, not in a preexec_fn: code between fork and exec can
        # deadlock in a process with threads (a notebook kernel has several)
        spawn = [sys.executable, "-c", _LAUNCHER, str(os.getpid()), *argv]
    try:
        proc = subprocess.Popen(spawn, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                env=env, cwd=cwd, text=True, errors="replace", start_new_session=True)
    except FileNotFoundError:
        return Result(argv, None, error="not found", seconds=time.monotonic() - start)
    except OSError as exc:
        return Result(argv, None, error=exc.strerror or str(exc), seconds=time.monotonic() - start)
    out: list[str] = []
    err: list[str] = []

    def pump(stream, sink: list[str]) -> None:
        for line in stream:
            sink.append(line)
            try:
                on_output(line.rstrip("\n"))
            except Exception:  # a broken progress display must not break the install
                pass

    readers = [threading.Thread(target=pump, args=(proc.stdout, out), daemon=True),
               threading.Thread(target=pump, args=(proc.stderr, err), daemon=True)]
    try:  # from here on a Ctrl-C (even during on_start) stops the child: it must never outlive us unasked
        if on_start is not None:
            on_start(proc.pid)
        for t in readers:
            t.start()
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        try:
            proc.wait(timeout=DRAIN_SECONDS)
        except subprocess.TimeoutExpired:
            pass
        deadline = time.monotonic() + DRAIN_SECONDS  # a setsid grandchild may keep the pipes open
        for t in readers:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        return Result(argv, None, "".join(out), "".join(err), timed_out=True, error=f"timed out after {timeout:g}s",
                      seconds=time.monotonic() - start)
    except BaseException:
        _interrupt(proc, interrupt_grace)
        raise
    for t in readers:
        t.join(timeout=5)
    return Result(argv, proc.returncode, "".join(out), "".join(err), seconds=time.monotonic() - start)


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
