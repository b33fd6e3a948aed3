"""The docs are made from the code where the code holds the facts: ``docs/reference.md`` is what
``scripts/gen_reference.py`` writes from the registries today, and every finding code the package writes is in
the one table the reference lists (``cudamatrix/diagnose/codes.py``)."""
from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

from cudamatrix.diagnose import codes

ROOT = Path(__file__).resolve().parent.parent.parent


def _generator():
    spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "scripts" / "gen_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reference_is_what_the_code_says():
    gen = _generator()
    assert (ROOT / "docs" / "reference.md").read_text() == gen.reference(), \
        "docs/reference.md is stale: run python scripts/gen_reference.py"


def test_the_reference_lists_every_command_exit_code_and_finding_code():
    text = _generator().reference()
    for command in ("solve", "lock", "check", "env", "detect", "doctor", "fix", "verify", "matrix show",
                    "matrix update", "fleet gather"):
        assert f"### `cudamatrix {command}`" in text, command
    for code in range(7):
        assert f"\n| {code} | `" in text, code
    for c in codes.DOCTOR + codes.VERIFY:
        assert f"| `{c.code}` |" in text, c.code


def _string_constants(path: Path) -> set[str]:
    return {n.value for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Constant)
            and isinstance(n.value, str) and re.fullmatch(r"[A-Z][A-Z_]{3,}", n.value)}


def test_every_verify_code_the_package_writes_is_in_the_table():
    """The codes verify's modules write (a ``finding_code`` of a child's report, a runtime message's code) are
    all in ``codes.VERIFY`` or ``codes.DOCTOR``; the names of environment variables and ELF sections are not codes."""
    known = set(codes.by_code())
    not_codes = {"LD_LIBRARY_PATH", "LD_PRELOAD", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "RECORD", "SAME", "VALID"}
    written = set().union(*(_string_constants(p) for p in (ROOT / "cudamatrix" / "verify").glob("*.py")))
    assert written - not_codes <= known, sorted(written - not_codes - known)
    assert {"WRONG_RESULT", "VERIFY_TIMEOUT", "LIBRARY_MIXED"} <= written  # the scan reads the modules


DOCS = [ROOT / "README.md", ROOT / "SECURITY.md", ROOT / "CONTRIBUTING.md", ROOT / "data" / "README.md",
        *sorted((ROOT / "docs").glob("*.md"))]


def test_the_readme_is_short_and_every_link_of_the_docs_resolves():
    """The README says what the tool is, the two set-up commands and the jobs, and links the rest (under 200
    lines); every relative link of the docs names a file that exists."""
    readme = (ROOT / "README.md").read_text()
    assert readme.count("\n") < 200
    assert "pip install . && cudamatrix doctor" in readme
    assert "pip install -e '.[test]' && python -m pytest -n 3 --dist loadfile" in readme
    broken = []
    for page in DOCS:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in target and not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, broken
    assert len(DOCS) >= 12
