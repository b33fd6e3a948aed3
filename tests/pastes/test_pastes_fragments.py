"""Older fragments that state a fact by failing (pastes/nvsmi.py): nvidia-smi's answer to a query field it
does not have, read from real pastes of tests/data/pastes instead of refused as no known tool output (exit 2)."""
from __future__ import annotations

import pytest
from support.fakes import DATA

from cudamatrix.errors import UsageError
from cudamatrix.pastes.reports import from_reports


def body(stem: str) -> str:
    return (DATA / "pastes" / f"{stem}.txt").read_text(encoding="utf-8").partition("\n")[2]


@pytest.mark.parametrize("stem, field", [
    ("nvidia-smi-query_invalid-field-compute_cap_snap-470-smi-580-driver_inference-snaps89", "compute_cap"),
    ("nvidia-smi-query_invalid-field-device_minor_escaped-in-k8s-log_cohdi37", "device_minor"),  # quoted \\" in a log
])
def test_an_invalid_query_field_is_the_fact_nvidia_smi_states(stem, field):
    env = from_reports([(stem, body(stem))], strict=True)
    assert f'nvidia-smi refused the query field "{field}": this nvidia-smi has no such field (nvidia-smi ' \
           "--help-query-gpu lists those it has)" in [n.message for n in env.notes]
    assert any(n.message.startswith(f"{stem}: read as nvidia-smi --query-gpu (line") for n in env.notes)


def test_the_invalid_field_alone_is_read_not_refused():
    """inference-snaps#89's first command and its answer, alone: before, "no known tool output" (exit 2)."""
    text = "\n".join(body("nvidia-smi-query_invalid-field-compute_cap_snap-470-smi-580-driver_inference-snaps89")
                     .split("\n")[1:4])
    assert "is not a valid field to query" in text
    env = from_reports([("snaps89", text)], strict=True)
    assert [n.level for n in env.notes if "refused the query field" in n.message] == ["warning"]
    with pytest.raises(UsageError):  # a field name alone, without nvidia-smi's words, is still nothing known
        from_reports([("x", 'Field "compute_cap"')], strict=True)
