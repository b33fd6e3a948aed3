"""``make_plan(environment, solution) -> Plan``: the inert list of steps that turns what is installed
into the solution. Nothing here runs anything; :mod:`cudamatrix.install.apply` executes install steps.

Installer backend: ``uv pip install --python <interp>`` when ``uv`` is on PATH (much faster),
else ``<interp> -m pip install``; always the interpreter being fixed. The user's own pip
configuration (PIP_INDEX_URL, pip.conf) is left alone: only the solution's index arguments are added.
"""
from __future__ import annotations

import os
import shutil
import sys
from urllib.parse import urlsplit

from cudamatrix.errors import UsageError
from cudamatrix.install.remedies import reinstalls, remedies, removals
from cudamatrix.models import Environment, Finding, Pin, Plan, Removal, Solution, Step
from cudamatrix.names import canonical
from cudamatrix.solve.indexes import mirror_url

# pip options that take a value, among those a solution may carry
_INDEX_OPTIONS = ("--index-url", "-i", "--extra-index-url", "--find-links", "-f", "--trusted-host")
_URL_OPTIONS = ("--index-url", "-i", "--extra-index-url", "--find-links", "-f")
INSTALL_TIMEOUT_S = 1800.0


def choose_installer(installer: str | None = None) -> str:
    """``"uv"`` when asked for, or when found on PATH and no pip configuration file is in force (uv does not
    read pip.conf, so a user's configured index would be lost); else ``"pip"``."""
    if installer in ("uv", "pip"):
        return installer
    if installer is not None:
        raise UsageError(f"unknown installer {installer!r}", hint="choose uv or pip")
    return "uv" if shutil.which("uv") and not pip_config_files() else "pip"


def pip_config_files() -> list[str]:
    """The pip configuration files pip would read (PIP_CONFIG_FILE=os.devnull turns them all off)."""
    named = os.environ.get("PIP_CONFIG_FILE")
    if named is not None:
        return [] if named == os.devnull else [named]
    home = os.path.expanduser("~")
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    dirs = os.environ.get("XDG_CONFIG_DIRS", "/etc/xdg").split(os.pathsep)
    candidates = ["/etc/pip.conf", *(os.path.join(d, "pip", "pip.conf") for d in dirs),
                  os.path.join(xdg, "pip", "pip.conf"), os.path.join(home, ".pip", "pip.conf")]
    if os.environ.get("VIRTUAL_ENV"):
        candidates.append(os.path.join(os.environ["VIRTUAL_ENV"], "pip.conf"))
    return [c for c in candidates if os.path.isfile(c)]


# pip's index variables and the uv variables that mean the same: uv does not read PIP_*
_PIP_TO_UV = {"PIP_INDEX_URL": "UV_INDEX_URL", "PIP_EXTRA_INDEX_URL": "UV_EXTRA_INDEX_URL",
              "PIP_FIND_LINKS": "UV_FIND_LINKS"}


def uv_env_from_pip(environ: dict[str, str]) -> dict[str, str]:
    """The user's pip index variables as uv variables, where uv's own are not set."""
    return {uv: environ[pip] for pip, uv in _PIP_TO_UV.items() if environ.get(pip) and not environ.get(uv)}


def installer_argv(installer: str, python: str, verb: str = "install") -> list[str]:
    """The command prefix that runs ``verb`` (install / uninstall) for the interpreter ``python``."""
    if installer == "uv":
        return ["uv", "pip", verb, "--python", python]
    return [python, "-m", "pip", verb]


def rewrite_mirror(url: str, mirror: str | None) -> str:
    """Replace the framework index prefix (``https://download.pytorch.org/whl``) by ``mirror``."""
    return mirror_url(url, mirror) or url


def check_url(url: str, allow_http: bool) -> None:
    """Refuse an index URL that is not https (or a local file/path) unless ``allow_http``.

    Raises UsageError: a plain-http index lets anyone on the path replace the wheels.
    """
    scheme = urlsplit(url).scheme.lower()
    if scheme in ("https", "file", ""):
        return
    if scheme == "http" and allow_http:
        return
    raise UsageError(f"index URL {url!r} is not https",
                     hint="use an https mirror, or pass --allow-http if you trust this network")


def index_args(solution: Solution, *, mirror: str | None = None, allow_http: bool = False) -> list[str]:
    """The index options of the solution (from ``pip_args``, else its index fields), mirrored and checked."""
    out: list[str] = []
    args = list(solution.pip_args)
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, value = arg.partition("=")
        if name in _INDEX_OPTIONS and arg.startswith("--") and eq:
            out.append(f"{name}={_url_opt(name, value, mirror, allow_http)}")
        elif arg in _INDEX_OPTIONS and i + 1 < len(args):
            out += [arg, _url_opt(arg, args[i + 1], mirror, allow_http)]
            i += 1
        i += 1
    if not out:
        urls: list[tuple[str, str]] = []
        if solution.index_url:
            urls.append(("--extra-index-url", solution.index_url))
        urls += [("--extra-index-url", u) for u in solution.extra_index_urls]
        for pin in solution.to_install or solution.packages:
            if pin.index_url:
                urls.append(("--extra-index-url", pin.index_url))
        seen: set[str] = set()
        for opt, url in urls:
            if url not in seen:
                seen.add(url)
                out += [opt, _url_opt(opt, url, mirror, allow_http)]
    return out


def _url_opt(option: str, value: str, mirror: str | None, allow_http: bool) -> str:
    if option not in _URL_OPTIONS:
        return value
    value = rewrite_mirror(value, mirror)
    check_url(value, allow_http)
    return value


def make_plan(environment: Environment, solution: Solution, *, python: str, installer: str | None = None,
              mirror: str | None = None, allow_http: bool = False, verify: bool = True,
              findings: list[Finding] | None = None) -> Plan:
    """Build the steps that turn what is installed into ``solution``; inert.

    Order: uninstall what must go (leftovers of another variant, the distribution that brought a file clash),
    install ``solution.to_install``, then reinstall survivors of a file clash whose files the clash or the
    uninstall damaged. ``findings`` (the starting environment's diagnosis) are each answered by a Remedy: the
    step that fixes it, or "not fixable here" with what to do. Returns a Plan with ``nothing_to_do`` when
    nothing needs to run. Raises UsageError for a non-https index URL without ``allow_http``, or an unknown
    installer.
    """
    steps: list[Step] = []
    pins = [p for p in solution.to_install if environment.packages.get(_canon(p.name)) != p.version]
    removed = removals(environment, solution)
    again = reinstalls(environment, solution, removed, pins)
    nothing = (solution.unchanged or not pins) and not removed and not again
    if not nothing:
        tool = choose_installer(installer)
        tool_env = uv_env_from_pip(dict(os.environ)) if tool == "uv" else {}
        indexes = index_args(solution, mirror=mirror, allow_http=allow_http) if pins or again else []
        steps += _uninstall_step(tool, python, removed, tool_env)
        steps += _install_step(tool, python, environment, pins, indexes, tool_env)
        steps += _reinstall_step(tool, python, again, indexes, tool_env)
    if solution.env:
        steps.append(Step(kind="env", env=dict(solution.env),
                          reason="library search path the solved set needs (cudamatrix env, --write-activation, "
                                 "or a preload in a running kernel)"))
    if verify:
        steps.append(Step(kind="verify", argv=[python, "-m", "cudamatrix", "verify", "--python", python],
                          timeout_s=300.0, reason="prove the result: a cuDNN convolution on the GPU against the CPU"
                          if environment.driver.status == "ok" and environment.gpus else
                          "prove the result: a convolution on the CPU (no usable GPU here: the GPU check is not "
                          "possible)"))
    plan = Plan(python=python, steps=steps, solution=solution, nothing_to_do=nothing, to_remove=removed)
    plan.remedies = remedies(findings or [], plan, environment)
    return plan


def _uninstall_step(tool: str, python: str, removed: list[Removal], tool_env: dict[str, str]) -> list[Step]:
    """One uninstall step for every removal, its reason grouping the names by why they go."""
    if not removed:
        return []
    argv = installer_argv(tool, python, "uninstall") + ([] if tool == "uv" else ["-y"])
    by_reason: dict[str, list[str]] = {}
    for r in removed:
        by_reason.setdefault(r.reason, []).append(f"{r.name} {r.version or ''}".rstrip())
    return [Step(kind="uninstall", argv=argv + [r.name for r in removed], timeout_s=INSTALL_TIMEOUT_S,
                 env=tool_env, reason="uninstall " + "; ".join(f"{', '.join(names)} ({why})"
                                                               for why, names in by_reason.items()))]


def _install_step(tool: str, python: str, environment: Environment, pins: list[Pin], indexes: list[str],
                  tool_env: dict[str, str]) -> list[Step]:
    """The install step of the solved set's changed pins."""
    if not pins:
        return []
    argv = installer_argv(tool, python) + indexes + [p.requirement() for p in pins]
    changes = ", ".join(_change(environment, p) for p in pins)
    return [Step(kind="install", argv=argv, timeout_s=INSTALL_TIMEOUT_S, env=tool_env,
                 reason=f"install the solved set with {tool}: {changes}")]


def _reinstall_step(tool: str, python: str, again: list[tuple[str, str]], indexes: list[str],
                    tool_env: dict[str, str]) -> list[Step]:
    """A reinstall (no dependencies) of the clash survivors, to restore the files the clash overwrote."""
    if not again:
        return []
    argv = installer_argv(tool, python) + indexes
    argv += ["--reinstall" if tool == "uv" else "--force-reinstall", "--no-deps"] + [f"{n}=={v}" for n, v in again]
    return [Step(kind="reinstall", argv=argv, timeout_s=INSTALL_TIMEOUT_S, env=tool_env,
                 reason="reinstall " + ", ".join(f"{n} {v}" for n, v in again)
                        + " to restore the files the clash overwrote")]


def _change(environment: Environment, pin) -> str:
    old = environment.packages.get(_canon(pin.name))
    return f"{pin.name} {old} -> {pin.version}" if old else f"{pin.name} {pin.version} (new)"


_canon = canonical  # PEP 503: runs of "-_." become one "-"


def default_python() -> str:
    """The interpreter a plan targets when none is named: this one."""
    return os.path.abspath(sys.executable)
