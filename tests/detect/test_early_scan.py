"""Another interpreter's probe lists the possible extensions first, on a line of its own, and detect reads their
files while the probe collects the rest (issue #39); the scan is used only when the full answer names the same
folders and candidates."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from cudamatrix.detect import _same_scan, detect, extensions, python_env
from cudamatrix.detect.python_env import Candidate


def _dist(site: Path, folder: str, name: str, version: str) -> None:
    meta = site / folder
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n")
    (meta / "WHEEL").write_text("Wheel-Version: 1.0\nRoot-Is-Purelib: false\n")
    (meta / "RECORD").write_text("")


def _facts(candidates: list[Candidate]) -> list[tuple[str, str, str]]:
    return [(c.name, c.version, c.meta) for c in candidates]


def test_the_early_answer_names_what_the_full_answer_names_before_the_probe_ends(tmp_path, monkeypatch):
    site = tmp_path / "site-packages"
    _dist(site, "ext_a-1.0.dist-info", "ext-a", "1.0")
    _dist(site, "torch-2.6.0.dist-info", "torch", "2.6.0")  # a framework: no candidate
    _dist(site, "nvidia_cudnn_cu12-9.1.0.70.dist-info", "nvidia-cudnn-cu12", "9.1.0.70")
    _dist(site, "~xt_b-2.0.dist-info", "ext-b", "2.0")  # pip's stash of a half-done uninstall
    monkeypatch.setenv("PYTHONPATH", str(site))
    seen: list[tuple[list[str], list[Candidate], bool]] = []
    done = threading.Event()

    def early(folders: list[str], candidates: list[Candidate]) -> None:
        seen.append((folders, candidates, done.is_set()))

    side, error = python_env.probe(sys.executable, 30.0, early=early)
    done.set()
    assert error is None and len(seen) == 1
    folders, candidates, after = seen[0]
    assert not after  # handed on while the probe still ran
    assert folders == side.python.site_packages and str(site) in folders
    assert _facts(candidates) == _facts(side.candidates)
    assert ("ext-a", "1.0", str(site / "ext_a-1.0.dist-info")) in _facts(candidates)
    assert not any(c.name in ("torch", "nvidia-cudnn-cu12", "ext-b") for c in candidates)


def test_an_early_line_out_of_shape_is_ignored_and_only_the_first_is_taken():
    got: list[tuple[list[str], list[Candidate]]] = []
    on_line = python_env._early_line(lambda folders, candidates: got.append((folders, candidates)))
    on_line("Traceback (most recent call last):")  # stderr shares the reader
    on_line('{"full": 1}')
    assert got == []
    on_line('{"early": {"site_packages": "/sp", "stack": []}}')  # taken as the one early line, out of shape
    on_line('{"early": {"site_packages": ["/sp"], "stack": []}}')
    assert got == []
    on_line = python_env._early_line(lambda folders, candidates: got.append((folders, candidates)))
    stack = [{"name": "ext-a", "version": "1.0", "location": "/sp", "meta": "ext_a-1.0.dist-info"},
             {"name": "evil", "version": "1", "location": "/sp", "meta": "../../etc/x.dist-info"}, 5, "x"]
    on_line(json.dumps({"early": {"site_packages": ["/sp"], "stack": stack}}))
    on_line(json.dumps({"early": {"site_packages": ["/other"], "stack": []}}))
    assert [(f, _facts(c)) for f, c in got] == [(["/sp"], [("ext-a", "1.0", "/sp/ext_a-1.0.dist-info")])]


def test_the_early_scan_is_used_only_for_the_same_folders_and_candidates():
    scan = object()
    cands = [Candidate("ext-a", "1.0", "/sp/ext_a-1.0.dist-info")]
    early = [(["/sp"], cands, scan)]
    assert _same_scan(early, ["/sp"], [Candidate("ext-a", "1.0", "/sp/ext_a-1.0.dist-info")]) is scan
    assert _same_scan(early, ["/sp"], [Candidate("ext-a", "1.0.post1", "/sp/ext_a-1.0.dist-info")]) is None
    assert _same_scan(early, ["/sp", "/more"], cands) is None
    assert _same_scan(early, ["/sp"], []) is None
    assert _same_scan([], ["/sp"], cands) is None


def _venv(tmp_path: Path, system_site: bool = False) -> tuple[Path, Path]:
    """A venv without pip (its python, its site-packages) holding one possible extension."""
    where = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", *(["--system-site-packages"] if system_site else []),
                    str(where)], check=True, timeout=120)
    site = Path(subprocess.run([str(where / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()"
                                "['purelib'])"], capture_output=True, text=True, check=True).stdout.strip())
    _dist(site, "ext_a-1.0.dist-info", "ext-a", "1.0")
    return where / "bin" / "python", site


def test_a_venvs_guess_is_what_its_probe_answers_and_others_are_not_guessed(tmp_path, monkeypatch):
    python, site = _venv(tmp_path)
    extra = tmp_path / "on-the-path"
    _dist(extra, "ext_b-2.0.dist-info", "ext-b", "2.0")
    monkeypatch.setenv("PYTHONPATH", str(extra))
    guess = python_env.early_guess(str(python), {"PYTHONPATH": str(extra)})
    side, error = python_env.probe(str(python), 30.0)
    assert error is None and guess is not None
    assert guess[0] == side.python.site_packages == [str(site)]
    assert _facts(guess[1]) == _facts(side.candidates) == [("ext-b", "2.0", str(extra / "ext_b-2.0.dist-info")),
                                                           ("ext-a", "1.0", str(site / "ext_a-1.0.dist-info"))]
    assert python_env.early_guess(str(tmp_path / "absent" / "bin" / "python"), {}) is None  # no pyvenv.cfg
    system = tmp_path / "system"
    system.mkdir()
    python2, _site2 = _venv(system, system_site=True)  # the system's site-packages too: not guessed
    assert python_env.early_guess(str(python2), {}) is None


def test_this_interpreters_guess_is_its_probes_answer():
    guess = python_env.early_guess(None, {})
    side, error = python_env.probe(None, 30.0)
    assert error is None and guess is not None
    assert guess[0] == side.python.site_packages and _facts(guess[1]) == _facts(side.candidates)


def test_detect_scans_once_when_the_guess_and_the_probes_first_line_agree(tmp_path, monkeypatch):
    python, site = _venv(tmp_path)
    calls: list[list[tuple[str, str, str]]] = []
    scanners: list[threading.Thread] = []
    real = extensions.scan

    def scan(cands, *rest):
        calls.append(_facts(cands))
        scanners.append(threading.current_thread())
        if not cands:
            time.sleep(0.5)  # the wrong guess's scan outlasts the probe
        return real(cands, *rest)

    monkeypatch.setattr(extensions, "scan", scan)
    env = detect(str(python))
    assert calls == [[("ext-a", "1.0", str(site / "ext_a-1.0.dist-info"))]]
    assert env.extensions == []  # it declares nothing and installed no object: no extension
    monkeypatch.setattr(python_env, "early_guess", lambda python, environ: ([str(site)], []))  # a wrong guess
    calls.clear()
    detect(str(python))
    assert calls == [[], [("ext-a", "1.0", str(site / "ext_a-1.0.dist-info"))]]  # the probe's own line scanned
    assert len(scanners) == 3 and not any(t.is_alive() for t in scanners)  # the unconfirmed one ended too
