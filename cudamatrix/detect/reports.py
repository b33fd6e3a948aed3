"""Environments from what users paste into bug reports.

Each text is recognised by its content (several tools' outputs may follow each other in one file):
nvidia-smi (table, ``-q``, ``--query-gpu`` CSV, ``-L``, error messages), ``python -m torch.utils.collect_env``,
``ldconfig -p``, ``nvcc --version``, ``pip freeze`` / ``pip list``, /proc/driver/nvidia/version, deviceQuery
and NVRM kernel messages. What cannot be read becomes a note; nothing here raises on bad text.
"""
from __future__ import annotations

import os
import re
import sys

from cudamatrix.errors import UsageError
from cudamatrix.models import Driver, Environment, Framework, GpuInfo, Library, Note, Toolkit
from cudamatrix.detect import smi
from cudamatrix.detect._pyprobe import relevant
from cudamatrix.names import FRAMEWORK_DISTS, canonical
from cudamatrix.detect.driver import parse_proc_version
from cudamatrix.detect.libraries import _soname_guess, library_name, parse_ldconfig, version_from_filename
from cudamatrix.detect.python_env import other_variant, torch_variant
from cudamatrix.detect.text import MAX_BYTES, clean, decode
from cudamatrix.detect.toolkits import parse_nvcc

_GPU_LINE = re.compile(r"^\s*GPU (?P<i>\d+): (?P<name>.+?)(?: \(UUID: (?P<uuid>[^)]*)\))?\s*$", re.M)
_FREEZE = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<v>[^\s;#]+)\s*$", re.M)
_LIST_ROW = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)[ \t]{2,}(?P<v>\d[\w.+!-]*)[ \t]*$", re.M)
_PIP_TAGGED = re.compile(r"^\[(?:pip\d?|conda)\][ \t]+(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?:==|[ \t]+)(?P<v>\S+)"
                         r"(?:[ \t]+(?P<build>\S+))?", re.M)


def read_report(path: str) -> tuple[str, list[Note]]:
    """Read a report file ("-" is stdin), at most :data:`MAX_BYTES`. Raises UsageError for missing or binary files."""
    notes: list[Note] = []
    try:
        if path == "-":
            data = sys.stdin.buffer.read(MAX_BYTES + 1)
        else:
            with open(path, "rb") as fh:
                data = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"cannot read report {path}: {exc.strerror or exc}",
                         hint="pass a text file with pasted tool output, or - for stdin") from None
    if len(data) > MAX_BYTES:
        data = data[:MAX_BYTES]
        notes.append(Note("report", f"{path}: longer than {MAX_BYTES // (1024 * 1024)} MB; read the first "
                          f"{MAX_BYTES // (1024 * 1024)} MB only", "warning"))
    text, binary = decode(data)
    if binary:
        raise UsageError(f"report {path} looks binary, not pasted text",
                         hint="paste the output of nvidia-smi, collect_env, ldconfig -p, nvcc or pip into a text file")
    if not text.strip():
        notes.append(Note("report", f"{path}: empty", "warning"))
    return text, notes


def _merge_driver(env: Environment, d: Driver) -> None:
    cur = env.driver
    for key in ("version", "cuda_version", "kernel_module_version", "library_version", "source", "error"):
        if getattr(cur, key) is None and getattr(d, key) is not None:
            setattr(cur, key, getattr(d, key))
    rank = {"unknown": 0, "ok": 1, "no_device": 2, "absent": 3, "error": 4, "mismatch": 5}
    if rank[d.status] > rank[cur.status]:
        cur.status = d.status
        if d.error:
            cur.error = d.error


def _merge_gpus(env: Environment, gpus: list[GpuInfo]) -> None:
    for g in gpus:
        cur = next((x for x in env.gpus if x.index == g.index), None)
        if cur is None:
            env.gpus.append(g)
            continue
        for key in ("name", "compute_capability", "memory_total_mib", "memory_used_mib", "uuid", "pci_bus_id",
                    "mig_mode"):
            value = getattr(g, key)
            if value is not None and (getattr(cur, key) is None or key == "name" and "..." in (cur.name or "")):
                setattr(cur, key, value)
        if g.processes and not cur.processes:
            cur.processes = g.processes
    env.gpus.sort(key=lambda x: x.index if x.index is not None else 0)


def read_smi(text: str, env: Environment) -> bool:
    found = False
    for parser in (smi.parse_table, smi.parse_q, smi.parse_query):
        r = parser(text)
        if r.found:
            found = True
            _merge_driver(env, r.driver)
            _merge_gpus(env, r.gpus)
            env.notes += [Note("report:nvidia-smi", n, "warning") for n in r.notes]
    if not found:
        err = smi.parse_error(text)
        if err:
            found = True
            _merge_driver(env, Driver(status=err[0], error=err[1], source="nvidia-smi"))
    gpus = [GpuInfo(index=int(m.group("i")), name=m.group("name").strip(), uuid=m.group("uuid"), source="report")
            for m in _GPU_LINE.finditer(text)]
    if gpus:
        _merge_gpus(env, gpus)
    mig = re.findall(r"^\|\s+(\d+)\s+\d+\s+\d+\s+\d+\s+\|\s+\d+MiB", text, re.M)
    if mig:
        found = True
        _merge_gpus(env, [GpuInfo(index=int(i), mig_mode="Enabled", source="report") for i in sorted(set(mig))])
    return found


def read_collect_env(text: str, env: Environment) -> bool:
    """``python -m torch.utils.collect_env`` (any torch version; the library section alone also counts)."""
    if not re.search(r"^(?:PyTorch version:|Collecting.environment information|Versions of relevant libraries:)",
                     text, re.M):
        return False

    def field(label: str) -> str | None:
        m = re.search(rf"^{re.escape(label)}:[ \t]*(?P<v>.*)$", text, re.M)
        v = m.group("v").strip() if m else None
        return None if not v or v in ("Could not collect", "N/A", "None") else v

    torch = field("PyTorch version")
    built = field("CUDA used to build PyTorch")
    if torch:
        fw = torch_variant(torch, [], None)
        fw.source = "report:collect_env"
        if built and re.fullmatch(r"\d+\.\d+", built):
            fw.cuda = fw.cuda or built
            fw.variant = fw.variant or "cu" + built.replace(".", "")
        elif fw.variant is None and re.search(r"^CUDA used to build PyTorch:\s*(None|Could not collect)", text, re.M):
            fw.variant = "cpu"
        env.frameworks.append(fw)
        env.packages.setdefault("torch", torch)
    pyv = field("Python version")
    if pyv:
        m = re.match(r"(\d+\.\d+(?:\.\d+)?)", pyv)
        env.python.version = m.group(1) if m else None
    plat = field("Python platform") or ""
    osname = field("OS") or ""
    if "Windows" in osname or plat.startswith("Windows"):
        env.context.os = "windows"
        env.python.platform = "win_amd64" if "64" in (pyv or "") + plat or not plat else None
    elif plat.startswith("Linux") or "Linux" in osname or "Ubuntu" in osname:
        env.context.os = "linux"
        arch = "aarch64" if "aarch64" in plat + osname else ("x86_64" if "x86_64" in plat + osname else None)
        env.python.platform = f"linux_{arch}" if arch else None
        if "microsoft" in plat.lower():
            env.context.wsl = True
    drv = field("Nvidia driver version")
    if drv and re.fullmatch(r"\d+(\.\d+)+", drv):
        _merge_driver(env, Driver(version=drv, source="report:collect_env"))
    if re.search(r"Found no NVIDIA driver on your system", text):
        _merge_driver(env, Driver(status="absent", error="Found no NVIDIA driver on your system (torch)"))
    runtime = field("CUDA runtime version")
    if runtime and re.match(r"\d+\.\d+", runtime):
        env.toolkits.append(Toolkit(source="report:collect_env", version=runtime))
    m = re.search(r"^cuDNN version:[ \t]*(?P<first>.*)$(?P<rest>(?:\n(?:/|[A-Z]:\\)\S+)*)", text, re.M)
    if m:
        for path in [m.group("first").strip()] + m.group("rest").split():
            base = re.split(r"[\\/]", path)[-1]
            name = library_name(base)
            if name == "cudnn" or base.lower().startswith("cudnn"):
                env.libraries.append(Library(name="cudnn", soname=_soname_guess(base) if name else base,
                                             path=path, origin="report:collect_env",
                                             version=version_from_filename(base)))
    for mm in re.finditer(r"^GPU models and configuration:[ \t]*(?P<v>GPU \d+: .+)$", text, re.M):
        g = _GPU_LINE.match(mm.group("v"))
        if g:
            _merge_gpus(env, [GpuInfo(index=int(g.group("i")), name=g.group("name"), source="report:collect_env")])
    for mm in _PIP_TAGGED.finditer(text):
        name, version, build = canonical(mm.group("name")), mm.group("v"), mm.group("build") or ""
        if version.startswith("<") or not re.match(r"\d", version):
            continue
        if name == "cudatoolkit":
            env.toolkits.append(Toolkit(source="report:conda cudatoolkit", version=version))
        elif name == "pytorch" and "cuda" in build:
            cm = re.search(r"cuda(\d+\.\d+)(?:_cudnn(\d+\.\d+\.\d+))?", build)
            if cm and not any(f.name == "torch" for f in env.frameworks):
                env.frameworks.append(Framework(name="torch", version=version, variant="cu" + cm.group(1).replace(".", ""),
                                                cuda=cm.group(1), cudnn=cm.group(2), source="report:conda"))
        elif relevant(name) and mm.group(0).startswith("[pip"):
            env.packages.setdefault(name, version)
    return True


def read_ldconfig(text: str, env: Environment) -> bool:
    entries = parse_ldconfig(text)
    if not entries:
        return False
    wide = any("," in e.flags for e in entries)
    seen: set[str] = set()
    for e in entries:
        name = library_name(e.soname)
        if name is None or (wide and "," not in e.flags) or e.path in seen:
            continue
        seen.add(e.path)
        env.libraries.append(Library(name=name, soname=e.soname, path=e.path, origin="report:ldconfig",
                                     version=version_from_filename(os.path.basename(e.path)),
                                     stub="/stubs/" in e.path))
    return True


def read_nvcc(text: str, env: Environment) -> bool:
    version = parse_nvcc(text)
    if version is None:
        return False
    env.toolkits.append(Toolkit(source="report:nvcc", version=version))
    return True


def read_pip(text: str, env: Environment) -> bool:
    found = []
    for m in _FREEZE.finditer(text):
        found.append((canonical(m.group("name")), m.group("v")))
    table = re.search(r"^Package\s+Version[^\n]*\n-+\s+-+[^\n]*\n", text, re.M)
    if table:
        for line in text[table.end():].split("\n"):
            parts = line.split()
            if len(parts) < 2 or not re.match(r"\d", parts[1]):
                break
            found.append((canonical(parts[0]), parts[1]))
    for m in _LIST_ROW.finditer(text):  # a `pip list` fragment without its header (pasted from the middle)
        if relevant(canonical(m.group("name"))):
            found.append((canonical(m.group("name")), m.group("v")))
    if not found:
        return False
    for name, version in found:
        if relevant(name):
            env.packages[name] = version
    return True


def read_proc_version(text: str, env: Environment) -> bool:
    if "NVRM version:" not in text:
        return False
    version = parse_proc_version(text)
    if version:
        env.driver.kernel_module_version = version
    return version is not None


def read_device_query(text: str, env: Environment) -> bool:
    if "CUDA Device Query" not in text and "CUDA Capability Major/Minor" not in text:
        return False
    m = re.search(r"CUDA Driver Version / Runtime Version\s+(\d+\.\d+)\s*/\s*(\d+\.\d+)", text)
    if m:
        _merge_driver(env, Driver(cuda_version=m.group(1), source="report:deviceQuery"))
        env.toolkits.append(Toolkit(source="report:deviceQuery runtime", version=m.group(2)))
    for dm in re.finditer(r'Device (\d+): "([^"]+)"(?P<body>(?:\n[ \t(].*)*)', text):
        cc = re.search(r"CUDA Capability Major/Minor version number:\s+(\d+\.\d+)", dm.group("body"))
        mem = re.search(r"Total amount of global memory:\s+(\d+) MBytes", dm.group("body"))
        _merge_gpus(env, [GpuInfo(index=int(dm.group(1)), name=dm.group(2), compute_capability=cc.group(1) if cc else None,
                                  memory_total_mib=int(mem.group(1)) if mem else None, source="report:deviceQuery")])
    return True


def read_dmesg(text: str, env: Environment) -> bool:
    if "NVRM:" not in text:
        return False
    if re.search(r"NVRM: (?:No NVIDIA graphics adapter probed|The NVIDIA probe routine was not called)", text):
        holder = "nouveau" if "nouveau" in text else "another driver"
        _merge_driver(env, Driver(status="no_device", error=f"NVRM: the NVIDIA driver could not bind the GPU "
                                  f"({holder} holds it?)"))
        env.notes.append(Note("report:dmesg", f"the kernel log says {holder} owns the GPU: blacklist it and reload "
                              "the nvidia module", "error"))
        return True
    mm = re.search(r"NVRM: API mismatch: the client has the version ([\d.]+), but\s+NVRM: this kernel module has the "
                   r"version ([\d.]+)", text)
    if mm:
        _merge_driver(env, Driver(status="mismatch", library_version=mm.group(1), kernel_module_version=mm.group(2),
                                  error=mm.group(0)))
        return True
    return False


READERS = [("nvidia-smi", read_smi), ("collect_env", read_collect_env), ("ldconfig", read_ldconfig),
           ("nvcc", read_nvcc), ("pip", read_pip), ("/proc/driver/nvidia/version", read_proc_version),
           ("deviceQuery", read_device_query), ("dmesg", read_dmesg)]


def from_reports(items: list[tuple[str, str]]) -> Environment:
    """Build an Environment (origin "report") from ``(name, text)`` pairs of pasted tool output."""
    env = Environment(origin="report")
    for name, raw in items:
        text = clean(raw)
        kinds = []
        for kind, reader in READERS:
            try:
                if reader(text, env):
                    kinds.append(kind)
            except (ValueError, IndexError, KeyError) as exc:  # a reader tripped on odd text: say so, go on
                env.notes.append(Note(f"report:{kind}", f"{name}: could not read ({exc})", "warning"))
        if kinds:
            env.notes.append(Note("report", f"{name}: read as {', '.join(kinds)}"))
        elif text.strip():
            env.notes.append(Note("report", f"{name}: no known tool output recognised (nvidia-smi, collect_env, "
                                  "ldconfig -p, nvcc --version, pip freeze / pip list)", "warning"))
    for fw_name in (d for d in FRAMEWORK_DISTS if d != "torch"):  # torch is read below, with its pins
        if fw_name in env.packages and not any(f.name == fw_name for f in env.frameworks):
            fw = other_variant(fw_name, env.packages[fw_name], [], env.packages)
            fw.source = "report"
            env.frameworks.append(fw)
    if "torch" in env.packages and not any(f.name == "torch" for f in env.frameworks):
        pins = [f"{n}=={v}" for n, v in env.packages.items() if n.startswith("nvidia-")]
        fw = torch_variant(env.packages["torch"], pins, None)
        fw.source = "report:pip"
        env.frameworks.append(fw)
    for fw in env.frameworks:
        # collect_env prints torch.__version__ ("2.11.0+cu130"); the installer's own list is the distribution
        # version ("2.11.0" from the default index): a live detect reports the latter, so a report does too
        dist = env.packages.get(fw.name)
        if dist and dist != fw.version and dist.split("+")[0] == fw.version.split("+")[0]:
            fw.version = dist
    return env
