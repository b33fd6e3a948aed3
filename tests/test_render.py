"""Output for people (cudamatrix/render.py): never hard-wrapped into a file or a pipe, tables that fit the
width at a terminal (or COLUMNS) by leaving out and shortening columns, never by splitting a word. The CLI captures
run `detect --env` on a real H200 machine's saved environment (tests/data/gpu_h200/detect.json), whose library
paths run to 80 characters."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.fakes import run_cli

from cudamatrix.render import fit_columns, output_width, shorten_path

ROOT = Path(__file__).resolve().parents[1]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture(scope="module")
def h200(tmp_path_factory) -> tuple[Path, dict]:
    env = json.loads((ROOT / "tests/data/gpu_h200/detect.json").read_text())["data"]["environment"]
    path = tmp_path_factory.mktemp("h200") / "h200.json"
    path.write_text(json.dumps(env))
    return path, env


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "FORCE_COLOR", "TERM")}
    env.update({"PYTHONPATH": str(ROOT)}, **extra)
    return env


def _detect(path: Path, **extra: str) -> str:
    done = run_cli(["detect", "--env", str(path)], env=_env(**extra), text=True, cwd=ROOT)  # in this process
    assert done.returncode == 0, done.stderr
    return done.stdout


def _in_a_pty(argv: list[str], columns: int) -> str:
    """What ``argv`` writes to a terminal of ``columns`` columns (a real pseudo-terminal; colours stripped)."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=ROOT, env=_env(TERM="xterm"),
                            close_fds=True)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert proc.wait(timeout=120) == 0
    return ANSI.sub("", out.decode(errors="replace")).replace("\r\n", "\n")


def _table_rows(text: str, title: str) -> list[list[str]]:
    """The body rows of the table under ``title``: cells split on the vertical rule."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == title)
    rows = []
    for line in lines[start + 4:]:
        if not line.startswith("│"):
            break
        rows.append([c.strip() for c in line.strip("│").split("│")])
    return rows


@pytest.mark.slow
def test_piped_output_is_never_wrapped(h200):
    path, env = h200
    out = _detect(path)
    lines = out.splitlines()
    for lib in env["libraries"]:  # every path whole, on the row of its library
        assert any(lib["path"] in line and lib["soname"] in line for line in lines), lib["path"]
    for note in env["notes"]:  # a long note is one line, whatever its length
        assert any(line.endswith(note["message"]) for line in lines)
    assert len(_table_rows(out, "CUDA libraries")) == len(env["libraries"])
    assert "columns:" not in out  # nothing left out


@pytest.mark.slow
@pytest.mark.parametrize("how", ["COLUMNS=80", "pty"])
def test_tables_fit_80_columns_without_splitting_words(h200, how):
    path, env = h200
    out = _detect(path, COLUMNS="80") if how == "COLUMNS=80" else \
        _in_a_pty([sys.executable, "-m", "cudamatrix", "detect", "--env", str(path)], 80)
    rows = _table_rows(out, "CUDA libraries")
    assert len(rows) == len(env["libraries"])  # one row per library: no cell went on to a second line
    table = out[out.index("CUDA libraries"):out.index("toolkits")]
    assert max(len(line) for line in table.splitlines()) <= 80
    for row, lib in zip(rows, env["libraries"], strict=True):
        soname, version, loader, shown = row
        assert (soname, version) == (lib["soname"], lib["version"])
        assert shown == lib["path"] or (shown.startswith("…") and lib["path"].endswith(shown[1:]))
        assert shown.endswith(lib["soname"])  # the file name survives the shortening
    assert "(at 80 columns: left out name, origin; path shortened; --json has every field)" in out
    gpus = _table_rows(out, "GPUs")
    assert gpus[0][:3] == ["0", "NVIDIA H200", "9.0"]


def test_fit_columns_drops_then_shortens():
    columns = ["name", "soname", "path"]
    rows = [["cudnn", "libcudnn.so.9", "/opt/x/site-packages/nvidia/cudnn/lib/libcudnn.so.9"]]
    natural = 5 + 13 + 51 + 3 * 3 + 1
    assert fit_columns(columns, rows, natural, ("name",), ("path",)) == ([0, 1, 2], {})
    assert fit_columns(columns, rows, natural - 1, ("name",), ("path",)) == ([1, 2], {})
    keep, limits = fit_columns(columns, rows, 50, ("name",), ("path",))
    assert keep == [1, 2] and limits == {2: 50 - (13 + 3 * 2 + 1)}
    short = shorten_path(rows[0][2], 30)
    assert len(short) <= 30 and short.startswith("…/") and short.endswith("/lib/libcudnn.so.9")
    assert shorten_path("short", 30) == "short"


def test_output_width_is_unbounded_only_off_a_terminal(monkeypatch, tmp_path):
    monkeypatch.delenv("COLUMNS", raising=False)
    with open(tmp_path / "f", "w") as f:
        assert output_width(f) and output_width(f) > 10_000
        monkeypatch.setenv("COLUMNS", "80")
        assert output_width(f) is None  # rich reads COLUMNS
