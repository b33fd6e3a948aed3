"""All human and JSON output. Library code never prints; commands hand values to this module.

``--json`` prints exactly one envelope object on stdout:
``{"schema_version", "command", "status", "exit_code", "data", "errors"}``.

Output is inert: every line printed for people goes through :func:`inert` (control characters escaped,
credentials in URLs masked as pip masks them), and every string of an envelope has its credentials masked
(JSON escapes control characters itself). Applied where the text leaves (the console, the plain lines, the
envelope), so no input-derived piece of text (a paste, a node file, a Slurm error, a GPU name) can miss it.
"""
from __future__ import annotations

import json
import sys
from typing import Any

from cudamatrix.errors import UsageError
from cudamatrix.safe.text import escape_breaks, escape_controls, lazy, redact_urls

JSON_SCHEMA_VERSION = 1

STATUS_BY_EXIT = {
    0: "ok",
    1: "problems",
    2: "usage_error",
    3: "no_solution",
    4: "install_failed",
    5: "verify_failed",
    6: "verify_not_possible",
}


def _plain(value: Any) -> Any:
    """``value`` as JSON-ready data (a pydantic model dumped), the credentials in its strings' URLs masked
    (:func:`~cudamatrix.safe.text.redact_urls`)."""
    if isinstance(value, str):
        return redact_urls(value) if "@" in value else value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "model_dump"):
        return _plain(value.model_dump(mode="json"))
    return value


def envelope(command: str, exit_code: int, data: Any = None, errors: list[dict] | None = None) -> dict:
    """The JSON envelope of one command's result, its strings' credentials masked."""
    return {
        "schema_version": JSON_SCHEMA_VERSION,
        "command": _plain(command),
        "status": STATUS_BY_EXIT.get(int(exit_code), "error"),
        "exit_code": int(exit_code),
        "data": _plain(data) if data is not None else {},
        "errors": _plain(errors or []),
    }


def print_json(command: str, exit_code: int, data: Any = None, errors: list[dict] | None = None) -> None:
    # json.dumps with an indent (the pure-Python encoder): a hand-written printer measured no faster on doctor's
    # envelope (paired runs: 1.04) nor on a pasted megabyte's (1.02), so the standard one it is
    sys.stdout.write(json.dumps(envelope(command, exit_code, data, errors), indent=2) + "\n")
    sys.stdout.flush()


# the width of output that goes to a file or a pipe: lines are never broken there (a path stays whole, so a
# paste or a grep finds it), and tables take their natural width
UNBOUNDED = 1 << 16


def output_width(stream: Any) -> int | None:
    """The width output is fitted to: None (the terminal's own, which rich reads) at a terminal or when COLUMNS
    asks for one; :data:`UNBOUNDED` for a file or a pipe."""
    import os

    try:
        tty = stream.isatty()
    except (AttributeError, ValueError, OSError):
        tty = False
    return None if tty or (os.environ.get("COLUMNS") or "").isdigit() else UNBOUNDED


def inert(text: Any) -> str:
    """``text`` made safe to show: control characters written as escapes (``\\x1b``; tab and newline stay),
    so a pasted clear-screen or terminal hyperlink does nothing, and credentials in URLs masked
    (``user:****@host``). Every line printed for people passes through here."""
    return escape_controls(redact_urls(str(text)))


_Console: Any = None


def console(stderr: bool = False):
    """A rich Console (imported lazily: rich costs start-up time) whose ``print`` makes every string it is
    given :func:`inert` (the tool's own markup holds no control character, so its styles still apply). Text is
    never hard-wrapped (``soft_wrap``: a terminal folds long lines itself and a copied path stays whole); tables
    fit the width (:func:`table`)."""
    global _Console
    if _Console is None:
        from rich.console import Console

        class InertConsole(Console):
            def print(self, *objects: Any, **kwargs: Any) -> None:
                super().print(*(inert(o) if isinstance(o, str) else o for o in objects), **kwargs)

        _Console = InertConsole
    width = output_width(sys.stderr if stderr else sys.stdout)
    return _Console(stderr=stderr, highlight=False, soft_wrap=True, width=width)


def escape(text: Any) -> str:
    """One value shown inside a line (a requirement ``torch[/]``, a GPU name, a folder on LD_LIBRARY_PATH, a
    node's error): rich markup made literal (never read as a style tag; rich raises MarkupError on ``[/]``),
    credentials masked, and every control character escaped, line breaks included, so that a value never
    starts a line of its own (a GPU name "T4\\n--trusted-host ..." from a node file stays one value)."""
    from rich.markup import escape as _escape

    return _escape(escape_breaks(redact_urls(str(text))))


def error_text(message: str, hint: str | None = None) -> None:
    """Print an error for people on stderr (the message and hint are shown literally)."""
    from rich.markup import escape as _escape

    c = console(stderr=True)  # a message may span lines (the installer's own): inert, line breaks kept
    c.print(f"[bold red]error:[/] {_escape(inert(message))}", markup=True, soft_wrap=True)  # paths stay whole
    if hint:
        c.print(f"[dim]hint:[/] {_escape(inert(hint))}", markup=True, soft_wrap=True)


def table(title: str | None, columns: list[str], rows: list[list[Any]], *, optional: tuple[str, ...] = (),
          paths: tuple[str, ...] = ()):
    """A table that fits the width it is printed at (:class:`FittedTable`): ``optional`` columns are left out,
    in that order, while it is too wide, then ``paths`` cells lose their leading folders ("…/lib/libcudnn.so.9");
    other cells wrap at spaces only (a word too long for its column ends in "…", it is never split)."""
    return FittedTable(title, columns, [["" if v is None else str(v) for v in row] for row in rows], optional, paths)


def fit_columns(columns: list[str], rows: list[list[str]], width: int, optional: tuple[str, ...] = (),
                paths: tuple[str, ...] = ()) -> tuple[list[int], dict[int, int]]:
    """Which columns to show at ``width`` (their indexes) and the width each shortened path column gets.
    A rich table with heavy head borders takes the cells' width plus 3 per column plus 1."""
    from rich.cells import cell_len

    natural = [max([cell_len(c)] + [cell_len(r[i]) for r in rows]) for i, c in enumerate(columns)]
    keep = list(range(len(columns)))

    def total() -> int:
        return sum(natural[i] for i in keep) + 3 * len(keep) + 1

    for name in optional:
        if total() <= width:
            break
        if name in columns and len(keep) > 1:
            keep.remove(columns.index(name))
    limits: dict[int, int] = {}
    for name in paths:
        i = columns.index(name) if name in columns else -1
        if i in keep and total() > width:
            limits[i] = max(cell_len(name), 12, natural[i] - (total() - width))
            natural[i] = limits[i]
    return keep, limits


def shorten_path(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` cells from the left, at a folder boundary when one is within 8 cells:
    "…/lib/x.so.9"; the file name is kept whole as long as it fits."""
    if len(text) <= limit:
        return text
    tail = text[len(text) - (limit - 1):]
    cut = tail.find("/")
    if 0 < cut <= 8 and cut < len(tail) - 1:
        tail = tail[cut:]
    return "…" + tail


class FittedTable:
    """A rich renderable: the table built for the width it is rendered at (see :func:`fit_columns`), and a dim
    line naming what was left out or shortened (``--json`` has every field)."""

    def __init__(self, title: str | None, columns: list[str], rows: list[list[str]], optional: tuple[str, ...],
                 paths: tuple[str, ...]) -> None:
        self.title, self.columns, self.rows, self.optional, self.paths = title, columns, rows, optional, paths

    def __rich_console__(self, console: Any, options: Any):
        from rich.table import Table
        from rich.text import Text

        keep, limits = fit_columns(self.columns, self.rows, options.max_width, self.optional, self.paths)
        t = Table(title=self.title, show_lines=False, header_style="bold")
        for i in keep:  # words wrap at spaces; a path (one long word) is never folded, it was shortened instead
            t.add_column(self.columns[i], no_wrap=self.columns[i] in self.paths, overflow="ellipsis")
        for row in self.rows:
            t.add_row(*[Text(inert(shorten_path(row[i], limits[i]) if i in limits else row[i])) for i in keep])
        yield t
        left = [c for i, c in enumerate(self.columns) if i not in keep]
        said = ([f"left out {', '.join(left)}"] if left else []) + \
            ([f"{', '.join(self.columns[i] for i in limits)} shortened"] if limits else [])
        if said:
            yield Text(f"(at {options.max_width} columns: {'; '.join(said)}; --json has every field)", style="dim")


# fix and verify, for people: plain lines (no rich import, so the healthy path stays fast). Each ``*_lines``
# function returns the lines; ``human_*`` prints them, and FixResult.summary() joins them.

def _echo(text: str = "") -> None:
    sys.stdout.write(inert(text) + "\n")


def _print(lines: list[str]) -> None:
    for line in lines:
        _echo(line)


def plan_lines(plan) -> list[str]:
    """The plan's steps, then the findings it answers grouped by the step (the cause) that answers them."""
    # lazy: `--version` would load 2 ms more (python -X importtime; the hoisting's budget per command is 3% of its run): cudamatrix.safe.shells, cudamatrix.schema.records
    from cudamatrix.safe.shells import posix_word

    out = ["plan: nothing to install"] if plan.nothing_to_do else []
    for i, step in enumerate(plan.steps, 1):
        out.append(f"{i}. [{step.kind}] {step.reason}")
        if step.argv and step.kind != "verify":
            out.append("     " + " ".join(posix_word(a) for a in step.argv))
        out += ["     " + _export(k, v) for k, v in step.env.items()]
    remedies = getattr(plan, "remedies", None) or []
    if remedies:
        out.append("findings, by what answers them:")
        groups: dict[tuple[str, str], list] = {}
        for r in remedies:
            groups.setdefault((r.action, r.detail), []).append(r)
        for (action, detail), items in sorted(groups.items(), key=lambda kv: kv[0][0] == "not_fixable"):
            codes = ", ".join(sorted({r.code for r in items}))
            out.append(f"  {codes}: {detail}" if action == "not_fixable" else f"  {codes}: fixed by [{action}] {detail}")
    return out


def human_plan(plan) -> None:
    """Print the interpreter the plan changes, then :func:`plan_lines` (at a prompt: both before the question;
    the result's rendering then leaves them out)."""
    _print([f"python: {plan.python}", *plan_lines(plan)])


def left_lines(findings) -> list[str]:
    """The error findings left after a fix, grouped by the same fix text."""
    if not findings:
        return ["left: no error findings"]
    out = [f"left: {len(findings)} error finding(s)"]
    groups: dict[str, list] = {}
    for f in findings:
        groups.setdefault(f.fix or "", []).append(f)
    for fix, items in groups.items():
        out += [f"  {f.code}: {f.title}" for f in items]
        if fix:
            out.append(f"    -> {fix}")
    return out


def human_left(findings) -> None:
    """Print :func:`left_lines`."""
    _print(left_lines(findings))


def _export(key: str, value: str) -> str:
    # lazy: `--version` would load 2 ms more (python -X importtime; the hoisting's budget per command is 3% of its run): cudamatrix.safe.shells, cudamatrix.schema.records
    from cudamatrix.safe.shells import shown_line

    return shown_line("bash", key, value)


def fix_lines(result) -> list[str]:
    """The fix result for people: what changed, what was verified, what is left to do."""
    shown = getattr(result, "plan_shown", False)  # the header and the plan were printed at the prompt
    out = [] if shown else [f"python: {result.python}"]
    if result.plan is not None and not shown and (result.status == "dry_run" or
                                                  (not result.plan.nothing_to_do and result.applied is None)):
        out += plan_lines(result.plan)
    if result.applied is not None:
        out += _changed_lines(result.applied)
    out += list(result.messages)
    if result.report is not None:
        out += report_lines(result.report)
    out += _fixed_lines(result)
    out += stale_lines(result)
    if result.status != "dry_run" and (result.applied is not None or getattr(result, "left", None)
                                       or result.status == "rolled_back"):
        out += left_lines(result.left)
    return out


def _fixed_lines(result) -> list[str]:
    """"fixed: CODE, ...": the codes a plan step answered that are gone after the change."""
    if result.applied is None or result.plan is None:
        return []
    still = {f.code for f in result.left}
    fixed = sorted({r.code for r in result.plan.remedies if r.action != "not_fixable" and r.code not in still})
    return ["fixed: " + ", ".join(fixed)] if fixed else []


def _changed_lines(applied) -> list[str]:
    """Each distribution whose version the change moved, added or uninstalled."""
    before = {d.name: d.version for d in applied.before}
    after = {d.name for d in applied.after}
    out = [f"  {d.name} {before.get(d.name) or '(new)'} -> {d.version}" for d in applied.after
           if before.get(d.name) != d.version]
    return out + [f"  {d.name} {d.version} -> (uninstalled)" for d in applied.before if d.name not in after]


def stale_lines(result) -> list[str]:
    """The modules this process imported whose files the change replaced, and the restart that loads the new ones."""
    stale = getattr(result, "stale_modules", None) or []
    if not stale:
        return []
    # lazy: `--version` would load 5 ms more (python -X importtime; the hoisting's budget per command is 3% of its run): cudamatrix.models, cudamatrix.schema.records, cudamatrix.names
    from cudamatrix.install.preload import RESTART_MENUS

    out = ["stale in this process: imported before the change, still the old code in memory:"]
    for s in stale:
        disk = s["installed"] or "uninstalled"
        subs = f" and {s['submodules']} submodule(s)" if s["submodules"] else ""
        out.append(f"  {s['module']}{subs}: {s['distribution']} {s['in_memory']} in memory, {disk} on disk")
    out.append("restart the kernel before using them (" + RESTART_MENUS.get(result.context or "python",
                                                                            RESTART_MENUS["python"]) + ")")
    return out


QUESTION = "Apply this plan? [y/N]: "


class Ask:
    """The one question asked before a change: the plan, then :data:`QUESTION`; True for y or yes.

    ``terminal`` (the command line, its stdin a terminal): the question on stderr (stdout holds what the command
    prints), the answer one line of stdin; an end of input is a no. Otherwise (``fix()`` called by a person at a
    notebook cell or the interpreter prompt) through ``input()``: in a kernel, the frontend's input box; a kernel
    with no input channel (nbclient, papermill, a frontend without stdin) and a closed stdin are refused with
    UsageError, nothing changed. ``yes``: consent given already (``fix(yes=True)``): the plan is shown, nobody
    asked."""

    shows_plan = True  # the result's rendering does not print the plan a second time

    def __init__(self, *, terminal: bool = False, yes: bool = False) -> None:
        self.terminal, self.yes = terminal, yes

    def __call__(self, plan) -> bool:
        human_plan(plan)
        sys.stdout.flush()
        if self.yes:
            return True
        return _yes(self._from_terminal() if self.terminal else self._from_input(plan))

    @staticmethod
    def _from_terminal() -> str:
        sys.stderr.write(QUESTION)
        sys.stderr.flush()
        return sys.stdin.readline()

    @staticmethod
    def _from_input(plan) -> str:
        try:
            return input(QUESTION)
        except (EOFError, NotImplementedError, RuntimeError) as exc:
            # ipykernel's StdinNotImplementedError is a NotImplementedError; input() with sys.stdin None (a
            # process started without one) raises RuntimeError("input(): lost sys.stdin")

            n = len([s for s in plan.steps if s.kind in ("install", "uninstall", "reinstall")])
            raise UsageError(f"fix() would change {plan.python} ({n} step(s)) and cannot ask here ({type(exc).__name__}: "
                             "no input channel, e.g. nbclient or papermill): nothing was changed; call "
                             "cudamatrix.fix(yes=True) to apply the plan, or fix(dry_run=True) to see it",
                             hint="cudamatrix.fix(yes=True)", detail={"plan": plan.to_dict()}) from None


def _yes(answer: str) -> bool:
    return answer.strip().lower() in ("y", "yes")


_ANSI = lazy(r"\x1b\[[0-9;?]*[A-Za-z]")  # a terminal's colour and cursor codes (ECMA-48 CSI)


def cell_progress(event: str, text: str) -> None:
    """Live progress of ``fix()`` at a cell or prompt: one plain line per event, the installer's indented and
    without its terminal colour codes (uv and pip colour their lines when the kernel's environment asks)."""
    _echo(("    " if event == "output" else "") + _ANSI.sub("", text))
    sys.stdout.flush()


def human_fix(result) -> None:
    """Print :func:`fix_lines` (plain lines: fast on the healthy path)."""
    _print(fix_lines(result))


def fix_text(result) -> str:
    """:func:`fix_lines` as one text, what ``cudamatrix fix`` prints (inert; without the final newline)."""
    return "\n".join(inert(line) for line in fix_lines(result)).rstrip()


def report_lines(report) -> list[str]:
    """The verification report for people: one block per framework, then what the whole report says."""
    out: list[str] = []
    for fw in report.frameworks:
        out += _framework_report_lines(fw)
    if report.status == "not_possible":
        out.append("GPU verification is not possible here (no GPU or no driver); the CPU path was checked.")
    if report.frameworks and all(fw.status == "not_installed" or fw.finding_code == "NOT_INSTALLED"
                                 for fw in report.frameworks):
        named = [fw.framework for fw in report.frameworks if fw.framework != "all"]
        out.append("nothing was verified: no framework asked for is installed (to install one: cudamatrix fix "
                   + (" ".join(named) if named else "torch, or tensorflow, jax") + ")")
    if report.cached_at:
        out.append(f"(remembered result from {report.cached_at})")
    return out


def human_report(report) -> None:
    """Print :func:`report_lines`."""
    _print(report_lines(report))


def _framework_report_lines(fw) -> list[str]:
    out = [f"{_framework_head(fw)}: {fw.status}" + (f" [{fw.finding_code}]" if fw.finding_code else "")]
    if fw.device_name:
        out.append(f"  device: {fw.device_name} (compute capability {fw.compute_capability})")
    if fw.time_to_first_result_s is not None:
        out.append(f"  first GPU result after {fw.time_to_first_result_s:.2f}s, max abs error {fw.max_abs_error:.3g}")
    elif fw.cpu_checked:
        out.append(f"  CPU convolution checked against the reference (max abs error {fw.max_abs_error:.3g})")
    if fw.cause:
        out.append(f"  {fw.cause}")
    out += [f"  mapped: {lib.get('path')} {_lib_version(lib)}" for lib in fw.mapped_libraries]
    out += [f"  loader model error: {err['soname']}: predicted {err['predicted']} ({err['rule']}), "
            f"mapped {err.get('mapped') or 'nothing'}" for err in fw.model_errors]
    out += [f"  mixed load of {mixed['family']}: " + "; ".join(
        f"{c['folder']} ({c['version'] or 'version unknown'}): {', '.join(c['files'])}" for c in mixed["copies"])
        for mixed in fw.mixed_loads]
    out += [f"  extension {e.get('package')} {e.get('version') or ''}: {e.get('status')}".rstrip()
            + (f" (max abs error {e['max_abs_error']:.3g})" if isinstance(e.get("max_abs_error"), float) else "")
            for e in fw.extensions]
    if fw.status == "failed" and fw.stderr_tail:
        out.append("  stderr (last lines):")
        out += ["    " + line for line in fw.stderr_tail.splitlines()[-8:]]
    elif fw.stderr_lines:
        out.append(f"  the check's child wrote {fw.stderr_lines} line(s) on stderr (not shown; --json: stderr_tail)")
    return out


def _framework_head(fw) -> str:
    """"torch 2.5.1 (CUDA 12.4, cuDNN 9.1.0)"; a cuDNN the framework did not report is read from the library
    mapped into the process that answers cudnnGetVersion() (cuDNN 9's graph library, cuDNN 8's ops_infer; the
    shim only forwards the call)."""
    head = f"{fw.framework} {fw.version or ''}".strip()
    if fw.cuda:
        cudnn = fw.cudnn
        if not cudnn:
            mapped = sorted((m for m in fw.mapped_libraries if str(m.get("file", "")).startswith("libcudnn")
                             and m.get("version")), key=lambda m: not str(m["file"]).startswith(
                                 ("libcudnn_graph.so", "libcudnn_ops_infer.so")))
            cudnn = f"{mapped[0]['version']} (mapped)" if mapped else "not reported"
        head += f" (CUDA {fw.cuda}, cuDNN {cudnn})"
    return head


def _lib_version(lib: dict) -> str:
    """A mapped library's version, saying where it was read: a soname number is not a version."""
    version, source = lib.get("version"), lib.get("version_source")
    if not version:
        return "(version not reported)"
    if source == "soname" or (source is None and str(lib.get("path", "")).endswith(".so." + str(version))):
        return f"(soname {version}; the library reports no version)"
    if source and source.startswith("wheel "):
        return f"{version} (from {source})"
    return str(version)
