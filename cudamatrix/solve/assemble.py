"""Assembly: the chosen candidates -> a Solution (exact pins, the minimal change, index layout, pip
arguments, library-path changes). No I/O."""
from __future__ import annotations

from collections.abc import Sequence

from packaging.requirements import Requirement
from packaging.version import Version

from cudamatrix.matrix.data import Matrix
from cudamatrix.models import Environment, FrameworkChoice, Pin, Rejection, Solution
from cudamatrix.names import FAMILIES, FRAMEWORK_DISTS, canonical
from cudamatrix.solve import rules
from cudamatrix.solve.extensions import Chosen
from cudamatrix.solve.indexes import index_args, index_layout
from cudamatrix.solve.pins import cudnn_for_gpus
from cudamatrix.solve.request import Request
from cudamatrix.solve.search import Candidate, implied_basis
from cudamatrix.solve.target import Target


def framework_pins(c: Candidate, request: Request, installed: Environment | None, target: Target,
                   matrix: Matrix | None = None) -> list[Pin]:
    """Exact pins of one chosen build: the framework, its wanted companions, its extra packages and the
    nvidia-* wheels it pins on the target."""
    v = c.variant
    use_index = v.index_url if (v.index_url and not rules.platform_variant(v, target.platform).pypi_default) \
        else None
    out = [_with_asked_extras(p, request.families.get(c.family, [])) for p in
           _FAMILY_PINS[c.family](c, request, installed, use_index)]
    if plain_wheel(c, request, [target]):
        return [Pin(name=p.name, version=p.version, index_url=p.index_url) for p in out]
    for req in rules.pins_for(v, target):
        exact = [s.version for s in req.specifier if s.operator == "==" and "*" not in s.version]
        if exact:  # keep extras: cuda-toolkit[cublas,...]==X installs nothing of use without them
            out.append(Pin(name=canonical(req.name), version=exact[0], extras=sorted(req.extras)))
    return out + (_gpu_capped(c, target, matrix) if matrix is not None else [])


def _gpu_capped(c: Candidate, target: Target, matrix: Matrix) -> list[Pin]:
    """The cuDNN wheel pinned below the versions that have no kernels for the target's GPU (the rule
    ``cudnn_range`` let the build in only because such a version is known)."""
    pin, _ = cudnn_for_gpus(matrix, c.variant, target)
    return [Pin(name=canonical(pin.name), version=next(iter(pin.specifier)).version)] if pin is not None else []


def _with_asked_extras(pin: Pin, reqs: list[Requirement]) -> Pin:
    """The pin with every extra the request gave its distribution (``torch[opt-einsum]``, ``jax[cpu]``): what the
    user wrote is kept. The build-naming extras were matched by the search, so adding them changes no build."""
    asked = {e for r in reqs if canonical(r.name) == pin.name for e in r.extras}
    if not asked - set(pin.extras):
        return pin
    return Pin(name=pin.name, version=pin.version, extras=sorted(set(pin.extras) | asked), index_url=pin.index_url)


def _torch_pins(c: Candidate, request: Request, installed: Environment | None, use_index: str | None) -> list[Pin]:
    """torch, and each companion the request names or the environment has, at the release's companion version
    (PyTorch "Previous PyTorch Versions"); from the framework's index with its local version."""
    local = (c.variant.local_version or "") if use_index else ""
    asked = {canonical(r.name) for r in request.families.get(c.family, [])}
    out = [Pin(name="torch", version=f"{c.release.version}{local}", index_url=use_index)]
    for comp in FAMILIES["torch"].companions:
        wanted = comp in asked or (installed is not None and comp in installed.packages)
        if wanted and comp in c.release.companions:
            out.append(Pin(name=comp, version=f"{c.release.companions[comp]}{local}", index_url=use_index))
    return out


def _tensorflow_pins(c: Candidate, request: Request, installed: Environment | None,
                     use_index: str | None) -> list[Pin]:
    """tensorflow, with the variant's extra (``and-cuda``)."""
    extras = [c.variant.pip_extra] if c.variant.pip_extra else []
    return [Pin(name="tensorflow", version=str(c.release.version), extras=extras, index_url=use_index)]


def plain_wheel(c: Candidate, request: Request, targets: list[Target]) -> bool:
    """TensorFlow for targets without a GPU, whose request names no extra: the plain ``tensorflow`` wheel, not
    ``tensorflow[and-cuda]`` (TensorFlow's pip guide: "pip install tensorflow" for CPU users, the and-cuda extra
    for GPU users; it would pull gigabytes of nvidia-* wheels a machine without a GPU never loads)."""
    if c.family != "tensorflow" or not c.variant.pip_extra or any(t.wants_gpu for t in targets):
        return False
    return not any(r.extras for r in request.families.get("tensorflow", []))


def _jax_pins(c: Candidate, request: Request, installed: Environment | None, use_index: str | None) -> list[Pin]:
    """jax with the variant's extra (``cuda12``), jaxlib at the release's version, and the exact pins of the
    variant's extra packages (the CUDA plugin wheels)."""
    v = c.variant
    out = [Pin(name="jax", version=str(c.release.version), extras=[v.pip_extra] if v.pip_extra else [],
               index_url=use_index)]
    if "jaxlib" in c.release.companions:
        out.append(Pin(name="jaxlib", version=c.release.companions["jaxlib"], index_url=use_index))
    for text in v.extra_packages:
        req = Requirement(text)
        exact = [s.version for s in req.specifier if s.operator == "=="]
        if exact:
            out.append(Pin(name=req.name, version=exact[0], extras=sorted(req.extras)))
    return out


_FAMILY_PINS = {"torch": _torch_pins, "tensorflow": _tensorflow_pins, "jax": _jax_pins}


def same_version(installed: str | None, wanted: str, variant: str | None = None) -> bool:
    """Whether the installed version is the wanted build. "2.1.2+cu121" from the framework's index is the
    same build as the default index's "2.1.2" when the chosen variant is cu121."""
    if installed is None:
        return False
    try:
        have, want = Version(installed), Version(wanted)
    except Exception:
        return installed == wanted
    if have == want:
        return True
    return bool(variant) and want.local is None and have.public == want.public and have.local == variant


def assemble(choice: list[Candidate], request: Request, targets: list[Target], matrix: Matrix,
             installed: Environment | None, rejected: list[Rejection], trace: list[str],
             kept: Sequence[FrameworkChoice] = (), notes: Sequence[str] = (),
             extensions: Sequence[Chosen] = (), find_links: Sequence[str] = ()) -> Solution:
    """The Solution for the chosen candidates and extension releases (pinned beside their framework);
    ``rejected`` and ``trace`` so far are copied into it; ``find_links``: pages the installer reads for the
    request's pinned wheels (``--find-links``)."""
    trace = list(trace)
    pins = _pins(choice, request, installed, targets[0], matrix, extensions)
    frameworks = []
    for c in choice:
        frameworks.append(_plain_choice(c, request, targets) or
                          _as_pinned(_framework_choice(c), c, list(pins.values()), targets[0]))
        trace.append(f"chose {c.label}" + (f" (CUDA {c.variant.cuda}, cuDNN {c.variant.cudnn or 'unknown'})"
                                            if c.variant.cuda else " (CPU build)"))
    frameworks.extend(kept)
    for req in request.passthrough:
        trace.append(f"{req} is not a framework the matrix knows: passed to the installer as given")
    packages = list(pins.values())
    to_install = _minimal_change(choice, packages, installed, trace)
    index_url, extra = index_layout(to_install, bool(request.passthrough))
    pip_args = index_args(index_url, extra) + [a for url in find_links for a in ("--find-links", url)] + \
        [p.requirement() for p in to_install] + [str(r) for r in request.passthrough]
    env_changes = _env_changes(installed) if installed is not None else {}
    main_fw = _main(choice, frameworks)
    builds = {c.family: c.label for c in choice}  # each extension's sentence names the build chosen with it
    notes = [*notes, *[e.said(builds) for e in extensions], *said(choice, request, packages, targets, matrix)]
    trace += notes
    return Solution(
        request=request.texts, targets=[t.name for t in targets], frameworks=frameworks, packages=packages,
        variant=main_fw.variant if main_fw else None, cuda=main_fw.cuda if main_fw else None,
        cudnn=main_fw.cudnn if main_fw else None, index_url=index_url,
        extra_index_urls=extra, pip_args=pip_args if to_install or request.passthrough else [],
        env=env_changes, unchanged=not to_install and not env_changes, to_install=to_install,
        rejected=list(rejected), trace=trace, matrix_version=matrix.meta.data_version,
        unverified=_unverified(choice, targets, trace, matrix), notes=notes)


def _pins(choice: list[Candidate], request: Request, installed: Environment | None, target: Target, matrix: Matrix,
          extensions: Sequence[Chosen]) -> dict[str, Pin]:
    """Name -> exact pin: each chosen build's, then each extension's beside its framework (the first of a name)."""
    pins: dict[str, Pin] = {}
    for p in [p for c in choice for p in framework_pins(c, request, installed, target, matrix)] + \
            [e.pin() for e in extensions]:
        pins.setdefault(p.name, p)
    return pins


def said(choice: list[Candidate], request: Request, packages: list[Pin], targets: list[Target],
         matrix: Matrix) -> list[str]:
    """The sentences the answer owes people: each requested name or extra it does not install as written (a
    substitution), and each GPU build chosen for a target whose driver is not stated (the driver it needs)."""
    plain = [f"{c.label} without the [{c.variant.pip_extra}] extra: the plain wheel, since the target has no GPU "
             f"(TensorFlow's pip guide: pip install tensorflow for CPU users)"
             for c in choice if plain_wheel(c, request, targets)]
    return plain + _substitutions(request, packages) + \
        [s for c in choice if not plain_wheel(c, request, targets) for s in _unknown_driver(c, targets, matrix)] + \
        [s for c in choice for s in _capped_said(c, targets[0], matrix)] + \
        [s for c in choice if not plain_wheel(c, request, targets) for s in _on_cpu_nodes(c, targets)]


def _on_cpu_nodes(c: Candidate, targets: list[Target]) -> list[str]:
    """A GPU build chosen for a fleet that mixes GPU machines with machines without one: the GPU machines decide
    (a CPU build is never chosen for a GPU target unasked), and the machines without a GPU run the same build on
    their CPU (the framework finds no device and uses the CPU; its nvidia-* wheels are installed, never loaded)."""
    if c.variant.cuda is None or not any(t.wants_gpu for t in targets):
        return []
    cpu = [t.name for t in targets if not t.wants_gpu]
    if not cpu:
        return []
    return [f"{c.label} is the build for every machine: the GPU machines need a GPU build, and {', '.join(cpu)} "
            f"(no usable GPU) run{'s' if len(cpu) == 1 else ''} it on the CPU; for a CPU build there, lock per "
            f"class (lock --per-class)"]


def _capped_said(c: Candidate, target: Target, matrix: Matrix) -> list[str]:
    """The cuDNN pin the GPU's floor adds to a build that leaves cuDNN as a range, and why."""
    pin, why = cudnn_for_gpus(matrix, c.variant, target)
    return [f"pinned {pin} for {c.label}: {why}"] if pin is not None else []


def _substitutions(request: Request, packages: list[Pin]) -> list[str]:
    """A framework requirement whose name or extras no pin carries: what was asked, and what is installed."""
    pinned = {p.name: p for p in packages}
    out = []
    for family, reqs in request.families.items():
        for req in reqs:
            pin = pinned.get(canonical(req.name))
            if pin is None and canonical(req.name) in FAMILIES[family].aliases:
                pin = pinned.get(family)
                if pin is not None:
                    out.append(f"substituted: {req} is installed as {pin.requirement()} ({req.name} is another "
                               f"name of {family})")
                continue
            missing = set(req.extras) - set(pin.extras) if pin is not None else set()
            if missing:
                out.append(f"substituted: {req} asks for the extra {', '.join(sorted(missing))}, and the answer "
                           f"installs {pin.requirement() if pin else family}")
    return out


def _unknown_driver(c: Candidate, targets: list[Target], matrix: Matrix) -> list[str]:
    """A GPU build for a target whose driver is unknown: the driver it needs, since nothing checked it. In a
    fleet that mixes GPU machines with machines without one, only the GPU machines' drivers count."""
    gpu_targets = [t for t in targets if t.wants_gpu] or targets
    if c.variant.cuda is None or all(t.driver for t in gpu_targets):
        return []
    full, minor, _ = rules.driver_floors(matrix, c.variant.cuda, targets[0].platform)
    if not full and not minor:
        return [f"the driver is not stated: {c.label} needs a driver that runs CUDA {c.variant.cuda}"]
    floor = minor or full
    return [f"the driver is not stated: {c.label} (CUDA {c.variant.cuda}) needs driver >= {floor}"
            + (f" ({full} for full support)" if full and minor and full != minor else "")
            + "; with an older driver, solve again with --driver VERSION"]


_LABELLED = ("nvidia-cudnn", "nvidia-cuda-runtime")  # the libraries a label names: cuDNN, the CUDA runtime


def _plain_choice(c: Candidate, request: Request, targets: list[Target]) -> FrameworkChoice | None:
    """The plain TensorFlow wheel's choice: the CPU use of the release, no CUDA named."""
    if not plain_wheel(c, request, targets):
        return None
    return FrameworkChoice(name=c.family, version=str(c.release.version), variant="cpu", index_url=None,
                           matrix_source=c.variant.source)


def _as_pinned(fw: FrameworkChoice, c: Candidate, own: list[Pin], target: Target) -> FrameworkChoice:
    """The label made true to the pip line (``own``: every exact pin of the answer): where the build's cuDNN wheel
    is pinned exactly (by this build, another framework of the set or the GPU's floor) that version is named; a
    CUDA or cuDNN wheel the build leaves as a range, and nothing in the line pins, is listed as unpinned."""
    exact = {p.name: p.version for p in own}
    wanted = {canonical(r.name) for r in rules.pins_for(c.variant, target)}
    cudnn = next((v for n, v in exact.items() if rules.library_key(n) == "nvidia-cudnn" and n in wanted), None)
    free = [str(r) for r in rules.pins_for(c.variant, target)
            if rules.library_key(r.name) in _LABELLED and canonical(r.name) not in exact]
    if cudnn is None and not free:
        return fw
    return FrameworkChoice(name=fw.name, version=fw.version, variant=fw.variant, cuda=fw.cuda,
                           cudnn=cudnn or fw.cudnn, index_url=fw.index_url, matrix_source=fw.matrix_source,
                           unpinned=[f.split(";")[0].strip() for f in free])


def _framework_choice(c: Candidate) -> FrameworkChoice:
    return FrameworkChoice(name=c.family, version=str(c.release.version), variant=c.variant.name,
                           cuda=str(c.variant.cuda) if c.variant.cuda else None,
                           cudnn=str(c.variant.cudnn) if c.variant.cudnn else None,
                           index_url=c.variant.index_url, matrix_source=c.variant.source)


def _minimal_change(choice: list[Candidate], packages: list[Pin], installed: Environment | None,
                    trace: list[str]) -> list[Pin]:
    """The pins to install: those not installed at the wanted build; when a framework changes, its whole set, so
    the installer resolves them together; drifted nvidia-* wheels alone otherwise (said in ``trace``)."""
    have = installed.packages if installed is not None else {}
    variant_of = {n: c.variant.name for c in choice for n in FAMILIES[c.family].distributions}
    to_install = [p for p in packages if not same_version(have.get(p.name), p.version, variant_of.get(p.name))]
    if to_install and all(p.name.startswith("nvidia-") for p in to_install):
        trace.append("only nvidia-* wheels differ from the solution: reinstalling those alone")
    elif to_install and any(p.name in FRAMEWORK_DISTS for p in to_install):
        to_install = [p for p in packages if p.name in FRAMEWORK_DISTS or
                      not same_version(have.get(p.name), p.version, variant_of.get(p.name))]
    return to_install


def _main(choice: list[Candidate], frameworks: list[FrameworkChoice]) -> FrameworkChoice | None:
    """The framework whose variant, CUDA and cuDNN the Solution names: torch when chosen, else the first."""
    main = next((c for c in choice if c.family == "torch"), choice[0] if choice else None)
    return next((f for f in frameworks if main is None or f.name == main.family), None)


def _unverified(choice: list[Candidate], targets: list[Target], trace: list[str],
                matrix: Matrix) -> list[dict[str, str]]:
    """The inferred facts the answer rests on: [{fact, basis}] (each also noted in ``trace``): the matrix's
    inferred rows, and the nvidia-* pins of a build chosen beside another framework that the matrix lacks."""
    out: dict[str, str] = {}
    for c in choice:
        for t in targets:
            for fact, basis in rules.inferred_facts(c.release, c.variant, t):
                out.setdefault(fact, basis)
        implied = implied_basis(c, [o for o in choice if o is not c], targets, matrix)
        if implied is not None:
            out.setdefault(f"{c.label} nvidia_pins", implied)
    for fact in out:
        trace.append(f"{fact} is inferred, not read from an artifact: {out[fact]}")
    return [{"fact": f, "basis": b} for f, b in out.items()]


def _env_changes(env: Environment) -> dict[str, str]:
    # lazy: `solve` would load 20 ms more (python -X importtime; the hoisting's budget per command is 3% of its run): cudamatrix.ldso.linkmap, cudamatrix.ldso.libpaths, cudamatrix.ldso.elf
    from cudamatrix.ldso.libpaths import library_path_fix

    return library_path_fix(env)
