"""nvidia-smi in a paste: the table of every driver era, ``-q``, ``--query-gpu`` CSV, ``--version``, ``-L``
and its error messages (the parsers live in :mod:`cudamatrix.detect.smi`)."""
from __future__ import annotations

import re

from cudamatrix.models import Driver, Environment, Note
from cudamatrix.detect import smi
from cudamatrix.detect.pastes.merge import merge_driver, merge_gpus
from cudamatrix.detect.text import Paste

# the lines each parser needs to see (anchored or literal patterns: linear); the others are skipped in C
_CANDIDATES = {
    "nvidia-smi": lambda p: sorted(set(p.where(_TABLE_LINE)) | set(p.having("NVIDIA-SMI"))),
    "nvidia-smi -q": lambda p: _q_runs(p),
    "nvidia-smi --version": lambda p: p.having("version", "Version"),
    "nvidia-smi -L": lambda p: p.having("(UUID:"),
    "nvidia-smi -q -x": lambda p: p.where(_XML_LINE),
}
_TABLE_LINE = re.compile(r"[ \t]*[|+]")
_Q_LINE = re.compile(r"[ \t]+[A-Za-z]|GPU [0-9A-Fa-f]|[A-Za-z][^\n:]{0,80}:|=+NVSMI")
_XML_LINE = re.compile(r"[ \t]*<")
_QUERY_FIELDS = re.compile(r"--query-gpu[= ]([\w.,]{1,400})")

_Q_KEYS = ("NVSMI LOG", "Driver Version", "KMD Version", "Attached GPUs", "Product Name")


def _q_runs(paste: Paste) -> list[int]:
    """The lines of the runs of ``-q``-like lines (blank lines allowed inside) that hold a ``-q`` key."""
    out: list[int] = []
    run: list[int] = []
    hit = False
    lines = paste.lines
    for i in paste.where(_Q_LINE) + [len(lines) + 1]:
        end = i > len(lines)
        if run and (end or any(lines[j].strip() for j in range(run[-1] + 1, i))):
            if hit:
                out += run
            run, hit = [], False
        if end:
            break
        run.append(i)
        hit = hit or any(k in lines[i] for k in _Q_KEYS) or lines[i].startswith("GPU ")
    return out


_PARSERS = (("nvidia-smi", smi.parse_table), ("nvidia-smi -q", smi.parse_q), ("nvidia-smi --query-gpu", None),
            ("nvidia-smi --version", smi.parse_version), ("nvidia-smi -L", smi.parse_list),
            ("nvidia-smi -q -x", smi.parse_xml))


def read(paste: Paste, env: Environment) -> bool:
    """Every nvidia-smi output in the paste."""
    found = False
    text = paste.text
    for kind, parser in _PARSERS:
        if kind == "nvidia-smi" and "|" not in text and "NVIDIA-SMI" not in text or kind == "nvidia-smi -q" and "Product Name" not in text \
                and "NVSMI LOG" not in text or kind == "nvidia-smi --version" and "NVML version" not in text \
                and "DRIVER version" not in text or kind == "nvidia-smi -L" and "(UUID:" not in text \
                or kind == "nvidia-smi --query-gpu" and "," not in text \
                or kind == "nvidia-smi -q -x" and "<nvidia_smi_log" not in text and "<?xml" not in text:
            continue
        used: set[int] = set()
        if parser is None:
            single = "--query-gpu" in text and any("," not in f for f in _QUERY_FIELDS.findall(text))
            reading = smi.parse_query(paste.lines, used=used, only=None if single else paste.having(",", "--query-gpu"))
        else:
            reading = parser(paste.lines, used=used, only=_CANDIDATES[kind](paste))
        if not reading.found:
            continue
        found = True
        for i in sorted(used):
            paste.claim(i, kind)
        merge_driver(env, reading.driver)
        merge_gpus(env, reading.gpus)
        env.notes += [Note("report:nvidia-smi", n, "warning") for n in reading.notes]
    # an error message stands alone or below a table (parse_table has merged its status already)
    hint = ("nvidia-smi", "NVML", "NVIDIA", "No devices were found", "GPU is lost")
    err = smi.parse_error(text) if any(h in text for h in hint) else None
    if err:
        found = True
        library = next((line.split(":", 1)[1].strip() for line in paste.lines
                        if line.startswith("NVML library version:")), None)
        merge_driver(env, Driver(status=err[0], error=err[1], source="nvidia-smi",
                                 library_version=library if smi._version(library) else None))
        for i, line in enumerate(paste.lines):
            if err[1][:40] in line or line.startswith("NVML library version:"):
                paste.claim(i, "nvidia-smi")
    return found
