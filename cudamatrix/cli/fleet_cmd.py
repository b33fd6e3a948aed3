"""`cudamatrix fleet gather`: a typer-free body (the options are declared in :mod:`cudamatrix.cli.commands`).
The fleet forms of other commands (`lock --per-class`, `check --env DIR`, `doctor --env DIR`) are
:mod:`cudamatrix.cli.fleetviews`."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cudamatrix import render
from cudamatrix.cli.common import finish, guarded
from cudamatrix.errors import Exit, UsageError
from cudamatrix.fleet import gather

E = render.escape  # node names, GPU names, paths and messages are text, never rich markup

if TYPE_CHECKING:
    from rich.progress import Progress


class _Progress:
    """One line per node: a rich progress bar when stderr is a terminal, else plain lines on stderr."""

    def __init__(self) -> None:
        self.bar: Progress | None = None
        self.task: Any = None  # rich's TaskID once the bar is up

    def __call__(self, done: int, total: int, node: str, status: str) -> None:
        if self.bar is None and sys.stderr.isatty():
            from rich.progress import Progress

            self.bar = Progress(console=render.console(stderr=True), transient=True)
            self.bar.start()
            self.task = self.bar.add_task("gathering", total=total or None)
        if self.bar is not None:
            self.bar.update(self.task, completed=done, description=E(f"{node}: {status}"[:60]))
        else:
            sys.stderr.write(render.inert(f"[{done}/{total or '?'}] {node}: {status}") + "\n")
            sys.stderr.flush()

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()


@guarded("fleet gather")
def run_gather(engine: str = "ray", output: Path | None = None, address: str | None = None,
               partition: str | None = None, nodes: int | None = None, timeout: float = 300.0,
               as_json: bool = False) -> None:
    """Detect on every node (Ray or Slurm); write OUTPUT/<node>.json and OUTPUT/fleet.json. Exit 1 when a node
    did not answer."""
    if engine not in ("ray", "slurm"):
        raise UsageError(f"--engine {engine!r} is not known", hint="ray | slurm")
    if output is None:
        raise UsageError("fleet gather needs -o DIR (the folder for the node files)")
    if output.exists() and not output.is_dir():
        raise UsageError(f"-o {output}: exists and is not a folder")
    if timeout <= 0:
        raise UsageError("--timeout must be positive")
    if engine == "ray" and (partition or nodes is not None):
        raise UsageError("--partition and --nodes are Slurm options", hint="--engine slurm")
    if engine == "slurm" and address:
        raise UsageError("--address is a Ray option", hint="--engine ray")
    progress = _Progress()
    try:
        if engine == "ray":
            gathered = gather.gather_ray(address, timeout, progress)
        else:
            gathered = gather.gather_slurm(partition, nodes, timeout, progress)
    finally:
        progress.stop()
    index = gather.write_fleet(gathered, output)
    code = Exit.PROBLEMS if index["failed"] or not index["nodes"] else Exit.OK
    data = {"path": str(output), **index}

    def human() -> None:
        c = render.console()
        c.print(f"{len(index['nodes'])} node(s) in {len(index['classes'])} class(es), written to {E(output)} "
                f"({gathered.engine}, {gathered.seconds:.1f}s)")
        for cls in index["classes"]:
            c.print(f"  {cls['id']}  {len(cls['nodes']):>4} node(s)  {E(cls['description'])}")
        for f in index["failed"]:
            c.print(f"  [red]failed[/] {E(f['node'])}: {E(f['error'])}")

    finish("fleet gather", code, data, as_json, human)
