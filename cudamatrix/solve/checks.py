"""``check``: do given requirements (a file, or what is installed) fit the targets? No I/O."""
from __future__ import annotations

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from cudamatrix.solve import rules
from cudamatrix.errors import NoSolution
from cudamatrix.solve.lockfile import base_image, parse_requirements
from cudamatrix.matrix.data import Matrix
from cudamatrix.models import Environment
from cudamatrix.solve.indexes import PYTORCH_INDEX_PREFIX
from cudamatrix.solve.solver import parse_request, solve
from cudamatrix.solve.target import Target

FRAMEWORK_DISTS = ("torch", "torchvision", "torchaudio", "tensorflow", "jax", "jaxlib")


def _variant_from_indexes(urls: list[str], mirror: str | None = None) -> str | None:
    import re
    from urllib.parse import urlsplit

    prefixes = [PYTORCH_INDEX_PREFIX] + ([mirror.rstrip("/")] if mirror else [])
    for url in urls:
        parts = urlsplit(url)  # a #fragment or ?query is not part of the index folder's name
        bare = parts._replace(query="", fragment="").geturl().rstrip("/")
        if any(bare.startswith(p) for p in prefixes):
            last = bare.rsplit("/", 1)[-1]
            # the folder name becomes a local version label (2.3.0+cu121): only such names count
            return last if re.fullmatch(r"[a-z0-9]+(?:\.[a-z0-9]+)*", last) and last != "whl" else None
    return None


def check_requirements(matrix: Matrix, targets: list[Target], installed: Environment | None,
                       text: str | None, name: str | None, mirror: str | None = None) -> dict:
    """{"fits": bool, "checked": [...], "problems": [...], "ways_out": [...], "base_image", "nvidia_require_cuda"}.

    ``text`` is a requirements file's content; None checks the installed frameworks instead.
    """
    if text is not None:
        parsed = parse_requirements(text, name or "requirements")
        variant = _variant_from_indexes(([parsed.index_url] if parsed.index_url else []) + parsed.extra_index_urls,
                                        mirror)
        reqs: list[Requirement] = []
        nvidia: list[Requirement] = []
        for req in parsed.requirements:
            cname = canonicalize_name(req.name)
            if cname.startswith("nvidia-"):
                nvidia.append(req)
                continue
            if cname in ("torch", "torchvision", "torchaudio") and variant:
                specs = []
                for s in req.specifier:
                    version = s.version
                    if s.operator == "==" and "+" not in version and "*" not in version:
                        version = f"{version}+{variant}"
                    specs.append(f"{s.operator}{version}")
                req = Requirement(f"{req.name}{''.join('[' + ','.join(sorted(req.extras)) + ']' if req.extras else '')}"
                                  f"{','.join(specs)}")
            reqs.append(req)
        texts = [str(r) for r in reqs if canonicalize_name(r.name) in FRAMEWORK_DISTS]
    else:
        if installed is None:
            return {"fits": False, "checked": [], "problems": ["no installed environment to check"], "ways_out": []}
        nvidia = []
        texts = [f"{n}=={installed.packages[n]}" for n in FRAMEWORK_DISTS if n in installed.packages]
    result: dict = {"checked": texts, "targets": [t.describe() for t in targets], "problems": [], "ways_out": []}
    if not texts:
        result.update(fits=True, note="no framework requirement to check")
        return result
    request = parse_request(texts)
    try:
        solution = solve(targets, request, matrix, installed=None)
    except NoSolution as exc:
        result["fits"] = False
        result["problems"] = [c["message"] + (f" (blocks: {', '.join(c['machines'])})" if c.get("machines") else "")
                              for c in exc.detail["causes"]]
        result["ways_out"] = [w["message"] for w in exc.detail["ways_out"]]
        return result
    # nvidia-* pins in the file must agree with what the chosen builds declare
    wanted = {p.name: p.version for p in solution.packages if p.name.startswith("nvidia-")}
    for req in nvidia:
        cname = str(canonicalize_name(req.name))
        if cname in wanted and req.specifier and not req.specifier.contains(wanted[cname], prereleases=True):
            result["problems"].append(f"{req} disagrees with the framework's own pin {cname}=={wanted[cname]}")
        elif cname not in wanted and wanted:
            keys = {rules.library_key(n) for n in wanted}
            if rules.library_key(cname) in keys:
                result["problems"].append(f"{req} is another CUDA major of a library the framework pins "
                                          f"(both install the same files)")
    result["fits"] = not result["problems"]
    result["solution"] = solution.to_dict()
    image, require = base_image(solution, matrix)
    result["base_image"] = image
    result["nvidia_require_cuda"] = require
    return result
