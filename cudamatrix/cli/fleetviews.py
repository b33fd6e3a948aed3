"""The fleet forms of other commands, answered per node class: `lock --per-class`, `check --env DIR`, `doctor
--env DIR`. Not a command module of its own: the `lock`, `check` and `doctor` commands hand a fleet folder here
(:mod:`.lock_cmd`, :mod:`.check_cmd`, :mod:`.doctor_cmd`), so that no command module imports another. Those
import this module only for a fleet folder, so its own imports (the lock writers, the per-class fleet) sit at its top."""
from __future__ import annotations

from pathlib import Path

from cudamatrix import render
from cudamatrix.cli.answers import matrix_of, no_target_flags
from cudamatrix.cli.common import finish, guarded
from cudamatrix.cli.lockfiles import CREDENTIALS_NOTE, lock_writer
from cudamatrix.errors import Exit, UsageError
from cudamatrix.fleet.classes import abbreviate
from cudamatrix.fleet.perclass import MAPPING, check_fleet, doctor_fleet, load_fleet, lock_per_class
from cudamatrix.safe.files import write_atomic
from cudamatrix.safe.text import has_credentials, strip_credentials

E = render.escape  # node names, GPU names, paths and messages are text, never rich markup


def _nodes(names: list[str]) -> str:
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

    if fmt not in ("requirements", "uv"):
        raise UsageError(f"--format {fmt!r} is not known", hint="requirements | uv")
    if not env:
        raise UsageError("--per-class needs the fleet: --env DIR (or several --env files)")
    if output is None:
        raise UsageError("--per-class needs -o DIR (the folder for the locks)")
    if output.exists() and not output.is_dir():
        raise UsageError(f"-o {output}: exists and is not a folder")
    no_target_flags(driver=driver, gpu=gpu, python=python, platform=platform, cuda_toolkit=cuda_toolkit)
    matrix = matrix_of(data_dir)
    fleet = load_fleet(matrix, env)
    write = lock_writer(fmt, pins_only, glibc, dict(zip(fleet.names, fleet.environments, strict=False)),
                        allow_local=allow_local)
    files, mapping = lock_per_class(matrix, fleet, list(requirements or []), fmt, mirror, write=write)
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
    no_target_flags(driver=driver, gpu=gpu, python=python, platform=platform, cuda_toolkit=cuda_toolkit)
    matrix = matrix_of(data_dir)
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
    if from_ or python:
        raise UsageError("a fleet folder cannot be combined with --from or --python",
                         hint="each node's saved environment describes that node")

    matrix = matrix_of(data_dir)
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
