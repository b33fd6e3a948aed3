"""`cudamatrix fix` checks, before its first change, that every file of the plan can be fetched: with the
framework index unreachable it stops with the cause and exit 4, having uninstalled nothing (issue 42; before,
it uninstalled the wheels the plan replaces, failed on the install step, then put them back)."""
from __future__ import annotations

import json
import os
import subprocess
import time

import pytest
from support.localindex import LocalIndex, build_wheel, pip_list
from test_fix_e2e import TARGET, _cli, _wheels
from test_fix_e2e import world as world  # noqa: F401 (the fixture)


def _site_files(py) -> dict[str, tuple[int, int]]:
    """(inode, mtime) of every .dist-info RECORD of the venv: a reinstall writes new files."""
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    out = {}
    for entry in sorted(os.listdir(site)):
        record = os.path.join(site, entry, "RECORD")
        if entry.endswith(".dist-info") and os.path.isfile(record):
            st = os.stat(record)
            out[entry] = (st.st_ino, st.st_mtime_ns)
    return out


@pytest.mark.slow
@pytest.mark.installs
def test_fix_with_the_framework_index_unreachable_changes_nothing(world, tmp_path):  # noqa: F811
    py, env, solution = world
    extra = build_wheel(tmp_path / "start2", "nvidia-cudnn-cu11", "8.9.2.26")  # a CUDA 11 wheel the plan removes
    subprocess.run([str(py), "-m", "pip", "install", "--no-index", "--no-deps", str(extra)], env=env, check=True,
                   capture_output=True, timeout=300)
    _wheels(tmp_path / "wheels", solution)
    with LocalIndex(tmp_path / "wheels") as index:
        env["PIP_INDEX_URL"] = index.url + "/simple"  # the default index answers; the framework index does not
        dry = _cli("fix", "--python", str(py), *TARGET, "--mirror", "http://127.0.0.1:9/whl", "--allow-http",
                   "--dry-run", "--json", env=env)
        steps = [s["kind"] for s in json.loads(dry.stdout)["data"]["plan"]["steps"]]
        assert steps[:2] == ["uninstall", "install"], dry.stdout
        before, files = pip_list(py, env), _site_files(py)
        start = time.monotonic()
        r = _cli("fix", "--python", str(py), *TARGET, "--mirror", "http://127.0.0.1:9/whl", "--allow-http", "--yes",
                 "--installer", "pip", "--json", env=env)
        took = time.monotonic() - start
    out = json.loads(r.stdout)
    assert r.returncode == 4, r.stdout + r.stderr
    error = out["errors"][0]
    assert error["message"].startswith("the plan's files cannot all be fetched: the index http://127.0.0.1:9/whl/")
    assert "nothing was changed" in error["hint"] and error["detail"]["unreachable"]
    assert pip_list(py, env) == before and _site_files(py) == files  # nothing uninstalled, nothing reinstalled
    journals = tmp_path / "state" / "cudamatrix" / "journal"  # no change began: no journal, only the run's lock file
    assert not journals.exists() or not [p for p in journals.iterdir() if p.suffix != ".lock"]
    assert took < 120
