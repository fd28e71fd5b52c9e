"""What to measure next: short runs that most reduce one plan's uncertainty (issue 12 #10)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from models_db.intervals import cluster_level_noise
from planner.calibration.fit import predict_tokens_per_s
from planner.calibration.noise import NoiseModel
from planner.calibration.suggest import (
    RUN_ITERATIONS,
    candidate_runs,
    suggest_runs,
    unmeasured_row,
)
from planner.performance.step_time import default_profile
from planner.specs import ClusterSpec, Layout, TrainingJob
from tests.planner.fixtures import H100, LLAMA_70B

CLUSTER = ClusterSpec(name="c", gpu=H100, num_gpus=64)
JOB = TrainingJob(seq_length=8192, global_batch_size=128)
PLAN = Layout(tp=4, pp=4, vpp=5, cp=1, dp=4)
NOISE = cluster_level_noise()


def test_runs_are_small_feasible_variations_with_a_launch_command() -> None:
    result = suggest_runs(LLAMA_70B, CLUSTER, JOB, PLAN, default_profile(H100), k=3, noise=NOISE)
    assert 1 <= len(result.runs) <= 3
    assert result.plan_sd_after < result.plan_sd_before
    shares = [r.variance_reduction for r in result.runs]
    assert shares == sorted(shares, reverse=True)  # greedy: the most informative first
    for run in result.runs:
        assert run.cluster.num_gpus <= 4 * CLUSTER.gpus_per_node
        assert run.cluster.num_gpus < CLUSTER.num_gpus
        assert f"--train-iters {RUN_ITERATIONS}" in run.command
        assert f"--num-layers {run.model.num_layers}" in run.command
        assert run.minutes > RUN_ITERATIONS * run.step_time_s / 60
        assert run.informs


def test_every_candidate_fits_in_memory_on_its_nodes() -> None:
    for _, model, cluster, job, layout in candidate_runs(LLAMA_70B, CLUSTER, JOB, PLAN):
        assert cluster.num_gpus == layout.tp * layout.pp * layout.cp * layout.dp
        assert job.global_batch_size % (layout.dp * layout.micro_batch_size) == 0
        assert model.num_layers % (layout.pp * layout.vpp) == 0


def test_rows_already_measured_leave_less_to_learn() -> None:
    prior = default_profile(H100)
    fresh = suggest_runs(LLAMA_70B, CLUSTER, JOB, PLAN, prior, k=1, noise=NOISE)
    best = fresh.runs[0]
    row = unmeasured_row(best.model, best.cluster, best.job, best.layout)
    row = replace(row, tokens_per_s_per_gpu=float(predict_tokens_per_s([row], prior)[0]))
    informed = suggest_runs(LLAMA_70B, CLUSTER, JOB, PLAN, prior, k=1, noise=NOISE, measured=[row])
    assert informed.plan_sd_before < fresh.plan_sd_before


def test_k_must_be_positive() -> None:
    with pytest.raises(ValueError, match="k=0"):
        suggest_runs(LLAMA_70B, CLUSTER, JOB, PLAN, default_profile(H100), k=0, noise=NOISE)


def test_runs_of_one_cluster_count_as_one_campaign() -> None:
    """Suggested runs share their cluster's error (noise.NoiseModel): with the same total row
    noise, one run teaches the coefficients as much as an independent row, several runs less
    than as many."""
    prior = default_profile(H100)
    total = NOISE.total_log_sd
    indep_noise = NoiseModel(within_log_sd=total, shared_log_sd=0.0)
    for k, same in ((1, True), (3, False)):
        shared = suggest_runs(LLAMA_70B, CLUSTER, JOB, PLAN, prior, k=k, noise=NOISE).after
        indep = suggest_runs(LLAMA_70B, CLUSTER, JOB, PLAN, prior, k=k, noise=indep_noise).after
        if same:
            assert shared.coefficient_log_sd == pytest.approx(indep.coefficient_log_sd)
        else:
            assert shared.coefficient_log_sd > indep.coefficient_log_sd * 1.01


def test_measured_rows_of_one_campaign_weigh_less_than_independent_ones() -> None:
    prior = default_profile(H100)
    best = suggest_runs(LLAMA_70B, CLUSTER, JOB, PLAN, prior, k=1, noise=NOISE).runs[0]
    row = unmeasured_row(best.model, best.cluster, best.job, best.layout)
    row = replace(row, tokens_per_s_per_gpu=float(predict_tokens_per_s([row], prior)[0]))
    one = [replace(row, row_id=f"r{i}", source_id="one") for i in range(4)]
    many = [replace(row, row_id=f"r{i}", source_id=f"s{i}") for i in range(4)]
    sd_one = suggest_runs(LLAMA_70B, CLUSTER, JOB, PLAN, prior, k=1, noise=NOISE, measured=one)
    sd_many = suggest_runs(LLAMA_70B, CLUSTER, JOB, PLAN, prior, k=1, noise=NOISE, measured=many)
    assert sd_one.plan_sd_before > sd_many.plan_sd_before


def test_a_suggested_runs_description_counts_its_nodes_in_words() -> None:
    # web11's walk read "on 1 node(s)"
    result = suggest_runs(LLAMA_70B, CLUSTER, JOB, PLAN, default_profile(H100), k=3, noise=NOISE)
    for run in result.runs:
        nodes = run.cluster.num_gpus // run.cluster.gpus_per_node
        assert "node(s)" not in run.change
        assert run.change.endswith(f" on {nodes} node{'' if nodes == 1 else 's'}")
