"""`cudamatrix lock`: the body, typer-free (options: :mod:`cudamatrix.cli.options`).

A lock is the complete set for the target: the solved frameworks and their nvidia-* wheels resolved with every
other dependency to files by pip against the index (:mod:`cudamatrix.lock.resolve`), written as a hashed
requirements file or a PEP 751 pylock.toml. ``--pins-only`` writes the solved pins alone (offline), and says so.
"""
from __future__ import annotations

from pathlib import Path

from cudamatrix import render
from cudamatrix.cli.answers import matrix_of as _matrix
from cudamatrix.cli.answers import solve_request as _solve
from cudamatrix.cli.common import echo, finish, guarded
from cudamatrix.cli.lockfiles import lock_writer, without_credentials
from cudamatrix.errors import UsageError
from cudamatrix.lock.closure import check_glibc
from cudamatrix.lock.lockfile import local_note, passed_through, write_lock
from cudamatrix.lock.pylock import check_name
from cudamatrix.safe.files import kind_of

FORMATS = ("requirements", "uv", "pylock")


def _check_options(fmt: str, output: Path | None, pins_only: bool, glibc: str | None) -> None:
    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt!r} is not known", hint=" | ".join(FORMATS))
    if pins_only and fmt != "requirements":
        raise UsageError(f"--pins-only writes a requirements file, not --format {fmt}",
                         hint="a pylock.toml names every file with its hash; the uv format holds pins only anyway")
    if fmt == "pylock":
        check_name(output)
    check_glibc(glibc)
    if output is not None:
        _check_output(output)


def _check_output(output: Path) -> None:
    """Refuse an output the lock could not be written to before resolving (minutes against a real index);
    :func:`cudamatrix.safe.files.write_atomic` checks again when it writes."""
    import os

    if str(output) == "":
        raise UsageError("an empty output path was given")
    try:
        kind = kind_of(os.stat(output).st_mode)
    except OSError:
        kind = None
    if kind is not None:
        raise UsageError(f"{output} is {kind}; it was not replaced", hint="give the path of a regular file")
    if not os.path.isdir(os.path.dirname(os.path.realpath(output)) or "."):
        raise UsageError(f"{output}: cannot be written (its folder does not exist)")


@guarded("lock")
def run_lock(requirements: list[str] | None = None, output: Path | None = None, fmt: str = "requirements",
             env: list[Path] | None = None, from_: list[str] | None = None, driver: str | None = None,
             gpu: list[str] | None = None, python: str | None = None, platform: str | None = None,
             cuda_toolkit: str | None = None, mirror: str | None = None, as_json: bool = False,
             data_dir: Path | None = None, per_class: bool = False, pins_only: bool = False,
             glibc: str | None = None, allow_local: bool = False) -> None:
    """The complete, hashed set for the target as a requirements file or pylock.toml (or the uv project
    configuration; ``pins_only``: the solved pins alone); ``per_class``: one per node class of a fleet folder
    (:mod:`.fleet_cmd`). A lock that names a path of this machine is refused unless ``allow_local``."""

    _check_options(fmt, None if per_class else output, pins_only, glibc)
    if per_class:
        if from_:
            raise UsageError("--from cannot be combined with --per-class", hint="--per-class reads a fleet folder (--env DIR)")
        # lazy: the fleet views (fleet.classes, hashlib: 4 ms, python -X importtime) only for a folder of nodes
        from cudamatrix.cli.fleetviews import run_lock_per_class

        return run_lock_per_class(requirements=requirements, output=output, fmt=fmt, env=env, driver=driver,
                                  gpu=gpu, python=python, platform=platform, cuda_toolkit=cuda_toolkit,
                                  mirror=mirror, as_json=as_json, data_dir=data_dir, pins_only=pins_only, glibc=glibc,
                                  allow_local=allow_local)
    matrix = _matrix(data_dir)
    resolved, request, solution = _solve("lock", as_json, matrix, requirements, env, driver, gpu, python,
                                         platform, cuda_toolkit, mirror, from_)
    passthrough, links = passed_through(request.passthrough, solution.pip_args, matrix)
    environments = {t.name: e for t, e in zip(resolved.targets, resolved.environments, strict=False)}
    write = lock_writer(fmt, pins_only, glibc, environments, output.name if output is not None else None,
                        allow_local)
    text, notes = without_credentials(write(solution, resolved.targets, passthrough, links))
    notes += [*solution.notes, *solution.unchecked, *local_note(write.local)]
    if output is not None:
        write_lock(output, text)
    data = {"format": fmt, "path": str(output) if output else None, "complete": fmt != "uv" and not pins_only,
            "text": text, "solution": solution.to_dict(), "local_files": write.local, "notes": notes}

    def human() -> None:
        if output is None:
            echo(text, nl=False)
        else:
            render.console(stderr=True).print(f"wrote {render.escape(output)}")
        for note in notes:
            render.console(stderr=True).print(render.escape(note))

    finish("lock", 0, data, as_json, human)
