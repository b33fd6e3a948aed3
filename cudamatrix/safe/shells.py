"""One quoting function per shell, for every line this tool prints or writes for a shell to run.

Values are folder lists (LD_LIBRARY_PATH) that may hold any byte a file name may: quotes, ``$(...)``,
backticks, newlines. Each shell's literal-string syntax, from its manual:

- POSIX sh, bash, zsh: inside single quotes nothing is special and a single quote cannot occur; it is
  closed, escaped and reopened (``'\\''``). This is what :func:`shlex.quote` produces.
- fish: inside single quotes only ``\\'`` and ``\\\\`` are escapes (fish documentation, "Quotes"), so
  shlex's output is *not* fish syntax: ``'\\''`` ends the string in fish. Backslashes and single quotes
  are escaped instead.
- PowerShell: inside single quotes a quote is written twice (about_Quoting_Rules); PowerShell also
  treats the typographic quotes U+2018-U+201B as single quotes, so those are doubled too.
"""
from __future__ import annotations

import re
import shlex

SHELLS = ("bash", "zsh", "sh", "fish", "powershell")
ALIASES = {"pwsh": "powershell"}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_FISH_PLAIN = re.compile(r"^[A-Za-z0-9_+=:,./-]+$")
_PS_QUOTES = "'\u2018\u2019\u201a\u201b"


def canonical(shell: str) -> str | None:
    """The shell's name as :data:`SHELLS` spells it, or None when it is not one this module quotes for."""
    shell = ALIASES.get(shell, shell)
    return shell if shell in SHELLS else None


def quote(shell: str, value: str) -> str:
    """``value`` as one literal word of ``shell``. Raises ValueError for an unknown shell."""
    name = canonical(shell)
    if name == "fish":
        if _FISH_PLAIN.match(value):  # nothing fish would expand: printed as is, like shlex does for sh
            return value
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if name == "powershell":
        return "'" + "".join(c + c if c in _PS_QUOTES else c for c in value) + "'"
    if name is None:
        raise ValueError(f"no quoting known for shell {shell!r}")
    return shlex.quote(value)


def export_line(shell: str, key: str, value: str) -> str:
    """The line that sets (or, for an empty value, removes) the environment variable ``key`` in ``shell``.
    Raises ValueError for a variable name that is not an identifier or an unknown shell."""
    if not _NAME.match(key):
        raise ValueError(f"not a variable name: {key!r}")
    name = canonical(shell)
    if name == "fish":
        return f"set -e {key}" if not value else f"set -gx {key} {quote(name, value)}"
    if name == "powershell":
        return f"Remove-Item Env:{key} -ErrorAction SilentlyContinue" if not value else \
            f"$env:{key} = {quote(name, value)}"
    if name is None:
        raise ValueError(f"no quoting known for shell {shell!r}")
    return f"unset {key}" if not value else f"export {key}={quote(name, value)}"
