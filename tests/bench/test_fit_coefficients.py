"""The coefficients the shared-data fits free (bench.accuracy.coefficients_for)."""

from __future__ import annotations

from dataclasses import replace

from bench.accuracy import coefficients_for
from planner.calibration.fit import DEFAULT_COEFFICIENTS
from tests.planner.fixtures import H100


def test_the_a100_fit_frees_no_attention_score_correction() -> None:
    # unfused attention's score traffic is priced by mechanism (unfused_attention.py); the
    # correction on top was never identified on the A100 rows and changed no fold's error
    a100 = replace(H100, name="a100-like", architecture="ampere")
    assert coefficients_for(a100) == coefficients_for(H100) == DEFAULT_COEFFICIENTS
    assert "attention_score_bytes" not in coefficients_for(a100)
