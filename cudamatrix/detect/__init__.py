"""Stage 1 of the pipeline: ``detect() -> Environment``.

One module per probe family: :mod:`.driver` (kernel module files, NVML, libcuda), :mod:`.smi` (nvidia-smi),
:mod:`.libraries` (every copy of the CUDA libraries and the loader's view), :mod:`.toolkits` (nvcc),
:mod:`.python_env` (distributions, framework variants, file conflicts) and :mod:`.context`; the same Environment
from pasted text is :mod:`cudamatrix.pastes.reports`'s. The risky library loads run in one bounded child (:mod:`.loader`).
Nothing here imports a framework, pydantic or rich.
"""
from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING

from cudamatrix import proc
from cudamatrix.detect import driver, libraries, python_env, resources
from cudamatrix.detect.threads import Background, Timer
from cudamatrix.ldso import paths
from cudamatrix.models import ENV_SCHEMA_VERSION
from cudamatrix.safe.files import parse_json, read_bytes
from cudamatrix.schema import normalize_cc, validate

if TYPE_CHECKING:
    from cudamatrix.detect import loader
from cudamatrix.detect.early import DETECT_ENV_VAR
from cudamatrix.detect.text import MAX_BYTES, cudnn_version, version_from_int
from cudamatrix.errors import UsageError
from cudamatrix.models import Driver, Environment, Library, Note

__all__ = ["detect", "load_environment"]



def detect(python: str | None = None, *, root: str = "/", timeout: float = 5.0,
           environ: dict[str, str] | None = None, all_copies: bool = False) -> Environment:
    """Detect driver, GPUs, CUDA libraries, toolkits and the Python environment of this machine.

    ``python`` names another interpreter to inspect instead of the running one. ``root`` is where
    /proc, /sys, /usr/local/cuda* and the container markers are read (a fake root in tests). ``timeout``
    bounds each subprocess. ``all_copies`` also lists the library copies no loader reaches (the toolkit folders
    outside the ldconfig cache: :mod:`.libraries`). Never raises for absent hardware; raises UsageError when ``python`` cannot be run.
    With ``CUDAMATRIX_DETECT_ENV=PATH`` set, the saved Environment at PATH is returned instead (UsageError if bad).
    """
    # the live probes' modules, imported here: reading a paste (detect --from) never needs them
    # lazy: at the top it would close an import circle: cudamatrix.detect -> cudamatrix.detect.extensions -> cudamatrix.detect
    from cudamatrix.detect import context, driver, early, extensions, loader, toolkits

    # lazy: `detect --from` would load 23 ms more (python -X importtime; the hoisting's budget per command is 3% of its run): cudamatrix.ldso.linkmap, cudamatrix.ldso.libpaths, cudamatrix.ldso.elf
    from cudamatrix.ldso import libpaths

    environ = dict(os.environ) if environ is None else environ
    saved = environ.get(DETECT_ENV_VAR)
    if saved:
        # a saved Environment stands in for this machine (fleet tests make Ray/Slurm nodes differ this way);
        # validated like --env, so a bad file is a UsageError, never a half-probed machine
        env = load_environment(saved)
        env.notes.append(Note("detect", f"{DETECT_ENV_VAR}={saved}: a saved environment, not probed"))
        return env
    paths.forget()  # folders' real paths are remembered for this run only
    timer = Timer()
    start = time.perf_counter()
    env = Environment(origin="live", captured_at=time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
                      hostname=os.uname().nodename if hasattr(os, "uname") else os.environ.get("COMPUTERNAME"))
    # NVML can take 50-100 ms to initialise on a real driver: its own child starts first and overlaps the rest
    want_nvml, want_cuda = loader.findable("libnvidia-ml.so.1", environ), loader.findable("libcuda.so.1", environ)
    forked = early.take("nvml", environ, {"nvml": want_nvml, "libcuda": want_cuda})  # forked at the command's start
    # the libraries' child, forked at the command's start or started now: it waits for the copies found below
    libs_child = early.take("libs", environ) or early.started_libs(environ)
    nvml = Background(_timed, timer, "nvml", loader.run_loader, [], want_nvml, want_cuda, timeout, None, forked)
    tools = Background(_timed, timer, "toolkits", toolkits.probe, environ, root, timeout)
    ldconfig = Background(_timed, timer, "ldconfig", libraries.run_ldconfig, timeout)
    # another interpreter's probe lists its possible extensions first: their files are read while it runs on
    # (issue #39: the scan of 40 extensions took about 70 ms after the probe, while this thread only waited)
    early_scans: list[tuple[list[str], list[python_env.Candidate], Background]] = []

    def scan_early(site: list[str], candidates: list[python_env.Candidate]) -> None:
        if _same_scan(early_scans, site, candidates) is None:  # the guess below was right: it runs already
            early_scans.append((site, candidates, Background(_timed, timer, "extensions", extensions.scan,
                                                             candidates, site, timeout)))

    guess = python_env.early_guess(python, environ)
    if guess is not None:
        scan_early(*guess)
    with timer("python"):
        forked_probe = early.take("python", environ, {"path": list(sys.path)}) if python is None else None
        side, error = python_env.probe(python, timeout, forked_probe, scan_early)
    timer.timings.update({f"python:{step}": ms for step, ms in side.timings_ms.items()})
    if error:
        if libs_child is not None:
            libs_child.stop()  # nothing will be asked
        for *_facts, scan in early_scans:
            scan.join()  # no thread left reading files while the command ends
        raise UsageError(error, hint="--python needs the path of a Python >= 3.6 interpreter")
    env.python, env.packages, env.requirements = side.python, side.packages, side.requirements
    env.frameworks, env.file_conflicts, env.notes = side.frameworks, side.file_conflicts, list(side.notes)
    with timer("context"):
        env.context = context.probe(root, environ, env.packages)
    with timer("resources"):
        env.host = resources.probe(env.python.site_packages, environ, root)
    with timer("driver_files"):
        kmod, kmod_source = driver.read_module_version(root)
        jetson_linux = driver.read_tegra_release(root)
    ld_entries, ld_note = ldconfig.value()
    # the loader model reads ELF headers while the loader child below runs (it waits on a subprocess)
    model_notes: list[Note] = []  # openers whose opened libraries the data does not know
    # the extensions' ELF files and torch's symbol tables, read while the loader child runs too (or already
    # under way, when the probe listed exactly these candidates and folders first)
    early_exts = _same_scan(early_scans, env.python.site_packages, side.candidates)
    exts = early_exts or Background(
        _timed, timer, "extensions", extensions.scan, side.candidates, env.python.site_packages, timeout)
    model = Background(_after, early_exts, _timed, timer, "loader_model", libpaths.predict_loads, env.frameworks,
                       env.python.site_packages, env.python.executable, environ, ld_entries, None, (), model_notes)
    if ld_note:
        env.notes.append(Note("ldconfig", ld_note))
    with timer("libraries"):
        copies = libraries.find_copies(environ, root, env.python.site_packages, ld_entries, side.wheel_owner,
                                       _conda_prefixes(env), all_copies)
    with timer("loader"):
        answers = loader.run_loader(libraries.loadable(copies), nvml=False, libcuda=False, timeout=timeout,
                                    forked=libs_child)
    driver_answers = nvml.value()
    _merge_driver_answers(answers, driver_answers, want_nvml, want_cuda)
    _apply_library_answers(copies, answers, env.notes)
    _refine_from_wheels(copies, env.packages)
    _loader_timings(timer, answers, driver_answers)
    _child_stderr(env, {"libraries": answers.stderr, "driver": driver_answers.stderr})
    drv = Driver(kernel_module_version=kmod, jetson_linux=jetson_linux)
    env.gpus = driver.from_nvml(answers.nvml, drv, env.notes)
    cuda_lib = driver.from_libcuda(answers.libcuda, drv, env.notes)
    _driver_failures(answers, drv, env)
    _add_loader_libraries(copies, answers, cuda_lib, drv)
    if drv.version is None and drv.status != "mismatch":
        _smi_fallback(drv, env, environ, timer, timeout)
    _settle_status(drv, env, kmod, kmod_source, answers, environ, root, cuda_lib)
    env.driver = drv
    env.libraries = copies
    env.library_loads = model.value()
    env.extensions = exts.value()
    for *_facts, scan in early_scans:
        scan.join()  # a guess the probe did not confirm: no thread left reading files after detect returns
    env.notes += model_notes
    libpaths.fill_versions(env)
    env.notes += libpaths.reconcile_notes(libraries.loader_view(copies, environ, ld_entries), env.library_loads)
    env.notes += libraries.unsafe_notes(environ, copies)
    for lib in copies:
        if lib.stub and lib.origin == "LD_LIBRARY_PATH":
            env.notes.append(Note("libraries", f"a link-time stub is on LD_LIBRARY_PATH: {lib.path}; programs that "
                                  "load it instead of the driver's copy fail", "warning"))
    env.toolkits, notes = tools.value()
    env.notes += notes
    # lazy: `detect --from` would load 6 ms more (python -X importtime; the hoisting's budget per command is 3% of its run): ipaddress, urllib.parse, pathlib
    from cudamatrix.ldso import elfcache

    elfcache.save()  # the ELF facts read this run, for the next (a home that cannot be written keeps none)
    env.timings_ms = timer.timings
    env.timings_ms["total"] = round((time.perf_counter() - start) * 1000.0, 2)
    return env


def _child_stderr(env: Environment, texts: dict[str, str]) -> None:
    """What the loader children wrote on stderr: kept whole in ``child_stderr``, said in one note each."""
    for probe, text in texts.items():
        lines = text.strip().splitlines()
        if not lines:
            continue
        env.child_stderr[probe] = text
        env.notes.append(Note("loader", f"the {probe} probe's child wrote {len(lines)} line(s) on stderr (kept in "
                              f"the JSON: child_stderr.{probe}); last: {lines[-1][:200]}"))


def _merge_driver_answers(answers: loader.LoaderAnswers, driver_answers: loader.LoaderAnswers, want_nvml: bool,
                          want_cuda: bool) -> None:
    """Put the driver child's NVML and libcuda answers into the libraries' ``answers``; a library the loader
    cannot find (``want_*`` false: the child was not asked) answers "not found"."""
    if not want_nvml:
        driver_answers.nvml = {"probe": "nvml", "error": "NVML Shared Library Not Found", "code": 12}
    if not want_cuda:
        driver_answers.libcuda = {"probe": "libcuda", "error": "libcuda.so.1 is not on the loader's search path"}
    answers.nvml, answers.libcuda = driver_answers.nvml, driver_answers.libcuda
    answers.failed.update(driver_answers.failed)
    answers.error = answers.error or driver_answers.error


def _loader_timings(timer: Timer, answers: loader.LoaderAnswers, driver_answers: loader.LoaderAnswers) -> None:
    """The time the loader children spent in NVML (its load, init and queries), libcuda and the libraries'
    version calls, as they measured, and each child's interpreter start-up and imports."""
    for key in ("nvml", "libcuda"):
        if getattr(answers, key) and "ms" in getattr(answers, key):
            timer.timings[f"loader:{key}"] = getattr(answers, key)["ms"]
    phases = (answers.nvml or {}).get("phases_ms")
    if isinstance(phases, dict):
        timer.timings.update({f"loader:nvml:{k}": v for k, v in phases.items()
                              if k in ("load", "init", "query") and isinstance(v, (int, float))})
    for name, child in (("nvml", driver_answers), ("loader", answers)):
        if child.start_ms is not None and child.imports_ms is not None:
            timer.timings[f"{name}:start"], timer.timings[f"{name}:imports"] = child.start_ms, child.imports_ms
    lib_ms = [a["ms"] for a in answers.libs.values() if "ms" in a]
    if lib_ms:
        timer.timings["loader:libraries"] = round(sum(lib_ms), 2)


def _driver_failures(answers: loader.LoaderAnswers, drv: Driver, env: Environment) -> None:
    """An NVML or libcuda step that hung or crashed the child: an error note, and the driver's status "error"
    when nothing else settled it."""
    for key, how in answers.failed.items():
        if key in ("nvml", "libcuda"):
            env.notes.append(Note(key, f"{key} {how}; skipped", "error"))
            if drv.status == "unknown":
                drv.status, drv.error = "error", f"{key} {how}"


def _smi_fallback(drv: Driver, env: Environment, environ: dict[str, str], timer: Timer, timeout: float) -> None:
    """When NVML gave no driver version: ask nvidia-smi (on ``environ``'s PATH), or note that it is absent."""
    if proc.which("nvidia-smi", path=environ.get("PATH")) is None:
        env.notes.append(Note("nvidia-smi", "nvidia-smi not found on PATH"))
        return

    # lazy: nvidia-smi's readers (0.9 ms of detect's imports, python -X importtime) only where NVML gave no version
    from cudamatrix.detect import smi

    with timer("nvidia-smi"):
        reading = smi.probe(timeout, environ)
    _merge_smi(drv, env, reading)


def _conda_prefixes(env: Environment) -> list[str]:
    """The conda environment of the probed interpreter: its site-packages is PREFIX/lib/pythonX.Y/site-packages."""
    if env.python.installer != "conda":
        return []
    return [os.path.dirname(os.path.dirname(os.path.dirname(sp))) for sp in env.python.site_packages[:1]]


def _same_scan(early_scans: list, site: list[str], candidates: list[python_env.Candidate]) -> Background | None:
    """The scan started on the probe's early answer when it named the same folders and candidates as its full
    answer (names, versions and metadata folders: a version the metadata corrects is scanned again)."""
    def facts(cands: list[python_env.Candidate]) -> list[tuple[str, str, str]]:
        return [(c.name, c.version, c.meta) for c in cands]

    for early_site, early_candidates, scan in early_scans:
        if early_site == site and facts(early_candidates) == facts(candidates):
            return scan
    return None


def _after(first: Background | None, fn, *args):
    """``fn(*args)`` once ``first`` (when given) has ended: the loader model after an extension scan already under
    way, not beside it (issue #39: two threads of file reads took turns at the GIL at each read; the model took
    21-26 ms after the scan against 39-56 ms beside it, and doctor on 40 extensions, cold, 0.98 of the CPU time at
    the same wall time, 20 paired runs)."""
    if first is not None:
        first.join()
    return fn(*args)


def _timed(timer: Timer, name: str, fn, *args):
    with timer(name):
        return fn(*args)


def _apply_library_answers(copies: list[Library], answers: loader.LoaderAnswers, notes: list[Note]) -> None:
    if answers.error:
        notes.append(Note("loader", f"the library loader child did not run: {answers.error}", "warning"))
    for lib in copies:
        if lib.path in answers.failed:
            notes.append(Note("libraries", f"loading {lib.path} {answers.failed[lib.path]}; its version is unknown",
                              "error"))
            continue
        a = answers.libs.get(lib.path)
        if not a:
            continue
        if a.get("error"):
            notes.append(Note("libraries", f"{lib.path} failed to load: {a['error'][:300]}", "warning"))
            continue
        if lib.name == "cuda" and a.get("rc") == 34:
            lib.stub = True
            continue
        own = cudnn_version(a.get("version")) if lib.name == "cudnn" else version_from_int(a.get("version"))
        if own and not (lib.version and lib.version.startswith(own + ".")):
            lib.version = own


def _refine_from_wheels(copies: list[Library], packages: dict[str, str]) -> None:
    """A wheel's copy: its distribution's version where the library's own answer is coarser or missing
    (cudaRuntimeGetVersion says "13.0"; nvidia-cuda-runtime 13.0.96 says which build)."""
    for lib in copies:
        dist = lib.origin[len("wheel:"):] if lib.origin.startswith("wheel:") else None
        precise = packages.get(dist) if dist else None
        if precise and (lib.version is None or precise.startswith(lib.version + ".")):
            lib.version = precise


def _add_loader_libraries(copies: list[Library], answers: loader.LoaderAnswers, cuda_lib: Library | None,
                          drv: Driver) -> None:
    """Put the libcuda and NVML copies the loader child really loaded into the list (once)."""
    nvml = answers.nvml or {}
    extra = [cuda_lib] if cuda_lib else []
    if nvml.get("path"):
        extra.append(Library(name="nvml", soname="libnvidia-ml.so.1", path=nvml["path"], origin="loader",
                             version=nvml.get("driver"), loaded_first=True))
    for lib in extra:
        real = paths.realpath(lib.path)
        same = next((c for c in copies if paths.realpath(c.path) == real), None)
        if same is None:
            copies.append(lib)
        else:
            same.loaded_first = True
            same.stub = same.stub or lib.stub
            same.version = same.version or lib.version


def _merge_smi(drv: Driver, env: Environment, reading) -> None:
    env.notes += [Note("nvidia-smi", n, "warning" if "timed out" in n else "info") for n in reading.notes]
    if not reading.found and reading.driver.status == "unknown":
        return
    r = reading.driver
    drv.version = drv.version or r.version
    drv.cuda_version = drv.cuda_version or r.cuda_version
    drv.library_version = drv.library_version or r.library_version
    if r.version:
        drv.source = drv.source if drv.source and drv.source != "libcuda" else "nvidia-smi"
    if r.status in ("mismatch", "error") or drv.status == "unknown":
        drv.status = r.status
        drv.error = r.error or drv.error
    if not env.gpus:
        env.gpus = reading.gpus


def _settle_status(drv: Driver, env: Environment, kmod: str | None, kmod_source: str | None,
                   answers: loader.LoaderAnswers, environ: dict[str, str], root: str,
                   cuda_lib: Library | None) -> None:
    """The driver's final status, version and notes: from the probes when none settled it, the kernel module's
    version as a fallback (and a reboot warning when it differs from user space), "no_device" when the
    environment hides the GPUs, and a WSL note."""
    nvml_missing = (answers.nvml or {}).get("code") == driver.NVML_LIBRARY_NOT_FOUND
    if drv.status == "unknown":
        _status_from_probes(drv, env, kmod, nvml_missing, cuda_lib)
    if drv.version is None and kmod:
        drv.version, drv.source = kmod, kmod_source
    if kmod and drv.version and kmod != drv.version and drv.status == "ok":
        drv.library_version = drv.version
        env.notes.append(Note("driver", f"kernel module {kmod} differs from the user-space driver {drv.version}: "
                              "reboot after a driver upgrade", "warning"))
    hidden = driver.hidden_by_environment(environ)
    if hidden and drv.status == "ok":
        drv.status = "no_device"
        env.notes.append(Note("driver", hidden, "warning"))
    if env.context.wsl and os.path.isdir(os.path.join(root, "usr/lib/wsl/lib")):
        env.notes.append(Note("driver", "WSL: the driver is the Windows one; libcuda and NVML come from "
                              "/usr/lib/wsl/lib (do not install a Linux driver inside WSL)"))


def _status_from_probes(drv: Driver, env: Environment, kmod: str | None, nvml_missing: bool,
                        cuda_lib: Library | None) -> None:
    """The driver's status when no probe settled it: "no_device" for a kernel module without a user-space
    library (a container without the NVIDIA runtime: with a warning) or without GPUs, "ok" with GPUs, and
    "absent" when neither the kernel module, NVML, libcuda nor nvidia-smi answered."""
    if kmod and nvml_missing:
        drv.status = "no_device"
        env.notes.append(Note("driver", f"kernel module {kmod} is loaded but no user-space driver library is "
                              "visible: a container started without the NVIDIA runtime (--gpus / "
                              "runtimeClassName)?", "warning"))
    elif kmod:
        drv.status = "no_device" if not env.gpus else "ok"
    elif drv.version or env.gpus or (cuda_lib is not None and not cuda_lib.stub and cuda_lib.version):
        drv.status = "ok" if env.gpus else "no_device"
    else:
        drv.status = "absent"
        drv.error = drv.error or "no NVIDIA kernel module, NVML library or nvidia-smi found"


def load_environment(path: str) -> Environment:
    """Read a saved ``detect --json`` output (the whole envelope or just the environment object).

    Raises UsageError naming the file and the dotted path of a bad key: a FIFO or device instead of a
    file, more than :data:`MAX_BYTES`, JSON nested too deeply, another ``schema_version`` than this
    version writes, or a value the later stages cannot read (a compute capability "abc")."""
    return environment_of(path, read_environment(path))


def read_environment(path: str) -> dict:
    """The environment object of a saved ``detect --json`` output, read and checked as :func:`load_environment`
    does before its values are validated (:func:`environment_of` does that). Raises UsageError."""
    data = read_bytes(path, limit=MAX_BYTES, what="environment file")
    hint = "save one with: cudamatrix detect --json > env.json"
    try:
        obj = parse_json(data)
    except ValueError as exc:
        raise UsageError(f"{path} is not JSON: {exc}", hint=hint) from None
    if isinstance(obj, dict) and "data" in obj and "command" in obj:
        data_part = obj.get("data")
        if not isinstance(data_part, dict) or "environment" not in data_part:
            raise UsageError(f"{path}: data.environment: missing (a JSON envelope of another command?)")
        obj = data_part["environment"]
    if not isinstance(obj, dict) or not obj:
        raise UsageError(f"{path}: (top level): an environment object is needed", hint=hint)
    _check_schema_version(path, obj.get("schema_version", None), "schema_version" in obj, hint)
    return obj


def environment_of(path: str, obj: dict) -> Environment:
    """The Environment an object read by :func:`read_environment` holds, its values validated (errors name
    ``path``). Raises UsageError."""
    env = validate(Environment, obj, path, UsageError)
    _check_values(path, env)
    return env


def _check_schema_version(path: str, value, present: bool, hint: str) -> None:
    if not present:  # hand-written environments (tests, fleets) may leave it out: the current one
        return
    if type(value) is not int:
        raise UsageError(f"{path}: schema_version: {str(value)[:40]!r} is not an integer", hint=hint)
    if value != ENV_SCHEMA_VERSION:
        raise UsageError(f"{path}: schema_version {value} is not {ENV_SCHEMA_VERSION}, the version this "
                         "cudamatrix reads", hint="save it again with this version's detect --json")


def _check_values(path: str, env: Environment) -> None:
    """Values that pass the models' types but that the solver and doctor parse further."""
    from packaging.version import InvalidVersion, Version

    def version(where: str, value: str | None) -> None:
        if value is None:
            return
        try:
            Version(value)
        except (InvalidVersion, TypeError):
            raise UsageError(f"{path}: {where}: {value[:40]!r} is not a version") from None

    for i, gpu in enumerate(env.gpus):
        if gpu.compute_capability is not None:
            try:
                normalize_cc(gpu.compute_capability)
            except ValueError:
                raise UsageError(f"{path}: gpus[{i}].compute_capability: {gpu.compute_capability[:40]!r} is not a "
                                 'compute capability (like "7.5")') from None
    version("driver.version", env.driver.version)
    version("driver.cuda_version", env.driver.cuda_version)
    version("python.version", env.python.version)
    for i, tk in enumerate(env.toolkits):
        version(f"toolkits[{i}].version", tk.version)


from cudamatrix._callable import callable_module  # noqa: E402  (``cudamatrix.detect(...)`` calls detect())

callable_module(__name__, "detect")
