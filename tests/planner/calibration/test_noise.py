"""Row noise with a shared per-campaign component (planner.calibration.noise)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from planner.calibration import noise
from planner.calibration.measurements import Measurement
from planner.calibration.noise import NoiseModel, campaign_index, campaign_key
from planner.calibration.regularised import FIT_NOISE, NOISE, fit_regularised
from planner.performance.step_time import default_profile
from tests.planner.calibration.test_fit import synthetic
from tests.planner.fixtures import H100, LLAMA_8B

MODEL = NoiseModel(within_log_sd=0.06, shared_log_sd=0.04)


def test_effective_rows_of_one_campaign_saturate_near_one_over_rho() -> None:
    rho = MODEL.rho
    assert rho == pytest.approx(0.04**2 / (0.04**2 + 0.06**2))
    assert MODEL.effective_rows(1) == pytest.approx(1.0)
    assert MODEL.effective_rows(5) == pytest.approx(1 / (rho + (1 - rho) / 5))
    assert MODEL.effective_rows(1000) == pytest.approx(1 / rho, rel=0.01)
    assert MODEL.effective_rows(1000) < 1000 / 100


def test_weights_give_the_information_of_a_shared_shift() -> None:
    """n rows of one campaign moved together carry n / (sigma_w^2 + n sigma_b^2), GLS's
    information for a shift common to a compound-symmetric block."""
    groups = np.array([0] * 30 + [1] * 3)
    ones = np.ones((33, 1))
    info = MODEL.whiten(ones, groups)[:, 0] ** 2
    for g, n in ((0, 30), (1, 3)):
        expected = n / (0.06**2 + n * 0.04**2)
        assert info[groups == g].sum() == pytest.approx(expected)
    independent = NoiseModel(within_log_sd=0.06, shared_log_sd=0.0)
    assert (independent.whiten(ones, groups) ** 2).sum() == pytest.approx(33 / 0.06**2)


def test_noise_model_refuses_bad_widths() -> None:
    with pytest.raises(ValueError, match="within_log_sd=0 must be > 0"):
        NoiseModel(within_log_sd=0, shared_log_sd=0.01)
    with pytest.raises(ValueError, match=r"shared_log_sd=-0\.1 must be >= 0"):
        NoiseModel(within_log_sd=0.1, shared_log_sd=-0.1)


def _campaign(source: str, n: int, shift: float) -> list[Measurement]:
    """``n`` rows of one campaign measured ``exp(shift)`` x the prior's prediction."""
    rows = (synthetic(default_profile(H100), source, LLAMA_8B) * n)[:n]
    return [
        replace(
            r, row_id=f"{source}{i}", tokens_per_s_per_gpu=r.tokens_per_s_per_gpu * np.exp(shift)
        )
        for i, r in enumerate(rows)
    ]


WIDE = NoiseModel(within_log_sd=0.4, shared_log_sd=0.25)
"""Noise wide enough that no fit below saturates at the data's value (the prior still counts)."""


def _fit(rows: list[Measurement], noise: NoiseModel) -> tuple[float, float]:
    """(log change of the GEMM plateau, the rows' information about it)."""
    prior = default_profile(H100)
    fit = fit_regularised(
        rows,
        prior,
        candidates=("gemm_efficiency",),
        noise=noise.within_log_sd,
        shared_noise=noise.shared_log_sd,
    )
    moved = float(np.log(fit.profile.gemm_efficiency / prior.gemm_efficiency))
    return moved, fit.coefficients[0].information


@pytest.mark.parametrize("noise", [FIT_NOISE, WIDE])
def test_a_campaign_of_n_rows_moves_a_coefficient_like_about_one_over_rho_rows(
    noise: NoiseModel,
) -> None:
    """40 rows of one campaign, all 10 % fast, carry the information of and move the GEMM
    plateau about as far as effective_rows(40) (< 1/rho) independent rows (each its own
    campaign), far less than 40 independent rows."""
    n_eff = round(noise.effective_rows(40))
    assert n_eff < 1 / noise.rho
    one = _fit(_campaign("suite", 40, 0.1), noise)
    like_n_eff = _fit([r for i in range(n_eff) for r in _campaign(f"s{i}", 1, 0.1)], noise)
    like_forty = _fit([r for i in range(40) for r in _campaign(f"s{i}", 1, 0.1)], noise)
    # information is additive over independent rows: scale the rounded count to the exact one
    per_row = like_n_eff[1] / n_eff
    assert one[1] == pytest.approx(per_row * noise.effective_rows(40), rel=0.2)
    assert one[1] < 0.2 * like_forty[1]
    assert one[0] == pytest.approx(like_n_eff[0], rel=0.2)
    # with the shipped noise both fits nearly saturate at the rows' value (the prior is weak
    # against 3.7 effective rows), so "no further than forty rows" holds to the solver's step
    assert one[0] < like_forty[0] + 0.002
    if noise is WIDE:  # unsaturated: the 40 independent rows move it clearly further
        assert one[0] < 0.75 * like_forty[0]


def test_campaigns_are_a_source_on_one_gpu_type() -> None:
    rows = synthetic(default_profile(H100), "a", LLAMA_8B)[:2]
    other = replace(rows[1], cluster=replace(rows[1].cluster, gpu=replace(H100, name="h200")))
    keys = [campaign_key(m) for m in (rows[0], rows[1], other)]
    assert keys[0] == keys[1] != keys[2]
    assert campaign_index(keys).tolist() == [0, 0, 1]


def test_module_docstring_quotes_the_shipped_weighting() -> None:
    """The design-effect examples in the docstring are FIT_NOISE's (the fit's weighting), not
    NOISE's: rho 0.25, five rows worth 2.5, 68 rows about 4."""
    doc = " ".join((noise.__doc__ or "").split())
    assert f"rho {FIT_NOISE.rho:.2f}" in doc
    assert f"``NOISE`` has rho {NOISE.rho:.2f}" in doc
    assert f"({FIT_NOISE.effective_rows(5):.1f} with the fit's weighting ``FIT_NOISE``" in doc
    assert f"(about {round(FIT_NOISE.effective_rows(68))} with the fit's weighting" in doc
