"""One declaration per option: the typer declarations and the typer-free fast path agree.

Walks every command of the options table and every option typer declares for it, and checks that both
parsers hand the command function the same keyword arguments: with no options (the defaults), with each
option spelled by each of its flags, and with positional arguments."""
from __future__ import annotations

from typing import Any

import pytest
import typer

from cudamatrix.cli import _register, commands
from cudamatrix.cli.fast import parse
from cudamatrix.cli.options import COMMANDS

SAMPLE = {"value": ["x1"], "float": ["2.5"], "path": ["some/file.txt"]}


@pytest.fixture(scope="module")
def group() -> Any:  # typer's click Group (typer vendors click: duck-typed here)
    return typer.main.get_command(_register())


def typer_kwargs(monkeypatch, name: str, argv: list[str]) -> dict:
    """What typer passes to the command function for ``name argv``."""
    seen: dict = {}
    function = COMMANDS[name].function
    monkeypatch.setattr(commands, function, lambda **kw: seen.update(kw))
    _register()(args=[name, *argv], prog_name="cudamatrix", standalone_mode=False)
    return seen


def test_every_typer_command_with_a_fast_path_is_in_the_table(group):
    body_commands = {n for n, c in group.commands.items() if getattr(c.callback, "__module__", None) == commands.__name__}
    assert body_commands == set(COMMANDS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_typer_declares_exactly_the_table(group, name: str):
    cmd = group.commands[name]
    spec = COMMANDS[name]
    options = {p.name: p for p in cmd.params if p.param_type_name == "option"}
    arguments = [p for p in cmd.params if p.param_type_name == "argument"]
    assert set(options) == {o.param for o in spec.options}
    assert [a.name for a in arguments] == ([spec.positional.param] if spec.positional else [])
    for o in spec.options:
        p = options[o.param]
        assert set(p.opts) | set(p.secondary_opts) == set(o.flags), o.param
        assert p.is_flag == (o.kind == "flag"), o.param
        assert p.multiple == (o.kind in ("list", "paths")), o.param
        assert p.hidden == o.hidden, o.param


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_defaults_are_the_same(monkeypatch, name: str):
    assert parse(COMMANDS[name], []) == typer_kwargs(monkeypatch, name, [])


CASES = [(name, o.param, flag) for name, c in sorted(COMMANDS.items()) for o in c.options for flag in o.flags]


@pytest.mark.parametrize("name,param,flag", CASES, ids=[f"{n}{f}" for n, _, f in CASES])
def test_each_option_reads_the_same(monkeypatch, name: str, param: str, flag: str):
    o = COMMANDS[name].option(param)
    if o.kind == "flag":
        argv = [flag]
    elif o.kind in ("list", "paths"):
        argv = [flag, "first", flag, "second"]
    else:
        argv = [flag, *SAMPLE[o.kind]]
    fast = parse(COMMANDS[name], argv)
    assert fast is not None, f"the fast path refuses {argv}"
    assert fast == typer_kwargs(monkeypatch, name, argv)
    assert fast[param] != o.default  # the option was read, not defaulted


@pytest.mark.parametrize("name", sorted(n for n, c in COMMANDS.items() if c.positional))
def test_positional_arguments_read_the_same(monkeypatch, name: str):
    argv = ["torch>=2.3", "--json", "jax"]
    fast = parse(COMMANDS[name], argv)
    assert fast == typer_kwargs(monkeypatch, name, argv)
    assert fast[COMMANDS[name].positional.param] == ["torch>=2.3", "jax"]


@pytest.mark.parametrize("argv", [["--help"], ["--nope"], ["--driver"], ["-o=x"], ["--json=1"]])
def test_anything_else_goes_to_typer(argv):
    name = "lock"
    assert parse(COMMANDS[name], argv) is None


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_command_functions_take_exactly_the_declared_parameters(name: str):
    # both parsers pass every declared option; the functions' own defaults (for Python callers) must agree
    import importlib
    import inspect

    spec = COMMANDS[name]
    func = inspect.unwrap(getattr(importlib.import_module(f"cudamatrix.cli.{spec.module}"), spec.function))
    params = inspect.signature(func).parameters
    declared = {o.param: o.default for o in spec.options}
    if spec.positional:
        declared[spec.positional.param] = None
    assert set(params) == set(declared)
    for param, default in declared.items():
        own = params[param].default
        assert own == default or (own is None and default == []), (param, own, default)


# --- help for people: -h is --help, metavars say what to type, every option listed ---------------------------

def _help(*argv: str) -> str:
    """The help a command prints (the CLI in this process)."""
    import os

    from support.fakes import run_cli

    done = run_cli(list(argv), env=dict(os.environ), text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


_BATCH = """
import contextlib, io, json, sys
from cudamatrix.cli import main
out = []
for argv in json.loads(sys.stdin.read()):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
    out.append([code, buf.getvalue()])
sys.__stdout__.write(json.dumps(out))
"""


def _helps(argvs: list[tuple[str, ...]]) -> list[str]:
    """``_help`` for many command lines in one child interpreter (the CLI's entry point called in turn, its
    output captured): one interpreter start instead of one per command."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).parent.resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", _BATCH], input=json.dumps([list(a) for a in argvs]),
                          capture_output=True, text=True, cwd=root, timeout=300)
    assert done.returncode == 0, done.stderr
    answers = json.loads(done.stdout)
    assert all(code in (0, None) for code, _ in answers), answers
    return [text for _, text in answers]


def _every_command(group: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = [prefix]
    for name, sub in getattr(group, "commands", {}).items():
        out += _every_command(sub, prefix + (name,))
    return out


@pytest.mark.slow
def test_help_has_plain_metavars_and_h_is_help(group):
    import re

    commands = _every_command(group)
    texts = _helps([(*argv, "--help") for argv in commands] + [(*argv, "-h") for argv in commands])
    for argv, text, short in zip(commands, texts, texts[len(commands):], strict=False):
        assert text == short, argv
        assert not re.search(r"<(bool|str|int|float|path|Path|list\[[A-Za-z]+\])>", text), (argv, text)
        assert "--help" in text and "-h" in text
    assert _helps([("lock", "--help")]) == [_help("lock", "--help")]  # the batch prints what a process prints
    assert re.search(r"--version\s+-V\s", _help("--help"))
    lock = _help("lock", "--help")
    for shown in ("--output", "-o", "FILE", "--format", "FORMAT", "--driver", "VERSION", "--gpu", "GPU",
                  "--pins-only", "--glibc", "REQUIREMENT"):
        assert shown in lock, shown


@pytest.mark.slow
def test_env_shell_help_lists_every_shell():
    from cudamatrix.safe.shells import SHELLS

    text = " ".join(_help("env", "--help").split())
    assert all(shell in text for shell in SHELLS) and SHELLS == ("bash", "zsh", "sh", "fish", "powershell")


def test_the_command_process_collects_cycles_after_50000_new_objects_and_a_caller_of_main_keeps_its_own():
    """run() (the console script, python -m cudamatrix) raises the collector's first threshold for the one short
    process a command is; main() called in a process (a test, a notebook) leaves that process's threshold."""
    import gc
    import subprocess
    import sys

    code = ("import atexit, gc, sys; atexit.register(lambda: print('threshold', *gc.get_threshold()));"
            "sys.argv = ['cudamatrix', '--version']; from cudamatrix.cli import run; run()")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    before = gc.get_threshold()
    assert done.returncode == 0 and done.stdout.splitlines()[-1] == f"threshold 50000 {before[1]} {before[2]}"
    from cudamatrix.cli import main

    assert main(["--version"]) == 0 and gc.get_threshold() == before
