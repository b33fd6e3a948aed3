"""A framework build the matrix does not hold, as the environment states it (``doctor`` judges it on that).

The stated facts: the build's CUDA from its local version tag (``+cu102``, ``+cpu``) or a pasted report
("CUDA used to build PyTorch: 10.2"); everything else stays empty, hence unknown to the rules. No I/O.
"""
from __future__ import annotations

from packaging.version import InvalidVersion, Version

from cudamatrix.matrix.data import FrameworkRelease, Variant
from cudamatrix.matrix.query import is_version
from cudamatrix.models import Environment, Framework


def stated_build(env: Environment, inst) -> tuple[FrameworkRelease | None, Variant | None, list[str]]:
    """A framework release the matrix lacks, as the environment states it: the build's CUDA from its local
    version tag (``+cu102``, ``+cpu``) or a report ("CUDA used to build PyTorch: 10.2"). Returns a release
    and variant holding only the stated facts (everything else empty, hence unknown to the rules), and the
    list of the facts that are unknown. ``(None, None, [...])`` when even the build's CUDA is not stated."""
    fw = next((f for f in env.frameworks if f.name == inst.name and f.version == inst.version), None)
    local = inst.version.partition("+")[2]
    cuda = _stated_cuda(fw, local)
    cpu = local == "cpu" or (fw is not None and fw.variant == "cpu")
    unknown = ["the Python versions it is built for"]
    if cuda is None and not cpu:
        return None, None, ["the CUDA version it was built with"] + unknown
    try:
        version = Version(inst.version.split("+")[0])
    except InvalidVersion:
        return None, None, ["its version"]
    source = f"stated by the environment ({fw.source if fw is not None and fw.source else 'installed version'})"
    # a cuDNN stated in words ("unknown") is no version: it stays unknown, and is listed as such
    cudnn = Version(fw.cudnn) if fw is not None and fw.cudnn and is_version(fw.cudnn) else None
    if cuda is not None:
        unknown[:0] = ["the GPU architectures it was compiled for"] + ([] if cudnn else ["its cuDNN version"])
    variant = Variant(name=inst.variant_name or (f"cu{cuda.major}{cuda.minor}" if cuda else "cpu"), source=source,
                      cuda=cuda, cudnn=cudnn)
    release = FrameworkRelease(name=inst.name, version=version, python=[], variants=[variant], source=source)
    return release, variant, unknown


def _stated_cuda(fw: Framework | None, local: str) -> Version | None:
    """The CUDA a build states: the framework's own report, else its ``+cuXYZ`` tag (the last digit the minor)."""
    try:
        if fw is not None and fw.cuda:
            return Version(fw.cuda)
        if local.startswith("cu") and local[2:].isdigit() and len(local) >= 4:
            return Version(f"{local[2:-1]}.{local[-1]}")
    except InvalidVersion:
        return None
    return None
