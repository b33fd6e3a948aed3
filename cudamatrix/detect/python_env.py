"""The Python side: interpreter, relevant distributions, framework variants, file conflicts.

Frameworks are never imported: versions and requirements come from metadata (:mod:`._pyprobe`, which also
runs inside another interpreter for ``--python PATH``), the torch build from ``torch/version.py`` read as text,
its local version (+cu121, +cpu) and its declared nvidia-* requirements.
"""
from __future__ import annotations

import json
import os
import re
import sys
from typing import TYPE_CHECKING, Callable

from cudamatrix import proc
from cudamatrix.detect import _pyprobe
from cudamatrix.models import FileConflict, Framework, Note, PythonInfo
from cudamatrix.names import KNOWN_DISTS, canonical
from cudamatrix.safe.text import lazy
from cudamatrix.schema import field, record

if TYPE_CHECKING:
    from cudamatrix.detect.early import Forked

_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_pyprobe.py")
FRAMEWORKS = KNOWN_DISTS
_REQ = lazy(r"^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(?P<spec>[^;]*)(?:;(?P<marker>.*))?$")
_PIN = lazy(r"(?:===?|~=|>=)\s*(?P<v>[0-9][\w.+!*]*)")
_MAX_CONFLICTS = 200
_SHARED_LIBRARY = lazy(r"\.so(\.\d+)*$")  # a file name the loader can map: libX.so, libX.so.12.4.1


@record
class Candidate:
    """An installed distribution that may be an extension: its name, version and metadata folder (what it declares
    and the shared objects it installed are read from there by :mod:`cudamatrix.detect.extensions`)."""

    name: str
    version: str
    meta: str  # the absolute path of its .dist-info folder


def candidate(d: dict) -> Candidate | None:
    """The probe's answer about one distribution as a Candidate; None when it is not of that shape (another
    interpreter's answer is not trusted)."""
    values = [d.get(k) for k in ("name", "version", "location", "meta")]
    texts = [v for v in values if isinstance(v, str) and v]
    if len(texts) != 4 or "/" in texts[3] or not texts[3].endswith(".dist-info"):
        return None
    name, version, location, meta = texts
    return Candidate(name=name, version=version, meta=os.path.join(location, meta))


@record
class PythonSide:
    """What the Python probe read: the interpreter, distributions and their requirements."""

    python: PythonInfo = field(default_factory=PythonInfo)
    packages: dict[str, str] = field(default_factory=dict)
    requirements: dict[str, list[str]] = field(default_factory=dict)
    frameworks: list[Framework] = field(default_factory=list)
    file_conflicts: list[FileConflict] = field(default_factory=list)
    wheel_owner: dict[str, str] = field(default_factory=dict)  # absolute file path -> distribution
    candidates: list[Candidate] = field(default_factory=list)  # what :mod:`.extensions` reads
    notes: list[Note] = field(default_factory=list)
    # a forked probe's own times: "start" (from the fork to its first step), "collect" (its reading)
    timings_ms: dict[str, float] = field(default_factory=dict)


def parse_requirement(text: str) -> tuple[str, str | None, str]:
    """("nvidia-cudnn-cu12==9.1.0.70; platform_system == 'Linux'") -> ("nvidia-cudnn-cu12", "9.1.0.70", marker).

    A small reader on purpose: importing packaging.requirements costs more than the whole probe.
    """
    m = _REQ.match(text)
    if not m:
        return canonical(text.split()[0]) if text.split() else "", None, ""
    pin = _PIN.search(m.group("spec") or "")
    return canonical(m.group("name")), pin.group("v") if pin else None, (m.group("marker") or "").strip()


def cuda_from_tag(tag: str) -> str | None:
    """"cu121" -> "12.1", "cu92" -> "9.2", "cu130" -> "13.0"."""
    m = re.fullmatch(r"cu(\d)(\d+)", tag) if len(tag) == 4 else re.fullmatch(r"cu(\d+)(\d)", tag)
    return f"{int(m.group(1))}.{int(m.group(2))}" if m else None


def torch_version_py(text: str | None) -> tuple[str | None, str | None]:
    """(cuda, hip) from torch/version.py; None where the build has none."""
    if not text:
        return None, None

    def grab(key: str) -> str | None:
        m = re.search(rf"^{key}\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", text, re.M)
        return m.group(1) if m else None

    return grab("cuda"), grab("hip")


def _major_minor(version: str | None, parts: int = 2) -> str | None:
    if not version:
        return None
    nums = re.findall(r"\d+", version)[:parts]
    return ".".join(nums) if len(nums) == parts else None


def torch_variant(version: str, requires: list[str], version_py: str | None) -> Framework:
    """The torch build: its local version first, then torch/version.py, then its nvidia-* pins."""
    fw = Framework(name="torch", version=version, source="metadata")
    pins = {parse_requirement(r)[0]: parse_requirement(r)[1] for r in requires}
    local = version.partition("+")[2]
    vpy_cuda, vpy_hip = torch_version_py(version_py)
    if local:
        fw.variant, fw.source = local, "local version"
        fw.cuda = cuda_from_tag(local)
    elif vpy_cuda or vpy_hip:
        fw.source = "torch/version.py"
    runtime = next((v for n, v in pins.items() if n.startswith("nvidia-cuda-runtime")), None)
    cudnn = next((v for n, v in pins.items() if n.startswith("nvidia-cudnn")), None)
    if fw.cuda is None and vpy_cuda:
        fw.cuda = _major_minor(vpy_cuda)
    if fw.cuda is None and runtime:
        fw.cuda, fw.source = _major_minor(runtime), "nvidia requirements"
    if fw.variant is None:
        if fw.cuda:
            fw.variant = "cu" + fw.cuda.replace(".", "")
        elif vpy_hip:
            fw.variant = "rocm" + (_major_minor(vpy_hip) or "")
        elif version_py is not None:
            fw.variant = "cpu"
    if cudnn:
        fw.cudnn = _major_minor(cudnn, 3)
    return fw


def other_variant(name: str, version: str, requires: list[str], packages: dict[str, str]) -> Framework:
    """The variant of a framework other than torch: from its local version (torchvision, torchaudio, jaxlib),
    its name (tensorflow-cpu), its installed ``and-cuda`` extra (tensorflow) or its CUDA plugin (jaxlib)."""
    fw = Framework(name=name, version=version, source="metadata")
    local = version.partition("+")[2]
    if name in ("torchvision", "torchaudio"):
        if local:
            fw.variant, fw.cuda, fw.source = local, cuda_from_tag(local), "local version"
        return fw
    if name == "tensorflow-cpu":
        fw.variant = "cpu"
        return fw
    if name.startswith("tensorflow"):
        _tensorflow_variant(fw, requires, packages)
    elif name == "jaxlib":
        _jaxlib_variant(fw, local, packages)
    return fw


def _tensorflow_variant(fw: Framework, requires: list[str], packages: dict[str, str]) -> None:
    """A tensorflow build is "and-cuda" when every requirement of its ``and-cuda`` extra is installed; its CUDA
    and cuDNN are then those the extra pins (nvidia-cuda-runtime-*, nvidia-cudnn-*)."""
    extra = [r for r in requires if "and-cuda" in (parse_requirement(r)[2] or "")]
    names = {parse_requirement(r)[0]: parse_requirement(r)[1] for r in extra}
    if names and all(n in packages for n in names):
        fw.variant = "and-cuda"
        fw.cuda = _major_minor(next((v for n, v in names.items() if n.startswith("nvidia-cuda-runtime")), None))
        fw.cudnn = _major_minor(next((v for n, v in names.items() if n.startswith("nvidia-cudnn")), None), 3)


def _jaxlib_variant(fw: Framework, local: str, packages: dict[str, str]) -> None:
    """A jaxlib's variant: from its local version ("cuda12.cudnn89"), else from an installed jax-cuda*-plugin
    (CUDA major only), else "cpu" unless a jax-rocm plugin is installed."""
    m = re.search(r"cuda(\d+)(?:\.cudnn(\d)(\d+))?", local)
    if m:
        fw.variant, fw.source = f"cuda{m.group(1)}", "local version"
        fw.cudnn = f"{m.group(2)}.{m.group(3)}" if m.group(2) else None
        return
    plugin = next((n for n in packages if re.fullmatch(r"jax-cuda\d+-plugin", n)), None)
    if plugin:
        fw.variant = plugin.split("-")[1]  # "cuda12": the plugin wheels carry only the CUDA major version
        fw.cuda = fw.variant[len("cuda"):]
        fw.source = "plugin " + plugin
    elif not any(n.startswith("jax-rocm") for n in packages):
        fw.variant = "cpu"


def build(raw: dict) -> PythonSide:
    """Turn the probe's raw answer into the Environment's Python-side values."""
    side = PythonSide()
    side.python = PythonInfo(executable=raw.get("executable"), version=raw.get("version"),
                             implementation=raw.get("implementation"), platform=raw.get("platform"),
                             tags=list(raw.get("tags") or []), site_packages=list(raw.get("site_packages") or []),
                             in_virtualenv=raw.get("in_virtualenv"), installer=raw.get("installer"))
    dists = raw.get("dists") or []
    by_name = _by_name(dists, side)
    side.packages = {n: d["version"] for n, d in sorted(by_name.items())}
    for name, d in by_name.items():
        if d.get("requires") and not name.startswith("nvidia-"):
            side.requirements[name] = list(d["requires"])
    _frameworks(by_name, raw, side)
    _file_owners(dists, side)
    for d in raw.get("stack") or []:
        cand = candidate(d) if isinstance(d, dict) else None
        if cand is not None:
            cand.version = side.packages.get(cand.name, cand.version)  # the METADATA's, where it was read
            side.candidates.append(cand)
    return side


def _by_name(dists: list[dict], side: PythonSide) -> dict[str, dict]:
    """The first distribution found under each canonical name; a warning on ``side`` for a name installed
    twice at different versions (a broken upgrade left two metadata folders)."""
    by_name: dict[str, dict] = {}
    for d in dists:
        name = canonical(d["name"])
        if name in by_name and by_name[name]["version"] != d["version"]:
            side.notes.append(Note("python", f"{name} is installed twice ({by_name[name]['version']} and "
                                   f"{d['version']}): a broken upgrade left two metadata folders", "warning"))
        by_name.setdefault(name, d)
    return by_name


def _frameworks(by_name: dict[str, dict], raw: dict, side: PythonSide) -> None:
    """The installed frameworks and their variants, in :data:`FRAMEWORKS` order, onto ``side``."""
    for name in FRAMEWORKS:
        d = by_name.get(name)
        if d is None:
            continue
        if name == "torch":
            side.frameworks.append(torch_variant(d["version"], d.get("requires") or [], raw.get("torch_version_py")))
        else:
            side.frameworks.append(other_variant(name, d["version"], d.get("requires") or [], side.packages))


def _file_owners(dists: list[dict], side: PythonSide) -> None:
    """Which distribution installed each shared library (``side.wheel_owner``), and which files two
    distributions both installed (``side.file_conflicts``, at most :data:`_MAX_CONFLICTS`, with a warning)."""
    owners: dict[str, list[str]] = {}
    for d in dists:  # the nvidia-* wheels of one CUDA stack list some 3,300 files: the name is made once a wheel
        files = d.get("files") or []
        if not files:
            continue  # (a distribution without files needs no location: another interpreter's answer may lack one)
        name = canonical(d["name"])
        owner, location = f"{name}=={d['version']}", d["location"]
        for rel in files:
            if rel.endswith(("__init__.py", ".pyc")) or ".dist-info/" in rel or rel.startswith(".."):
                continue
            owners.setdefault(rel, []).append(owner)
            if ".so" in rel and _SHARED_LIBRARY.search(rel):
                # on a conflict the first owner is named; the FileConflict lists them all
                side.wheel_owner.setdefault(os.path.normpath(os.path.join(location, rel)), name)
    for rel, who in sorted((rel, who) for rel, who in owners.items() if len(who) > 1):
        if len(side.file_conflicts) >= _MAX_CONFLICTS:
            side.notes.append(Note("python", f"more than {_MAX_CONFLICTS} files installed twice; list cut", "warning"))
            break
        side.file_conflicts.append(FileConflict(path=rel, distributions=who))
    if side.file_conflicts:
        pairs = sorted({" and ".join(c.distributions) for c in side.file_conflicts})
        side.notes.append(Note("python", "distributions overwrite each other's files: " + "; ".join(pairs[:5]), "warning"))


def _forked_answer(forked: Forked, timeout: float) -> dict | None:
    """The forked probe's answer (one JSON object, this interpreter's own code wrote it); None when it has none."""
    result = forked.answer(None, timeout)
    try:
        raw = json.loads(result.stdout)
    except (ValueError, RecursionError):
        return None
    return raw if result.returncode == 0 and isinstance(raw, dict) else None


def _child_times(raw: dict, spawned: float) -> dict[str, float]:
    """The forked probe's ``clock`` (taken out of ``raw``) -> {"start": ms, "collect": ms}; {} without one."""
    # lazy: `detect --from` would load 13 ms more (python -X importtime; the hoisting's budget per command is 3% of its run): cudamatrix.ldso.elf, cudamatrix.detect.loader, ipaddress
    from cudamatrix.detect.loader import clock_ms

    both = clock_ms(raw.pop("clock", None), spawned)
    return {"start": both[0], "collect": both[1]} if both is not None else {}


Early = Callable[[list[str], list[Candidate]], None]


def early_guess(python: str | None, environ: dict[str, str]) -> tuple[list[str], list[Candidate]] | None:
    """The site-packages folders and candidates the probe will list, worked out here before it runs, so that their
    files are read while it starts (issue #39: another interpreter's first line came 50 ms after it was started,
    on a machine busy starting detect's other children). This interpreter's are exact (a forked probe reads the same
    ``sys.path``); a venv's (``--python``, its ``pyvenv.cfg`` without the system's site-packages) are its one
    ``lib/python3.N/site-packages`` after the probe script's folder and PYTHONPATH, as ``site`` makes them. A guess
    only: detect uses it only when the probe's answer names the same (:func:`cudamatrix.detect._same_scan`).
    None when there is no guess to make."""
    if python is None:
        return _listed(_pyprobe.early(list(sys.path)))
    prefix = os.path.dirname(os.path.dirname(os.path.abspath(python)))
    try:
        with open(os.path.join(prefix, "pyvenv.cfg"), encoding="utf-8", errors="replace") as fh:
            cfg = fh.read(65536)
        lib = os.path.join(prefix, "lib")
        sites = [os.path.join(lib, n, "site-packages") for n in os.listdir(lib) if re.fullmatch(r"python3\.\d+", n)]
    except OSError:
        return None
    if re.search(r"^\s*include-system-site-packages\s*=\s*true", cfg, re.M | re.I) or len(sites) != 1:
        return None
    extra = [os.path.abspath(p) for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return _listed(_pyprobe.early([os.path.dirname(_SCRIPT), *extra, sites[0]]))


def _listed(doc: dict) -> tuple[list[str], list[Candidate]]:
    return doc["site_packages"], [c for c in map(candidate, doc["stack"]) if c is not None]


def _early_line(early: Early) -> Callable[[str], None]:
    """A reader of the child's lines that hands the first line of the probe script's early answer
    (:func:`cudamatrix.detect._pyprobe.early`: site-packages and possible extensions) to ``early``, once, as
    checked values (another interpreter is not trusted to answer in shape; anything else is ignored)."""
    done: list[bool] = []

    def on_line(line: str) -> None:
        if done or not line.startswith('{"early": '):
            return
        done.append(True)
        try:
            doc = json.loads(line)["early"]
            site, stack = doc["site_packages"], doc["stack"]
        except (ValueError, KeyError, TypeError, RecursionError):
            return
        if not (isinstance(site, list) and all(isinstance(p, str) for p in site) and isinstance(stack, list)):
            return
        early(site, [c for c in (candidate(d) if isinstance(d, dict) else None for d in stack) if c is not None])

    return on_line


def probe(python: str | None, timeout: float, forked: Forked | None = None,
          early: Early | None = None) -> tuple[PythonSide, str | None]:
    """Probe this interpreter (in process) or the one at ``python`` (a child running the probe script).

    ``forked``: for this interpreter, a child forked at the command's start (:mod:`cudamatrix.detect.early`)
    that ran the same probe; its answer is used when it gave one, else the probe runs here.
    ``early``: called (from a reader thread) with the site-packages folders and the candidates the child lists
    before its full answer, so their files can be read while it collects the rest (``python`` only).
    Returns (side, error); error says why another interpreter could not be probed.
    """
    if python is None:
        if forked is not None and (raw := _forked_answer(forked, timeout)) is not None:
            times = _child_times(raw, forked.spawned)
            side = build(raw)
            side.timings_ms = times
            return side, None
        return build(_pyprobe.collect()), None
    result = proc.run([python, _SCRIPT], timeout=max(timeout, 10.0),
                      on_output=_early_line(early) if early is not None else None)
    if result.error:
        return PythonSide(), f"could not run {python}: {result.error}"
    if not result.ok:
        tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        return PythonSide(), f"{python} exited {result.returncode} running the probe: {tail[0][:300]}"
    try:
        raw = json.loads(result.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError, RecursionError):
        return PythonSide(), f"{python} printed no probe answer: {result.stdout.strip()[:200]}"
    try:  # the other interpreter is not trusted to answer in shape (a wrapper script, a hostile sitecustomize)
        if not isinstance(raw, dict):
            raise TypeError("not an object")
        return build(raw), None
    except (AttributeError, KeyError, TypeError, ValueError, RecursionError) as exc:
        return PythonSide(), f"{python} printed an unexpected probe answer ({type(exc).__name__}: {str(exc)[:100]})"
