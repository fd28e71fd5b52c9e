"""The throughput model: step time of Megatron-LM training for a batch of layouts.

Shape from physics, a few dimensionless coefficients from measurements (ARCHITECTURE.md
"Performance model", performance-facts §9). One step of the slowest (last) pipeline stage is

    m x (compute + recompute + exposed TP/CP/EP comm + exposed PP p2p + per-micro-batch overhead)
    + bubble ((p-1)/v of one micro-batch's stage time, megatron-facts §6)
    + exposed DP gradient reduce-scatter / parameter all-gather (+ the last bucket)
    + optimizer step (memory-bound Adam over the local shard) + per-step overhead
    + straggler (the GPU-bound parts run at the pace of the slowest of the job's N GPUs),

and every term is returned in ``breakdown`` so that the parts sum to ``step_time_s``.

Conventions: ``model_tflops_per_gpu`` uses Megatron's model-FLOPs formula (megatron-facts §5,
vocabulary padded by each layout's tp, no recompute factor). ``mfu`` divides that by the GPU's
dense **bf16** peak even for fp8 jobs, so that MFUs of bf16 and fp8 runs compare (NVIDIA's
dgxc tables divide fp8 runs by the fp8 peak instead, see ``shared/data/README.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from planner.layout_settings import MODULE_BITS
from planner.layouts import SHARD_FULL, SHARD_NONE, FloatArray, IntArray, LayoutBatch
from planner.memory.estimate import fp8_gather
from planner.memory.recompute import effective_modules
from planner.memory.stage_loads import layout_rank_layers
from planner.model.flops import flops_per_iteration
from planner.performance.collectives import (
    Links,
    all_to_all_time,
    crosses_nodes,
    link_share,
    members_per_node,
    p2p_share,
    p2p_time,
    ring_time,
)
from planner.performance.compute import (
    BF16_BYTES,
    Gemm,
    elementwise_bytes_per_token,
    gemm_efficiency,
    layer_shapes,
    padded_vocab,
    sharded_width,
    stage_layers,
)
from planner.performance.compute import (
    model_flops_per_iteration as model_flops_per_iteration,  # re-exported
)
from planner.performance.expert_parallel import PERMUTE_HBM_FRACTION, grouped_expert_time
from planner.performance.memory_settings import (
    ReplayParts,
    activation_offload_seconds,
    adam_bytes_per_param,
    grad_reduce_bytes,
    offloaded_activation_bytes,
    optimizer_offload_seconds,
    recompute_seconds,
)
from planner.performance.profile import PerformanceProfile as PerformanceProfile  # re-exported
from planner.performance.profile import default_profile as default_profile  # re-exported
from planner.space import comm_flags as overlap
from planner.space.comm_flags import tp_comm_overlap
from planner.specs import ClusterSpec, GPUSpec, ModelSpec, TrainingJob

DDP_BUCKET_PARAMS = 40e6  # performance-facts §6.1: bucket = max(40 M, 1 M x DP) parameters

BREAKDOWN_KEYS = (
    "compute_s",
    "recompute_s",
    "tp_comm_s",
    "cp_comm_s",
    "ep_comm_s",
    "pp_comm_s",
    "dp_comm_s",
    "bubble_s",
    "optimizer_s",
    "offload_s",
    "overhead_s",
    "straggler_s",
)


@dataclass(frozen=True, slots=True)
class PerformanceEstimate:
    """Per-layout step time and throughput, with the exposed seconds of each part."""

    step_time_s: FloatArray
    tokens_per_s_per_gpu: FloatArray
    model_tflops_per_gpu: FloatArray
    mfu: FloatArray
    """Model FLOPs / (step time x GPUs x dense bf16 peak), whatever the job's precision."""
    breakdown: dict[str, FloatArray]


def _gemm_fwd_time(
    g: Gemm,
    tokens: FloatArray,
    shard_tp: FloatArray,
    gpu: GPUSpec,
    prof: PerformanceProfile,
    fp8: bool,
    efficiency_tokens: FloatArray | None = None,
) -> FloatArray:
    """Forward seconds of one GEMM for ``tokens`` tokens on one GPU (megatron-facts §5 FLOPs)."""
    tp_int = shard_tp.astype(np.int64)
    n, k = sharded_width(g, tp_int)
    width = np.minimum(n, k)
    flop = g.fwd_flop_per_token * tokens / (shard_tp if g.shard else 1.0)
    m = tokens if efficiency_tokens is None else efficiency_tokens
    call_flop = 2.0 * m * n * k  # one GEMM call's size (the size factor of gemm_efficiency)
    if fp8 and gpu.peak_fp8_flop_per_s is not None:
        eff = gemm_efficiency(
            m,
            width,
            prof.fp8_gemm_efficiency,
            prof.fp8_half_tokens,
            prof.fp8_half_width,
            call_flop,
            prof.fp8_half_time_s * gpu.peak_fp8_flop_per_s,
        )
        rate = gpu.peak_fp8_flop_per_s * eff
    else:
        eff = gemm_efficiency(
            m,
            width,
            prof.gemm_efficiency,
            prof.gemm_half_tokens,
            prof.gemm_half_width,
            call_flop,
            prof.gemm_half_time_s * gpu.peak_bf16_flop_per_s,
        )
        rate = gpu.peak_bf16_flop_per_s * eff
    return np.asarray(flop / np.maximum(rate, 1.0), np.float64)


def exposed_dp_comm(
    comm: FloatArray, pass_mb: FloatArray, pp: FloatArray, vpp: FloatArray, overlap: float
) -> FloatArray:
    """Exposed part of the first stage's gradient reduce-scatter (or parameter all-gather).

    Each model chunk's gradients are reduced once its last backward pass ends (performance-facts
    §6.1). Without interleaving that is one chunk, hidden only behind the last micro-batch's
    backward. With v chunks per rank, chunk i's reduction runs under the backward passes of the
    chunks that finish after it, about p virtual micro-batch steps (p x pass / v) apart, and only
    the last chunk's 1/v of the traffic is left with its own last pass ("exposes only one DP
    communication chunk"). The parameter all-gather mirrors this in the next forward.
    """
    early = (vpp - 1.0) / vpp
    hidden_early = overlap * (vpp - 1.0) * pp * pass_mb / vpp
    last = np.maximum(comm / vpp - overlap * pass_mb / vpp, 0.0)
    return np.asarray(np.maximum(comm * early - hidden_early, 0.0) + last, np.float64)


def expected_max_normal(n: IntArray) -> FloatArray:
    """Expected maximum of ``n`` standard normal draws (Blom's approximation; 0 for n = 1)."""
    values, inverse = np.unique(np.maximum(np.asarray(n, np.int64), 1), return_inverse=True)
    z = np.array([NormalDist().inv_cdf((v - 0.375) / (v + 0.25)) for v in values.tolist()])
    return np.asarray(z[inverse].reshape(np.shape(n)), np.float64)


def estimate_performance(
    model: ModelSpec,
    cluster: ClusterSpec,
    job: TrainingJob,
    batch: LayoutBatch,
    profile: PerformanceProfile,
) -> PerformanceEstimate:
    """Step time, tokens/s per GPU, model TFLOP/s per GPU, MFU and the breakdown per layout."""
    gpu = cluster.gpu
    prof = profile
    sh = layer_shapes(model)
    fp8 = job.precision == "fp8" and gpu.peak_fp8_flop_per_s is not None
    f = np.float64
    tp, pp, vpp, cp = (
        batch.tp.astype(f),
        batch.pp.astype(f),
        batch.vpp.astype(f),
        batch.cp.astype(f),
    )
    ep, etp, dp = batch.ep.astype(f), batch.etp.astype(f), batch.dp.astype(f)
    b = batch.micro_batch_size.astype(f)
    sp = batch.sequence_parallel.astype(f)
    s = float(job.seq_length)
    h = float(model.hidden_size)
    m = np.maximum(job.global_batch_size / np.maximum(b * dp, 1.0), 1.0)
    tokens = b * s / cp  # tokens of one micro-batch on one GPU (the GEMMs' m after SP gather)
    links = Links(
        gpus_per_node=cluster.gpus_per_node,
        nvlink_busbw_bytes_per_s=gpu.intra_node_bandwidth_bytes_per_s * prof.nvlink_efficiency,
        nic_busbw_bytes_per_s=cluster.inter_node_bandwidth_bytes_per_s * prof.network_efficiency,
        intra_latency_s=prof.intra_latency_s,
        inter_latency_s=prof.inter_latency_s,
    )
    hbm = gpu.hbm_bandwidth_bytes_per_s * prof.hbm_efficiency
    steal = prof.overlap_interference

    def share(size: IntArray, stride: IntArray) -> FloatArray:
        return link_share(links, size, stride)

    def gemms(
        gs: tuple[Gemm, ...], tok: FloatArray, shard: FloatArray, eff_tok: FloatArray | None = None
    ) -> FloatArray:
        total = np.zeros_like(tok)
        for g in gs:
            total = total + _gemm_fwd_time(g, tok, shard, gpu, prof, fp8, eff_tok)
        return total

    # --- forward seconds per layer per micro-batch -------------------------------------------
    attn_gemm = gemms(sh.attention_gemms, tokens, tp)
    chunk = s / cp
    attn_eff = prof.attention_efficiency * chunk / (chunk + prof.attention_half_seq)
    core_flop = sh.core_attention_fwd_flop_per_token_per_seq * s * tokens / tp
    core = core_flop / (gpu.peak_bf16_flop_per_s * np.maximum(attn_eff, 1e-6))
    # unfused attention: a/t heads x s keys per token through HBM (0 with flash attention)
    scores = prof.attention_score_bytes * model.num_attention_heads / tp * s * tokens / hbm
    core = core + scores / 3.0
    dense_bytes, moe_bytes, ce_bytes = elementwise_bytes_per_token(
        model, batch.tp, sp, fp8, permute_slowdown=prof.hbm_efficiency / PERMUTE_HBM_FRACTION
    )
    dense_fwd = (
        attn_gemm + core + gemms(sh.dense_mlp_gemms, tokens, tp) + dense_bytes * tokens / hbm
    )
    moe_fwd = np.zeros_like(tokens)
    if model.is_moe:
        e = float(model.num_experts or 1)
        tok_moe = tokens / tp  # MoE with tp > 1 needs SP (megatron-facts rule 33)
        per_expert = tok_moe * etp * ep * model.moe_router_topk / e
        local_experts = np.maximum(e / ep, 1.0)
        expert = grouped_expert_time(
            sh.expert_gemms,
            tok_moe * etp,
            etp,
            per_expert,
            local_experts,
            gpu,
            plateau=prof.fp8_gemm_efficiency if fp8 else prof.gemm_efficiency,
            half_time_s=prof.fp8_half_time_s if fp8 else prof.gemm_half_time_s,
            fp8=fp8,
            hbm_bytes_per_s=hbm,
        )
        imbalance = prof.moe_imbalance  # once on the GEMMs, once on the all-to-all
        moe_fwd = (
            attn_gemm
            + core
            + gemms(sh.shared_expert_gemms, tokens, tp)
            + expert * imbalance
            + moe_bytes * tokens / hbm
        )
    n_layers = float(model.num_layers)
    # the busiest pipeline rank sets the pace; the last rank also runs the loss (pipeline.py)
    layers_per_stage, last_layers = stage_layers(model.num_layers, batch)
    if batch.mem.has_layout.any():  # --pipeline-model-parallel-layout
        layers_per_stage, last_layers = layout_rank_layers(batch, layers_per_stage, last_layers)
    moe_frac = sh.num_moe_layers / n_layers
    layer_fwd = (1 - moe_frac) * dense_fwd + moe_frac * moe_fwd
    stage_fwd = layers_per_stage * layer_fwd
    vocab = padded_vocab(model, tp)
    logit_eff = gemm_efficiency(
        tokens,
        np.minimum(vocab / tp, h),
        prof.gemm_efficiency,
        prof.gemm_half_tokens,
        prof.gemm_half_width,
        2.0 * tokens * vocab / tp * h,
        prof.gemm_half_time_s * gpu.peak_bf16_flop_per_s,
    )
    logits_fwd = 2 * h * vocab / tp * tokens / (gpu.peak_bf16_flop_per_s * logit_eff)
    heads = 1 + sh.mtp_layers
    mtp_fwd = sh.mtp_layers * (moe_fwd if sh.mtp_is_moe else dense_fwd)
    last_extra = 3 * (heads * logits_fwd + mtp_fwd) + heads * ce_bytes * vocab / tp * tokens / hbm
    compute_mb = np.maximum(3 * stage_fwd, 3 * last_layers * layer_fwd + last_extra)

    # --- recompute (megatron-facts §1.6; modules and block recompute: memory_settings) --------
    layers_fwd = stage_fwd + mtp_fwd
    up_proj = tuple(g for g in sh.attention_gemms if model.multi_latent_attention and g.k != h)
    replay = ReplayParts(
        core_attn=core,
        dense_mlp=gemms(sh.dense_mlp_gemms, tokens, tp) + dense_bytes * tokens / hbm / 2,
        moe_block=np.maximum(moe_fwd - attn_gemm - core, 0.0),
        shared_experts=gemms(sh.shared_expert_gemms, tokens, tp),
        mla_up_proj=gemms(tuple(g for g in up_proj if g.shard == "n"), tokens, tp),
        # SwiGLU reads 2F_e and writes F_e per routed copy; a norm reads and writes h per token
        moe_act=3 * BF16_BYTES * model.expert_ffn_hidden_size * model.moe_router_topk
        * tokens / tp / hbm,
        layernorm=2 * BF16_BYTES * h * tokens / tp / hbm,
    )  # fmt: skip
    recompute_mb = recompute_seconds(
        batch,
        replay,
        dense_layers=layers_per_stage * (1 - moe_frac),
        moe_layers=layers_per_stage * moe_frac,
        layers_fwd=layers_fwd,
    )
    full = (batch.recompute == 2).astype(f)
    moe_replay = ((effective_modules(batch) & MODULE_BITS["moe"]) != 0).astype(f)

    # --- tensor parallel: per layer 4 AG/RS (SP) or 2 AR (no SP) fwd, the same bwd -------------
    act_bytes = tokens * h * BF16_BYTES
    one = np.ones_like(batch.tp)
    coll_sp = ring_time(links, batch.tp, one, act_bytes, 1.0)
    coll_ar = ring_time(links, batch.tp, one, act_bytes, 2.0)
    tp_layer_fwd = np.where(sp > 0, 4 * coll_sp, 2 * coll_ar)
    # MoE layer: attention (and shared experts) on the TP group; routed experts gather their
    # K x tokens over the expert-TP group when etp > 1 (megatron-facts §1.1, §3.1)
    shared_half = 0.5 if sh.shared_expert_gemms else 0.0
    moe_tp_fwd = tp_layer_fwd * (0.5 + shared_half)
    etp_fwd = np.zeros_like(tokens)
    if model.is_moe:
        routed_bytes = act_bytes * model.moe_router_topk * batch.etp / tp
        etp_fwd = np.where(
            batch.etp > 1,
            np.where(
                sp > 0,
                2 * ring_time(links, batch.etp, one, routed_bytes, 1.0),
                ring_time(links, batch.etp, one, routed_bytes, 2.0),
            ),
            0.0,
        )
    stage_tp_fwd = layers_per_stage * ((1 - moe_frac) * tp_layer_fwd + moe_frac * moe_tp_fwd)
    stage_etp_fwd = layers_per_stage * moe_frac * etp_fwd  # grouped GEMMs: not overlapped
    # TE userbuffers hide TP collectives only where --tp-comm-overlap is emitted
    tp_hidden = np.where(tp_comm_overlap(cluster, batch.tp, sp > 0), prof.tp_overlap, 0.0)
    tp_mb = (2 + full) * (stage_tp_fwd * (1 - tp_hidden) + stage_etp_fwd)
    tp_mb = tp_mb + steal * share(batch.tp, one) * (2 + full) * stage_tp_fwd * tp_hidden

    # --- context parallel: ring exchange of K/V hidden behind attention (§6.3) ---------------
    if model.multi_latent_attention:
        kv_width = (
            model.num_attention_heads
            / tp
            * (
                (model.qk_head_dim or 0)
                + (model.qk_pos_emb_head_dim or 0)
                + (model.v_head_dim or 0)
            )
        )
    else:
        kv_width = 2 * np.maximum(model.query_groups / tp, 1.0) * model.head_dim
    kv_step = p2p_time(
        links, crosses_nodes(links, batch.cp, batch.tp), tokens * kv_width * BF16_BYTES
    )
    cp_layer_fwd = np.where(batch.cp > 1, np.maximum((cp - 1) * kv_step - core, 0.0), 0.0)
    cp_mb = (3 + full) * layers_per_stage * cp_layer_fwd
    cp_hidden = np.where(batch.cp > 1, np.minimum((cp - 1) * kv_step, core), 0.0)
    cp_cross = crosses_nodes(links, batch.cp, batch.tp)
    cp_mb = cp_mb + steal * p2p_share(links, cp_cross) * (3 + full) * layers_per_stage * cp_hidden

    # --- expert parallel: dispatch + combine all-to-all per MoE layer, fwd and bwd (§5) ------
    ep_mb = np.zeros_like(tokens)
    ep_bubble_extra = np.zeros_like(tokens)
    if model.is_moe:
        a2a_bytes = tokens / tp * model.moe_router_topk * h * BF16_BYTES
        nodes = batch.ep / members_per_node(links, batch.ep, batch.etp)
        dedup = overlap.distinct_node_share(nodes, model.moe_router_topk)
        inter_share = np.where(overlap.flex_dispatch(model, cluster, batch), dedup, 1.0)
        a2a = all_to_all_time(links, batch.ep, batch.etp, a2a_bytes, inter_share)
        a2a = a2a * prof.moe_imbalance
        a2a_all = (4 + 2 * full + 2 * moe_replay) * layers_per_stage * moe_frac * a2a
        # 1F1B A2A overlap (planner.space.comm_flags): one micro-batch's dispatch/combine runs
        # under the
        # other's compute, so at most that compute hides it. Only steady-state steps have a
        # partner: rank 0 warms up W = 2(p-1) + (v-1)p + 1 virtual micro-batches (megatron-facts
        # §3.3) and cools down as many; at p = 1 that leaves (m-1)/m paired.
        on = overlap.enabled(model, cluster, batch)
        warmup = np.where(batch.pp > 1, 2 * (pp - 1) + (vpp - 1) * pp + 1, 1.0)
        paired = np.maximum(m * vpp - warmup, 0.0) / (m * vpp)
        # the partner's compute is shared with the TP collectives that TE already hides in it
        window = np.maximum(compute_mb - (2 + full) * stage_tp_fwd * tp_hidden, 0.0)
        ep_hidden = np.where(on, prof.ep_overlap * np.minimum(a2a_all, window) * paired, 0.0)
        ep_mb = a2a_all - ep_hidden + steal * share(batch.ep, batch.etp) * ep_hidden
        ep_bubble_extra = ep_hidden  # warm-up/cool-down (the bubble) runs the A2A unhidden

    # --- pipeline p2p: send activations and gradients per micro-batch, x v interleaved -------
    p2p_bytes = act_bytes / np.where(sp > 0, tp, 1.0)
    p2p_cross = crosses_nodes(links, batch.pp, batch.tp * batch.cp * batch.dp)
    p2p = p2p_time(links, p2p_cross, p2p_bytes)
    p2p_exposed = np.where(vpp > 1, 1 - prof.pp_overlap, 1.0)
    pp_mb = np.where(batch.pp > 1, 2 * vpp * p2p * p2p_exposed, 0.0)
    pp_hidden = np.where(batch.pp > 1, 2 * vpp * p2p * (1 - p2p_exposed), 0.0)
    pp_mb = pp_mb + steal * p2p_share(links, p2p_cross) * pp_hidden

    overhead_mb = (layers_per_stage + sh.mtp_layers) * prof.layer_overhead_s
    stage_mb = compute_mb + recompute_mb + tp_mb + cp_mb + ep_mb + pp_mb + overhead_mb
    # megatron-facts §6 / performance-facts §9.6
    bubble = (pp - 1) / vpp * (stage_mb + ep_bubble_extra)

    # --- data parallel: grads over dp x cp, experts over expert-dp (§6.1) --------------------
    dense_layer_params = (
        sh.attention_params
        + sh.norm_params
        + ((1 - moe_frac) * sh.dense_mlp_params + moe_frac * sh.shared_expert_params)
    )
    p_dense = (layers_per_stage * dense_layer_params + h * vocab) / tp
    p_dense = p_dense + layers_per_stage * moe_frac * sh.router_params
    p_exp = layers_per_stage * moe_frac * sh.expert_params_per_layer / (ep * etp)
    dgroup = batch.dp * batch.cp
    edp = np.maximum(batch.expert_dp, 1)
    eone = batch.etp * batch.ep
    shard = batch.optimizer_sharding
    grad_b = grad_reduce_bytes(batch, job.precision)
    rs = ring_time(links, dgroup, batch.tp, p_dense * grad_b, 1.0) + ring_time(
        links, edp, eone, p_exp * grad_b, 1.0
    )
    # --fp8-param-gather: linear weights are gathered in fp8 (1 byte), the embedding in bf16
    gather = fp8_gather(job, batch) & fp8
    gather_bytes = np.where(gather, 1.0, BF16_BYTES)
    p_embed = h * vocab / tp
    ag = ring_time(
        links, dgroup, batch.tp, (p_dense - p_embed) * gather_bytes + p_embed * BF16_BYTES, 1.0
    ) + ring_time(links, edp, eone, p_exp * gather_bytes, 1.0)
    ar = ring_time(links, dgroup, batch.tp, p_dense * grad_b, 2.0) + ring_time(
        links, edp, eone, p_exp * grad_b, 2.0
    )
    bwd_mb, fwd_mb = 2 * compute_mb / 3, compute_mb / 3
    grad_t = np.where(shard == SHARD_NONE, ar, rs)
    param_t = np.where(shard == SHARD_NONE, 0.0, ag)
    exposed = exposed_dp_comm(grad_t, bwd_mb, pp, vpp, prof.dp_overlap) + exposed_dp_comm(
        param_t, fwd_mb, pp, vpp, prof.dp_overlap
    )
    tail_frac = np.minimum(
        1.0, np.maximum(DDP_BUCKET_PARAMS, 1e6 * dp) / np.maximum(p_dense + p_exp, 1.0)
    )
    dp_sync = np.maximum(exposed, tail_frac * (grad_t + param_t))
    fsdp_t = m * (2 * ag + rs)  # ZeRO-3: gather params fwd and bwd, scatter grads, per mb
    fsdp = np.maximum(fsdp_t - prof.dp_overlap * m * compute_mb, tail_frac * fsdp_t / m)
    dp_s = np.where(shard == SHARD_FULL, fsdp, dp_sync)
    # hidden DP traffic still steals SMs/HBM from the compute it overlaps (overlap_interference)
    dp_hidden = np.where(
        shard == SHARD_FULL,
        np.maximum(fsdp_t - fsdp, 0.0),
        np.maximum(grad_t + param_t - dp_sync, 0.0),
    )
    dp_s = dp_s + steal * share(dgroup, batch.tp) * dp_hidden

    # --- optimizer step over the local shard (§3.3) ------------------------------------------
    sharded = shard != SHARD_NONE
    p_local = np.where(sharded, p_dense / (dp * cp), p_dense) + np.where(
        sharded, p_exp / edp, p_exp
    )
    offloaded = batch.mem.optimizer_offload_fraction
    optimizer = (1 - offloaded) * adam_bytes_per_param(batch) * p_local / hbm
    optimizer = optimizer + optimizer_offload_seconds(
        cluster, batch, p_local, prof.host_optimizer_params_per_s
    )

    breakdown = {
        "compute_s": m * compute_mb,
        "recompute_s": m * recompute_mb,
        "tp_comm_s": m * tp_mb,
        "cp_comm_s": m * cp_mb,
        "ep_comm_s": m * ep_mb,
        "pp_comm_s": m * pp_mb,
        "dp_comm_s": dp_s,
        "bubble_s": bubble,
        "optimizer_s": optimizer,
        "offload_s": m
        * activation_offload_seconds(
            cluster, model, batch, offloaded_activation_bytes(model, job, batch), compute_mb
        ),
        "overhead_s": m * overhead_mb + prof.step_overhead_s,
    }
    # every step synchronises all GPUs: the GPU-bound time follows the slowest one (§8 spread)
    gpus = tp * pp * cp * dp
    # (the bubble is (p-1)/v stage times, of which only the compute waits for the slowest GPU)
    slowest = prof.straggler_spread * expected_max_normal(gpus.astype(np.int64))
    breakdown["straggler_s"] = slowest * (m + (pp - 1) / vpp) * (compute_mb + recompute_mb)
    breakdown = {k: np.asarray(v, f) for k, v in breakdown.items()}
    step = np.zeros_like(tokens)
    for value in breakdown.values():
        step = step + value
    tokens_per_s = job.global_batch_size * s / (step * gpus)
    flops = flops_per_iteration(model, job, batch)  # the memory engineer's §5 implementation
    tflops = flops / (step * gpus) / 1e12
    return PerformanceEstimate(
        step_time_s=step,
        tokens_per_s_per_gpu=np.asarray(tokens_per_s, f),
        model_tflops_per_gpu=np.asarray(tflops, f),
        mfu=np.asarray(tflops * 1e12 / gpu.peak_bf16_flop_per_s, f),
        breakdown=breakdown,
    )
