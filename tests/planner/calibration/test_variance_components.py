"""REML estimate of the campaign noise (planner.calibration.variance_components)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from planner.calibration.variance_components import gls_mean, reml


def test_reml_equals_the_anova_answer_on_a_balanced_design() -> None:
    """Three campaigns of two rows: means 0.1, 1.1, 2.2; SSW = 0.02 + 0.02 + 0.08 = 0.12 on
    3 df, MSW = 0.04; MSB = 2 * sum((mean - 1.1333)^2) / 2 = 2.20667; REML = ANOVA when
    MSB > MSW (Searle et al. §6.7): sigma_w^2 = 0.04, sigma_b^2 = (2.20667 - 0.04) / 2 =
    1.08333; mu = 1.13333 with Var = (0.04 + 2 * 1.08333) / 6 = 0.367778."""
    est = reml(np.array([0.0, 0.2, 1.0, 1.2, 2.0, 2.4]), ["a", "a", "b", "b", "c", "c"])
    assert est.within_log_sd == pytest.approx(0.2, abs=1e-6)
    assert est.shared_log_sd == pytest.approx(math.sqrt(1.083333), abs=1e-5)
    assert est.mean_log == pytest.approx(1.133333, abs=1e-6)
    assert est.mean_log_sd == pytest.approx(math.sqrt(0.367778), abs=1e-5)
    assert (est.rows, est.campaigns) == (6, 3)
    lo, hi = est.shared_ci
    assert lo < est.shared_log_sd < hi
    lo, hi = est.within_ci
    assert lo < est.within_log_sd < hi


def test_reml_truncates_the_shared_component_at_zero() -> None:
    """Campaign means equal (0.5 and 0.5) while rows scatter: MSB = 0 < MSW, so sigma_b = 0 and
    sigma_w^2 is the pooled variance SST / (N - 1) = (0.5 + 0.32) / 3 = 0.273333; the
    interval of sigma_b then starts at 0."""
    est = reml(np.array([0.0, 1.0, 0.1, 0.9]), ["a", "a", "b", "b"])
    assert est.shared_log_sd == pytest.approx(0.0, abs=1e-4)
    assert est.within_log_sd == pytest.approx(math.sqrt(0.273333), abs=1e-4)
    assert est.shared_ci[0] == 0.0 and est.shared_ci[1] > 0.1


def test_reml_recovers_known_components_and_its_intervals_cover_them() -> None:
    """Unbalanced campaigns (3 to 11 rows), shifts of sd 0.05, row noise of sd 0.03."""
    rng = np.random.default_rng(7)
    residuals: list[float] = []
    campaigns: list[str] = []
    for c in range(80):
        n = int(rng.integers(3, 12))
        residuals += list(0.02 + rng.normal(0.0, 0.05) + rng.normal(0.0, 0.03, n))
        campaigns += [f"c{c}"] * n
    est = reml(np.array(residuals), campaigns)
    assert est.within_log_sd == pytest.approx(0.03, rel=0.12)
    assert est.shared_log_sd == pytest.approx(0.05, rel=0.2)
    assert est.shared_ci[0] < 0.05 < est.shared_ci[1]
    # with 530 within-campaign df the profile interval is the Wald one, sd (1 -/+ 1.96 / sqrt(2 df))
    half = 1.96 / math.sqrt(2 * (est.rows - est.campaigns))
    assert est.within_ci[0] == pytest.approx(est.within_log_sd * (1 - half), rel=0.01)
    assert est.within_ci[1] == pytest.approx(est.within_log_sd * (1 + half), rel=0.01)
    assert est.mean_log == pytest.approx(0.02, abs=2.5 * est.mean_log_sd)
    assert reml(np.array(residuals), campaigns) == est  # deterministic: no sampling inside


def test_few_campaigns_give_a_wide_interval_of_the_shared_component() -> None:
    """Four campaigns: the data say little about sigma_b; the interval says so."""
    rng = np.random.default_rng(3)
    sizes = (68, 12, 10, 11)
    campaigns = [f"c{g}" for g, n in enumerate(sizes) for _ in range(n)]
    shifts = np.repeat(rng.normal(0.0, 0.03, 4), sizes)
    est = reml(shifts + rng.normal(0.0, 0.05, sum(sizes)), campaigns)
    lo, hi = est.shared_ci
    assert hi > 2 * max(est.shared_log_sd, 0.01)
    assert hi - lo > 5 * (est.within_ci[1] - est.within_ci[0]) / 2


def test_gls_mean_weighs_each_campaign_by_its_information() -> None:
    """n_g / (sw2 + n_g sb2): 100 rows and 1 row with sw2 = sb2 = 1 weigh 100/101 and 1/2."""
    mu, var = gls_mean(np.array([100.0, 1.0]), np.array([1.0, 0.0]), 1.0, 1.0)
    w = np.array([100 / 101, 0.5])
    assert mu == pytest.approx(w[0] / w.sum())
    assert var == pytest.approx(1 / w.sum())


def test_reml_refuses_what_cannot_separate_the_components() -> None:
    with pytest.raises(ValueError, match="at least two campaigns"):
        reml(np.zeros(5), ["a"] * 5)
    with pytest.raises(ValueError, match="more rows than campaigns"):
        reml(np.zeros(3), ["a", "b", "c"])
    with pytest.raises(ValueError, match="one entry per row"):
        reml(np.zeros(3), ["a", "b"])
