"""`cudamatrix detect`: what is on this machine (or in pasted reports, or in a saved file). Typer-free:
the options are declared in :mod:`cudamatrix.cli.commands`."""
from __future__ import annotations

from cudamatrix import detect as stage
from cudamatrix import render
from cudamatrix.cli.common import check_timeout, finish, guarded, python_path
from cudamatrix.errors import UsageError


@guarded("detect")
def run_detect(as_json: bool = False, python: str | None = None, reports: list[str] | None = None,
               env_file: str | None = None, timeout: float = 5.0, all_copies: bool = False) -> None:
    """Detect driver, GPUs, CUDA libraries, toolkits, frameworks and context. Exit 0; 2 on bad input."""
    if sum(x is not None and x != [] for x in (python, reports, env_file)) > 1:
        raise UsageError("--python, --from and --env are exclusive", hint="pick one source of the environment")
    check_timeout(timeout)
    if env_file is not None:
        env = stage.load_environment(env_file)
    elif reports:
        # lazy: the paste readers, 9 ms of detect's imports (python -X importtime, median of 5), only for --from
        from cudamatrix.pastes.reports import from_report_files

        env = from_report_files(reports)
    else:
        env = stage.detect(python_path(python), timeout=timeout, all_copies=all_copies)
    finish("detect", 0, {"environment": env.to_dict()}, as_json, lambda: _human(env))


def _human(env) -> None:
    """The environment for people: one section after the other (:data:`_SECTIONS`)."""
    c = render.console()
    for section in _SECTIONS:
        section(c, env, render)


def _driver(c, env, render) -> None:
    E = render.escape  # everything detected or pasted is shown literally
    d = env.driver
    status = {"ok": "[green]ok[/]", "absent": "[red]absent[/]", "no_device": "[yellow]no device visible[/]",
              "mismatch": "[red]driver/library version mismatch[/]", "error": "[red]error[/]",
              "unknown": "[dim]unknown[/]"}[d.status]
    head = f"[bold]driver[/] {E(d.version or '-')}  supports CUDA {E(d.cuda_version or '-')}  status {status}"
    if d.source:
        head += f"  [dim](from {E(d.source)})[/]"
    c.print(head)
    if d.error:
        c.print(f"  [red]{E(d.error)}[/]", markup=True)


def _gpus(c, env, render) -> None:
    if env.gpus:
        c.print(render.table("GPUs", ["#", "name", "cc", "memory used / total MiB", "MIG", "processes"], [
            [g.index, g.name, g.compute_capability,
             f"{g.memory_used_mib if g.memory_used_mib is not None else '?'} / {g.memory_total_mib or '?'}",
             g.mig_mode, len(g.processes) or ""] for g in env.gpus], optional=("MIG", "processes")))


def _libraries(c, env, render) -> None:
    if env.libraries:
        c.print(render.table("CUDA libraries", ["name", "soname", "version", "origin", "loader", "path"], [
            [lib.name, lib.soname, lib.version, lib.origin,
             "stub" if lib.stub else ("first" if lib.loaded_first else ("shadowed" if lib.shadowed_by else "")),
             lib.path] for lib in env.libraries], optional=("name", "origin"), paths=("path",)))


def _toolkits_and_python(c, env, render) -> None:
    E = render.escape
    if env.toolkits:
        c.print("[bold]toolkits[/] " + E(", ".join(f"{t.version} ({t.source}{', ' + t.path if t.path else ''})"
                                               for t in env.toolkits)))
    p = env.python
    if p.version:
        c.print("[bold]python[/] " + E(f"{p.version} {p.platform or ''} {p.executable or ''}"
                + (f"  installer {p.installer}" if p.installer else "")))


def _packages(c, env, render) -> None:
    E = render.escape
    if env.frameworks:
        c.print(render.table("frameworks", ["name", "version", "variant", "cuda", "cudnn", "from"], [
            [f.name, f.version, f.variant, f.cuda, f.cudnn, f.source] for f in env.frameworks], optional=("from",)))
    nvidia = {k: v for k, v in env.packages.items() if k.startswith("nvidia-")}
    if nvidia:
        c.print("[bold]nvidia wheels[/] " + E(", ".join(f"{k} {v}" for k, v in nvidia.items())))
    for fc in env.file_conflicts[:10]:
        c.print(f"[yellow]file installed twice[/] {E(fc.path)}: {E(', '.join(fc.distributions))}")


def _context(c, env, render) -> None:
    E = render.escape
    ctx = env.context
    where = [x for x in (ctx.os, "WSL" if ctx.wsl else None, ctx.container, "Colab" if ctx.colab else None,
                         "Kaggle" if ctx.kaggle else None, "Jupyter" if ctx.jupyter else None) if x]
    if where:
        c.print("[bold]context[/] " + E(", ".join(where)))
    for k, v in ctx.env.items():
        c.print(f"  [dim]{E(k)}={E(v)}[/]")


def _notes(c, env, render) -> None:
    E = render.escape
    colour = {"info": "dim", "warning": "yellow", "error": "red"}
    for n in env.notes:
        c.print(f"[{colour[n.level]}]{n.level}: {E(n.probe)}: {E(n.message)}[/]", markup=True)
    if env.timings_ms.get("total") is not None:
        c.print(f"[dim]detected in {env.timings_ms['total']:.0f} ms[/]")


_SECTIONS = (_driver, _gpus, _libraries, _toolkits_and_python, _packages, _context, _notes)
