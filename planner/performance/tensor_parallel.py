"""Tensor-parallel communication: the TP all-reduce / all-gather + reduce-scatter per layer.

Per layer, forward: 2 all-reduces without sequence parallelism, or 2 all-gathers + 2
reduce-scatters with it (megatron-facts §1.1), once more with full recompute. Backward: with
TE's userbuffers the same again, a profile fraction hidden; without them the layer's own
backward collectives, part of them under its dgrad / wgrad GEMMs (:mod:`tp_backward`). A MoE layer runs only attention (and shared experts) on the TP group; its routed
experts gather their top-k copies over the expert-TP group when etp > 1 (megatron-facts §3.1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.layouts import FloatArray
from planner.model.shapes import Gemm
from planner.performance import overlap
from planner.performance.collectives import ring_time
from planner.performance.compute import gemms_time
from planner.performance.context import StepContext
from planner.performance.tp_backward import block_backward_comm
from planner.space.comm_flags import tp_comm_overlap


@dataclass(frozen=True, slots=True, kw_only=True)
class TensorParallelComm:
    """TP traffic of one micro-batch on the busiest rank."""

    exposed_mb: FloatArray
    """Exposed seconds (plus the interference of the hidden part)."""
    hidden_mb: FloatArray
    """Seconds hidden inside the compute: by TE's userbuffers (--tp-comm-overlap), or without
    them by the backward GEMMs that the asynchronous collectives run under."""


def tp_collectives(ctx: StepContext) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Seconds of one TP all-gather, reduce-scatter and all-reduce of the layer's activation."""
    batch = ctx.batch
    one = np.ones_like(batch.tp)
    # one message per collective: the full b s_l h tensor (mechanisms-facts §2.2 curves)
    ag = ring_time(ctx.links, batch.tp, one, ctx.activation_bytes, 1.0, op="all_gather")
    rs = ring_time(ctx.links, batch.tp, one, ctx.activation_bytes, 1.0, op="reduce_scatter")
    ar = ring_time(ctx.links, batch.tp, one, ctx.activation_bytes, 2.0)
    return ag, rs, ar


def tp_layer_comm_fwd(ctx: StepContext) -> FloatArray:
    """Forward TP all-reduce (no SP) or all-gather + reduce-scatter (SP) seconds of one layer."""
    ag, rs, ar = tp_collectives(ctx)
    return np.asarray(np.where(ctx.sp > 0, 2 * (ag + rs), 2 * ar), np.float64)


def tp_stage_comm_bwd(ctx: StepContext) -> tuple[FloatArray, FloatArray]:
    """(exposed, hidden) backward TP seconds of the stage's layers without userbuffers: each
    block's collectives against its column-parallel GEMMs (:mod:`tp_backward`)."""
    ag, rs, ar = tp_collectives(ctx)
    sh = ctx.shapes

    def block(gemms: tuple[Gemm, ...]) -> tuple[FloatArray, FloatArray]:
        column = tuple(g for g in gemms if g.shard == "n")
        r = block_backward_comm(
            all_gather_s=ag,
            reduce_scatter_s=rs,
            all_reduce_s=ar,
            column_gemm_fwd_s=gemms_time(ctx, column, ctx.tokens, ctx.tp),
            sequence_parallel=ctx.sp,
        )
        return r.exposed_s, r.hidden_s

    attn, mlp = block(sh.attention_gemms), block(sh.dense_mlp_gemms)
    shared = block(sh.shared_expert_gemms) if sh.shared_expert_gemms else None
    moe_frac = ctx.moe_fraction
    parts = []
    for i in (0, 1):
        dense = attn[i] + mlp[i]
        moe = attn[i] + (shared[i] if shared is not None else 0.0)
        parts.append(ctx.layers_per_stage * ((1 - moe_frac) * dense + moe_frac * moe))
    return np.asarray(parts[0], np.float64), np.asarray(parts[1], np.float64)


def expert_tp_comm_fwd(ctx: StepContext) -> FloatArray:
    """Forward seconds of the routed experts' gather over the expert-TP group (etp > 1)."""
    if not ctx.model.is_moe:
        return np.zeros_like(ctx.tokens)
    batch, links = ctx.batch, ctx.links
    one = np.ones_like(batch.tp)
    routed_bytes = ctx.activation_bytes * ctx.model.moe_router_topk * batch.etp / ctx.tp
    return np.asarray(
        np.where(
            batch.etp > 1,
            np.where(
                ctx.sp > 0,
                ring_time(links, batch.etp, one, routed_bytes, 1.0, op="all_gather")
                + ring_time(links, batch.etp, one, routed_bytes, 1.0, op="reduce_scatter"),
                ring_time(links, batch.etp, one, routed_bytes, 2.0),
            ),
            0.0,
        ),
        np.float64,
    )


def tp_comm_time(ctx: StepContext) -> TensorParallelComm:
    """TP all-reduce / all-gather time of one micro-batch, exposed and hidden."""
    batch, full, moe_frac = ctx.batch, ctx.full, ctx.moe_fraction
    tp_layer_fwd = tp_layer_comm_fwd(ctx)
    shared_half = 0.5 if ctx.shapes.shared_expert_gemms else 0.0
    moe_tp_fwd = tp_layer_fwd * (0.5 + shared_half)
    etp_fwd = expert_tp_comm_fwd(ctx)
    stage_tp_fwd = ctx.layers_per_stage * ((1 - moe_frac) * tp_layer_fwd + moe_frac * moe_tp_fwd)
    stage_etp_fwd = ctx.layers_per_stage * moe_frac * etp_fwd  # grouped GEMMs: not overlapped
    # TE userbuffers hide TP collectives only where --tp-comm-overlap is emitted
    ub = tp_comm_overlap(ctx.cluster, batch.tp, ctx.sp > 0) & ctx.job.tp_comm_overlap
    tp_hidden = np.where(ub, ctx.profile.tp_overlap, 0.0)
    one = np.ones_like(batch.tp)
    steal = overlap.interference(ctx, ctx.share(batch.tp, one))
    ub_hidden = (2 + full) * stage_tp_fwd * tp_hidden
    ub_mb = (2 + full) * stage_tp_fwd * (1 - tp_hidden) + steal * ub_hidden
    # without userbuffers: forward (and its recompute) exposed, backward as Megatron runs it
    bwd_exposed, bwd_hidden = tp_stage_comm_bwd(ctx)
    plain_mb = (1 + full) * stage_tp_fwd + bwd_exposed + steal * bwd_hidden
    tp_mb = np.where(ub, ub_mb, plain_mb) + (2 + full) * stage_etp_fwd
    return TensorParallelComm(
        exposed_mb=np.asarray(tp_mb, np.float64),
        hidden_mb=np.asarray(np.where(ub, ub_hidden, bwd_hidden), np.float64),
    )
