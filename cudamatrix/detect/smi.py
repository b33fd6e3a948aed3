"""nvidia-smi: run it (the last step of the driver cascade) and read its outputs.

Parsers are pure and read every generation seen in bug reports: the old table without
"CUDA Version" (<= 410), the 418-575 table, the 580+ table and the 610 "KMD / CUDA UMD" header,
``--query-gpu ... --format=csv`` with or without header and units, and its error messages here; ``-q``,
``-q -x``, ``--version`` and ``-L`` in :mod:`.smi_formats` (re-exported).
"""
from __future__ import annotations

import re

from cudamatrix import proc
from cudamatrix.detect.smi_base import BUS, SmiReading
from cudamatrix.detect.smi_base import lines_of as _lines
from cudamatrix.detect.smi_base import num as _num
from cudamatrix.detect.smi_base import version as _version
from cudamatrix.detect.smi_formats import gpu_line, parse_list, parse_q, parse_version, parse_xml
from cudamatrix.models import DriverStatus, GpuInfo, GpuProcess
from cudamatrix.safe.text import lazy

__all__ = ["QUERY_FIELDS", "QUERY_CMD", "SmiReading", "gpu_line", "parse_error", "parse_list", "parse_q", "parse_query",
           "parse_table", "parse_version", "parse_xml", "probe"]

QUERY_FIELDS = ["index", "name", "driver_version", "memory.total", "memory.used", "compute_cap",
                "uuid", "pci.bus_id", "mig.mode.current"]


# --- error messages ------------------------------------------------------------------------------

# (pattern, status); the message itself is kept as Driver.error
_ERRORS: list[tuple[re.Pattern, DriverStatus]] = [
    (lazy(r"Failed to initialize NVML: Driver/library version mismatch.*"), "mismatch"),
    (lazy(r"NVML library version: [\d.]+.*"), "mismatch"),
    (lazy(r"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.*"), "absent"),
    (lazy(r"NVIDIA-SMI couldn't find libnvidia-ml\.so library.*"), "absent"),
    (lazy(r"(?:bash: |zsh: |sh: \d+: )?nvidia-smi(?:\.exe)?: (?:command )?not found"), "absent"),
    (lazy(r"'nvidia-smi' is not recognized as an internal or external command.*"), "absent"),
    (lazy(r"No devices were found"), "no_device"),
    (lazy(r"Unable to determine the device handle for GPU[^\n]*"), "error"),
    (lazy(r"Failed to initialize NVML: (?:Unknown Error|GPU access blocked by the operating system"
                r"|Insufficient Permissions|[^\n]+)"), "error"),
    (lazy(r"GPU is lost\.[^\n]*|Unable to determine the number of GPUs"), "error"),
]


def parse_error(text: str) -> tuple[DriverStatus, str] | None:
    """Recognise an nvidia-smi failure message. Returns (status, message) or None."""
    for pattern, status in _ERRORS:
        m = pattern.search(text)
        if m:
            return status, m.group(0).strip()
    return None


# --- the table -----------------------------------------------------------------------------------
# Rows are cut into cells and words with str methods, never matched by a pattern with a lazy ".+?" in front of
# a "\s+": that costs quadratic time on a long hostile line (a 4 KB row took 20 s).

_DIGITS = frozenset("0123456789.")
_HEADER = lazy(r"NVIDIA-SMI\s+(?P<smi>[\w.]+)")
_DRIVER = lazy(r"(?:Driver|KMD) Version:\s*(?P<v>[\w.!/]+)")
_CUDA = lazy(r"CUDA(?: UMD)? Version:\s*(?P<v>[\w.!/]+)")
_BUS = BUS
_MEM = lazy(r"(?P<used>\d{1,9}|ERR!|N/A)MiB/(?P<total>\d{1,9}|ERR!|N/A)MiB")
_PERSISTENCE = ("On", "Off", "WDDM", "TCC", "N/A", "ERR!")
_MASK = frozenset("x*:.")


def _cells(line: str) -> list[str]:
    return line.strip().strip("|").split("|")


def _gpu_row(line: str) -> GpuInfo | None:
    """``|   0  NVIDIA A10G   On  | 00000000:00:1E.0 Off |   0 |`` -> the GPU's index, name and bus id."""
    cells = _cells(line)
    if len(cells) < 2:  # a paste cut after the bus id still names the GPU
        return None
    words, bus = cells[0].split(), cells[1].split()
    if len(words) < 3 or not words[0].isdigit() or words[-1] not in _PERSISTENCE or not bus:
        return None
    masked = len(bus[0]) >= 8 and set(bus[0].lower()) <= _MASK  # "xxxxxxxxxxxxxxxx": a bus id hidden in a paste
    if bus[0] not in ("N/A", "ERR!") and not masked and not _BUS.fullmatch(bus[0][:20]):
        return None
    return GpuInfo(index=int(words[0]), name=" ".join(words[1:-1]),
                   pci_bus_id=bus[0] if ":" in bus[0] and not masked else None, source="nvidia-smi")


def _process_row(line: str) -> tuple[int, GpuProcess] | None:
    """``|    0   N/A  N/A   1234   C   python   500MiB |`` (with or without the GI/CI columns)."""
    words = line.strip().strip("|").split()
    if len(words) < 4 or not words[0].isdigit() or not (words[-1].endswith("MiB") or words[-1] == "N/A"):
        return None
    for i in range(1, min(len(words) - 2, 4)):
        if words[i].isdigit() and words[i + 1] and not words[i + 1].strip("CGM+"):
            return int(words[0]), GpuProcess(pid=int(words[i]), name=" ".join(words[i + 2:-1]),
                                             used_memory_mib=_num(words[-1]))
    return None


def parse_table(text: str | list[str], used: set[int] | None = None, only: list[int] | None = None) -> SmiReading:
    """Read the default ``nvidia-smi`` table (any driver generation, pasted or truncated).

    ``text`` is a paste or its normalised lines; the indices of the lines read are added to ``used``. ``only``:
    the indices of the lines that can belong to a table (the others end one), when the caller knows them."""
    lines = _lines(text)
    indices = range(len(lines)) if only is None else only
    table = _Table(lines, used if used is not None else set())
    for i in indices:
        table.feed(i)
    out = table.out
    if out.found:
        _finish_table(out, any("Processes:" in lines[i] for i in indices))
    _table_error(out, parse_error(text if isinstance(text, str) else "\n".join(lines)))
    return out


def _finish_table(out: SmiReading, complete: bool) -> None:
    """A found table's notes and status: ok with GPUs; no device when a complete table lists none."""
    if out.driver.version is None:
        out.notes.append("nvidia-smi table without a readable driver version (truncated paste?)")
    if out.driver.status == "unknown":
        out.driver.status = "ok" if out.gpus else ("no_device" if out.driver.version and complete else "unknown")


def _table_error(out: SmiReading, err: tuple[DriverStatus, str] | None) -> None:
    """An error message with (or instead of) the table: it sets the status when no GPU row says otherwise."""
    if err and out.driver.status in ("unknown", "ok") and not out.gpus:
        out.found = True
        out.driver.status, out.driver.error = err
        out.driver.source = out.driver.source or "nvidia-smi"
    elif err and err[0] == "error":
        out.driver.status, out.driver.error = err


class _Table:
    """One pass over the lines of a table: the section it is in (GPUs, processes, MIG devices), the GPU whose
    rows follow, and whether the current line is inside a table at all."""

    def __init__(self, lines: list[str], used: set[int]) -> None:
        self.lines, self.used, self.out = lines, used, SmiReading()
        self.gpu: GpuInfo | None = None
        self.row_of_gpu = 0
        self.section = "gpus"
        self.in_table = False
        self.prev, self.skip = -2, -1

    def feed(self, i: int) -> None:
        """Read line ``i`` (lines come in order; a gap between two ends the table)."""
        if i == self.skip:
            return
        if i != self.prev + 1:
            self.in_table, self.row_of_gpu = False, 0
        self.prev = i
        line = self._joined(i)
        prose = not line.startswith(("|", "+"))
        if prose and not ("NVIDIA-SMI" in line and "Driver Version" in line):  # the header quoted in a sentence
            self.in_table = False
        elif "NVIDIA-SMI" in line and (header := _HEADER.search(line)):
            self._header(i, line, header, prose)
        elif line.startswith("+") and not line.strip("+-=|: "):
            self._rule(i)
        elif "Processes:" in line or "MIG devices:" in line:
            self.section, self.gpu, self.in_table = ("processes" if "Processes:" in line else "mig"), None, True
            self.used.add(i)
        elif self.section == "processes":
            self._process(i, line)
        elif self.section == "mig":
            self._mig(i, line)
        else:
            self._gpu_rows(i, line)

    def _joined(self, i: int) -> str:
        """Line ``i``, joined with the next when a narrow terminal broke a row: "| 0 Tesla ... |  0000..." +
        "...  0 |"."""
        lines = self.lines
        line = lines[i].strip()
        if line.startswith("|") and not line.endswith("|") and i + 1 < len(lines):
            nxt = lines[i + 1].strip()
            if nxt and nxt.endswith("|") and not nxt.startswith(("|", "+")):
                # a break inside a number ("550.40.0" + "7": nothing between the two halves) joins without a space
                cut = lines[i].rstrip("\r\n")[-1:] in _DIGITS and lines[i + 1][:1] in _DIGITS
                line, self.skip = line + ("" if cut else " ") + nxt, i + 1
                self.used.add(i + 1)
        return line

    def _header(self, i: int, line: str, header: re.Match, prose: bool) -> None:
        """``| NVIDIA-SMI 550.54.15   Driver Version: 550.54.15   CUDA Version: 12.4 |`` (or KMD / CUDA UMD)."""
        out = self.out
        out.found = self.in_table = True
        self.used.add(i)
        d = _DRIVER.search(line)
        if d:
            out.driver.version = _version(d.group("v"))
            if "KMD Version" in line:
                out.driver.kernel_module_version = out.driver.version
            smi_version = header.group("smi")
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
        self.in_table = not prose

    def _rule(self, i: int) -> None:
        """A ``+----+`` or ``|====|`` rule: part of the table when inside one or when a row follows."""
        if self.in_table or (i + 1 < len(self.lines) and self.lines[i + 1].strip().startswith("|")):
            self.used.add(i)
        self.row_of_gpu = 0

    def _process(self, i: int, line: str) -> None:
        p = _process_row(line)
        if p:
            self.used.add(i)
            target = next((g for g in self.out.gpus if g.index == p[0]), None)
            if target is not None:
                target.processes.append(p[1])
        elif self.in_table:
            self.used.add(i)

    def _mig(self, i: int, line: str) -> None:
        """A row of the "MIG devices:" table: its first number is the GPU, which is in MIG mode."""
        words = _cells(line)[0].split()
        if len(words) == 4 and all(w.isdigit() for w in words):
            self.out.found = True
            index = int(words[0])
            target = next((g for g in self.out.gpus if g.index == index), None)
            if target is None:
                target = GpuInfo(index=index, source="nvidia-smi")
                self.out.gpus.append(target)
            target.mig_mode = "Enabled"
        if self.in_table or words:
            self.used.add(i)

    def _gpu_rows(self, i: int, line: str) -> None:
        """A GPU's first row (index, name, bus id) or one of the rows below it (memory, MIG mode)."""
        row = _gpu_row(line)
        if row:
            self.out.found = self.in_table = True
            self.used.add(i)
            self.gpu, self.row_of_gpu = row, 1
            if "ERR!" in line:
                self._err(row)
            self.out.gpus.append(row)
            return
        if self.in_table:
            self.used.add(i)
        if self.gpu is not None and self.row_of_gpu:
            self.row_of_gpu += 1
            if self.row_of_gpu == 2:
                self._memory(self.gpu, line)
            elif self.row_of_gpu == 3:
                cells = _cells(line)
                last = cells[-1].strip() if cells else ""
                if last in ("Enabled", "Disabled"):
                    self.gpu.mig_mode = last

    def _memory(self, gpu: GpuInfo, line: str) -> None:
        """The second row's "used / total" memory cell."""
        for cell in _cells(line):
            mem = _MEM.fullmatch("".join(cell.split())[:40]) if "MiB" in cell else None
            if mem:
                gpu.memory_used_mib = _num(mem.group("used"))
                gpu.memory_total_mib = _num(mem.group("total"))
                if "ERR!" in line:
                    self._err(gpu)
                return

    def _err(self, gpu: GpuInfo) -> None:
        self.out.driver.status = "error"
        self.out.driver.error = self.out.driver.error or f"GPU {gpu.index} shows ERR!"


# --- --query-gpu ... --format=csv ----------------------------------------------------------------

_FIELD_ALIASES = {"gpu_name": "name", "compute_capability": "compute_cap", "pci.bus_id": "pci.bus_id",
                  "gpu_uuid": "uuid", "mig.mode.current": "mig.mode.current"}
_KNOWN_FIELDS = set(QUERY_FIELDS) | {"utilization.gpu", "temperature.gpu", "compute_mode", "memory.free",
                                     "power.draw", "gpu_bus_id", "count", "driver_model.current", "pstate",
                                     "clocks.sm", "fan.speed", "serial", "vbios_version", "persistence_mode",
                                     "utilization.memory", "power.limit", "clocks.max.sm", "clocks.mem"}
QUERY_CMD = lazy(r"--query-gpu[= ](?P<fields>[\w.,]+)")
_FIELD = lazy(r"[a-z_]{1,40}(?:\.[a-z_]{1,40}){0,4}")


def _strip_prompt(line: str) -> str:
    """A line without a leading "#" prompt and without the backticks of inline code around it."""
    line = line.strip()
    if line.startswith("#"):
        line = line[1:]
    return line.strip().strip("`").strip()


def _field_name(cell: str) -> str:
    cell = cell.strip()
    if cell.endswith("]") and "[" in cell:
        cell = cell[:cell.rfind("[")]
    return cell.strip()


def _is_header(cells: list[str]) -> bool:
    names = [_field_name(c) for c in cells]
    return bool(names) and all(n in _KNOWN_FIELDS or n in _FIELD_ALIASES or _FIELD.fullmatch(n[:210])
                               for n in names) and any(n in _KNOWN_FIELDS for n in names)


def parse_query(text: str | list[str], fields: list[str] | None = None, used: set[int] | None = None,
                only: list[int] | None = None) -> SmiReading:
    """Read ``--query-gpu=FIELDS --format=csv[,noheader][,nounits]`` output; several blocks may follow each other.

    ``fields`` names the columns when the text has no header and no command line.
    """
    out = SmiReading()
    used = used if used is not None else set()
    current = list(fields) if fields else None
    row = 0
    lines = _lines(text)
    for i in (range(len(lines)) if only is None else only):
        line = _strip_prompt(lines[i])
        cmd = QUERY_CMD.search(line) if "--query-gpu" in line else None
        if cmd:
            current, row = [_FIELD_ALIASES.get(f, f) for f in cmd.group("fields").split(",") if f], 0
            continue
        cells = _query_cells(line, current)
        if cells is None:
            continue
        if len(cells) <= 64 and _is_header(cells):
            current, row = [_FIELD_ALIASES.get(n, n) for n in (_field_name(c) for c in cells)], 0
            used.add(i)
        elif current is not None and len(cells) == len(current):
            values = dict(zip(current, cells, strict=False))
            if not _plausible(values):
                current = None  # the block ended: this line is something else (a shell line, prose)
                continue
            out.found = True
            used.add(i)
            _query_row(out, values, row)
            row += 1
    if out.found and out.driver.status == "unknown":
        out.driver.status = "ok"
    return out


_NOT_A_NAME = ("\"", ";", "=", "import ", "print(")


def _plausible(values: dict[str, str]) -> bool:
    """Every value of a row has the form of its field (an index is a number, a version a version, a GPU name no
    code): a line that merely has as many commas is no row."""
    for key, value in values.items():
        if value in ("[N/A]", "N/A", "[Not Supported]", "") or value.startswith("ERR!") or value == "[Unknown Error]":
            continue
        if key == "index" and not value.isdigit() or \
                key in ("driver_version", "compute_cap") and not _version(value) or \
                key.startswith("memory.") and not value[:1].isdigit() or \
                key == "name" and any(w in value for w in _NOT_A_NAME):
            return False
    return True


def _query_cells(line: str, current: list[str] | None) -> list[str] | None:
    """The comma-separated cells of a line that can be a header or a row; None for a blank line, a prompt, an
    nvidia-smi command, or a line without commas where the query has several columns."""
    if not line or line.startswith("$") or "nvidia-smi" in line:
        return None
    if "," not in line and (current is None or len(current) > 1):
        return None
    return [c.strip() for c in line.split(",")]


def _query_row(out: SmiReading, values: dict[str, str], row: int) -> None:
    """One CSV row: the GPU it is about (its index column, else its place) gains every value given."""
    index = _num(values.get("index")) if values.get("index", "").strip().isdigit() else row
    gpu = next((g for g in out.gpus if g.index == index), None)
    if gpu is None:
        gpu = GpuInfo(index=index, source="nvidia-smi --query-gpu")
        out.gpus.append(gpu)
    for key, value in values.items():
        if value in ("[N/A]", "N/A", "[Not Supported]", ""):
            continue
        if value.startswith("ERR!") or value == "[Unknown Error]":
            out.driver.status, out.driver.error = "error", f"{key}: {value}"
        elif key == "driver_version":
            out.driver.version = _version(value) or out.driver.version
            out.driver.source = "nvidia-smi --query-gpu"
        else:
            _query_value(gpu, key, value)


def _query_value(gpu: GpuInfo, key: str, value: str) -> None:
    """A GPU's own field of a query row."""
    if key == "name":
        gpu.name = value
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


# --- the live probe ------------------------------------------------------------------------------

def probe(timeout: float, env: dict[str, str] | None = None) -> SmiReading:
    """Run nvidia-smi: the table (driver, CUDA version, GPUs, processes), then ``--query-gpu`` for the
    compute capabilities. Never raises; what failed is in ``notes`` and ``driver.error``."""
    exe = proc.which("nvidia-smi", path=(env or {}).get("PATH") if env else None)
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
    elif out.gpus:
        _probe_query(exe, out, timeout, env)
    return out


def _probe_query(exe: str, out: SmiReading, timeout: float, env: dict[str, str] | None) -> None:
    """``--query-gpu`` after the table: compute capabilities, UUIDs, full names (the table truncates long ones)."""
    query = proc.run([exe, "--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv,noheader,nounits"],
                     timeout=timeout, env=env)
    if not query.ok:
        out.notes.append("nvidia-smi --query-gpu failed (driver older than the compute_cap field?): "
                         + (query.error or query.stdout.strip()[:200]))
        return
    for g in parse_query(query.stdout, QUERY_FIELDS).gpus:
        t = next((x for x in out.gpus if x.index == g.index), None)
        if t is not None:
            t.compute_capability = g.compute_capability or t.compute_capability
            t.uuid = g.uuid or t.uuid
            t.name = g.name or t.name  # the table truncates long names
            t.memory_total_mib = g.memory_total_mib or t.memory_total_mib
            t.mig_mode = g.mig_mode or t.mig_mode
