"""The one subprocess helper: argv lists, a timeout always, never ``shell=True``, never raising
for a missing program or a hang (absence is data)."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass


@dataclass
class Result:
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


def run(argv: list[str], *, timeout: float, env: dict[str, str] | None = None, cwd: str | None = None,
        input: str | None = None, stream: bool = False) -> Result:
    """Run ``argv`` with a timeout. The child gets its own process group so a hang is killed whole.

    ``env`` replaces the environment when given. ``stream`` lets the child write to our stdout/stderr
    (long installs), in which case ``stdout``/``stderr`` of the result stay empty.
    """
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
        out, err = proc.communicate()
        return Result(argv, None, out or "", err or "", timed_out=True, error=f"timed out after {timeout:g}s",
                      seconds=time.monotonic() - start)
    except BaseException:  # Ctrl-C: do not leave the child running
        _kill_group(proc)
        proc.wait()
        raise
    return Result(argv, proc.returncode, out or "", err or "", seconds=time.monotonic() - start)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, AttributeError):
        proc.kill()
