"""The between-campaign spread of a campaign the fit never saw (campaign_spread)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import t as student_t

from planner.calibration.campaign_spread import (
    CampaignOffset,
    TransferSpread,
    calibrated_offset_sd,
    estimate,
    new_campaign_band,
    transfer_log_sd,
)

SW = 0.05


def offsets(means: list[float], rows: int = 5) -> list[CampaignOffset]:
    return [
        CampaignOffset(campaign=f"c{i}", rows=rows, mean_log_deviation=m)
        for i, m in enumerate(means)
    ]


def test_tau_recovers_the_spread_of_simulated_campaign_offsets() -> None:
    rng = np.random.default_rng(7)
    tau, n = 0.12, 4
    means = rng.normal(0, tau, 400) + rng.normal(0, SW / math.sqrt(n), 400)
    assert transfer_log_sd(offsets(list(means), rows=n), SW) == pytest.approx(tau, rel=0.1)


def test_campaigns_no_further_apart_than_their_rows_give_tau_zero() -> None:
    assert transfer_log_sd(offsets([0.0, 0.001, -0.001, 0.0]), SW) == 0.0


def test_a_systematic_shift_of_new_campaigns_counts_in_tau() -> None:
    """The mean is fixed at the band's centre: campaigns all 10 % slow are 10 % off it."""
    assert transfer_log_sd(offsets([-0.1] * 6, rows=50), SW) == pytest.approx(0.1, abs=0.005)


def test_estimate_has_campaigns_minus_one_degrees_of_freedom() -> None:
    spread = estimate(offsets([0.1, -0.1, 0.05]), SW)
    assert spread.df == 2 and len(spread.campaigns) == 3
    with pytest.raises(ValueError, match="at least two"):
        estimate(offsets([0.1, -0.1]), SW, leave_out="c0")


def test_a_left_out_campaign_never_informs_its_own_spread() -> None:
    base = offsets([0.02, -0.03, 0.1, -0.12, 0.05])
    wild = [*base[:4], CampaignOffset(campaign="c4", rows=5, mean_log_deviation=0.9)]
    assert estimate(wild, SW, leave_out="c4") == estimate(base, SW, leave_out="c4")
    assert estimate(wild, SW).log_sd > 2 * estimate(base, SW).log_sd  # it would have leaked


def test_the_band_is_centre_plus_t_times_the_predictive_sd() -> None:
    spread = TransferSpread(log_sd=0.1, df=11, within_log_sd=SW)
    low, high, sd = new_campaign_band(-0.02, 0.01, spread, low_q=0.1, high_q=0.9)
    assert sd == pytest.approx(math.sqrt(SW**2 + 0.1**2 + 0.01**2))
    t = float(student_t.ppf(0.9, 11))
    assert (low, high) == pytest.approx((math.exp(-0.02 - t * sd), math.exp(-0.02 + t * sd)))
    narrower = new_campaign_band(-0.02, 0.01, spread, low_q=0.1, high_q=0.9, offset_log_sd=0.02)
    assert low < narrower[0] < narrower[1] < high
    own = new_campaign_band(-0.02, 0.01, spread, low_q=0.1, high_q=0.9, within_log_sd=0.2)
    assert own[2] > sd  # a band's own sigma_w (the transferred-GPU band) is used


def test_a_calibrated_level_knows_its_offset_better_than_tau() -> None:
    level = {"n_rows": 5, "shrinkage": 0.3, "within_log_sd": SW}
    err = calibrated_offset_sd(level, 0.1)
    assert err == pytest.approx(math.sqrt(0.7**2 * 0.01 + 0.09 * SW**2 / 5))
    assert err is not None and err < 0.1
    assert calibrated_offset_sd({"n_rows": 5, "shrinkage": 0.0, "within_log_sd": SW}, 0.1) == (
        pytest.approx(0.1)
    )
    assert calibrated_offset_sd(None, 0.1) is None


def test_a_spread_round_trips_and_refuses_bad_values() -> None:
    spread = estimate(offsets([0.1, -0.05, 0.0]), SW)
    assert TransferSpread.from_dict(spread.to_dict()) == spread
    with pytest.raises(ValueError, match="rows=0"):
        CampaignOffset(campaign="x", rows=0, mean_log_deviation=0.0)
    with pytest.raises(ValueError, match="df=0"):
        TransferSpread(log_sd=0.1, df=0, within_log_sd=SW)
