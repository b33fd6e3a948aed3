"""What a journal may make us run: its plan, rebuilt for the interpreter given.

A journal is data. ``fix --resume`` finishes its plan and ``fix --rollback`` reuses its index options, so
each installer step is rebuilt here: the program and its interpreter come from
:func:`cudamatrix.install.plan.installer_argv` for the interpreter given (never the journal's words), and the
rest must be what :func:`cudamatrix.install.plan.make_plan` writes: the installer's own switches
(``-y``, ``--no-deps``, ``--force-reinstall`` / ``--reinstall``, and ``--no-index`` of an undo), index options whose value is one line and
an https URL (http with ``--allow-http``, a local folder for ``--find-links``), and exact pins
``name[extras]==version`` (bare names for an uninstall). A step's environment may hold only uv's index
variables. Anything else is refused with the argument that does not fit, before anything runs.

Credentials are never written to a journal: for a mirror that had them, ``--mirror URL`` given again on
``--resume`` puts them back into the matching index URLs.
"""
from __future__ import annotations

from cudamatrix.errors import UsageError
from cudamatrix.install import journal as journals
from cudamatrix.install.plan import check_url, installer_argv
from cudamatrix.models import Plan, Step
from cudamatrix.safe.text import breaks_line, has_credentials, lazy, strip_credentials
from cudamatrix.schema import replace

_SWITCHES = {"install": {"--no-deps", "--force-reinstall", "--reinstall", "--no-index"}, "uninstall": {"-y"}}
_VALUED = ("--index-url", "-i", "--extra-index-url", "--find-links", "-f", "--trusted-host")
_ENV = {"UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_FIND_LINKS"}  # what make_plan carries over from pip's
_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"  # PEP 508 names
_PIN = lazy(rf"^{_NAME}(?:\[{_NAME}(?:,{_NAME})*\])?==[A-Za-z0-9][A-Za-z0-9.+!_-]*\Z")
_BARE = lazy(rf"^{_NAME}\Z")


def _refuse(step: Step, why: str) -> UsageError:
    return UsageError(f"the interrupted plan's step {step.reason!r} is not one this tool writes ({why}): nothing "
                      "was run or changed", hint="check the environment (cudamatrix doctor) and remove the journal "
                                                  "folder named in the error's detail")


def _split(step: Step, python: str) -> tuple[str, str, list[str]]:
    """(tool, verb, arguments after the installer prefix) of a recorded step for the interpreter ``python``."""
    import os

    argv = step.argv
    verb = "uninstall" if step.kind == "uninstall" else "install"
    if argv[:3] == ["uv", "pip", verb] and len(argv) >= 5 and argv[3] == "--python":
        tool, named, rest = "uv", argv[4], argv[5:]
    elif len(argv) >= 4 and argv[1:4] == ["-m", "pip", verb]:
        tool, named, rest = "pip", argv[0], argv[4:]
    else:
        raise _refuse(step, f"it does not run `pip {verb}` or `uv pip {verb}`")
    if os.path.abspath(named) != os.path.abspath(python):
        raise _refuse(step, f"it runs the interpreter {named[:200]!r}, not {python!r}")
    return tool, verb, rest


def _value(step: Step, option: str, value: str, allow_http: bool, mirror: str | None) -> str:
    if breaks_line(value) or not value:
        raise _refuse(step, f"{option} has an empty value or one that holds a line break")
    if option == "--trusted-host":
        raise _refuse(step, "--trusted-host turns off the index's certificate check")
    value = with_credentials(value, mirror)
    try:
        check_url(value, allow_http)
    except UsageError as exc:
        raise _refuse(step, exc.message) from None
    return value


def _arguments(step: Step, verb: str, args: list[str], allow_http: bool, mirror: str | None) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, inline = arg.partition("=")
        if arg in _SWITCHES[verb]:
            out.append(arg)
        elif name in _VALUED and (eq and name.startswith("--") or not eq and i + 1 < len(args)):
            value = inline if eq else args[i + 1]
            value = _value(step, name, value, allow_http, mirror)
            out += [f"{name}={value}"] if eq else [arg, value]
            i += 0 if eq else 1
        elif (_BARE if verb == "uninstall" else _PIN).match(arg):
            out.append(arg)
        else:
            raise _refuse(step, f"the argument {arg[:80]!r}")
        i += 1
    return out


def rebuilt(plan: Plan, python: str, *, allow_http: bool = False, mirror: str | None = None) -> Plan:
    """``plan`` with each install/uninstall/reinstall step rebuilt for ``python`` (module docstring): each step
    must run ``python`` (the interpreter whose journal it is). Raises UsageError for a step that does not fit,
    before anything runs."""
    steps = []
    for step in plan.steps:
        if step.kind not in ("install", "uninstall", "reinstall"):
            steps.append(step)
            continue
        tool, verb, args = _split(step, python)
        if set(step.env) - _ENV:
            raise _refuse(step, f"its environment sets {sorted(set(step.env) - _ENV)[0]!r}")
        env = {k: _value(step, k, v, allow_http, mirror) for k, v in step.env.items()}
        argv = installer_argv(tool, python, verb) + _arguments(step, verb, args, allow_http, mirror)
        steps.append(replace(step, argv=argv, env=env))
    return replace(plan, python=python, steps=steps)


def with_credentials(url: str, mirror: str | None) -> str:
    """``url`` with the credentials of ``mirror`` put back, when ``url`` is the mirror's URL (or below it) as
    written to the journal (without them); else ``url`` unchanged."""
    if not mirror or not has_credentials(mirror):
        return url
    bare, full = strip_credentials(mirror).rstrip("/"), mirror.rstrip("/")
    if url == bare or url.startswith(bare + "/"):
        return full + url[len(bare):]
    return url


def resume_plan(journal, python: str, *, allow_http: bool = False, mirror: str | None = None) -> Plan:
    """The plan ``fix --resume`` finishes: the journal's, rebuilt for ``python``, once a left-over installer
    proven to be the journal's is stopped. Raises UsageError, having run nothing, otherwise."""
    journals.check_usable(journal, python)
    plan = rebuilt(journal.plan(), python, allow_http=allow_http, mirror=mirror)
    journals.stop_installer(journal)
    return plan
