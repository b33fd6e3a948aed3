"""What an installer says it installed, and ``pip show``.

- uv's report: "Using CPython 3.12.8", "Installed 19 packages in 41ms" and one " + name==version" a line (" - " for
  one it removed, which is not installed any more).
- ``pip show NAME``: "Name: jax" and, on the next line, "Version: 0.6.1".
- conda's plan: "The following NEW packages will be INSTALLED:" and one "  jaxlib  conda-forge/linux-64::jaxlib-0.4.4-
  cpu_py311h7146453_1" a line (name, then channel/subdir::name-version-build).

The packages go to ``env.packages`` (the first list wins, as for pip list); lines are cut with str methods.
"""
from __future__ import annotations

from cudamatrix.detect.python_env import canonical
from cudamatrix.detect.text import Paste, read_anchored
from cudamatrix.models import Environment

_PYTHON = "Using CPython "


def read(paste: Paste, env: Environment) -> bool:
    """uv's install lines, `pip show` and a conda plan; each reads only lines no other reader took."""
    return read_anchored(paste, env, _READERS)


def read_uv(paste: Paste, env: Environment) -> bool:
    """A run of " + name==version" lines (at least two, or one under uv's "Installed N packages")."""
    rows = [i for i in paste.having("+ ") if paste.free(i) and _pin(paste.lines[i]) is not None]
    headed = [i for i in rows if i > 0 and paste.lines[i - 1].strip().startswith(("Installed ", "+ ", "- "))]
    if len(rows) < 2 and not headed:
        return False
    for i in rows:
        name, version = _pin(paste.lines[i])  # type: ignore[misc]
        env.packages.setdefault(canonical(name), version)
        paste.claim(i, "uv install")
    for i in paste.having(_PYTHON, "Installed ", "Resolved ", "Creating virtual environment", "Prepared ",
                          "Uninstalled "):
        body = paste.lines[i].strip()
        if body.startswith(_PYTHON):
            version = body[len(_PYTHON):].split()[0] if body[len(_PYTHON):].split() else ""
            if version.replace(".", "").isdigit() and env.python.version is None:
                env.python.version = version
        if body.startswith((_PYTHON, "Installed ", "Resolved ", "Creating virtual", "Prepared ", "Uninstalled ")):
            paste.claim(i, "uv install")
    return True


def _pin(line: str) -> tuple[str, str] | None:
    body = line.strip()
    if not body.startswith("+ "):
        return None
    name, eq, version = body[2:].strip().partition("==")
    if not eq or " " in name or not name or not version[:1].isdigit() or " " in version.strip():
        return None
    return name, version.strip()


def read_pip_show(paste: Paste, env: Environment) -> bool:
    found = False
    lines = paste.lines
    for i in paste.having("Name: "):
        body = lines[i].strip()
        nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if not body.startswith("Name: ") or not nxt.startswith("Version: "):
            continue
        name, version = body[6:].strip(), nxt[9:].strip()
        if not name or " " in name or not version[:1].isdigit() or " " in version:
            continue
        env.packages.setdefault(canonical(name), version)
        paste.claim_range(i, i + 1, "pip show")
        j = i + 2
        while j < len(lines) and lines[j].strip()[:1].isupper() and ": " in lines[j][:40] and paste.free(j):
            paste.claim(j, "pip show")  # Summary:, Home-page:, Requires:, Required-by: ...
            j += 1
        found = True
    return found


_PLAN_HEADS = ("The following NEW packages will be INSTALLED", "The following packages will be UPDATED",
               "The following packages will be DOWNGRADED", "The following packages will be SUPERSEDED")


def read_conda_plan(paste: Paste, env: Environment) -> bool:
    """conda's "The following NEW packages will be INSTALLED:" and the rows under it (and under its UPDATED,
    DOWNGRADED and SUPERSEDED lists: "name  old-spec --> channel::name-version-build", the version after the
    arrow). A row's name may be cut with "~"; the spec after "::" names it whole."""
    found = False
    lines = paste.lines
    for i in paste.having(*_PLAN_HEADS):
        if not lines[i].strip().startswith(_PLAN_HEADS):
            continue
        paste.claim(i, "conda plan")
        j = i + 1
        while j < len(lines) and j - i <= 2000 and (not lines[j].strip() or _plan_row(lines[j]) is not None):
            row = _plan_row(lines[j])
            if row is not None:
                env.packages.setdefault(canonical(row[0]), row[1])
                paste.claim(j, "conda plan")
                found = True
            elif j > i + 1 and not lines[j - 1].strip():
                break  # two blank lines: the list is over
            j += 1
    return found


def _plan_row(line: str) -> tuple[str, str] | None:
    """("jaxlib", "0.4.4") from "  jaxlib   conda-forge/linux-64::jaxlib-0.4.4-cpu_py311h7146453_1"."""
    words = line.split()
    if not words or not line[:1].isspace():
        return None
    if "::" not in words[-1] and len(words) == 4 and words[2] == "-->" and not words[0].endswith("~"):
        version = words[-1].rpartition("-")[0]  # "numpy  1.26.4-py311h_0 --> 2.1.2-py311h_0": same channel
        return (words[0], version) if version[:1].isdigit() else None
    spec = words[-1].rpartition("::")[2] if "::" in words[-1] else ""
    name, _, build = spec.rpartition("-")
    name, _, version = name.rpartition("-")
    if not name or not version[:1].isdigit() or not build:
        return None
    return name, version


# (anchors, reader): a reader runs only when the paste holds one of its anchors
_READERS = ((("+ ",), read_uv), (("Name: ",), read_pip_show), (("::",), read_conda_plan))
