"""nvidia-smi: run it (the last step of the driver cascade) and read its outputs.

Parsers are pure and read every generation seen in bug reports: the old table without
"CUDA Version" (<= 410), the 418-575 table, the 580+ table and the 610 "KMD / CUDA UMD" header,
``-q``, ``--query-gpu ... --format=csv`` with or without header and units, and its error messages.
"""
from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field

from cudamatrix import proc
from cudamatrix.models import Driver, GpuInfo, GpuProcess
from cudamatrix.detect.text import clean

QUERY_FIELDS = ["index", "name", "driver_version", "memory.total", "memory.used", "compute_cap",
                "uuid", "pci.bus_id", "mig.mode.current"]


@dataclass
class SmiReading:
    """What one nvidia-smi text said. ``notes`` are the things it could not read."""

    driver: Driver = field(default_factory=Driver)
    gpus: list[GpuInfo] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    found: bool = False  # the text was recognisably nvidia-smi output


# --- error messages ------------------------------------------------------------------------------

# (pattern, status); the message itself is kept as Driver.error
_ERRORS: list[tuple[re.Pattern, str]] = [
    (re.compile(r"Failed to initialize NVML: Driver/library version mismatch.*"), "mismatch"),
    (re.compile(r"NVML library version: [\d.]+.*"), "mismatch"),
    (re.compile(r"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.*"), "absent"),
    (re.compile(r"NVIDIA-SMI couldn't find libnvidia-ml\.so library.*"), "absent"),
    (re.compile(r"(?:bash: |zsh: |sh: \d+: )?nvidia-smi(?:\.exe)?: (?:command )?not found"), "absent"),
    (re.compile(r"'nvidia-smi' is not recognized as an internal or external command.*"), "absent"),
    (re.compile(r"No devices were found"), "no_device"),
    (re.compile(r"Unable to determine the device handle for GPU[^\n]*"), "error"),
    (re.compile(r"Failed to initialize NVML: (?:Unknown Error|GPU access blocked by the operating system"
                r"|Insufficient Permissions|[^\n]+)"), "error"),
    (re.compile(r"GPU is lost\.[^\n]*|Unable to determine the number of GPUs"), "error"),
]


def parse_error(text: str) -> tuple[str, str] | None:
    """Recognise an nvidia-smi failure message. Returns (status, message) or None."""
    for pattern, status in _ERRORS:
        m = pattern.search(text)
        if m:
            return status, m.group(0).strip()
    return None


# --- the table -----------------------------------------------------------------------------------

_HEADER = re.compile(r"NVIDIA-SMI\s+(?P<smi>[\w.]+)")
_DRIVER = re.compile(r"(?:Driver|KMD) Version:\s*(?P<v>[\w.!/]+)")
_CUDA = re.compile(r"CUDA(?: UMD)? Version:\s*(?P<v>[\w.!/]+)")
_GPU_ROW = re.compile(
    r"^\|\s*(?P<index>\d+)\s+(?P<name>.+?)\s+(?P<persist>On|Off|WDDM|TCC|N/A|ERR!)\s*\|"
    r"\s*(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d|N/A|ERR!)\s")
_MEM = re.compile(r"(?P<used>\d+|ERR!|N/A)\s*MiB\s*/\s*(?P<total>\d+|ERR!|N/A)\s*MiB")
_PROC_ROW = re.compile(
    r"^\|\s*(?P<gpu>\d+)\s+(?:(?:N/A|\d+)\s+(?:N/A|\d+)\s+)?(?P<pid>\d+)\s+(?P<type>[CGM+]+)\s+"
    r"(?P<name>.*?)\s+(?P<mem>\d+MiB|N/A)\s*\|\s*$")


def _num(value: str | None) -> int | None:
    if value is None:
        return None
    m = re.match(r"\s*(\d+)", value)
    return int(m.group(1)) if m else None


def _version(value: str | None) -> str | None:
    if value and re.fullmatch(r"\d+(?:\.\d+)+", value):
        return value
    return None


def parse_table(text: str) -> SmiReading:
    """Read the default ``nvidia-smi`` table (any driver generation, pasted or truncated)."""
    text = clean(text)
    out = SmiReading()
    lines = text.split("\n")
    gpu: GpuInfo | None = None
    row_of_gpu = 0
    in_procs = False
    for line in lines:
        if "NVIDIA-SMI" in line and _HEADER.search(line) and "|" in line:
            out.found = True
            d = _DRIVER.search(line)
            if d:
                out.driver.version = _version(d.group("v"))
                if "KMD Version" in line:
                    out.driver.kernel_module_version = out.driver.version
                smi_version = _HEADER.search(line).group("smi")
                if _version(smi_version) and smi_version != out.driver.version:
                    out.driver.library_version = smi_version  # user-space tools vs driver (WSL shows both)
            c = _CUDA.search(line)
            if c:
                out.driver.cuda_version = _version(c.group("v"))
                if "ERR!" in c.group("v"):
                    out.driver.status = "error"
                    out.driver.error = "nvidia-smi shows CUDA Version: ERR!"
                    out.notes.append("the driver could not report its CUDA version (CUDA Version: ERR!)")
            out.driver.source = "nvidia-smi"
            continue
        if re.search(r"\|\s*Processes:", line):
            in_procs = True
            gpu = None
            continue
        if "MIG devices:" in line:
            gpu = None
            in_procs = False
            continue
        if in_procs:
            p = _PROC_ROW.match(line)
            if p:
                index = int(p.group("gpu"))
                target = next((g for g in out.gpus if g.index == index), None)
                if target is not None:
                    target.processes.append(GpuProcess(pid=int(p.group("pid")), name=p.group("name").strip(),
                                                       used_memory_mib=_num(p.group("mem"))))
            continue
        m = _GPU_ROW.match(line)
        if m:
            out.found = True
            gpu = GpuInfo(index=int(m.group("index")), name=m.group("name").strip(), source="nvidia-smi")
            bus = m.group("bus")
            gpu.pci_bus_id = bus if ":" in bus else None
            if "ERR!" in line:
                out.driver.status = "error"
                out.driver.error = out.driver.error or f"GPU {gpu.index} shows ERR!"
            out.gpus.append(gpu)
            row_of_gpu = 1
            continue
        if gpu is not None and line.startswith("|") and row_of_gpu:
            row_of_gpu += 1
            mem = _MEM.search(line)
            if row_of_gpu == 2 and mem:
                gpu.memory_used_mib = _num(mem.group("used"))
                gpu.memory_total_mib = _num(mem.group("total"))
                if "ERR!" in line:
                    out.driver.status = "error"
                    out.driver.error = out.driver.error or f"GPU {gpu.index} shows ERR!"
            elif row_of_gpu == 3:
                cells = [c.strip() for c in line.strip().strip("|").split("|")]
                if cells and cells[-1] in ("Enabled", "Disabled"):
                    gpu.mig_mode = cells[-1]
            continue
        if line.startswith("+") or line.startswith("|="):
            row_of_gpu = 0 if line.startswith("+") else row_of_gpu
    if out.found:
        if out.driver.version is None:
            out.notes.append("nvidia-smi table without a readable driver version (truncated paste?)")
        if out.driver.status == "unknown":
            out.driver.status = "ok" if out.gpus else ("no_device" if out.driver.version and
                                                        _table_complete(lines) else "unknown")
    err = parse_error(text)
    if err and out.driver.status in ("unknown", "ok") and not out.gpus:
        out.found = True
        out.driver.status, out.driver.error = err
        out.driver.source = out.driver.source or "nvidia-smi"
    elif err and err[0] == "error":
        out.driver.status, out.driver.error = err
    return out


def _table_complete(lines: list[str]) -> bool:
    return any("Processes:" in ln for ln in lines)


# --- nvidia-smi -q -------------------------------------------------------------------------------

_KV = re.compile(r"^(?P<indent>\s*)(?P<key>[^:]+?)\s*:\s*(?P<value>.*?)\s*$")


def parse_q(text: str) -> SmiReading:
    """Read ``nvidia-smi -q`` (the "NVSMI LOG"): driver, CUDA version, and per GPU name, memory, MIG mode."""
    text = clean(text)
    out = SmiReading()
    gpu: GpuInfo | None = None
    section: list[tuple[int, str]] = []  # (indent, title) of enclosing blocks
    for raw in text.split("\n"):
        if not raw.strip():
            continue
        indent = len(raw) - len(raw.lstrip())
        while section and section[-1][0] >= indent:
            section.pop()
        kv = _KV.match(raw)
        if re.match(r"^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d\s*$", raw.strip()) and indent == 0:
            gpu = GpuInfo(index=len(out.gpus), pci_bus_id=raw.strip()[4:], source="nvidia-smi -q")
            out.gpus.append(gpu)
            out.found = True
            section = []
            continue
        if not kv:
            section.append((indent, raw.strip()))
            continue
        key, value = kv.group("key").strip(), kv.group("value")
        where = section[-1][1] if section else ""
        if key in ("Driver Version", "KMD Version") and indent == 0:
            out.driver.version = _version(value)
            out.driver.source = "nvidia-smi -q"
            out.found = True
        elif key in ("CUDA Version", "CUDA UMD Version") and indent == 0:
            out.driver.cuda_version = _version(value)
            if value == "ERR!":
                out.driver.status, out.driver.error = "error", "CUDA Version: ERR!"
        elif key == "Attached GPUs":
            out.found = True
        elif gpu is None:
            continue
        elif key == "Product Name":
            gpu.name = value
        elif key == "GPU UUID":
            gpu.uuid = value
        elif key == "Minor Number" and value.isdigit():
            pass
        elif where == "FB Memory Usage" and key == "Total":
            gpu.memory_total_mib = _num(value)
        elif where == "FB Memory Usage" and key == "Used":
            gpu.memory_used_mib = _num(value)
        elif where == "MIG Mode" and key == "Current" and value in ("Enabled", "Disabled"):
            gpu.mig_mode = value
        elif key in ("Compute Capability", "CUDA Compute Capability") and _version(value):
            gpu.compute_capability = value
        elif value == "ERR!" and key in ("Product Name", "GPU UUID", "Total"):
            out.driver.status, out.driver.error = "error", f"{key}: ERR!"
    if out.found and out.driver.status == "unknown":
        out.driver.status = "ok" if out.gpus else "unknown"
    return out


# --- --query-gpu ... --format=csv ----------------------------------------------------------------

_FIELD_ALIASES = {"gpu_name": "name", "compute_capability": "compute_cap", "pci.bus_id": "pci.bus_id",
                  "gpu_uuid": "uuid", "mig.mode.current": "mig.mode.current"}
_KNOWN_FIELDS = set(QUERY_FIELDS) | {"utilization.gpu", "temperature.gpu", "compute_mode", "memory.free",
                                     "power.draw", "gpu_bus_id", "count", "driver_model.current", "pstate",
                                     "clocks.sm", "fan.speed", "serial", "vbios_version", "persistence_mode"}
_QUERY_CMD = re.compile(r"--query-gpu[= ](?P<fields>[\w.,]+)")


def _strip_prompt(line: str) -> str:
    line = line.strip()
    line = re.sub(r"^#\s?", "", line)
    return line.strip()


def _is_header(cells: list[str]) -> bool:
    names = [re.sub(r"\s*\[.*\]$", "", c).strip() for c in cells]
    return bool(names) and all(n in _KNOWN_FIELDS or n in _FIELD_ALIASES or re.fullmatch(r"[a-z_]+(\.[a-z_]+)*", n)
                               for n in names) and any(n in _KNOWN_FIELDS for n in names)


def parse_query(text: str, fields: list[str] | None = None) -> SmiReading:
    """Read ``--query-gpu=FIELDS --format=csv[,noheader][,nounits]`` output; several blocks may follow each other.

    ``fields`` names the columns when the text has no header and no command line.
    """
    text = clean(text)
    out = SmiReading()
    current = list(fields) if fields else None
    row = 0
    for raw in text.split("\n"):
        line = _strip_prompt(raw)
        if not line:
            continue
        cmd = _QUERY_CMD.search(line)
        if cmd:
            current = [f for f in cmd.group("fields").split(",") if f]
            row = 0
            continue
        if line.startswith("$") or "nvidia-smi" in line:
            continue
        cells = [c.strip() for c in line.split(",")]
        if _is_header(cells):
            current = [_FIELD_ALIASES.get(n, n) for n in (re.sub(r"\s*\[.*\]$", "", c).strip() for c in cells)]
            row = 0
            continue
        if current is None or len(cells) != len(current):
            continue
        out.found = True
        values = dict(zip(current, cells))
        index = _num(values.get("index")) if values.get("index", "").strip().isdigit() else row
        gpu = next((g for g in out.gpus if g.index == index), None)
        if gpu is None:
            gpu = GpuInfo(index=index, source="nvidia-smi --query-gpu")
            out.gpus.append(gpu)
        row += 1
        for key, value in values.items():
            if value in ("[N/A]", "N/A", "[Not Supported]", ""):
                continue
            if value.startswith("ERR!") or value == "[Unknown Error]":
                out.driver.status, out.driver.error = "error", f"{key}: {value}"
                continue
            if key == "name":
                gpu.name = value
            elif key == "driver_version":
                out.driver.version = _version(value) or out.driver.version
                out.driver.source = "nvidia-smi --query-gpu"
            elif key == "memory.total":
                gpu.memory_total_mib = _num(value)
            elif key == "memory.used":
                gpu.memory_used_mib = _num(value)
            elif key == "compute_cap" and _version(value):
                gpu.compute_capability = value
            elif key == "uuid":
                gpu.uuid = value
            elif key in ("pci.bus_id", "gpu_bus_id"):
                gpu.pci_bus_id = value
            elif key == "mig.mode.current" and value in ("Enabled", "Disabled"):
                gpu.mig_mode = value
    if out.found and out.driver.status == "unknown":
        out.driver.status = "ok"
    return out


# --- the live probe ------------------------------------------------------------------------------

def probe(timeout: float, env: dict[str, str] | None = None) -> SmiReading:
    """Run nvidia-smi: the table (driver, CUDA version, GPUs, processes), then ``--query-gpu`` for the
    compute capabilities. Never raises; what failed is in ``notes`` and ``driver.error``."""
    exe = shutil.which("nvidia-smi", path=(env or {}).get("PATH") if env else None)
    out = SmiReading()
    if exe is None:
        out.notes.append("nvidia-smi not found on PATH")
        return out
    table = proc.run([exe], timeout=timeout, env=env)
    if table.timed_out:
        out.notes.append(f"nvidia-smi {table.error}: the driver may be hung (a GPU stuck in a bad state?)")
        out.driver.status, out.driver.error = "error", f"nvidia-smi {table.error}"
        return out
    text = table.stdout + ("\n" + table.stderr if table.stderr else "")
    out = parse_table(text)
    if not out.found:
        out.notes.append(f"nvidia-smi exited {table.returncode} without a readable table: "
                         f"{text.strip()[:200] or '(no output)'}")
        return out
    if out.gpus:
        query = proc.run([exe, "--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv,noheader,nounits"],
                         timeout=timeout, env=env)
        if query.ok:
            q = parse_query(query.stdout, QUERY_FIELDS)
            for g in q.gpus:
                t = next((x for x in out.gpus if x.index == g.index), None)
                if t is not None:
                    t.compute_capability = g.compute_capability or t.compute_capability
                    t.uuid = g.uuid or t.uuid
                    t.name = g.name or t.name  # the table truncates long names
                    t.memory_total_mib = g.memory_total_mib or t.memory_total_mib
                    t.mig_mode = g.mig_mode or t.mig_mode
        else:
            out.notes.append("nvidia-smi --query-gpu failed (driver older than the compute_cap field?): "
                             + (query.error or query.stdout.strip()[:200]))
    return out
