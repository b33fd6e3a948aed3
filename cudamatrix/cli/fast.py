"""A fast path for plain invocations: typer's option processing imports pydantic (~80-100 ms here), which
would double the cost of `detect`, `doctor`, `fix` (at the top of every notebook) and `solve`. Invocations
made only of the options below are parsed here and call the very same command functions as typer does;
anything else (--help, an unknown option, a missing value) returns None and goes through typer, which gives
the usual help and usage errors."""
from __future__ import annotations

from pathlib import Path

_TARGET = {
    "--env": ("env", "paths"), "--driver": ("driver", "value"), "--gpu": ("gpu", "list"),
    "--python": ("python", "value"), "--platform": ("platform", "value"),
    "--cuda-toolkit": ("cuda_toolkit", "value"), "--mirror": ("mirror", "value"), "--json": ("as_json", "flag"),
}

# command -> (module, function, positional parameter or None, {option: (parameter, kind)})
# kinds: "flag", "value", "path", "list" (repeatable), "paths" (repeatable paths)
FAST: dict[str, tuple[str, str, str | None, dict[str, tuple[str, str]]]] = {
    "detect": ("detect_cmd", "run_detect", None, {
        "--json": ("as_json", "flag"), "--python": ("python", "value"), "--from": ("reports", "list"),
        "--env": ("env_file", "value")}),
    "doctor": ("doctor_cmd", "run_doctor", None, {
        "--json": ("as_json", "flag"), "--python": ("python", "value"), "--from": ("from_", "list"),
        "--env": ("env", "paths")}),
    "fix": ("fix_cmd", "run_fix", None, {
        "--json": ("as_json", "flag"), "--yes": ("yes", "flag"), "-y": ("yes", "flag"),
        "--python": ("python", "value"), "--framework": ("framework", "value"), "--resume": ("resume", "flag"),
        "--rollback": ("rollback", "flag"), "--no-verify": ("no_verify", "flag")}),
    "solve": ("solve_cmd", "run_solve", "requirements", {**_TARGET, "--explain": ("explain", "flag")}),
    "lock": ("solve_cmd", "run_lock", "requirements", {
        **_TARGET, "-o": ("output", "path"), "--output": ("output", "path"), "--format": ("fmt", "value")}),
    "check": ("solve_cmd", "run_check", None, {
        **_TARGET, "-r": ("requirement_file", "path"), "--requirement": ("requirement_file", "path")}),
    "env": ("solve_cmd", "run_env", None, {
        "--shell": ("shell", "value"), "--env": ("env", "paths"), "--python": ("python", "value"),
        "--json": ("as_json", "flag")}),
}


def _parse(argv: list[str], positional: str | None, spec: dict[str, tuple[str, str]]) -> dict | None:
    out: dict = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("-") or arg == "-":
            if positional is None:
                return None
            out.setdefault(positional, []).append(arg)
            i += 1
            continue
        flag, eq, inline = arg.partition("=")
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
            elif kind == "path":
                out[param] = Path(value)
            else:
                out.setdefault(param, []).append(Path(value) if kind == "paths" else value)
        i += 1
    return out


def fast_main(argv: list[str]) -> int | None:
    """Run a plain invocation without typer's parsing; None when typer must handle ``argv``.

    The command ends by raising :class:`cudamatrix.cli.common.Done`, which :func:`cudamatrix.cli.main`
    turns into the exit code."""
    if argv in (["--version"], ["-V"]):
        return _version()
    if not argv or argv[0] not in FAST:
        return None
    module_name, func_name, positional, spec = FAST[argv[0]]
    given = _parse(argv[1:], positional, spec)
    if given is None:
        return None
    import importlib

    func = getattr(importlib.import_module(f"{__package__}.{module_name}"), func_name)
    func(**given)
    return 0


def _version() -> int:
    """``cudamatrix --version``: the package version and the matrix data version it ships."""
    import json
    import sys
    from importlib import metadata

    try:
        version = metadata.version("cudamatrix")
    except metadata.PackageNotFoundError:
        version = "unknown (not installed)"
    from cudamatrix.matrix.data import default_data_dir

    try:
        meta = json.loads((default_data_dir() / "meta.json").read_text())
        data = f"matrix {meta.get('data_version')} (schema {meta.get('schema_version')})"
    except (OSError, ValueError):
        data = "matrix data not found"
    sys.stdout.write(f"cudamatrix {version}, {data}\n")
    return 0
