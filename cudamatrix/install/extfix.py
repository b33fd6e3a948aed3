"""How ``fix`` answers the extension findings: the build of each broken extension that matches the framework.

Pure functions of values (no I/O). Rules, written down:

- A PyG wheel whose finding names its find-links page's wheel for the installed torch (its fix command) is installed
  from that page when the plan keeps torch (:func:`with_pages`).
- An extension named by ``EXTENSION_ABI_MISMATCH``, ``EXTENSION_PIN_MISMATCH`` (on torch) or
  ``EXTENSION_CUDA_MISMATCH`` is answered by the newest release data/extensions.json holds of the same package
  whose torch requirement the torch of the solved set meets (the installed torch when the solved set keeps it),
  whose CUDA major, where the row states one, is that torch's, and which has a wheel for this Python and platform.
  For a package named by its CUDA major (``cupy-cudaNNx``) the release is the variant of the framework's major,
  and the variant of the other major is uninstalled.
- Of the two ways out, the extension's build for the torch kept, or torch moved to the extension's pin, the one
  that changes fewer distributions wins: the first changes the extension alone (one distribution; two for a
  cupy variant swap), the second changes torch, its companions and its ``nvidia-*`` wheels (at least two, and
  moves the framework every other package was installed against). So the extension moves whenever the data
  holds a release for the kept torch; torch moves (:func:`torch_move`) only when it holds none and the extension
  states the torch it needs.
- Two CUDA-major variants installed together (``EXTENSION_VARIANT_CLASH``) are answered by the uninstall of the
  one whose major the framework does not use (:func:`cudamatrix.install.remedies.removals`).
"""
from __future__ import annotations

from dataclasses import replace

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from cudamatrix.matrix.data import ExtensionRelease, Matrix
from cudamatrix.models import Environment, Extension, Finding, Pin, Remedy, Solution
from cudamatrix.names import canonical
from cudamatrix.schema import record

ANSWERED = ("EXTENSION_ABI_MISMATCH", "EXTENSION_PIN_MISMATCH", "EXTENSION_CUDA_MISMATCH")


@record(frozen=True, eq=False)
class ExtensionChange:
    """One extension the plan replaces: the installed distribution, the release installed for it, the data row's
    source, and the framework build it matches."""

    name: str  # the installed distribution
    version: str
    release: ExtensionRelease
    torch: str | None  # the torch it is chosen for ("2.14.1"), None: chosen by the CUDA major alone
    cuda_major: str | None

    @property
    def pin(self) -> Pin:
        return Pin(name=canonical(self.release.name), version=str(self.release.version),
                   index_url=self.release.index_url)

    @property
    def replaces(self) -> bool:
        """The release is another distribution (cupy-cuda13x for cupy-cuda12x): the installed one goes."""
        return canonical(self.release.name) != self.name

    def sentence(self) -> str:
        """What the plan does and the row it rests on, in one sentence."""
        need = []
        if self.release.requires.get("torch"):
            need.append(f"declares torch{self.release.requires['torch']}")
        if self.release.cuda_major is not None:
            need.append(f"is built for CUDA {self.release.cuda_major}")
        fits = f"torch {self.torch}" if self.torch else f"CUDA {self.cuda_major}"
        return (f"{self.name} {self.version} -> {self.release.name} {self.release.version}: the newest release in "
                f"data/extensions.json for {fits} ({self.release.name} {self.release.version} {' and '.join(need)}; "
                f"source: {self.release.source})")


def _base(version: str) -> str:
    return version.split("+", 1)[0]


def _admits(spec: str, version: str) -> bool:
    try:
        return SpecifierSet(spec).contains(_base(version), prereleases=True)
    except (InvalidSpecifier, InvalidVersion, ValueError):
        return False


def _torch(env: Environment, solution: Solution | None) -> tuple[str | None, str | None]:
    """(torch version, its CUDA major) of the solved set, else of the installed torch."""
    for fw in list(solution.frameworks if solution else []) + list(env.frameworks):
        if fw.name == "torch":
            return fw.version, fw.cuda.split(".")[0] if fw.cuda else None
    return None, None


def _framework_major(env: Environment, solution: Solution | None) -> str | None:
    """The CUDA major of the solved set's first CUDA framework, else of the installed ones."""
    for fw in list(solution.frameworks if solution else []) + list(env.frameworks):
        if fw.cuda:
            return fw.cuda.split(".")[0]
    return None


def _family(name: str) -> str:
    """The package a release belongs to: every ``cupy-cudaNNx`` is one package."""
    return "cupy" if name.startswith("cupy-cuda") else name


def _wheel_here(rel: ExtensionRelease, env: Environment) -> bool:
    py = env.python.version or ""
    short = ".".join(py.split(".")[:2])
    if short and rel.python and short not in rel.python:
        return False
    return not (env.python.platform and rel.platforms and env.python.platform not in rel.platforms)


def matching_release(ext: Extension, env: Environment, matrix: Matrix, solution: Solution | None = None
                     ) -> ExtensionChange | None:
    """The release of ``ext``'s package that fits the torch and CUDA major the plan keeps (see the module's
    rules); None when the data holds none, or nothing states what the release needs."""
    torch, torch_major = _torch(env, solution)
    major = torch_major or _framework_major(env, solution)
    family = _family(canonical(ext.name))
    best: ExtensionRelease | None = None
    for rel in matrix.extensions.releases:
        if _family(canonical(rel.name)) != family or not _wheel_here(rel, env) or not _fits(rel, torch, major):
            continue
        if best is None or rel.version > best.version:
            best = rel
    if best is None or (canonical(best.name) == canonical(ext.name) and _same(best.version, ext.version)):
        return None
    return ExtensionChange(name=canonical(ext.name), version=ext.version, release=best,
                           torch=_base(torch) if best.requires.get("torch") and torch else None,
                           cuda_major=major if best.cuda_major is not None else None)


def _fits(rel: ExtensionRelease, torch: str | None, major: str | None) -> bool:
    """Whether the row states what the release needs and ``torch`` (its CUDA ``major``) meets it."""
    spec = rel.requires.get("torch")
    if not spec and rel.cuda_major is None:
        return False  # nothing says what it needs: never chosen blind
    if spec and (torch is None or not _admits(spec, torch)):
        return False
    return rel.cuda_major is None or (major is not None and str(rel.cuda_major) == major)


def _same(a: Version, b: str) -> bool:
    try:
        return a == Version(b)
    except InvalidVersion:
        return False


def _broken(env: Environment, findings: list[Finding]) -> list[Extension]:
    """The installed extensions an answered finding is about (its title starts with the extension's name and
    version, as diagnose.extensions writes it), in the order of the environment."""
    subjects = [f.title for f in findings if f.code in ANSWERED and f.severity == "error"]
    return [e for e in env.extensions if any(t.startswith(f"{e.name} {e.version} ") for t in subjects)]


def extension_changes(env: Environment, findings: list[Finding], matrix: Matrix, solution: Solution | None = None
                      ) -> list[ExtensionChange]:
    """One change per broken extension the data holds a matching release for (see the module's rules)."""
    out = []
    for ext in _broken(env, findings):
        change = matching_release(ext, env, matrix, solution)
        if change is not None:
            out.append(change)
    return out


def torch_move(env: Environment, findings: list[Finding], matrix: Matrix, solution: Solution | None = None
               ) -> list[str] | None:
    """The request that moves torch to the pin of a broken extension the data holds no matching release for
    (``["torch==2.6.0", "xformers==0.0.29.post3"]``); None when every broken extension has its release, or the
    one without states no exact torch."""
    for ext in _broken(env, findings):
        if matching_release(ext, env, matrix, solution) is not None:
            continue
        want = _wanted(ext)
        if want:
            return [f"torch{want}", f"{ext.name}=={ext.version}"]
    return None


def _wanted(ext: Extension) -> str | None:
    """The exact torch an extension states: its build record's torch, else a ``torch==`` Requires-Dist."""
    if ext.built_for:
        return "==" + _base(ext.built_for)
    for text in ext.declares:
        head = text.partition(";")[0].replace(" ", "").replace("(", "").replace(")", "")
        if head.startswith("torch==") and "extra" not in text.partition(";")[2]:
            return head[len("torch"):]
    return None


def with_changes(solution: Solution, changes: list[ExtensionChange]) -> Solution:
    """``solution`` with each change's release pinned and installed, and its sentence among the notes."""
    if not changes:
        return solution
    pins = [c.pin for c in changes]
    names = {p.name for p in pins}
    return replace(solution,
                   packages=[p for p in solution.packages if canonical(p.name) not in names] + pins,
                   to_install=[p for p in solution.to_install if canonical(p.name) not in names] + pins,
                   unchanged=False, notes=[*solution.notes, *(c.sentence() for c in changes)])


def page_wheels(findings: list[Finding]) -> list[tuple[str, str]]:
    """(page, wheel) of each answered finding whose fix installs a find-links page's wheel (a PyG wheel for the
    installed torch: ``pip install --find-links PAGE NAME==VERSION+pt28cu128``, diagnose/findlinks.py), read
    from the finding's command, never its words."""
    out = []
    for f in findings:
        if f.code not in ANSWERED or f.severity != "error":
            continue
        out += [(c[3], c[4]) for c in f.fix_commands if len(c) == 5 and c[:3] == ["pip", "install", "--find-links"]]
    return out


def with_pages(solution: Solution, env: Environment, wheels: list[tuple[str, str]]) -> Solution:
    """``solution`` installing each page's wheel (its page as ``--find-links``) when it keeps the installed torch
    (the wheel was chosen for that build), with a note each; unchanged otherwise."""
    torch = env.packages.get("torch")
    moved = any(canonical(p.name) == "torch" and p.version != torch for p in solution.to_install)
    if not wheels or moved or torch is None:
        return solution
    pins = [Pin(name=canonical(w.partition("==")[0]), version=w.partition("==")[2]) for _page, w in wheels]
    names = {p.name for p in pins}
    links = [a for page in dict.fromkeys(page for page, _w in wheels) for a in ("--find-links", page)]
    notes = [f"{w}: the wheel of {page} for the installed torch {torch} (doctor's finding names it)"
             for page, w in wheels]
    return replace(solution,
                   packages=[p for p in solution.packages if canonical(p.name) not in names] + pins,
                   to_install=[p for p in solution.to_install if canonical(p.name) not in names] + pins,
                   pip_args=links + [a for a in solution.pip_args if canonical(a.partition("==")[0]) not in names],
                   unchanged=False, notes=[*solution.notes, *notes])


def replaced(changes: list[ExtensionChange]) -> list[tuple[str, str, str]]:
    """(name, version, why) of the installed distributions a change replaces by another (a cupy variant)."""
    return [(c.name, c.version, f"replaced by {c.release.name} {c.release.version}, the build for CUDA "
                                f"{c.cuda_major}") for c in changes if c.replaces]


def explained(remedies: list[Remedy], changes: list[ExtensionChange]) -> list[Remedy]:
    """The plan's remedies, each answering an extension finding by a change's install naming the data row it
    rests on (the release, what it declares, the row's source)."""
    out = []
    for r in remedies:
        change = next((c for c in changes if r.code in ANSWERED and r.action == "install"
                       and r.title.startswith(f"{c.name} {c.version} ")), None)
        out.append(r if change is None else replace(r, detail=f"install {change.release.name} "
                                                               f"{change.release.version}: {change.sentence()}"))
    return out
