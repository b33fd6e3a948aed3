"""Command-line tools' outputs: ``nvcc --version``, ``ldconfig -p``, /proc/driver/nvidia/version, deviceQuery and
the kernel log's NVRM lines."""
from __future__ import annotations

import os
import re

from cudamatrix.detect.libraries import library_name, version_from_filename
from cudamatrix.detect.text import Paste
from cudamatrix.models import Driver, Environment, GpuInfo, Library, Note, Toolkit
from cudamatrix.pastes.merge import merge_driver, merge_gpus

_NVCC = re.compile(r"release (?P<short>\d{1,3}\.\d{1,3}), V(?P<full>\d{1,3}\.\d{1,3}\.\d{1,6})")
_NVCC_SHORT = re.compile(r"Cuda compilation tools, release (?P<short>\d{1,3}\.\d{1,3})")
_PROC = re.compile(r"Kernel Module(?: {1,4}for {1,4}\S{1,40})? {1,4}(?P<v>\d{1,4}\.\d{1,4}(?:\.\d{1,4})?)")
_DQ_VERSIONS = re.compile(r"CUDA Driver Version / Runtime Version {1,40}(\d{1,3}\.\d{1,3}) {0,4}/ {0,4}(\d{1,3}\.\d{1,3})")
_DQ_DEVICE = re.compile(r'Device (\d{1,3}): "([^"\n]{1,200})"')
# the versions without the period that ends the kernel's sentence ("... has the version 510.73.05.  Please")
_MISMATCH = re.compile(r"NVRM: API mismatch: the client has the version (\d{1,4}(?:\.\d{1,4}){0,3}), but\s{1,20}NVRM: "
                       r"this kernel module has the version (\d{1,4}(?:\.\d{1,4}){0,3})")


def _lines_with(paste: Paste, needle: str) -> list[int]:
    return paste.having(needle)


def read_nvcc(paste: Paste, env: Environment) -> bool:
    """``nvcc --version`` (also the "NVCC:" line of SGLang's check_env)."""
    found = False
    for i in _lines_with(paste, "Cuda compilation tools"):
        line = paste.lines[i]
        m = _NVCC.search(line) or _NVCC_SHORT.search(line)
        if not m:
            continue
        version = m.groupdict().get("full") or m.group("short")
        if not any(t.source == "report:nvcc" and t.version == version for t in env.toolkits):
            env.toolkits.append(Toolkit(source="report:nvcc", version=version))
        found = True
        start = i
        while start > 0 and i - start < 3 and paste.lines[start - 1].strip().startswith(
                ("nvcc: NVIDIA", "Copyright (c)", "Built on")):
            start -= 1
        end = i + 1 if i + 1 < len(paste.lines) and paste.lines[i + 1].strip().startswith("Build cuda_") else i
        paste.claim_range(start, end, "nvcc")
    return found


def _ldconfig_entry(line: str) -> tuple[str, str, str] | None:
    """"\tlibcudart.so.12 (libc6,x86-64) => /usr/local/cuda/lib64/libcudart.so.12" -> (soname, flags, path)."""
    soname_flags, arrow, path = line.partition("=>")
    if not arrow:
        return None
    soname, _, flags = soname_flags.strip().partition(" (")  # no " (": no flags, so no ")" in them
    if ")" not in flags or " " in soname.strip() or not path.strip():
        return None
    return soname.strip(), flags[:flags.index(")")], path.split()[0]


def read_ldconfig(paste: Paste, env: Environment) -> bool:
    """``ldconfig -p`` (whole or grepped): every copy of a tracked CUDA library, in the cache's order."""
    entries = []
    for i in _lines_with(paste, "=>"):
        e = _ldconfig_entry(paste.lines[i]) if paste.free(i) else None
        if e:
            entries.append(e)
            paste.claim(i, "ldconfig -p")
    for i in _lines_with(paste, "libs found in cache"):
        paste.claim(i, "ldconfig -p")
    if not entries:
        return False
    wide = any("," in flags for _, flags, _ in entries)
    seen: set[str] = set()
    for soname, flags, path in entries:
        name = library_name(soname)
        if name is None or (wide and "," not in flags) or path in seen:
            continue
        seen.add(path)
        env.libraries.append(Library(name=name, soname=soname, path=path, origin="report:ldconfig",
                                     version=version_from_filename(os.path.basename(path)), stub="/stubs/" in path))
    return True


_CUDNN_DEFINES = ("#define CUDNN_MAJOR", "#define CUDNN_MINOR", "#define CUDNN_PATCHLEVEL")


def read_cudnn_header(paste: Paste, env: Environment) -> bool:
    """`grep CUDNN_MAJOR -A 2` of cudnn.h (or cudnn_version.h): "#define CUDNN_MAJOR 8", "#define CUDNN_MINOR 9",
    "#define CUDNN_PATCHLEVEL 2": the system's cuDNN headers name cuDNN 8.9.2."""
    lines = paste.lines
    for i in paste.having(_CUDNN_DEFINES[0]):
        parts = []
        for j, define in enumerate(_CUDNN_DEFINES):
            body = lines[i + j].strip() if i + j < len(lines) else ""
            number = body[len(define):].strip() if body.startswith(define) else ""
            parts.append(number if number.isdigit() and len(number) <= 3 else "")
        if all(parts):
            env.notes.append(Note("report", f"cuDNN {'.'.join(parts)} named in the paste (the cudnn.h headers), "
                                  "of no framework it could be tied to"))
            paste.claim_range(i, i + 2, "cudnn.h")
            j = i + 3  # "--" and the CUDNN_VERSION formula that grep -A 2 prints after it
            while j < len(lines) and j - i <= 5 and lines[j].strip().startswith(("--", "#define CUDNN_VERSION")):
                paste.claim(j, "cudnn.h")
                j += 1
            return True
    return False


def read_proc_version(paste: Paste, env: Environment) -> bool:
    """/proc/driver/nvidia/version."""
    found = False
    for i in _lines_with(paste, "NVRM version:"):
        m = _PROC.search(paste.lines[i])
        if m:
            env.driver.kernel_module_version = env.driver.kernel_module_version or m.group("v")
            paste.claim(i, "/proc/driver/nvidia/version")
            if i + 1 < len(paste.lines) and paste.lines[i + 1].strip().startswith("GCC version"):
                paste.claim(i + 1, "/proc/driver/nvidia/version")
            found = True
    return found


def read_device_query(paste: Paste, env: Environment) -> bool:
    """The CUDA samples' deviceQuery."""
    text = paste.text
    if "CUDA Device Query" not in text and "CUDA Capability Major/Minor" not in text:
        return False
    m = _DQ_VERSIONS.search(text)
    if m:
        merge_driver(env, Driver(cuda_version=m.group(1), source="report:deviceQuery"))
        env.toolkits.append(Toolkit(source="report:deviceQuery runtime", version=m.group(2)))
    gpu: GpuInfo | None = None
    inside = False  # from a line naming deviceQuery to its "Result = " line
    for i, line in enumerate(paste.lines):
        body = line.strip()
        d = _DQ_DEVICE.match(body)  # anchored: it begins with "Device "
        if d:
            merge_gpus(env, [GpuInfo(index=int(d.group(1)), name=d.group(2), source="report:deviceQuery")])
            gpu = next(g for g in env.gpus if g.index == int(d.group(1)))
        inside = inside or "deviceQuery" in body or "CUDA Device Query" in body
        if not inside:
            continue
        if gpu is not None:
            _device_fact(gpu, body)
        if body and paste.free(i):
            paste.claim(i, "deviceQuery")
        inside = not body.startswith("Result = ")
    return True


def _device_fact(gpu: GpuInfo, body: str) -> None:
    """A deviceQuery line about the current device: its compute capability or its memory."""
    if "CUDA Capability Major/Minor version number:" in body:
        gpu.compute_capability = gpu.compute_capability or body.rsplit(":", 1)[1].strip()[:8]
    elif "Total amount of global memory:" in body:
        words = body.rsplit(":", 1)[1].split()
        if len(words) >= 2 and words[0].isdigit() and words[1] == "MBytes":
            gpu.memory_total_mib = gpu.memory_total_mib or int(words[0])


def read_dmesg(paste: Paste, env: Environment) -> bool:
    """The kernel log's NVRM lines: another driver holds the GPU, or the user-space/kernel versions differ."""
    text = paste.text
    if "NVRM:" not in text:
        return False
    if "No NVIDIA graphics adapter probed" in text or "The NVIDIA probe routine was not called" in text:
        holder = "nouveau" if "nouveau" in text else "another driver"
        merge_driver(env, Driver(status="no_device", error=f"NVRM: the NVIDIA driver could not bind the GPU "
                                 f"({holder} holds it?)"))
        env.notes.append(Note("report:dmesg", f"the kernel log says {holder} owns the GPU: blacklist it and reload "
                              "the nvidia module", "error"))
    else:
        mm = _MISMATCH.search(text)
        if not mm:
            return False
        merge_driver(env, Driver(status="mismatch", library_version=mm.group(1), kernel_module_version=mm.group(2),
                                 error=mm.group(0)))
    for i in _lines_with(paste, "NVRM:"):
        paste.claim(i, "dmesg")
    return True
