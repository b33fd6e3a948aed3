#!/usr/bin/env bash
# Lint and type-check the package: ruff (pyflakes, pycodestyle, import order, bugbear) over the package, its tests
# and scripts, and mypy, as configured in pyproject.toml, and the complexity gate (radon: no function ranked D or
# worse).
# Exit status non-zero when any finds a problem.
set -u
cd "$(dirname "$0")/.."
status=0
ruff check cudamatrix tests scripts || status=1
mypy cudamatrix || status=1
python scripts/complexity.py || status=1
exit $status
