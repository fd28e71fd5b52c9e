"""The output layer on the loss rank: its SP input gather (exposed, even with TP overlap), its
backward collectives under the dgrad / wgrad GEMMs, one head per MTP depth more, and its host
launches (planner.performance.output_layer, mechanisms-facts §5.1)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from planner.layouts import LayoutBatch
from planner.performance.collectives import ring_time
from planner.performance.compute import logits_time
from planner.performance.context import StepContext, step_context
from planner.performance.host_term import host_exposed_time
from planner.performance.output_layer import head_kernels, output_layer_comm
from planner.performance.step_time import default_profile, estimate_performance
from planner.performance.tensor_parallel import mtp_eh_comm, tp_comm_time, tp_layer_comm_fwd
from planner.specs import ClusterSpec, Layout, ModelSpec, TrainingJob
from tests.planner.fixtures import H100, LLAMA_8B

CLUSTER = ClusterSpec(name="c", gpu=H100, num_gpus=64)
JOB = TrainingJob(seq_length=4096, global_batch_size=256)


def _ctx(layouts: list[Layout], model: ModelSpec = LLAMA_8B, job: TrainingJob = JOB) -> StepContext:
    batch = LayoutBatch.from_layouts(layouts)
    return step_context(model, CLUSTER, job, batch, default_profile(H100))


def test_with_sp_the_head_gathers_its_input_first_and_nothing_hides_it() -> None:
    ctx = _ctx([Layout(tp=4, dp=16), Layout(tp=4, dp=16, sequence_parallel=False)])
    one = np.ones(2, dtype=np.int64)
    gather = ring_time(ctx.links, ctx.batch.tp, one, ctx.activation_bytes, 1.0, op="all_gather")
    comm = output_layer_comm(ctx)
    # one s_l b h message forward with SP (mechanisms-facts §5.1); none without SP
    np.testing.assert_allclose(comm.fwd_s, [gather[0], 0.0], rtol=1e-12)
    assert gather[0] > 0


def test_the_backward_collectives_show_only_beyond_their_gemm() -> None:
    ctx = _ctx([Layout(tp=4, dp=16), Layout(tp=4, dp=16, sequence_parallel=False)])
    # Llama's 128k vocabulary: the dgrad / wgrad GEMMs outlast the gather and the scatter
    assert (logits_time(ctx) > ring_time(
        ctx.links, ctx.batch.tp, np.ones(2, dtype=np.int64), ctx.activation_bytes, 2.0
    )).all()  # fmt: skip
    comm = output_layer_comm(ctx)
    # what is left is the interference of the hidden traffic: a few per cent of it
    assert (comm.bwd_s > 0).all()
    assert (comm.bwd_s < 0.2 * (comm.fwd_s[0] * 2)).all()
    # a tiny vocabulary: the GEMMs are short and the collectives show
    tiny = _ctx([Layout(tp=4, dp=16)], model=replace(LLAMA_8B, vocab_size=512))
    t_comm = output_layer_comm(tiny)
    assert t_comm.bwd_s[0] > 0.5 * t_comm.fwd_s[0]


def test_the_loss_rank_pays_its_head_gather_even_with_tp_overlap() -> None:
    layout = [Layout(tp=4, dp=16)]  # p = 1: the only rank is the loss rank
    for overlap_on in (True, False):
        job = replace(JOB, tp_comm_overlap=overlap_on)
        ctx = _ctx(layout, job=job)
        comm = tp_comm_time(ctx)
        head = output_layer_comm(ctx).exposed_s
        # the layers' share: with overlap off, 2 x forward per layer, all exposed
        if not overlap_on:
            layers = 2 * ctx.layers_per_stage * tp_layer_comm_fwd(ctx)
            np.testing.assert_allclose(comm.exposed_mb, layers + head, rtol=1e-9)
        assert (comm.exposed_mb > head).all() and (head > 0).all()


def test_a_light_last_rank_leaves_the_busiest_ranks_traffic() -> None:
    # rank 1 of 2 holds 4 layers and the loss: its head gather does not outweigh 28 layers
    layout = Layout(tp=4, pp=2, dp=8, pipeline_layout="Et*28|t*4L")
    plain = replace(layout, pipeline_layout="Et*16|t*16L")
    ctx = _ctx([layout, plain], job=replace(JOB, tp_comm_overlap=False))
    comm = tp_comm_time(ctx).exposed_mb
    layer = 2 * tp_layer_comm_fwd(ctx)
    np.testing.assert_allclose(comm[0], 28 * layer[0], rtol=1e-9)
    # an even split: the last rank's 16 layers and its head set the pace
    head = output_layer_comm(ctx).exposed_s
    np.testing.assert_allclose(comm[1], 16 * layer[1] + head[1], rtol=1e-9)


def test_each_mtp_depth_adds_a_head() -> None:
    layout = [Layout(tp=4, dp=16)]
    job = replace(JOB, tp_comm_overlap=False)
    one = _ctx(layout, model=replace(LLAMA_8B, mtp_num_layers=1), job=job)
    two = _ctx(layout, model=replace(LLAMA_8B, mtp_num_layers=2), job=job)
    diff = tp_comm_time(two).exposed_mb - tp_comm_time(one).exposed_mb
    # one more depth: its layer, its eh-projection and its head
    eh_fwd, eh_bwd = mtp_eh_comm(one)
    expected = 2 * tp_layer_comm_fwd(one) + eh_fwd + eh_bwd + output_layer_comm(one).exposed_s
    np.testing.assert_allclose(diff, expected, rtol=1e-9)


def test_head_kernels_count_norm_gather_gemms_and_the_loss() -> None:
    ctx = _ctx(
        [Layout(tp=4, dp=16), Layout(tp=4, dp=16, sequence_parallel=False), Layout(tp=1, dp=64)],
        job=replace(JOB, cross_entropy_fusion="unfused"),
    )
    fwd, bwd = head_kernels(ctx)
    # unfused loss: 8 forward, 4 backward kernels (planner.performance.cross_entropy)
    assert fwd.tolist() == [2 + 8 + 1, 2 + 8, 2 + 8]
    assert bwd.tolist() == [3 + 4 + 2, 3 + 4 + 1, 3 + 4]


def test_the_host_launches_the_heads_on_a_host_bound_loss_rank() -> None:
    layout = [Layout(tp=4, dp=16)]
    gpu = np.array([32 * 50e-6])  # 50 us of GPU per layer: the host binds
    unfused = _ctx(layout, job=replace(JOB, cross_entropy_fusion="unfused"))
    native = _ctx(layout, job=replace(JOB, cross_entropy_fusion="native"))
    # the unfused loss launches 8 more kernels per micro-batch than the native fusion's
    diff = host_exposed_time(unfused, gpu)[0] - host_exposed_time(native, gpu)[0]
    assert diff == pytest.approx(8 * unfused.profile.host_kernel_s, rel=1e-6)
    # one graph for the whole iteration captures the heads too
    graphed = _ctx([Layout(tp=4, dp=16, cuda_graphs="full_iteration")], job=unfused.job)
    graphed_native = _ctx([Layout(tp=4, dp=16, cuda_graphs="full_iteration")], job=native.job)
    assert host_exposed_time(graphed, gpu)[0] == host_exposed_time(graphed_native, gpu)[0]


def test_the_step_time_pays_the_head_gather_per_micro_batch() -> None:
    layout = [Layout(tp=8, dp=8)]
    job = replace(JOB, tp_comm_overlap=False)  # every TP collective exposed: a plain sum
    batch = LayoutBatch.from_layouts(layout)
    est = estimate_performance(LLAMA_8B, CLUSTER, job, batch, default_profile(H100))
    ctx = _ctx(layout, job=job)
    layers = 2 * ctx.layers_per_stage * tp_layer_comm_fwd(ctx)
    head = output_layer_comm(ctx).exposed_s
    expected = ctx.microbatches * (layers + head) * ctx.profile.cluster_step_scale
    np.testing.assert_allclose(est.breakdown["tp_comm_s"], expected, rtol=1e-9)
