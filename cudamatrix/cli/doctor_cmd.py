"""`cudamatrix doctor`: detect + diagnose. Typer-free (a hot command); options in :mod:`.commands`."""
from __future__ import annotations

from pathlib import Path

from cudamatrix import render
from cudamatrix.cli.common import finish, guarded, has_folder, python_path
from cudamatrix.cli.environments import environments
from cudamatrix.detect.threads import Background
from cudamatrix.diagnose.findings import diagnose, summary_exit
from cudamatrix.errors import UsageError
from cudamatrix.matrix import overlay  # noqa: F401  (imported here, not in the thread: one importer at a time)
from cudamatrix.matrix.load import load_matrix
from cudamatrix.matrix.query import find_gpu
from cudamatrix.safe import text  # noqa: F401
from cudamatrix.safe.shells import aim


@guarded("doctor")
def run_doctor(env: list[Path] | None = None, from_: list[str] | None = None, python: str | None = None,
               as_json: bool = False, data_dir: Path | None = None, all_copies: bool = False) -> None:
    """Detect and diagnose: findings with a code, severity, evidence and fix. Exit 1 on errors.
    A folder of node files in ``env`` is the fleet form: findings per node class (:mod:`.fleetviews`)."""
    if has_folder(env):
        # lazy: the fleet views (fleet.classes, hashlib: 4 ms, python -X importtime) only for a folder of nodes
        from cudamatrix.cli.fleetviews import run_doctor_fleet

        return run_doctor_fleet(env=env, from_=from_, python=python, as_json=as_json, data_dir=data_dir)

    if env and len(env) > 1:
        raise UsageError("doctor reads one environment at a time", hint="run it once per --env file")
    if data_dir or env or from_:
        matrix = load_matrix(str(data_dir) if data_dir else None)
        environment = environments(env or [], from_ or [], python_path(python), all_copies)[0]
    else:
        matrix, environment = _matrix_while_detecting(python, all_copies)
    findings = aim_findings(diagnose(environment, matrix), python_path(python))
    code = summary_exit(findings)
    data = {"findings": [f.to_dict() for f in findings], "environment": environment.to_dict(),
            "matrix_version": matrix.meta.data_version, "healthy": code == 0}
    finish("doctor", code, data, as_json, lambda: render_findings(environment, findings, matrix))


def _matrix_while_detecting(python: str | None, all_copies: bool):
    """The shipped matrix, built in a thread while detect waits on its probes' children (NVML's start alone is
    50-150 ms on a GPU machine), and the live environment. The shipped data is trusted and the overlay never
    raises (:func:`cudamatrix.matrix.overlay.apply`), so only a broken installation fails here, as before."""
    loading = Background(load_matrix, None)
    try:
        environment = environments([], [], python_path(python), all_copies)[0]
    finally:
        matrix = loading.value()  # its error, if any, first: as when the matrix was loaded before detecting
    return matrix, environment


def aim_findings(findings, python: str | None):
    """The findings with each command in their fix pointed at ``--python`` (pasted as shown, it changes that
    environment)."""
    if python:
        for f in findings:
            f.fix = aim(f.fix, python) if f.fix else f.fix
    return findings


def _gpu_text(gpu, matrix) -> str:
    """"NAME (8.9)": the compute capability as reported, else the matrix's for that name, else none."""
    cc = gpu.compute_capability
    if not cc and gpu.name and matrix is not None:
        known = find_gpu(matrix, gpu.name)
        cc = known.compute_capability if known else None
    return f"{gpu.name or 'GPU'} ({cc})" if cc else (gpu.name or "GPU")


def render_findings(environment, findings, matrix=None) -> None:
    c = render.console()
    E = render.escape  # detected and pasted text is shown literally
    drv = environment.driver
    pasted = environment.origin == "report"  # what a paste leaves out is not stated, not absent
    gpus = ", ".join(_gpu_text(g, matrix) for g in environment.gpus) or ("GPU not stated" if pasted else "no GPU")
    c.print(E(f"driver {drv.version or '-'} (CUDA {drv.cuda_version or '-'}, {drv.status}); {gpus}"))
    fws = ", ".join(f"{f.name} {f.version}" + (f" [{f.variant}]" if f.variant else "") for f in environment.frameworks)
    c.print(E(f"frameworks: {fws or ('none stated' if pasted else 'none installed')}"))
    if not findings:
        c.print("[green]healthy:[/] no findings")
        return
    colour = {"error": "red", "warning": "yellow", "info": "blue"}
    for f in findings:
        c.print(f"[{colour[f.severity]}]{f.severity.upper():7}[/] {f.code}: {E(f.title)}")
        for e in f.evidence:
            c.print(f"         [dim]{E(e)}[/]")
        if f.fix:
            c.print(f"         fix: {E(f.fix)}")
