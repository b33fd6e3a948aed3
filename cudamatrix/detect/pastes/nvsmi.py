"""nvidia-smi in a paste: the table of every driver era, ``-q``, ``--query-gpu`` CSV, ``--version``, ``-L``
and its error messages (the parsers live in :mod:`cudamatrix.detect.smi`)."""
from __future__ import annotations

from cudamatrix.models import Driver, Environment, Note
from cudamatrix.detect import smi
from cudamatrix.detect.pastes.merge import merge_driver, merge_gpus
from cudamatrix.detect.text import Paste

_PARSERS = (("nvidia-smi", smi.parse_table), ("nvidia-smi -q", smi.parse_q), ("nvidia-smi --query-gpu", None),
            ("nvidia-smi --version", smi.parse_version), ("nvidia-smi -L", smi.parse_list))


def read(paste: Paste, env: Environment) -> bool:
    """Every nvidia-smi output in the paste."""
    found = False
    text = paste.text
    for kind, parser in _PARSERS:
        if kind == "nvidia-smi" and "|" not in text or kind == "nvidia-smi -q" and "Product Name" not in text \
                and "NVSMI LOG" not in text or kind == "nvidia-smi --version" and "NVML version" not in text \
                and "DRIVER version" not in text or kind == "nvidia-smi -L" and "(UUID:" not in text \
                or kind == "nvidia-smi --query-gpu" and "," not in text:
            continue
        used: set[int] = set()
        if parser is None:
            reading = smi.parse_query(paste.lines, used=used)
        else:
            reading = parser(paste.lines, used=used)
        if not reading.found:
            continue
        found = True
        for i in sorted(used):
            paste.claim(i, kind)
        merge_driver(env, reading.driver)
        merge_gpus(env, reading.gpus)
        env.notes += [Note("report:nvidia-smi", n, "warning") for n in reading.notes]
    if not found:
        err = smi.parse_error(text) if "nvidia-smi" in text or "NVML" in text or "NVIDIA" in text or \
            "No devices were found" in text or "GPU is lost" in text else None
        if err:
            found = True
            merge_driver(env, Driver(status=err[0], error=err[1], source="nvidia-smi"))
            for i, line in enumerate(paste.lines):
                if err[1][:40] in line:
                    paste.claim(i, "nvidia-smi (error)")
    return found
