"""Short runs for a plan whose one replica needs more GPUs than a few nodes (issue 12 #10)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from models_db.intervals import cluster_level_noise
from planner.calibration.suggest import candidate_runs, suggest_runs
from planner.calibration.suggest_proxy import fewest_nodes, fit_stages, node_counts
from planner.performance.step_time import default_profile
from planner.specs import ClusterSpec, Layout, TrainingJob
from tests.planner.fixtures import H100, LLAMA_70B

MT_NLG = replace(
    LLAMA_70B,
    name="mt-nlg-530b",
    num_layers=105,
    hidden_size=20480,
    ffn_hidden_size=81920,
    num_attention_heads=128,
    num_query_groups=128,
    swiglu=False,
)
"""MT-NLG 530B's shape (Smith et al. 2022, Table 1: 105 layers, hidden 20480, 128 heads)."""
PLAN = Layout(tp=8, pp=35, cp=1, dp=8, micro_batch_size=1)
"""Its training layout (Smith et al. 2022 §3: tp 8 x pp 35 = 280 GPUs per replica)."""
CLUSTER = ClusterSpec(name="c", gpu=H100, num_gpus=2240)
JOB = TrainingJob(seq_length=2048, global_batch_size=1920)
NOISE = cluster_level_noise()


def test_a_replica_larger_than_four_nodes_gets_stage_reduced_proxies() -> None:
    result = suggest_runs(MT_NLG, CLUSTER, JOB, PLAN, default_profile(H100), k=3, noise=NOISE)
    assert len(result.runs) == 3
    assert result.note is not None and "280 GPUs" in result.note
    same = [r for r in result.runs if r.change.startswith("same layout")]
    assert same, [r.change for r in result.runs]
    for run in same:
        lay = run.layout
        assert (lay.tp, lay.cp, lay.micro_batch_size) == (8, 1, 1)
        assert 2 <= lay.pp < PLAN.pp
        assert run.model.num_layers == 3 * lay.pp  # the plan's 3 layers per stage
        assert run.job.seq_length == JOB.seq_length
        assert f"--pipeline-model-parallel-size {lay.pp}" in run.command
    assert min(r.cluster.num_nodes for r in result.runs) <= 2
    assert result.plan_sd_after < result.plan_sd_before


def test_each_candidate_names_its_stages_once() -> None:
    cands = candidate_runs(MT_NLG, CLUSTER, JOB, PLAN)
    changes = [c[0] for c in cands]
    assert any(x.startswith("pp 35 -> ") for x in changes)  # the variant that halves pp
    for change, model, _, _, layout in cands:
        assert change.count("pp ") == 1, change
        assert f"pp 35 -> {layout.pp}" in change
        assert f"{model.num_layers} layers ({model.num_layers // layout.pp} per stage)" in change


def test_fit_stages_keeps_layers_per_stage_and_two_stages() -> None:
    fit = fit_stages(MT_NLG, PLAN, 16)
    assert fit is not None
    assert (fit.layout.pp, fit.model.num_layers, fit.change) == (2, 6, "pp 35 -> 2")
    assert fit_stages(MT_NLG, PLAN, 8) is None  # one stage would not exercise the pipeline
    whole = fit_stages(MT_NLG, PLAN, 280)
    assert whole is not None and whole.model is MT_NLG and whole.layout is PLAN


def test_the_fewest_nodes_grow_with_tp_times_cp() -> None:
    wide = replace(PLAN, cp=8, dp=1)  # tp 8 x cp 8 x 2 stages = 128 GPUs
    assert fewest_nodes(PLAN, 8, 100) == 2
    assert fewest_nodes(wide, 8, 100) == 16
    assert fewest_nodes(wide, 8, 15) is None
    assert node_counts(replace(CLUSTER, num_gpus=4096), wide, None) == [1, 2, 4, 16, 32]
    assert node_counts(replace(CLUSTER, num_gpus=4096), wide, 20) == [1, 2, 4, 16]


def test_a_proxy_larger_than_the_cluster_is_said_not_silently_empty() -> None:
    plan = replace(PLAN, pp=5, cp=2, dp=1)  # tp 8 x cp 2 x 2 stages: 4 nodes; every variant 2
    one_node = replace(CLUSTER, num_gpus=8)
    result = suggest_runs(MT_NLG, one_node, JOB, plan, default_profile(H100), k=3, noise=NOISE)
    assert result.runs == ()
    assert result.note is not None
    assert "needs 4 node(s)" in result.note and "the cluster's 1" in result.note
    assert result.to_dict()["note"] == result.note


def test_runs_that_miss_the_plans_groups_say_why() -> None:
    wide = replace(PLAN, cp=8, dp=1)  # tp 8 x cp 8 x 2 stages = 16 nodes, the cluster has 8
    result = suggest_runs(
        MT_NLG, replace(CLUSTER, num_gpus=64), JOB, wide, default_profile(H100), k=3, noise=NOISE
    )
    assert result.runs and all(r.layout.cp < 8 or r.layout.tp < 8 for r in result.runs)
    assert result.note is not None
    assert "needs 16 node(s)" in result.note and "miss the plan's own groups" in result.note


def test_a_proxy_larger_than_the_budget_says_how_many_nodes_to_allow() -> None:
    wide = replace(PLAN, cp=4, dp=1)  # tp 8 x cp 4 x 2 stages = 8 nodes
    result = suggest_runs(
        MT_NLG, CLUSTER, JOB, wide, default_profile(H100), k=2, noise=NOISE, max_nodes=4
    )
    assert result.runs and all(r.cluster.num_nodes <= 4 for r in result.runs)
    assert result.note is not None
    assert "budget of 4 node(s) per run: allow at least 8" in result.note
    allowed = suggest_runs(
        MT_NLG, CLUSTER, JOB, wide, default_profile(H100), k=2, noise=NOISE, max_nodes=8
    )
    assert allowed.note is not None and "measure proxies" in allowed.note


def test_max_nodes_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_nodes=0"):
        suggest_runs(
            MT_NLG, CLUSTER, JOB, PLAN, default_profile(H100), k=1, noise=NOISE, max_nodes=0
        )


def test_a_cluster_smaller_than_one_node_gets_runs_on_its_own_gpus() -> None:
    # one GPU of an 8-GPU node type: every run must fit on that one GPU, never a full node
    one = ClusterSpec(name="one", gpu=H100, num_gpus=1)
    small = replace(
        LLAMA_70B,
        name="small",
        num_layers=4,
        hidden_size=1024,
        ffn_hidden_size=4096,
        num_attention_heads=8,
        num_query_groups=8,
    )
    plan = Layout(tp=1, pp=1, cp=1, dp=1, micro_batch_size=1)
    job = TrainingJob(seq_length=2048, global_batch_size=8)
    result = suggest_runs(small, one, job, plan, default_profile(H100), k=3, noise=NOISE)
    assert result.runs
    assert all(r.cluster.num_gpus == 1 for r in result.runs), [
        r.cluster.num_gpus for r in result.runs
    ]
    assert all("--nproc-per-node 1" in r.command for r in result.runs)
