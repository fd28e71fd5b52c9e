"""The shipped prediction noise is what its documented rule gives on the shared rows.

The rule (``bench/results/noise.md``): REML with campaigns as groups on the leave-one-source-out
log residuals of the shipped fit, the fit weighted by the fit pair (``FIT_NOISE``, a separate
hyperparameter since the two roles were split). One round from the fit pair returns the shipped
prediction pair up to the rounding to 3 decimals (0.0005) and a numerical slack (0.0005)."""

from __future__ import annotations

import pytest

from bench.accuracy import data_path, load
from bench.noise import DECIMALS, TOLERANCE, rule_step
from planner.calibration.fit import usable
from planner.calibration.regularised import FIT_NOISE, NOISE_LOG_SD, NOISE_SHARED_LOG_SD


@pytest.mark.skipif(not data_path().exists(), reason="shared measurements not beside the checkout")
def test_shipped_prediction_noise_is_the_rules_output_on_the_shared_rows() -> None:
    """If this fails, the rows or the model changed: run ``python -m bench.noise`` and ship the
    pair it prints in planner/calibration/regularised.py."""
    est = rule_step(usable(load()[0]), FIT_NOISE)
    slack = 0.5 * 10**-DECIMALS + TOLERANCE
    assert est.within_log_sd == pytest.approx(NOISE_LOG_SD, abs=slack)
    assert est.shared_log_sd == pytest.approx(NOISE_SHARED_LOG_SD, abs=slack)
