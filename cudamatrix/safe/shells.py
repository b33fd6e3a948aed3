"""One quoting function per shell, for every line this tool prints or writes for a shell to run.

Values are folder lists (LD_LIBRARY_PATH) that may hold any byte a file name may: quotes, ``$(...)``,
backticks, newlines. Each shell's literal-string syntax, from its manual:

- POSIX sh, bash, zsh: inside single quotes nothing is special and a single quote cannot occur; it is
  closed, given in double quotes and reopened (``'"'"'``): :func:`posix_word`, the words :func:`shlex.quote`
  writes.
- fish: inside single quotes only ``\\'`` and ``\\\\`` are escapes (fish documentation, "Quotes"), so
  the POSIX words are *not* fish syntax: ``'a\\\\b'`` is ``a\\b`` in fish. Backslashes and single quotes
  are escaped instead.
- PowerShell: inside single quotes a quote is written twice (about_Quoting_Rules); PowerShell also
  treats the typographic quotes U+2018-U+201B as single quotes, so those are doubled too.

A control character (an escape sequence, a carriage return, a bidirectional override:
:data:`cudamatrix.safe.text.CONTROLS`) is never written raw, so the printed line is inert on a terminal and
still sets the exact value: bash and zsh get ANSI-C quoting (``$'...\\x1b...'``, its UTF-8 bytes as ``\\xHH``),
POSIX sh a ``"$(printf '\\033')"`` piece (octal escapes are POSIX printf), fish an unquoted ``\\xHH`` piece
between quoted ones, PowerShell ``('...' + [char]0x001b + '...')``.

A byte of a file name that is not UTF-8 (kept by Python as a lone surrogate U+DC80-U+DCFF, PEP 383) is written
the same way, as that byte: ``$'\\xff'``, ``"$(printf '\\377')"``, fish ``\\xff`` (a raw byte in fish). PowerShell's
variables are UTF-16 text and cannot hold it, and no shell can hold another lone surrogate: ValueError, never
a line that would set other bytes.
"""
from __future__ import annotations

from typing import Literal

from cudamatrix.safe.text import CONTROLS, lazy
from cudamatrix.schema import record

SHELLS = ("bash", "zsh", "sh", "fish", "powershell")
ALIASES = {"pwsh": "powershell"}
# \Z, not $: "$" also matches before a final newline, and "K\n" is no name, "/srv/lib\n" no plain fish word
_NAME = lazy(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_FISH_PLAIN = lazy(r"[A-Za-z0-9_+=:,./-]+\Z")
_SH_PLAIN = lazy(r"[A-Za-z0-9_@%+=:,./-]+\Z")  # nothing a POSIX shell reads specially: written as it is
_PS_QUOTES = "'\u2018\u2019\u201a\u201b"
# what is never written raw: the control characters, and the bytes of a file name that are not UTF-8 (PEP 383)
_ESCAPED = lazy(f"{CONTROLS.pattern}|[\udc80-\udcff]")
_SURROGATE = lazy("[\ud800-\udfff]")


class NotExact(ValueError):
    """The value cannot be written exactly in that shell (bytes that are not UTF-8, for PowerShell)."""


def known_shell(shell: str) -> str | None:
    """The shell's name as :data:`SHELLS` spells it, or None when it is not one this module quotes for."""
    shell = ALIASES.get(shell, shell)
    return shell if shell in SHELLS else None


def quote(shell: str, value: str) -> str:
    """``value`` as one literal word of ``shell``. Raises ValueError for an unknown shell, and NotExact (a
    ValueError) for a value the shell cannot be given exactly."""
    name = known_shell(shell)
    if name is not None and _SURROGATE.search(value) and (
            name == "powershell" or _SURROGATE.search(_ESCAPED.sub("", value))):
        raise NotExact(f"{ascii(value)} holds bytes that are not UTF-8: {name} cannot be given them exactly")
    if name is not None and _ESCAPED.search(value):
        return _with_controls(name, value)
    if name == "fish":
        if _FISH_PLAIN.match(value):  # nothing fish would expand: printed as is, like shlex does for sh
            return value
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if name == "powershell":
        return "'" + "".join(c + c if c in _PS_QUOTES else c for c in value) + "'"
    if name is None:
        raise ValueError(f"no quoting known for shell {shell!r}")
    return posix_word(value)


def posix_word(value: str) -> str:
    """``value`` as one word of a POSIX shell (sh, bash, zsh): as it is when nothing in it is special, else in
    single quotes, each single quote in it written as ``'"'"'`` (close, a double-quoted quote, reopen); the
    empty word is ``''``. The same words as :func:`shlex.quote`, without importing shlex (0.4 ms of doctor's
    imports, python -X importtime)."""
    if not value:
        return "''"
    if _SH_PLAIN.match(value):
        return value
    return "'" + value.replace("'", "'\"'\"'") + "'"


def export_line(shell: str, key: str, value: str) -> str:
    """The line that sets (or, for an empty value, removes) the environment variable ``key`` in ``shell``.
    Raises ValueError for a variable name that is not an identifier or an unknown shell."""
    if not _NAME.match(key):
        raise ValueError(f"not a variable name: {key!r}")
    name = known_shell(shell)
    if name == "fish":
        return f"set -e {key}" if not value else f"set -gx {key} {quote(name, value)}"
    if name == "powershell":
        return f"Remove-Item Env:{key} -ErrorAction SilentlyContinue" if not value else \
            f"$env:{key} = {quote(name, value)}"
    if name is None:
        raise ValueError(f"no quoting known for shell {shell!r}")
    return f"unset {key}" if not value else f"export {key}={quote(name, value)}"


def shown_line(shell: str, key: str, value: str) -> str:
    """:func:`export_line` for a line shown among other output (solve's, fix's): a value the shell cannot be given
    exactly is said in a comment line instead (its text escaped), never written as a line that sets other bytes."""
    try:
        return export_line(shell, key, value)
    except NotExact as exc:
        return f"# {key} not shown: {exc}"


def _pieces(value: str) -> list[tuple[bool, str]]:
    """``value`` cut into (is control, text) runs."""
    out: list[tuple[bool, str]] = []
    last = 0
    for m in _ESCAPED.finditer(value):
        if m.start() > last:
            out.append((False, value[last:m.start()]))
        out.append((True, m.group()))
        last = m.end()
    if last < len(value):
        out.append((False, value[last:]))
    return out


def _with_controls(name: str, value: str) -> str:
    """A word of shell ``name`` for a value holding control characters or bytes that are not UTF-8, none of them
    written raw. A control piece is one character (_ESCAPED has no repetition); encoded with surrogateescape, a
    control character gives its UTF-8 bytes and a PEP 383 surrogate the byte it stands for."""
    pieces = _pieces(value)
    if name in ("bash", "zsh"):
        body = "".join("".join(f"\\x{b:02x}" for b in _raw(t)) if ctl else
                       t.replace("\\", "\\\\").replace("'", "\\'") for ctl, t in pieces)
        return f"$'{body}'"
    if name == "sh":
        return "".join("\"$(printf '" + "".join(f"\\{b:03o}" for b in _raw(t)) + "')\"" if ctl else posix_word(t)
                       for ctl, t in pieces)
    if name == "fish":
        return "".join("".join(f"\\x{b:02x}" for b in _raw(t)) if ctl else
                       "'" + t.replace("\\", "\\\\").replace("'", "\\'") + "'" for ctl, t in pieces)
    parts = [f"[char]0x{ord(t):04x}" if ctl else
             "'" + "".join(c + c if c in _PS_QUOTES else c for c in t) + "'" for ctl, t in pieces]
    return "(" + " + ".join(parts) + ")"


def _raw(piece: str) -> bytes:
    """An escaped piece's bytes: a control character's UTF-8, the byte a PEP 383 surrogate stands for."""
    return piece.encode("utf-8", "surrogateescape")


@record(frozen=True)
class Command:
    """A command this tool prints for people to run, as its words (``argv``) and the interpreter it acts on:
    ``aims`` "tool" for this tool's own subcommands that take ``--python`` (``cudamatrix fix``), "pip" for pip's
    (``pip install``), None for any other (``uv pip ...`` names its interpreter itself). Quoted for a POSIX shell
    once, when it is printed (:meth:`line`); ``always_quoted``: the positions of words written in single quotes
    whatever they hold (the requirement of a finding's ``pip install '...'``, as it has always been printed)."""

    argv: tuple[str, ...]
    aims: Literal["tool", "pip"] | None = None
    always_quoted: tuple[int, ...] = ()

    def line(self, python: str | None = None) -> str:
        """The command as one shell line, pointed at the interpreter ``python`` when one is given:
        ``cudamatrix fix --python X`` (unless it names one already), ``X -m pip install``."""
        words = [_single(w) if i in self.always_quoted else posix_word(w) for i, w in enumerate(self.argv)]
        if python and self.aims == "tool" and "--python" not in self.argv:
            words[2:2] = ["--python", posix_word(python)]
        elif python and self.aims == "pip":
            words[:0] = [posix_word(python), "-m"]
        return " ".join(words)


def tool(*args: str) -> Command:
    """``cudamatrix ARGS``, a subcommand that takes ``--python``."""
    return Command(("cudamatrix", *args), "tool")


def pip(*args: str, always_quoted: tuple[int, ...] = ()) -> Command:
    """``pip ARGS`` (``always_quoted``: positions among ``args``)."""
    return Command(("pip", *args), "pip", tuple(i + 1 for i in always_quoted))


def _single(word: str) -> str:
    """``word`` in single quotes, a quote in it closed, escaped and reopened (POSIX sh)."""
    return "'" + word.replace("'", "'\\''") + "'"


class Said(str):
    """Words for people that hold commands: the text as printed for no interpreter in particular (the str itself,
    so a record field that holds text holds it, and its JSON is that text), and its parts, text and
    :class:`Command` records, so that the commands can be pointed at an interpreter (:meth:`aimed`) without
    searching the words. Built from parts; a Said among them gives its own parts."""

    parts: tuple[str | Command, ...]

    def __new__(cls, *parts: str | Command) -> Said:
        flat: list[str | Command] = []
        for part in parts:
            flat += part.parts if isinstance(part, Said) else [part]
        self = super().__new__(cls, "".join(p.line() if isinstance(p, Command) else p for p in flat))
        self.parts = tuple(flat)
        return self

    def __reduce__(self) -> tuple:
        return Said, self.parts

    def aimed(self, python: str | None) -> str:
        """The words with each command pointed at ``python`` (:meth:`Command.line`)."""
        return "".join(p.line(python) if isinstance(p, Command) else p for p in self.parts)


def joined(sep: str, items: list) -> Said:
    """``sep.join(items)`` that keeps the commands of the items that are :class:`Said`."""
    parts: list[str | Command] = []
    for i, item in enumerate(items):
        parts += [sep, item] if i else [item]
    return Said(*parts)


def aim(text: str, python: str | None) -> str:
    """``text`` with the commands it holds pointed at ``python``: a :class:`Said`'s commands; other text (a
    plain str holds no command records) and ``python`` None: ``text`` as it is."""
    if not python or not isinstance(text, Said):
        return text
    return text.aimed(python)
