"""The cluster's level: the posterior of the offset all rows of one cluster share."""

from __future__ import annotations

import math

import numpy as np
import pytest

from planner.calibration.level import level_posterior, prepared_level, with_level
from planner.calibration.noise import NoiseModel
from planner.calibration.regularised import prepare
from planner.performance.step_time import default_profile
from tests.planner.calibration.test_fit import synthetic
from tests.planner.fixtures import H100, LLAMA_8B

NOISE = NoiseModel(within_log_sd=0.06, shared_log_sd=0.03)


def test_posterior_by_hand() -> None:
    """n = 4, sigma_b^2 = 0.0009, sigma_w^2 = 0.0036: n sigma_b^2 = sigma_w^2, so the rows and
    the prior weigh alike: k = 0.5, sd^2 = 0.0009 x 0.0036 / 0.0072 = 0.00045."""
    level = level_posterior(np.array([-0.12, -0.08, -0.11, -0.09]), NOISE)
    assert level.n_rows == 4
    assert level.mean_log_residual == pytest.approx(-0.1)
    assert level.shrinkage == pytest.approx(0.5)
    assert level.log_mean == pytest.approx(-0.05)
    assert level.log_sd == pytest.approx(math.sqrt(0.00045))
    # rows 10 % slower than predicted: the step takes longer, throughput drops
    assert level.step_scale == pytest.approx(math.exp(0.05))
    assert level.throughput_factor == pytest.approx(math.exp(-0.05))


def test_one_far_off_row_does_not_drag_the_level() -> None:
    """Huber's location (c = 1.345 sigma_w = 0.0807): four rows at -0.10 and one at +0.50.
    The mean would be +0.02 (the cluster looks faster); the location stays near -0.10:
    solving 4(-0.10 - mu) + 0.0807 = 0 gives mu = -0.0798."""
    level = level_posterior(np.array([-0.1, -0.1, -0.1, -0.1, 0.5]), NOISE)
    assert level.mean_log_residual == pytest.approx(0.02)
    assert level.location_log_residual == pytest.approx(-0.1 + 1.345 * 0.06 / 4, abs=1e-6)
    assert level.log_mean < 0  # the cluster is slower, as four of five rows say


def test_no_row_leaves_the_prior_and_many_rows_trust_the_rows() -> None:
    none = level_posterior(np.array([]), NOISE)
    assert none.log_mean == 0.0 and none.step_scale == 1.0
    assert none.log_sd == pytest.approx(NOISE.shared_log_sd)
    many = level_posterior(np.full(10_000, -0.1), NOISE)
    assert many.shrinkage == pytest.approx(1.0, abs=1e-3)
    assert many.log_sd < 0.001


def test_the_level_divides_predictions_and_keeps_the_jacobian() -> None:
    prior = default_profile(H100)
    prepared = prepare(synthetic(prior, "a", LLAMA_8B, scale=0.9), prior)
    level = prepared_level(prepared, noise=NOISE)
    assert level.n_rows == 5 and level.mean_log_residual == pytest.approx(math.log(0.9))
    levelled = with_level(prepared, level)
    assert levelled.centred and not prepared.centred
    assert levelled.coords.prior.cluster_step_scale == pytest.approx(level.step_scale)
    np.testing.assert_allclose(levelled.base_pred, prepared.base_pred / level.step_scale)
    np.testing.assert_array_equal(levelled.jacobian, prepared.jacobian)


def test_a_fitted_level_narrows_the_band_by_its_posterior_sd() -> None:
    """Band log half-widths x sqrt((sd^2 + sigma_w^2) / (sigma_b^2 + sigma_w^2)): with
    sigma_w 0.06, sigma_b 0.03 and 4 rows (sd^2 = 0.00045), sqrt(0.00405 / 0.0045) = 0.949."""
    from planner.calibration.intervals import band_narrowing, uncertainty
    from planner.specs import ClusterSpec, Layout, TrainingJob
    from tests.planner.calibration.test_intervals import FITTED, table
    from tests.planner.fixtures import LLAMA_70B

    level = level_posterior(np.full(4, -0.1), NOISE).to_dict()
    factor = band_narrowing(level)
    assert factor == pytest.approx(math.sqrt(0.00405 / 0.0045), abs=1e-4)
    assert band_narrowing(None) == 1.0

    def interval(profile: object) -> dict:
        return uncertainty(
            table(),
            LLAMA_70B,
            ClusterSpec(name="c", gpu=H100, num_gpus=64),
            TrainingJob(seq_length=4096, global_batch_size=256),
            Layout(tp=4, pp=2, dp=8),
            profile,  # type: ignore[arg-type]
            tokens_per_s_per_gpu=1000.0,
            step_time_s=10.0,
        )

    plain = interval(FITTED)
    calibrated = interval(
        FITTED.with_coefficients(provenance={"kind": "fitted", "cluster_level": level})
    )
    lo, hi = plain["tokens_per_s_per_gpu_interval"]
    lo2, hi2 = calibrated["tokens_per_s_per_gpu_interval"]
    centre = math.sqrt(lo * hi)
    assert math.log(hi2 / lo2) == pytest.approx(factor * math.log(hi / lo))
    assert math.sqrt(lo2 * hi2) == pytest.approx(centre)
    assert calibrated["interval"]["cluster_level_narrowing"] == pytest.approx(factor, abs=1e-4)
    assert "cluster_level_narrowing" not in plain["interval"]
