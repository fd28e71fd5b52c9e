"""The MTP block's TP collectives and host launches, on the rank that runs it: one full layer per
depth (megatron-facts §4.1) plus the eh-projection's gathers (mechanisms-facts §5.1)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from planner.layouts import LayoutBatch
from planner.performance.collectives import ring_time
from planner.performance.context import StepContext, step_context
from planner.performance.host_term import host_exposed_time
from planner.performance.output_layer import output_layer_comm
from planner.performance.step_time import default_profile
from planner.performance.tensor_parallel import mtp_eh_comm, tp_comm_time, tp_layer_comm_fwd
from planner.specs import ClusterSpec, Layout, ModelSpec, TrainingJob
from tests.planner.fixtures import H100, LLAMA_8B, MIXTRAL_8X7B

MTP_MOE = replace(MIXTRAL_8X7B, name="mixtral-mtp", mtp_num_layers=1)  # every layer MoE
MTP_DENSE = replace(LLAMA_8B, name="llama-mtp", mtp_num_layers=1)
CLUSTER = ClusterSpec(name="c", gpu=H100, num_gpus=64)
# TP overlap off: every TP collective is exposed, so the differences below are plain sums
JOB = TrainingJob(seq_length=4096, global_batch_size=256, tp_comm_overlap=False)


def _ctx(model: ModelSpec, layouts: list[Layout]) -> StepContext:
    return step_context(
        model, CLUSTER, JOB, LayoutBatch.from_layouts(layouts), default_profile(H100)
    )


def _no_mtp(model: ModelSpec) -> ModelSpec:
    return replace(model, mtp_num_layers=0)


def test_the_eh_projection_gathers_its_2h_input_and_its_output() -> None:
    ctx = _ctx(MTP_DENSE, [Layout(tp=4, dp=16), Layout(tp=4, dp=16, sequence_parallel=False)])
    act, tp, one = ctx.activation_bytes, ctx.batch.tp, np.ones(2, dtype=np.int64)
    ag = ring_time(ctx.links, tp, one, act, 1.0, op="all_gather")
    ag2 = ring_time(ctx.links, tp, one, 2 * act, 1.0, op="all_gather")
    rs2 = ring_time(ctx.links, tp, one, 2 * act, 1.0, op="reduce_scatter")
    ar2 = ring_time(ctx.links, tp, one, 2 * act, 2.0)
    fwd, bwd = mtp_eh_comm(ctx)
    np.testing.assert_allclose(fwd, [ag2[0] + ag[0], ag[1]], rtol=1e-12)
    np.testing.assert_allclose(bwd, [rs2[0] + ag[0], ar2[1]], rtol=1e-12)
    assert (fwd > 0).all() and (bwd > 0).all()


def test_the_mtp_layer_and_its_eh_projection_add_tp_traffic_with_one_stage() -> None:
    layout = [Layout(tp=4, dp=16)]
    ctx = _ctx(MTP_DENSE, layout)
    plain = tp_comm_time(_ctx(_no_mtp(MTP_DENSE), layout)).exposed_mb
    fwd, bwd = mtp_eh_comm(ctx)
    # forward + backward of one more dense layer's collectives, the eh-projection's, and the
    # depth's own output layer (mechanisms-facts §5.1)
    head = output_layer_comm(ctx).exposed_s
    expected = 2 * tp_layer_comm_fwd(ctx) + fwd + bwd + head
    np.testing.assert_allclose(tp_comm_time(ctx).exposed_mb - plain, expected, rtol=1e-9)


def test_a_moe_mtp_layer_pays_the_moe_layers_tp_share() -> None:
    layout = [Layout(tp=2, ep=8, etp=1, dp=32)]
    ctx = _ctx(MTP_MOE, layout)
    plain = tp_comm_time(_ctx(_no_mtp(MTP_MOE), layout)).exposed_mb
    fwd, bwd = mtp_eh_comm(ctx)
    # no shared experts: the attention half of the layer runs on the TP group; one more head
    head = output_layer_comm(ctx).exposed_s
    expected = 2 * 0.5 * tp_layer_comm_fwd(ctx) + fwd + bwd + head
    np.testing.assert_allclose(tp_comm_time(ctx).exposed_mb - plain, expected, rtol=1e-9)


def test_the_mtp_rank_sets_the_tp_traffic_only_where_it_has_more() -> None:
    # rank 0 holds 4 + 16 layers, rank 1 holds 12 and the MTP layer: rank 0 still has more
    light = Layout(tp=4, pp=2, vpp=2, dp=8, pipeline_layout="Et*4|t*12|t*16|mL")
    # 16 layers on each rank, the MTP layer on rank 1: rank 1 has more
    even = replace(light, pipeline_layout="Et*8|t*8|t*8|t*8mL")
    with_mtp = tp_comm_time(_ctx(MTP_DENSE, [light, even])).exposed_mb
    without = [
        replace(light, pipeline_layout="Et*4|t*12|t*16|L"),
        replace(even, pipeline_layout="Et*8|t*8|t*8|t*8L"),
    ]
    plain = tp_comm_time(_ctx(_no_mtp(MTP_DENSE), without)).exposed_mb
    assert with_mtp[0] == pytest.approx(plain[0], rel=1e-12)
    assert with_mtp[1] > plain[1] * (1 + 1 / 16)


def test_the_mtp_layers_are_launched_by_the_host() -> None:
    layout = [Layout(tp=4, dp=16)]
    ctx = _ctx(MTP_DENSE, layout)
    plain = _ctx(_no_mtp(MTP_DENSE), layout)
    # a host-bound stage (50 us of GPU per layer): 33 layers launch more than 32
    gpu = np.array([32 * 50e-6])
    assert host_exposed_time(ctx, gpu)[0] > host_exposed_time(plain, gpu)[0]
