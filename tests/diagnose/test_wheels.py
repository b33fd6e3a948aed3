"""diagnose.wheels: which of a distribution's declared requirements apply here. Markers of the plain shape are read
without packaging (tests/schema/test_pep508.py holds the two readers equal); these are the ones packaging reads
(an ``in`` comparison), with the CUDA extras the frameworks declare (``extra == "and-cuda"``: TensorFlow's
``tensorflow[and-cuda]``, pip's "Requirement Specifiers"): a requirement behind such an extra applies when its
distribution is installed, since then the extra was asked for."""
from __future__ import annotations

import pytest

from cudamatrix.diagnose.declared import applicable_requirements
from cudamatrix.models import Environment, PythonInfo


def _applies(text: str, installed: bool) -> bool:
    env = Environment(origin="file", python=PythonInfo(version="3.11.9", platform="linux_x86_64"),
                      packages={"nvidia-x": "1"} if installed else {})
    return [str(r) for r in applicable_requirements(env, [text])] == [text]


@pytest.mark.parametrize("marker, when_installed, when_not", [
    ('platform_machine in "x86_64 aarch64"', True, True),  # true here: applies either way
    ('platform_machine in "ppc64le s390x"', False, False),
    ('extra == "and-cuda" and platform_machine in "x86_64 aarch64"', True, False),  # behind a CUDA extra
    ('extra == "docs" and platform_machine in "x86_64 aarch64"', False, False),  # another extra: never
])
def test_a_marker_packaging_reads_applies_here_or_behind_a_cuda_extra(marker, when_installed, when_not):
    text = f"nvidia-x==1; {marker}"
    assert (_applies(text, True), _applies(text, False)) == (when_installed, when_not)
