"""A fast path for the commands that sit on hot paths (``detect``, ``doctor``, ``fix`` at the top of a
notebook): typer's option processing imports pydantic (~80-100 ms here), so plain invocations of these
commands are parsed here and call the very same command functions. Anything this parser does not know
returns None and goes through typer, which also gives the usual --help and usage errors."""
from __future__ import annotations

from pathlib import Path

# command -> (module, function, {flag: (parameter, kind)}); kind: "flag", "value", "list", "paths"
FAST: dict[str, tuple[str, str, dict[str, tuple[str, str]]]] = {
    "detect": ("detect_cmd", "run_detect", {
        "--json": ("as_json", "flag"), "--python": ("python", "value"), "--from": ("reports", "list"),
        "--env": ("env_file", "value")}),
    "doctor": ("doctor_cmd", "run_doctor", {
        "--json": ("as_json", "flag"), "--python": ("python", "value"), "--from": ("from_", "list"),
        "--env": ("env", "paths")}),
    "fix": ("fix_cmd", "run_fix", {
        "--json": ("as_json", "flag"), "--yes": ("yes", "flag"), "-y": ("yes", "flag"),
        "--python": ("python", "value"), "--framework": ("framework", "value")}),
}


def _parse(argv: list[str], spec: dict[str, tuple[str, str]]) -> dict | None:
    out: dict = {}
    i = 0
    while i < len(argv):
        flag, eq, inline = argv[i].partition("=")
        if flag not in spec:
            return None
        param, kind = spec[flag]
        if kind == "flag":
            if eq:
                return None
            out[param] = True
        else:
            if eq:
                value = inline
            elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                i += 1
                value = argv[i]
            else:
                return None
            if kind == "value":
                out[param] = value
            else:
                out.setdefault(param, []).append(Path(value) if kind == "paths" else value)
        i += 1
    return out


def fast_main(argv: list[str]) -> int | None:
    """Run a plain hot-path command without typer's parsing; None when typer must handle ``argv``.

    The command ends by raising :class:`cudamatrix.cli.common.Done`, which :func:`cudamatrix.cli.main`
    turns into the exit code."""
    if not argv or argv[0] not in FAST:
        return None
    module_name, func_name, spec = FAST[argv[0]]
    given = _parse(argv[1:], spec)
    if given is None:
        return None
    import importlib

    func = getattr(importlib.import_module(f"{__package__}.{module_name}"), func_name)
    func(**given)
    return 0
