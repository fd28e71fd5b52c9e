"""Ring-attention CP and the host model inside the step time (issue 12 items 4-5), checked
against the worked examples of mechanisms-facts §1.2 and §3."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from models_db import load_gpu
from planner.layouts import LayoutBatch
from planner.performance.compute import elementwise_bytes_per_token
from planner.performance.context import step_context
from planner.performance.context_parallel import ring_model
from planner.performance.expert_parallel import routed_expert_time
from planner.performance.host_term import host_exposed_time
from planner.performance.step_time import default_profile, estimate_performance
from planner.specs import ClusterSpec, Layout, ModelSpec, TrainingJob
from tests.planner.fixtures import LLAMA_70B, MIXTRAL_8X7B

MHA_7B = ModelSpec(
    name="mha-7b",
    num_layers=32,
    hidden_size=4096,
    ffn_hidden_size=11008,
    num_attention_heads=32,
    num_query_groups=32,
    vocab_size=32000,
)


def ctx_for(model: ModelSpec, seq: int, layouts: list[Layout], gpus: int = 64, **job: object):
    gpu = load_gpu("h100-sxm-80gb")
    cluster = ClusterSpec(name="c", gpu=gpu, num_gpus=gpus)
    j = TrainingJob(seq_length=seq, global_batch_size=64, **job)  # type: ignore[arg-type]
    return step_context(model, cluster, j, LayoutBatch.from_layouts(layouts), default_profile(gpu))


def test_gqa_70b_ring_at_128k_is_hidden() -> None:
    """§1.2: a = 64, g = 8, t = 8, s = 128K, c = 8: 8 MiB KV per step under ~1.1 ms of step
    attention. t x c = 64 puts the ring across nodes (§1.6), so the hop takes one NIC (~0.2 ms
    instead of the sheet's 47 us on NVLink): still hidden in the forward."""
    ctx = ctx_for(LLAMA_70B, 131072, [Layout(tp=8, cp=8, dp=1)])
    ring = ring_model(ctx)
    assert ring is not None
    assert ring.fwd_exposed_s[0] == pytest.approx(0.0, abs=1e-9)
    hop = ring.fwd_comm_s[0] / 7
    assert 0.15e-3 < hop < 0.3e-3  # 8 MiB over one ~46 GB/s NIC + its 47 us latency (§2.4)
    step_attention = ring.fwd_attention_s[0] / 8
    assert 0.6e-3 < step_attention < 2.0e-3  # "~1.1 ms at 500 TFLOP/s"


def test_mha_ring_across_nodes_exposes_the_kv_hops() -> None:
    """§1.2: 7B MHA, s = 32K, c = 4: 128 MiB per hop, hidden on NVLink, exposed over one NIC."""
    inside = ring_model(ctx_for(MHA_7B, 32768, [Layout(tp=1, cp=4, dp=1)], gpus=8))
    across = ring_model(ctx_for(MHA_7B, 32768, [Layout(tp=4, cp=4, dp=1)], gpus=16))
    assert inside is not None and across is not None
    assert inside.fwd_exposed_s[0] < 0.05 * inside.fwd_comm_s[0]
    hop = across.fwd_comm_s[0] / 3 * 4  # per-hop time at tp=4 carries 1/4 of the KV heads
    assert across.fwd_exposed_s[0] > 0.3 * across.fwd_comm_s[0]
    assert hop > 2e-3  # 128 MiB over one ~47 GB/s NIC: ~2.9 ms per hop (§1.2: ~3.4 ms at 40)


def test_cp_term_counts_the_replayed_transfers_with_full_recompute() -> None:
    lay = Layout(tp=4, cp=4, dp=1)
    base = ctx_for(MHA_7B, 32768, [lay], gpus=16)
    full = ctx_for(MHA_7B, 32768, [replace(lay, recompute="full")], gpus=16)
    gpu = base.gpu
    args = (MHA_7B, base.cluster, base.job)
    e0 = estimate_performance(*args, base.batch, default_profile(gpu)).breakdown["cp_comm_s"]
    e1 = estimate_performance(*args, full.batch, default_profile(gpu)).breakdown["cp_comm_s"]
    assert e1[0] > 1.2 * e0[0]


def test_host_binds_when_kernels_are_shorter_than_their_launches() -> None:
    """§3.1: tiny per-layer GPU time -> the host's launches set the pace; long -> hidden."""
    ctx = ctx_for(MIXTRAL_8X7B, 4096, [Layout(tp=1, ep=8, dp=8)])
    short = host_exposed_time(ctx, np.array([32 * 50e-6]))
    long = host_exposed_time(ctx, np.array([32 * 50e-3]))
    assert short[0] > 10 * long[0]
    # long layers still pay the per-micro-batch cost and one D2H sync per MoE layer (§3.3)
    prof = ctx.profile
    assert long[0] == pytest.approx(prof.host_micro_batch_s + 32 * prof.host_sync_s, rel=1e-6)


def test_cuda_graphs_remove_the_launch_cost_of_what_they_capture() -> None:
    eager = ctx_for(MIXTRAL_8X7B, 4096, [Layout(tp=1, ep=8, dp=8)])
    graphs = ctx_for(MIXTRAL_8X7B, 4096, [Layout(tp=1, ep=8, dp=8, cuda_graphs="partial")])
    gpu = np.array([32 * 50e-6])
    assert host_exposed_time(graphs, gpu)[0] < host_exposed_time(eager, gpu)[0]


def test_expert_gemms_run_per_expert_and_imbalance_grows_the_busiest_rank() -> None:
    """§4.1: TE's default path, one GEMM per local expert; §6.3: the busiest rank's tokens
    per expert scale by the imbalance (its time by at most that factor, since larger GEMMs run
    faster)."""
    lay = [Layout(tp=1, ep=8, dp=8)]
    balanced = routed_expert_time(ctx_for(MIXTRAL_8X7B, 4096, lay, moe_imbalance=1.0))
    skewed = routed_expert_time(ctx_for(MIXTRAL_8X7B, 4096, lay, moe_imbalance=1.3))
    assert 1.0 < skewed[0] / balanced[0] <= 1.3


def test_permutation_is_priced_once_with_the_experts() -> None:
    """§4.4: ~14 K h bytes per token with alltoall; the generic elementwise term no longer
    carries them."""
    ctx = ctx_for(MIXTRAL_8X7B, 4096, [Layout(tp=1, ep=8, dp=8)])
    dense, moe, _ = elementwise_bytes_per_token(MIXTRAL_8X7B, ctx.batch.tp, ctx.sp, False)
    k, h, f = 2, 4096, 14336
    assert moe[0] - dense[0] == pytest.approx(6.0 * f * k - 6.0 * f)  # experts' SwiGLU only
    tokens = ctx.tokens[0]
    permute = 2 * 14.0 * k * h * tokens / (ctx.gpu.hbm_bandwidth_bytes_per_s * 0.5) / 3.0
    assert routed_expert_time(ctx)[0] > permute


def test_a_release_before_permute_fusion_launches_the_unfused_permutes() -> None:
    """mechanisms-facts §8: --moe-permute-fusion arrived in core 0.11 (TE 1.11); core 0.10 runs
    Megatron's unfused permute (PERMUTE_UNFUSED kernels per permute, moe_kernels) and its
    launch flags leave the fusion out (brief loose9 item 2)."""
    from planner.megatron.flags import launch_spec
    from planner.performance.moe_kernels import PERMUTE_FUSED, PERMUTE_UNFUSED

    lay = [Layout(tp=1, ep=8, dp=8)]
    fused = ctx_for(MIXTRAL_8X7B, 4096, lay, megatron_core_version="0.11")
    unfused = ctx_for(MIXTRAL_8X7B, 4096, lay, megatron_core_version="0.10")
    short = np.array([32 * 50e-6])  # host-bound: every extra launch shows
    extra = host_exposed_time(unfused, short)[0] - host_exposed_time(fused, short)[0]
    # 4 permutes forward and 4 backward per MoE layer, 32 layers (alltoall: host_overhead)
    launches = 32 * 8 * (PERMUTE_UNFUSED - PERMUTE_FUSED)
    assert extra == pytest.approx(launches * fused.profile.host_kernel_s, rel=1e-6)
    flags = launch_spec(MIXTRAL_8X7B, unfused.cluster, unfused.job, lay[0])
    assert "--moe-permute-fusion" not in flags.args
    assert (
        "--moe-permute-fusion" in launch_spec(MIXTRAL_8X7B, fused.cluster, fused.job, lay[0]).args
    )
