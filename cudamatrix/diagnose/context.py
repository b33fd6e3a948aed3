"""What every finding function reads: the Environment under diagnosis, the Matrix, the Target it describes and
its installed frameworks matched to matrix rows, worked out once per ``diagnose``. No I/O."""
from __future__ import annotations

from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from cudamatrix.diagnose.declared import applicable_requirements
from cudamatrix.diagnose.libchoice import Chosen, chosen, judged_objects
from cudamatrix.matrix.data import ExtensionRelease, FrameworkRelease, Matrix, Variant
from cudamatrix.models import Environment, Extension, ExtensionObject
from cudamatrix.names import FAMILIES, canonical, stated_variant
from cudamatrix.schema import record
from cudamatrix.solve.target import from_environment

if TYPE_CHECKING:
    from packaging.requirements import Requirement


@record(frozen=True)
class Installed:
    """An installed framework matched to its matrix row (release and variant, when known)."""

    name: str
    version: str
    variant_name: str | None
    release: FrameworkRelease | None
    variant: Variant | None


def base_version(version: str) -> str:
    """The public part of a version: "2.5.1+cu121" -> "2.5.1"."""
    return version.split("+")[0]


def _release_of(matrix: Matrix, name: str, version: str) -> FrameworkRelease | None:
    release = None
    for rel in matrix.frameworks(name):
        try:
            if rel.version == Version(base_version(version)):
                release = rel
        except InvalidVersion:
            pass
    return release


def _variant_of(release: FrameworkRelease, name: str | None, version: str) -> Variant | None:
    """The variant named ``name``; with no name and no local version, the default index's build: the variant
    marked so, else the release's one variant when it has only one (TensorFlow 2.8's "gpu": the plain wheel,
    which loads the system's CUDA and cuDNN). A release of several variants told apart by an extra (JAX: the
    plain ``jax`` is a CUDA build when its plugin is installed) is not guessed from the plain wheel."""
    if name is None and "+" not in version:
        default = next((v for v in release.variants if v.pypi_default), None)
        only = release.variants[0] if len(release.variants) == 1 and not release.variants[0].pip_extra else None
        return default or only
    return next((v for v in release.variants if v.name == name), None)


def match_installed(env: Environment, matrix: Matrix) -> list[Installed]:
    """The environment's frameworks of a known family, each with its matrix release and variant (None when the
    matrix lacks them)."""
    out = []
    for fw in env.frameworks:
        if fw.name not in FAMILIES:
            continue
        stated = stated_variant(env.frameworks, fw.name)
        release = _release_of(matrix, fw.name, fw.version)
        variant = _variant_of(release, stated, fw.version) if release is not None else None
        out.append(Installed(fw.name, fw.version, stated or (variant.name if variant else None), release, variant))
    return out


class Diagnosis:
    """One Environment under diagnosis and the facts more than one finding function reads."""

    def __init__(self, env: Environment, matrix: Matrix) -> None:
        self.env, self.matrix = env, matrix
        self.target = from_environment(env, matrix)
        self.installed = match_installed(env, matrix)
        drv = env.driver
        # a pasted report states the driver version without a status: the version is what the rules read
        self.driver_stated = bool(drv.version) and drv.status in ("ok", "unknown")
        self.has_gpu = bool(self.target.gpus) and (drv.status == "ok" or self.driver_stated)
        self._declared: dict[str, list[Requirement]] | None = None
        self._extension_releases: dict[str, list[ExtensionRelease]] | None = None
        self._library_choices: dict[int, Chosen | None] = {}

    @property
    def gpu_builds(self) -> list[Installed]:
        """The installed frameworks the matrix knows as CUDA builds."""
        return [i for i in self.installed if i.variant is not None and i.variant.cuda is not None]

    def extension_releases(self, name: str) -> list[ExtensionRelease]:
        """The matrix's releases of the extension ``name`` (canonical), in the matrix's order: indexed by name
        once, not searched row by row for each installed extension (issue #39)."""
        if self._extension_releases is None:
            self._extension_releases = {}
            for rel in self.matrix.extensions.releases:
                self._extension_releases.setdefault(canonical(rel.name), []).append(rel)
        return self._extension_releases.get(name, [])

    def library_choice(self, ext: Extension) -> Chosen | None:
        """What ``ext`` opens of its per-CUDA libraries (:func:`cudamatrix.diagnose.libchoice.chosen`), worked out
        once per extension for the findings that read it."""
        if id(ext) not in self._library_choices:
            self._library_choices[id(ext)] = chosen(self.matrix, self.env, ext)
        return self._library_choices[id(ext)]

    def judged_objects(self, ext: Extension) -> list[ExtensionObject]:
        """The objects of ``ext`` that can be opened here (of per-CUDA libraries, the one it loads)."""
        return judged_objects(ext, self.library_choice(ext))

    def declared(self) -> dict[str, list[Requirement]]:
        """Each installed distribution's declared requirements that apply here (parsed once)."""
        if self._declared is None:
            self._declared = {dist: applicable_requirements(self.env, texts)
                              for dist, texts in self.env.requirements.items()}
        return self._declared
