"""Per-GPU compute work of one micro-batch: FLOPs by GEMM shape, attention, memory-bound bytes.

Everything here is per layer and per token (or per micro-batch), for a whole
:class:`LayoutBatch` in a few numpy expressions: :func:`compute_time` is the compute term of the
step time, :func:`recompute_time` the recompute term. FLOP counts follow Megatron's own formula
(megatron-facts §5: 2 FLOPs per multiply-add, backward = 2 x forward, causal attention halved),
so that the sum of the parts is Megatron's model-FLOPs number and the achieved-FLOP/s
efficiencies are on Megatron's basis.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.layouts import FloatArray, IntArray
from planner.model.shapes import Gemm, sharded_width
from planner.performance.collectives import ring_time
from planner.performance.context import BF16_BYTES, StepContext
from planner.performance.context_parallel import cp_core_factor
from planner.performance.cross_entropy import (
    cross_entropy_passes,
    cross_entropy_time,
    row_collective_bytes,
)
from planner.performance.expert_parallel import routed_expert_time
from planner.performance.fp8_recipe_cost import cast_bytes_factor, gemm_rate_factor
from planner.performance.memory_settings import ReplayParts, recompute_seconds
from planner.performance.moe_compute import GemmRate, router_time
from planner.performance.moe_kernels import router_region_kernels
from planner.performance.ring_attention import CpAttentionTime
from planner.performance.unfused_attention import forward_fraction, unfused_score_seconds
from planner.performance.windowed_attention import mix_windowed_core
from planner.space import comm_flags
from planner.specs import ModelSpec
from planner.stack_settings import loss_kernel


def gemm_efficiency(
    tokens: FloatArray | float,
    width: FloatArray | float,
    plateau: float,
    half_tokens: float,
    half_width: float,
    flop: FloatArray | float | None = None,
    half_flop: float = 0.0,
) -> FloatArray:
    """Achieved fraction of peak of one GEMM: a plateau times saturating size factors.

    performance-facts §1.2-1.4 and §9.1: efficiency rises with the token dimension m (weight-
    bandwidth-bound at small m), with the smaller per-GPU width min(n, k) and, above all, with
    the GEMM's size: too few output tiles leave SMs idle and fixed launch/epilogue time weighs
    more. Each factor is x / (x + x_half). ``flop`` (2 m n k of the call) with ``half_flop``
    is the size factor; bench/results/gpu_kernels.md (H100/H200, Llama TP shapes, m 1k-16k)
    found it fits the measured rates to 3-4 % median where m and width alone leave 7-10 %.
    """
    m = np.asarray(tokens, dtype=np.float64)
    w = np.asarray(width, dtype=np.float64)
    eff = plateau * (m / (m + half_tokens)) * (w / (w + half_width))
    if flop is not None and half_flop > 0:
        f = np.asarray(flop, dtype=np.float64)
        eff = eff * f / (f + half_flop)
    return np.asarray(eff, np.float64)


def elementwise_bytes_per_token(
    model: ModelSpec,
    tp: IntArray,
    sp: FloatArray,
    fp8: bool,
    recipe: str | None = None,
) -> tuple[FloatArray, FloatArray, float]:
    """Forward HBM bytes per token of the memory-bound ops of one dense and one MoE layer.

    performance-facts §3.2: norms 4h each, residual adds 6h each (both in the sequence-parallel
    region: divided by t with SP), SwiGLU 6F/t (GeLU 4F/t), rotary 4(a_q + a_kv)d/t, dropout
    about 5h per site (MoE permute/unpermute are priced with the experts by
    :func:`~planner.performance.expert_parallel.routed_expert_time`). FP8 (current
    scaling, §3.2): every GEMM input X (forward) and output gradient dY (backward) is read for
    its amax, read again and written as row- and column-wise (transposed) fp8 copies: 6 B per
    element each, over fwd + bwd = 2 B per element of (inputs + outputs) in these forward-
    equivalent units (the caller multiplies by 3); MoE expert inputs and outputs count every
    top-k copy. Widths h on the sequence-parallel side are cast before the all-gather (/t with
    SP); the others are TP-sharded (/t). These cast bytes are the fitted ones (the shared fp8
    rows ran delayed scaling); ``recipe`` scales them by its stated extra passes (tensorwise's
    amax: :mod:`planner.performance.fp8_recipe_cost`). The third value is the loss-side bytes
    per token per (V/t), forward and backward, of the fused (``native``) cross-entropy
    (mechanisms-facts §5.3); :func:`compute_time` takes the job's kernel from
    :func:`loss_time` instead.
    """
    t = tp.astype(np.float64)
    h = float(model.hidden_size)
    sp_div = np.where(sp > 0, t, 1.0)
    shared = 2 * 4 * h / sp_div + 2 * 6 * h / sp_div
    if model.hidden_dropout > 0:
        shared = shared + 2 * 5 * h / sp_div
    if model.position_embedding_type in ("rope", "yarn") and not model.multi_latent_attention:
        shared = shared + 4 * (model.num_attention_heads + model.query_groups) * model.head_dim / t
    # quick-GeGLU's clamp and offset are fused into the same pass: no sheet gives its bytes, so
    # SwiGLU's 6F [inferred]; squared ReLU as GeLU's 4F (one input, one output)
    act = 6.0 if model.gated_linear_unit else 4.0
    dense = shared + act * model.ffn_hidden_size / t
    moe = shared.copy()
    if model.is_moe:
        k = float(model.moe_router_topk)
        moe = moe + act * model.expert_ffn_hidden_size * k / t
        moe = moe + act * model.shared_expert_ffn_hidden_size / t
        # permute / unpermute: priced with the experts (expert_parallel.routed_expert_time)
    if fp8:
        c = 2.0 * cast_bytes_factor(recipe)  # fitted 6 B per element / the caller's 3
        q = model.num_attention_heads * model.head_dim
        qkv_out = q + 2 * model.query_groups * model.head_dim
        fc1 = (2.0 if model.gated_linear_unit else 1.0) + 1.0  # FC1 out (2F if gated) + FC2 in F
        # attention: QKV in h + out qkv/t, proj in q/t + out h; MLP: FC1 in h, FC2 out h
        attn_casts = c * (2 * h / sp_div + (qkv_out + q) / t)
        mlp_h = c * 2 * h / sp_div
        dense = dense + attn_casts + mlp_h + c * fc1 * model.ffn_hidden_size / t
        moe = moe + attn_casts
        if model.is_moe:
            k = float(model.moe_router_topk)
            fe, fs = model.expert_ffn_hidden_size, model.shared_expert_ffn_hidden_size
            moe = moe + c * (2 * h * k + fc1 * fe * k) / t  # each routed copy, in + out
            if fs > 0:
                moe = moe + mlp_h + c * fc1 * fs / t
    return dense, moe, 16.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ComputeTimes:
    """Forward and forward + backward seconds of one micro-batch on the busiest rank."""

    core: FloatArray
    """Core attention (and unfused score traffic) of one layer, forward."""
    stage_fwd: FloatArray
    """Decoder layers of the busiest rank, forward."""
    mtp_fwd: FloatArray
    """MTP layers with their eh-projections (on the rank that holds them), forward."""
    compute_mb: FloatArray
    """Forward + backward (3x forward) of the busiest rank, the last rank's loss included."""
    replay: ReplayParts
    """What each selective-recompute module replays (planner.performance.memory_settings)."""


def gemm_fwd_time(
    ctx: StepContext,
    g: Gemm,
    tokens: FloatArray,
    shard_tp: FloatArray,
    efficiency_tokens: FloatArray | None = None,
) -> FloatArray:
    """Forward seconds of one GEMM for ``tokens`` tokens on one GPU (megatron-facts §5 FLOPs)."""
    gpu, prof = ctx.gpu, ctx.profile
    tp_int = shard_tp.astype(np.int64)
    n, k = sharded_width(g, tp_int)
    width = np.minimum(n, k)
    flop = g.fwd_flop_per_token * tokens / (shard_tp if g.shard else 1.0)
    m = tokens if efficiency_tokens is None else efficiency_tokens
    call_flop = 2.0 * m * n * k  # one GEMM call's size (the size factor of gemm_efficiency)
    if ctx.fp8 and gpu.peak_fp8_flop_per_s is not None:
        eff = gemm_efficiency(
            m,
            width,
            prof.fp8_gemm_efficiency,
            prof.fp8_half_tokens,
            prof.fp8_half_width,
            call_flop,
            prof.fp8_half_time_s * gpu.peak_fp8_flop_per_s,
        )
        # the recipe's stated rate against the fitted per-tensor one (blockwise: 0.85)
        rate = gpu.peak_fp8_flop_per_s * eff * gemm_rate_factor(ctx.fp8_recipe)
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


def gemms_time(
    ctx: StepContext,
    gs: tuple[Gemm, ...],
    tok: FloatArray,
    shard: FloatArray,
    eff_tok: FloatArray | None = None,
) -> FloatArray:
    """Forward seconds of a layer's GEMMs, one after the other."""
    total = np.zeros_like(tok)
    for g in gs:
        total = total + gemm_fwd_time(ctx, g, tok, shard, eff_tok)
    return total


def loss_time(ctx: StepContext) -> FloatArray:
    """Cross-entropy of one micro-batch on one last-stage rank, forward + backward, by the
    job's kernel (mechanisms-facts §5.2-5.4: HBM passes per logit, unfused 38 + 14, native
    10 + 6, TE 6 + 4, and the loss's TP collectives over the T rows in fp32, §5.1)."""
    impl, tokens, tp = loss_kernel(ctx.job), ctx.tokens, ctx.batch.tp
    passes = cross_entropy_passes(impl)
    rows = row_collective_bytes(impl, tokens)
    one = np.ones_like(tp)
    if passes.tp_all_gather_values:  # TE: one all-gather, sized as the gathered total
        coll = ring_time(ctx.links, tp, one, rows * tp, 1.0, op="all_gather")
    else:  # unfused / native: all-reduces of T fp32 values
        coll = ring_time(ctx.links, tp, one, rows, 2.0)
    return cross_entropy_time(
        impl,
        tokens=tokens,
        vocab_padded=ctx.vocab,
        tp=ctx.tp,
        hbm_bytes_per_s=ctx.hbm_bytes_per_s,
        collective_s=coll,
    ).total_s


def core_attention_time(ctx: StepContext, ring: CpAttentionTime | None = None) -> FloatArray:
    """Forward seconds of one layer's core attention (flash attention, performance-facts §4),
    the mean over full and sliding-window layers (planner.performance.windowed_attention)."""
    prof, gpu, tokens, tp, s = ctx.profile, ctx.gpu, ctx.tokens, ctx.tp, ctx.seq
    chunk = s / ctx.cp
    attn_eff = prof.attention_efficiency * chunk / (chunk + prof.attention_half_seq)
    core_flop = ctx.shapes.core_attention_fwd_flop_per_token_per_seq * s * tokens / tp
    core = core_flop / (gpu.peak_bf16_flop_per_s * np.maximum(attn_eff, 1e-6))
    # cp > 1: the ring's c calls of 2c blocks instead of one s / c chunk (context_parallel)
    full_eff = prof.attention_efficiency * s / (s + prof.attention_half_seq)
    core = core * cp_core_factor(ctx, attn_eff, full_eff, ring)
    core = mix_windowed_core(ctx, core, core_flop)
    return np.asarray(core + unfused_scores_time(ctx) / 3.0, np.float64)


def unfused_scores_time(ctx: StepContext) -> FloatArray:
    """Forward + backward seconds of one layer's score-matrix traffic: a/t heads x s keys per
    token through HBM with ``--attention-backend unfused`` (none with flash/fused attention).
    A windowed layer is the same: the unfused path computes the full s x s scores and masks
    them [inferred: no sheet prices a windowed unfused kernel]."""
    if ctx.job.attention_backend != "unfused":
        return np.zeros_like(ctx.tokens)
    return unfused_score_seconds(
        heads_per_gpu=ctx.model.num_attention_heads / ctx.tp,
        seq_len=ctx.seq,
        tokens=ctx.tokens,
        hbm_bytes_per_s=ctx.hbm_bytes_per_s,
        attention_dropout=ctx.model.attention_dropout > 0,
        extra_bytes_per_score=ctx.profile.attention_score_bytes,
    )


def logits_time(ctx: StepContext) -> FloatArray:
    """Forward seconds of the output layer (h x V/t GEMM) for one micro-batch."""
    prof, gpu, tokens, tp, h, vocab = (
        ctx.profile,
        ctx.gpu,
        ctx.tokens,
        ctx.tp,
        ctx.hidden,
        ctx.vocab,
    )
    logit_eff = gemm_efficiency(
        tokens,
        np.minimum(vocab / tp, h),
        prof.gemm_efficiency,
        prof.gemm_half_tokens,
        prof.gemm_half_width,
        2.0 * tokens * vocab / tp * h,
        prof.gemm_half_time_s * gpu.peak_bf16_flop_per_s,
    )
    return np.asarray(
        2 * h * vocab / tp * tokens / (gpu.peak_bf16_flop_per_s * logit_eff), np.float64
    )


def router_fwd_equivalent(ctx: StepContext) -> FloatArray:
    """One MoE layer's router (gating GEMM h x E, its fp32 score passes and its kernels' fixed
    time, mechanisms-facts §4.3, §3.2) in this module's forward units: (forward + backward) / 3,
    as the caller triples it. With SP each GPU routes its tokens / t (megatron-facts rule 33)."""
    prof, gpu = ctx.profile, ctx.gpu
    rate = GemmRate(
        peak_flop_per_s=gpu.peak_bf16_flop_per_s,  # the gate runs in bf16 (fp32 output)
        plateau=prof.gemm_efficiency,
        half_tokens=prof.gemm_half_tokens,
        half_flop=prof.gemm_half_time_s * gpu.peak_bf16_flop_per_s,
        hbm_bytes_per_s=ctx.hbm_bytes_per_s,
    )
    # the router region's kernels, as many as the host term launches (moe_kernels, §3.2): the
    # unfused router with the alltoall preprocessing, or DeepEP's fused layout under flex
    flex = comm_flags.flex_dispatch(ctx.model, ctx.cluster, ctx.batch)
    (a_fwd, a_bwd), (d_fwd, d_bwd) = (router_region_kernels(flex=f) for f in (False, True))
    fwd, bwd = router_time(
        rate,
        tokens=ctx.tokens / ctx.tp,
        hidden=ctx.hidden,
        experts=float(ctx.model.num_experts or 1),
        kernels_fwd=np.where(flex, d_fwd, a_fwd),
        kernels_bwd=np.where(flex, d_bwd, a_bwd),
    )
    return np.asarray((fwd + bwd) / 3.0, np.float64)


def compute_time(ctx: StepContext, ring: CpAttentionTime | None = None) -> ComputeTimes:
    """Compute of one micro-batch on the busiest rank: GEMMs, attention, memory-bound ops, loss.

    Backward = 2 x forward (megatron-facts §5); the last rank adds the output layer, the loss
    and any MTP layers, and the slower of the two ranks sets the pace.
    """
    sh, tokens, tp, hbm = ctx.shapes, ctx.tokens, ctx.tp, ctx.hbm_bytes_per_s
    attn_gemm = gemms_time(ctx, sh.attention_gemms, tokens, tp)
    core = core_attention_time(ctx, ring)
    dense_bytes, moe_bytes, _ = elementwise_bytes_per_token(
        ctx.model, ctx.batch.tp, ctx.sp, ctx.fp8, ctx.fp8_recipe
    )
    dense_fwd = (
        attn_gemm
        + core
        + gemms_time(ctx, sh.dense_mlp_gemms, tokens, tp)
        + dense_bytes * tokens / hbm
    )
    moe_fwd = np.zeros_like(tokens)
    if ctx.model.is_moe:
        moe_fwd = (
            attn_gemm
            + core
            + gemms_time(ctx, sh.shared_expert_gemms, tokens, tp)
            + routed_expert_time(ctx)
            + router_fwd_equivalent(ctx)
            + moe_bytes * tokens / hbm
        )
    moe_frac = ctx.moe_fraction
    layer_fwd = (1 - moe_frac) * dense_fwd + moe_frac * moe_fwd
    stage_fwd = ctx.layers_per_stage * layer_fwd
    logits_fwd = logits_time(ctx)
    heads = 1 + sh.mtp_layers
    # each MTP depth: one layer of the last decoder layer's kind and its eh-projection GEMM
    # (megatron-facts §5.3 MTP extras), on the last rank unless a pipeline layout places the
    # MTP stage on another (mechanisms-facts §7); the output layers and losses stay on the last
    mtp_eh = gemms_time(ctx, sh.mtp_extra_gemms, tokens, tp)
    mtp_fwd = sh.mtp_layers * ((moe_fwd if sh.mtp_is_moe else dense_fwd) + mtp_eh)
    on_last = ctx.mtp_on_last
    last_extra = 3 * (heads * logits_fwd + on_last * mtp_fwd) + heads * loss_time(ctx)
    mtp_rank = (1.0 - on_last) * 3 * (ctx.mtp_rank_layers * layer_fwd + mtp_fwd)
    compute_mb = np.maximum(
        np.maximum(3 * stage_fwd, 3 * ctx.last_layers * layer_fwd + last_extra), mtp_rank
    )
    h, model = ctx.model.hidden_size, ctx.model
    up_proj = tuple(
        g
        for g in sh.attention_gemms
        if model.multi_latent_attention and g.k != h and g.shard == "n"
    )
    # a replay runs the forward's share of the score traffic (13 of 32 B), not a third of it
    fwd_share = forward_fraction(attention_dropout=model.attention_dropout > 0)
    replay = ReplayParts(
        core_attn=core + (fwd_share - 1.0 / 3.0) * unfused_scores_time(ctx),
        dense_mlp=gemms_time(ctx, sh.dense_mlp_gemms, tokens, tp) + dense_bytes * tokens / hbm / 2,
        moe_block=np.maximum(moe_fwd - attn_gemm - core, 0.0),
        shared_experts=gemms_time(ctx, sh.shared_expert_gemms, tokens, tp),
        mla_up_proj=gemms_time(ctx, up_proj, tokens, tp),
        # SwiGLU reads 2F_e and writes F_e per routed copy; a norm reads and writes h per token
        moe_act=3 * BF16_BYTES * model.expert_ffn_hidden_size * model.moe_router_topk
        * tokens / tp / hbm,
        layernorm=2 * BF16_BYTES * h * tokens / tp / hbm,
    )  # fmt: skip
    return ComputeTimes(
        core=core, stage_fwd=stage_fwd, mtp_fwd=mtp_fwd, compute_mb=compute_mb, replay=replay
    )


def recompute_time(ctx: StepContext, c: ComputeTimes) -> FloatArray:
    """Recompute of one micro-batch (megatron-facts §1.6): the replays of the selective modules
    (core attention by default; planner.performance.memory_settings), or with full recompute the
    forward of the recomputed layers again."""
    # full recompute replays each layer's forward: its share of the score traffic (unfused)
    fwd_share = forward_fraction(attention_dropout=ctx.model.attention_dropout > 0)
    scores_fwd = ctx.layers_per_stage * (fwd_share - 1.0 / 3.0) * unfused_scores_time(ctx)
    return recompute_seconds(
        ctx.batch,
        c.replay,
        dense_layers=ctx.layers_per_stage * (1 - ctx.moe_fraction),
        moe_layers=ctx.layers_per_stage * ctx.moe_fraction,
        layers_fwd=c.stage_fwd + c.mtp_fwd + scores_fwd,
    )
