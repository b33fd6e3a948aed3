"""``fix()``: detect -> solve -> plan -> apply -> verify, as one call (``import cudamatrix; cudamatrix.fix()``
in a notebook, and the ``cudamatrix fix`` command).

Minimal change: a consistent environment is left alone, and a verification result remembered for
the same fingerprint is reported instead of running the GPU check again. In a running kernel, the
library search path cannot change any more: the right copies are preloaded by full path, or a
restart is asked for when the wrong copy is already mapped (see :mod:`cudamatrix.install.preload`).
Returns a FixResult; never prints (``fix(show=True)`` renders it through :mod:`cudamatrix.render`).
"""
from __future__ import annotations

import copy
import os
import sys
import time
from typing import Any, Callable

from cudamatrix._callable import callable_module
from cudamatrix.detect import detect
from cudamatrix.diagnose.findings import diagnose
from cudamatrix.errors import Exit, NoSolution, UsageError
from cudamatrix.install import extfix
from cudamatrix.install import journal as journals
from cudamatrix.install.apply import apply, rollback, snapshot
from cudamatrix.install.journal import keep_limit
from cudamatrix.install.plan import check_url, choose_installer, make_plan
from cudamatrix.install.preload import (
    RESTART_LINES,
    Decision,
    decide,
    imported_from,
    notebook_context,
    preload,
    stale_modules,
)
from cudamatrix.install.replay import resume_plan
from cudamatrix.install.undo import rollback_plan, undo_plan
from cudamatrix.ldso.libpaths import in_process_loads, wrong_loads
from cudamatrix.matrix.load import load_matrix
from cudamatrix.models import Applied, Environment, Finding, LibraryLoad, Model, Plan, Remedy, Report, Solution
from cudamatrix.names import family_of, named_in
from cudamatrix.render import Ask, cell_progress, fix_text, human_fix
from cudamatrix.safe.files import write_atomic
from cudamatrix.safe.shells import Said, aim, export_line, posix_word, tool
from cudamatrix.schema import field, record, replace
from cudamatrix.solve import solver
from cudamatrix.solve import target as targets
from cudamatrix.solve.indexes import with_mirror
from cudamatrix.verify.memory import fingerprint, fix_key, load, recall_consistent, store
from cudamatrix.verify.run import exit_code
from cudamatrix.verify.run import verify as run_verify


@record(repr=False)
class FixResult(Model):
    """What ``fix`` did: its stages' values, and the exit code the command line uses."""

    python: str
    status: str  # "unchanged" | "applied" | "dry_run" | "cancelled" | "rolled_back" | "undone"
    exit_code: int = 0
    solution: Solution | None = None
    plan: Plan | None = None
    applied: Applied | None = None
    report: Report | None = None
    from_cache: bool = False
    preload: dict | None = None  # the notebook decision (preload.Decision as a dict)
    activation: str | None = None  # the activation snippet written, if asked for
    messages: list[str] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)
    left: list[Finding] = field(default_factory=list)  # error findings of the environment after the fix
    plan_shown: bool = False  # the plan was printed at the prompt already
    stale_modules: list[dict] = field(default_factory=list)  # imported here before the change replaced them
    context: str | None = None  # where this process runs when it is the target: colab | kaggle | jupyter | python
    shown: bool = False  # printed already (fix() at a cell): the cell's repr is then the short one

    def __repr__(self) -> str:
        steps = len([s for s in self.plan.steps if s.kind in ("install", "uninstall", "reinstall")]) if self.plan else 0
        return (f"FixResult(status={self.status!r}, exit_code={int(self.exit_code)}, python={self.python!r}, "
                f"steps={steps}, left={[f.code for f in self.left]}, "
                f"verified={self.report.status if self.report else None!r})")

    def __str__(self) -> str:
        return self.summary()

    def summary(self) -> str:
        """The same text ``cudamatrix fix`` prints: what changed, what was verified, what to do next."""
        return fix_text(self)

    def _repr_pretty_(self, printer, cycle: bool) -> None:  # a notebook cell shows the summary (once)
        printer.text(self.summary() if not (cycle or self.shown) else repr(self) if not cycle else "FixResult(...)")


@record
class FixOptions:
    """What :func:`fix` is asked to do (the keywords of ``cudamatrix.fix(...)``)."""

    python: str | None = None  # the interpreter to make consistent (default: this one)
    request: list[str] | None = None  # PEP 508 strings (default: the frameworks installed)
    dry_run: bool = False  # plan only; nothing is changed
    verify: bool = True  # prove the result on the GPU
    frameworks: str | list[str] = "all"  # which frameworks verify runs
    mirror: str | None = None  # replaces the PyTorch index prefix in index URLs
    allow_http: bool = False  # a plain-http index is refused without it
    installer: str | None = None  # "uv" or "pip" (default: uv when found and no pip configuration is in force)
    write_activation: bool = False  # write the library-path changes as a shell snippet
    use_cache: bool = True  # recall a verification remembered for the same fingerprint
    timeout: float = 300.0  # the verification's time limit, seconds
    driver: str | None = None  # solve for this driver instead of the detected one
    gpus: list[str] | None = None  # ... and these GPUs (names or compute capabilities)
    data_dir: str | None = None  # a matrix data folder instead of the shipped one
    confirm: Callable[[Plan], bool] | None = None  # asked before anything changes (None: yes)
    on_progress: Callable[[str, str], None] | None = None  # (event, text) while applying
    in_process: bool | None = None  # decide library preloading for this process (default: python is this one)
    show: bool | None = None  # print the result (through cudamatrix.render) before returning it (default: interactive)
    resume: bool = False  # finish a change a killed run left in its journal
    rollback: bool = False  # undo it
    yes: bool = False  # consent given: no question (interactive callers are asked otherwise)
    interactive: bool | None = None  # a person at a notebook cell or prompt (default: detected): plan, progress, ask
    undo: bool = False  # back to the starting set of the last completed fix (its saved wheels, no network)


def fix(options: FixOptions | None = None, /, **keywords: Any) -> FixResult:
    """Make the interpreter ``python`` (default: this one) consistent, then prove it.

    Takes a :class:`FixOptions`, or its fields as keywords (``cudamatrix.fix(python=..., request=[...])``).
    ``request``: PEP 508 strings (default: the frameworks installed). ``driver``/``gpus``: solve for
    that machine instead of the detected one. ``confirm(plan)`` is asked before changing anything, whichever
    option starts the change (``resume``, ``rollback`` and ``undo`` too; ``dry_run`` changes nothing)
    (default: a person at a notebook cell or the interpreter prompt is asked through ``input()`` unless
    ``yes=True``, and a kernel that cannot ask, as under nbclient or papermill or without ``sys.stdin``, is refused
    with UsageError before any change; a script's call is consent). With no framework installed and none in
    ``request``, there is nothing to fix (status "unchanged", no plan). Called interactively, the plan and live progress are printed in the
    cell, and modules imported before the change replaced their files are named as stale. ``in_process``: decide library preloading for this process
    (default: when ``python`` is this interpreter). A change interrupted earlier (its journal is left) must
    be finished (``resume=True``) or undone (``rollback=True``) first. Ends by diagnosing again:
    ``FixResult.left`` holds the error findings that remain, each with what to do.
    Raises NoSolution (3), InstallFailed (4), UsageError (2); TypeError for a keyword FixOptions lacks.
    """
    o = options if options is not None else FixOptions(**keywords)
    if options is not None and keywords:
        o = replace(options, **keywords)
    o = _for_caller(o)
    session = _Session(o)
    try:
        result = session.run()
    finally:
        _release(getattr(session, "held", None))
    return _shown(_aimed(result, o.python), bool(o.show))


def _release(held) -> None:
    """Let the next change of the interpreter in (the lock this run held, if any)."""
    if held is not None:
        held.release()


def _interactive() -> bool:
    """A person is at this process: a Jupyter/Colab kernel (ipykernel imported) or an interactive prompt."""
    return "ipykernel" in sys.modules or hasattr(sys, "ps1") or bool(sys.flags.interactive)


def _for_caller(o: FixOptions) -> FixOptions:
    """Options completed for who calls: interactively, progress is printed live, the result shown, and consent
    asked for every change, whichever option starts it (unless ``yes`` or a dry run)."""
    interactive = o.interactive if o.interactive is not None else _interactive()
    changes: dict[str, Any] = {}
    if o.show is None:
        changes["show"] = interactive
    if interactive:
        if o.on_progress is None:
            changes["on_progress"] = cell_progress
        if o.confirm is None and not o.dry_run:
            changes["confirm"] = Ask(yes=o.yes)
    return replace(o, **changes) if changes else o


# --- the values fix() hands from step to step -------------------------------------------------------------------

@record(frozen=True)
class Seen:
    """One state of the machine, each fact made once for it: the environment as detected (its ``library_loads``
    are the loader model's predictions, made by detect) and, once a matrix is at hand, its diagnosis."""

    environment: Environment
    findings: tuple[Finding, ...] | None = None  # None: not diagnosed (a run that never needs the findings)


@record(frozen=True)
class Recalled:
    """The verification memory, asked first: its key for this run, what it ignored and why, and the answer it
    remembered for this machine as it is (then no GPU run, no plan)."""

    key: str | None = None
    notes: tuple[str, ...] = ()
    hit: FixResult | None = None


@record(frozen=True)
class Planned:
    """The plan for the machine as seen (diagnosed unless the plan is an interrupted one, resumed), its solved
    set and the matrix it was solved with."""

    seen: Seen
    matrix: Any
    plan: Plan
    solution: Solution


@record(frozen=True)
class Changed:
    """A plan applied: what the installer did, and the machine as seen after it (detected again, once)."""

    applied: Applied
    seen: Seen


@record(frozen=True)
class Verified:
    """The GPU check of the machine as it is now, or the answer remembered for it."""

    report: Report
    exit_code: int  # verify's: 0 verified, 5 failed, 6 not possible here, 1 nothing to check
    from_cache: bool = False


def _diagnosed(seen: Seen, matrix) -> Seen:
    """``seen`` with its findings: diagnosed now unless it was already (once per state of the machine)."""
    if seen.findings is not None:
        return seen
    return replace(seen, findings=tuple(_diagnose(seen.environment, matrix)))


class _Session:
    """One run of :func:`fix`: the options, the machine as first seen, and the stage timings; each step below takes
    and returns a value (:class:`Seen`, :class:`Recalled`, :class:`Planned`, :class:`Changed`, :class:`Verified`)."""

    def __init__(self, o: FixOptions) -> None:
        self.o = o
        self.timings: dict[str, float] = {}
        self.clock = _Clock(self.timings)
        self.target = os.path.abspath(o.python) if o.python else os.path.abspath(sys.executable)
        self.in_process = o.in_process if o.in_process is not None else \
            o.python is None or _same_environment(self.target, sys.executable)
        with self.clock("detect"):
            self.seen = Seen(_detect(o.python))
        self.interp = self.seen.environment.python.executable or self.target
        self.sites = list(self.seen.environment.python.site_packages)
        if not o.dry_run:
            keep_limit()  # the settings a change reads, checked before anything is written (its lock file included)
        # one change of an interpreter at a time, from the journal check to the end (a dry run changes nothing)
        self.held = None if o.dry_run else journals.hold(self.interp)
        try:
            self.pending = _pending(self.interp, o.resume, o.rollback, o.dry_run and not o.undo, o.undo)
        except BaseException:
            _release(self.held)
            raise
        self.journal_note = None
        if o.dry_run and self.pending is not None and not (o.resume or o.rollback):
            # a dry run changes nothing: plan anyway
            self.journal_note = f"note: {self.pending.describe()} is recorded (fix --resume / --rollback)"
            self.pending = None

    def run(self) -> FixResult:
        o = self.o
        if o.undo:
            return self._undo()
        if o.rollback:
            return self._rollback()
        if self.pending is None and not o.request and not _frameworks(self.seen.environment):
            _matrix(o.data_dir)  # the settings are checked all the same: bad ones are refused (exit 2)
            _check_index_environment(o.allow_http)
            return self._nothing_asked()
        recalled = self._recall(self.seen)
        if recalled.hit is not None:
            return recalled.hit
        matrix = _matrix(o.data_dir)
        _check_index_environment(o.allow_http)
        planned = self._plan(self.seen, matrix)
        plan = planned.plan
        result = FixResult(python=self.interp, status="unchanged" if plan.nothing_to_do else "applied",
                           solution=planned.solution, plan=plan, timings_ms=self.timings)
        result.messages += recalled.notes
        if o.dry_run:
            result.status = "dry_run"
            result.messages += ([self.journal_note] if self.journal_note else []) + ["dry run: nothing was changed"]
            return result
        if plan.nothing_to_do:  # nothing changes: the machine as seen (and diagnosed) is the machine after
            result.messages.append("already consistent: nothing to install")
            after = planned.seen
        else:
            changed = self._apply(plan, result)
            if changed is None:
                return result
            after = changed.seen
        self._after(result, planned, _diagnosed(after, planned.matrix), recalled.key)
        return result

    def _undo(self) -> FixResult:
        """Back to the starting set of the last completed fix, from its saved wheels (no network): refused with
        the cause, before anything changes, when none is kept, the set moved since, or a wheel is missing."""
        o = self.o
        last = journals.load_last(self.interp)
        if last is None:
            raise UsageError(f"no completed fix of {self.interp} is recorded: nothing to undo",
                             hint="fix --undo goes back after a fix that changed something (its journal is kept)")
        journals.check_usable(last, self.interp)
        plan = undo_plan(last, self.interp, snapshot(self.interp), choose_installer(o.installer))
        result = FixResult(python=self.interp, status="dry_run" if o.dry_run else "undone", plan=plan,
                           timings_ms=self.timings)
        when = last.data.get("finished_at")
        if o.dry_run or plan.nothing_to_do:
            result.messages.append(f"dry run: the undo of the fix of {when}; nothing was changed" if o.dry_run
                                   else f"already the starting set of the fix of {when}: nothing to undo")
            return result
        changed = self._apply(plan, result)
        if changed is None:
            return result
        result.messages.append(f"undone: back to the starting set of the fix of {when} (fix --undo again goes "
                               "forward)")
        after = _diagnosed(changed.seen, _matrix(o.data_dir))
        result.left = [f for f in after.findings or () if f.severity == "error"]
        if changed.applied.journal_error:
            result.exit_code = Exit.PROBLEMS
        return result

    def _recall(self, seen: Seen) -> Recalled:
        """The verification memory's key for this run, and the remembered answer when this machine, its
        packages, the request, the target flags and the matrix are as they were (no GPU run then)."""
        o = self.o
        quick = o.verify and o.use_cache and not o.dry_run and not o.write_activation and self.pending is None
        if not quick:
            return Recalled()
        environment = seen.environment
        notes: list[str] = []  # what the verification memory ignored, and why
        key = fix_key(fingerprint(environment, o.frameworks), o.request or [], o.data_dir, driver=o.driver,
                      gpus=o.gpus, installer=o.installer, mirror=o.mirror)
        hit = recall_consistent(key, environment, notes) if key else None
        if hit is None:
            return Recalled(key=key, notes=tuple(notes))
        return Recalled(key=key, notes=tuple(notes),
                        hit=_remembered(environment, self.target, hit[0], hit[1], self.timings, self.in_process))

    def _plan(self, seen: Seen, matrix) -> Planned:
        """The plan and its solution: the interrupted plan from the step it stopped at (--resume), else a new one
        for the solved set, its remedies answering the machine's diagnosis."""
        o = self.o
        if self.pending is not None:  # rebuilt for this interpreter, from where it stopped

            plan = resume_plan(self.pending, self.interp, allow_http=o.allow_http, mirror=o.mirror)
            return Planned(seen, matrix, plan, plan.solution or Solution(request=o.request or [], targets=[]))
        with self.clock("solve"):
            seen = _diagnosed(seen, matrix)
            solution = _solve(seen.environment, o.request or [], o.driver, o.gpus or [], matrix, o.mirror)
            solution, changes = _for_extensions(seen, solution, o, matrix)
        plan = make_plan(seen.environment, solution, python=self.interp, installer=o.installer, mirror=o.mirror,
                         allow_http=o.allow_http, verify=o.verify, findings=list(seen.findings or ()))
        plan.remedies = extfix.explained(plan.remedies, changes)
        return Planned(seen, matrix, plan, solution)

    def _apply(self, plan: Plan, result: FixResult) -> Changed | None:
        """Check the space, ask, apply, detect again; None when the user said no (nothing changed)."""
        o = self.o
        keep_limit()  # every setting the change reads, checked before anyone is asked (exit 2)
        if self.pending is None:  # refused with the numbers before anyone is asked, before anything changes
            # lazy: `fix --dry-run` would load 18 ms more (python -X importtime; the hoisting's budget per command is 3% of its run): logging, packaging._manylinux, platform
            from cudamatrix.install.resources import check_space

            with self.clock("resources"):
                space = check_space(plan, self.seen.environment)
            if space:
                result.messages.append(space)
        if not self._consent(plan, result):
            return None
        if self.pending is not None:  # asked for and agreed to: apply() goes on from the step it stopped at
            self.pending.record(resumed=True)
        imported = self._imported()
        with self.clock("apply"):
            applied = result.applied = apply(plan, on_progress=o.on_progress, journal=self.pending,
                                             site_packages=self.sites)
        if applied.journal_error:
            result.messages.append(_journal_left(applied, self.interp))
        if imported:
            result.stale_modules = stale_modules(imported, applied.before, applied.after)
            result.context = notebook_context() if result.stale_modules else None
        if self.pending is not None:
            result.messages.append("resumed the interrupted change: done")
        if not o.undo:  # the undo says where a second undo goes
            result.messages += _way_back(self.interp)
        with self.clock("detect_after"):
            return Changed(applied, Seen(_detect(o.python)))

    def _consent(self, plan: Plan, result: FixResult) -> bool:
        """Ask ``confirm`` (when given) before ``plan`` changes anything: False when the answer is no (the result
        then says cancelled, exit 1). Every change asks, whichever flag started it (fix, --resume, --rollback,
        --undo); a confirm that cannot ask raises UsageError itself."""
        o = self.o
        if o.confirm is None:
            return True
        answer = o.confirm(plan)
        result.plan_shown = getattr(o.confirm, "shows_plan", False)  # printed at the prompt: not again
        if not answer:
            result.status, result.exit_code = "cancelled", Exit.PROBLEMS
            result.messages.append("cancelled: nothing was changed")
        return bool(answer)

    def _rollback(self) -> FixResult:
        """``rollback=True``: the plan back to the interrupted change's starting set, shown by a dry run, asked
        for, then run by :func:`cudamatrix.install.apply.rollback`."""
        o = self.o
        plan = rollback_plan(self.pending, self.interp, snapshot(self.interp))
        result = FixResult(python=self.interp, status="dry_run" if o.dry_run else "rolled_back", plan=plan,
                           timings_ms=self.timings)
        if o.dry_run:
            result.messages.append(f"dry run: the rollback of {self.pending.describe()}; nothing was changed")
            return result
        if plan.steps and not self._consent(plan, result):
            return result
        return _rollback(self.pending, result, o.python, self.interp, self.sites, o.data_dir, o.on_progress)

    def _nothing_asked(self) -> FixResult:
        """No framework installed and none requested: nothing to fix (a default framework is never chosen for
        the user, nor installed into whatever interpreter runs this)."""
        result = FixResult(python=self.interp, status="unchanged", timings_ms=self.timings)
        result.messages += [f"no framework (torch, tensorflow, jax) is installed for {self.interp} and none was asked "
                            "for: nothing to fix",
                            Said("to install one, name it: ", tool("fix", "torch"), " (or tensorflow, jax; in "
                                 "Python: cudamatrix.fix(request=['torch']))")]
        return result

    def _imported(self) -> dict[str, list[str]]:
        """When this process is the target: its imported top-level modules and their distributions, before the
        change (what may go stale)."""
        if not self.in_process:
            return {}

        return imported_from(self.sites)

    def _after(self, result: FixResult, planned: Planned, after: Seen, remembered_key: str | None) -> None:
        """What is left, the library path, the notebook's preloads, then the verification and the exit code, all
        for ``after``: the machine as it is now (diagnosed)."""
        o = self.o
        plan, solution = planned.plan, planned.solution
        result.left = _left([copy.copy(f) for f in after.findings or ()], after.environment, plan)
        result.messages += self._library_path(result, after.environment, solution)
        if self.in_process:
            decision = _notebook(after.environment, solution)
            if decision is not None:
                result.preload = decision.to_dict()
                result.messages.append(decision.reason)
                if decision.action == "restart":
                    result.messages.append(f"restart the kernel ({decision.context}): {decision.restart_line}")
        if o.verify:
            verified = self._verify(after, plan, solution, remembered_key, result.messages)
            result.report, result.from_cache, result.exit_code = verified.report, verified.from_cache, verified.exit_code
        elif result.left and result.exit_code == 0:
            result.exit_code = Exit.PROBLEMS
        if result.applied is not None and result.applied.journal_error and result.exit_code == 0:
            result.exit_code = Exit.PROBLEMS  # applied, but no undo until the journal is completed

    def _library_path(self, result: FixResult, environment: Environment, solution: Solution) -> list[str]:
        if self.o.write_activation:
            result.activation = write_activation_file(environment, solution.env)
            return [f"wrote {result.activation}" if result.activation
                    else "no library path change needed: no activation snippet written"]
        if solution.env:
            return [_path_needs(solution.env)]
        return []

    def _verify(self, after: Seen, plan: Plan, solution: Solution, remembered_key: str | None,
                messages: list[str]) -> Verified:
        """The GPU check (or the result remembered for this unchanged environment), remembered for next time.
        The loader model's predictions for the child are detect's, handed on, when the child runs in the
        environment detect saw."""
        o = self.o
        environment = after.environment
        key = fingerprint(environment, o.frameworks, solution.env)
        cached = load(key, environment, messages) if o.use_cache and plan.nothing_to_do else None
        if cached is not None:
            messages.append(f"verification remembered from {cached.cached_at} (environment unchanged)")
            verified = Verified(cached, exit_code(cached), from_cache=True)
        else:
            with self.clock("verify"):
                report = run_verify(python=self.interp, frameworks=o.frameworks, timeout=o.timeout,
                                    env=solution.env, environment=environment,
                                    loads=_child_loads(environment, solution.env))
            store(key, report, notes=messages)
            verified = Verified(report, exit_code(report))
        if remembered_key and plan.nothing_to_do:
            store(remembered_key, verified.report, at=verified.report.cached_at, env=solution.env, notes=messages)
        return verified


def _child_loads(environment: Environment, changes: dict[str, str]) -> list[LibraryLoad] | None:
    """detect's loader predictions, when they are the verification child's too: detected here, live, in this
    process's environment with nothing changed for the child and the ld.so cache read in full. None otherwise
    (verify predicts for the child itself)."""
    if environment.origin != "live" or changes or any(n.probe == "ldconfig" for n in environment.notes):
        return None
    return environment.library_loads


# the installer reads these itself (uv gets pip's as UV_*): a plain-http index there is as unsafe as on the
# command line, so it is refused the same way unless --allow-http
_INDEX_VARS = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_DEFAULT_INDEX",
               "UV_INDEX")


def _frameworks(environment: Environment) -> list[str]:
    """The framework distributions installed (any family's, plugins included)."""
    return sorted(n for n in environment.packages if family_of(n))


def _journal_left(applied: Applied, interp: str) -> str:
    """What happened when the change was applied but its journal could not be completed, and the ways on."""
    python = posix_word(interp)
    return (f"the change was applied, but its journal could not be completed ({applied.journal_error}): fix --undo "
            f"cannot go back to it yet. Its journal is left in {applied.journal}: cudamatrix fix --resume --python "
            f"{python} completes it (free space in the state folder first; fix --undo works after that); cudamatrix "
            f"fix --rollback --python {python} puts the starting set back")


def _path_needs(env: dict[str, str]) -> Said:
    """The message that names the library search path the solved set needs, and the commands that set it."""
    return Said("the library search path needs: " + " ".join(f"{k}={posix_word(v)}" for k, v in env.items()) +
                " (", tool("env"), ", or fix --write-activation)")


def _same_environment(python: str, other: str) -> bool:
    """Two interpreter paths of one environment: the same bin folder (not the resolved binary: every venv of a
    base Python links the same one)."""
    return os.path.dirname(os.path.abspath(python)) == os.path.dirname(os.path.abspath(other))


def _check_index_environment(allow_http: bool) -> None:
    for var in _INDEX_VARS:
        for url in os.environ.get(var, "").split():
            try:
                check_url(url.rpartition("=")[2] if var == "UV_INDEX" else url, allow_http)
            except UsageError as exc:
                raise UsageError(f"{var}: {exc.message}", hint=exc.hint) from None


def _remembered(environment: Environment, target: str, report: Report, env: dict[str, str],
                timings: dict[str, float], in_process: bool) -> FixResult:
    result = FixResult(python=environment.python.executable or target, status="unchanged", report=report,
                       from_cache=True, exit_code=exit_code(report), timings_ms=timings)
    result.messages.append("already consistent: nothing to install (environment unchanged since "
                           f"{report.cached_at})")
    if env:
        result.messages.append(_path_needs(env))
    if in_process:
        decision = _notebook(environment, None)
        if decision is not None:
            result.preload = decision.to_dict()
            result.messages.append(decision.reason)
    result.messages.append(f"verification remembered from {report.cached_at}")
    return result


def _detect(python: str | None) -> Environment:
    return detect(python=python)


def _matrix(data_dir: str | None):
    return load_matrix(data_dir)


def _diagnose(environment: Environment, matrix) -> list[Finding]:
    return diagnose(environment, matrix)


def _solve(environment: Environment, request: list[str], driver: str | None, gpus: list[str], matrix,
           mirror: str | None = None) -> Solution:
    """The same answer ``cudamatrix solve --python PATH [--driver --gpu]`` gives for this interpreter."""
    target = targets.from_environment(environment, matrix, name="this machine")  # looked up when called (tests count it)
    if driver or gpus:
        target = targets.from_flags(matrix, driver=driver, gpus=gpus, python=None, platform=None, cuda_toolkit=None,
                            base=target)
    solution = solver.solve([target], solver.parse_request(request, environment), matrix, installed=environment)
    return with_mirror(solution, mirror)


def _for_extensions(seen: Seen, solution: Solution, o: FixOptions, matrix
                    ) -> tuple[Solution, list[extfix.ExtensionChange]]:
    """The solved set that also answers the extension findings (install/extfix.py's rules): each broken
    extension's release for the torch kept; else, with no request of the user's, torch moved to the pin of the
    extension the data holds no release for (re-solved; kept as it was when that has no solution)."""
    env, findings = seen.environment, list(seen.findings or ())
    if not o.request:
        move = extfix.torch_move(env, findings, matrix, solution)
        if move is not None:
            try:
                solution = _solve(env, move, o.driver, o.gpus or [], matrix, o.mirror)
            except NoSolution:
                pass
    changes = extfix.extension_changes(env, findings, matrix, solution)
    solution = extfix.with_pages(solution, env, extfix.page_wheels(findings))
    return extfix.with_changes(solution, changes), changes


def _pending(interp: str, resume: bool, rollback: bool, dry_run: bool = False, undo: bool = False):
    """The journal of an interrupted change of ``interp``; refuses to go on past one unless told how."""
    if resume + rollback + undo > 1:
        raise UsageError("--resume, --rollback and --undo exclude each other", hint="pick one")
    pending = journals.load(interp) if not dry_run or resume or rollback else journals.peek(interp)
    if pending is not None and (resume or rollback):
        journals.check_usable(pending, interp)  # kept for this interpreter, and its owner ran on this host
    if pending is not None and journals.owner_alive(pending):
        raise UsageError(f"{pending.describe()} is still running", hint="wait for it to end")
    if pending is None and (resume or rollback):
        raise UsageError(f"no interrupted change of {interp} is recorded: nothing to "
                         f"{'resume' if resume else 'roll back'}", hint="run cudamatrix fix")
    if pending is not None and not (resume or rollback or dry_run):
        raise UsageError(f"found {pending.describe()}",
                         hint=f"cudamatrix fix --resume --python {posix_word(interp)} finishes it; cudamatrix fix "
                              f"--rollback --python {posix_word(interp)} puts the starting set back (from saved wheels, no network)",
                         detail={"journal": str(pending.folder)})
    return pending


def _way_back(interp: str) -> list[str]:
    """After a completed change: how to go back to its starting set (``fix --undo``; a rollback is for a change
    that was interrupted), or why that cannot be done offline."""
    try:
        last = journals.load_last(interp)
    except UsageError:
        return []
    if last is None:
        return []
    if last.data.get("dropped"):
        return [f"fix --undo cannot go back offline: {last.data['dropped']}"]
    return [Said("to go back to the starting set: ", tool("fix", "--undo"), " (from the wheels this fix kept, no "
                 "network)")]


def _rollback(pending, result: FixResult, python: str | None, interp: str, sites: list[str], data_dir: str | None,
              on_progress) -> FixResult:
    restored, left = rollback(pending, python=interp, site_packages=sites, on_progress=on_progress)
    still = [f"{d.name} {d.version}" for k in ("added", "removed", "changed") for d in left[k]]
    if still:
        result.exit_code = Exit.INSTALL_FAILED
        result.messages.append("could not put back: " + ", ".join(still) + f" (journal kept in {pending.folder})")
    else:
        result.messages.append("rolled back to the starting set of " + str(pending.data.get("started_at"))
                               + (": reinstalled " + ", ".join(f"{d.name} {d.version}" for d in restored)
                                  if restored else ""))
    environment = _detect(python)
    result.left = [f for f in _diagnose(environment, _matrix(data_dir)) if f.severity == "error"]
    return result


def _left(findings: list[Finding], environment: Environment, plan: Plan) -> list[Finding]:
    """The error findings after the fix, each fix text saying whether this plan could not or did not fix it: the
    plan's remedy for the same code and subject (:func:`remedy_key`), or the only
    one of that code."""
    names = set(environment.packages) | {r.name for r in plan.to_remove} | \
        {p.name for p in (plan.solution.to_install if plan.solution is not None else [])}
    by_key: dict[tuple, Remedy] = {}
    for r in plan.remedies:
        by_key.setdefault(remedy_key(r.code, r.title, names), r)
    out = []
    for f in findings:
        if f.severity != "error":
            continue
        same_code = [r for r in plan.remedies if r.code == f.code]
        remedy = by_key.get(remedy_key(f.code, f.title, names)) or (same_code[0] if len(same_code) == 1 else None)
        if remedy is not None and remedy.action == "not_fixable":
            f.fix = remedy.detail
        elif remedy is not None:
            f.fix = Said("still present after: ", remedy.detail, *(("; ", f.fix) if f.fix else ()))
        out.append(f)
    return out


def remedy_key(code: str, title: str, names) -> tuple[str, tuple[str, ...]]:
    """What a remedy answers, in facts a fix leaves as they were: the finding's code and the distributions among
    ``names`` its title is about (the version a title quotes changes with the fix; the distribution does not)."""
    return code, tuple(sorted(named_in(title, names)))


def _notebook(environment: Environment, solution: Solution | None):
    """The preload decision for this process, or None when there is nothing to look at.

    Asks the loader model (:mod:`cudamatrix.ldso.libpaths`) with this process's /proc/self/maps: a copy that
    an earlier import mapped wins by SONAME, LD_PRELOAD was applied when the kernel started, and only a
    wrong load that neither caused can still be prevented by loading the framework's own copy by path first.
    """
    if not environment.library_loads:
        return None
    loads = in_process_loads(environment)
    wrong = wrong_loads(environment, loads)
    ctx = notebook_context()
    preloaded = [w for w in wrong if w.cause == "LD_PRELOAD"]
    if preloaded:
        names = "; ".join(f"{w.load.path} stands in for {w.load.soname}" for w in preloaded)
        return Decision(action="restart", context=ctx, restart_line=RESTART_LINES[ctx],
                        mapped_wrong=[{"soname": w.load.soname, "mapped": w.load.path, "wanted": w.load.expected or ""}
                                      for w in preloaded],
                        reason=Said(f"LD_PRELOAD put the wrong copy in this process ({names}): restart the kernel "
                                    "with LD_PRELOAD unset or without these files (", tool("env"),
                                    " prints the change)"))
    earlier = [w for w in wrong if w.cause == "loaded earlier"]
    if earlier:
        decision = decide([w.load.expected for w in earlier if w.load.expected])
        if decision.action != "restart":  # decide() reads the maps itself; the model's word stands
            decision = Decision(action="restart", context=ctx, restart_line=RESTART_LINES[ctx], reason="")
        frameworks = sorted({w.load.framework for w in earlier})
        decision.reason = ("an earlier import in this process mapped another copy: " +
                           "; ".join(f"{w.load.path} where {w.load.framework} wants {w.load.expected}" for w in earlier)
                           + f". Restart the kernel, then import {' and '.join(frameworks)} (or call "
                           "cudamatrix.fix()) before whatever loaded that copy")
        return decision
    wanted = [w.load.expected for w in wrong if w.load.expected]
    if not wanted:
        return None
    decision = decide(wanted)
    return preload(decision) if decision.action == "preload" else decision


def write_activation_file(environment: Environment, changes: dict[str, str]) -> str | None:
    """Write the environment changes as a shell snippet next to the environment. Returns its path.

    Conda environments source ``etc/conda/activate.d``; elsewhere ``cudamatrix-env.sh`` is written
    beside the interpreter (``<prefix>/bin``) for the user or a Dockerfile to source.
    """
    if not changes:
        return None
    exe = environment.python.executable or sys.executable
    prefix = os.path.dirname(os.path.dirname(os.path.abspath(exe)))
    if os.path.isdir(os.path.join(prefix, "conda-meta")):
        folder = os.path.join(prefix, "etc", "conda", "activate.d")
    else:
        folder = os.path.dirname(os.path.abspath(exe))

    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "cudamatrix-env.sh")
    lines = ["# written by cudamatrix fix --write-activation: the library search path of the solved set"]
    lines += [export_line("sh", k, v) for k, v in changes.items()]
    write_atomic(path, "\n".join(lines) + "\n")  # atomic; a FIFO or folder there is refused (UsageError)
    return path


def _aimed(result: FixResult, python: str | None) -> FixResult:
    """Every command the result prints (messages, what is left, the plan's remedies) pointed at ``python`` when one
    was given: ``cudamatrix fix --python X``, ``X -m pip install``."""
    if not python or not isinstance(result, FixResult):
        return result
    result.messages = [aim(m, result.python) for m in result.messages]
    for f in result.left:
        f.fix = aim(f.fix, result.python) if f.fix else f.fix
    for r in result.plan.remedies if result.plan is not None else []:
        r.detail = aim(r.detail, result.python)
    return result


def _shown(result: FixResult, show: bool) -> FixResult:
    if show:  # human output lives with the command line's renderers

        human_fix(result)
        result.shown = True
    return result


class _Clock:
    def __init__(self, timings: dict[str, float]) -> None:
        self.timings = timings

    def __call__(self, name: str):
        clock = self

        class _Span:
            def __enter__(self):
                self.t = time.perf_counter()

            def __exit__(self, *exc):
                clock.timings[name] = round((time.perf_counter() - self.t) * 1000, 1)

        return _Span()


# ``cudamatrix.fix`` is both this module and the function: importing the submodule makes the package attribute
# the module, so the module itself answers ``cudamatrix.fix()`` (as cudamatrix.solve and cudamatrix.detect do)
callable_module(__name__, "fix")
