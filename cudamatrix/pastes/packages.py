"""Installed packages in a paste: ``pip freeze``, ``pip list`` (with or without its header), ``conda list``,
and collect_env's ``[pip3]`` / ``[conda]`` lines. Every package is kept (``cuda-toolkit``, ``cuda-bindings``,
``numpy`` matter as much as the ``nvidia-*`` wheels)."""
from __future__ import annotations

import re

from cudamatrix.detect.python_env import canonical
from cudamatrix.detect.text import Paste
from cudamatrix.models import Environment, Framework, Toolkit

_DIST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,100}")
_VERSION = re.compile(r"\d[\w.+!-]{0,80}")
_CONDA_CUDA = re.compile(r"cuda(\d{1,2}\.\d{1,2})(?:\.\d{1,4})?(?:_cudnn(\d{1,2}\.\d{1,2}\.\d{1,3}))?")
_TAGS = ("[pip]", "[pip3]", "[conda]")
# a line that can belong to a package list (anchored and bounded: linear on any line). The name is taken whole
# and never given back: "(?=(...))\1" is an atomic group (Python < 3.11 has no "(?>...)"), so a word that is
# no name costs one pass over it instead of a retry at every shorter length
_CANDIDATE = re.compile(r"[ \t]*(?:\[(?:pip\d?|conda)\]|Package[ \t]|# |-{3,}|[-*][ \t]{1,4}`|"
                        r"[A-Za-z0-9_](?=([\w.+-]{0,100}))\1(?:==|[ \t]+\d))")


def _freeze(body: str) -> tuple[str, str, str] | None:
    """A pin, "name==version" (or PEP 440's "name===version"), as a row: name, version, no build."""
    name, eq, version = body.partition("==")
    if not eq or not _DIST.fullmatch(name.strip()):
        return None
    version = version.removeprefix("=").split(";")[0].split("#")[0].strip()
    return (name.strip(), version, "") if version and _VERSION.fullmatch(version) else None


def _row(words: list[str]) -> tuple[str, str, str] | None:
    """A ``pip list`` or ``conda list`` row: name, version[, location | build channel]. A field label ("CUDA:
    12.1") is none: neither pattern takes a colon, and a bounded fullmatch needs no length cut."""
    if not 2 <= len(words) <= 4 or not _DIST.fullmatch(words[0]) or not _VERSION.fullmatch(words[1]):
        return None
    return words[0], words[1], words[2] if len(words) > 2 else ""


def read(paste: Paste, env: Environment) -> bool:
    """Every package list in the paste."""
    lists = _Lists(paste)
    prev = -2
    for i in paste.where(_CANDIDATE):
        if i != prev + 1 or not paste.free(i):  # a list ends where a line of another kind comes between
            lists.end()
        prev = i
        if paste.free(i):  # every line _CANDIDATE matches holds a word: its body is never blank
            lists.line(i, paste.lines[i].strip())
    lists.flush()
    if not lists.found:
        return False
    for name, version, build, i, kind in lists.found:
        paste.claim(i, kind)
        _add(env, canonical(name), version, build, kind)
    return True


class _Lists:
    """The package lists of one paste, line by line: whether a ``pip list`` / ``conda list`` table (after its
    header) is open, and the header-less rows waiting to be judged as a list."""

    # inside a `pip list` / `conda list` table (after its header), and which: read() ends every list (end())
    # before its first line, and a header sets both, so these class defaults are never the ones read
    table = False
    table_kind = "pip list"

    def __init__(self, paste: Paste) -> None:
        self.paste = paste
        self.found: list[tuple[str, str, str, int, str]] = []  # name, version, build, line, kind
        self.run: list[tuple[str, str, str, int]] = []  # consecutive header-less rows

    def flush(self) -> None:
        """Rows without a header count when they are several in a row or name what this project cares about."""
        run = self.run
        if len(run) >= 3 or any(canonical(r[0]).startswith(("nvidia-", "torch", "jax", "tensorflow", "cuda"))
                                for r in run):
            self.found.extend((n, v, b, i, "pip list") for n, v, b, i in run)
        run.clear()

    def end(self) -> None:
        self.flush()
        self.table = False

    def line(self, i: int, body: str) -> None:
        """A non-blank line that may belong to a list."""
        if body.startswith(_TAGS):
            self._tagged(i, body)
        elif self._header_or_rule(i, body):
            return
        elif body.startswith(("-", "*")):  # _CANDIDATE: "- `" (a Markdown item) or a "---" rule (no item)
            self._markdown_item(i, body)
        elif "==" in body and " " not in body and (pin := _freeze(body)):
            self.flush()
            self.found.append((*pin, i, "pip freeze"))
        else:
            self._row(i, body)

    def _markdown_item(self, i: int, body: str) -> None:
        """A Markdown list item holding a pin in inline code: "- `torch==2.5.1`" (_CANDIDATE: the bullet, blanks,
        then the backtick)."""
        code = body.partition("`")[2]
        pin = _freeze(code[:-1]) if code.count("`") == 1 and code.endswith("`") else None
        if pin:
            self.found.append((*pin, i, "pip freeze"))
        else:
            self.end()

    def _tagged(self, i: int, body: str) -> None:
        """collect_env's "[pip3] torch==2.5.1" / "[conda] torch 2.5.1 pypi_0 pypi"."""
        words = body.partition("]")[2].split()
        row = (_freeze(words[0]) if words else None) or _row(words)
        if row:
            self.found.append((*row, i, "collect_env"))
        elif "could not collect" in body.lower() or not words:
            self.paste.claim(i, "collect_env")

    def _header_or_rule(self, i: int, body: str) -> bool:
        """A table's header, its "----" rule, or a conda comment line: claimed, no package."""
        low = body.lower()
        if low.startswith(("package ", "# name ")) and "version" in low:
            self.table, self.table_kind = True, "conda list" if body.startswith("#") else "pip list"
            self.paste.claim(i, self.table_kind)
        elif self.table and set(body) <= {"-", " "}:
            self.paste.claim(i, self.table_kind)
        elif body.startswith("# packages in environment at") or body.startswith("#") and \
                self.table_kind == "conda list" and self.table:
            self.paste.claim(i, "conda list")
        else:
            return False
        return True

    def _row(self, i: int, body: str) -> None:
        if body.startswith("_") and self.table:  # conda's own "_libgcc_mutex" (no pip distribution starts so)
            self.paste.claim(i, self.table_kind)
            return
        row = _row(body.split()) if len(body) < 400 else None
        if row and self.table:
            self.found.append((*row, i, self.table_kind))
        elif row:
            self.run.append((*row, i))
        else:
            self.end()


def _add(env: Environment, name: str, version: str, build: str, kind: str) -> None:
    if name == "cudatoolkit" or name == "cuda-toolkit" and kind in ("conda list", "collect_env") and "pypi" not in build:
        env.toolkits.append(Toolkit(source=f"report:{kind} {name}", version=version))
    if name == "pytorch" and "cuda" in build:
        m = _CONDA_CUDA.search(build)  # a bounded pattern after a literal: linear on any build
        if m and not any(f.name == "torch" for f in env.frameworks):
            env.frameworks.append(Framework(name="torch", version=version, variant="cu" + m.group(1).replace(".", ""),
                                            cuda=m.group(1), cudnn=m.group(2), source=f"report:{kind}"))
    if name == "pytorch" and "cpu" in build and kind != "collect_env" and not any(f.name == "torch" for f in env.frameworks):
        env.frameworks.append(Framework(name="torch", version=version, variant="cpu", source=f"report:{kind}"))
    env.packages.setdefault(name, version)  # the first list wins: a later one may be cut short
