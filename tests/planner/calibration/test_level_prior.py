"""A new cluster's level has the prior the band uses: tau of the transfer spread, not the REML
sigma_b of the four shared campaigns (planner.calibration.level.new_cluster_noise)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from planner.calibration.campaign_spread import (
    CampaignOffset,
    TransferSpread,
    calibrated_offset_sd,
)
from planner.calibration.level import level_posterior, new_cluster_noise
from planner.calibration.regularised import NOISE_LOG_SD, NOISE_SHARED_LOG_SD

SPREAD = TransferSpread(
    log_sd=0.1,
    df=1,
    within_log_sd=0.05,
    campaigns=(
        CampaignOffset(campaign="a", rows=5, mean_log_deviation=0.1),
        CampaignOffset(campaign="b", rows=5, mean_log_deviation=-0.1),
    ),
)


def test_the_prior_is_the_spreads_tau_and_sigma_w_the_prediction_noises() -> None:
    noise = new_cluster_noise(SPREAD)
    assert noise.shared_log_sd == 0.1
    assert noise.within_log_sd == NOISE_LOG_SD  # not the spread's sigma_w: kept as it was
    fallback = new_cluster_noise(None)
    assert fallback.shared_log_sd == NOISE_SHARED_LOG_SD
    assert fallback.within_log_sd == NOISE_LOG_SD


def test_five_runs_under_tau_by_hand() -> None:
    """tau 0.1, sigma_w 0.048, n 5: n tau^2 = 0.05, sigma_w^2 = 0.002304, so
    k = 0.05 / 0.052304 = 0.95595 (0.576 with sigma_b 0.025: 0.003125 / 0.005429) and
    sd^2 = 0.01 x 0.002304 / 0.052304 = 0.00044050."""
    level = level_posterior(np.full(5, -0.08), new_cluster_noise(SPREAD))
    assert level.prior_log_sd == 0.1
    assert level.shrinkage == pytest.approx(0.05 / 0.052304)
    assert level.log_mean == pytest.approx(-0.08 * 0.05 / 0.052304)
    assert level.log_sd == pytest.approx(math.sqrt(0.01 * 0.002304 / 0.052304))
    old = level_posterior(np.full(5, -0.08), new_cluster_noise(None))
    assert old.shrinkage == pytest.approx(0.003125 / 0.005429, abs=0.005)


@pytest.mark.parametrize("n", [1, 5, 20])
def test_the_bands_calibrated_offset_is_the_levels_posterior_sd(n: int) -> None:
    """With the level's prior = the band's tau, the band's error of the shrunken level
    ((1 - k)^2 tau^2 + k^2 sigma_w^2 / n, campaign_spread.calibrated_offset_sd) is the level's
    own posterior sd: the two statements about the calibrated cluster agree. Under the old
    prior (0.025) the band's error was larger than the level claimed (the bias (1 - k) tau)."""
    level = level_posterior(np.zeros(n), new_cluster_noise(SPREAD))
    offset = calibrated_offset_sd(level.to_dict(), SPREAD.log_sd)
    assert offset == pytest.approx(level.log_sd, rel=1e-3)
    old = level_posterior(np.zeros(n), new_cluster_noise(None)).to_dict()
    old_offset = calibrated_offset_sd(old, SPREAD.log_sd)
    assert old_offset is not None and old_offset > 1.5 * old["log_sd"]
