"""A user calibration fits the cluster's level first, then keeps a coefficient fit only where it
predicts held-out rows better than the level alone."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from app.calibration.honest import calibrate_gpu_rows, fit_decision
from models_db.intervals import cluster_level_noise
from planner.calibration.fit import ErrorStats
from planner.calibration.honest_cv import HonestCV
from planner.performance.step_time import default_profile
from tests.planner.calibration.test_fit import synthetic
from tests.planner.fixtures import H100, LLAMA_8B, LLAMA_70B


def _two_sweeps(scale_a: float, scale_b: float) -> list:
    rows = synthetic(default_profile(H100), "a", LLAMA_8B, scale=scale_a)
    rows += synthetic(default_profile(H100), "b", LLAMA_70B, scale=scale_b)
    return rows


def test_five_rows_ten_percent_slower_move_the_level_and_nothing_else() -> None:
    """A cluster 10 % slower on every layout is the cluster's level, not a mechanism: the level
    moves toward 0.9 of the prior's throughput by the noise model's shrinkage, no coefficient
    moves."""
    prior = default_profile(H100)
    rows = synthetic(prior, "a", LLAMA_8B, scale=0.9)
    assert len(rows) == 5
    profile, report = calibrate_gpu_rows(rows, prior)
    noise = cluster_level_noise()  # the band's tau as the prior sd of the cluster's offset
    n, sb2, sw2 = 5, noise.shared_log_sd**2, noise.within_log_sd**2
    k = n * sb2 / (n * sb2 + sw2)
    assert 0.9 < 1 / profile.cluster_step_scale < 1.0
    assert profile.cluster_step_scale == pytest.approx(0.9**-k)
    assert replace(profile, cluster_step_scale=1.0) == prior
    assert report["moved"] == []
    level = report["level"]
    assert level["n_rows"] == 5
    assert level["throughput_factor"] == pytest.approx(0.9**k, abs=1e-5)
    assert level["log_sd"] == pytest.approx(math.sqrt(sb2 * sw2 / (n * sb2 + sw2)), abs=1e-5)
    assert profile.provenance["cluster_level"] == {k: v for k, v in level.items() if k != "applied"}


def test_a_cluster_slower_everywhere_moves_the_level_not_the_coefficients() -> None:
    """Before the level, a uniform 20 % slowdown moved the GEMM plateau; now the level takes it
    (the coefficients fit what the level leaves: the rows' contrasts, here none)."""
    prior = default_profile(H100)
    rows = _two_sweeps(0.8, 0.8)
    profile, report = calibrate_gpu_rows(rows, prior)
    assert report["moved"] == []
    # the level is 0.8 shrunk by its prior (level.py): k = n sb^2 / (n sb^2 + sw^2), sb = tau
    noise = cluster_level_noise()
    n, sb2, sw2 = len(rows), noise.shared_log_sd**2, noise.within_log_sd**2
    k = n * sb2 / (n * sb2 + sw2)
    assert 0.8 < report["level"]["throughput_factor"] < 0.9
    assert report["level"]["throughput_factor"] == pytest.approx(0.8**k, abs=1e-4)
    assert profile != prior
    cv = report["cross_validation"]
    assert cv["level_only"]["median_ape"] < cv["median_ape_before"]


def _tp_contrast(rows: list, factor: float) -> list:
    """The rows with tensor parallelism ``factor`` times as fast, the others as predicted."""
    return [
        replace(m, tokens_per_s_per_gpu=m.tokens_per_s_per_gpu * factor) if m.layout.tp > 1 else m
        for m in rows
    ]


def test_sweeps_that_contradict_each_other_keep_the_coefficients() -> None:
    """In one sweep the tensor-parallel rows run 0.7x as fast as the prior says, in the other
    1 / 0.7x (what the model cannot explain): no coefficient moves, and the report gives the
    held-out error of each candidate. Both sweeps run one model, so their TP contrasts cancel
    exactly in log space (contrasts that cancel only roughly, 0.7x on 8B and 1.3x on 70B, whose
    TP sensitivities differ, could move tp_overlap to their compromise wherever the fit
    weighting lets ten rows of two campaigns identify it)."""
    prior = default_profile(H100)
    rows = _tp_contrast(synthetic(prior, "a", LLAMA_70B), 0.7)
    rows += _tp_contrast(synthetic(prior, "b", LLAMA_70B), 1 / 0.7)
    profile, report = calibrate_gpu_rows(rows, prior)
    assert replace(profile, cluster_step_scale=1.0) == prior
    assert report["moved"] == []
    held = report["decision"]["held_out_median_ape"]
    assert set(held) == {"prior", "level", "fit"}
    assert "held-out median error: the prior" in report["decision"]["reason"]


def _cv(prior: float, level: float | None, fit: float) -> HonestCV:
    def stats(x: float) -> ErrorStats:
        return ErrorStats(n=5, median_ape=x, p90_ape=x)

    return HonestCV(
        method="5-fold over rows",
        folds=5,
        before=stats(prior),
        after=stats(fit),
        level_only=None if level is None else stats(level),
    )


def test_the_fit_is_judged_against_the_level() -> None:
    worse = fit_decision(_cv(0.05, 0.03, 0.04))
    assert worse["choice"] == "level" and worse["kept_prior"] is True
    assert "the coefficient fit predicts them worse" in worse["reason"]
    # better than the level (even if not than the prior: the level is not on trial)
    better = fit_decision(_cv(0.02, 0.03, 0.025))
    assert better["choice"] == "fit" and better["kept_prior"] is False
    # without a level: the fit against the prior, as before the level existed
    alone = fit_decision(_cv(0.03, None, 0.04))
    assert alone["choice"] == "prior" and alone["kept_prior"] is True
    assert fit_decision(None)["kept_prior"] is False


def test_without_the_level_the_calibration_is_the_previous_one() -> None:
    prior = default_profile(H100)
    profile, report = calibrate_gpu_rows(_two_sweeps(0.8, 0.8), prior, fit_level=False)
    assert profile.cluster_step_scale == 1.0
    assert report["level"]["applied"] is False
    assert report["moved"]
    assert "level_only" not in report["cross_validation"]


def test_a_fit_equal_to_the_level_but_for_rounding_is_a_tie_and_kept() -> None:
    """A fit that moved nothing differs from the level alone by ~1e-16: not 'predicts worse'."""
    tie = fit_decision(_cv(0.03, 0.004, 0.004 + 2e-16))
    assert tie["choice"] == "fit" and tie["kept_prior"] is False
    assert "predicts them worse" not in tie["reason"]
