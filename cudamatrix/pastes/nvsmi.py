"""nvidia-smi in a paste: the table of every driver era, ``-q``, ``--query-gpu`` CSV, ``--version``, ``-L``
and its error messages (the parsers live in :mod:`cudamatrix.detect.smi`)."""
from __future__ import annotations

import re

from cudamatrix.detect import smi
from cudamatrix.detect.text import Paste
from cudamatrix.models import Driver, Environment, Note
from cudamatrix.pastes.merge import merge_driver, merge_gpus

# the lines each parser needs to see, found with str methods (linear, and cheap on a long paste)
_CANDIDATES = {
    "nvidia-smi": lambda p: sorted(set(_table_lines(p)) | set(p.having("NVIDIA-SMI"))),
    "nvidia-smi -q": lambda p: _q_runs(p),
    "nvidia-smi --version": lambda p: p.having("NVIDIA-SMI version", "NVML version", "DRIVER version", "CUDA Version",
                                               "KMD version", "CUDA UMD version"),
    "nvidia-smi -L": lambda p: p.having("(UUID:"),
    "nvidia-smi -q -x": lambda p: p.having("<"),
}
_EDGE = re.compile(r"[ \t]*[|+]")
_Q_STARTS = ("GPU ", "Driver Version", "KMD Version", "CUDA", "Attached GPUs", "Timestamp", "==")
_QUERY_HEADS = ("--query-gpu", "memory.", "driver_version", "name,", ", name")  # a header names one of these


def _query_lines(paste: Paste) -> list[int]:
    """A query's command or header line and the rows that follow it: comma-separated, or single values when the
    query asks for one field. The rows end at a blank line, a command, or a line of another kind; between the
    command and its first row may stand a blank line or a short label ("nvidia-smi output:")."""
    out: list[int] = []
    lines = paste.lines
    for i in paste.having(*_QUERY_HEADS):
        if out and i <= out[-1]:
            continue
        out.append(i)
        cmd = smi.QUERY_CMD.search(lines[i])  # the pattern begins with "--query-gpu": no other line matches
        single = cmd is not None and "," not in cmd.group("fields")
        j = _first_row(lines, i, single)
        while j < len(lines) and j not in paste.commands and _row_like(lines, j, single):
            out.append(j)
            j += 1
    return out


def _row_like(lines: list[str], j: int, single: bool) -> bool:
    """Line ``j`` can be a row (or the header) of a query's output; an nvidia-smi command never is (its
    ``--format=csv,noheader`` has a comma too: typed without a prompt, it starts a query of its own)."""
    line = lines[j]
    if "nvidia-smi" in line:
        return False
    if "," in line:
        return True
    if not line.strip():
        return j + 1 < len(lines) and "," in lines[j + 1]
    return single


def _first_row(lines: list[str], i: int, single: bool) -> int:
    """Where the rows after line ``i`` start: right after it, or after blank lines and a label line ending with
    ":" when the rows (comma-separated, or the values of a one-field query) come within three lines."""
    for j in range(i + 1, min(i + 4, len(lines))):
        body = lines[j].strip()
        if body and not body.endswith(":"):
            return j if _row_like(lines, j, single) else i + 1
    return i + 1


def _table_lines(paste: Paste) -> list[int]:
    """Lines that start, after blanks, with the "|" or "+" of a table."""
    return paste.where(_EDGE)


def _q_runs(paste: Paste) -> list[int]:
    """The lines of each ``-q`` block: grown from its marker lines up and down through indented, blank and
    top-level ``-q`` lines (two blank lines in a row end it), so a long paste costs only its ``-q`` blocks."""
    lines = paste.lines
    markers = paste.having("NVSMI LOG", "Attached GPUs", "Product Name")
    covered: set[int] = set()

    def q_like(i: int) -> bool:
        line = lines[i]
        return not line.strip() or line[:1] in (" ", "\t") or line.startswith(_Q_STARTS)

    for m in markers:
        if m in covered:
            continue
        start = end = m
        while start > 0 and q_like(start - 1) and (lines[start - 1].strip() or lines[start].strip()):
            start -= 1
        while end + 1 < len(lines) and q_like(end + 1) and (lines[end + 1].strip() or lines[end].strip()):
            end += 1
        covered.update(range(start, end + 1))
    return sorted(i for i in covered if lines[i].strip())


_PARSERS = (("nvidia-smi", smi.parse_table), ("nvidia-smi -q", smi.parse_q), ("nvidia-smi --query-gpu", None),
            ("nvidia-smi --version", smi.parse_version), ("nvidia-smi -L", smi.parse_list),
            ("nvidia-smi -q -x", smi.parse_xml))
# a parser runs only when the paste holds one of its words (one C-level search each)
_HINTS = {"nvidia-smi": ("|", "NVIDIA-SMI"), "nvidia-smi -q": ("Product Name", "NVSMI LOG"),
          "nvidia-smi --query-gpu": (",", "--query-gpu"), "nvidia-smi --version": ("NVML version", "NVIDIA-SMI version"),
          "nvidia-smi -L": ("(UUID:",), "nvidia-smi -q -x": ("<nvidia_smi_log", "<?xml")}


def read(paste: Paste, env: Environment) -> bool:
    """Every nvidia-smi output in the paste."""
    found = False
    text = paste.text
    for kind, parser in _PARSERS:
        if not any(hint in text for hint in _HINTS[kind]):
            continue
        used: set[int] = set()
        if parser is None:
            reading = smi.parse_query(paste.lines, used=used, only=_query_lines(paste))
        else:
            reading = parser(paste.lines, used=used, only=_CANDIDATES[kind](paste))
        if not reading.found:
            continue
        found = True
        paste.claim_all(sorted(used), kind)
        merge_driver(env, reading.driver)
        merge_gpus(env, reading.gpus)
        env.notes += [Note("report:nvidia-smi", n, "warning") for n in reading.notes]
    found |= _read_error(paste, env)
    found |= _read_invalid_field(paste, env)
    return found | _read_banner(paste, env)


_INVALID = " is not a valid field to query"


def _read_invalid_field(paste: Paste, env: Environment) -> bool:
    """``nvidia-smi --query-gpu=compute_cap`` on an nvidia-smi that predates the field answers 'Field "compute_cap"
    is not a valid field to query.': the error is the fact (this nvidia-smi has no such field; its
    ``--help-query-gpu`` lists the ones it has), noted with the command that asked."""
    found = False
    lines = paste.lines
    for i in paste.having(_INVALID):
        line = lines[i].strip()
        at = line.find(_INVALID)
        begin = max(0, at - 80)
        start = line.rfind("Field ", begin, at)
        quoted = line[start + 6:at].replace('\\"', '"') if start >= 0 else ""  # a log quotes it: \"device_minor\"
        before = line[:start].rstrip()  # nvidia-smi's own line, or a log's quoted stdout; not prose around it
        if len(quoted) < 3 or not (quoted[0] == quoted[-1] == '"') or (before and not before.endswith("'")):
            continue
        field = quoted[1:-1]
        env.notes.append(Note("report:nvidia-smi", f'nvidia-smi refused the query field "{field}": this nvidia-smi '
                              "has no such field (nvidia-smi --help-query-gpu lists those it has)", "warning"))
        paste.claim(i, "nvidia-smi --query-gpu")
        if i > 0 and "--query-gpu" in lines[i - 1]:
            paste.claim(i - 1, "nvidia-smi --query-gpu")
        found = True
    return found


_LIBRARY = "NVML library version:"  # the line nvidia-smi adds below a version mismatch


def _read_error(paste: Paste, env: Environment) -> bool:
    """An error message, alone or below a table (parse_table has merged its status already)."""
    text = paste.text
    hint = ("nvidia-smi", "NVML", "NVIDIA", "No devices were found", "GPU is lost", "Unable to determine")
    err = smi.parse_error(text) if any(h in text for h in hint) else None
    if not err:
        return False
    lines = paste.lines
    libs = [i for i in paste.having(_LIBRARY) if lines[i].startswith(_LIBRARY)]
    library = lines[libs[0]][len(_LIBRARY):].strip() if libs else None
    merge_driver(env, Driver(status=err[0], error=err[1], source="nvidia-smi",
                             library_version=library if smi._version(library) else None))
    for i in sorted(set(paste.having(err[1][:40])) | set(libs)):
        paste.claim(i, "nvidia-smi")
    return True


_BANNER = "NVIDIA System Management Interface -- v"


def _read_banner(paste: Paste, env: Environment) -> bool:
    """``nvidia-smi -h`` begins "NVIDIA System Management Interface -- v470.182.03": nvidia-smi's own version,
    which is the driver's (the tools ship with the driver: a kernel module of another version is a mismatch
    that nvidia-smi itself would report)."""
    for i in paste.having(_BANNER):
        line = paste.lines[i]
        words = line[line.find(_BANNER) + len(_BANNER):].split()
        version = words[0].strip("`'\".,") if words else None
        if smi._version(version):
            merge_driver(env, Driver(version=version, source="nvidia-smi -h"))
            env.notes.append(Note("report:nvidia-smi", f"driver {version}: the version nvidia-smi -h prints for "
                                  "itself (it ships with the driver)"))
            paste.claim(i, "nvidia-smi -h")
            return True
    return False
