"""``lock --format pylock``: the solved set as a PEP 751 ``pylock.toml`` (the packaging specification
"pylock.toml Specification", originally PEP 751), which uv and pip read.

A lock file names files, not versions: every package carries the wheel (URL and sha256) to install, so the
solved pins are first resolved to files with their dependencies by the installer against the real index
(:func:`cudamatrix.install.locking.locked_files`); this module only renders. Pure, no I/O.

Fields written (all from the specification): ``lock-version`` "1.0"; ``environments`` (markers the lock is
valid for); ``requires-python``; ``created-by``; per package ``name``, ``version``, ``index`` (the index the file
came from, when known) and ``[[packages.wheels]]`` with ``name``, ``url`` and ``hashes``.
"""
from __future__ import annotations

from cudamatrix.schema import record

LOCK_VERSION = "1.0"

# the markers that hold on each platform the solver knows (PEP 508 environment markers)
PLATFORM_MARKERS = {
    "linux_x86_64": 'sys_platform == "linux" and platform_machine == "x86_64"',
    "linux_aarch64": 'sys_platform == "linux" and platform_machine == "aarch64"',
    "win_amd64": 'sys_platform == "win32" and platform_machine == "AMD64"',
}


@record(frozen=True)
class LockedFile:
    """One distribution resolved to the wheel the installer would fetch."""

    name: str
    version: str
    url: str
    sha256: str
    index: str | None = None


def from_report(report: dict, indexes: list[str] | None = None) -> list[LockedFile]:
    """LockedFiles from a ``pip install --dry-run --report`` JSON document (pip's installation report format).
    ``indexes``: the index URLs given to pip; a file's index is the one its URL shares a host with."""
    out = []
    for item in report.get("install", []):
        info = item.get("download_info") or {}
        hashes = (info.get("archive_info") or {}).get("hashes") or {}
        meta = item.get("metadata") or {}
        if not info.get("url") or "sha256" not in hashes or not meta.get("name"):
            raise ValueError(f"the installer's report has no file and sha256 for {meta.get('name') or item}")
        index = next((i for i in indexes or [] if _host(i) == _host(info["url"])), None)
        out.append(LockedFile(_canon(meta["name"]), meta["version"], info["url"], hashes["sha256"], index))
    return sorted(out, key=lambda f: f.name)


def _host(url: str) -> str:
    from urllib.parse import urlsplit

    return urlsplit(url).netloc.lower()


def _canon(name: str) -> str:
    from cudamatrix.names import canonical

    return canonical(name)


def _q(text: str) -> str:
    """A TOML basic string."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def pylock_toml(files: list[LockedFile], *, platform: str, python: str, header: list[str]) -> str:
    """The text of ``pylock.toml`` for the locked files, valid on ``platform`` with Python ``python`` ("3.11")."""
    lines = [f"# {h}" for h in header]
    marker = PLATFORM_MARKERS.get(platform)
    lines.append(f"lock-version = {_q(LOCK_VERSION)}")
    env = f'{marker} and python_version == "{python}"' if marker else f'python_version == "{python}"'
    lines.append(f"environments = [{_q(env)}]")
    lines.append(f"requires-python = {_q('==' + python + '.*')}")
    lines.append(f"created-by = {_q('cudamatrix')}")
    for f in files:
        lines += ["", "[[packages]]", f"name = {_q(f.name)}", f"version = {_q(f.version)}"]
        if f.index:
            lines.append(f"index = {_q(f.index)}")
        lines += ["", "[[packages.wheels]]", f"name = {_q(f.url.rsplit('/', 1)[-1].split('#')[0])}",
                  f"url = {_q(f.url.split('#')[0])}", f"hashes = {{sha256 = {_q(f.sha256)}}}"]
    from cudamatrix.safe.text import file_lines

    return file_lines(lines, "pylock.toml")  # a value that would add a line is refused
