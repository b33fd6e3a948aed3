"""`cudamatrix fleet gather`, and the fleet forms of other commands: `lock --per-class`, `check --env DIR`,
`doctor --env DIR`. Typer-free bodies (the options are declared in :mod:`cudamatrix.cli.commands`)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cudamatrix import render
from cudamatrix.cli.common import finish, guarded
from cudamatrix.errors import Exit, UsageError

E = render.escape  # node names, GPU names, paths and messages are text, never rich markup

if TYPE_CHECKING:
    from rich.progress import Progress


def _matrix(data_dir: Path | None):
    from cudamatrix.matrix.data import load_matrix

    return load_matrix(str(data_dir) if data_dir else None)


def _no_target_flags(**flags) -> None:
    given = [f"--{k.replace('_', '-')}" for k, v in flags.items() if v]
    if given:
        raise UsageError(f"{', '.join(given)} cannot be combined with a fleet folder",
                         hint="each node's saved environment describes that node")


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
    from cudamatrix.fleet import gather

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


def _nodes(names: list[str]) -> str:
    from cudamatrix.fleet.classes import abbreviate

    return abbreviate(names)


@guarded("lock")
def run_lock_per_class(requirements: list[str] | None = None, output: Path | None = None,
                       fmt: str = "requirements", env: list[Path] | None = None, driver: str | None = None,
                       gpu: list[str] | None = None, python: str | None = None, platform: str | None = None,
                       cuda_toolkit: str | None = None, mirror: str | None = None, as_json: bool = False,
                       data_dir: Path | None = None, pins_only: bool = False, glibc: str | None = None,
                       allow_local: bool = False) -> None:
    """One lock for the whole fleet when one set fits, else one per node class, with locks.json mapping each
    class to its lock, its Ray label selector and runtime_env, and its Slurm constraint. Each lock is the
    complete, hashed set for its nodes unless ``pins_only``. Exit 3 when a class has no consistent set (the
    others are still written)."""
    import json

    from cudamatrix.cli.lockfiles import lock_writer
    from cudamatrix.fleet.perclass import MAPPING, load_fleet, lock_per_class

    if fmt not in ("requirements", "uv"):
        raise UsageError(f"--format {fmt!r} is not known", hint="requirements | uv")
    if not env:
        raise UsageError("--per-class needs the fleet: --env DIR (or several --env files)")
    if output is None:
        raise UsageError("--per-class needs -o DIR (the folder for the locks)")
    if output.exists() and not output.is_dir():
        raise UsageError(f"-o {output}: exists and is not a folder")
    _no_target_flags(driver=driver, gpu=gpu, python=python, platform=platform, cuda_toolkit=cuda_toolkit)
    matrix = _matrix(data_dir)
    fleet = load_fleet(matrix, env)
    write = lock_writer(fmt, pins_only, glibc, dict(zip(fleet.names, fleet.environments, strict=False)),
                        allow_local=allow_local)
    files, mapping = lock_per_class(matrix, fleet, list(requirements or []), fmt, mirror, write=write)
    from cudamatrix.cli.lockfiles import CREDENTIALS_NOTE
    from cudamatrix.safe.files import write_atomic
    from cudamatrix.safe.text import has_credentials, strip_credentials

    texts = {**files, MAPPING: json.dumps(mapping, indent=2) + "\n"}
    notes = [CREDENTIALS_NOTE] if any(has_credentials(t) for t in texts.values()) else []
    try:
        output.mkdir(parents=True, exist_ok=True)
        for name, text in texts.items():  # through the safe writer: an exclusive temp file, no planted link followed
            write_atomic(output / name, strip_credentials(text), follow_links=False)
    except OSError as exc:
        raise UsageError(f"{output}: cannot be written ({exc.strerror or exc})") from None
    code = Exit.NO_SOLUTION if mapping["unsolved"] else Exit.OK
    data = {"path": str(output), "files": sorted(files) + [MAPPING], **mapping, "local_files": write.local,
            "notes": notes}

    def human() -> None:
        c = render.console()
        if mapping["single"]:
            c.print(f"one set fits all {mapping['nodes']} nodes ({len(fleet.classes)} classes): "
                    f"{E(output / next(iter(files)))}")
        else:
            c.print(f"no single set fits all {mapping['nodes']} nodes; one lock per class in {E(output)}:")
        for cls in mapping["classes"]:
            c.print(f"  {cls['id']} -> {cls['lock']}  {', '.join(cls['frameworks'])}  "
                    f"[dim]{E(cls['description'])}; {len(cls['nodes'])} node(s); {cls['slurm']['constraint']}[/]")
        for cls in mapping["unsolved"]:
            c.print(f"  [red]{cls['id']}: no consistent set[/] ({E(_nodes(cls['nodes']))})")
            for cause in cls["causes"]:
                c.print(f"    - {E(cause['message'])}")
        c.print(f"mapping: {E(output / MAPPING)}")
        for note in notes:
            render.console(stderr=True).print(E(note))

    finish("lock", code, data, as_json, human)


@guarded("check")
def run_check_fleet(requirement_file: Path | None = None, env: list[Path] | None = None, driver: str | None = None,
                    gpu: list[str] | None = None, python: str | None = None, platform: str | None = None,
                    cuda_toolkit: str | None = None, mirror: str | None = None, as_json: bool = False,
                    data_dir: Path | None = None) -> None:
    """The pre-job gate over a fleet folder: exit 0 when the requirements fit every node, 1 naming the blocking
    classes and their nodes."""
    from cudamatrix.fleet.perclass import check_fleet, load_fleet

    _no_target_flags(driver=driver, gpu=gpu, python=python, platform=platform, cuda_toolkit=cuda_toolkit)
    matrix = _matrix(data_dir)
    fleet = load_fleet(matrix, env or [])
    text = None
    if requirement_file is not None:
        try:
            text = requirement_file.read_text(errors="replace")
        except OSError as exc:
            raise UsageError(f"{requirement_file}: cannot be read ({exc.strerror})") from None
    result = check_fleet(matrix, fleet, text, str(requirement_file) if requirement_file else None, mirror)
    code = Exit.OK if result["fits"] else Exit.PROBLEMS

    def human() -> None:
        c = render.console()
        if result["fits"]:
            c.print(f"[green]fits[/] all {result['nodes']} nodes ({len(fleet.classes)} classes)")
        else:
            c.print(f"[red]does not fit[/] the fleet ({result['nodes']} nodes, {len(fleet.classes)} classes)")
        for cls in result["blocking"]:
            c.print(f"  [red]blocks[/] {cls['id']} ({E(cls['description'])}): {E(_nodes(cls['nodes']))}")
            for p in cls["problems"]:
                c.print(f"    - {E(p)}")
        if not result["fits"] and not result["blocking"]:
            c.print("  every class fits on its own, but no one set fits them all: "
                    "use `cudamatrix lock --per-class` and one image per class")
        if result.get("base_image"):
            c.print(f"base image: {E(result['base_image'])}")

    finish("check", code, result, as_json, human)


@guarded("doctor")
def run_doctor_fleet(env: list[Path] | None = None, from_: list[str] | None = None, python: str | None = None,
                     as_json: bool = False, data_dir: Path | None = None) -> None:
    """doctor on every node of a fleet folder, summarised per class. Exit 1 when a node has an error."""
    from cudamatrix.fleet.perclass import doctor_fleet, load_fleet

    if from_ or python:
        raise UsageError("a fleet folder cannot be combined with --from or --python",
                         hint="each node's saved environment describes that node")

    matrix = _matrix(data_dir)
    fleet = load_fleet(matrix, env or [])
    data = doctor_fleet(matrix, fleet)
    code = Exit.OK if data["healthy"] else Exit.PROBLEMS

    def human() -> None:
        c = render.console()
        colour = {"error": "red", "warning": "yellow", "info": "blue"}
        c.print(f"{data['nodes']} node(s) in {len(data['classes'])} class(es)")
        for cls in data["classes"]:
            state = "[green]healthy[/]" if cls["healthy"] else "[red]errors[/]"
            c.print(f"[bold]{cls['id']}[/] {state}  {E(cls['description'])}  [dim]{E(_nodes(cls['nodes']))}[/]")
            for f in cls["findings"]:
                share = f"{len(f['nodes'])}/{len(cls['nodes'])} nodes"
                c.print(f"  [{colour[f['severity']]}]{f['severity'].upper():7}[/] {f['code']}: {E(f['title'])} "
                        f"[dim]({share})[/]")
                if f["fix"]:
                    c.print(f"          fix: {E(f['fix'])}")

    finish("doctor", code, data, as_json, human)
