"""``lock --format pylock``: the solved pins resolved to files by the installer, rendered as pylock.toml."""
from __future__ import annotations

import sys


def pylock_text(solution, targets, passthrough: list[str]) -> str:
    """The pylock.toml text for the solved set on the first target (its platform and Python; this
    interpreter's Python when the target leaves it open)."""
    from cudamatrix.install.locking import locked_report
    from cudamatrix.solve.indexes import index_args
    from cudamatrix.solve.pylock import from_report, pylock_toml

    target = targets[0]
    python = target.python or f"{sys.version_info[0]}.{sys.version_info[1]}"
    args = index_args(solution.index_url, solution.extra_index_urls)
    report = locked_report([p.requirement() for p in solution.packages] + passthrough, args,
                           platform=target.platform, python=python)
    indexes = [a for a in args if "://" in a]
    import os

    indexes += [u for v in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL") for u in os.environ.get(v, "").split()]
    header = [f"cudamatrix lock for {target.describe()}",
              f"matrix {solution.matrix_version}; "
              + ", ".join(f"{f.name} {f.version} {f.variant}" for f in solution.frameworks),
              "install: uv pip install -r pylock.toml (or: uv pip sync pylock.toml)"]
    if target.python is None:
        header.append(f"Python {python} assumed (the target leaves it open; pass --python to choose)")
    return pylock_toml(from_report(report, indexes), platform=target.platform, python=python, header=header)
