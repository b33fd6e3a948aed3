"""Where the uv the test extra installs lives, and the skip rule for tests that need it.

uv is found on PATH, or next to this interpreter (a venv used without activating it). Outside CI a missing uv
skips the test with the reason; in CI (``CI=true``, where ``.ci/run`` installs the test extra) it fails it.
"""
from __future__ import annotations

import os
import shutil
import sys

import pytest

UV_DIR = next((d for d in (os.path.dirname(shutil.which("uv") or ""), os.path.dirname(sys.executable))
               if d and os.path.isfile(os.path.join(d, "uv"))), None)
IN_CI = os.environ.get("CI", "").lower() == "true"

needs_uv = pytest.mark.skipif(UV_DIR is None and not IN_CI,
                              reason="uv is not installed (the test extra installs it; in CI this test fails instead)")


def with_uv(env: dict) -> dict:
    """``env`` with uv's folder first on PATH; fails the test when uv is missing."""
    assert UV_DIR is not None, "uv is missing: pip install -e '.[test]' installs it"
    return {**env, "PATH": UV_DIR + os.pathsep + env.get("PATH", os.environ.get("PATH", ""))}
