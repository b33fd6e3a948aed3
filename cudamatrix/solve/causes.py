"""Why nothing fits: structured causes (the rule and the machines it blocks) and the nearest ways out
(upgrade the driver, pin an older release, use the CPU build, change Python, split environments).
No I/O; :func:`cudamatrix.solve.solver.solve` raises the NoSolution this builds."""
from __future__ import annotations

from packaging.version import Version

from cudamatrix.errors import NoSolution
from cudamatrix.matrix.data import Matrix
from cudamatrix.models import Cause, Rejection, WayOut
from cudamatrix.solve import rules
from cudamatrix.solve.request import Request
from cudamatrix.solve.search import Candidate, Verdict
from cudamatrix.solve.target import Target

Verdicts = dict[str, list[Verdict]]  # family -> why each of its candidates was turned down


def no_solution(matrix: Matrix, request: Request, reps: list[Target], unique: dict[tuple, list[Target]],
                verdicts: Verdicts, missing: list[str], rejected: list[Rejection],
                combined: bool = False) -> NoSolution:
    """The NoSolution for families with no fitting candidate (``missing``), or for a request whose
    families fit one by one but not together (``combined``): typed causes, ways out, the rejections."""
    causes: list[Cause] = []
    ways: list[WayOut] = []
    for family in missing:
        entries = verdicts.get(family, [])
        if not entries:
            causes.append(Cause(rule="request", message=f"the matrix has no {family} release"))
            continue
        in_request = [(c, rs, m) for c, rs, m in entries if not any(r.rule == "request" for r in rs)]
        if not in_request:
            asked = " ".join(str(r) for r in request.families[family])
            causes.append(Cause(rule="request", message=f"no {family} release in the matrix matches {asked}"))
            continue
        names = {key: [t.name for t in group] for key, group in unique.items()}
        # in a fleet, a machine blocks when some build fits every other machine but not it
        blocking: dict[tuple, tuple[Candidate, list[rules.Reason]]] = {}  # machine -> (candidate, reasons there)
        if len(unique) > 1:
            for cand, _, failing in in_request:
                if len(failing) == 1:
                    (key, found), = failing.items()
                    if key not in blocking or cand.release.version > blocking[key][0].release.version:
                        blocking[key] = (cand, found)
        if blocking:
            for key, (_, found) in blocking.items():
                causes.append(Cause(rule=found[0].rule, machines=sorted(names[key]),
                                    message=f"{', '.join(names[key])}: {found[0].message} "
                                            f"(it fits every other machine)"))
        else:
            by_rule: dict[str, tuple[rules.Reason, set[str]]] = {}
            for _, rs, failing in in_request:
                for r in rs:
                    by_rule.setdefault(r.rule, (r, set()))
                for key, found in failing.items():  # a rule blocks the machines where it failed, not the others
                    for r in found:
                        by_rule[r.rule][1].update(names[key])
            # a Jetson board rules out every build of the index at once: say that first
            for rule, (reason, machines) in sorted(by_rule.items(), key=lambda kv: kv[0] != "jetson"):
                causes.append(Cause(rule=rule, message=reason.message, machines=sorted(machines)))
        # ways out
        driver_only = [(c, rs) for c, rs, _ in in_request if {r.rule for r in rs} <= {"driver_floor", "gpu_driver"}]
        if driver_only:
            from cudamatrix.matrix.query import driver_version

            # a build needs the highest of its floors (CUDA and GPU); the way out is the lowest such need
            needs = [(max((r.need_driver for r in rs if r.need_driver), key=driver_version), c)
                     for c, rs in driver_only if any(r.need_driver for r in rs)]
            if needs:
                low = min(driver_version(n) for n, _ in needs)
                need, first = max(((n, c) for n, c in needs if driver_version(n) == low),
                                  key=lambda x: x[1].release.version)
                top_need, best = max(needs, key=lambda x: (x[1].release.version, driver_version(x[0])))
                newest = "" if best is first else f"; the newest, {best.label}, needs >= {top_need}"
                ways.append(WayOut(kind="upgrade_driver",
                                   message=f"upgrade the driver to >= {need} ({first.label} then fits{newest}); "
                                           f"or pin an older {family} built for an older CUDA"))
        jetson = next((r for _, rs, _ in in_request for r in rs if r.rule == "jetson"), None)
        if jetson is not None:
            # no default-index or PyTorch-index build runs on the board, whatever the version or driver
            ways.append(WayOut(kind="jetpack",
                               message=f"install {family} from NVIDIA's JetPack wheels for the board's JetPack "
                                       f"release (NVIDIA's 'PyTorch for Jetson' builds or the jetson-containers "
                                       f"images); no default-index or PyTorch-index build has kernels for it"))
        fits_ignoring_request = [c for c, rs, _ in entries if {r.rule for r in rs} == {"request"}]
        ok_older = sorted(fits_ignoring_request, key=lambda c: c.release.version, reverse=True)
        ok_older = [c for c in ok_older if all(not rules.check(matrix, c.release, c.variant, t) for t in reps)]
        # (a GPU build turned down by a rule, not by the request, was checked on every target and failed there:
        # only a build the request turned down can fit once the request is relaxed)
        gpu_ok = [c for c in ok_older if c.variant.cuda is not None]
        if gpu_ok:
            c = gpu_ok[0]
            ways.append(WayOut(kind="pin_older",
                               message=f"relax the request: {family}=={c.release.version} ({c.variant.name}) fits"))
        # the CPU build of what was asked for (turned down only for being a CPU build on a GPU machine), else
        # the newest CPU build of another release; a build the request turned down was never checked, so check it
        cpu = [c for c, rs, _ in entries if c.variant.cuda is None and {r.rule for r in rs} == {"gpu_wanted"}]
        cpu = cpu or [c for c, rs, _ in entries if c.variant.cuda is None and {r.rule for r in rs} == {"request"}
                      and all(not rules.check(matrix, c.release, c.variant, t) for t in reps)]
        if cpu:
            c = max(cpu, key=lambda c: c.release.version)
            ways.append(WayOut(kind="cpu_build", message=f"use the CPU build: {family}=={c.version_text()}"))
        if any(r.rule == "python" for _, rs, _ in in_request for r in rs):
            pys = sorted({p for c, _, _ in in_request for p in c.release.python}, key=Version)
            if pys:
                ways.append(WayOut(kind="change_python", message=f"use Python {pys[-1]} "
                                                                 f"({family} supports {', '.join(pys[-4:])})"))
    if combined:
        shared = [r for r in rejected if "shared_nvidia" in r.rules or "co_installed" in r.rules]
        for rejection in shared[:5]:
            causes.append(Cause(rule=rejection.rules[0], message=rejection.reasons[0]))
        if not causes:
            causes.append(Cause(rule="shared_nvidia", message="no combination of the requested frameworks shares "
                                                              "one consistent set of nvidia-* wheels"))
        ways.append(WayOut(kind="split_environments",
                           message="install " + " and ".join(request.families) + " into separate environments"
                           if len(request.families) > 1 else
                           "uninstall the conflicting framework or move it to its own environment"))
    summary = "; ".join(c.message for c in causes[:3])
    message = f"no consistent set for {' '.join(request.texts)}: {summary}"
    return NoSolution(message, causes=causes, ways_out=ways, rejected=list(rejected),
                      hint="; ".join(w.message for w in ways) or None)


