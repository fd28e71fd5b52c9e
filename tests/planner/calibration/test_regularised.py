"""Regularised calibration: only identified coefficients move, toward the prior (issue 12 #8)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from planner.calibration.fit import DEFAULT_COEFFICIENTS, predict_tokens_per_s
from planner.calibration.honest_cv import cross_validate_prepared, make_folds
from planner.calibration.identify import Coordinates
from planner.calibration.measurements import Measurement
from planner.calibration.regularised import fit_regularised, prepare
from planner.calibration.suggest import unmeasured_row
from planner.performance.step_time import default_profile
from planner.specs import ClusterSpec, Layout, TrainingJob
from tests.planner.calibration.test_fit import synthetic
from tests.planner.fixtures import H100, LLAMA_8B, LLAMA_70B


def single_node_rows(scale: float, precision: str = "bf16") -> list[Measurement]:
    """Two runs on one node, measured ``scale`` x what the prior predicts."""
    cl = ClusterSpec(name="node", gpu=H100, num_gpus=8)
    job = TrainingJob(seq_length=4096, global_batch_size=64, precision=precision)
    rows = [
        unmeasured_row(LLAMA_8B, cl, job, lay)
        for lay in (Layout(tp=1, pp=1, dp=8), Layout(tp=2, pp=1, dp=4))
    ]
    pred = predict_tokens_per_s(rows, default_profile(H100))
    return [
        replace(r, row_id=f"n{i}", tokens_per_s_per_gpu=float(p) * scale)
        for i, (r, p) in enumerate(zip(rows, pred, strict=True))
    ]


def test_two_bf16_rows_never_move_an_fp8_coefficient() -> None:
    prior = default_profile(H100)
    # network_efficiency offered too: one node (and the GPU's collective curves) leave it unseen
    candidates = (*DEFAULT_COEFFICIENTS, "network_efficiency")
    fit = fit_regularised(single_node_rows(0.8), prior, candidates=candidates)
    by_name = {c.name: c for c in fit.coefficients}
    assert fit.profile.fp8_gemm_efficiency == prior.fp8_gemm_efficiency
    assert not by_name["fp8_gemm_efficiency"].identified
    assert by_name["fp8_gemm_efficiency"].information == 0
    # one node: no row crosses the network, so its efficiency keeps the prior too
    assert fit.profile.network_efficiency == prior.network_efficiency
    assert "no row's prediction depends on it" in by_name["network_efficiency"].reason
    # the rows are 20 % slower than predicted: the bf16 GEMM plateau is what moves
    assert by_name["gemm_efficiency"].moved
    assert fit.profile.gemm_efficiency < prior.gemm_efficiency
    assert fit.after.median_ape < fit.before.median_ape


def test_the_prior_holds_a_coefficient_two_rows_cannot_pin() -> None:
    """A ridge toward the prior: two rows 20 % slow are not fitted exactly (a near-free fit
    would leave them about 0 % off), and a weaker prior (more row noise) moves less."""
    prior = default_profile(H100)
    rows = single_node_rows(0.8)
    fit = fit_regularised(rows, prior)
    assert fit.after.median_ape > 0.01
    # tiny independent noise (no shared campaign error, which would cap the rows' weight)
    loose = fit_regularised(rows, prior, noise=0.005, shared_noise=0.0)
    assert loose.after.median_ape < 0.005
    timid = fit_regularised(rows, prior, noise=0.5)
    assert timid.profile.gemm_efficiency > fit.profile.gemm_efficiency


def test_many_rows_recover_the_truth() -> None:
    base = default_profile(H100)
    truth = base.with_coefficients(gemm_efficiency=0.62)
    # four campaigns: against the shipped fit weighting (bench.fit_weighting) two 5-row
    # campaigns count as about 5 independent rows, too few to overrule the prior to 2 %
    rows = [
        r
        for source in "abcd"
        for r in synthetic(truth, source, LLAMA_8B if source in "ac" else LLAMA_70B)
    ]
    fit = fit_regularised(rows, base, candidates=("gemm_efficiency", "tp_overlap"))
    assert fit.profile.gemm_efficiency == pytest.approx(0.62, abs=0.02)
    assert fit.after.median_ape < 0.02 < fit.before.median_ape


def test_unknown_coefficient_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown coefficient 'warp_speed'"):
        fit_regularised(single_node_rows(1.0), default_profile(H100), candidates=("warp_speed",))


def test_coordinates_round_trip_and_respect_bounds() -> None:
    prior = default_profile(H100)
    coords = Coordinates(prior, ("gemm_efficiency", "attention_score_bytes"))
    assert coords.log.tolist() == [True, False]  # a zero prior is fitted linearly
    assert np.allclose(coords.values(np.zeros(2)), [prior.gemm_efficiency, 0.0])
    clipped = coords.values(coords.clip(np.array([50.0, -50.0])))
    assert clipped[0] == pytest.approx(1.0) and clipped[1] == pytest.approx(0.0)


def test_folds_hold_out_whole_groups() -> None:
    folds, method = make_folds(["a", "a", "b", "c", "c"])
    assert folds == [[0, 1], [2], [3, 4]] and "leave-one" in method
    many = [f"g{i}" for i in range(25)]
    folds, method = make_folds(many, max_folds=10)
    assert len(folds) == 10 and sorted(i for f in folds for i in f) == list(range(25))
    folds, method = make_folds(["x"] * 4)
    assert len(folds) == 4 and "rows" in method


def test_cross_validation_predicts_rows_it_did_not_fit() -> None:
    base = default_profile(H100)
    truth = base.with_coefficients(gemm_efficiency=0.6)
    rows = synthetic(truth, "a", LLAMA_8B) + synthetic(truth, "b", LLAMA_70B)
    # source b's rows carry a 30 % offset no coefficient explains: held out, they stay off
    rows = [
        replace(r, tokens_per_s_per_gpu=r.tokens_per_s_per_gpu * 1.3) if r.source_id == "b" else r
        for r in rows
    ]
    prepared = prepare(rows, base, candidates=("gemm_efficiency",))
    cv = cross_validate_prepared(prepared, [m.source_id for m in rows], group_name="source")
    assert cv is not None and cv.folds == 2
    assert cv.after.median_ape > 0.1
    assert len(cv.predictions) == len(rows)
    assert cross_validate_prepared(prepare(rows[:2], base), ["a", "b"]) is None
