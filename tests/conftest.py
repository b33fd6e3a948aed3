"""Fixtures shared by the tests that build throwaway virtual environments."""
from __future__ import annotations

import json
import os
import shutil
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the test helpers (localindex, fakes) import by name

from support.localindex import make_venv  # noqa: E402

DURATIONS = Path(__file__).parent / "durations.json"  # seconds per test file, from a run of the README command


def pytest_addoption(parser) -> None:
    parser.addoption("--store-durations", action="store_true",
                     help=f"write each test file's seconds (setup, call and teardown) to {DURATIONS.name}: the "
                          "order the suite's files are handed out in")


def pytest_configure(config) -> None:
    """Ctrl-C as a terminal delivers it, even when the suite itself was started where SIGINT is ignored (a shell
    starts a background job, ``cmd &``, with SIGINT ignored, and every child inherits that): the interrupt tests
    send SIGINT to this process and to the tool's own processes and must see Python's KeyboardInterrupt, never
    a signal silently dropped. Children started from here then get the default action again (a Python handler
    does not survive exec)."""
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # pytest-xdist (3.x) hands out --dist loadfile's files sorted by their number of tests, most first, unless
    # told not to: that put the few long files (a Ray cluster, a notebook kernel, a Docker build's stages) last,
    # one worker running them alone at the end. The order below is kept instead.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


_SECONDS: Counter = Counter()  # test file -> seconds, for --store-durations


def _file(nodeid: str) -> str:
    """A test's file, as the suite's root names it ("tests/x/test_y.py")."""
    return nodeid.split("::", 1)[0]


def pytest_runtest_logreport(report) -> None:
    """Each file's seconds, summed over its tests' phases (xdist's controller receives every worker's reports)."""
    _SECONDS[_file(report.nodeid)] += report.duration


def pytest_sessionfinish(session) -> None:
    if session.config.getoption("store_durations") and not hasattr(session.config, "workerinput"):
        DURATIONS.write_text(json.dumps({name: round(value, 1) for name, value in sorted(_SECONDS.items())},
                                        indent=0) + "\n", encoding="utf-8")


def pytest_collection_modifyitems(config, items) -> None:
    """A test that builds virtual environments or installs packages (``installs``) is always ``slow`` too: left
    out of the contributors' loop, ``pytest -m "not slow"``."""
    for item in items:
        if item.get_closest_marker("installs") and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
    # The longest files first, each file's tests in their own order (a stable sort): the README runs the suite in
    # three workers, one file each at a time (--dist loadfile), and a long file taken last keeps one worker busy
    # alone at the end; longest first, the short files fill in the gaps. A file's length is what the last
    # --store-durations run measured; a file it did not see counts 5 s per installing test and 1 s per slow one.
    try:
        measured = json.loads(DURATIONS.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        measured = {}
    guess = Counter()
    for item in items:
        if item.get_closest_marker("slow"):
            guess[_file(item.nodeid)] += 5 if item.get_closest_marker("installs") else 1
    items.sort(key=lambda item: -measured.get(_file(item.nodeid), guess[_file(item.nodeid)]))


@pytest.fixture(scope="session")
def template_venv(tmp_path_factory) -> Path:
    """One `python -m venv` (with pip from ensurepip, nothing downloaded) that tests copy, not modify: one for
    the whole run, the xdist workers' too (each worker's temporary folder is in the run's own; ensurepip writes
    pip's bytecode, about 7 s of CPU a venv). The first worker builds it under a lock, the others wait."""
    import fcntl

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    path = root / "template-venv"
    with open(root / "template-venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / "template-venv.done").exists():
            shutil.rmtree(path, ignore_errors=True)  # a build that failed half-way, in a worker before this one
            make_venv(path)
            (root / "template-venv.done").touch()
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
