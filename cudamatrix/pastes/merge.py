"""Merging what several readers found into one Environment (first fact wins, worse driver status wins)."""
from __future__ import annotations

from cudamatrix.models import Driver, Environment, GpuInfo

_RANK = {"unknown": 0, "ok": 1, "no_device": 2, "absent": 3, "error": 4, "mismatch": 5}


def merge_driver(env: Environment, d: Driver) -> None:
    """Fill the Environment's driver facts that are still empty; keep the worse status."""
    cur = env.driver
    for key in ("version", "cuda_version", "kernel_module_version", "library_version", "source", "error"):
        if getattr(cur, key) is None and getattr(d, key) is not None:
            setattr(cur, key, getattr(d, key))
    if _RANK[d.status] > _RANK[cur.status]:
        cur.status = d.status
        if d.error:
            cur.error = d.error


def merge_gpus(env: Environment, gpus: list[GpuInfo]) -> None:
    """Add GPUs by index; a known GPU gains the facts it lacks (a full name replaces a truncated one)."""
    for g in gpus:
        cur = next((x for x in env.gpus if x.index == g.index), None)
        if cur is None:
            env.gpus.append(g)
            continue
        for key in ("name", "compute_capability", "memory_total_mib", "memory_used_mib", "uuid", "pci_bus_id",
                    "mig_mode"):
            value, known = getattr(g, key), getattr(cur, key)
            if value is not None and (known is None or key == "name" and "..." in known):
                setattr(cur, key, value)
        if g.processes and not cur.processes:
            cur.processes = g.processes
    env.gpus.sort(key=lambda x: x.index or 0)  # no index sorts as 0 (`or` gives its right operand for None and 0)
