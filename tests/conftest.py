"""Fixtures shared by the tests that build throwaway virtual environments."""
from __future__ import annotations

import os
import shutil
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the test helpers (localindex, fakes) import by name

from localindex import make_venv  # noqa: E402


def pytest_configure(config) -> None:
    """Ctrl-C as a terminal delivers it, even when the suite itself was started where SIGINT is ignored (a shell
    starts a background job, ``cmd &``, with SIGINT ignored, and every child inherits that): the interrupt tests
    send SIGINT to this process and to the tool's own processes and must see Python's KeyboardInterrupt, never
    a signal silently dropped. Children started from here then get the default action again (a Python handler
    does not survive exec)."""
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config, items) -> None:
    """A test that builds virtual environments or installs packages (``installs``) is always ``slow`` too: left
    out of the contributors' loop, ``pytest -m "not slow"``."""
    for item in items:
        if item.get_closest_marker("installs") and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
    # The files with the most such tests first, each file's tests in their own order (a stable sort): the README
    # runs the suite in two workers, one file each at a time (--dist loadfile), and a long file taken last keeps
    # one worker busy alone at the end; longest first, the short files fill in the gaps.
    weight = Counter((item.path, bool(item.get_closest_marker("installs"))) for item in items
                     if item.get_closest_marker("slow"))
    items.sort(key=lambda item: (-weight[item.path, True], -weight[item.path, False]))


@pytest.fixture(scope="session")
def template_venv(tmp_path_factory) -> Path:
    """One `python -m venv` (with pip from ensurepip, nothing downloaded) that tests copy, not modify."""
    path = tmp_path_factory.mktemp("tpl") / "venv"
    make_venv(path)
    return path


# the folders where the tool keeps its state (overlay, verification memory, journal, caches): every test gets
# its own, so no test reads or writes the user's real home, and no test sees what another left behind
REAL_HOME = os.environ.get("HOME")  # as the session found it (tests check it is never the one in use)


@pytest.fixture(scope="session")
def _installer_caches(tmp_path_factory) -> dict[str, str]:
    """pip's and uv's download caches for the whole session (outside the real home, shared between tests)."""
    base = tmp_path_factory.mktemp("installer-cache")
    return {"PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR") or str(base / "pip"),
            "UV_CACHE_DIR": os.environ.get("UV_CACHE_DIR") or str(base / "uv")}


@pytest.fixture(autouse=True)
def _private_home(tmp_path_factory, monkeypatch, _installer_caches) -> Iterator[Path]:
    """HOME and the XDG folders point into a fresh temporary folder for every test."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    for var, sub in (("XDG_CACHE_HOME", ".cache"), ("XDG_STATE_HOME", ".local/state"),
                     ("XDG_CONFIG_HOME", ".config"), ("XDG_DATA_HOME", ".local/share")):
        monkeypatch.setenv(var, str(home / sub))
    for var, value in _installer_caches.items():
        monkeypatch.setenv(var, value)
    mark = len(getattr(monkeypatch, "_setitem", []))
    yield home
    # removed at once, like a passing test's tmp_path (pyproject's tmp_path_retention_policy): a whole run leaves
    # thousands of these, and the run's disk use is what a small CI disk must hold
    shutil.rmtree(home, ignore_errors=True)
    # a test that deletes one of these by hand (os.environ.pop) sends whatever runs after it in this process to
    # the user's real folders; a change made through monkeypatch is undone after this check, so it is left alone
    # (monkeypatch keeps what it changed in _setitem; without that record the check is skipped)
    changed = {name for _, name, _ in monkeypatch._setitem[mark:]} if hasattr(monkeypatch, "_setitem") else None
    if changed is None:
        return
    lost = [var for var in ("HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME")
            if var not in changed and (not os.environ.get(var) or os.environ[var] == REAL_HOME or (
                REAL_HOME and os.path.realpath(os.environ[var]).startswith(os.path.realpath(REAL_HOME) + os.sep)))]
    assert not lost, f"the test left {lost} unset or in the real home: change them with monkeypatch only"
