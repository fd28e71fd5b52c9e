"""The DP gradient reduce and the optimizer step price the rank that holds the most parameters:
the busiest rank, the last (output layer, MTP layers) or the layout's 'm' rank with its own
embedding copy (planner.performance.data_parallel.stage_param_counts)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from planner.layouts import LayoutBatch
from planner.memory.stage_loads import default_loads, layout_loads, load_params
from planner.model.flops import padded_vocab
from planner.model.params import param_counts
from planner.performance.context import StepContext, step_context
from planner.performance.data_parallel import dp_comm_time, stage_param_counts
from planner.performance.optimizer import optimizer_step_time
from planner.performance.step_time import default_profile
from planner.specs import ClusterSpec, Layout, ModelSpec, TrainingJob
from tests.planner.fixtures import H100, LLAMA_8B, MIXTRAL_8X7B

MTP_MOE = replace(MIXTRAL_8X7B, name="mixtral-mtp", mtp_num_layers=1)  # every layer MoE
CLUSTER = ClusterSpec(name="c", gpu=H100, num_gpus=64)
JOB = TrainingJob(seq_length=4096, global_batch_size=256)


def _ctx(model: ModelSpec, layouts: list[Layout]) -> StepContext:
    batch = LayoutBatch.from_layouts(layouts)
    return step_context(model, CLUSTER, JOB, batch, default_profile(H100))


def _memory_max(model: ModelSpec, ctx: StepContext) -> np.ndarray:
    """The memory model's parameters per GPU of its most loaded rank (an independent count)."""
    batch, n = ctx.batch, len(ctx.batch)
    counts = param_counts(model, vocab_size=int(padded_vocab(model, batch.tp)[0]))
    layouts = batch.mem.pipeline_layout.astype(str)
    has = layouts != ""
    ones = np.ones(n)
    first, last = default_loads(model, batch, ones, ones, np.zeros(n))
    more = layout_loads(model, batch, layouts, has, ctx.microbatches, np.zeros(n, dtype=bool))
    loads = [first, last, *more]
    totals = []
    for k, load in enumerate(loads):
        p = load_params(model, counts, batch, load)
        total = np.asarray(p.dense + p.expert, np.float64)
        # rows with a layout use the layout's ranks, the others the two default ranks
        totals.append(np.where(has == (k >= 2), total, 0.0))
    return np.max(np.stack(totals), axis=0)


def test_the_mtp_rank_with_its_embedding_copy_sets_the_count() -> None:
    # rank 2 of 4 holds 11 layers, the MTP layer and its embedding copy: more than the busiest
    # decoder rank (11 layers and the embedding) or the last (the output layer)
    ctx = _ctx(MTP_MOE, [Layout(pp=4, ep=8, dp=16, pipeline_layout="Et*10|t*11|t*11m|L")])
    p = stage_param_counts(ctx)
    np.testing.assert_allclose(p.dense + p.expert, _memory_max(MTP_MOE, ctx), rtol=2e-3)
    plain = stage_param_counts(
        _ctx(MIXTRAL_8X7B, [Layout(pp=4, ep=8, dp=16, pipeline_layout="Et*10|t*11|t*11|L")])
    )
    # one more layer's experts than the busiest decoder rank (all layers MoE)
    layer_experts = plain.expert / 11
    np.testing.assert_allclose(p.expert, 12 * layer_experts, rtol=1e-9)


def test_untied_single_stage_counts_embedding_and_output_layer() -> None:
    ctx = _ctx(LLAMA_8B, [Layout(tp=1, dp=64), Layout(tp=1, pp=2, dp=32)])
    p = stage_param_counts(ctx)
    np.testing.assert_allclose(p.dense + p.expert, _memory_max(LLAMA_8B, ctx), rtol=2e-3)
    matrix = LLAMA_8B.hidden_size * padded_vocab(LLAMA_8B, ctx.batch.tp)
    np.testing.assert_allclose(p.embedding, [2 * matrix[0], matrix[1]])


def test_the_rank_with_more_parameters_takes_longer_to_reduce_and_step() -> None:
    heavy = _ctx(MTP_MOE, [Layout(pp=4, ep=8, dp=16, pipeline_layout="Et*10|t*11|t*11m|L")])
    light = _ctx(MIXTRAL_8X7B, [Layout(pp=4, ep=8, dp=16, pipeline_layout="Et*10|t*11|t*11|L")])
    ph, pl = stage_param_counts(heavy), stage_param_counts(light)
    assert optimizer_step_time(heavy, ph)[0] > optimizer_step_time(light, pl)[0]
    no_compute = np.zeros(1)  # nothing to hide the reduce behind
    assert dp_comm_time(heavy, no_compute, ph)[0] > dp_comm_time(light, no_compute, pl)[0]
