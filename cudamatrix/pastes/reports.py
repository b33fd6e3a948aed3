"""Environments from what users paste into bug reports.

A paste is normalised (:class:`~cudamatrix.detect.text.Paste`: quote markers, fences, prompts, CRLF, HTML
escapes), then every reader in :data:`READERS` looks for its tool's output anywhere in it, so several tools'
outputs may follow each other in one file: nvidia-smi (table of every driver era, ``-q``, ``--query-gpu`` CSV,
``--version``, ``-L``, ``-h``, error messages), ``python -m torch.utils.collect_env`` (every torch release, vLLM's
and SGLang's variants), ``jax.print_environment_info()``, ``tf.sysconfig.get_build_info()``, issue templates, what
users print from Python, ``ldconfig -p``, ``nvcc --version``, ``pip freeze`` / ``pip list`` / ``conda list``,
/proc/driver/nvidia/version, deviceQuery, cudnn.h, NVRM kernel messages, and the warnings and errors torch,
TensorFlow, XLA, JAX, the CUDA runtime and the loader print (:mod:`.pastes.messages`), and what the packages built
against one torch print when they cannot load (:mod:`.pastes.extensions`: xFormers, undefined torch symbols, ONNX
Runtime's CUDA provider, pip's resolver). The notes say which tool each block of
lines was read as and which lines were skipped. Nothing here raises on odd text.
"""
from __future__ import annotations

import sys

from cudamatrix.detect.python_env import other_variant, torch_variant
from cudamatrix.detect.text import MAX_BYTES, Paste, decode, ranges, span_ranges
from cudamatrix.errors import UsageError
from cudamatrix.matrix import gpunames, shipped
from cudamatrix.models import Environment, Note
from cudamatrix.names import FRAMEWORK_DISTS
from cudamatrix.pastes import devices, extensions, fields, installs, listings, messages, nvsmi, packages, prints, tools
from cudamatrix.safe.files import read_bytes

KNOWN = ("nvidia-smi, collect_env, jax.print_environment_info(), tf.sysconfig.get_build_info(), ldconfig -p, "
         "nvcc --version, pip freeze / pip list / conda list, or the warnings and errors of torch, TensorFlow, JAX "
         "and the CUDA runtime, or a torch extension's load error")


READERS = [
    ("nvidia-smi", lambda p, e, s: nvsmi.read(p, e)),
    ("packages", lambda p, e, s: packages.read(p, e)),
    ("python prints", prints.read),
    ("fields", lambda p, e, s: fields.read(p, e)),
    ("nvcc", lambda p, e, s: tools.read_nvcc(p, e)),
    ("ldconfig", lambda p, e, s: tools.read_ldconfig(p, e)),
    ("cudnn.h", lambda p, e, s: tools.read_cudnn_header(p, e)),
    ("extension errors", lambda p, e, s: extensions.read(p, e)),  # before the loader's "cannot open" lines
    ("framework messages", lambda p, e, s: messages.read(p, e)),
    ("/proc/driver/nvidia/version", lambda p, e, s: tools.read_proc_version(p, e)),
    ("deviceQuery", lambda p, e, s: tools.read_device_query(p, e)),
    ("dmesg", lambda p, e, s: tools.read_dmesg(p, e)),
    ("listings", lambda p, e, s: listings.read(p, e)),
    ("installs", lambda p, e, s: installs.read(p, e)),
    ("devices", lambda p, e, s: devices.read(p, e)),
]


def read_paste(name: str, raw: str, env: Environment, state: dict | None = None) -> list[str]:
    """Read one paste into ``env``; returns the kinds of tool output found (empty: nothing recognised)."""
    paste = Paste(raw)
    state = {} if state is None else state
    for kind, reader in READERS:
        try:
            reader(paste, env, state)
        except (ValueError, IndexError, KeyError, AttributeError) as exc:  # a reader tripped on odd text: go on
            env.notes.append(Note(f"report:{kind}", f"{name}: could not read ({exc})", "warning"))
    blocks = paste.blocks()
    runs: dict[str, list[tuple[int, int]]] = {}  # per kind, in the order the kinds first appear: its blocks' lines
    for kind, first, last in blocks:
        runs.setdefault(kind, []).append((first, last))
    kinds = list(runs)
    if blocks:
        spans = {kind: span_ranges(run) for kind, run in runs.items()}
        where = "; ".join(f"{kind} ({'line' if spans[kind].isdigit() else 'lines'} {spans[kind]})" for kind in kinds)
        env.notes.append(Note("report", f"{name}: read as {where}"))
        skipped = paste.skipped()
        if skipped:
            env.notes.append(Note("report", f"{name}: skipped {len(skipped)} line(s) that are no known tool's "
                                  f"output: {ranges(skipped)}"))
    elif raw.strip():
        env.notes.append(Note("report", f"{name}: no known tool output recognised ({KNOWN})", "warning"))
    return kinds


def from_reports(items: list[tuple[str, str]], *, strict: bool = False, infer: bool = False) -> Environment:
    """Build an Environment (origin "report") from ``(name, text)`` pairs of pasted tool output.

    A paste with no known tool output in it is a note; ``strict``: when none of them holds any, that is an input
    error (UsageError, exit 2). ``infer``: a named GPU without a stated compute capability gets the matrix's
    (:func:`infer_compute_capabilities`)."""
    env = Environment(origin="report")
    state: dict = {}
    recognised = [bool(read_paste(name, raw, env, state)) for name, raw in items]
    if strict and not any(recognised):
        raise UsageError(f"no known tool output in {', '.join(name for name, _ in items) or 'the input'}",
                         hint=f"paste the output of one of: {KNOWN}")
    _settle(env, state)
    if infer and any(g.name and not g.compute_capability for g in env.gpus):
        infer_compute_capabilities(env)
    return env


def infer_compute_capabilities(env: Environment) -> None:
    """A GPU the paste names without its compute capability (nvidia-smi's table prints none) gets the one the
    matrix's GPU table holds for that name, and a note says it was inferred from the name, with the row's source."""
    table = gpunames.shipped()  # the GPU table as JSON: no Matrix (its load is 15 ms of a 45 ms run)
    for gpu in env.gpus:
        if not gpu.name or gpu.compute_capability:
            continue
        known = table.find(gpu.name)
        if known is None:
            continue
        gpu.compute_capability = known["compute_capability"]
        env.notes.append(Note("report", f"GPU {gpu.index if gpu.index is not None else '?'} ({gpu.name}): compute "
                              f"capability {known['compute_capability']} inferred from its name (the matrix's GPU "
                              f"table, {known['name']}: {shipped.source_line(known['source'])})"))


def _settle(env: Environment, state: dict) -> None:
    """Frameworks from the package lists; one torch build; TensorFlow's build info tied to its version."""
    _frameworks_from_packages(env)
    messages.settle(env)
    _torch_cudnn_from_wheel(env)
    build = state.get("tf_build")
    if build and not prints.apply_tf_build(env, build):
        env.notes.append(Note("report", f"TensorFlow build info (CUDA {build.get('cuda_version')}, cuDNN "
                              f"{build.get('cudnn_version')}) without a TensorFlow version in the paste"))
    seen = set()
    unique = []
    for t in env.toolkits:
        if (t.source, t.version) not in seen:
            seen.add((t.source, t.version))
            unique.append(t)
    env.toolkits = unique
    for fw in env.frameworks:
        # collect_env prints torch.__version__ ("2.11.0+cu130"); the installer's own list is the distribution
        # version ("2.11.0" from the default index): a live detect reports the latter, so a report does too
        dist = env.packages.get(fw.name)
        if dist and dist != fw.version and dist.split("+")[0] == fw.version.split("+")[0]:
            fw.version = dist


def _frameworks_from_packages(env: Environment) -> None:
    """A framework for each framework distribution the package lists name that no reader built already; torch's
    build from its version and its nvidia-* pins."""
    for fw_name in (d for d in FRAMEWORK_DISTS if d != "torch"):  # torch is read below, with its pins
        if fw_name in env.packages and not any(f.name == fw_name for f in env.frameworks):
            fw = other_variant(fw_name, env.packages[fw_name], [], env.packages)
            fw.source = "report"
            env.frameworks.append(fw)
    torch_name = "torch" if "torch" in env.packages else ("pytorch" if "pytorch" in env.packages else None)
    if torch_name and not any(f.name == "torch" for f in env.frameworks):
        pins = [f"{n}=={v}" for n, v in env.packages.items() if n.startswith("nvidia-")]
        fw = torch_variant(env.packages[torch_name], pins, None)
        fw.source = "report:pip"
        env.frameworks.append(fw)


def _torch_cudnn_from_wheel(env: Environment) -> None:
    """A CUDA build of torch without a stated cuDNN uses the nvidia-cudnn wheel the paste lists."""
    torch = next((f for f in env.frameworks if f.name == "torch"), None)
    if torch is None or torch.cudnn is not None or torch.variant == "cpu":
        return
    cudnn = env.packages.get("nvidia-cudnn-cu12") or env.packages.get("nvidia-cudnn-cu11") or \
        env.packages.get("nvidia-cudnn-cu13")
    if cudnn:
        torch.cudnn = ".".join(cudnn.split(".")[:3])


def read_report(path: str) -> tuple[str, list[Note]]:
    """Read one pasted report file ("-" for stdin), at most :data:`MAX_BYTES`.

    A FIFO, device, socket or folder is refused before anything is read (a FIFO would wait for a writer
    forever, /dev/zero never ends). Raises UsageError for unreadable, non-regular or binary files."""
    notes: list[Note] = []
    mb = MAX_BYTES // (1024 * 1024)
    if path == "-":
        data = sys.stdin.buffer.read(MAX_BYTES + 1)
    else:
        data = read_bytes(path, limit=MAX_BYTES + 1, what="report", truncate=True)
    if len(data) > MAX_BYTES:
        data = data[:MAX_BYTES]
        notes.append(Note("report", f"{path}: longer than {mb} MB; read the first {mb} MB only", "warning"))
    text, binary = decode(data)
    if binary:
        raise UsageError(f"report {path} looks binary, not pasted text",
                         hint="paste the output of nvidia-smi, collect_env, ldconfig -p, nvcc or pip into a text file")
    if not text.strip():
        notes.append(Note("report", f"{path}: empty", "warning"))
    return text, notes


def from_report_files(paths: list[str]) -> Environment:
    """An Environment from pasted report files ("-" for stdin), with what reading them noted.

    A file that cannot be read (missing, binary, no known tool output in it) is a warning note when another one
    can; raises UsageError when none can (the first file's error when no file could be read at all)."""
    items, notes = [], []
    failed: list[UsageError] = []
    for path in paths:
        try:
            text, read_notes = read_report(path)
        except UsageError as exc:
            failed.append(exc)
            notes.append(Note("report", f"{path}: not read ({exc.message})", "warning"))
            continue
        items.append(("stdin" if path == "-" else path, text))
        notes += read_notes
    if not items:
        raise failed[0]
    try:
        env = from_reports(items, strict=True, infer=True)
    except UsageError as exc:
        if failed:
            exc.hint = f"{exc.hint}; not read: " + "; ".join(f.message for f in failed)
        raise
    env.notes = notes + env.notes
    return env
