"""`cudamatrix check`: gate a requirements file (or what is installed) against the target, typer-free (options are
declared in :mod:`cudamatrix.cli.options`; :mod:`cudamatrix.cli.fast` runs plain invocations without typer)."""
from __future__ import annotations

from pathlib import Path

from cudamatrix import render
from cudamatrix.cli.answers import check_names_on_index
from cudamatrix.cli.answers import matrix_of as _matrix
from cudamatrix.cli.common import check_target_flags, finish, guarded, has_folder
from cudamatrix.cli.targets import resolve
from cudamatrix.errors import UsageError
from cudamatrix.safe.files import read_text
from cudamatrix.solve.checks import check_requirements


@guarded("check")
def run_check(requirement_file: Path | None = None, env: list[Path] | None = None, from_: list[str] | None = None,
              driver: str | None = None,
              gpu: list[str] | None = None, python: str | None = None, platform: str | None = None,
              cuda_toolkit: str | None = None, mirror: str | None = None, as_json: bool = False,
              data_dir: Path | None = None) -> None:
    """Gate a Docker build: exit 0 if the requirements (or what is installed) fit the target, 1 if not.
    A folder of node files in ``env`` is the fleet form, answered per node class (:mod:`.fleetviews`)."""
    if has_folder(env):
        if from_:
            raise UsageError("--from cannot be combined with a fleet folder", hint="--env DIR reads the saved nodes")
        # lazy: the fleet views (fleet.classes, hashlib: 4 ms, python -X importtime) only for a folder of nodes
        from cudamatrix.cli.fleetviews import run_check_fleet

        return run_check_fleet(requirement_file=requirement_file, env=env, driver=driver, gpu=gpu, python=python,
                               platform=platform, cuda_toolkit=cuda_toolkit, mirror=mirror, as_json=as_json,
                               data_dir=data_dir)

    check_target_flags(driver, gpu)
    matrix = _matrix(data_dir)

    resolved = resolve(matrix, env_files=env or [], from_files=from_ or [], driver=driver, gpus=gpu or [],
                       python=python, platform=platform, cuda_toolkit=cuda_toolkit,
                       need_installed=requirement_file is None)
    text = None
    if requirement_file is not None:
        text = read_text(requirement_file, what="requirements file")
    result = check_requirements(matrix, resolved.targets, resolved.installed, text,
                                str(requirement_file) if requirement_file else None, mirror,
                                names=lambda parsed, names: check_names_on_index(matrix, names, parsed))
    code = 0 if result["fits"] else 1

    def human() -> None:
        from rich.markup import escape

        c = render.console()
        E = render.escape
        if result["fits"]:
            n = len(resolved.targets)
            what = ", ".join(result["checked"]) or result.get("note", "")
            c.print(f"[green]fits[/] {escape(what)} on {n} target{'s' if n != 1 else ''}")
        else:
            c.print("[red]does not fit[/]")
            for p in result["problems"]:
                c.print(f"  - {escape(p)}")
            for w in result.get("ways_out", []):
                c.print(f"  → {escape(w)}")
        for line in result.get("unchecked", []):
            c.print(escape(line), soft_wrap=True)
        for line in result.get("skipped", []):
            c.print(escape(f"skipped: {line}"), soft_wrap=True)
        for u in result.get("unverified", []):
            c.print(escape(f"unverified: {u['fact']} is inferred ({u['basis']})"), soft_wrap=True)
        if result.get("base_image"):
            c.print(f"base image: {escape(result['base_image'])}")
        if result.get("python_in_image"):
            c.print(f"Python: {escape(result['python_in_image'])}", soft_wrap=True)
        if result.get("nvidia_require_cuda"):
            c.print(E(f"ENV NVIDIA_REQUIRE_CUDA=\"{result['nvidia_require_cuda']}\""))

    finish("check", code, result, as_json, human)
