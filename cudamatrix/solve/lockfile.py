"""Write a Solution down as files people use (requirements.txt, uv project configuration), and read
requirements files back for ``check``. No I/O beyond the text handed in and returned."""
from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from packaging.requirements import InvalidRequirement, Requirement

from cudamatrix.errors import UsageError
from cudamatrix.models import Solution
from cudamatrix.solve.indexes import index_layout
from cudamatrix.solve.target import Target


def _header(solution: Solution, targets: list[Target]) -> list[str]:
    lines = [f"# written by cudamatrix lock from matrix {solution.matrix_version}"]
    for t in targets[:20]:
        # a machine described by flags is named "target": "# target target: ..." said it twice
        text = t.describe()
        lines.append(f"# target {text[len('target: '):] if text.startswith('target: ') else text}")
    if len(targets) > 20:
        lines.append(f"# ... and {len(targets) - 20} more targets")
    lines.append(f"# request: {' '.join(solution.request)}")
    for fw in solution.frameworks:
        bits = f"CUDA {fw.cuda}, cuDNN {fw.cudnn or 'unknown'}" if fw.cuda else "CPU build"
        lines.append(f"# {fw.name} {fw.version} {fw.variant}: {bits}")
    return lines


def requirements_txt(solution: Solution, targets: list[Target], passthrough: list[str] = ()) -> str:
    """A pinned requirements file that `pip install -r` and `uv pip install -r` accept."""
    index_url, extra = index_layout(solution.packages, bool(passthrough))
    lines = _header(solution, targets)
    if index_url:
        lines.append(f"--index-url {index_url}")
    for url in extra:
        lines.append(f"--extra-index-url {url}")
    lines += [p.requirement() for p in solution.packages]
    lines += list(passthrough)
    return "\n".join(lines) + "\n"


def uv_project(solution: Solution, targets: list[Target], passthrough: list[str] = ()) -> str:
    """The uv project configuration: dependencies, [[tool.uv.index]] and [tool.uv.sources]."""
    lines = [f"# {line[2:]}" if line.startswith("# ") else line for line in _header(solution, targets)]
    lines.append("# merge into pyproject.toml")
    deps = []
    for p in solution.packages:
        base = p.version.split("+")[0]  # the explicit index serves the local build for this version
        extras = f"[{','.join(p.extras)}]" if p.extras else ""
        deps.append(f"{p.name}{extras}=={base}")
    deps += list(passthrough)
    lines.append("[project]")
    lines.append("dependencies = [")
    lines += [f'    "{d}",' for d in deps]
    lines.append("]")
    names: dict[str, str] = {}
    for p in solution.packages:
        if p.index_url and p.index_url not in names:
            names[p.index_url] = "pytorch-" + p.index_url.rstrip("/").rsplit("/", 1)[-1]
    for url, name in names.items():
        lines += ["", "[[tool.uv.index]]", f'name = "{name}"', f'url = "{url}"', "explicit = true"]
    if names:
        lines += ["", "[tool.uv.sources]"]
        for p in solution.packages:
            if p.index_url:
                lines.append(f'{p.name} = [{{ index = "{names[p.index_url]}" }}]')
    return "\n".join(lines) + "\n"


@dataclass
class RequirementsFile:
    requirements: list[Requirement] = field(default_factory=list)
    index_url: str | None = None
    extra_index_urls: list[str] = field(default_factory=list)


def parse_requirements(text: str, name: str) -> RequirementsFile:
    """Parse a requirements file (requirements, -i/--index-url, --extra-index-url, comments).

    Raises UsageError naming the line that does not parse.
    """
    out = RequirementsFile()
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-"):
            try:
                parts = shlex.split(line.replace("=", " ", 1) if line.startswith("--") else line)
            except ValueError:
                raise UsageError(f"{name}:{number}: cannot parse {raw.strip()!r}") from None
            opt, args = parts[0], parts[1:]
            if opt in ("-i", "--index-url") and args:
                out.index_url = args[0]
            elif opt == "--extra-index-url" and args:
                out.extra_index_urls.append(args[0])
            elif opt in ("-r", "--requirement", "-c", "--constraint", "-e", "--editable"):
                raise UsageError(f"{name}:{number}: {opt} is not supported by check; flatten the file first")
            continue
        try:
            out.requirements.append(Requirement(line))
        except InvalidRequirement as exc:
            raise UsageError(f"{name}:{number}: cannot parse requirement {line!r}: {exc}") from None
    return out




def base_image(solution: Solution, matrix) -> tuple[str | None, str | None]:
    """(an nvidia/cuda base image tag, an NVIDIA_REQUIRE_CUDA constraint) for the solution's CUDA.

    The tag is built from the newest CUDA release row of that major.minor in the matrix; wheels that bring
    their own CUDA libraries need only the ``base`` flavour (driver access), others ``runtime``.
    """
    from packaging.version import Version

    from cudamatrix.matrix.query import cuda_release

    if not solution.cuda:
        return None, None
    rel = cuda_release(matrix, solution.cuda)
    if rel is None:
        return None, f"cuda>={solution.cuda}"
    full = str(rel.version)
    if len(rel.version.release) < 3:
        full += ".0"
    v = Version(full)
    ubuntu = "24.04" if v >= Version("12.5") else ("22.04" if v >= Version("11.7") else "20.04")
    bundled = any(p.name.startswith("nvidia-") for p in solution.packages) or \
        any(fw.name == "torch" for fw in solution.frameworks)
    flavour = "base" if bundled else "runtime"
    cuda = ".".join(str(x) for x in Version(solution.cuda).release[:2])
    return f"nvidia/cuda:{full}-{flavour}-ubuntu{ubuntu}", f"cuda>={cuda}"
