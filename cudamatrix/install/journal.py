"""The install journal: what an interrupted change needs to be finished or undone, kept on disk.

Before the first change of an interpreter's installed set, :func:`begin` writes ``journal.json`` (the
starting set with each distribution's source, the plan, this process's id) and repacks the installed files
of every distribution the plan touches into a wheel in the journal's ``wheels/`` folder, so that going back
needs no network and no index. While an installer runs, its process group is recorded. The journal is
removed when the change is done or undone; one left behind means the run was killed (SIGKILL, a crash, a
closed terminal), and the next run offers ``fix --resume`` or ``fix --rollback``.

Where: ``$XDG_STATE_HOME/cudamatrix/journal/<hash of the interpreter path>/`` (default ``~/.local/state``).
"""
from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import shutil
import time
import zipfile
from pathlib import Path

from cudamatrix.models import InstalledDist, Plan
from cudamatrix.names import canonical
from cudamatrix.schema import record

JOURNAL_FILE = "journal.json"
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
        return [InstalledDist(**d) for d in self.data["before"]]

    def plan(self) -> Plan:
        """The plan the interrupted run was applying."""
        from cudamatrix.schema import validate

        return validate(Plan, self.data["plan"], str(self.folder / JOURNAL_FILE))

    def record(self, **fields) -> None:
        """Update fields and write the journal atomically (a kill mid-write leaves the old copy)."""
        self.data.update(fields)
        tmp = self.folder / (JOURNAL_FILE + ".tmp")
        tmp.write_text(json.dumps(self.data, indent=1))
        tmp.replace(self.folder / JOURNAL_FILE)

    def close(self) -> None:
        """The change is done or undone: remove the journal and its wheels."""
        shutil.rmtree(self.folder, ignore_errors=True)

    def describe(self) -> str:
        done = self.data.get("steps_done", 0)
        total = len([s for s in self.data["plan"].get("steps", []) if s.get("kind") in
                     ("install", "uninstall", "reinstall")])
        return (f"an interrupted change of {self.python} (started {self.data.get('started_at')}, by process "
                f"{self.data.get('pid')}, {done} of {total} step(s) done)")


def load(python: str) -> Journal | None:
    """The journal left for ``python``, or None. An unreadable journal is returned with what could be read."""
    folder = folder_for(python)
    path = folder / JOURNAL_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or "before" not in data or "plan" not in data:
        return None
    return Journal(folder, data)


def _start_time(pid: int) -> str | None:
    """A process's start time in clock ticks since boot (/proc/PID/stat field 22, proc(5)): with the pid, it
    names one process, so a pid the kernel gave to another process later is not taken for the owner."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()  # the command name may hold spaces: skip past its ")"
    return fields[19] if len(fields) > 19 else None


def owner_alive(journal: Journal) -> bool:
    """Whether the process that wrote the journal still runs (another fix is at work right now)."""
    pid = journal.data.get("pid")
    if not isinstance(pid, int) or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    started = journal.data.get("pid_start")
    return started is None or _start_time(pid) == started


def begin(python: str, plan: Plan, before: list[InstalledDist], touched: set[str], site_stash: list[str],
          say=lambda event, text: None) -> Journal:
    """Write the journal before the first change: the starting set, the plan, and a wheel of every touched
    distribution repacked from its installed files. Returns the Journal."""
    folder = folder_for(python)
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "wheels").mkdir(parents=True)
    journal = Journal(folder, {"python": python, "pid": os.getpid(), "pid_start": _start_time(os.getpid()),
                               "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                               "state": "saving", "before": [d.to_dict() for d in before], "plan": plan.to_dict(),
                               "steps_done": 0, "child_pgid": None, "wheels": {}, "stash": site_stash,
                               "unsaved": []})
    journal.record()
    wheels, unsaved = {}, []
    for dist in before:
        if dist.name not in touched:
            continue
        say("step", f"saving {dist.name} {dist.version} for a rollback without network")
        try:
            wheels[dist.name] = str(repack(Path(dist.path), journal.wheels)) if dist.path else None
        except (OSError, ValueError, KeyError) as exc:
            wheels[dist.name] = None
            unsaved.append(f"{dist.name}: {exc}")
        if wheels[dist.name] is None and f"{dist.name}:" not in " ".join(unsaved):
            unsaved.append(f"{dist.name}: no .dist-info folder known")
    journal.record(state="applying", wheels=wheels, unsaved=unsaved)
    return journal


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
    path = out_dir / f"{escaped}-{version}-{_tag_set(tags)}.whl"
    rows = list(csv.reader(io.StringIO((dist_info / "RECORD").read_text())))
    record: list[list[str]] = []
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".part")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for row in rows:
            rel = row[0] if row else ""
            if not rel or rel.startswith("..") or os.path.isabs(rel) or "__pycache__/" in rel or rel.endswith(".pyc"):
                continue
            if rel.startswith(dist_info.name + "/") and rel.rsplit("/", 1)[-1] in _INSTALL_TIME:
                continue
            src = site / rel
            if not src.is_file():
                continue
            digest, size = hashlib.sha256(), 0
            with open(src, "rb") as fh, zf.open(zipfile.ZipInfo.from_file(src, rel), "w", force_zip64=True) as out:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(chunk)
                    size += len(chunk)
                    out.write(chunk)
            record.append([rel, _record_hash(digest), str(size)])
        record.append([f"{dist_info.name}/RECORD", "", ""])
        text = io.StringIO()
        csv.writer(text, lineterminator="\n").writerows(record)
        zf.writestr(f"{dist_info.name}/RECORD", text.getvalue())
    tmp.replace(path)
    return path


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
