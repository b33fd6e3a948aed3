"""``verify() -> Report``: prove the environment on the GPU, in a child interpreter.

Each framework runs in its own child (:mod:`cudamatrix.verify.child`, a standard-library script
run in the target interpreter): it imports the framework, checks the CPU convolution against a
naive reference, then runs a cuDNN convolution and a matmul on the GPU in fp32 with TF32 off and
compares them with the CPU. A crash, a hang or a segfault of the child becomes a failed result
with its cause; the finding codes match ``doctor``'s.
"""
from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any, Literal

from cudamatrix import proc
from cudamatrix.detect import libraries, python_env
from cudamatrix.errors import Exit
from cudamatrix.ldso import elf, libpaths, openers
from cudamatrix.ldso.libpaths import file_version
from cudamatrix.models import Environment, FrameworkReport, LibraryLoad, Report
from cudamatrix.names import FAMILY_NAMES
from cudamatrix.safe.files import parse_json

FRAMEWORKS = FAMILY_NAMES
CHILD = Path(__file__).with_name("child.py")
MARK = "CUDAMATRIX-VERIFY "
DEFAULT_TIMEOUT_S = 300.0

# The runtime's own words -> finding code. Sources: CUDA Runtime API error strings
# (cudaErrorNoKernelImageForDevice, cudaErrorInsufficientDriver), cuDNN's version check message.
_CAUSES = (
    ("no kernel image is available", "ARCH_UNSUPPORTED"),
    ("not compatible with the current pytorch installation", "ARCH_UNSUPPORTED"),
    ("driver version is insufficient", "DRIVER_TOO_OLD"),
    ("nvidia driver on your system is too old", "DRIVER_TOO_OLD"),
    ("cudnn version incompatibility", "CUDNN_MISMATCH"),
    ("cudnn_status_version_mismatch", "CUDNN_MISMATCH"),
    ("cudnn_status_not_initialized", "CUDNN_MISMATCH"),
    ("libcudnn", "CUDNN_MISMATCH"),
    ("found no nvidia driver", "NO_DRIVER"),
    ("no cuda gpus are available", "NO_GPU"),
    ("undefined symbol", "LIBRARY_MISMATCH"),
    ("cannot open shared object file", "LIBRARY_MISSING"),
    ("out of memory", "GPU_OUT_OF_MEMORY"),
)


def classify(text: str | None) -> str | None:
    """The finding code for an error text, or None."""
    low = (text or "").lower()
    for needle, code in _CAUSES:
        if needle in low:
            return code
    return None


def gpu_present(environment: Environment | None = None) -> bool:
    """Is there a usable NVIDIA GPU here? From a detected Environment when given, else a cheap probe
    (the kernel module's version file and a device node; no NVML, no subprocess)."""
    if environment is not None and environment.driver.status != "unknown":
        return environment.driver.status == "ok" and bool(environment.gpus or environment.driver.version)
    return os.path.exists("/proc/driver/nvidia/version") and os.path.exists("/dev/nvidia0")


def verify(*, python: str | None = None, frameworks: list[str] | str = "all", timeout: float = DEFAULT_TIMEOUT_S,
           env: dict[str, str] | None = None, environment: Environment | None = None,
           gpu: bool | None = None, loads: list[LibraryLoad] | None = None) -> Report:
    """Run the check for each framework; returns a Report (status verified / failed / not_possible).

    ``frameworks``: a name, a list, or "all" (those not installed are left out, unless none is).
    ``env``: environment changes for the child (the solution's LD_LIBRARY_PATH). ``gpu``: override
    the GPU probe. ``loads``: the loader model's predictions for ``python`` in the child's environment, when the
    caller has them already (``fix`` hands on detect's); else they are made here. Never raises for what the child
    does.
    """
    python = os.path.abspath(python) if python else sys.executable  # the children run in "/": not relative to it
    names = list(FRAMEWORKS) if frameworks == "all" else ([frameworks] if isinstance(frameworks, str) else list(frameworks))
    expected = gpu_present(environment) if gpu is None else gpu
    child_env = {**os.environ, **(env or {})}
    reports: list[FrameworkReport] = []
    for name in names:  # an interpreter that hangs before it says anything is not waited for again
        hung = next((r for r in reports if _hung_at_start(r)), None)
        reports.append(check(python, name, gpu_expected=expected, timeout=timeout, env=child_env) if hung is None
                       else FrameworkReport(framework=name, status="failed", cause=hung.cause,
                                            finding_code=hung.finding_code))
    predicted = [] if any(_hung_at_start(r) for r in reports) else \
        loads if loads is not None else predictions(python, child_env)
    for report in reports:
        compare_maps(report, [x for x in predicted if x.framework == report.framework])
        check_mixed(report)
    if frameworks == "all":
        installed = [r for r in reports if r.status != "not_installed"]
        reports = installed or [FrameworkReport(framework="all", status="failed", finding_code="NOT_INSTALLED",
                                                cause="none of torch, tensorflow, jax is installed for " + python)]
    return Report(status=overall(reports), frameworks=reports)


def _hung_at_start(report: FrameworkReport) -> bool:
    """The child ran out of time, or printed without end, before its first word: the interpreter itself does."""
    return bool(getattr(report, "_stuck", False))


def overall(reports: list[FrameworkReport]) -> Literal["verified", "failed", "not_possible"]:
    statuses = {r.status for r in reports}
    if "failed" in statuses or "not_installed" in statuses:
        return "failed"
    if "not_possible" in statuses:
        return "not_possible"
    return "verified"


def exit_code(report: Report) -> int:
    """0 verified, 5 failed, 6 not possible here (no usable GPU); 1 when nothing could be checked because no
    framework asked for is installed: a finding (NOT_INSTALLED), not a GPU that is missing, so a gate that accepts
    6 on a machine without GPU never passes an environment without the framework."""
    if report.frameworks and all(f.status == "not_installed" or f.finding_code == "NOT_INSTALLED"
                                 for f in report.frameworks):
        return Exit.PROBLEMS
    return {"verified": Exit.OK, "failed": Exit.VERIFY_FAILED}.get(report.status, Exit.VERIFY_NOT_POSSIBLE)


def check(python: str, framework: str, *, gpu_expected: bool, timeout: float, env: dict[str, str]) -> FrameworkReport:
    """One framework in one child interpreter."""
    r = proc.run([python, str(CHILD), framework, "1" if gpu_expected else "0"], timeout=timeout, env=env, cwd="/")
    events = parse_events(r.stdout)
    last = events[-1] if events else {}
    stage = last.get("stage", "start-up")
    fields = _reported(events)
    tail = _tail(r.stderr)
    if last.get("stage") == "result":
        status = last.get("status", "failed")
        cause = last.get("cause")
        code = last.get("finding_code") or (classify(cause or "") if status == "failed" else None)
        if status == "verified":
            code = _cudnn_mismatch(last)
            if code:
                status, cause = "failed", "more than one cuDNN, or another major than the build's, is mapped"
        report = FrameworkReport(framework=framework, status=status, cause=cause, finding_code=code,
                                 mapped_libraries=last.get("mapped_libraries") or [],
                                 extensions=_extensions(last),
                                 stderr_tail=tail, stderr_lines=_count(r.stderr), **fields)
        judge_extensions(report)
        # compared with the loader model by verify(); not serialised
        vars(report).update(_maps=last.get("maps"), _imported=any(e.get("stage") == "imported" for e in events))
        return report
    if r.timed_out:
        cause = f"no result within {timeout:g}s (hung after stage {stage!r})"
        code = "VERIFY_TIMEOUT"
    elif r.overflow:
        cause, code = f"the child {r.error} (after stage {stage!r})", "VERIFY_CRASHED"
    elif r.returncode is None:
        cause, code = f"could not start {python}: {r.error}", "PYTHON_NOT_FOUND"
    elif r.returncode < 0:
        cause, code = _crash(framework, stage, _signal_name(-r.returncode), tail)
    else:
        cause = f"the child exited with status {r.returncode} after stage {stage!r}"
        code = classify(tail) or "VERIFY_CRASHED"
    report = FrameworkReport(framework=framework, status="failed", cause=cause, finding_code=code, stderr_tail=tail,
                             stderr_lines=_count(r.stderr), **fields)
    vars(report)["_stuck"] = (r.timed_out or bool(r.overflow)) and not events  # not serialised
    return report


def _extensions(result: dict) -> list[dict]:
    """The extensions the child's result lists (entries of another shape are left out)."""
    listed = result.get("extensions")
    return [e for e in listed if isinstance(e, dict)] if isinstance(listed, list) else []


def _crash(framework: str, stage: str, sig: str, tail: str | None) -> tuple[str, str]:
    """The cause and code of a child killed by a signal: an extension's when it was importing one."""
    if stage.startswith("extension "):  # importing (or running) that extension killed the process
        return (f"importing {stage[len('extension '):]} crashed the child with {sig}, after {framework}'s work",
                "EXTENSION_IMPORT_FAILED")
    return f"the child crashed with {sig} after stage {stage!r}", classify(tail) or "VERIFY_CRASHED"


def judge_extensions(report: FrameworkReport) -> None:
    """An installed extension that does not import beside the framework fails the check (EXTENSION_IMPORT_FAILED,
    its own words as the cause), and one whose GPU operation differs from the CPU's too (WRONG_RESULT); a failure of
    the framework's own stays the report's finding."""
    failed = [e for e in report.extensions if e.get("status") == "failed"]
    wrong = [e for e in report.extensions if e.get("status") == "wrong"]
    if report.status not in ("verified", "not_possible") or not (failed or wrong):
        return
    first = (failed or wrong)[0]
    name = f"{first.get('package')} {first.get('version') or ''}".strip()
    beside = f"{report.framework} {report.version}" if report.version else report.framework
    if failed:
        words = str(first.get("error") or "no message")
        report.finding_code = "EXTENSION_IMPORT_FAILED"
        report.cause = f"{name} does not import beside {beside}: {words}"
    else:
        report.finding_code = "WRONG_RESULT"
        report.cause = (f"{name}'s GPU operation differs from the CPU's by {first.get('max_abs_error'):.3g} (beside "
                        f"{beside})")
    more = len(failed) + len(wrong) - 1
    if more:
        report.cause += f" (and {more} more extension(s): see extensions)"
    report.status = "failed"


def _reported(events: list[dict]) -> dict[str, Any]:
    """The report's fields from what every stage said (a failure's last line carries only its cause)."""
    seen: dict[str, Any] = {}
    for event in events:
        seen.update({k: v for k, v in event.items() if v is not None})
    fields: dict[str, Any] = {k: seen.get(k) for k in ("version", "cuda", "cudnn", "device_name", "compute_capability",
                                                       "time_to_first_result_s", "max_abs_error")}
    fields["cpu_checked"] = any(e.get("stage") == "cpu_checked" for e in events)
    if fields["max_abs_error"] is None:  # no GPU comparison ran: the CPU against the reference
        fields["max_abs_error"] = seen.get("cpu_error")
    return fields


def predictions(python: str, environ: dict[str, str]) -> list:
    """The loader model's predictions for the child: ``python``'s frameworks and site-packages, the child's
    environment, this machine's ld.so cache. [] when the interpreter cannot be probed."""
    side, error = python_env.probe(python, 30.0)
    if error:
        return []
    entries, _note = libraries.run_ldconfig(10.0)
    return libpaths.predict_loads(side.frameworks, side.python.site_packages, side.python.executable, environ,
                                  entries)


def compare_maps(report: FrameworkReport, loads: list) -> None:
    """Fill ``loads_compared`` and ``model_errors``: each predicted file against the child's /proc/self/maps.

    A prediction agrees when its file is mapped. It is a model error when another file of the same SONAME
    is mapped instead, or when nothing of that SONAME is mapped although the import went through (a load at
    import time; first-use loads are checked only when the child got that far)."""
    maps = getattr(report, "_maps", None)
    if maps is None:
        return
    mapped_real = {os.path.realpath(p): p for p in maps}
    by_soname: dict[str, list[str]] = {}
    for path in maps:
        dyn = elf.try_read(path)
        name = dyn.soname if dyn and dyn.soname else os.path.basename(path)
        by_soname.setdefault(name, []).append(path)
    imported = getattr(report, "_imported", False)
    for load in loads:
        if load.path is None:
            continue
        others = [p for p in by_soname.get(load.soname, []) if os.path.realpath(p) != load.path]
        row = {"soname": load.soname, "predicted": load.path, "rule": load.rule, "when": load.when,
               "mapped": mapped_real.get(load.path) or (others[0] if others else None)}
        if load.path in mapped_real:
            row["agree"] = True
        elif others or (load.when == "import" and imported):
            row["agree"] = False
        else:
            row["agree"] = None  # not mapped yet (a first-use load, or the import stopped before it)
        report.loads_compared.append(row)
        if row["agree"] is False:
            report.model_errors.append({"soname": load.soname, "predicted": load.path, "mapped": row["mapped"],
                                        "rule": load.rule})


def mixed_loads(maps: list[str], mapped_libraries: list[dict]) -> list[dict]:
    """The library families (:mod:`cudamatrix.ldso.openers`) whose files in ``maps`` come from more than one
    folder of different or unknown versions: [{family, copies: [{folder, version, files}]}], the opener's copy
    first. Versions: the child's own answers (``mapped_libraries``), else the file name."""
    answered = {os.path.realpath(m["path"]): m.get("version") for m in mapped_libraries if m.get("path")}
    families: dict[str, dict[str, dict]] = {}
    for path in maps:
        dyn = elf.try_read(path)
        name = os.path.basename(path)
        soname = dyn.soname if dyn is not None and dyn.soname else name
        family = openers.family_of(soname) or openers.family_of(openers.soname_guess(name))
        if family is None:
            continue
        real = os.path.realpath(path)
        copy = families.setdefault(family, {}).setdefault(os.path.dirname(real), {
            "folder": os.path.dirname(real), "version": None, "files": [], "opener": False})
        copy["files"].append(os.path.basename(real))
        copy["opener"] = copy["opener"] or openers.is_opener(soname) and not soname.startswith("libcudnn_")
        version = answered.get(real) or _name_version(real)
        copy["version"] = copy["version"] or version
    out = []
    for family, copies in families.items():
        releases = {openers.version_tuple(c["version"]) for c in copies.values()}
        if len(copies) > 1 and (len(releases) > 1 or None in releases):
            ordered = sorted(copies.values(), key=lambda c: not c["opener"])
            out.append({"family": family, "copies": [{k: c[k] for k in ("folder", "version", "files")} for c in ordered]})
    return out


def _name_version(path: str) -> str | None:
    return file_version(path, {})


def check_mixed(report: FrameworkReport) -> None:
    """A library family mapped from two copies after the work is a failure, even when the work ran: the
    sub-libraries of one copy run with another copy's shim (LIBRARY_MIXED)."""
    maps = getattr(report, "_maps", None)
    if not maps:
        return
    report.mixed_loads = mixed_loads(maps, report.mapped_libraries)
    if report.mixed_loads and report.status in ("verified", "not_possible"):
        first = report.mixed_loads[0]
        copies = ", ".join(f"{c['folder']} ({c['version'] or 'version unknown'})" for c in first["copies"])
        ran = "the work ran, by luck" if report.status == "verified" else "only the CPU path ran"
        report.status, report.finding_code = "failed", "LIBRARY_MIXED"
        report.cause = f"{first['family']} is mapped from more than one copy: {copies}; {ran}"


def _cudnn_mismatch(result: dict) -> str | None:
    """CUDNN_MISMATCH when two different cuDNN copies are mapped, or the mapped major is not the built one."""
    cudnn = [m for m in result.get("mapped_libraries") or [] if m.get("file", "").startswith("libcudnn.so")]
    majors = {str(m.get("version") or "").split(".")[0] for m in cudnn if m.get("version")}
    compiled = str(result.get("cudnn_compiled") or "").split(".")[0]
    if len(majors) > 1 or (compiled and majors and compiled not in majors):
        return "CUDNN_MISMATCH"
    return None


def parse_events(stdout: str) -> list[dict]:
    """The child's JSON lines, in order; other output (the framework's own prints) is ignored."""
    out = []
    for line in stdout.splitlines():
        if line.startswith(MARK):
            try:
                event = parse_json(line[len(MARK):])  # nested too deeply: ValueError, like any other bad line
            except ValueError:
                continue
            if isinstance(event, dict):
                out.append(event)
    return out


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def _count(text: str) -> int:
    """The lines of a child's stderr."""
    return len((text or "").strip().splitlines())


def _tail(text: str, n: int = 20) -> str | None:
    text = (text or "").strip()
    return "\n".join(text.splitlines()[-n:]) if text else None
