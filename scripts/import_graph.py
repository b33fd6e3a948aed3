#!/usr/bin/env python3
"""The package's import graph in words: each room (a sub-package, or a module at the top), its lines, the rooms
it imports and how many of its modules' imports point there; then the module-level import circles (every import
counted, inside functions and under TYPE_CHECKING too) and the imports of the package's own modules left inside
functions. For a restructuring's before and after (issue #41):

    python scripts/import_graph.py                 # this checkout
    python scripts/import_graph.py --root OTHER    # another checkout (a git worktree of an older commit)
"""
from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter, defaultdict
from pathlib import Path


def module_of(path: Path, package: Path) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(node: ast.AST, me: str, is_package: bool, modules: set[str]) -> list[str]:
    """The modules an import statement names, relative ones resolved: ``from X import y`` names the module X.y
    where there is one, else X (a name X defines)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    assert isinstance(node, ast.ImportFrom)
    base = node.module or ""
    if node.level:
        parts = me.split(".")
        keep = len(parts) - node.level + (1 if is_package else 0)
        base = ".".join(parts[:keep] + ([base] if base else []))
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]


def graph(package: Path) -> tuple[dict[str, set[str]], int, dict[str, int]]:
    modules = {module_of(p, package): p for p in sorted(package.rglob("*.py"))}
    edges: dict[str, set[str]] = defaultdict(set)
    inside = 0
    lines: dict[str, int] = {}
    for name, path in modules.items():
        text = path.read_text()
        lines[name] = text.count("\n")
        tree = ast.parse(text)
        spans = [(f.body[0].lineno, f.end_lineno or f.lineno) for f in ast.walk(tree)
                 if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            targets = {t for t in imported(node, name, path.name == "__init__.py", set(modules))
                       if t in modules and t != name}
            edges[name] |= targets
            if targets and any(a <= node.lineno <= b for a, b in spans):
                inside += 1
    return edges, inside, lines


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected parts of more than one module (Tarjan, recursive: the graph is small)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []
    sys.setrecursionlimit(10_000)

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def room(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else parts[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    args = parser.parse_args()
    package = args.root / "cudamatrix"
    if not package.is_dir():
        print(f"no cudamatrix package under {args.root}", file=sys.stderr)
        return 2
    edges, inside, lines = graph(package)
    rooms: dict[str, Counter] = defaultdict(Counter)
    size: Counter = Counter()
    for m, n in lines.items():
        size[room(m)] += n
    for m, targets in edges.items():
        for t in targets:
            if room(t) != room(m):
                rooms[room(m)][room(t)] += 1
    arrows = sum(len(v) for v in rooms.values())
    found = circles(edges)
    print(f"{len(lines)} modules in {len(size)} rooms; {arrows} arrows between rooms; "
          f"{sum(len(v) for v in edges.values())} module imports; {len(found)} module circles; "
          f"{inside} imports of the package's own modules inside functions")
    for r in sorted(size, key=lambda r: (-size[r], r)):
        to = ", ".join(f"{t.removeprefix('cudamatrix.')} {n}" for t, n in sorted(rooms[r].items()))
        print(f"  {r.removeprefix('cudamatrix.') or r:14s} {size[r]:6d} lines -> {to or '-'}")
    for c in found:
        print("  circle: " + " -> ".join(m.removeprefix("cudamatrix.") for m in c))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
