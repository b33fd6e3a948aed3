"""``lock --format pylock``: the complete set as a PEP 751 ``pylock.toml`` (the packaging specification
"pylock.toml Specification", originally PEP 751), which uv and pip read.

A lock file names files, not versions: every package carries the wheel (URL and sha256) to install, resolved
with its dependencies by the installer against the real index (:mod:`cudamatrix.lock.resolve`, into a
:class:`cudamatrix.lock.closure.Closure`); this module only renders. Pure, no I/O.

Fields written (all from the specification): ``lock-version`` "1.0"; ``environments`` (one marker per
interpreter the lock was resolved for); ``requires-python``; ``created-by``; per package ``name``, ``version``,
``index`` (the index the file came from, when known) and ``[[packages.wheels]]`` with ``name``, ``url`` and
``hashes`` (one entry per distinct file, when the targets take different wheels of one version).
The file name must be ``pylock.toml`` or ``pylock.<name>.toml`` (:func:`check_name`).
"""
from __future__ import annotations

import re
from pathlib import Path

from cudamatrix.errors import UsageError
from cudamatrix.lock import toml
from cudamatrix.lock.closure import Closure
from cudamatrix.safe.text import file_lines

LOCK_VERSION = "1.0"
# the specification's "File Name": r"^pylock\.([^.]+\.)?toml$", prefix and suffix lowercase
_NAME = re.compile(r"pylock\.([^.]+\.)?toml")


def check_name(path: Path | None) -> None:
    """Refuse an output name that installers will not take for a lock file. Raises UsageError."""
    if path is not None and not _NAME.fullmatch(Path(path).name):
        raise UsageError(f"-o {path}: a pylock file must be named pylock.toml or pylock.<name>.toml "
                         "(PEP 751; uv and pip refuse other names)", hint=f"e.g. -o {_suggest(Path(path))}")


def _suggest(path: Path) -> Path:
    stem = re.sub(r"^pylock[-_.]?|\.toml$", "", path.name.lower()).replace(".", "-")
    return path.with_name(f"pylock.{stem}.toml" if stem else "pylock.toml")


def _requires_python(pythons: list[str]) -> str:
    versions = sorted({tuple(int(x) for x in p.split(".")) for p in pythons})
    if len(versions) == 1:
        return f"=={versions[0][0]}.{versions[0][1]}.*"
    low, high = versions[0], versions[-1]
    return f">={low[0]}.{low[1]},<{high[0]}.{high[1] + 1}"


def pylock_toml(closure: Closure, header: list[str]) -> str:
    """The text of ``pylock.toml`` for the complete set, valid where one of its LockSpecs' markers holds."""
    lines = [f"# {h}" for h in header]
    lines.append(toml.assign("lock-version", LOCK_VERSION))
    lines.append("environments = " + toml.array(s.marker() for s in closure.specs))
    lines.append(toml.assign("requires-python", _requires_python([s.python for s in closure.specs])))
    lines.append(toml.assign("created-by", "cudamatrix"))
    for p in closure.packages:
        lines += ["", "[[packages]]", toml.assign("name", p.name), toml.assign("version", p.version)]
        index = next((f.index for f in p.files if f.index), None)
        if index:
            lines.append(toml.assign("index", index))
        seen: set[str] = set()
        for f in p.files:
            if f.filename in seen:
                continue
            seen.add(f.filename)
            lines += ["", "[[packages.wheels]]", toml.assign("name", f.filename), toml.assign("url", f.location),
                      "hashes = " + toml.inline_table({"sha256": f.sha256})]
    return file_lines(lines, "pylock.toml")  # a value that would add a line is refused
