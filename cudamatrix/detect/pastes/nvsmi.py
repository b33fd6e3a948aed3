"""nvidia-smi in a paste: the table of every driver era, ``-q``, ``--query-gpu`` CSV, ``--version``, ``-L``
and its error messages (the parsers live in :mod:`cudamatrix.detect.smi`)."""
from __future__ import annotations

import re

from cudamatrix.detect import smi
from cudamatrix.detect.pastes.merge import merge_driver, merge_gpus
from cudamatrix.detect.text import Paste
from cudamatrix.models import Driver, Environment, Note

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
    """A query's command or header line and the comma-separated rows that follow it."""
    out: list[int] = []
    lines = paste.lines
    for i in paste.having(*_QUERY_HEADS):
        if out and i <= out[-1]:
            continue
        out.append(i)
        j = i + 1
        while j < len(lines) and ("," in lines[j] or not lines[j].strip() and j + 1 < len(lines)
                                  and "," in lines[j + 1]):
            out.append(j)
            j += 1
    return out


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
          "nvidia-smi --query-gpu": (",",), "nvidia-smi --version": ("NVML version", "NVIDIA-SMI version"),
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
    # an error message stands alone or below a table (parse_table has merged its status already)
    hint = ("nvidia-smi", "NVML", "NVIDIA", "No devices were found", "GPU is lost")
    err = smi.parse_error(text) if any(h in text for h in hint) else None
    if err:
        found = True
        lines = paste.lines
        libs = [i for i in paste.having("NVML library version:") if lines[i].startswith("NVML library version:")]
        library = lines[libs[0]].split(":", 1)[1].strip() if libs else None
        merge_driver(env, Driver(status=err[0], error=err[1], source="nvidia-smi",
                                 library_version=library if smi._version(library) else None))
        for i in sorted(set(paste.having(err[1][:40])) | set(libs)):
            paste.claim(i, "nvidia-smi")
    return found
