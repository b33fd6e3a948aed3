#!/usr/bin/env bash
# Lint and type-check the package: ruff (pyflakes, pycodestyle, import order, bugbear) and mypy, as
# configured in pyproject.toml. Exit status non-zero when either finds a problem.
set -u
cd "$(dirname "$0")/.."
status=0
ruff check cudamatrix || status=1
mypy cudamatrix || status=1
exit $status
