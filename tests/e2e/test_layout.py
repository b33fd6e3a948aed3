"""The package layout is the pipeline: every import points from a higher stage to a lower one (or stays
within its stage), and the library never imports the command line."""
from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parent.resolve().parent.parent / "cudamatrix"

# lowest first; a module may import only from its own stage or a lower one
STAGES = [
    ("base", {"cudamatrix._callable", "cudamatrix.errors", "cudamatrix.models", "cudamatrix.names", "cudamatrix.net",
              "cudamatrix.proc", "cudamatrix.safe", "cudamatrix.schema"}),
    ("matrix", {"cudamatrix.matrix"}),
    ("ldso", {"cudamatrix.ldso"}),  # the ld.so model: ELF, the ld.so cache, the search, recipes, openers
    ("detect", {"cudamatrix.detect"}),
    ("pastes", {"cudamatrix.pastes"}),  # pasted tool output read into an Environment
    ("solve", {"cudamatrix.solve"}),
    ("diagnose", {"cudamatrix.diagnose"}),
    ("install", {"cudamatrix.install"}),
    ("lock", {"cudamatrix.lock"}),  # the lock files: resolution through the installer, closure, writers
    ("fleet", {"cudamatrix.fleet"}),  # many machines: gathers environments, answers per node class
    ("verify", {"cudamatrix.verify"}),
    ("render", {"cudamatrix.render"}),
    ("fix", {"cudamatrix.fix"}),
    ("api", {"cudamatrix"}),  # the package itself: the public API, lazily re-exporting the stages
    ("cli", {"cudamatrix.cli", "cudamatrix.__main__"}),
]


def stage_of(module: str) -> int:
    best = -1, ""
    for rank, (_, prefixes) in enumerate(STAGES):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best[1]):
                best = rank, prefix
    if best[0] < 0:
        raise AssertionError(f"{module} belongs to no stage: add it to STAGES")
    return best[0]


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _from_target(node: ast.ImportFrom, path: Path) -> str:
    """The module a ``from X import ...`` names, relative imports resolved against ``path``'s package."""
    if not node.level:
        return node.module or ""
    me = module_name(path)
    base = (me if path.name == "__init__.py" else me.rpartition(".")[0]).split(".")
    base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom):
            target = _from_target(node, path)
            if target.startswith("cudamatrix"):
                names = [target + "." + a.name for a in node.names] if not node.module or target == "cudamatrix" \
                    else [target]
                found += [(node.lineno, n) for n in names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("cudamatrix")]
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))


@functools.cache  # several tests walk every module: each is parsed once per run
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


def test_the_layout_is_grouped_by_stage():
    root_modules = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(root_modules) <= 10, root_modules


@pytest.mark.slow
@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down(path: Path):
    me = module_name(path)
    mine = stage_of(me)
    upward = []
    for line, target in imports_of(path):
        if target in {"cudamatrix", "cudamatrix.__version__"}:
            continue
        if stage_of(target) > mine:
            upward.append(f"line {line}: {me} ({STAGES[mine][0]}) imports {target} ({STAGES[stage_of(target)][0]})")
    assert not upward, "\n".join(upward)



def test_every_test_runs_in_a_private_home():
    """conftest's autouse fixture: the tool's state folders are never the user's real ones during a test."""
    import os

    from conftest import REAL_HOME

    from cudamatrix.install.journal import state_root
    from cudamatrix.matrix.overlay import cache_dir

    home = Path(os.environ["HOME"])
    assert REAL_HOME is None or home != Path(REAL_HOME)
    assert Path(os.path.expanduser("~")) == home
    for var in ("XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME"):
        assert Path(os.environ[var]).is_relative_to(home), var
    assert cache_dir().is_relative_to(home)
    assert state_root().is_relative_to(home)


@pytest.mark.slow
def test_the_complexity_gate_finds_a_function_ranked_d_and_holds_for_the_package(tmp_path):
    """scripts/complexity.py (run by scripts/lint.sh): a function above radon's rank C is found, by path and name;
    the package has none."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("complexity", PACKAGE.parent / "scripts" / "complexity.py")
    gate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gate)
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    branches = "\n".join(f"    if x == {i}:\n        return {i}" for i in range(20))
    (pkg / "m.py").write_text(f"def wide(x):\n{branches}\n    return -1\n\n\nclass K:\n    def narrow(self):\n"
                              f"        return 0\n")
    assert gate.over_limit(pkg) == {"pkg/m.py:wide": 21}
    assert gate.over_limit(PACKAGE) == {}


def _module_of(name: str) -> str | None:
    """The package's module a dotted import names: itself when it is a module or package, else its parent (``from
    cudamatrix.ldso.elf import Dynamic`` names cudamatrix.ldso.elf)."""
    while name:
        rel = Path(*name.split("."))
        if (PACKAGE.parent / rel).with_suffix(".py").exists() or (PACKAGE.parent / rel / "__init__.py").exists():
            return name
        name = name.rpartition(".")[0]
    return None


def _imported_modules(path: Path) -> set[str]:
    """The package's modules ``path`` imports, at the top or inside a function, under TYPE_CHECKING too: ``from
    cudamatrix.ldso import elf`` imports cudamatrix.ldso.elf, ``from cudamatrix.detect import detect`` the
    package cudamatrix.detect; ``from cudamatrix import __version__`` imports the API itself (the stages read
    models.TOOL_VERSION instead)."""
    found: set[str] = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom):
            target = _from_target(node, path)
            if not target.startswith("cudamatrix"):
                continue
            for alias in node.names:
                found.add(_module_of(f"{target}.{alias.name}") or target)
        elif isinstance(node, ast.Import):
            found |= {_module_of(a.name) or a.name for a in node.names if a.name.startswith("cudamatrix")}
    found.discard(module_name(path))
    return found


@functools.cache  # three tests read it; the package does not change during a run
def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (:func:`_imported_modules`)."""
    return {module_name(path): _imported_modules(path) for path in MODULES}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                part = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    part.append(top)
                    if top == node:
                        break
                if len(part) > 1:
                    out.append(sorted(part))
    return out


def test_the_circle_finder_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_inside_the_package():
    """No two modules import each other, directly or through others, at the top or inside a function: a circle
    inside one stage is one too (the stage-order test above cannot see it). A package's ``__init__`` that hands
    on its submodules' names is an import of those submodules."""
    found = circles(import_graph())
    assert not found, "\n".join(" -> ".join(c) for c in found)


def test_no_command_module_imports_another():
    """A command module (``cli/*_cmd.py``) renders what the library and the shared CLI modules (``cli/common.py``,
    ``cli/answers.py``, ``cli/fleetviews.py``, ``cli/targets.py``) answer; it imports no other command module. Only
    the typer declarations (``cli/commands.py``) and the typer-free parser (``cli/fast.py``) name them all."""
    commands = {module_name(p) for p in (PACKAGE / "cli").glob("*_cmd.py")}
    found = [f"{me} imports {target}" for me, targets in import_graph().items()
             if me in commands or me.endswith("fleetviews") or me.endswith("answers")
             for target in targets if target in commands]
    assert not found, found


ROOMS = {  # one idea, one package: the modules that belong to it (issue #41)
    "ldso": ("elf", "elfcache", "ldcache", "linkmap", "libpaths", "recipes", "openers"),
    "lock": ("lockfile", "pylock", "toml", "closure", "resolve"),
    "pastes": ("reports",),
}


def test_each_idea_lives_in_its_room():
    """The ld.so model, the lock feature and the paste readers each live in one package: a module of theirs found
    elsewhere in the package (or a pastes folder inside detect) is a room holding two ideas again."""
    stray = [str(p.relative_to(PACKAGE)) for room, names in ROOMS.items() for p in PACKAGE.rglob("*.py")
             if p.stem in names and p.parent != PACKAGE / room]
    assert not stray, stray
    assert not (PACKAGE / "detect" / "pastes").exists()


@functools.cache
def _own_imports_in_functions() -> list[tuple[Path, int]]:
    """(path, line) of each import of the package's own modules inside a function body (one walk per module: an
    import lies in a function when its line lies within the function's lines)."""
    found = []
    for path in MODULES:
        functions, imports = [], []
        for node in ast.walk(_tree(path)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append((node.body[0].lineno, node.end_lineno or node.lineno))
            elif isinstance(node, ast.ImportFrom) and _from_target(node, path).startswith("cudamatrix") \
                    or isinstance(node, ast.Import) and any(a.name.startswith("cudamatrix") for a in node.names):
                imports.append(node.lineno)
        found += [(path, line) for line in imports if any(a <= line <= b for a, b in functions)]
    return sorted(set(found))


def test_few_imports_of_the_package_inside_functions():
    """Issue #41's bound: fewer than 40 imports of the package's own modules are left inside functions (48 before
    the command bodies were split and the fleet views imported at their top; each left says why, test below)."""
    found = _own_imports_in_functions()
    assert len(found) < 40, f"{len(found)}: {found}"


def test_an_import_of_the_package_inside_a_function_says_why():
    """The package's own modules are imported at the top of a module; one left inside a function (its laziness
    measured as worth it, a name the tests replace, a child script) has a ``# lazy:`` line above it saying why."""
    silent = [f"{path.relative_to(PACKAGE)}:{line}" for path, line in _own_imports_in_functions()
              if not path.read_text().splitlines()[line - 2].strip().startswith("# lazy:")]
    assert not silent, silent
