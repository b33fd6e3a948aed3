"""Read a requirements file back as pip reads it, for ``check -r``: the requirements, the index options and which
lines pin file hashes. Pure: the text handed in, a record returned; a line pip would refuse is a UsageError."""
from __future__ import annotations

import re
import shlex

from packaging.requirements import InvalidRequirement, Requirement

from cudamatrix.errors import UsageError
from cudamatrix.schema import field, record


@record
class RequirementsFile:
    requirements: list[Requirement] = field(default_factory=list)
    index_url: str | None = None
    extra_index_urls: list[str] = field(default_factory=list)
    find_links: list[str] = field(default_factory=list)
    no_index: bool = False
    hashed: list[str] = field(default_factory=list)  # names of requirements pinned to file hashes


# per-requirement options pip accepts after a requirement on the same line (they never change which
# version or build pip picks from a given index: hashes only refuse files that differ)
_REQ_OPTIONS = ("--hash", "--config-settings", "--global-option", "--install-option")


_COMMENT = re.compile(r"(^|\s+)#.*$")  # pip's: a "#" at the start or after blanks, to the end of the line


def _logical_lines(text: str):
    """(line number, line) as pip reads a requirements file: a line ending in a backslash continues on the
    next (a comment line never does), and comments are stripped after the lines are joined."""
    buf: list[str] = []
    first = None
    for number, raw in enumerate(text.splitlines(), 1):
        comment = _COMMENT.match(raw) is not None
        if raw.endswith("\\") and not comment:
            first = number if first is None else first
            buf.append(raw.strip("\\"))
            continue
        joined = "".join(buf) + (" " + raw if comment else raw)
        yield (number if first is None else first), _COMMENT.sub("", joined).strip()
        buf, first = [], None
    if buf:
        yield first, _COMMENT.sub("", "".join(buf)).strip()


def parse_requirements(text: str, name: str) -> RequirementsFile:
    """Parse a requirements file as pip reads it: requirements (with per-requirement ``--hash`` options and
    backslash continuations), ``-i/--index-url``, ``--extra-index-url``, ``-f/--find-links``, ``--no-index``.

    Raises UsageError naming the line that does not parse.
    """
    out = RequirementsFile()
    for number, line in _logical_lines(text):
        if line.startswith("-"):
            _option_line(out, line, f"{name}:{number}")
        elif line:
            _requirement_line(out, line, f"{name}:{number}")
    return out


def _option_line(out: RequirementsFile, line: str, where: str) -> None:
    """An option line: the index options pip reads from a file; an include or an editable is refused."""
    try:
        parts = shlex.split(line.replace("=", " ", 1) if line.startswith("--") else line)
    except ValueError:
        raise UsageError(f"{where}: cannot parse {line!r}") from None
    opt, args = parts[0], parts[1:]
    if len(opt) > 2 and opt[:2] in ("-i", "-f") and not opt.startswith("--"):
        opt, args = opt[:2], [opt[2:]] + args  # "-ihttps://..." as pip allows
    if opt in ("-i", "--index-url") and args:
        out.index_url = args[0]
    elif opt == "--extra-index-url" and args:
        out.extra_index_urls.append(args[0])
    elif opt in ("-f", "--find-links") and args:
        out.find_links.append(args[0])
    elif opt == "--no-index":
        out.no_index = True
    elif opt in ("-r", "--requirement", "-c", "--constraint", "-e", "--editable"):
        raise UsageError(f"{where}: {opt} is not supported by check; flatten the file first")


def _requirement_line(out: RequirementsFile, line: str, where: str) -> None:
    """A requirement, with the per-requirement options after it (``--hash`` marks it as hashed)."""
    words = line.split()
    cut = next((i for i, w in enumerate(words) if w.startswith(_REQ_OPTIONS)), len(words))
    spec, options = " ".join(words[:cut]), words[cut:]
    try:
        req = Requirement(spec)
    except InvalidRequirement as exc:
        raise UsageError(f"{where}: cannot parse requirement {spec!r}: {exc}") from None
    out.requirements.append(req)
    if any(o.startswith("--hash") for o in options):
        out.hashed.append(req.name)
