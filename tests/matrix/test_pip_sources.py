"""Which indexes the user's pip reads (matrix/index.pip_sources, pip_default_index), asked of a stand-in interpreter
whose pip answers as pip's own `config list` and `install --help` print and writes down when each ran."""
from __future__ import annotations

import stat

import pytest

from cudamatrix.matrix.index import pip_default_index, pip_sources

HELP = ("  -i, --index-url <url>       Base URL of the Python Package Index (default\n"
        "                              https://index.invalid/simple). This should point to a\n")


def stand_in(tmp_path, config: str):
    """An interpreter whose `-m pip config list` prints ``config`` and `-m pip install --help` the help above, each
    after half a second, logging its start and end."""
    log = tmp_path / "log"
    (tmp_path / "config.txt").write_text(config)
    (tmp_path / "help.txt").write_text(HELP)
    py = tmp_path / "python"
    py.write_text(f"""#!/bin/sh
case "$3 $4" in
  "config list") what=config; out={tmp_path}/config.txt ;;
  "install --help") what=help; out={tmp_path}/help.txt ;;
  *) exit 2 ;;
esac
echo "$what start" >> {log}
sleep 0.5
cat "$out"
echo "$what end" >> {log}
""")
    py.chmod(py.stat().st_mode | stat.S_IXUSR)
    return str(py), log


@pytest.fixture(autouse=True)
def no_pip_variables(monkeypatch):
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"):
        monkeypatch.delenv(var, raising=False)


def test_pips_configuration_and_its_default_index_are_asked_at_once(tmp_path):
    py, log = stand_in(tmp_path, "global.extra-index-url='file:///srv/a/simple file:///srv/b/simple'\n"
                                 "global.find-links='/srv/wheels'\n")
    assert pip_sources(py) == ("https://index.invalid/simple", ["file:///srv/a/simple", "file:///srv/b/simple"],
                               ["/srv/wheels"])
    events = log.read_text().split("\n")
    # both pip runs started before either ended: side by side, not one after the other
    assert sorted(events[:2]) == ["config start", "help start"] and set(events[2:4]) == {"config end", "help end"}
    log.unlink()
    assert pip_default_index(py) == "https://index.invalid/simple"
    assert sorted(log.read_text().split("\n")[:2]) == ["config start", "help start"]


def test_a_configured_index_wins_over_pips_default(tmp_path):
    py, _ = stand_in(tmp_path, "global.index-url='https://mirror.invalid/simple'\n")
    assert pip_sources(py) == ("https://mirror.invalid/simple", [], [])
    assert pip_default_index(py) == "https://mirror.invalid/simple"


def test_pip_index_url_needs_no_help_run(tmp_path, monkeypatch):
    py, log = stand_in(tmp_path, "")
    monkeypatch.setenv("PIP_INDEX_URL", "https://env.invalid/simple")
    assert pip_sources(py) == ("https://env.invalid/simple", [], [])
    assert log.read_text().split() == ["config", "start", "config", "end"]
