"""Which indexes the user's pip reads (matrix/index.pip_sources, pip_default_index), asked of this interpreter's real
pip through a wrapper that writes down when each of its runs started and ended, with a pip configuration of the
test's own (no other configuration file is read)."""
from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from cudamatrix.matrix.index import parse_pip_help_default, pip_default_index, pip_sources


@pytest.fixture
def pip(tmp_path, monkeypatch):
    """(the wrapper interpreter, its log, the pip.conf it reads): each pip run is logged as "config start" ...
    "install end" around the real one."""
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"):
        monkeypatch.delenv(var, raising=False)
    conf = tmp_path / "pip.conf"
    conf.write_text("")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    for var in ("XDG_CONFIG_DIRS", "XDG_CONFIG_HOME", "HOME"):  # the user's and the machine's pip.conf: not read
        monkeypatch.setenv(var, str(tmp_path / "nowhere"))
    log = tmp_path / "log"
    py = tmp_path / "python"
    py.write_text(f'#!/bin/sh\necho "$3 start" >> {log}\n"{sys.executable}" "$@"\nrc=$?\necho "$3 end" >> {log}\n'
                  f"exit $rc\n")
    py.chmod(py.stat().st_mode | stat.S_IXUSR)
    return str(py), log, conf


def pips_own_default() -> str:
    text = subprocess.run([sys.executable, "-m", "pip", "install", "--help"], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "200"}).stdout
    default = parse_pip_help_default(text)
    assert default and default.endswith("/simple")
    return default


def test_pips_configuration_and_its_default_index_are_asked_at_once(pip):
    py, log, conf = pip
    conf.write_text("[global]\nextra-index-url = file:///srv/a/simple file:///srv/b/simple\nfind-links = /srv/wheels\n")
    index, extra, links = pip_sources(py)
    assert index == pips_own_default()
    assert extra == ["file:///srv/a/simple", "file:///srv/b/simple"] and links == ["/srv/wheels"]
    events = log.read_text().split("\n")
    # both pip runs started before either ended: side by side, not one after the other
    assert sorted(events[:2]) == ["config start", "install start"], events
    assert set(events[2:4]) == {"config end", "install end"}, events
    log.unlink()
    assert pip_default_index(py) == index
    assert sorted(log.read_text().split("\n")[:2]) == ["config start", "install start"]


def test_a_configured_index_wins_over_pips_default(pip):
    py, _, conf = pip
    conf.write_text("[global]\nindex-url = https://mirror.invalid/simple\n")
    assert pip_sources(py) == ("https://mirror.invalid/simple", [], [])
    assert pip_default_index(py) == "https://mirror.invalid/simple"


def test_pip_index_url_needs_no_help_run(pip, monkeypatch):
    py, log, _ = pip
    monkeypatch.setenv("PIP_INDEX_URL", "https://env.invalid/simple")
    assert pip_sources(py) == ("https://env.invalid/simple", [], [])
    assert log.read_text().split() == ["config", "start", "config", "end"]
