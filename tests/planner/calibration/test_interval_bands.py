"""Building the prediction bands from held-out residuals (planner.calibration.interval_bands)."""

from __future__ import annotations

import math
from functools import partial

import numpy as np
import pytest

from planner.calibration.interval_bands import (
    build_bands,
    conformal_band,
    effective_rows,
    model_band,
)
from planner.calibration.intervals import IntervalTable
from planner.calibration.noise import NoiseModel
from planner.calibration.variance_components import reml
from tests.planner.calibration.test_intervals import CALIBRATED

NOISE = NoiseModel(within_log_sd=0.066, shared_log_sd=0.043)  # rho 0.30
DENSE = ["dense", "multi-node", "cp=1", "bf16"]
MOE = ["moe", "multi-node", "cp=1", "bf16"]


def test_conformal_band_widens_on_few_values() -> None:
    values = np.arange(1, 20, dtype=float)  # 19 values: (n + 1) 0.1 = 2, (n + 1) 0.9 = 18
    assert conformal_band(values, 0.1, 0.9) == {"n": 19, "low": 2.0, "high": 18.0}
    few = conformal_band([3.0, 1.0, 2.0], 0.1, 0.9)  # too few: the band is min to max
    assert (few["low"], few["high"]) == (1.0, 3.0)


def test_effective_rows_count_each_campaign_by_the_design_effect() -> None:
    assert effective_rows(["a"] * 68, NOISE) == pytest.approx(NOISE.effective_rows(68))
    assert effective_rows(["a"] * 68, NOISE) < 1 / NOISE.rho
    assert effective_rows(["a", "b", "c"], NOISE) == pytest.approx(3.0)


def _table(bands: dict) -> IntervalTable:
    return IntervalTable.from_dict(
        {
            "low_quantile": 0.1,
            "high_quantile": 0.9,
            "min_rows": 10,
            "bands": bands,
            "calibrated": CALIBRATED,
        }
    )


def test_a_regime_of_one_campaign_uses_its_parents_band_however_many_rows() -> None:
    """40 MoE rows of one benchmark suite measure that suite's errors: their regime falls back
    to the band over every campaign, which a new cluster's shift is exchangeable with."""
    rng = np.random.default_rng(3)
    parts = [MOE] * 40 + [DENSE] * 60
    campaigns = ["suite"] * 40 + [f"paper{i % 6}" for i in range(60)]
    ratios = np.exp(np.concatenate([rng.normal(0, 0.01, 40), rng.normal(0, 0.08, 60)]))
    bands = build_bands(parts, ratios, campaigns, noise=NOISE, low_q=0.1, high_q=0.9, df=6)
    moe = bands["moe/multi-node/cp=1/bf16"]
    assert moe["n"] == 40 and moe["campaigns"] == 1
    assert moe["effective_rows"] < 10
    assert bands["dense"]["campaigns"] == 6 and bands["dense"]["effective_rows"] >= 10
    table = _table(bands)
    key, band = table.band(MOE)
    assert key == "all"
    # one campaign's centre is as uncertain as a campaign's shift: its sd exceeds seven's
    assert moe["log_sd"] > bands["all"]["log_sd"]
    assert band.weight == bands["all"]["effective_rows"] and band.campaigns == 7
    assert table.band(DENSE)[0] == "dense/multi-node/cp=1/bf16"
    # the earlier rule, every row counted: one campaign's 40 rows made the band
    plain = {k: {x: v for x, v in b.items() if x != "effective_rows"} for k, b in bands.items()}
    assert _table(plain).band(MOE)[0] == "moe/multi-node/cp=1/bf16"


def test_build_bands_refuses_misaligned_inputs() -> None:
    with pytest.raises(ValueError, match="one entry per row"):
        build_bands([DENSE], [1.0, 1.1], ["a"], noise=NOISE, low_q=0.1, high_q=0.9, df=3)
    with pytest.raises(ValueError, match="df=0 must be >= 1"):
        build_bands([DENSE], [1.0], ["a"], noise=NOISE, low_q=0.1, high_q=0.9)


def test_conformal_ranks_count_the_effective_values() -> None:
    """101 values worth 11.53 independent ones (four campaigns at rho 0.3): the 90 % end is the
    ceil(101 * 0.9 * 12.53 / 11.53) = 99th smallest, the 10 % end its mirror, the 3rd."""
    values = np.arange(1, 102, dtype=float)
    assert conformal_band(values, 0.1, 0.9, effective_n=11.53) == {
        "n": 101,
        "low": 3.0,
        "high": 99.0,
    }
    # as many effective values as values: the exchangeable ranks floor/ceil((n + 1) q)
    assert conformal_band(values, 0.1, 0.9, effective_n=101) == conformal_band(values, 0.1, 0.9)
    assert conformal_band(values, 0.1, 0.9) == {"n": 101, "low": 10.0, "high": 92.0}
    with pytest.raises(ValueError, match="effective_n=200"):
        conformal_band(values, 0.1, 0.9, effective_n=200)


def test_bands_of_correlated_rows_are_wider_than_of_as_many_independent_ones() -> None:
    rng = np.random.default_rng(5)
    ratios = np.exp(rng.normal(0, 0.05, 60))
    parts = [DENSE] * 60
    conformal = partial(build_bands, noise=NOISE, low_q=0.1, high_q=0.9, rule="conformal-effective")
    one_suite = conformal(parts, ratios, ["a"] * 30 + ["b"] * 30)
    independent = conformal(parts, ratios, [f"r{i}" for i in range(60)])
    rows_rule = build_bands(
        parts,
        ratios,
        ["a"] * 30 + ["b"] * 30,
        noise=NOISE,
        low_q=0.1,
        high_q=0.9,
        rule="conformal-rows",
    )
    width = {
        k: b["all"]["high"] - b["all"]["low"]
        for k, b in (("suite", one_suite), ("indep", independent), ("rows", rows_rule))
    }
    assert width["suite"] > width["indep"] == pytest.approx(width["rows"])


def test_model_band_by_hand_on_a_balanced_design() -> None:
    """Two campaigns of two rows, log ratios +0.1 and -0.1, sigma_w 0.05, sigma_b 0.03: the GLS
    centre is 0, Var(mu) = (0.05^2 + 2 * 0.03^2) / (2 * 2) = 0.001075, the predictive sd
    s = sqrt(0.0025 + 0.0009 + 0.001075) = 0.066895, t_0.9(3) = 1.637744, so the band is
    exp(-/+ 0.109557) = 0.896232 to 1.115784."""
    noise = NoiseModel(within_log_sd=0.05, shared_log_sd=0.03)
    ratios = np.exp([0.1, 0.1, -0.1, -0.1])
    band = model_band(ratios, ["a", "a", "b", "b"], noise, df=3, low_q=0.1, high_q=0.9)
    assert band["log_centre"] == pytest.approx(0.0, abs=1e-12)
    assert band["log_sd"] == pytest.approx(0.066895, abs=1e-6)
    assert band["low"] == pytest.approx(0.896232, abs=1e-5)
    assert band["high"] == pytest.approx(1.115784, abs=1e-5)
    # fewer degrees of freedom behind the noise estimate: a wider band
    wide = model_band(ratios, ["a", "a", "b", "b"], noise, df=1, low_q=0.1, high_q=0.9)
    assert wide["high"] > band["high"] and wide["low"] < band["low"]


def test_model_band_weighs_campaigns_not_rows() -> None:
    """68 rows of one campaign at +0.1 and 10 of another at -0.1: with sigma_b > 0 each campaign
    is worth about n / (1 + (n - 1) rho) rows, so the centre sits near the middle, not at the
    big campaign's shift (as the mean over rows, +0.074, would)."""
    ratios = np.exp([0.1] * 68 + [-0.1] * 10)
    band = model_band(ratios, ["a"] * 68 + ["b"] * 10, NOISE, df=3, low_q=0.1, high_q=0.9)
    w_a = 68 / (0.066**2 + 68 * 0.043**2)
    w_b = 10 / (0.066**2 + 10 * 0.043**2)
    assert band["log_centre"] == pytest.approx(0.1 * (w_a - w_b) / (w_a + w_b))
    assert abs(band["log_centre"]) < 0.03


def test_model_band_covers_new_campaigns_at_about_the_target() -> None:
    """Rows drawn from the noise model (sigma_w 0.05, sigma_b 0.03): a band built from 6
    campaigns with the noise re-estimated by REML (df 5) covers one row of a seventh campaign
    about 80 % of the time (the t quantile on the campaigns' degrees of freedom; a normal
    quantile with the estimated sds would fall short)."""
    rng = np.random.default_rng(11)
    hits = []
    for _ in range(120):
        camps = [f"c{g}" for g in range(6) for _ in range(8)]
        logs = np.repeat(rng.normal(0, 0.03, 6), 8) + rng.normal(0, 0.05, 48)
        est = reml(logs, camps, intervals=False)
        band = model_band(np.exp(logs), camps, est.noise, df=5, low_q=0.1, high_q=0.9)
        new = math.exp(rng.normal(0, 0.03) + rng.normal(0, 0.05))
        hits.append(band["low"] <= new <= band["high"])
    assert 0.72 <= np.mean(hits) <= 0.9
