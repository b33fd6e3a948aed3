"""``check``: do given requirements (a file, or what is installed) fit the targets? No I/O.

A requirements file is read as pip reads it: its own index lines decide which build of torch pip
installs. With no index line, pip installs the default index's build (for torch on Linux x86_64, the
variant the matrix marks ``pypi_default``); a PyTorch index (``--index-url .../whl/cu126``) serves that
variant; with the default index and a PyTorch extra index, pip takes the higher version, and a local
version (``2.5.1+cu121``) sorts above the plain one. The container facts (``NVIDIA_REQUIRE_CUDA``, the
``nvidia/cuda`` base image) are derived from the chosen set and the targets.
"""
from __future__ import annotations

import re
from collections.abc import Callable

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from cudamatrix.errors import NoSolution
from cudamatrix.matrix.data import FrameworkRelease, Matrix, Variant
from cudamatrix.matrix.query import cuda_release, default_variant
from cudamatrix.models import Environment, Solution
from cudamatrix.names import EXTENSIONS, FAMILIES, FRAMEWORK_DISTS
from cudamatrix.solve import findlinks, releasefiles, rules
from cudamatrix.solve.driverclass import Memo
from cudamatrix.solve.indexes import PYTORCH_INDEX_PREFIX
from cudamatrix.solve.known import NameCheck
from cudamatrix.solve.requirements import RequirementsFile, parse_requirements
from cudamatrix.solve.solver import fits, parse_request, solve
from cudamatrix.solve.target import Target, driver_cuda, target_record

TORCH_DISTS = FAMILIES["torch"].distributions
# the python3 an Ubuntu release installs from its own archive (the nvidia/cuda images carry no Python)
UBUNTU_PYTHON = {"20.04": "3.8", "22.04": "3.10", "24.04": "3.12"}


def _variant_of_url(url: str, mirror: str | None) -> str | None:
    """The torch variant a PyTorch index URL serves (``.../whl/cu126`` -> ``cu126``); None for other URLs.

    A ``#fragment`` or ``?query`` is not part of the index folder's name, and only a name that can be a local
    version label (``2.3.0+cu121``) counts."""
    from urllib.parse import urlsplit

    prefixes = [PYTORCH_INDEX_PREFIX] + ([mirror.rstrip("/")] if mirror else [])
    parts = urlsplit(url)
    url = parts._replace(query="", fragment="").geturl().rstrip("/")
    if any(url.startswith(p + "/") for p in prefixes):
        last = url.rsplit("/", 1)[-1]
        return last if re.fullmatch(r"[a-z0-9]+(?:\.[a-z0-9]+)*", last) and last != "whl" else None
    return None


def _local_key(variant: str) -> Version:
    return Version(f"0+{variant}")


class _Indexes:
    """What a requirements file's index lines serve: the torch variants of the PyTorch index folders it names
    (``.../whl/cu126``), whether the default index is in use, and its find-links pages on the PyTorch index."""

    def __init__(self, parsed: RequirementsFile, mirror: str | None, matrix: Matrix) -> None:
        self.parsed = parsed
        self.urls = ([parsed.index_url] if parsed.index_url else []) + parsed.extra_index_urls
        self.served = [v for v in (_variant_of_url(u, mirror) for u in self.urls) if v]
        self.unknown = [u for u in self.urls if _variant_of_url(u, mirror) is None]
        self.default = parsed.index_url is None and not parsed.no_index
        self.flat = [f for f in parsed.find_links if f.startswith(PYTORCH_INDEX_PREFIX) or
                     (mirror and f.startswith(mirror.rstrip("/")))]
        # the pages the data knows (PyG's) carry their packages and no torch
        self.pages = [f for f in parsed.find_links if f not in self.flat and not findlinks.is_page(f, matrix)]

    def problem(self, req: Requirement) -> str | None:
        """An index whose torch builds are not known."""
        if self.unknown:
            return (f"{req}: which torch build {self.unknown[0]} serves is not known (a mirror of the PyTorch index? "
                    f"pass --mirror URL)")
        if self.pages and not self.flat:
            return f"{req}: what {self.pages[0]} (a --find-links page) offers is not known"
        return None

    def offers(self, v: Variant) -> bool:
        return v.name in self.served or bool(self.flat)


def _torch_build(matrix: Matrix, req: Requirement, parsed: RequirementsFile, targets: list[Target],
                 mirror: str | None) -> tuple[str | None, str | None]:
    """(the exact ``torch==X+local`` pip would install from this file's indexes, or a problem sentence)."""
    ix = _Indexes(parsed, mirror, matrix)
    problem = ix.problem(req)
    if problem:
        return None, problem
    local_asked = {s.version.partition("+")[2] for s in req.specifier if "+" in s.version}
    releases = [r for r in matrix.frameworks("torch")
                if req.specifier.contains(str(r.version), prereleases=True) or
                any(req.specifier.contains(f"{r.version}+{v.name}", prereleases=True) for v in r.variants)]
    pythons = {t.python for t in targets if t.python}
    for release in sorted(releases, key=lambda r: r.version, reverse=True):
        if pythons and release.python and not pythons <= set(release.python):
            continue  # pip skips releases without a wheel for the target's Python
        text, problem = _release_build(release, req, ix, local_asked, targets)
        if text or problem:
            return text, problem
    where = ", ".join(ix.urls + parsed.find_links) or "the default index"
    return None, f"{req}: no torch build in the matrix matches it on {where}"


def _release_build(release: FrameworkRelease, req: Requirement, ix: _Indexes, local_asked: set[str],
                   targets: list[Target]) -> tuple[str | None, str | None]:
    """The build of one release pip takes from these indexes (a local version sorts above the plain one, and
    cu128 above cu126: pip takes the highest), a problem, or (None, None) when they serve none of it."""
    options = [v for v in release.variants if (not local_asked or v.name in local_asked) and ix.offers(v)]
    defaults, problem = _default_builds(release, req, targets, bool(options)) if ix.default and not local_asked \
        else (set(), None)
    if problem:
        return None, problem
    options += [v for v in release.variants if v.name in defaults and v not in options]
    if not options:
        return None, None
    best = max(options, key=lambda v: (ix.offers(v), _local_key(v.name)))
    return f"torch=={release.version}{best.local_version or '+' + best.name}", None


def _default_builds(release: FrameworkRelease, req: Requirement, targets: list[Target],
                    other_options: bool) -> tuple[set[str], str | None]:
    """(the variant names the default index serves of ``release`` on the targets' platforms, a problem): the
    matrix records it per platform (PyPI's Windows torch is the CPU build); unknown matters only when no other
    index of the file serves the release (a local version sorts above the default index's plain one)."""
    served = {p: default_variant(release, p) for p in sorted({t.platform for t in targets})}
    if not other_options and any(v is None for v in served.values()):
        other = [p for p, v in served.items() if v is None and p != "linux_x86_64"]
        on = f" for {', '.join(other)}" if other else ""
        return set(), f"{req}: which build of torch {release.version} the default index serves{on} is not in the matrix"
    defaults = {v.name for v in served.values() if v is not None}
    if len(defaults) > 1:
        return set(), (f"{req}: the default index serves another build of torch {release.version} on each of the "
                       f"targets' platforms ({', '.join(sorted(defaults))}): check each platform on its own")
    return defaults, None


def marker_applies(req: Requirement, target: Target) -> bool | None:
    """Whether a requirement's PEP 508 marker is true on the target (pip skips a line whose marker is false:
    pip's "Requirements File Format", PEP 508 "Environment Markers"); None when it depends on the Python
    version and the target states none."""
    if req.marker is None:
        return True
    if target.python is None and "python" in str(req.marker):
        return None
    return bool(req.marker.evaluate(rules.marker_env(target, None)))


def applying(reqs: list[Requirement], targets: list[Target]) -> tuple[list[Requirement], list[str]]:
    """(the requirements whose marker holds, or may hold, on some target; a sentence per line skipped because
    its marker is false on every target)."""
    kept: list[Requirement] = []
    skipped: list[str] = []
    for req in reqs:
        if any(marker_applies(req, t) is not False for t in targets):
            kept.append(req)
        else:
            skipped.append(f"{req}: its marker is false on every target ({_marker_facts(targets)}): pip skips "
                           f"the line, so check does too")
    return kept, skipped


def _marker_facts(targets: list[Target]) -> str:
    """The marker values of the targets, as people read them ("Python 3.9, linux_x86_64")."""
    return "; ".join(sorted({f"Python {t.python or 'any'}, {t.platform}" for t in targets}))


def _file_request(matrix: Matrix, parsed: RequirementsFile, targets: list[Target], mirror: str | None,
                  problems: list[str]) -> tuple[list[str], list[Requirement]]:
    """(framework requirement strings for the solver, nvidia-* requirements of the file)."""
    texts: list[str] = []
    nvidia: list[Requirement] = []
    torch_text = None
    for req in parsed.requirements:
        cname = canonicalize_name(req.name)
        if cname.startswith("nvidia-"):
            nvidia.append(req)
        elif cname == "torch":
            torch_text, problem = _torch_build(matrix, req, parsed, targets, mirror)
            problem = problem or _cpu_by_default(req, torch_text, targets)
            if problem:
                problems.append(problem)
            if torch_text:
                extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
                texts.append(torch_text.replace("torch", f"torch{extras}", 1))
    return texts + _beside_torch(matrix, parsed, torch_text, problems), nvidia


def _beside_torch(matrix: Matrix, parsed: RequirementsFile, torch_text: str | None, problems: list[str]) -> list[str]:
    """The requirement strings of the file's lines solved with its torch line: the companions at its local
    version, the other frameworks, the extensions."""
    texts: list[str] = []
    local = torch_text.partition("+")[2] if torch_text else ""
    has_torch = any(canonicalize_name(r.name) == "torch" for r in parsed.requirements)
    for req in parsed.requirements:
        cname = canonicalize_name(req.name)
        if cname in ("torchvision", "torchaudio") and not has_torch:
            problems.append(f"{req}: the file pins no torch, so which torch build pip pairs it with is not known "
                            f"(add the torch line the image installs)")
        elif cname in ("torchvision", "torchaudio") and local:
            texts.append(_with_local(req, local))
        elif cname in FRAMEWORK_DISTS and cname not in TORCH_DISTS:
            texts.append(_with_plugin_extra(req, [r.name for r in parsed.requirements]))
        elif cname in EXTENSIONS or (not req.url and (findlinks.requested([req], matrix)
                                                      or releasefiles.requested([req], matrix))):
            # solved with its framework: a file pairing it with the wrong torch does not fit (a PyG wheel: its
            # local tag names the torch build; flash-attn: a release with a file for the file's torch)
            texts.append(f"{req.name}{req.specifier}")
    return texts


def _plugin_extra(names: list[str]) -> str | None:
    """The build extra the JAX plugin wheels among ``names`` install (``jax-cuda12-plugin`` -> ``cuda12``): pip
    installs that plugin whatever extra the jax line names, so the CUDA the set needs is the plugin's, not the
    newest a driver runs. None when no plugin is named, or plugins of two CUDA majors are."""
    found = {m.group(1) for m in (_PLUGIN.fullmatch(canonicalize_name(n)) for n in names) if m}
    return f"cuda{found.pop()}" if len(found) == 1 else None


_PLUGIN = re.compile(r"jax-cuda(\d+)-(?:plugin|pjrt)")


def _with_plugin_extra(req: Requirement, names: list[str]) -> str:
    """A jax requirement with the build extra of the plugin wheels the same set pins, where it names no build
    extra of its own (a complete lock pins ``jax==0.7.0`` and ``jax-cuda12-plugin==0.7.0``)."""
    extra = _plugin_extra(names) if canonicalize_name(req.name) == "jax" else None
    if extra is None or any(e == "cpu" or e.startswith("cuda") for e in req.extras):
        return str(req)
    req = Requirement(str(req))
    req.extras = set(req.extras) | {extra}
    return str(req)


def _cpu_by_default(req: Requirement, text: str | None, targets: list[Target]) -> str | None:
    """A line that did not ask for the CPU build, which pip installs from the file's indexes on a GPU target
    (PyPI's Windows torch is the CPU build: PyTorch "Get Started", Windows pip lines name a CUDA index)."""
    asked_cpu = any(s.version.endswith("+cpu") for s in req.specifier)
    if text is None or not text.endswith("+cpu") or asked_cpu or not any(t.wants_gpu for t in targets):
        return None
    where = ", ".join(sorted({t.platform for t in targets}))
    return (f"{req}: pip installs {text} from the file's indexes on {where} (the CPU build), and the target has a "
            f"GPU")


def _with_local(req: Requirement, local: str) -> str:
    """A companion requirement whose exact pins carry torch's local version (pip installs them from the same
    index folder: ``torchvision==0.20.1`` -> ``torchvision==0.20.1+cu121``)."""
    specs = []
    for s in req.specifier:
        version = s.version
        if s.operator == "==" and "+" not in version and "*" not in version:
            version = f"{version}+{local}"
        specs.append(f"{s.operator}{version}")
    return f"{req.name}{','.join(specs)}"


def _installed_request(installed: Environment) -> list[str]:
    """The installed frameworks as exact requirements; the installed torch build is the one detected (a plain
    "2.5.1" from the default index is one variant)."""
    texts = [_with_plugin_extra(Requirement(f"{n}=={installed.packages[n]}"), list(installed.packages))
             for n in FRAMEWORK_DISTS if n in installed.packages]
    build = next((f.variant for f in installed.frameworks if f.name == "torch" and f.variant), None)
    if build:
        texts = [f"{t}+{build}" if t.split("==")[0] in TORCH_DISTS and "+" not in t else t for t in texts]
    return texts


NamesOf = Callable[[RequirementsFile, list[str]], NameCheck]  # the file's indexes, the names to ask about


def check_requirements(matrix: Matrix, targets: list[Target], installed: Environment | None,
                       text: str | None, name: str | None, mirror: str | None = None,
                       names: NamesOf | None = None) -> dict:
    """{"fits": bool, "checked": [...], "problems": [...], "ways_out": [...], "skipped", "unchecked",
    "base_image", "nvidia_require_cuda", "python_in_image", "unverified"}.

    ``text`` is a requirements file's content; None checks the installed frameworks instead. ``names`` asks the
    file's indexes about the names the matrix does not know (:mod:`cudamatrix.solve.known`); a name no index
    lists, or one no index could answer, is a UsageError (exit 2).
    """
    problems: list[str] = []
    nvidia: list[Requirement] = []
    skipped: list[str] = []
    unchecked: list[str] = []
    if text is not None:
        parsed = parse_requirements(text, name or "requirements")
        parsed.requirements, skipped = applying(parsed.requirements, targets)
        if names is not None:
            found = names(parsed, [r.name for r in parsed.requirements])
            found.raise_unknown(f"{name or 'requirements'}: ")
            found.raise_unchecked(f"{name or 'requirements'}: ")  # a gate never passes a name it could not check
        texts, nvidia = _file_request(matrix, parsed, targets, mirror, problems)
    elif installed is None:
        return {"fits": False, "checked": [], "problems": ["no installed environment to check"], "ways_out": []}
    else:
        texts = _installed_request(installed)
    result: dict = {"checked": texts, "targets": [target_record(matrix, t) for t in targets], "problems": problems,
                    "ways_out": [], "skipped": skipped, "unchecked": unchecked}
    if problems:
        result["fits"] = False
        result["advice"] = index_advice(matrix, texts, targets) if texts else []
        result["ways_out"] = [a["message"] for a in result["advice"]]
        return result
    if not texts:
        result.update(fits=True, note="no framework requirement to check")
        return result
    memo = Memo()  # the rules' verdicts on these targets, shared by the solve, its ways out and the advice's
    try:
        solution = solve(targets, parse_request(texts), matrix, installed=None, memo=memo)
    except NoSolution as exc:
        result["fits"] = False
        result["problems"] = [c.message + (f" (blocks: {', '.join(c.machines)})" if c.machines else "")
                              for c in exc.causes]
        result["advice"] = index_advice(matrix, texts, targets, memo)
        result["ways_out"] = [a["message"] for a in result["advice"]] + [w.message for w in exc.ways_out]
        return result
    result["problems"] += _nvidia_problems(solution, nvidia)
    result["fits"] = not result["problems"]
    result["solution"] = solution.to_dict()
    result["unverified"] = list(solution.unverified)
    image, python_note = base_image(solution, matrix, targets)
    result["base_image"] = image
    result["python_in_image"] = python_note
    result["nvidia_require_cuda"] = nvidia_require_cuda(solution, matrix, targets)
    return result


def _nvidia_problems(solution: Solution, nvidia: list[Requirement]) -> list[str]:
    """The file's nvidia-* pins that disagree with what the chosen builds declare, or that are another CUDA major
    of a library they pin (both install the same files)."""
    wanted = {p.name: p.version for p in solution.packages if p.name.startswith("nvidia-")}
    keys = {rules.library_key(n) for n in wanted}
    out = []
    for req in nvidia:
        cname = str(canonicalize_name(req.name))
        if cname in wanted and req.specifier and not req.specifier.contains(wanted[cname], prereleases=True):
            out.append(f"{req} disagrees with the framework's own pin {cname}=={wanted[cname]}")
        elif cname not in wanted and wanted and rules.library_key(cname) in keys:
            out.append(f"{req} is another CUDA major of a library the framework pins (both install the same files)")
    return out


def index_advice(matrix: Matrix, texts: list[str], targets: list[Target], memo: Memo | None = None) -> list[dict]:
    """For a torch build that does not fit: another build of the same release with which the whole file solves
    (re-solved with the file's other frameworks, so the advice converges), as a change to the file:
    ``{"add": [index line], "pin": {name: exact requirement}, "message": sentence}``.

    The index line is ``--extra-index-url``: the file's indexes stay for every other package (TensorFlow is not
    on the PyTorch index). The pins carry the build's local version (``torch==2.5.1+cu121``), which only that
    PyTorch index folder serves, so pip installs that build whatever other indexes the file names (an exact
    local version matches only itself: PEP 440). ``memo``: the solves of ``texts`` on ``targets`` done already."""
    memo = Memo() if memo is None else memo
    for i, text in enumerate(texts):
        req = Requirement(text)
        if canonicalize_name(req.name) != "torch":
            continue
        version, _, local = next((s.version for s in req.specifier if s.operator == "=="), "").partition("+")
        release = next((r for r in matrix.frameworks("torch") if str(r.version) == version), None)
        if release is None:
            continue
        for v in sorted(release.variants, key=lambda v: v.cuda or Version("0"), reverse=True):
            if v.name == local or v.cuda is None or not v.index_url:
                continue
            found = _local_advice(matrix, v, i, local, texts, targets, memo) if v.local_version else \
                _bare_advice(matrix, release, v, texts, targets)
            if found:
                return found
    return []


def _local_advice(matrix: Matrix, v: Variant, i: int, local: str, texts: list[str],
                  targets: list[Target], memo: Memo) -> list[dict]:
    """The advice for a build with a local version: its index as an extra index and its local pins, when the file's
    frameworks then solve together."""
    moved = [_with_variant(t, local, v.name) if j == i or _is_companion(t) else t for j, t in enumerate(texts)]
    if fits(targets, parse_request(moved), matrix, memo=memo) is None:
        return []
    pins = {canonicalize_name(Requirement(t).name): t for t in moved
            if canonicalize_name(Requirement(t).name) in TORCH_DISTS}
    line = f"--extra-index-url {v.index_url}"
    return [{"add": [line], "pin": pins,
             "message": f"add the line {line} to the file and pin {' '.join(pins.values())}: pip then installs "
                        f"that build, which fits with the file's other frameworks; other packages keep their index"}]


def _bare_advice(matrix: Matrix, release: FrameworkRelease, v: Variant, texts: list[str],
                 targets: list[Target]) -> list[dict]:
    """A build whose wheels carry no local version (``2.5.1`` on its PyTorch index folder): no pin tells it from
    the default index's, so only that folder as the file's index makes pip take it. Offered for a file whose only
    framework is torch, when the build fits every target; the file's other index lines are dropped."""
    if any(canonicalize_name(Requirement(t).name) not in TORCH_DISTS for t in texts) or \
            any(rules.check(matrix, release, v, t) for t in targets):
        return []
    line = f"--index-url {v.index_url}"
    return [{"add": [line], "drop": ["--index-url", "-i", "--extra-index-url"], "pin": {},
             "message": f"make {line} the file's only index line: pip then installs torch {release.version} "
                        f"({v.name}, whose wheels carry no local version), which fits; list any other package's "
                        f"index after it with --extra-index-url"}]


def _is_companion(text: str) -> bool:
    return canonicalize_name(Requirement(text).name) in ("torchvision", "torchaudio")


def _with_variant(text: str, old: str, new: str) -> str:
    """A requirement text whose exact pin carries another local version (``torch==2.5.1+cu124`` -> ``+cu121``)."""
    if old:
        return text.replace(f"+{old}", f"+{new}")
    req = Requirement(text)
    specs = [f"{s.operator}{s.version}+{new}" if s.operator == "==" else str(s) for s in req.specifier]
    return f"{req.name}{','.join(specs)}"


def _chosen(solution: Solution, matrix: Matrix) -> list[tuple[FrameworkRelease, Variant]]:
    out = []
    for fw in solution.frameworks:
        release = next((r for r in matrix.frameworks(fw.name) if str(r.version) == fw.version), None) \
            if fw.name in ("torch", "tensorflow", "jax") else None
        variant = next((v for v in release.variants if v.name == fw.variant), None) if release else None
        if release is not None and variant is not None:
            out.append((release, variant))
    return out


def nvidia_require_cuda(solution: Solution, matrix: Matrix, targets: list[Target]) -> str | None:
    """The ``NVIDIA_REQUIRE_CUDA`` constraint: the lowest CUDA the set needs from the driver.

    A build runs on a driver of an older minor of its CUDA major when it carries SASS for every target GPU
    (minor-version compatibility, CUDA Compatibility guide), so it needs only the major's floor (``cuda>=12.0``);
    a build reaching a GPU by PTX needs its own CUDA. Never above what a target's driver reports: the NVIDIA
    container runtime refuses to start a container whose constraint the driver does not meet."""
    need: Version | None = None
    for _release, variant in _chosen(solution, matrix):
        if variant.cuda is None:
            continue
        gpus = [g for t in targets for g in t.gpus]
        sass_everywhere = bool(gpus) and all(rules.sass_covers(variant.archs, g.compute_capability) for g in gpus)
        has_minor_compat = any(row.cuda_major == variant.cuda.major for row in matrix.cuda.minor_compat)
        this = Version(f"{variant.cuda.major}.0") if sass_everywhere and has_minor_compat else \
            Version(".".join(str(x) for x in variant.cuda.release[:2]))
        need = this if need is None or this > need else need
    if need is None:
        return None
    for t in targets:
        top = driver_cuda(matrix, t)  # a Jetson driver runs its JetPack line's CUDA, not a desktop branch's
        if top is not None and top < need:
            need = Version(".".join(str(x) for x in top.release[:2]))
    return f"cuda>={need.major}.{need.minor}"


def base_image(solution: Solution, matrix: Matrix, targets: list[Target]) -> tuple[str | None, str | None]:
    """(an ``nvidia/cuda`` base image tag, how Python gets into it) for the solution's CUDA.

    The tag is built from the newest CUDA release row of that major.minor in the matrix; wheels that bring
    their own CUDA libraries need only the ``base`` flavour (driver access), others ``runtime``. The images
    carry no Python: the Ubuntu release is the one whose own python3 is the targets' Python where one fits."""
    if not solution.cuda:
        return None, None
    rel = cuda_release(matrix, solution.cuda)
    if rel is None:
        return None, None
    full = str(rel.version) + (".0" if len(rel.version.release) < 3 else "")
    v = Version(full)
    # Ubuntu releases the nvidia/cuda images are published for, per CUDA range (older ones left out)
    ubuntus = [u for u, ok in (("24.04", v >= Version("12.5")), ("22.04", v >= Version("11.7")),
                               ("20.04", v < Version("11.7"))) if ok]
    pythons = {t.python for t in targets if t.python}
    match = next((u for u in ubuntus if pythons and {UBUNTU_PYTHON[u]} == pythons), None)
    ubuntu = match or ubuntus[0]
    bundled = any(p.name.startswith("nvidia-") for p in solution.packages) or \
        any(fw.name == "torch" for fw in solution.frameworks)
    flavour = "base" if bundled else "runtime"
    own = UBUNTU_PYTHON[ubuntu]
    if not pythons or match:
        note = f"the image has no Python: apt-get install python3 python3-pip gives Python {own}" + \
               (", the targets' Python" if match else "")
    else:
        want = ", ".join(sorted(pythons))
        note = (f"the image has no Python, and Ubuntu {ubuntu}'s python3 is {own}, not the targets' {want}: "
                f"install Python {want} into it (for example uv python install {want})")
    return f"nvidia/cuda:{full}-{flavour}-ubuntu{ubuntu}", note
