"""`cudamatrix env`: the exports that fix library paths for an environment, and what they change (the loader
model, :mod:`cudamatrix.ldso.libpaths`), typer-free like the other command bodies."""
from __future__ import annotations

import os
from pathlib import Path

from cudamatrix import render
from cudamatrix.cli.common import echo, finish, guarded, python_path
from cudamatrix.cli.environments import environments
from cudamatrix.errors import UsageError
from cudamatrix.ldso.libpaths import after_change, grouped, library_path_fix, winner_folder, wrong_loads
from cudamatrix.safe.shells import SHELLS, NotExact, known_shell
from cudamatrix.safe.shells import export_line as exact_line


@guarded("env")
def run_env(shell: str = "bash", env: list[Path] | None = None, python: str | None = None,
            as_json: bool = False) -> None:
    """Print the exports that fix library paths for this environment (nothing when nothing needs fixing)."""
    name = known_shell(shell)
    if name is None:
        raise UsageError(f"--shell {shell!r} is not known", hint=" | ".join(SHELLS))
    if env and len(env) > 1:
        raise UsageError("env reads one environment at a time")
    environment = environments(env or [], [], python_path(python))[0]
    changes = library_path_fix(environment)
    advice = env_advice(environment, changes, after_change(environment, changes) if changes else None)
    try:
        lines = [exact_line(name, k, v) for k, v in changes.items()]
    except NotExact as exc:  # a line that would set other bytes is never printed
        raise UsageError(f"env cannot write an exact {name} line: {exc}", hint="rename the folder" + (
            ", or use --shell bash, zsh, sh or fish, which take any byte" if name == "powershell" else "")) from None

    def human() -> None:
        for line in lines:
            echo(line)
        err = render.console(stderr=True)  # stdout stays exactly the exports (eval "$(cudamatrix env)")
        for line in advice:
            err.print(line, soft_wrap=True, markup=False, highlight=False)

    finish("env", 0, {"env": changes, "shell": name, "lines": lines, "advice": advice}, as_json, human)


def env_advice(environment, changes: dict[str, str], left=None) -> list[str]:
    """What the exports do: one line per framework and folder (or preloaded file) whose loads they stop, the
    loads no variable stops, and what the loader model predicts once they apply (``left``: the wrong loads it
    still predicts, None when it could not check); a plain "nothing to change" when nothing loads wrong."""
    wrong = wrong_loads(environment)
    if not environment.library_loads:
        if changes:
            return []
        if environment.origin == "live":  # detected here: no framework of it loads a CUDA library
            return ["nothing to change: no installed framework loads CUDA libraries"]
        return ["nothing to change: this environment carries no loader prediction (pasted or saved by an older "
                "version); run cudamatrix env on the machine"]
    unknown = [n.message for n in environment.notes if n.probe == "loader" and "not predicted" in n.message]
    if not wrong and unknown:
        return ["nothing to change for the loads the model predicts; not predicted: " + "; ".join(unknown)]
    if not wrong:
        return ["nothing to change: every library each framework maps, and every library those open, resolves "
                "to the framework's own copy"]
    out = [_advice_line(group) for group in grouped(wrong)]
    if left is not None and changes:
        out.append("# after this change every library the frameworks map resolves to their own copies (loader model)"
                   if not left else "# still wrong after this change: " + "; ".join(
                       f"{w.load.soname} -> {w.load.path} ({w.load.rule})" for w in left))
    return out


def _advice_line(group) -> str:
    load = group[0].load
    names = ", ".join(w.load.soname for w in group)
    own = sorted({w.load.expected for w in group if w.load.expected})
    instead = f" instead of {own[0] if len(own) == 1 else 'its own copies in ' + winner_folder_of(own)}" if own else ""
    if group[0].cause == "LD_PRELOAD":
        return (f"# {names}: LD_PRELOAD puts {load.path} in place of {load.expected}; a running notebook kernel keeps "
                "it until restarted without it")
    if group[0].cause == "LD_LIBRARY_PATH":
        return f"# {load.framework} maps {names} from {winner_folder(load)} (LD_LIBRARY_PATH){instead}"
    return (f"# {names}: {load.framework} maps {load.path} ({load.rule}); no variable changes that: restart, and "
            "import the framework before what loaded that copy")


def winner_folder_of(paths: list[str]) -> str:
    """The folder of the first path (the framework's own copies of one library family share it)."""

    return os.path.dirname(paths[0])
