"""nvidia-smi's other text formats, as users paste them: ``-q`` (the "NVSMI LOG"), ``-q -x`` (XML), ``--version``
and ``-L``. Pure parsers; str methods and bounded patterns only, so a hostile line costs linear time."""
from __future__ import annotations

from cudamatrix.detect.smi_base import BUS, SmiReading
from cudamatrix.detect.smi_base import lines_of as _lines
from cudamatrix.detect.smi_base import num as _num
from cudamatrix.detect.smi_base import version as _version
from cudamatrix.models import GpuInfo

_BUS = BUS


# --- nvidia-smi -q -------------------------------------------------------------------------------

def _key_value(line: str) -> tuple[str, str] | None:
    key, colon, value = line.partition(":")
    if not colon or not key.strip() or len(key) > 120:
        return None
    return key.strip(), value.strip()


def parse_q(text: str | list[str], used: set[int] | None = None, only: list[int] | None = None) -> SmiReading:
    """Read ``nvidia-smi -q`` (the "NVSMI LOG"): driver, CUDA version, and per GPU name, memory, MIG mode.

    Nesting is read from indentation relative to the block's own left edge (a paste may be indented)."""
    lines = _lines(text)
    indices = range(len(lines)) if only is None else only
    log = _QLog(used if used is not None else set())
    if not any(("Product Name" in lines[i] or "NVSMI LOG" in lines[i] or "Attached GPUs" in lines[i]) for i in indices):
        return log.out
    for i in indices:
        if lines[i].strip():
            log.feed(i, lines[i])
    out = log.out
    if out.found and out.driver.status == "unknown":
        out.driver.status = "ok" if out.gpus else "unknown"
    return out


class _QLog:
    """One pass over a ``-q`` log: the GPU whose block the line is in, and the titles of the enclosing blocks."""

    def __init__(self, used: set[int]) -> None:
        self.out, self.used = SmiReading(), used
        self.gpu: GpuInfo | None = None
        self.gpu_indent = 0
        self.section: list[tuple[int, str]] = []  # (indent, title) of enclosing blocks

    def feed(self, i: int, raw: str) -> None:
        """Read non-blank line ``i``."""
        body = raw.strip()
        indent = len(raw) - len(raw.lstrip())
        while self.section and self.section[-1][0] >= indent:
            self.section.pop()
        if body.startswith("GPU ") and _BUS.fullmatch(body[4:40]) and len(body) < 40:
            self.gpu = GpuInfo(index=len(self.out.gpus), pci_bus_id=body[4:], source="nvidia-smi -q")
            self.gpu_indent = indent
            self.out.gpus.append(self.gpu)
            self.out.found = True
            self.section = []
            self.used.add(i)
        elif "NVSMI LOG" in body or body.startswith("Timestamp"):
            self.used.add(i)
        elif (kv := _key_value(body)) is None:
            self.section.append((indent, body))
            if self.gpu is not None and indent > self.gpu_indent:
                self.used.add(i)
        elif self._value(kv[0], kv[1], indent) and self.out.found:
            self.used.add(i)

    def _value(self, key: str, value: str, indent: int) -> bool:
        """A "key : value" line: a top-level driver fact, or a fact of the GPU whose block it is in. False for a
        top-level line that is neither (not part of what was read)."""
        out = self.out
        top = self.gpu is None or indent <= self.gpu_indent
        if key in ("Driver Version", "KMD Version") and top:
            out.driver.version = _version(value)
            out.driver.source = "nvidia-smi -q"
            out.found = True
        elif key in ("CUDA Version", "CUDA UMD Version") and top:
            out.driver.cuda_version = _version(value)
            if value == "ERR!":
                out.driver.status, out.driver.error = "error", "CUDA Version: ERR!"
        elif key == "Attached GPUs":
            out.found = True
        elif self.gpu is not None and indent > self.gpu_indent:
            self._gpu_value(self.gpu, key, value)
        else:
            return False
        return True

    def _gpu_value(self, gpu: GpuInfo, key: str, value: str) -> None:
        where = self.section[-1][1] if self.section else ""
        if key == "Product Name":
            gpu.name = value
        elif key == "GPU UUID":
            gpu.uuid = value
        elif where == "FB Memory Usage" and key in ("Total", "Used"):
            setattr(gpu, "memory_total_mib" if key == "Total" else "memory_used_mib", _num(value))
        elif where == "MIG Mode" and key == "Current" and value in ("Enabled", "Disabled"):
            gpu.mig_mode = value
        elif key in ("Compute Capability", "CUDA Compute Capability") and _version(value):
            gpu.compute_capability = value
        if value == "ERR!" and key in ("Product Name", "GPU UUID", "Total"):
            self.out.driver.status, self.out.driver.error = "error", f"{key}: ERR!"


# --- nvidia-smi --version, -L ---------------------------------------------------------------------

def parse_version(text: str | list[str], used: set[int] | None = None, only: list[int] | None = None) -> SmiReading:
    """``nvidia-smi --version``: "NVIDIA-SMI version : 560.35.03", "NVML version", "DRIVER version", "CUDA Version";
    drivers from 610 on say "KMD version" and "CUDA UMD version" (the older two then read "Deprecated ...")."""
    out = SmiReading()
    used = used if used is not None else set()
    lines = _lines(text)
    for i in (range(len(lines)) if only is None else only):
        raw = lines[i]
        kv = _key_value(raw.strip()) if "version" in raw.lower() else None
        if kv is not None and _version_line(out, kv[0], kv[1].split()[0] if kv[1] else ""):
            used.add(i)
    if out.found and out.driver.library_version == out.driver.version:
        out.driver.library_version = None  # the tools and the driver agree: nothing to say
    if out.found and out.driver.version is None:
        out.notes.append("nvidia-smi --version without a DRIVER or KMD version line")
    return out


def _version_line(out: SmiReading, label: str, value: str) -> bool:
    """One "label : value" line of ``--version``; False for a line that is none of its."""
    key = " ".join(label.lower().split())
    if key in ("nvidia-smi version", "nvml version"):
        out.found = out.found or bool(_version(value))
        if key == "nvidia-smi version" and _version(value):
            out.driver.library_version = value
    elif key in ("driver version", "kmd version") and label.startswith(("DRIVER", "KMD version")):  # not -q's
        if _version(value) and (key == "kmd version" or out.driver.version is None):
            out.driver.version, out.driver.source = value, "nvidia-smi --version"
        out.found = out.found or bool(_version(value)) or value == "Deprecated,"
    elif key in ("cuda version", "cuda umd version") and (out.found or out.driver.version):
        if _version(value) and (key == "cuda umd version" or out.driver.cuda_version is None):
            out.driver.cuda_version = value
    else:
        return False
    return True


def parse_list(text: str | list[str], used: set[int] | None = None, only: list[int] | None = None) -> SmiReading:
    """``nvidia-smi -L``: "GPU 0: Tesla T4 (UUID: GPU-...)" (collect_env prints the same lines)."""
    out = SmiReading()
    used = used if used is not None else set()
    lines = _lines(text)
    for i in (range(len(lines)) if only is None else only):
        g = gpu_line(lines[i])
        if g is not None and g.uuid:
            out.gpus.append(g)
            out.found = True
            used.add(i)
    return out


def gpu_line(line: str) -> GpuInfo | None:
    """"GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-...)" (full-width colons too) -> a GpuInfo; else None."""
    body = line.strip().replace("\uff1a", ":")
    if not body.startswith("GPU ") or len(body) > 400:
        return None
    head, colon, name = body[4:].partition(":")
    if not colon or not head.strip().isdigit():
        return None
    name, uuid = name.strip(), None
    at = name.rfind("(UUID:")
    if at >= 0:  # the closing parenthesis is sometimes lost in the paste
        name, uuid = name[:at].strip(), name[at + 6:].rstrip(")").strip()
    if not name:
        return None
    return GpuInfo(index=int(head), name=name, uuid=uuid, source="report")


# --- nvidia-smi -q -x ---------------------------------------------------------------------------

_XML_TAGS = {"driver_version", "cuda_version", "product_name", "uuid", "minor_number"}


def parse_xml(text: str | list[str], used: set[int] | None = None, only: list[int] | None = None) -> SmiReading:
    """``nvidia-smi -q -x``: one element per line (``<driver_version>430.64</driver_version>``), cut with str methods."""
    out = SmiReading()
    used = used if used is not None else set()
    gpu: GpuInfo | None = None
    inside = False
    lines = _lines(text)
    prev = -2
    for i in (range(len(lines)) if only is None else only):
        body = lines[i].strip()
        if i != prev + 1:
            inside = inside and all(not lines[j].strip() for j in range(prev + 1, i))
        prev = i
        if body.startswith(("<?xml", "<!DOCTYPE nvidia_smi_log", "<nvidia_smi_log")):
            inside = out.found = True
            used.add(i)
        elif not inside or not body.startswith("<"):
            inside = inside and not body
        else:
            used.add(i)
            gpu = _xml_element(out, gpu, body)
    if out.found and out.driver.status == "unknown":
        out.driver.status = "ok" if out.gpus else "unknown"
    return out


def _xml_element(out: SmiReading, gpu: GpuInfo | None, body: str) -> GpuInfo | None:
    """One element line inside the log; returns the GPU whose element the next lines are in."""
    if body.startswith("<gpu id="):
        gpu = GpuInfo(index=len(out.gpus), pci_bus_id=body[9:].split('"')[0] or None, source="nvidia-smi -q -x")
        out.gpus.append(gpu)
        return gpu
    tag, close, rest = body[1:].partition(">")
    value = rest.partition("</")[0].strip()
    if not close or tag not in _XML_TAGS or not value:
        return gpu
    if tag == "driver_version" and _version(value):
        out.driver.version, out.driver.source = value, "nvidia-smi -q -x"
    elif tag == "cuda_version" and _version(value):
        out.driver.cuda_version = value
    elif gpu is not None and tag in ("product_name", "uuid"):
        setattr(gpu, "name" if tag == "product_name" else "uuid", value)
    return gpu
