"""Fixtures shared by the tests that build throwaway virtual environments."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the test helpers (localindex, fakes) import by name

from localindex import make_venv  # noqa: E402


@pytest.fixture(scope="session")
def template_venv(tmp_path_factory) -> Path:
    """One `python -m venv` (with pip from ensurepip, nothing downloaded) that tests copy, not modify."""
    path = tmp_path_factory.mktemp("tpl") / "venv"
    make_venv(path)
    return path
