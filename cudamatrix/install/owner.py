"""Which process is ours: the identity the journal records of the ``fix`` that wrote it and of the installer
it ran, and the decision whether a process group named by a journal may be signalled.

A pid alone names nothing for long: after a SIGKILL the kernel hands the number to the next process (a
training job, a tmux session), and with a shared home a journal may come from another node, where the
number means nothing here. So the journal keeps, per process: its pid, its start time in clock ticks since
boot (``/proc/PID/stat`` field 22, proc(5)), this boot's id (``/proc/sys/kernel/random/boot_id``), the host
name, and the SHA-256 of the command line's last arguments (the command it runs; the hash, because the line
may hold an index URL's credentials). A process group is signalled only when its leader still matches all of
them, and never group 0 (our own, for ``killpg``), 1 (init's) or the group this process runs in.
"""
from __future__ import annotations

import hashlib
import os
from typing import Any

from cudamatrix.schema import record, to_dict

_CMDLINE_LIMIT = 1 << 20  # /proc/PID/cmdline of an installer with many requirements stays far below


def _read(path: str, limit: int = 4096) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read(limit)
    except OSError:
        return None


def boot_id() -> str | None:
    """This boot's random id (Linux); None elsewhere."""
    raw = _read("/proc/sys/kernel/random/boot_id", 64)
    return raw.decode("ascii", "replace").strip() if raw else None


def host() -> str:
    import socket  # on first use: a plain fix never needs it

    return socket.gethostname()


def start_time(pid: int) -> str | None:
    """A process's start time in clock ticks since boot (/proc/PID/stat field 22, proc(5)); None when it is
    gone. With the pid and the boot id it names one process: a pid given to another process later differs."""
    raw = _read(f"/proc/{pid}/stat")
    if raw is None:
        return None
    stat = raw.decode("ascii", "replace")
    fields = stat[stat.rfind(")") + 2:].split()  # the command name may hold spaces and ")": skip past the last
    return fields[19] if len(fields) > 19 else None


def command_args(pid: int) -> list[str] | None:
    """A process's command line (``/proc/PID/cmdline``), or None when it cannot be read."""
    raw = _read(f"/proc/{pid}/cmdline", _CMDLINE_LIMIT)
    if raw is None:
        return None
    return [a.decode("utf-8", "surrogateescape") for a in raw.rstrip(b"\0").split(b"\0")] if raw else []


def _digest(args: list[str]) -> str:
    return hashlib.sha256("\0".join(args).encode("utf-8", "surrogateescape")).hexdigest()


@record
class Identity:
    """What names one process: pid, start time, boot, host, and the hash of the last ``argc`` arguments of its
    command line (an installer started through the die-with-parent launcher keeps its argv at the end)."""

    pid: int
    start: str | None
    boot: str | None
    host: str
    argc: int = 0
    argv_sha256: str | None = None

    @classmethod
    def of(cls, pid: int, argv: list[str] | None = None) -> Identity:
        """The identity of the live process ``pid``; ``argv``: the command it runs (default: its own line)."""
        args = argv if argv is not None else (command_args(pid) or [])
        return cls(pid=pid, start=start_time(pid), boot=boot_id(), host=host(), argc=len(args),
                   argv_sha256=_digest(args) if args else None)

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)

    @classmethod
    def from_journal(cls, value: Any) -> Identity | None:
        """The identity a journal recorded, or None when it is missing or not in shape."""
        if not isinstance(value, dict):
            return None
        pid, argc = value.get("pid"), value.get("argc", 0)
        if not isinstance(pid, int) or isinstance(pid, bool) or not isinstance(argc, int) or argc < 0:
            return None
        texts = [value.get(k) for k in ("start", "boot", "argv_sha256")]
        if not all(t is None or isinstance(t, str) for t in texts) or not isinstance(value.get("host"), str):
            return None
        return cls(pid=pid, start=texts[0], boot=texts[1], host=value["host"], argc=argc, argv_sha256=texts[2])

    def here(self) -> bool:
        """Recorded on this host, in this boot."""
        return self.host == host() and self.boot == boot_id()

    def mismatch(self) -> str | None:
        """Why the live process ``pid`` is not the one recorded (None: it is, on every count)."""
        if not self.here():
            return f"it was recorded on host {self.host!r} (boot {self.boot}), this is {host()!r} (boot {boot_id()})"
        now = start_time(self.pid)
        if now is None:
            return f"process {self.pid} is gone"
        if self.start is None or now != self.start:
            return f"process {self.pid} started at tick {now}, the recorded one at tick {self.start}"
        if self.argv_sha256 is not None:
            args = command_args(self.pid)
            if args is None or len(args) < self.argc or _digest(args[len(args) - self.argc:]) != self.argv_sha256:
                return f"process {self.pid} runs another command than the recorded one"
        return None


def forbidden_group(pgid: int) -> str | None:
    """Why a process group may never be signalled by a rollback: 0 and negative numbers (``killpg(0)`` is the
    caller's own group), 1 (init's), and the group this process runs in."""
    if pgid <= 1:
        return f"process group {pgid} is never signalled (0 is the caller's own group, 1 is init's)"
    try:
        if pgid == os.getpgrp():
            return f"process group {pgid} is this command's own group"
    except OSError:
        pass
    return None


def group_alive(pgid: int) -> bool:
    """Whether any process of the group ``pgid`` runs (a group we may not signal counts as running). A process
    that has died but is not reaped yet (a zombie: the installer killed with its parent, waiting for init) does
    not run: ``/proc`` says which members are zombies."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    members = _members(pgid)
    return members is None or any(state not in "ZX" for state in members)


def _members(pgid: int) -> list[str] | None:
    """The states (``R``, ``S``, ``Z`` ...) of the processes of group ``pgid`` from ``/proc/*/stat`` (proc(5):
    field 3 is the state, field 5 the process group); None where there is no ``/proc`` to read."""
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return None
    states = []
    for pid in pids:
        raw = _read(f"/proc/{pid}/stat")
        if raw is None:
            continue
        text = raw.decode("ascii", "replace")
        fields = text[text.rfind(")") + 2:].split()
        if len(fields) > 2 and fields[2] == str(pgid):
            states.append(fields[0])
    return states


def leader_of(pgid: int) -> bool:
    """Whether the process ``pgid`` still leads its own process group (the installer was started in a new one)."""
    try:
        return os.getpgid(pgid) == pgid
    except OSError:
        return False
