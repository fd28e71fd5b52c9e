"""The shipped row noise is what its documented rule gives on the shared rows.

The rule (``bench/results/noise.md``): REML with campaigns as groups on the leave-one-source-out
log residuals of the fit, at the fixed point where the pair the fit weighs rows with is the pair
its residuals give. At a fixed point one round from the shipped pair returns it, up to the
rounding to 3 decimals (0.0005) and the iteration's tolerance (0.0005)."""

from __future__ import annotations

import pytest

from bench.accuracy import data_path, load
from bench.noise import DECIMALS, TOLERANCE, rule_step
from planner.calibration.fit import usable
from planner.calibration.regularised import NOISE, NOISE_LOG_SD, NOISE_SHARED_LOG_SD


@pytest.mark.skipif(not data_path().exists(), reason="shared measurements not beside the checkout")
def test_shipped_noise_is_the_rules_fixed_point_on_the_shared_rows() -> None:
    """If this fails, the rows or the model changed: run ``python -m bench.noise`` and ship the
    pair it prints in planner/calibration/regularised.py."""
    est = rule_step(usable(load()[0]), NOISE)
    slack = 0.5 * 10**-DECIMALS + TOLERANCE
    assert est.within_log_sd == pytest.approx(NOISE_LOG_SD, abs=slack)
    assert est.shared_log_sd == pytest.approx(NOISE_SHARED_LOG_SD, abs=slack)
