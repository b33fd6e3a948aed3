#!/usr/bin/env python3
"""The complexity gate: no function of the package ranked D or worse by radon (cyclomatic complexity above 20).

There is no allow-list: a function that grows past the limit is split into small named steps.

    python scripts/complexity.py          # exit 0 clean, 1 with the functions to fix, 2 radon is missing
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 20  # radon's rank C ends here: 21 and above is D, E or F


def over_limit(package: Path) -> dict[str, int]:
    """``path:name`` -> complexity of every function and method above :data:`LIMIT`."""
    from radon.complexity import cc_visit

    found: dict[str, int] = {}
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent).as_posix()
        # functions and methods (a class's own block is its methods' sum: not a function), and their closures
        for block in cc_visit(path.read_text(encoding="utf-8")):
            if type(block).__name__ != "Function":
                continue
            for item in [block, *block.closures]:
                if item.complexity > LIMIT:
                    name = f"{item.classname}.{item.name}" if item.classname else item.name
                    found[f"{rel}:{name}"] = item.complexity
    return found


def main() -> int:
    try:
        found = over_limit(ROOT / "cudamatrix")
    except ImportError:
        print("complexity: radon is not installed (pip install -e '.[test]')", file=sys.stderr)
        return 2
    for key in sorted(found):
        print(f"{key}: cyclomatic complexity {found[key]} (rank D or worse; split it to {LIMIT} or less)")
    if not found:
        print(f"complexity: no function above {LIMIT}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
