"""GPUs and a driver as people and applications name them outside the tools' own tables.

- An application's device line: "Device: cuda:0 NVIDIA GeForce RTX 2060 12GB" (Fooocus), "Device: cuda:0 NVIDIA
  GeForce RTX 4090 : cudaMallocAsync" (ComfyUI), with "Total VRAM 12288 MB" beside it; "Using device: cuda:0
  (NVIDIA A100-SXM4-80GB)".
- A count and a name typed alone on a line: "8 * A100 SXM4(40G)", "2x RTX 3090 (24GB)".
- nvidia-smi's banner cut after its first field: "NVIDIA-SMI 560.35.03" alone on its line (someone pasted "only
  the top line"): the nvidia-smi version, which is the driver's.

A name is kept only where it holds a GPU family's word (RTX, GTX, Tesla, A100 ...). Lines are cut with str
methods and bounded patterns.
"""
from __future__ import annotations

import re

from cudamatrix.detect.text import Paste
from cudamatrix.models import Driver, Environment, GpuInfo
from cudamatrix.pastes.fields import memory_suffix
from cudamatrix.pastes.merge import merge_driver, merge_gpus

_GPU_WORDS = re.compile(r"RTX|GTX|Tesla|Quadro|TITAN|GeForce|\b[ABHLTV]\d{1,3}\b")
_DEVICE = ("Device: cuda:", "Using device: cuda")
_VRAM = re.compile(r"Total VRAM (\d{3,7}) MB")
_COUNT = re.compile(r"(\d{1,2}) ?[*x\u00d7] ?")
_SMI = re.compile(r"NVIDIA-SMI (\d{3}\.\d{1,3}(?:\.\d{1,3})?)")
_MAX_GPUS = 64  # more GPUs than one machine holds: not a device index


def read(paste: Paste, env: Environment) -> bool:
    found = False
    if "cuda" in paste.text:
        found |= read_app_device(paste, env)
    found |= read_typed_gpus(paste, env)
    if "NVIDIA-SMI " in paste.text:
        found |= read_smi_top_line(paste, env)
    return found


def read_app_device(paste: Paste, env: Environment) -> bool:
    """"Device: cuda:0 NAME[ MEMORY][ : allocator]" and "Using device: cuda:0 (NAME)", and "Total VRAM N MB"."""
    found = False
    vram = None
    seen: dict[int, GpuInfo] = {}
    for i in paste.having("Total VRAM "):
        m = _VRAM.search(paste.lines[i][:400])
        if m:
            vram = int(m.group(1))
            paste.claim(i, "application log")
    for i in paste.having(*_DEVICE):
        line = paste.lines[i][:400].strip()
        at = line.find("cuda")
        rest = line[at + 4:]
        index, _, name = rest.lstrip(":").partition(" ")
        index = index.rstrip(",") or "0"
        name = name.split(" : ")[0].strip().strip("()")
        if not index.isdigit() or int(index) >= _MAX_GPUS or not _GPU_WORDS.search(name):
            continue
        name, memory = memory_suffix(name)
        seen.setdefault(int(index), GpuInfo(index=int(index), name=name, memory_total_mib=vram or memory,
                                            source="report:application log"))
        paste.claim(i, "application log")
        found = True
    merge_gpus(env, list(seen.values()))  # once: a log repeats its device line
    return found


def read_typed_gpus(paste: Paste, env: Environment) -> bool:
    """A line that is only a count and a GPU's name, with its memory: "8 * A100 SXM4(40G)" (the first such line:
    a paste comparing machines names others after it)."""
    found = False
    for i in paste.having(" * ", "* ", "x ", "\u00d7"):
        line = paste.lines[i].strip()
        m = _COUNT.match(line) if paste.free(i) and len(line) <= 60 else None
        if m is None:
            continue
        name, memory = memory_suffix(line[m.end():])
        if not _GPU_WORDS.search(name) or not 0 < int(m.group(1)) <= _MAX_GPUS or len(name.split()) > 5:
            continue
        if not found:  # the first such line names the machine's GPUs; more would be other machines
            merge_gpus(env, [GpuInfo(index=k, name=name, memory_total_mib=memory, source="report:typed")
                             for k in range(int(m.group(1)))])
        paste.claim(i, "typed GPUs")
        found = True
    return found


def read_smi_top_line(paste: Paste, env: Environment) -> bool:
    """nvidia-smi's banner cut after "NVIDIA-SMI 560.35.03" (no "Driver Version" after it): where no driver
    version is known, that version is the driver's (nvidia-smi ships with the driver)."""
    if env.driver.version:
        return False
    for i in paste.having("NVIDIA-SMI "):
        line = paste.lines[i].strip().strip("`|'\" ")
        m = _SMI.fullmatch(line[:40])
        if m and paste.free(i):
            merge_driver(env, Driver(version=m.group(1), source="report:nvidia-smi"))
            paste.claim(i, "nvidia-smi")
            return True
    return False
