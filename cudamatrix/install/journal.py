"""The install journal: what an interrupted change needs to be finished or undone, kept on disk.

Before the first change of an interpreter's installed set, :func:`begin` writes ``journal.json`` (the
starting set with each distribution's source, the plan, this process's id) and repacks the installed files
of every distribution the plan touches into a wheel in the journal's ``wheels/`` folder, so that going back
needs no network and no index. While an installer runs, its process group is recorded. The journal is
removed when the change is done or undone; one left behind means the run was killed (SIGKILL, a crash, a
closed terminal), and the next run offers ``fix --resume`` or ``fix --rollback``.

Where: ``$XDG_STATE_HOME/cudamatrix/journal/<hash of the interpreter path>/`` (default ``~/.local/state``),
every folder from ``cudamatrix`` down 0700 and every file 0600, written through the one safe writer
(:mod:`cudamatrix.safe.files`: an exclusive temporary file, no link followed, an atomic rename).

The journal is data, never code. A left journal is used only for the interpreter it is kept for (its folder
is keyed by that path): a journal naming another interpreter is refused, and rollback and resume run the
interpreter given (or this one), never one the journal names. The installer's process group is signalled only
when its leader is proven to be the installer the journal recorded (:mod:`cudamatrix.install.owner`); a
journal whose owner runs on another host is left to that host. Credentials in index URLs are not written.
"""
from __future__ import annotations

import base64
import csv
import fcntl
import hashlib
import io
import json
import os
import posixpath
import shlex
import shutil
import stat
import time
import zipfile
from pathlib import Path

from cudamatrix import proc
from cudamatrix.errors import CudamatrixError, UsageError
from cudamatrix.install.owner import Identity, command_args, forbidden_group, group_alive, leader_of, start_time
from cudamatrix.models import InstalledDist, Plan
from cudamatrix.names import canonical
from cudamatrix.safe import keys
from cudamatrix.safe.files import exclusive_temp, not_owned, parse_json, private_dir, read_private, write_private
from cudamatrix.safe.text import escape_controls, lazy, strip_credentials
from cudamatrix.schema import record, validate

JOURNAL_FILE = "journal.json"
MAC = "mac"  # the journal's HMAC with the per-user key (cudamatrix.safe.keys), over everything else it holds
MAX_JOURNAL = 16 * 1024 * 1024  # a plan, a starting set and a file name per saved wheel: far below
# the installer's own files in .dist-info, written at install time: not part of the wheel (uv_cache.json is uv's
# note of the cache entry it installed from; uv writes it again and, were it in the wheel, RECORD would list it twice)
_INSTALL_TIME = ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json", "uv_cache.json")


def state_root() -> Path:
    """The folder holding every interpreter's journal."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "cudamatrix" / "journal"


def folder_for(python: str) -> Path:
    """The journal folder of one interpreter (keyed by its absolute path, not resolved: venvs link the same binary)."""
    return state_root() / hashlib.sha256(os.path.abspath(python).encode()).hexdigest()[:16]


@record
class Journal:
    """One interpreter's journal: its folder and the recorded data (``journal.json``)."""

    folder: Path
    data: dict

    @property
    def python(self) -> str:
        return self.data["python"]

    @property
    def wheels(self) -> Path:
        return self.folder / "wheels"

    @property
    def before(self) -> list[InstalledDist]:
        return _validated(list[InstalledDist], self.data["before"], self.folder, "before")

    @property
    def after(self) -> list[InstalledDist]:
        """The set the completed change ended with (checked for shape when the journal was loaded)."""
        return _validated(list[InstalledDist], self.data.get("after") or [], self.folder, "after")

    def plan(self) -> Plan:
        """The plan the interrupted run was applying."""
        return validate(Plan, self.data["plan"], str(self.folder / JOURNAL_FILE))

    def record(self, **fields) -> None:
        """Update fields and write the journal atomically (a kill mid-write leaves the old copy), 0600 through
        the safe writer, without the credentials of any index URL, signed with the per-user key when there is
        one (``mac``: what it records, the saved wheels' hashes included, is then proven to be this tool's).
        Raises UsageError when it cannot be written."""
        self.data.update(fields)
        self.data.pop(MAC, None)
        text = strip_credentials(json.dumps(self.data, indent=1))
        key, _ = keys.user_key(create=True)
        if key is not None:  # signed as it will be read back: without the credentials
            body = json.loads(text)
            body[MAC] = self.data[MAC] = keys.sign(key, body)
            text = json.dumps(body, indent=1)
        note = write_private(self.folder / JOURNAL_FILE, text)
        if note:
            raise UsageError(f"the install journal cannot be written: {note}",
                             hint="make the state folder ($XDG_STATE_HOME, default ~/.local/state) yours and private, "
                                  "with free space")

    def record_installer(self, pid: int, argv: list[str], step: int) -> None:
        """Note the installer just started for step ``step``: its process group and its identity."""
        self.record(child_pgid=pid, installer=Identity.of(pid, argv).to_dict(), step=step)

    def close(self) -> None:
        """The change is done or undone: remove the journal and its wheels."""
        shutil.rmtree(self.folder, ignore_errors=True)

    def describe(self) -> str:
        done = self.data.get("steps_done", 0)
        total = len([s for s in self.data["plan"].get("steps", []) if s.get("kind") in
                     ("install", "uninstall", "reinstall")])
        return (f"an interrupted change of {self.python} (started {self.data.get('started_at')}, by process "
                f"{self.data.get('pid')}, {done} of {total} step(s) done)")


def _validated(kind, value, folder: Path, key: str):
    return validate(kind, value, f"{folder / JOURNAL_FILE}: {key}", UsageError)


def _unusable(folder: Path, why: str) -> UsageError:
    return UsageError(f"the install journal {folder / JOURNAL_FILE} cannot be used: {why}; nothing was run or "
                      "changed", hint=f"check the environment (cudamatrix doctor), then remove the folder {folder}",
                      detail={"journal": str(folder)})


def load(python: str) -> Journal | None:
    """The journal left for ``python``, or None when there is none. Read bounded, only when it is this user's
    and nobody else may change it; checked for shape. Raises UsageError (exit 2) for a journal that is there
    but cannot be used (unsafe, malformed): it is left in place, and nothing is done."""
    return _load(folder_for(python))


def last_for(python: str) -> Path:
    """Where the journal of ``python``'s last completed change is kept (``fix --undo`` reads it)."""
    folder = folder_for(python)
    return folder.with_name(folder.name + ".last")


def lock_path(python: str) -> Path:
    """The lock file of ``python``: one change of an interpreter at a time (:func:`hold`)."""
    folder = folder_for(python)
    return folder.with_name(folder.name + ".lock")


@record
class Held:
    """The lock of one interpreter, held by this process until :meth:`release`. It is an ``flock`` (flock(2)):
    the kernel drops it with the last descriptor, so a run that is killed leaves no lock behind."""

    path: Path
    fd: int

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing the descriptor drops the lock
            self.fd = -1


_LOCK_READ = 64 * 1024  # a pid and one command line, shortened


def hold(python: str) -> Held:
    """Take the lock of ``python`` for the whole of one change (from the journal check to the end), so two
    ``fix`` runs never change one interpreter at once (the later would remove the earlier one's journal and
    wheels). The lock file (0600, this user's, never through a link) says who holds it. Raises UsageError
    (exit 2, nothing changed) naming the run that holds it, or when the lock cannot be taken."""
    path = lock_path(python)
    _private_chain([], "the install lock cannot be taken")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except OSError as exc:
        raise UsageError(f"the install lock {path} cannot be taken: {exc.strerror or exc} (a link there is never "
                         "followed); nothing was changed", hint=f"remove {path}") from None
    try:
        problem = _lock_problem(path, os.fstat(fd))
        if problem:
            raise UsageError(f"the install lock cannot be taken: {problem}; nothing was changed",
                             hint=f"remove {path}", detail={"lock": str(path)})
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _busy(path, fd, python) from None
        args = command_args(os.getpid()) or []
        holder = {"pid": os.getpid(), "command": strip_credentials(shlex.join(args))[:1000],
                  "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(holder).encode(), 0)
    except BaseException:
        os.close(fd)
        raise
    return Held(path, fd)


def _lock_problem(path: Path, st: os.stat_result) -> str | None:
    if not stat.S_ISREG(st.st_mode):
        return f"{path} is not a regular file"
    if st.st_uid != os.getuid():
        return f"{path} is owned by uid {st.st_uid}, not by this user"
    if st.st_mode & 0o022:
        return f"{path} has mode {stat.S_IMODE(st.st_mode):04o}: others may change it"
    return None


def _busy(path: Path, fd: int, python: str) -> UsageError:
    """The refusal of a second run: who holds the lock (its pid and command, as the holder wrote them)."""
    holder: dict = {}
    for _ in range(25):  # the holder writes its name right after taking the lock: give it a moment
        try:
            holder = parse_json(os.pread(fd, _LOCK_READ, 0) or b"{}")
        except (OSError, ValueError):
            holder = {}
        if isinstance(holder, dict) and holder:
            break
        time.sleep(0.02)
    holder = holder if isinstance(holder, dict) else {}
    pid = holder.get("pid") if isinstance(holder.get("pid"), int) else None
    command = holder.get("command") if isinstance(holder.get("command"), str) else None
    who = f"process {pid}" if pid is not None else "another process"
    if command:
        who += ": " + escape_controls(command[:300]) + ("..." if len(command) > 300 else "")
    return UsageError(f"another cudamatrix run is changing {python} right now ({who}); nothing was changed",
                      hint="wait for it to end, then run this again (one change of an interpreter at a time)",
                      detail={"lock": str(path), "pid": pid, "command": command})


def load_last(python: str) -> Journal | None:
    """The journal of the last completed change of ``python`` (None: none kept), read as :func:`load` reads."""
    return _load(last_for(python))


def _load(folder: Path) -> Journal | None:
    path = folder / JOURNAL_FILE
    if not os.path.lexists(path):
        return None
    _tighten(folder, path)
    raw, note = read_private(path, limit=MAX_JOURNAL)
    if note or raw is None:
        raise _unusable(folder, note or "it vanished while being read")
    try:
        data = parse_json(raw)
    except ValueError as exc:
        raise _unusable(folder, f"not JSON ({exc})") from None
    problem = _shape(data)
    if problem:
        raise _unusable(folder, problem)
    return Journal(folder, data)


def unsigned(journal: Journal) -> str | None:
    """Why ``journal`` is not proven to be one this tool wrote for this user (None: its ``mac`` is the HMAC of
    everything else it holds, with this user's key): a journal edited since, or kept by an older version."""
    key, note = keys.user_key(create=False)
    if key is None:
        return note or f"this user has no key to check it with ({keys.cache_dir() / keys.KEY_FILE} is missing)"
    body = {k: v for k, v in journal.data.items() if k != MAC}
    if not keys.signed(key, body, journal.data.get(MAC)):
        return "it is not signed with this user's key (changed since it was written, or kept by an older version)"
    return None


def untrusted(path: Path, *, folder: bool = False) -> str | None:
    """Why a saved wheel's ``path`` (``folder``: the folder ``path``) may have been changed by someone else: any
    folder from ``cudamatrix`` in the state home down to it, or it itself, that is a link, another user's, or
    writable by group or others (None: none is)."""
    root = state_root().parent
    try:
        below = path.relative_to(root)
    except ValueError:
        return f"{path} is not in {root}"
    at = root
    for part in below.parts:
        note = not_owned(at, folder=True)
        if note:
            return note
        at = at / part
    return not_owned(path, folder=folder)


def _untrusted(journal: Journal, what: str, path: Path, why: str) -> UsageError:
    return UsageError(f"{what} {path} cannot be trusted: {why}; nothing was changed",
                      hint="only wheels this tool saved and signed for this user are installed: reinstall the "
                           f"starting versions from an index instead, and remove {journal.folder}",
                      detail={"journal": str(journal.folder), "path": str(path)})


def check_signed(journal: Journal) -> None:
    """Refuse (UsageError, exit 2, nothing changed) a journal not signed with this user's key: what it records
    (the sets, the wheels' hashes) is then not proven to be what this tool wrote."""
    why = unsigned(journal)
    if why:
        raise _untrusted(journal, "the install journal", journal.folder / JOURNAL_FILE, why)


def check_wheels(journal: Journal) -> None:
    """Refuse (UsageError, exit 2, nothing changed, the path named) saved wheels that anyone but this user could
    have changed, or that differ from what was saved: the installer unpacks them into site-packages (a ``.pth``
    there runs at every interpreter start). The journal must be signed with this user's key, and every file of the
    wheel folder (the installer reads the whole folder: ``--find-links``) a recorded wheel, a regular file of this
    user's that group and others cannot write, reached through no link, with its recorded SHA-256. A folder that
    is not there, or empty, installs nothing: nothing to check."""
    folder = journal.wheels
    if not os.path.lexists(folder):
        return
    why = untrusted(folder, folder=True)
    if why:
        raise _untrusted(journal, "the folder of the saved wheels", folder, why)
    try:
        names = sorted(os.listdir(folder))
    except OSError as exc:
        raise _untrusted(journal, "the folder of the saved wheels", folder, exc.strerror or str(exc)) from None
    if names:
        check_signed(journal)
    hashes = journal.data.get("sha256") or {}
    for name in names:
        path = folder / name
        if name not in hashes:
            raise _untrusted(journal, "the file", path, "the fix did not save it (no hash of it is recorded)")
        why = untrusted(path)
        if why is None:
            try:
                if sha256_of(path) != hashes[name]:
                    why = "its SHA-256 is not the one recorded when it was saved (it was changed since)"
            except OSError as exc:
                why = exc.strerror or str(exc)
        if why:
            raise _untrusted(journal, "the saved wheel", path, why)


KEEP_GB_MAX = 1024 ** 2  # a pebibyte of saved wheels: far above any disk this runs on


def keep_limit() -> int:
    """The most bytes of saved wheels kept after a completed change, for ``fix --undo``:
    ``CUDAMATRIX_UNDO_KEEP_GB`` (default 10, also when empty; 0 keeps none). Raises UsageError (exit 2) for a value
    that is not a number of gigabytes from 0 to KEEP_GB_MAX (text, negative, nan, inf): read before any change."""
    text = os.environ.get("CUDAMATRIX_UNDO_KEEP_GB", "").strip() or "10"
    try:
        gb = float(text)
    except ValueError:
        gb = float("nan")
    if not 0.0 <= gb <= KEEP_GB_MAX:  # nan compares false
        raise UsageError(f"CUDAMATRIX_UNDO_KEEP_GB={text[:40]!r} is not a number of gigabytes from 0 to "
                         f"{KEEP_GB_MAX}; nothing was changed",
                         hint="set it to the gigabytes of saved wheels fix keeps for --undo (default 10; 0 keeps "
                              "none), or unset it")
    return int(gb * 1024 ** 3)


def complete(journal: Journal, after: list[InstalledDist], limit: int | None = None) -> None:
    """The change is done: keep its journal (the starting set and its saved wheels) as the last completed change
    of its interpreter, replacing the one kept before, so ``fix --undo`` can go back offline. Saved wheels above
    ``limit`` (default :func:`keep_limit`, read before the change) are dropped, and the journal says so (undo
    then refuses, naming them). Raises UsageError or OSError when the journal cannot be written: the change is
    applied then, and its journal stays as an interrupted one (``fix --resume`` completes it)."""
    size = sum(f.stat().st_size for f in journal.wheels.glob("*.whl") if f.is_file())
    limit = keep_limit() if limit is None else limit
    fields: dict = {"state": "completed", "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                    "after": [d.to_dict() for d in after], "child_pgid": None}
    if size > limit:
        shutil.rmtree(journal.wheels, ignore_errors=True)
        fields["sha256"] = {}
        fields["dropped"] = (f"the saved wheels ({size / 1024 ** 3:.1f} GiB) were not kept: above the undo limit of "
                             f"{limit / 1024 ** 3:.1f} GiB (CUDAMATRIX_UNDO_KEEP_GB)")
    journal.record(**fields)
    last = journal.folder.with_name(journal.folder.name + ".last")
    shutil.rmtree(last, ignore_errors=True)
    os.replace(journal.folder, last)


def peek(python: str) -> Journal | None:
    """:func:`load` for a look only (a dry run): a journal that cannot be used is None here."""
    try:
        return load(python)
    except UsageError:
        return None


def _tighten(folder: Path, path: Path) -> None:
    """A journal an older version wrote with the umask's modes (0755 folders, a 0644 file) that only this user
    can change is closed to others (0700 / 0600); anything else is left for :func:`load` to refuse."""
    for item, mode in ((folder, 0o700), (path, 0o600)):
        try:
            st = os.lstat(item)
            if st.st_uid == os.getuid() and not stat.S_ISLNK(st.st_mode) and not st.st_mode & 0o022 \
                    and stat.S_IMODE(st.st_mode) != mode:
                os.chmod(item, mode)
        except (OSError, AttributeError):
            continue


_SHAPE: dict[str, type] = {"python": str, "before": list, "plan": dict}
_OPTIONAL: dict[str, type] = {"steps_done": int, "child_pgid": int, "wheels": dict, "stash": list, "unsaved": list,
                              "pid": int, "step": int, "resumed": bool, "after": list, "sha256": dict, "state": str,
                              "started_at": str, "finished_at": str, "pid_start": str, "dropped": str, "owner": dict,
                              "installer": dict, MAC: str}
_NAME = lazy(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?\Z")  # PEP 508
_SHA256 = lazy(r"[0-9a-f]{64}\Z")


def _shape(data) -> str | None:
    """Why ``data`` is not a journal this tool writes (None: it is in shape): every key it writes has its type,
    every distribution a PEP 508 name and a PEP 440 version (they become installer arguments), every saved
    wheel a plain file name and a sha256."""
    if not isinstance(data, dict):
        return "not a JSON object"
    for key, kind in _SHAPE.items():
        if not isinstance(data.get(key), kind):
            return f"{key} is missing or not a {kind.__name__}"
    return _optional(data) or _contents(data) or _dists(data, "before") or _dists(data, "after")


def _optional(data: dict) -> str | None:
    """Why an optional key of the journal has the wrong type (None: none has)."""
    for key, kind in _OPTIONAL.items():
        value = data.get(key)
        if value is not None and (not isinstance(value, kind) or (kind is int and isinstance(value, bool))):
            return f"{key} is not a {kind.__name__}"
    return None


def _contents(data: dict) -> str | None:
    """Why the journal's lists and maps hold something it never writes (None: they do not)."""
    for key in ("stash", "unsaved"):
        if not all(isinstance(v, str) for v in data.get(key) or []):
            return f"{key} holds something other than text"
    if not all(isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in (data.get("wheels") or {}).items()):
        return "wheels holds something other than names and paths"
    if not all(isinstance(k, str) and _plain_name(k) and isinstance(v, str) and _SHA256.match(v)
               for k, v in (data.get("sha256") or {}).items()):
        return "sha256 holds something other than wheel file names and sha256 digests"
    return None


def _plain_name(name: str) -> bool:
    return bool(name) and "/" not in name and "\\" not in name and "\0" not in name and not name.startswith(".")


def _dists(data: dict, key: str) -> str | None:
    """Why the distributions under ``key`` are not what a snapshot records (None: they are)."""
    from packaging.version import InvalidVersion, Version

    for i, dist in enumerate(data.get(key) or []):
        if not isinstance(dist, dict):
            return f"{key}[{i}] is not an object"
        name, version = dist.get("name"), dist.get("version")
        if not isinstance(name, str) or not _NAME.match(name):
            return f"{key}[{i}].name is not a package name (PEP 508): {escape_controls(repr(name)[:80])}"
        try:
            if not isinstance(version, str) or version != version.strip():
                raise InvalidVersion(version)
            Version(version)
        except InvalidVersion:
            return f"{key}[{i}].version is not a version (PEP 440): {escape_controls(repr(version)[:80])}"
    try:
        validate(list[InstalledDist], data.get(key) or [], key, UsageError)
    except CudamatrixError as exc:
        return exc.message.splitlines()[0]
    return None


def _start_time(pid: int) -> str | None:
    return start_time(pid)


def owner_alive(journal: Journal) -> bool:
    """Whether the process that wrote the journal still runs (another fix is at work right now). A journal
    written on another host or before a reboot: its owner does not run here."""
    pid = journal.data.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid == os.getpid() or pid <= 0:
        return False
    owner = Identity.from_journal(journal.data.get("owner"))
    if owner is not None:
        return owner.pid == pid and owner.mismatch() is None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        pass
    started = journal.data.get("pid_start")
    return started is None or _start_time(pid) == started


def check_usable(journal: Journal, python: str) -> None:
    """Refuse (UsageError, exit 2; nothing run or changed) a journal that names another interpreter than the
    one it is kept for, or whose owner ran on another host (its installer may still run there)."""
    named = journal.data.get("python")
    if os.path.abspath(str(named)) != os.path.abspath(python):
        raise _unusable(journal.folder, f"it names the interpreter {named!r}, not {python!r}, which it is kept for "
                                        "(a journal is never taken for another interpreter, and never runs the one "
                                        "it names)")
    owner = Identity.from_journal(journal.data.get("owner"))
    if owner is not None and owner.host != Identity.of(os.getpid()).host:
        raise UsageError(f"{journal.describe()} was recorded on host {owner.host!r}: its installer may still run "
                         "there; nothing was run or changed", hint=f"run cudamatrix fix --resume or --rollback on "
                                                                    f"{owner.host}", detail={"journal": str(journal.folder)})


def stop_installer(journal: Journal) -> str | None:
    """Stop the installer an interrupted change left running, when it is proven to be that installer (same pid,
    start time, boot, host and command as recorded, still leading its own process group). Returns a note of
    what was done (None: nothing ran). Raises UsageError (exit 2), signalling nothing, when the recorded
    process group is one never signalled (0, 1, our own) or runs and cannot be proven to be the installer."""
    pgid = journal.data.get("child_pgid")
    if pgid is None:
        return None
    forbidden = forbidden_group(pgid)
    if forbidden:
        raise _unusable(journal.folder, f"its installer's {forbidden}")
    if not group_alive(pgid):
        return None
    ident = Identity.from_journal(journal.data.get("installer"))
    why = ("this journal records no identity of its installer" if ident is None else
           f"the journal's installer was process {ident.pid}" if ident.pid != pgid else
           ident.mismatch() or (None if leader_of(pgid) else f"process {pgid} no longer leads its group"))
    if why:
        raise UsageError(f"the journal names the installer's process group {pgid}, which is running, but it is not "
                         f"proven to be that installer ({why}): nothing was signalled and nothing was changed",
                         hint=f"if process group {pgid} is not the installer of this change, that installer has "
                              "ended: run this again once that group has ended (or after a reboot)",
                         detail={"journal": str(journal.folder), "process_group": pgid})
    proc.kill_group(pgid)
    return f"stopped the interrupted change's installer (process group {pgid})"


def begin(python: str, plan: Plan, before: list[InstalledDist], touched: set[str], site_stash: list[str],
          say=lambda event, text: None) -> Journal:
    """Write the journal before the first change: the starting set, the plan, and a wheel of every touched
    distribution repacked from its installed files. Returns the Journal."""
    folder = folder_for(python)
    _private_folders(folder)
    journal = Journal(folder, {"python": python, "pid": os.getpid(), "pid_start": _start_time(os.getpid()),
                               "owner": Identity.of(os.getpid()).to_dict(),
                               "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                               "state": "saving", "before": [d.to_dict() for d in before], "plan": plan.to_dict(),
                               "steps_done": 0, "child_pgid": None, "wheels": {}, "stash": site_stash,
                               "unsaved": []})
    try:
        journal.record()
    except UsageError as exc:  # before the first change
        raise UsageError(f"{exc.message}; nothing was changed", hint=exc.hint) from None
    wheels: dict[str, str | None] = {}
    unsaved: list[str] = []
    hashes: dict[str, str] = {}
    for dist in before:
        if dist.name not in touched:
            continue
        say("step", f"saving {dist.name} {dist.version} for a rollback without network")
        try:
            saved = repack(Path(dist.path), journal.wheels) if dist.path else None
            if saved is not None:
                hashes[saved.name] = sha256_of(saved)
            wheels[dist.name] = str(saved) if saved is not None else None
        except (OSError, ValueError, KeyError) as exc:
            wheels[dist.name] = None
            unsaved.append(f"{dist.name}: {exc}")
        if wheels[dist.name] is None and f"{dist.name}:" not in " ".join(unsaved):
            unsaved.append(f"{dist.name}: no .dist-info folder known")
    journal.record(state="applying", wheels=wheels, unsaved=unsaved, sha256=hashes)
    return journal


def sha256_of(path: Path) -> str:
    """The SHA-256 of the file ``path`` (read in 1 MiB pieces, never followed through a symlink)."""
    digest = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _private_folders(folder: Path) -> None:
    """Make the journal folder empty, with it and every folder from ``cudamatrix`` down 0700 and this user's.
    Raises UsageError when one is not (a link planted in its place, another owner)."""
    shutil.rmtree(folder, ignore_errors=True)
    _private_chain([folder, folder / "wheels"], "the install journal cannot be kept")


def _private_chain(below: list[Path], what: str) -> None:
    """Create ``cudamatrix/journal`` in the state home and the folders ``below`` it, each 0700 and this user's.
    Raises UsageError when one is not (a link planted in its place, another owner)."""
    root = state_root().parent  # .../cudamatrix: the user's state home above it is theirs to set
    for path in [root, root / "journal", *below]:
        note = private_dir(path)
        if note:
            raise UsageError(f"{what}: {note}; nothing was changed",
                             hint="the state folder must be yours and closed to others")


def _record_hash(data_hash: hashlib._Hash) -> str:
    return "sha256=" + base64.urlsafe_b64encode(data_hash.digest()).rstrip(b"=").decode()


def _tag_set(tags: list[str]) -> str:
    """The file name's tag part for a wheel's ``Tag:`` lines, as a compressed tag set (PEP 425: "py2.py3-none-any"
    for ``py2-none-any`` and ``py3-none-any``): the first tag alone would make a py2.py3 wheel "py2-none-any",
    which no Python 3 installer takes back."""
    parts = [t.split("-") for t in tags if t.count("-") == 2]
    if not parts:
        return "py3-none-any"
    return "-".join(".".join(dict.fromkeys(p[i] for p in parts)) for i in range(3))


def repack(dist_info: Path, out_dir: Path) -> Path:
    """A wheel of an installed distribution, from the files its RECORD lists (PEP 376/427): the same bytes the
    environment holds now. Files outside site-packages (console scripts: pip writes them again from
    ``entry_points.txt``) and byte-code are left out. Raises OSError/ValueError when RECORD is missing."""
    from email.parser import Parser

    site = dist_info.parent
    meta = Parser().parsestr((dist_info / "METADATA").read_text(errors="replace"), headersonly=True)
    name, version = meta["Name"], meta["Version"]
    if not name or not version:
        raise ValueError(f"{dist_info} has no Name/Version")
    tags = [ln.split(":", 1)[1].strip() for ln in (dist_info / "WHEEL").read_text().splitlines()
            if ln.startswith("Tag:")]
    escaped = canonical(name).replace("-", "_")  # the wheel file name's escaping (binary distribution format)
    base = f"{escaped}-{version}-{_tag_set(tags)}.whl"
    if "/" in base or "\\" in base or "\0" in base or base.startswith("."):
        raise ValueError(f"{dist_info}: its name, version or tag does not make a file name ({base!r})")
    path = out_dir / base
    rows = list(csv.reader(io.StringIO((dist_info / "RECORD").read_text())))
    out_dir.mkdir(mode=0o700, parents=True, exist_ok=True)

    tmp, fd = exclusive_temp(str(out_dir), path.name, 0o600)  # never a planted link: O_EXCL | O_NOFOLLOW
    try:
        with os.fdopen(fd, "wb") as raw:
            _zip_installed(raw, site, dist_info, rows)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def _zip_installed(raw, site: Path, dist_info: Path, rows: list[list[str]]) -> None:
    """Write the wheel of the installed files ``rows`` (RECORD's) into the open file ``raw``, the .dist-info files
    last (PEP 427 asks archivers to put them at the end): an installer that fails part-way through the payload
    (a damaged file) has then written no .dist-info, which would pass for an installed distribution."""
    record: list[list[str]] = []
    rows = sorted(rows, key=lambda row: bool(row) and row[0].startswith(dist_info.name + "/"))  # stable
    inside = os.path.realpath(site)
    seen: set[str] = set()
    with zipfile.ZipFile(raw, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for row in rows:
            member = _member(row[0] if row else "", dist_info.name)
            src = _inside(inside, member) if member and member not in seen else None
            if member is None or src is None:
                continue
            seen.add(member)
            digest, size = hashlib.sha256(), 0
            fd = os.open(src, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
            with os.fdopen(fd, "rb") as fh, zf.open(zipfile.ZipInfo.from_file(src, member), "w",
                                                     force_zip64=True) as out:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(chunk)
                    size += len(chunk)
                    out.write(chunk)
            record.append([member, _record_hash(digest), str(size)])
        record.append([f"{dist_info.name}/RECORD", "", ""])
        text = io.StringIO()
        csv.writer(text, lineterminator="\n").writerows(record)
        zf.writestr(f"{dist_info.name}/RECORD", text.getvalue())


def _member(rel: str, dist_info: str) -> str | None:
    """The archive name of RECORD's entry ``rel`` (normalised), or None for one the saved wheel leaves out: an
    absolute path, one that leaves site-packages (``../../bin/x``, ``pkg/../../../x``: console scripts and data
    files, which the installer writes again or which are not the distribution's to keep), byte-code, and the
    installer's own files in the .dist-info."""
    if not rel or "\0" in rel or os.path.isabs(rel) or rel.startswith("\\"):
        return None
    member = posixpath.normpath(rel)
    if member in (".", "..") or member.startswith(("../", "/")) or "__pycache__/" in member or \
            member.endswith(".pyc"):
        return None
    if member.startswith(dist_info + "/") and member.rsplit("/", 1)[-1] in _INSTALL_TIME:
        return None
    return member


def _inside(site: str, member: str) -> str | None:
    """The real path of ``member`` when it is a regular file inside ``site`` (itself a real path) once every link
    on the way is followed; None when it is missing, not a regular file, or a link leads out of site-packages."""
    real = os.path.realpath(os.path.join(site, member))
    if not real.startswith(site.rstrip(os.sep) + os.sep):
        return None
    try:
        return real if stat.S_ISREG(os.lstat(real).st_mode) else None
    except OSError:
        return None


def stash_dirs(site_packages: list[str]) -> list[str]:
    """pip's temporary stash folders (``~orch-2.5.1.dist-info``, ``~orch``): names starting with ``~`` are
    never distributions; one left behind is the trace of an installer killed mid-way."""
    out = []
    for site in site_packages:
        try:
            out += [os.path.join(site, n) for n in os.listdir(site) if n.startswith("~")]
        except OSError:
            continue
    return sorted(out)


def clean_stash(journal: Journal, site_packages: list[str]) -> list[str]:
    """Remove stash folders that appeared since the journal began (the killed installer's). Returns them."""
    old = set(journal.data.get("stash") or [])
    gone = []
    for path in stash_dirs(site_packages):
        if path not in old:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    os.unlink(path)
                except OSError:
                    continue
            gone.append(path)
    return gone
