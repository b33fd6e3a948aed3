"""The root cause of a failed install, read from the installer's output (pip or uv), with a way out.

pip's last line is often a consequence ("ERROR: Exception:" over a traceback, "Cannot install ... because
these package versions have conflicting dependencies"); the cause sits earlier: the host that does not
resolve, the archive whose CRC check failed, the disk that filled up. Patterns below are the messages pip,
its vendored urllib3/requests and uv print for each cause (checked against real runs in
tests/install/test_apply.py::test_explain_*); the first kind whose pattern matches, in this order, wins.
"""
from __future__ import annotations

import re

from cudamatrix.models import Model
from cudamatrix.schema import record

# (kind, patterns, which matching line shows it best, way out), most specific first: a full disk also breaks
# downloads, so it is checked first; a host that does not resolve before other network failures
_CAUSES: list[tuple[str, tuple[str, ...], str, str]] = [
    ("no space left", (r"No space left on device", r"\[Errno 28\]", r"Disk quota exceeded", r"\[Errno 122\]"), "last",
     "free space where the installer writes (site-packages, its cache, the temp folder), or point TMPDIR and "
     "PIP_CACHE_DIR / UV_CACHE_DIR at a larger disk, then run {command} again"),
    ("corrupt download", (r"Bad CRC", r"BadZipFile", r"[Bb]ad zip ?file", r"THESE PACKAGES DO NOT MATCH THE HASHES",
                          r"[Hh]ash mismatch", r"invalid zip", r"CRC mismatch", r"is not a valid wheel",
                          r"Failed to extract archive", r"Unexpected end of (?:file|stream)", r"IncompleteRead"), "last",
     "the file changed on its way (a proxy, a broken mirror, a partial cache entry): clear the installer's cache "
     "(pip cache purge / uv cache clean) and run {command} again; if it repeats, the index serves a broken file"),
    ("index host does not resolve (DNS)", (r"Name or service not known", r"Temporary failure in name resolution",
                                           r"nodename nor servname", r"getaddrinfo failed", r"[Dd]ns error",
                                           r"failed to lookup address", r"No address associated with hostname"), "last",
     "the index's host name does not resolve: check the network's DNS, the proxy (HTTPS_PROXY) or the --mirror "
     "URL, then run {command} again"),
    ("network", (r"Connection refused", r"Failed to establish a new connection", r"Connection reset",
                 r"Connection aborted", r"RemoteDisconnected", r"Connection broken", r"Read timed out",
                 r"ConnectTimeoutError", r"timed out", r"error sending request", r"Network is unreachable",
                 r"No route to host", r"SSLError", r"certificate verify failed", r"ProxyError",
                 r"Max retries exceeded", r"tcp connect error"), "last",
     "the index could not be reached: check the network, a proxy (HTTPS_PROXY) or the --mirror URL, then run "
     "{command} again"),
    ("resolution conflict", (r"ResolutionImpossible", r"conflicting dependencies", r"No solution found when resolving",
                             r"requirements are unsatisfiable", r"Cannot install .* because"), "first",
     "the requested pins contradict each other or something installed: run cudamatrix solve --explain, or "
     "drop the pin that conflicts"),
    ("not on the index", (r"No matching distribution found", r"Could not find a version that satisfies",
                          r"not found in the package registry", r"was not found in the provided package locations"),
     "first",
     "the index listed no file for it: a wrong index URL (--mirror), an index that did not answer (pip says so "
     "only when it retries: PIP_RETRIES), or no build for this Python and platform (cudamatrix solve)"),
    ("permission denied", (r"Permission denied", r"\[Errno 13\]", r"Read-only file system", r"\[Errno 30\]"), "last",
     "the environment is not writable by this user: use a virtual environment you own, or run as its owner"),
]


@record
class RootCause(Model):
    """The root cause of an installer failure: its kind, the installer's line that shows it, a way out."""

    kind: str
    line: str
    way_out: str


def explain(output: str, command: str = "fix") -> RootCause | None:
    """The first cause found in the installer's ``output`` (stdout and stderr), or None when none is known.
    ``command``: the cudamatrix command that ran the installer, the one a way out says to run again."""
    lines = [ln.strip() for ln in (output or "").splitlines() if ln.strip()]
    # source lines of a traceback repeat the message without its values
    lines = [ln for ln in lines if not ln.startswith(("raise ", "File \"", "^"))]
    for kind, patterns, pick, way_out in _CAUSES:
        rx = re.compile("|".join(patterns))
        hits = [ln for ln in lines if rx.search(ln)]
        if hits:
            line = hits[0] if pick == "first" else hits[-1]
            m = rx.search(line)
            assert m is not None  # line was picked because rx matches it
            return RootCause(kind=kind, line=_short(line, m.start()), way_out=way_out.format(command=command))
    return None


def _short(line: str, at: int, limit: int = 300) -> str:
    """At most ``limit`` characters of ``line``, around position ``at`` (where the cause was found)."""
    if len(line) <= limit:
        return line
    start = max(0, min(at - limit // 3, len(line) - limit))
    return ("..." if start else "") + line[start:start + limit] + ("..." if start + limit < len(line) else "")
