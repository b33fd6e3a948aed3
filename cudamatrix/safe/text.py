"""Text from outside made inert: control characters shown as escapes, line breaks refused where a value must
stay on one line, and credentials in URLs kept out of sight.

- A terminal acts on control characters: ``ESC [2J`` clears the screen, ``ESC ]8;;URL`` makes a hyperlink that
  shows one address and opens another, a carriage return overwrites the line, the bidirectional overrides
  (U+202A-U+202E, U+2066-U+2069) reorder what is shown. Input-derived text (a pasted report, a node file, a
  Slurm error, a GPU name) is printed with those characters escaped (``\\x1b``); tab and newline stay.
- pip and uv read requirements files with Python's ``str.splitlines``, which breaks lines at ``\\r``,
  ``\\x0b``, ``\\x0c``, ``\\x1c``-``\\x1e``, ``\\x85``, U+2028 and U+2029 as well as ``\\n``: a value holding
  any of them would add a line (``--trusted-host evil.example``) to a file it is written into.
- Credentials in a URL (``https://user:TOKEN@host/...``) are shown as pip shows them (``user:****@host``,
  ``****@host`` for a lone token) and never written to a file (the whole user part is left out there: pip and
  uv then take them from ``~/.netrc`` or a keyring).
"""
from __future__ import annotations

import re
from typing import Any

from cudamatrix.errors import UsageError


class LazyPattern:
    """A regular expression compiled on first use. A cold interpreter spends about half a millisecond compiling
    one (more on the GPU machine), and a module imported on detect's or doctor's path often holds patterns only
    another command uses (pasted reports, URLs): those are declared with :func:`lazy` (issue #29)."""

    def __init__(self, pattern: str | bytes, flags: int = 0) -> None:
        self._source: tuple[Any, int] = (pattern, flags)  # str or bytes: re.compile takes either

    def __getattr__(self, name: str) -> Any:
        value = getattr(re.compile(*self._source), name)
        setattr(self, name, value)  # the pattern's method itself from now on: no lookup through here
        return value


def lazy(pattern: str | bytes, flags: int = 0) -> Any:
    """``re.compile(pattern, flags)``, compiled when first used (see :class:`LazyPattern`)."""
    return LazyPattern(pattern, flags)

# C0 controls but tab and newline, DEL, C1 controls, and the bidirectional embeddings, overrides and isolates
CONTROLS = lazy("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# every character str.splitlines() breaks a line at, and any other control character
_BREAKS = lazy("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
# a URL's authority (after "scheme://"): the user part ends at its last "@"
_AUTHORITY = lazy(r"[^\s/?#\"'<>\\]*")
_SCHEME = lazy(r"[A-Za-z][A-Za-z0-9+.\-]{0,31}$")  # looked for in the 32 characters before "://"
_PLACEHOLDER = lazy(r"^\$\{[A-Za-z0-9_]+\}(?::\$\{[A-Za-z0-9_]+\})?$")  # PEP 610: ${USER}:${TOKEN}


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_controls(text: str) -> str:
    """``text`` with every control character but tab and newline written as an escape (``\\x1b``,
    ``\\u202e``): printed, it shows what it holds and does nothing to the terminal."""
    return CONTROLS.sub(_escaped, text)  # re.sub returns the string unchanged where nothing matches


def breaks_line(text: str) -> bool:
    """Whether ``text`` holds a character that ends a line for pip (``str.splitlines``) or any control
    character: such a value cannot be written on one line of a requirements file."""
    return _BREAKS.search(text) is not None


def escape_breaks(text: str) -> str:
    """``text`` with every line break and control character (tab and newline included) written as an
    escape: a comment line of a file stays one line whatever it quotes (a GPU name from a node file)."""
    return _BREAKS.sub(_escaped, text)


def file_lines(lines: list[str], what: str = "a lock file") -> str:
    """``lines`` joined into a file's text (one ``\n`` after each). A comment line (``#``) has its line
    breaks and control characters escaped; any other line holding one is refused (UsageError, exit 2, nothing
    written): a value that would add a line (an index URL from the data with ``\n--trusted-host ...``)."""
    out = []
    for line in lines:
        if line.startswith("#"):
            out.append(escape_breaks(line))
        else:
            out.append(one_line(line, f"a line of {what}"))
    return "\n".join(out) + "\n"


def one_line(value: str, what: str) -> str:
    """``value`` when it fits on one line of a file; raises UsageError (exit 2) naming ``what`` otherwise:
    a line break in it would add a line the user never asked for (another index, a trusted host)."""
    if breaks_line(value):
        raise UsageError(f"{what} '{escape_controls(redact_urls(value))[:200]}' holds a line break or a control "
                         "character; nothing was written", hint="fix the value where it comes from (the matrix "
                                                                   "data, the overlay, the node file, the argument)")
    return value


def _public(userinfo: str) -> bool:
    """ssh's ``git@`` and environment-variable placeholders are no secrets (pip keeps them too)."""
    return userinfo == "git" or _PLACEHOLDER.match(userinfo) is not None


def _masked(userinfo: str) -> str:
    if _public(userinfo):
        return userinfo
    user, colon, _password = userinfo.partition(":")
    return f"{user}:****" if colon else "****"


def _each_userinfo(text: str, replace) -> str:
    """``text`` with the user part of every ``scheme://user@host`` replaced by ``replace(user)`` (a string,
    or None to leave the user part and its "@" out). Linear: only the places of "://" are looked at."""
    out, pos, last = [], 0, 0
    while (at := text.find("://", pos)) >= 0:
        pos = at + 3
        if not _SCHEME.search(text, max(0, at - 32), at):
            continue
        # the pattern matches the empty string too: there is a match at every position
        user, sep, _host = _AUTHORITY.match(text, pos).group().rpartition("@")
        if not sep:
            continue
        new = replace(user)
        out.append(text[last:pos] + (f"{new}@" if new is not None else ""))
        last = pos + len(user) + 1
    return "".join(out) + text[last:]  # nothing replaced: last is 0, the text whole


def redact_urls(text: str) -> str:
    """``text`` with the credentials of every URL in it masked as pip shows them (``user:****@host``)."""
    if "@" not in text:  # no user part anywhere (a text without "://" is returned whole by _each_userinfo)
        return text
    return _each_userinfo(text, _masked)


def strip_credentials(text: str) -> str:
    """``text`` with the user part of every URL in it left out (``https://host/...``): what is written to a
    file. Environment-variable placeholders (``${USER}:${TOKEN}``, read by pip at install time) and ssh's
    ``git@`` are kept."""
    if "@" not in text:
        return text
    return _each_userinfo(text, lambda user: user if _public(user) else None)


def has_credentials(text: str) -> bool:
    """Whether a URL in ``text`` carries a user part that :func:`strip_credentials` would leave out."""
    return strip_credentials(text) != text
