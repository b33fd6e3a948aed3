"""Resolve a solved set to files: which wheel (URL, sha256) each package and each of its dependencies comes
from, for a target platform and Python, asked of the real index by pip (``pip install --dry-run
--ignore-installed --report``, pip's installation report). Feeds :mod:`cudamatrix.solve.pylock`."""
from __future__ import annotations

import sys
import tempfile

from cudamatrix import proc
from cudamatrix.errors import UsageError

RESOLVE_TIMEOUT_S = 900.0

# platform tags pip is told to accept per target platform (manylinux per PEP 600, newest glibc first)
_PLATFORM_TAGS = {
    "linux_x86_64": [f"manylinux_2_{n}_x86_64" for n in (39, 35, 34, 31, 28, 27, 17)] +
                    ["manylinux2014_x86_64", "linux_x86_64"],
    "linux_aarch64": [f"manylinux_2_{n}_aarch64" for n in (39, 35, 34, 31, 28, 27, 17)] +
                     ["manylinux2014_aarch64", "linux_aarch64"],
    "win_amd64": ["win_amd64"],
}


def locked_report(requirements: list[str], index_args: list[str], *, platform: str, python: str,
                  environ: dict[str, str] | None = None) -> dict:
    """pip's installation report for ``requirements`` on ``platform`` / Python ``python`` (wheels only).
    Raises UsageError with the installer's root cause when pip cannot resolve them (no index, no file)."""
    from cudamatrix.install.explain import explain

    tags = _PLATFORM_TAGS.get(platform)
    if tags is None:
        raise UsageError(f"cannot lock for platform {platform!r}", hint="linux_x86_64 | linux_aarch64 | win_amd64")
    with tempfile.TemporaryDirectory(prefix="cudamatrix-lock-") as target:
        argv = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--report", "-",
                "--only-binary=:all:", "--python-version", python, "--target", target]
        for tag in tags:
            argv += ["--platform", tag]
        r = proc.run(argv + index_args + requirements, timeout=RESOLVE_TIMEOUT_S, env=environ)
    if not r.ok:
        cause = explain(f"{r.error or ''}\n{r.stderr}\n{r.stdout}")
        raise UsageError("cannot lock the solved set to files: " + (f"{cause.kind}: {cause.line}" if cause else
                                                                    (r.error or r.stderr.strip()[-300:])),
                         hint=(cause.way_out if cause else "check the index") + "; a pylock.toml names each file "
                              "and its sha256, so the index must be reachable")
    from cudamatrix.safe.files import parse_json

    try:
        return parse_json(r.stdout)
    except ValueError:
        raise UsageError("pip printed no installation report", hint="pip >= 22.2 is needed for --report") from None
