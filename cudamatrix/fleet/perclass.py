"""A fleet's answers per node class: locks (one for all when one set fits, else one per class), the pre-job
check, and doctor's findings. No I/O beyond reading the node files; the caller writes and prints.

How a job lands on the nodes of its class (the names the mapping uses):

- Ray: start each node with ``ray start ... --labels '{"cudamatrix-class": "<class id>"}'`` and submit with
  ``label_selector={"cudamatrix-class": "<class id>"}`` and the class's ``runtime_env`` (its pinned packages and
  index options for pip, and the environment changes the solution needs).
- Slurm: give each node the feature ``cudamatrix_<class id with _ for ->`` (``Features=`` in slurm.conf, or
  ``scontrol update NodeName=... AvailableFeatures=...``) and submit with ``--constraint=<that feature>``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from cudamatrix.diagnose.findings import diagnose
from cudamatrix.errors import NoSolution
from cudamatrix.fleet.classes import NodeClass, group
from cudamatrix.fleet.nodes import env_paths, load_nodes
from cudamatrix.fleet.nodetargets import node_targets
from cudamatrix.lock.lockfile import passed_through, requirements_txt, uv_project
from cudamatrix.matrix.data import Matrix
from cudamatrix.models import Environment, Solution
from cudamatrix.schema import record
from cudamatrix.solve import solver
from cudamatrix.solve.checks import FRAMEWORK_DISTS, check_requirements
from cudamatrix.solve.driverclass import DESKTOP, class_key, floors_of
from cudamatrix.solve.indexes import index_layout, with_mirror
from cudamatrix.solve.rules import DriverWords
from cudamatrix.solve.solver import parse_request
from cudamatrix.solve.target import Target

RAY_LABEL = "cudamatrix-class"
MAPPING = "locks.json"


def slurm_feature(cid: str) -> str:
    """The Slurm node feature that marks a class (features are safest as letters, digits and ``_``)."""
    return "cudamatrix_" + cid.replace("-", "_")


@record
class Fleet:
    """Node names, their Environments and Targets (same order), and their classes."""

    names: list[str]
    environments: list[Environment]
    targets: list[Target]
    classes: list[NodeClass]

    def targets_of(self, cls: NodeClass) -> list[Target]:
        return [self.targets[i] for i in cls.members]

    def solver_key(self, cls: NodeClass) -> frozenset:
        """Classes with the same key get the same answer from the solver (they differ only in facts it does
        not read, such as how many GPUs of a kind or their memory)."""
        return frozenset(self.targets[i].key() for i in cls.members)


def load_fleet(matrix: Matrix, env_files: list[Path]) -> Fleet:
    """Read node files (folders expand to their node files) and group them into classes. Raises UsageError."""
    paths = env_paths(env_files)
    names = [p.stem for p in paths]
    envs, same = load_nodes(paths)
    targets = node_targets(matrix, envs, same, names)
    return Fleet(names, envs, targets, group(list(zip(names, envs, strict=False))))


def _ray(solution, passthrough: list[str], links: list[str], cid: str) -> dict:
    index_url, extra = index_layout(solution.packages, bool(passthrough))
    options = (["--index-url", index_url] if index_url else []) + [a for u in extra for a in ("--extra-index-url", u)] \
        + [a for u in links for a in ("--find-links", u)]
    pip: dict = {"packages": [p.requirement() for p in solution.packages] + passthrough}
    if options:
        pip["pip_install_options"] = options
    runtime_env: dict = {"pip": pip}
    if solution.env:
        runtime_env["env_vars"] = dict(solution.env)
    return {"label_selector": {RAY_LABEL: cid}, "node_labels": {RAY_LABEL: cid}, "runtime_env": runtime_env}


def lock_per_class(matrix: Matrix, fleet: Fleet, requirements: list[str], fmt: str = "requirements",
                   mirror: str | None = None, write: Callable[..., str] | None = None) -> tuple[dict[str, str], dict]:
    """Lock files by file name, and the mapping document (``locks.json``): one lock for every class when one
    set fits the whole fleet, else one per class; classes with no consistent set are listed with their causes.
    ``write(solution, targets, passthrough, find_links=...)`` makes a lock's text (default: the pins, or the uv
    settings); each lock's requirements passed through are as its solution resolved them (a PyG wheel pinned with
    its page, flash-attn's release file: :func:`cudamatrix.lock.lockfile.passed_through`)."""
    request = parse_request(requirements, None)
    passed = request.passthrough
    write = write or (requirements_txt if fmt == "requirements" else uv_project)

    def locked(sol: Solution, targets: list) -> str:
        passthrough, links = passed_through(passed, sol.pip_args, matrix)
        return write(sol, targets, passthrough, find_links=links)

    ext = "txt" if fmt == "requirements" else "toml"
    files: dict[str, str] = {}
    mapping: dict = {"schema_version": 1, "request": request.texts, "format": fmt, "single": False,
                     "nodes": len(fleet.names), "classes": [], "unsolved": [], "joint_causes": []}
    joint = _joint(matrix, fleet, request, mirror, mapping)
    if joint is not None:
        files[f"fleet.{ext}"] = locked(joint, fleet.targets)
        mapping["single"] = True
        solutions = {c.id: (f"fleet.{ext}", joint) for c in fleet.classes}
    else:
        solutions = {}
        for cls, sol in _per_class(matrix, fleet, request, mirror):
            if isinstance(sol, NoSolution):
                mapping["unsolved"].append({**cls.to_dict(), "causes": [c.to_dict() for c in sol.causes],
                                            "ways_out": [w.to_dict() for w in sol.ways_out]})
                continue
            name = f"{cls.id}.{ext}"
            files[name] = locked(sol, fleet.targets_of(cls))
            solutions[cls.id] = (name, sol)
    mapping["classes"] = [_class_entry(cls, *solutions[cls.id], matrix, passed) for cls in fleet.classes
                          if cls.id in solutions]
    return files, mapping


def _joint(matrix: Matrix, fleet: Fleet, request, mirror: str | None, mapping: dict) -> Solution | None:
    """The one set that fits every node, or None (the reason in ``mapping["joint_causes"]``). For a fleet that
    mixes nodes with a usable GPU and nodes without one, the solver's one set is the GPU build (a CPU build is
    never chosen for a GPU target unasked), which the other nodes would run on their CPU with gigabytes of
    nvidia-* wheels they never load: asked for locks per class, each class gets its own (a CPU build where there
    is no GPU)."""
    try:
        joint = with_mirror(solver.solve(fleet.targets, request, matrix), mirror)
    except NoSolution as exc:
        mapping["joint_causes"] = [c.to_dict() for c in exc.causes]
        return None
    gpu_nodes = [t.name for t in fleet.targets if t.wants_gpu]
    cpu_nodes = [t.name for t in fleet.targets if not t.wants_gpu]
    if gpu_nodes and cpu_nodes:
        mapping["joint_causes"] = [{"rule": "cpu_only", "machines": cpu_nodes,
                                    "message": "some nodes have no usable GPU: the one set for every node would be "
                                               "the GPU build, so each class gets its own lock (a CPU build where "
                                               "there is no GPU)"}]
        return None
    return joint


def _per_class(matrix: Matrix, fleet: Fleet, request, mirror: str | None):
    """(class, its Solution or NoSolution) for every class; classes the solver cannot tell apart get one solve,
    and so do classes the rules cannot tell apart (:func:`~cudamatrix.solve.driverclass.class_key`: the same
    facts but for a driver between the same two stated versions): the first one's answer, in the words of each
    (:func:`_as_for`)."""
    answers: dict[frozenset, Solution | NoSolution] = {}
    alike: dict[tuple, tuple[list[Target], Solution | NoSolution]] = {}
    floors = floors_of(matrix)
    for cls in fleet.classes:
        key = fleet.solver_key(cls)
        if key in answers:
            yield cls, answers[key]
            continue
        targets = fleet.targets_of(cls)
        rules_key = class_key(targets[0], floors) if len(key) == 1 else None
        first = alike.get(rules_key) if rules_key is not None else None
        answer = _as_for(first[1], first[0], targets) if first is not None else None
        if answer is None:
            try:
                answer = with_mirror(solver.solve(targets, request, matrix), mirror)
            except NoSolution as inner:
                answer = inner
            if rules_key is not None:
                alike.setdefault(rules_key, (targets, answer))
        answers[key] = answer
        yield cls, answer


def _as_for(answer: Solution | NoSolution, first: list[Target], targets: list[Target]
            ) -> Solution | NoSolution | None:
    """The answer for ``first`` (one class) as it is for ``targets`` (a class alike for the rules): a Solution is
    the same set (the lock is written for each class's own targets); a NoSolution's words get the class's own
    driver (where they quote the first one's, both desktop drivers: see :mod:`cudamatrix.solve.driverclass`) and
    its causes the class's own machines. None when that cannot be vouched for (the words quote a machine's name,
    a driver of another kind): the class is then solved itself."""
    from dataclasses import replace

    if not isinstance(answer, NoSolution):
        return answer
    names, mine = sorted(t.name for t in first), sorted(t.name for t in targets)
    texts = _texts(answer)
    if any(n in text for n in names for text in texts) or any(c.machines not in ([], names) for c in answer.causes):
        return None
    words = _driver_words(first[0].driver, targets[0].driver, texts)
    if words is None:
        return None
    return NoSolution(words(answer.message), hint=answer.hint and words(answer.hint),
                      causes=[replace(c, message=words(c.message), machines=mine if c.machines else [])
                              for c in answer.causes],
                      ways_out=[replace(w, message=words(w.message)) for w in answer.ways_out],
                      rejected=[replace(r, candidate=words(r.candidate), reasons=[words(m) for m in r.reasons])
                                for r in answer.rejected])


def _texts(answer: NoSolution) -> list[str]:
    """Every sentence of a NoSolution: its message and hint, its causes', ways out's and rejections' words."""
    return [answer.message, answer.hint or ""] + [c.message for c in answer.causes] + \
        [w.message for w in answer.ways_out] + [m for r in answer.rejected for m in [r.candidate, *r.reasons]]


def _driver_words(old: str | None, new: str | None, texts: list[str]) -> Callable[[str], str] | None:
    """What turns words about driver ``old`` into words about ``new``: nothing to change when none quotes it; when
    both are desktop drivers, ``new`` put where the rules quoted ``old`` (:class:`~cudamatrix.solve.rules.
    DriverWords`, a record of the places); None otherwise, or where words hold ``old`` with no such record."""
    if old == new or not old or not any(old in text for text in texts):
        return lambda text: text
    if not (new and DESKTOP.fullmatch(old) and DESKTOP.fullmatch(new)):
        return None
    if any(old in text and not (isinstance(text, DriverWords) and text.driver == old) for text in texts):
        return None
    return lambda text: text.for_driver(new) if isinstance(text, DriverWords) else text


def _class_entry(cls: NodeClass, name: str, sol: Solution, matrix: Matrix, passed: list) -> dict:
    """A class's entry in ``locks.json``: its lock file, frameworks, and how jobs land on it (Ray, Slurm; the
    requirements passed through as its solution resolved them, with their find-links pages)."""
    passthrough, links = passed_through(passed, sol.pip_args, matrix)
    return {**cls.to_dict(), "lock": name,
            "frameworks": [f"{f.name} {f.version} {f.variant}" for f in sol.frameworks],
            "cuda": sol.cuda, "cudnn": sol.cudnn,
            "ray": _ray(sol, passthrough, links, cls.id),
            "slurm": {"feature": slurm_feature(cls.id), "constraint": f"--constraint={slurm_feature(cls.id)}"}}


def check_fleet(matrix: Matrix, fleet: Fleet, text: str | None, name: str | None,
                mirror: str | None = None) -> dict:
    """The pre-job gate over a fleet: the whole fleet first (one image for every node), then, when it does not
    fit, every class on its own, so that the result names the blocking classes and their nodes. Without
    ``text`` each node's installed frameworks are checked (nodes grouped by class and installed set)."""
    result: dict = {"fits": True, "nodes": len(fleet.names), "classes": [], "blocking": []}
    joint = check_requirements(matrix, fleet.targets, None, text, name, mirror) if text is not None else None
    if joint is not None and joint["fits"]:
        result.update({k: v for k, v in joint.items() if k not in ("targets",)})
        result["classes"] = [{**c.to_dict(), "fits": True} for c in fleet.classes]
        return result
    if joint is not None:
        result["joint_problems"] = joint["problems"]
        result["checked"] = joint["checked"]
    answers: dict[tuple, dict] = {}
    for cls, members, installed in _check_groups(fleet, text is not None):
        targets = [fleet.targets[i] for i in members]
        # with one requirements file, classes the solver cannot tell apart get one check
        key = (frozenset(t.key() for t in targets), id(installed) if installed is not None else None)
        if key not in answers:
            answers[key] = check_requirements(matrix, targets, installed, text, name, mirror)
        one = answers[key]
        entry = {**cls.to_dict(), "nodes": [fleet.names[i] for i in members], "fits": one["fits"],
                 "checked": one["checked"], "problems": one["problems"], "ways_out": one.get("ways_out", [])}
        result["classes"].append(entry)
        if not one["fits"]:
            result["blocking"].append(entry)
    # classes that each fit but not together: the image must differ per class (lock --per-class)
    result["fits"] = not result["blocking"] and joint is None
    return result


def _check_groups(fleet: Fleet, with_file: bool) -> list[tuple[NodeClass, list[int], Environment | None]]:
    """What ``check`` asks about: each class (with a requirements file), or each class's nodes grouped by their
    installed frameworks (with the first such node's environment)."""
    if with_file:
        return [(cls, cls.members, None) for cls in fleet.classes]
    groups: list[tuple[NodeClass, list[int], Environment | None]] = []
    for cls in fleet.classes:
        by_set: dict[tuple, list[int]] = {}
        for i in cls.members:
            pkgs = fleet.environments[i].packages
            by_set.setdefault(tuple((d, pkgs.get(d)) for d in FRAMEWORK_DISTS), []).append(i)
        groups += [(cls, members, fleet.environments[members[0]]) for members in by_set.values()]
    return groups


def doctor_fleet(matrix: Matrix, fleet: Fleet) -> dict:
    """doctor on every node, summarised per class: each finding code once per class, with the nodes it has."""
    classes = []
    healthy = True
    for cls in fleet.classes:
        by_code: dict[str, dict] = {}
        for i in cls.members:
            for f in diagnose(fleet.environments[i], matrix):
                entry = by_code.setdefault(f.code, {"code": f.code, "severity": f.severity, "title": f.title,
                                                    "evidence": f.evidence, "fix": f.fix, "nodes": []})
                entry["nodes"].append(fleet.names[i])
        findings = sorted(by_code.values(), key=lambda e: ({"error": 0, "warning": 1, "info": 2}[e["severity"]],
                                                            e["code"]))
        errors = any(e["severity"] == "error" for e in findings)
        healthy = healthy and not errors
        classes.append({**cls.to_dict(), "findings": findings, "healthy": not errors})
    return {"nodes": len(fleet.names), "classes": classes, "healthy": healthy,
            "matrix_version": matrix.meta.data_version}
