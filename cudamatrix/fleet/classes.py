"""Node classes: the nodes of a fleet whose hardware, driver and toolkit facts are identical.

Machines in one class get the same answer from the solver and the same findings about their GPU stack, so
a fleet of 1,000 nodes costs one solve per class at most. A class id is a short hash of those facts: the
same facts give the same id on every run, on every machine, in every folder.
"""
from __future__ import annotations

import hashlib
import json

from cudamatrix.models import Environment
from cudamatrix.schema import field, record


def class_facts(env: Environment) -> dict:
    """The facts that define a node's class: platform, GPUs (name, compute capability, memory), driver
    (version, supported CUDA, status), CUDA toolkits, and the Python minor version (a wheel set is per
    interpreter: two nodes that differ only in Python cannot share a lock)."""
    python = env.python.version or ""
    minor = ".".join(python.split(".")[:2]) if python else None
    return {
        "platform": env.python.platform,
        "gpus": sorted([g.name or "", g.compute_capability or "", g.memory_total_mib or 0] for g in env.gpus),
        "driver": {"version": env.driver.version, "cuda_version": env.driver.cuda_version,
                   "status": env.driver.status},
        "toolkits": sorted({t.version for t in env.toolkits if t.version}),
        "python": minor,
    }


def class_id(facts: dict) -> str:
    """A stable id for a class: ``c-`` and the first 10 hex digits of the SHA-256 of its facts as canonical JSON."""
    text = json.dumps(facts, sort_keys=True, separators=(",", ":"))
    return "c-" + hashlib.sha256(text.encode()).hexdigest()[:10]


def describe(facts: dict) -> str:
    """One line for people: ``2x NVIDIA H100 (9.0); driver 550.54.15; Python 3.11; linux_x86_64``."""
    counts: dict[str, int] = {}
    for name, cc, _ in facts["gpus"]:
        label = f"{name or 'GPU'} ({cc or '?'})"
        counts[label] = counts.get(label, 0) + 1
    gpus = ", ".join(f"{n}x {label}" if n > 1 else label for label, n in counts.items()) or "no GPU"
    drv = facts["driver"]
    driver = f"driver {drv['version']}" if drv["version"] else f"driver {drv['status']}"
    toolkits = f"; toolkit {', '.join(facts['toolkits'])}" if facts["toolkits"] else ""
    return f"{gpus}; {driver}{toolkits}; Python {facts['python'] or '?'}; {facts['platform'] or '?'}"


@record
class NodeClass:
    """Nodes with identical class facts. ``members`` are indexes into the caller's node list."""

    id: str
    facts: dict
    nodes: list[str] = field(default_factory=list)
    members: list[int] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"id": self.id, "description": describe(self.facts), "facts": self.facts, "nodes": self.nodes}


def group(named: list[tuple[str, Environment]]) -> list[NodeClass]:
    """Group ``(node name, Environment)`` pairs into classes: largest first, then by id (a stable order)."""
    by_id: dict[str, NodeClass] = {}
    for i, (name, env) in enumerate(named):
        facts = class_facts(env)
        cid = class_id(facts)
        cls = by_id.setdefault(cid, NodeClass(cid, facts))
        cls.nodes.append(name)
        cls.members.append(i)
    return sorted(by_id.values(), key=lambda c: (-len(c.nodes), c.id))


def abbreviate(names: list[str], limit: int = 5) -> str:
    """``a, b, c and 40 more`` for messages about many nodes."""
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")
