"""Parent side of the loader child (:mod:`cudamatrix.detect._loader`): one bounded process that answers
NVML, ``cuDriverGetVersion`` and the ``ctypes`` version calls of every library copy.

A hang or a crash costs at most ``timeout`` and names the step that caused it; the remaining steps are
run again without it (at most two retries), so one broken copy does not hide the others.
"""
from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from cudamatrix import proc
from cudamatrix.detect.early import _DEFAULT_DIRS, LOADER_SCRIPT, STDERR_KEPT, Forked, findable  # noqa: F401
from cudamatrix.detect.libraries import safe_environ
from cudamatrix.ldso import elf as _elf
from cudamatrix.ldso import openers
from cudamatrix.safe.files import parse_json
from cudamatrix.schema import field, record


@record
class LoaderAnswers:
    """What the loader child answered: NVML, libcuda, and each library asked about."""

    nvml: dict | None = None
    libcuda: dict | None = None
    libs: dict[str, dict] = field(default_factory=dict)  # path -> answer
    failed: dict[str, str] = field(default_factory=dict)  # step key -> "hung" / "crashed (signal 11)"
    error: str | None = None  # the child could not run at all
    # milliseconds from the spawn to the child's first line (the interpreter's start-up), and from there to its
    # imports done (time.monotonic() is CLOCK_MONOTONIC, one clock for all processes; None: not measured)
    start_ms: float | None = None
    imports_ms: float | None = None
    forked: bool = False  # the first answers came from a child forked at the command's start
    stderr: str = ""  # what the children wrote on stderr (the last 64 KiB of each run)


def own_answerer(path: str) -> list[str]:
    """The file of the same copy that answers ``path``'s version call (cuDNN 9's libcudnn_graph.so.9 next to
    libcudnn.so.9), when the shim forwards the call to a library it opens by name; [] for the others."""
    if not os.path.basename(path).startswith("libcudnn"):
        return []  # only the cuDNN shims forward cudnnGetVersion: nothing else reads the data here
    dyn = _elf.try_read(path)
    answers = openers.answers_version(dyn.soname) if dyn is not None and dyn.soname else None
    if not answers:
        return []
    for folder in dict.fromkeys((os.path.dirname(path), os.path.dirname(os.path.realpath(path)))):
        sibling = os.path.join(folder, answers)
        if os.path.exists(sibling):
            return [sibling]
    return []


def run_loader(libs: list[tuple[str, str]], nvml: bool, libcuda: bool, timeout: float,
               python: str | None = None, forked: Forked | None = None) -> LoaderAnswers:
    """Answer NVML (when ``nvml``), libcuda (when ``libcuda``) and each ``(path, name)`` in ``libs``.

    ``forked``: a child forked at the command's start (:mod:`cudamatrix.detect.early`) answers first, in place
    of a started one; the steps it did not answer are asked of started children."""
    answers = LoaderAnswers()
    if not (libs or nvml or libcuda):
        if forked is not None:
            forked.stop()  # nothing to ask
        return answers
    config: dict[str, Any] = {"nvml": nvml, "libcuda": libcuda, "skip": [],
                              "libs": [{"path": p, "name": n, "first": own_answerer(p)} for p, n in libs]}
    exe = python or sys.executable
    tries = 0
    while tries < 3:
        early = forked
        if forked is not None:
            spawned, result = forked.spawned, forked.answer(json.dumps(config), timeout)
            forked, answers.forked = None, True
        else:
            spawned = time.monotonic()
            result = proc.run([exe, "-I", "-S", LOADER_SCRIPT, json.dumps(config)], timeout=timeout,
                              env=safe_environ())  # no empty, relative or world-writable LD_LIBRARY_PATH entry
        if result.stderr:
            answers.stderr += result.stderr[-STDERR_KEPT:]
        started, finished = _read_answers(result.stdout, answers, spawned)
        if finished:
            return answers
        if started is None:  # it did not even start its first step
            if early is not None:  # a child made in advance: a started child is asked instead, and says what is wrong
                answers.forked = False
                continue
            answers.error = result.error or (result.stderr.strip()[-300:] or f"exit status {result.returncode}")
            return answers
        tries += 1
        answers.failed[started] = _failure(result, timeout)
        done = set(answers.libs) | {k for k in ("nvml", "libcuda") if getattr(answers, k) is not None}
        config["skip"] = sorted(set(config["skip"]) | done | {started})
    return answers


def _read_answers(stdout: str, answers: LoaderAnswers, spawned: float | None = None) -> tuple[Any, bool]:
    """Record in ``answers`` what one run of the child printed (one JSON object a line; anything else is
    skipped); returns (the step it started and did not answer, None when none; whether it said it was done).
    ``spawned``: the parent's time.monotonic() just before the spawn, for the child's start-up time."""
    started = None
    finished = False
    for line in stdout.splitlines():
        try:
            obj = parse_json(line)  # the other interpreter's words: any shape, any depth
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        if "clock" in obj:
            _start_times(obj["clock"], spawned, answers)
        elif "start" in obj:
            started = obj["start"]
        elif obj.get("done"):
            finished = True
        elif obj.get("probe") == "nvml":
            answers.nvml, started = obj, None
        elif obj.get("probe") == "libcuda":
            answers.libcuda, started = obj, None
        elif obj.get("probe") == "lib":
            answers.libs[obj["path"]], started = obj, None
    return started, finished


def _start_times(clock: Any, spawned: float | None, answers: LoaderAnswers) -> None:
    """The child's ``[born, ready]`` instants -> its start-up and import milliseconds."""
    both = clock_ms(clock, spawned)
    if both is not None:
        answers.start_ms, answers.imports_ms = both


def clock_ms(clock: Any, spawned: float | None) -> tuple[float, float] | None:
    """A child's ``[born, ready]`` time.monotonic() instants -> (milliseconds from the spawn to its start, from its
    start to ``ready``); None unless they are two numbers in order after the spawn (a clock that is not shared
    says nothing)."""
    if spawned is None or not isinstance(clock, list) or len(clock) != 2:
        return None
    born, ready = clock
    if not all(isinstance(t, (int, float)) and not isinstance(t, bool) for t in clock) or not spawned <= born <= ready:
        return None
    return round((born - spawned) * 1000.0, 2), round((ready - born) * 1000.0, 2)


def _failure(result: proc.Result, timeout: float) -> str:
    """How the step the child started and did not answer failed: it hung past ``timeout``, or it crashed the
    process (the signal, or the exit status)."""
    if result.timed_out:
        return f"hung (no answer within {timeout:g}s)"
    code = result.returncode
    how = f"signal {-code}" if code is not None and code < 0 else f"exit status {code}"
    return f"crashed the process ({how})"
