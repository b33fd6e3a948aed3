"""``apply(plan) -> Applied``: run a plan's install steps through the one subprocess helper, and put
the starting set back if anything goes wrong.

Before any change the installed set of the target interpreter is recorded (name, version, where it
came from: ``direct_url.json`` per PEP 610, else an index) by a standard-library probe run in that
interpreter. On a failed step or Ctrl-C, what was added is uninstalled and what was removed or
changed is reinstalled at its old version, ``--no-deps``, from where it came; then the set is read
again and anything still different is named. The error carries the installer's own words.
"""
from __future__ import annotations

import os
import re
import signal
import threading
from typing import Callable

from cudamatrix import names, proc
from cudamatrix.errors import CudamatrixError, InstallFailed
from cudamatrix.install import journal as journals
from cudamatrix.install.explain import explain
from cudamatrix.install.replay import rebuilt
from cudamatrix.models import Applied, InstalledDist, Plan
from cudamatrix.safe.files import parse_json
from cudamatrix.safe.shells import posix_word

Progress = Callable[[str, str], None]  # (event, text): "step", "output", "restore", "done"

SNAPSHOT_TIMEOUT_S = 60.0
RESTORE_TIMEOUT_S = 1800.0
INTERRUPT_GRACE_S = 15.0  # let pip roll back the package it was in the middle of
# the installer's output is read line by line (never a terminal): pip's progress bar, redrawn many times a second
# (a notebook kernel sets FORCE_COLOR, so pip draws it into the pipe), would be one line of output per redraw
QUIET_ENV = {"PIP_PROGRESS_BAR": "off"}

# Runs in the target interpreter: standard library only, one JSON list on stdout.
_PROBE = r"""
import json, re, sys
from importlib import metadata
seen = {}
for dist in metadata.distributions():
    where = getattr(dist, "_path", None)
    if where is not None and where.name.startswith("~"):
        continue  # pip's stash of a half-done uninstall ("~orch-2.5.1.dist-info"), not a distribution
    name = dist.metadata["Name"]
    if not name:
        continue
    key = re.sub(r"[-_.]+", "-", name).lower()
    if key in seen:  # the first one on sys.path is the one imported
        continue
    direct = dist.read_text("direct_url.json")
    inst = (dist.read_text("INSTALLER") or "").strip() or None
    seen[key] = {"name": key, "version": dist.version, "direct_url": direct, "installer": inst,
                 "path": str(where) if where is not None else None}
json.dump(sorted(seen.values(), key=lambda d: d["name"]), sys.stdout)
"""


canonical = names.canonical  # PEP 503 (the probe above spells the same rule: it runs in another interpreter)


def snapshot(python: str) -> list[InstalledDist]:
    """The distributions installed for ``python``, sorted by name. Raises InstallFailed if unreadable."""
    r = proc.run([python, "-c", _PROBE], timeout=SNAPSHOT_TIMEOUT_S, cwd="/")
    if not r.ok:
        raise InstallFailed(f"could not read the installed set of {python}: {r.error or r.stderr.strip()[-500:]}",
                            hint="check that --python names a working interpreter")

    try:  # another interpreter's answer: checked for shape before use
        out = [InstalledDist(name=d["name"], version=d["version"], source=_source(d.get("direct_url")),
                             installer=d.get("installer"), path=d.get("path")) for d in parse_json(r.stdout)]
        if not all(isinstance(d.name, str) and isinstance(d.version, str) for d in out):
            raise TypeError("a name or version is not text")
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InstallFailed(f"could not read the installed set of {python}: it printed no list of distributions "
                            f"({type(exc).__name__}: {str(exc)[:200]})",
                            hint="check that --python names a working interpreter") from None
    return out


def _source(direct_url: str | None) -> str | None:
    """A requirement-ready source from PEP 610 ``direct_url.json``: ``git+URL@commit``, ``-e PATH``, a URL."""
    if not direct_url:
        return None

    try:
        data = parse_json(direct_url)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    url = data.get("url")
    if not url:
        return None
    vcs = data.get("vcs_info")
    if vcs:
        return f"{vcs.get('vcs', 'git')}+{url}@{vcs.get('commit_id', '')}".rstrip("@")
    if (data.get("dir_info") or {}).get("editable"):
        return f"-e {url}"
    return url


def diff(before: list[InstalledDist], after: list[InstalledDist]) -> dict[str, list[InstalledDist]]:
    """What changed between two snapshots: ``added`` / ``removed`` / ``changed`` (old values)."""
    b = {d.name: d for d in before}
    a = {d.name: d for d in after}
    return {
        "added": [a[n] for n in sorted(a.keys() - b.keys())],
        "removed": [b[n] for n in sorted(b.keys() - a.keys())],
        "changed": [b[n] for n in sorted(a.keys() & b.keys()) if (a[n].version, a[n].source) != (b[n].version, b[n].source)],
    }


RUNNABLE = ("uninstall", "install", "reinstall")


def touched_names(plan: Plan, before: list[InstalledDist]) -> set[str]:
    """Installed distributions the plan names (uninstalls, pins, reinstalls): the journal saves a wheel of each."""
    names = {r.name for r in plan.to_remove}
    installed = {d.name for d in before}
    for step in plan.steps:
        if step.kind not in RUNNABLE:
            continue
        for arg in step.argv:
            if "==" in arg and not arg.startswith("-"):  # the plan's pins are exact
                name = canonical(re.split(r"[=<>!~\[; @]", arg, maxsplit=1)[0])
                if name in installed:
                    names.add(name)
    return names


def predicted_changes(steps, installed: set[str], say=lambda event, text: None) -> set[str]:
    """Installed distributions the install steps would replace, dependencies included, asked of the installer
    itself with a dry run (pip's ``--report``; uv's "- name==version" lines), so the journal saves them too and
    a rollback needs no network. A dry run that fails predicts nothing (the real step then fails and says why)."""
    out: set[str] = set()
    for step in steps:
        if step.kind not in ("install", "reinstall") or "install" not in step.argv:
            continue
        at = step.argv.index("install") + 1
        uv = step.argv[:1] == ["uv"]
        extra = ["--dry-run"] if uv else ["--dry-run", "--quiet", "--report", "-"]
        say("step", "asking the installer what the plan changes (dry run)")
        env = {**os.environ, **step.env} if step.env else None
        r = proc.run(step.argv[:at] + extra + step.argv[at:], timeout=SNAPSHOT_TIMEOUT_S * 10, env=env)
        if not r.ok:
            continue
        if uv:
            names = {canonical(m.group(1)) for m in re.finditer(r"^\s*- ([A-Za-z0-9._-]+)==", r.stderr + r.stdout, re.M)}
        else:
            try:
                names = {canonical(i["metadata"]["name"]) for i in parse_json(r.stdout).get("install", [])}
            except (ValueError, KeyError, TypeError, AttributeError):
                continue
        out |= names & installed
    return out


def apply(plan: Plan, *, on_progress: Progress | None = None, journal=None,
          site_packages: list[str] | None = None) -> Applied:
    """Execute the uninstall/install/reinstall steps of ``plan``; other steps are for the caller (env, verify).

    A journal (:mod:`cudamatrix.install.journal`) is written before the first change: the starting set and a
    wheel of every distribution the plan touches, so a rollback needs no network; ``journal`` passes one
    left by an interrupted run (``fix --resume``: its starting set stays the one to go back to). Returns
    Applied with the before/after sets. Raises InstallFailed (exit 4) after restoring the starting set when a
    step fails, on Ctrl-C or on an unexpected error; ``detail`` names what was restored and what was not.
    """
    say = on_progress or (lambda event, text: None)
    runnable = [s for s in plan.steps if s.kind in RUNNABLE]
    if not runnable:
        return Applied(ok=True)
    limit = journals.keep_limit()  # a bad setting: UsageError now, not after the change
    tool = "uv" if runnable[0].argv[:1] == ["uv"] else "pip"
    restore_args = _index_options(runnable)
    sites = list(site_packages or [])
    if journal is None:
        before = snapshot(plan.python)
        touched = touched_names(plan, before) | predicted_changes(runnable, {d.name for d in before}, say)
        journal = journals.begin(plan.python, plan, before, touched, journals.stash_dirs(sites), say)
    else:
        before = journal.before
    start_at = int(journal.data.get("steps_done") or 0) if journal.data.get("resumed") else 0
    done: list[str] = []

    def back(what: str, error: str, argv, output: str = "") -> InstallFailed:
        restored, left = restore(plan.python, before, tool=tool, index_options=restore_args, on_progress=say,
                                 wheels=journal.wheels)
        journals.clean_stash(journal, sites)
        if not any(left.values()):
            journal.close()
        return _failed(what, error, restored, left, argv, journal, output)

    try:
        for i, step in enumerate(runnable, 1):
            if i <= start_at:
                continue
            say("step", f"[{i}/{len(runnable)}] {step.reason}")
            env = {**os.environ, **step.env, **QUIET_ENV}

            def on_start(pid: int, step_no: int = i, argv: list[str] = step.argv) -> None:  # bound now
                journal.record_installer(pid, argv, step_no)

            r = proc.run(step.argv, timeout=step.timeout_s, env=env, interrupt_grace=INTERRUPT_GRACE_S,
                         on_output=lambda line: say("output", line), die_with_parent=True, on_start=on_start)
            journal.record(child_pgid=None)
            if not r.ok:
                raise back(f"step {i} failed: {step.reason}", installer_error(r), step.argv,
                           f"{r.error or ''}\n{r.stderr}\n{r.stdout}")
            done.append(step.reason)
            journal.record(steps_done=i)
    except KeyboardInterrupt:
        raise back("interrupted (Ctrl-C)", "interrupted by the user", None) from None
    except InstallFailed:
        raise
    except CudamatrixError as exc:  # the journal could not be written mid-way: the starting set goes back (exit 4)
        raise back("stopped", exc.message, None) from None
    except Exception as exc:  # a bug of ours mid-way: still put the starting set back, then let it show
        back("stopped by an error", f"{type(exc).__name__}: {exc}", None)
        raise
    after = snapshot(plan.python)
    say("done", f"{len(done)} step(s) done")
    return _completed(journal, Applied(ok=True, steps_run=done, before=before, after=after), limit)


def _completed(journal, applied: Applied, limit: int) -> Applied:
    """Keep the journal of the applied change for ``fix --undo``. When it cannot be written (a full state folder),
    the change stays applied and says so: ``journal_error`` (why) and ``journal`` (the folder left, which
    ``fix --resume`` completes and ``fix --rollback`` goes back from)."""
    try:
        journals.complete(journal, applied.after, limit)
    except (CudamatrixError, OSError) as exc:
        applied.journal_error = exc.message if isinstance(exc, CudamatrixError) else f"{exc.strerror or exc}"
        applied.journal = str(journal.folder)
    return applied


def rollback(journal, *, python: str | None = None, site_packages: list[str] | None = None,
             on_progress: Progress | None = None):
    """Undo an interrupted change from its journal: stop a left-over installer proven to be the journal's, put
    the starting set of ``python`` (default: this interpreter; never one the journal names) back from the saved
    wheels. Returns (restored, still different); the journal is removed when nothing differs. Raises UsageError,
    doing nothing, for a journal kept for another interpreter or naming a process it cannot prove is its own."""
    import sys

    python = python or sys.executable
    journals.check_usable(journal, python)
    journals.check_wheels(journal)  # they become code: only as saved, signed, and nobody else's to change
    # its index options are reused for what has no saved wheel; the scheme was allowed when the plan was made
    plan = rebuilt(journal.plan(), python, allow_http=True)
    journals.stop_installer(journal)
    runnable = [s for s in plan.steps if s.kind in RUNNABLE]
    tool = "uv" if runnable and runnable[0].argv[:1] == ["uv"] else "pip"
    restored, left = restore(python, journal.before, tool=tool, index_options=_index_options(runnable),
                             on_progress=on_progress, wheels=journal.wheels)
    journals.clean_stash(journal, list(site_packages or []))
    if not any(left.values()):
        journal.close()
    return restored, left


def installer_error(r: proc.Result) -> str:
    """The installer's own words: its ERROR lines when it wrote any, else the tail of its output."""
    if r.error and r.returncode is None:
        return f"{r.error}\n{_tail(r.stderr or r.stdout)}".strip()
    text = r.stderr or r.stdout
    errors = [ln for ln in text.splitlines() if ln.startswith(("ERROR", "error:", "  × ", "×", "Caused by"))]
    return ("\n".join(errors) if errors else _tail(text)).strip() or f"exit status {r.returncode}"


def _tail(text: str, n: int = 40) -> str:
    return "\n".join(text.strip().splitlines()[-n:])


def _failed(what: str, error: str, restored: list[InstalledDist], left: dict, argv, journal=None,
            output: str = "") -> InstallFailed:
    not_restored = [f"{d.name} {d.version}" for k in ("added", "removed", "changed") for d in left[k]]
    cause = explain(output or error)
    if not_restored:
        hint = ("could not restore: " + ", ".join(not_restored) + "; the journal keeps what is needed: "
                "cudamatrix fix --rollback" + (f" --python {posix_word(journal.python)}" if journal is not None else ""))
    else:
        hint = ("the environment is back to its starting set"
                + (f" (restored {', '.join(d.name + ' ' + d.version for d in restored)})" if restored else ""))
    if cause is not None:
        hint = f"{cause.way_out}; {hint}"
    head = f"install failed, {what}: " + (f"{cause.kind}: {cause.line}" if cause is not None else error)
    return InstallFailed(head, hint=hint, detail={
        "installer_error": error, "cause": cause.to_dict() if cause is not None else None, "argv": argv,
        "restored": [d.to_dict() for d in restored], "not_restored": not_restored})


def _index_options(steps) -> list[str]:
    """The index options of the plan's install steps, reused when reinstalling the starting set."""
    out: list[str] = []
    for step in steps:
        argv = step.argv
        for i, arg in enumerate(argv):
            name = arg.partition("=")[0]
            if name in ("--index-url", "--extra-index-url", "--find-links", "--trusted-host"):
                if "=" in arg:
                    out.append(arg)
                elif i + 1 < len(argv):
                    out += [arg, argv[i + 1]]
    return out


def restore(python: str, before: list[InstalledDist], *, tool: str = "pip", index_options: list[str] | None = None,
            on_progress: Progress | None = None,
            wheels=None) -> tuple[list[InstalledDist], dict[str, list[InstalledDist]]]:
    """Put ``python``'s installed set back to ``before``. Returns (what was put back, what still differs).

    ``wheels``: a folder of saved wheels (the journal's); a distribution found there is reinstalled from it
    with ``--no-index`` (no network), else from its recorded source, else from the plan's indexes.

    Ctrl-C is ignored while restoring (when called from the main thread): half a restore is worse.
    """
    say = on_progress or (lambda event, text: None)
    old_handler = None
    if threading.current_thread() is threading.main_thread():
        old_handler = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return _restore(python, before, tool, index_options or [], say, wheels)
    finally:
        if old_handler is not None:
            signal.signal(signal.SIGINT, old_handler)


def _restore(python, before, tool, index_options, say, wheels=None):
    try:
        now = snapshot(python)
    except CudamatrixError:
        return [], {"added": [], "removed": list(before), "changed": []}
    d = diff(before, now)
    if not any(d.values()):
        return [], d
    say("restore", "restoring the starting set")
    current = {x.name for x in now}
    _uninstall(python, tool, [x.name for x in d["added"]] + [x.name for x in d["changed"] if x.name in current], say)
    back = d["removed"] + d["changed"]
    base = (["uv", "pip", "install", "--python", python] if tool == "uv"
            else [python, "-m", "pip", "install"]) + ["--no-deps"]
    saved = _reinstall_saved(base, back, wheels, say)
    _reinstall(base + index_options, [x for x in back if x.name not in saved], say)
    final = snapshot(python)
    left = diff(before, final)
    still = {x.name for k in left.values() for x in k}
    return [x for x in d["added"] + back if x.name not in still], left


def _uninstall(python: str, tool: str, drop: list[str], say) -> None:
    """Uninstall what the change added or replaced (restore)."""
    if not drop:
        return
    argv = (["uv", "pip", "uninstall", "--python", python] if tool == "uv"
            else [python, "-m", "pip", "uninstall", "-y"]) + drop
    say("restore", "uninstall " + " ".join(drop))
    proc.run(argv, timeout=RESTORE_TIMEOUT_S)


def _reinstall_saved(argv: list[str], back: list[InstalledDist], wheels, say) -> set[str]:
    """Reinstall from the journal's saved wheels (``--no-index``: no network) what was saved there; returns the
    names it covered."""
    saved = {x.name for x in back if not x.source and wheels is not None and _saved(wheels, x)}
    if saved:
        say("restore", "reinstall from the saved wheels: " + ", ".join(sorted(saved)))
        proc.run(argv + ["--no-index", "--find-links", str(wheels)] +
                 [f"{x.name}=={x.version}" for x in back if x.name in saved], timeout=RESTORE_TIMEOUT_S)
    return saved


def _reinstall(argv: list[str], dists: list[InstalledDist], say) -> None:
    """Reinstall ``dists`` from their recorded sources or the indexes: all at once, else one by one, to put
    back as much as can be."""
    if not dists:
        return
    reqs = [_requirement(x) for x in dists]
    say("restore", "reinstall " + ", ".join(f"{x.name} {x.version}" for x in dists))
    r = proc.run(argv + [a for req in reqs for a in req], timeout=RESTORE_TIMEOUT_S)
    if not r.ok:
        for req in reqs:
            proc.run(argv + req, timeout=RESTORE_TIMEOUT_S)


def _saved(folder, dist: InstalledDist) -> bool:
    prefix = re.sub(r"[-_.]+", "_", dist.name).lower() + "-" + dist.version + "-"
    try:
        return any(n.lower().startswith(prefix) and n.endswith(".whl") for n in os.listdir(folder))
    except OSError:
        return False


def _requirement(dist: InstalledDist) -> list[str]:
    if dist.source and dist.source.startswith("-e "):
        return ["-e", dist.source[3:]]
    if dist.source:
        return [f"{dist.name} @ {dist.source}"]
    return [f"{dist.name}=={dist.version}"]
