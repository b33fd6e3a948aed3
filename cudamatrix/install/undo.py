"""``fix --undo``: the plan that takes an interpreter back to the starting set of its last completed change.

A completed change keeps its journal (:func:`cudamatrix.install.journal.complete`): the starting set, the set
it ended with, and a wheel of every distribution it replaced or removed, repacked from the installed files.
The undo plan uninstalls what the change added and installs the starting versions from those wheels only
(``--no-index --find-links``): no network, no index. It is refused, before anything runs, when the environment
is no longer the one the change left (undo would take later changes back too), or when a wheel it needs was
not kept. The plan runs through :func:`cudamatrix.install.apply.apply` like any other: the current set is
saved first, a failed step puts it back (never half an undo), and the undo becomes the last completed change
(so a second undo goes forward again).
"""
from __future__ import annotations

import os

from cudamatrix.errors import UsageError
from cudamatrix.install import journal as journals
from cudamatrix.install.apply import diff
from cudamatrix.install.plan import installer_argv
from cudamatrix.models import InstalledDist, Plan, Removal, Step
from cudamatrix.names import canonical


def _versions(dists: list[InstalledDist]) -> dict[str, str]:
    return {d.name: d.version for d in dists}


def drift(after: dict[str, str], now: dict[str, str]) -> list[str]:
    """What differs between the set a change left and the set installed now, one phrase each."""
    out = [f"{n} {v} added" for n, v in sorted(now.items()) if n not in after]
    out += [f"{n} {v} removed" for n, v in sorted(after.items()) if n not in now]
    out += [f"{n} {after[n]} -> {now[n]}" for n in sorted(after.keys() & now.keys()) if after[n] != now[n]]
    return out


def _saved(folder, name: str, version: str) -> str | None:
    """The saved wheel of ``name`` ``version`` in ``folder`` (file name escaping of the binary format), or None."""
    prefix = canonical(name).replace("-", "_") + "-" + version + "-"
    try:
        found = [n for n in os.listdir(folder) if n.lower().startswith(prefix.lower()) and n.endswith(".whl")]
    except OSError:
        return None
    return found[0] if found else None


def undo_plan(journal, python: str, now: list[InstalledDist], installer: str) -> Plan:
    """The plan back to ``journal``'s starting set for ``python`` whose installed set is ``now``. Raises
    UsageError (exit 2, nothing run) when the set changed since the change, or a starting wheel was not kept."""
    journals.check_signed(journal)  # what it records is this tool's, written for this user
    before, now_v = _versions(journal.before), _versions(now)
    _check_unchanged(journal, python, now_v)
    added = sorted(n for n in now_v if n not in before)
    back = sorted(n for n in before if now_v.get(n) != before[n])
    _check_saved(journal, python, {n: before[n] for n in back})
    if back:
        journals.check_wheels(journal)  # what is installed is what the fix saved
    steps = _steps(python, installer, added, {n: (now_v.get(n, "(none)"), before[n]) for n in back},
                   str(journal.wheels))
    return Plan(python=python, steps=steps, nothing_to_do=not steps,
                to_remove=[Removal(name=n, version=now_v[n], reason="added by the fix undone") for n in added])


def _check_unchanged(journal, python: str, now: dict[str, str]) -> None:
    """Refuse when the installed set is no longer the one the change left."""
    after = _versions(journal.after)
    moved = drift(after, now)
    if moved:
        raise UsageError(f"{python} changed since the fix of {journal.data.get('finished_at')}: " + ", ".join(moved[:8])
                         + (" ..." if len(moved) > 8 else "") + "; undo would take those back too: nothing was changed",
                         hint="put those back, or make the environment consistent with cudamatrix fix",
                         detail={"changed_since": moved})


def _check_saved(journal, python: str, wanted: dict[str, str]) -> None:
    """Refuse when a starting version to put back has no saved wheel, naming each and why."""
    missing = [f"{n} {v}" for n, v in wanted.items() if _saved(journal.wheels, n, v) is None]
    if missing:
        why = journal.data.get("dropped") or "the change did not save them (it did not expect to replace them)"
        raise UsageError(f"undo needs the starting wheels of {', '.join(missing)}, which are not kept ({why}): "
                         "nothing was changed", hint="reinstall them from an index, e.g. with cudamatrix fix "
                                                     f"--python {python} and a request naming those versions",
                         detail={"missing": missing, "journal": str(journal.folder)})


def _steps(python: str, installer: str, added: list[str], back: dict[str, tuple[str, str]], wheels: str) -> list[Step]:
    """Uninstall what the change added; install the starting versions (``back``: name -> (now, then)) from the
    saved wheels only."""
    steps = []
    if added:
        steps.append(Step(kind="uninstall", reason="uninstall what the fix added: " + ", ".join(added),
                          argv=installer_argv(installer, python, "uninstall") + (["-y"] if installer == "pip" else [])
                          + added))
    if back:
        steps.append(Step(kind="install", reason="put back the starting versions from the saved wheels: "
                          + ", ".join(f"{n} {now} -> {then}" for n, (now, then) in back.items()),
                          argv=installer_argv(installer, python) + ["--no-deps", "--no-index", "--find-links", wheels]
                          + [f"{n}=={then}" for n, (_, then) in back.items()]))
    return steps


def rollback_plan(journal, python: str, now: list[InstalledDist]) -> Plan:
    """What ``fix --rollback`` will do for ``python``, whose installed set is ``now``: stop the interrupted change's
    installer when the journal names one, uninstall what the change added or replaced, and put the starting
    versions back (from its saved wheels where kept, else from where they came). Shown, and asked for, before
    anything runs (:func:`cudamatrix.install.apply.rollback` does it); ``nothing_to_do`` when the set is the
    starting one already."""
    d = diff(journal.before, now)
    now_v = _versions(now)
    steps = []
    pgid = journal.data.get("child_pgid")
    if pgid is not None:
        steps.append(Step(kind="note", reason=f"stop the interrupted change's installer (process group {pgid}) if it "
                                              "still runs and is proven to be that installer"))
    drop = [x.name for x in d["added"]] + [x.name for x in d["changed"] if x.name in now_v]
    if drop:
        steps.append(Step(kind="uninstall", reason="uninstall what the interrupted change added or replaced: "
                          + ", ".join(f"{n} {now_v[n]}" for n in drop)))
    back = d["removed"] + d["changed"]
    if back:
        steps.append(Step(kind="install", reason="put back the starting versions (from the saved wheels where kept): "
                          + ", ".join(f"{x.name} {now_v.get(x.name, '(none)')} -> {x.version}" for x in back)))
    return Plan(python=python, steps=steps, nothing_to_do=not (drop or back),
                to_remove=[Removal(name=x.name, version=x.version, reason="added by the interrupted change")
                           for x in d["added"]])
