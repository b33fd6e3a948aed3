"""The user's overlay: framework releases published after this cudamatrix was built, read from the index
the user's pip uses (``cudamatrix matrix update``) and kept as JSON in the user's cache folder.

Only releases the shipped data lacks are kept; the shipped rows always win. The file is plain JSON (it
is parsed, never executed or unpickled), written 0600 into a 0700 folder of its own through an exclusive temporary
file and a rename, and carries the SHA-256 of its rows and an HMAC of the whole document made with the per-user
key (:mod:`cudamatrix.safe.keys`, the verification memory's): a hash in the file it protects is recomputed by
whoever edits the file, the HMAC is not. On read (bounded in size and depth), a file or folder owned by someone
else, readable by others, a symlink, a hash or an HMAC that does not match is ignored with a note. Its rows are
checked with the matrix's pydantic models when written and again when read (index URLs one-line https, names
PEP 508 names, versions versions, no control character in any text): pydantic is only loaded when an overlay
exists, so a machine without one pays one ``stat``.
"""
from __future__ import annotations

import json
import os
import stat
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from cudamatrix.errors import CudamatrixError, DataError
from cudamatrix.matrix.data import FrameworkFile, Matrix, control_text
from cudamatrix.matrix.query import lint
from cudamatrix.safe.files import parse_json, read_private, write_private
from cudamatrix.safe.keys import cache_dir as folder
from cudamatrix.safe.keys import sign, signed, user_key
from cudamatrix.schema import field, record, replace, to_dict, validate

if TYPE_CHECKING:
    from datetime import datetime

OVERLAY_SCHEMA = 1
FAMILIES = ("torch", "tensorflow", "jax")
_applied: weakref.WeakKeyDictionary[Matrix, OverlayInfo] = weakref.WeakKeyDictionary()


class OverlayError(CudamatrixError):
    """The overlay cannot be written (unsafe cache folder, rows that do not validate)."""

    exit_code = 2


@record
class OverlayInfo:
    """What an overlay added, or why one was ignored."""

    path: str
    created: str | None = None
    index: str | None = None
    releases: dict[str, list[str]] = field(default_factory=dict)  # family -> versions the overlay added
    ignored: str | None = None  # why the file was not used

    def as_dict(self) -> dict[str, Any]:
        return to_dict(self)


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/cudamatrix``, else ``~/.cache/cudamatrix``."""
    return folder()


def overlay_path() -> Path:
    """The overlay file, in a folder of its own (the cache folder itself may be shared with others' modes)."""
    return cache_dir() / "overlay" / "overlay.json"


def digest(families: dict[str, Any]) -> str:
    """SHA-256 of the rows in a canonical JSON form (sorted keys, no spaces)."""
    import hashlib  # on first use: loading OpenSSL costs a few ms on every doctor otherwise

    text = json.dumps(families, sort_keys=True, separators=(",", ":"))  # and ensure_ascii, json's default
    return hashlib.sha256(text.encode()).hexdigest()


def _unsafe(st: os.stat_result, kind: str) -> str | None:
    want = stat.S_ISDIR if kind == "folder" else stat.S_ISREG
    if not want(st.st_mode):
        return f"the overlay {kind} is not a regular {kind}"
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return f"the overlay {kind} belongs to another user (uid {st.st_uid})"
    if st.st_mode & 0o077:
        return f"the overlay {kind} is open to other users (mode {stat.S_IMODE(st.st_mode):o})"
    return None


# --- building (matrix update) ---------------------------------------------------------------------

def build(index: Any, shipped: Matrix, index_url: str, log: Callable[[str], None] = lambda m: None,
          now: datetime | None = None) -> dict[str, Any]:
    """An overlay document of the releases on ``index`` that ``shipped`` lacks. Raises IndexReadError."""
    from datetime import datetime, timezone

    from packaging.version import Version

    # lazy: `doctor` would load 62 ms more (python -X importtime; the hoisting's budget per command is 3% of its run): packaging._tokenizer, packaging.specifiers, logging
    from cudamatrix.matrix import discover, merge

    def read(suffix):
        def member(f):
            got = index.member(f, suffix)
            return got[1].decode(errors="replace") if got else None  # bytes.decode reads UTF-8 by default
        return member

    families: dict[str, list[dict[str, Any]]] = {}
    for fam in FAMILIES:
        have = [r.version for r in shipped.frameworks(fam)]
        floor = min(have, default=Version("0"))
        known = {str(v) for v in have}
        project = "jaxlib" if fam == "jax" else fam
        new = {str(v) for v in discover.releases(index.project(project)) if v >= floor and str(v) not in known}
        if fam == "jax":
            new &= {str(v) for v in discover.releases(index.project("jax"))}
        if not new:
            families[fam] = []
            continue
        log(f"{fam}: {len(new)} release(s) the shipped matrix lacks: {', '.join(sorted(new, key=Version))}")
        if fam == "torch":
            paired = {c for r in shipped.frameworks("torch") for c in r.companions.values()}
            arts = discover.torch_rows(index, log, read("torch/version.py"), only=new, skip_companions=paired)
        elif fam == "tensorflow":
            arts = discover.tensorflow_rows(index, log, read("tensorflow/python/platform/build_info.py"), only=new)
        else:
            arts = discover.jax_rows(index, log, only=new)
        base = [to_plain(r) for r in shipped.frameworks(fam)]
        families[fam] = [merge.inherit(merge.merge_release(None, art), base) for art in arts]
    created = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")
    for rows in families.values():
        for row in rows:
            row.setdefault("notes", []).append(f"from the user's overlay, read from the index on {created}")
    return {"overlay_schema": OVERLAY_SCHEMA, "created": created, "index": index_url,
            "matrix_version": shipped.meta.data_version, "families": families, "sha256": digest(families)}


def to_plain(release: Any) -> dict[str, Any]:
    """A shipped release as its data file holds it, sources as records (to_dict makes a new JSON-ready tree)."""
    return to_dict(release, records=True)


def check_rows(doc: dict[str, Any], shipped: Matrix) -> Matrix:
    """Validate an overlay document against the models; return the shipped matrix with it applied.

    Raises OverlayError naming the bad value."""
    if not isinstance(doc, dict) or doc.get("overlay_schema") != OVERLAY_SCHEMA:
        raise OverlayError(f"the overlay is not overlay schema {OVERLAY_SCHEMA}")
    fams = doc.get("families")
    if not isinstance(fams, dict) or set(fams) - set(FAMILIES):
        raise OverlayError("the overlay's families are not torch/tensorflow/jax")
    if doc.get("sha256") != digest(fams):
        raise OverlayError("the overlay's rows do not match its sha256")

    where = control_text(doc)
    if where is not None:
        raise OverlayError(f"the overlay's {where} holds a line break or a control character")
    replaced: dict[str, Any] = {}
    for fam, rows in fams.items():
        try:
            extra = validate(FrameworkFile, {"releases": rows}, f"overlay {fam}").releases
        except DataError as exc:
            raise OverlayError(exc.message) from None
        shipped_rows = shipped.frameworks(fam)
        known = {r.version for r in shipped_rows}
        merged = list(shipped_rows) + [r for r in extra if r.version not in known]
        merged.sort(key=lambda r: r.version, reverse=True)
        replaced[fam] = FrameworkFile(releases=merged)
    matrix = replace(shipped, **replaced)
    before = set(lint(shipped))
    problems = [p for p in lint(matrix) if p not in before]
    if problems:
        raise OverlayError("the overlay's rows are inconsistent with the shipped matrix: " + "; ".join(problems[:5]))
    return matrix


def _unsigned(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k != "mac"}


def write(doc: dict[str, Any], shipped: Matrix, path: Path | None = None) -> Path:
    """Validate ``doc``, sign it with the per-user key and write it to the overlay file (0600 in a 0700
    folder, temp file + rename). Raises OverlayError."""
    check_rows(doc, shipped)
    key, note = user_key(create=True)
    if key is None:
        raise OverlayError(f"the per-user key cannot be kept: {note}; not writing the overlay",
                           hint="make the cache folder ($XDG_CACHE_HOME, default ~/.cache) yours and private")
    doc = {**_unsigned(doc), "mac": sign(key, _unsigned(doc))}
    path = path or overlay_path()
    folder = path.parent
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        why = _unsafe(os.lstat(folder), "folder")  # lstat: the link itself, never where it points
    except OSError as exc:
        raise OverlayError(f"{folder}: cannot create the cache folder ({exc.strerror})") from None
    if why:
        raise OverlayError(f"{folder}: {why}; not writing the overlay there",
                           hint=f"chmod 700 {folder} (or set XDG_CACHE_HOME to a private folder)")

    note = write_private(path, json.dumps(doc, indent=1, sort_keys=True))  # the one safe writer: 0600, no link
    if note:
        raise OverlayError(f"{path}: cannot write the overlay ({note})")
    return path


# --- reading (every load of the shipped matrix) ---------------------------------------------------

def apply(shipped: Matrix, path: Path | None = None) -> Matrix:
    """The shipped matrix with the user's overlay on top, or unchanged when there is none or it is unsafe
    or invalid (the reason is kept: :func:`info`)."""
    path = path or overlay_path()
    try:
        st = os.lstat(path)
    except OSError:
        return shipped  # the common case: no overlay, one stat
    result = OverlayInfo(path=str(path))
    why = _unsafe(st, "file")
    if why is None:
        try:
            why = _unsafe(os.lstat(path.parent), "folder")
        except OSError as exc:
            why = f"the overlay folder cannot be read ({exc.strerror})"
    matrix = shipped
    if why is None:
        try:
            doc = _read_signed(path)
            matrix = check_rows(doc, shipped)
            result.created, result.index = doc.get("created"), doc.get("index")
            shipped_versions = {f: {str(r.version) for r in shipped.frameworks(f)} for f in FAMILIES}
            result.releases = {f: [r["version"] for r in rows if r["version"] not in shipped_versions[f]]
                               for f, rows in doc["families"].items()}
        except (OSError, ValueError) as exc:
            why = f"the overlay cannot be read ({exc})"
        except OverlayError as exc:
            why = exc.message
    if why:
        result.ignored = f"{why}; the shipped matrix is used"
        matrix = shipped
    _applied[matrix] = result
    return matrix


MAX_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 16  # the rows of matrix update nest 6 levels


def _read_signed(path: Path) -> dict[str, Any]:
    """The overlay document, read bounded (size, depth) and checked against the per-user key. Raises
    OverlayError when it is not signed with this user's key, ValueError when it cannot be read."""
    raw, note = read_private(path, limit=MAX_BYTES)
    if note or raw is None:
        raise ValueError(note or "it vanished while being read")
    doc = parse_json(raw, max_depth=MAX_DEPTH)
    if not isinstance(doc, dict):
        raise OverlayError("the overlay is not a JSON object")
    key, note = user_key(create=False)
    if key is None or not signed(key, _unsigned(doc), doc.get("mac")):
        if doc.get("sha256") != digest(doc.get("families") or {}):  # say the plainer reason first
            raise OverlayError("the overlay's rows do not match its sha256")
        raise OverlayError("the overlay is not signed with this user's key (" + (note or "no key, or another key")
                           + "): an overlay edited or planted by anyone without the key is not used")
    return doc


def info(matrix: Matrix) -> OverlayInfo | None:
    """What the overlay added to ``matrix`` (or why it was ignored); None when no overlay file exists."""
    return _applied.get(matrix)
