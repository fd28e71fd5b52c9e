"""The plan's uncertainty in ``--suggest`` counts the cluster's level as the band does (issue 12
items 9-10): tau on a cluster never calibrated, (1 - k)^2 tau^2 + k^2 sigma_w^2 / n after n rows."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from models_db.intervals import cluster_level_noise, load_interval_table
from planner.calibration.fit import predict_tokens_per_s
from planner.calibration.suggest import suggest_runs, unmeasured_row
from planner.performance.step_time import default_profile
from planner.specs import ClusterSpec, Layout, TrainingJob
from tests.planner.fixtures import H100, LLAMA_70B

CLUSTER = ClusterSpec(name="c", gpu=H100, num_gpus=64)
JOB = TrainingJob(seq_length=8192, global_batch_size=128)
PLAN = Layout(tp=4, pp=4, vpp=5, cp=1, dp=4)
NOISE = cluster_level_noise()
TAU, SW = NOISE.shared_log_sd, NOISE.within_log_sd


def band_offset_sd(n: int) -> float:
    """The band's calibrated offset sd, written out (published_check.md, 'A calibrated
    cluster'): k = n tau^2 / (n tau^2 + sigma_w^2)."""
    k = n * TAU**2 / (n * TAU**2 + SW**2)
    return math.sqrt((1 - k) ** 2 * TAU**2 + k**2 * SW**2 / n)


def test_the_prior_sd_of_the_offset_is_the_interval_tables_tau() -> None:
    table = load_interval_table()
    assert table is not None and table.transfer is not None
    assert table.transfer.log_sd == TAU and TAU > 0.05  # not the shared rows' 0.022


def test_suggest_runs_needs_the_noise_model() -> None:
    """No default sigma_b: a caller that forgets the table's tau fails, never runs on 0.022."""
    with pytest.raises(TypeError, match="noise"):
        suggest_runs(LLAMA_70B, CLUSTER, JOB, PLAN, default_profile(H100), k=1)  # type: ignore[call-arg]


def test_an_uncalibrated_cluster_is_off_by_tau_before_and_by_the_level_error_after() -> None:
    result = suggest_runs(LLAMA_70B, CLUSTER, JOB, PLAN, default_profile(H100), k=3, noise=NOISE)
    before, after = result.before, result.after
    assert before.level_rows == 0 and before.level_log_sd == pytest.approx(TAU)
    assert result.plan_sd_before == pytest.approx(math.hypot(before.coefficient_log_sd, TAU))
    assert after.level_rows == len(result.runs) == 3
    assert after.level_log_sd == pytest.approx(band_offset_sd(3))
    assert result.plan_sd_after == pytest.approx(
        math.hypot(after.coefficient_log_sd, band_offset_sd(3))
    )
    d = result.to_dict()
    assert d["uncertainty_before"]["cluster_level_pct"] == pytest.approx(
        100 * math.expm1(TAU), abs=0.01
    )
    assert d["plan_uncertainty_pct_after"] == d["uncertainty_after"]["total_pct"]


def test_the_runs_shares_add_up_to_the_reduction_of_both_parts() -> None:
    result = suggest_runs(LLAMA_70B, CLUSTER, JOB, PLAN, default_profile(H100), k=3, noise=NOISE)
    removed = 1 - result.after.variance / result.before.variance
    assert sum(r.variance_reduction for r in result.runs) == pytest.approx(removed, rel=1e-6)
    # the coefficients alone would credit the runs with less
    coef = 1 - (result.after.coefficient_log_sd / result.before.coefficient_log_sd) ** 2
    coef_share = coef * result.before.coefficient_log_sd**2 / result.before.variance
    assert removed > coef_share


def measured_rows(n: int) -> list:
    prior = default_profile(H100)
    best = suggest_runs(LLAMA_70B, CLUSTER, JOB, PLAN, prior, k=1, noise=NOISE).runs[0]
    row = unmeasured_row(best.model, best.cluster, best.job, best.layout)
    row = replace(row, tokens_per_s_per_gpu=float(predict_tokens_per_s([row], prior)[0]))
    return [replace(row, row_id=f"r{i}", source_id="mine") for i in range(n)]


def test_rows_already_measured_on_the_cluster_count_toward_its_level() -> None:
    result = suggest_runs(
        LLAMA_70B, CLUSTER, JOB, PLAN, default_profile(H100), k=2, noise=NOISE,
        measured=measured_rows(4),
    )  # fmt: skip
    assert result.before.level_rows == 4
    assert result.before.level_log_sd == pytest.approx(band_offset_sd(4))
    assert result.after.level_rows == 4 + len(result.runs)
    assert result.after.level_log_sd == pytest.approx(band_offset_sd(4 + len(result.runs)))


def test_a_calibrated_profile_starts_from_the_band_it_shows() -> None:
    """A profile that carries a level fitted on 5 rows with a narrower prior (k = 0.5): before
    the runs the plan's level error is the band's, (1 - k)^2 tau^2 + k^2 sigma_w^2 / n."""
    level = {"n_rows": 5, "shrinkage": 0.5, "within_log_sd": SW}
    prior = default_profile(H100)
    profile = prior.with_coefficients(provenance={**prior.provenance, "cluster_level": level})
    result = suggest_runs(LLAMA_70B, CLUSTER, JOB, PLAN, profile, k=2, noise=NOISE)
    band = math.sqrt(0.25 * TAU**2 + 0.25 * SW**2 / 5)
    assert result.before.level_rows == 5
    assert result.before.level_log_sd == pytest.approx(min(band, TAU))
    assert result.after.level_log_sd == pytest.approx(band_offset_sd(5 + len(result.runs)))


def test_without_a_shared_offset_the_level_adds_nothing() -> None:
    flat = replace(NOISE, shared_log_sd=0.0)
    result = suggest_runs(LLAMA_70B, CLUSTER, JOB, PLAN, default_profile(H100), k=2, noise=flat)
    assert result.before.level_log_sd == 0.0 == result.after.level_log_sd
    assert result.plan_sd_before == pytest.approx(result.before.coefficient_log_sd)
