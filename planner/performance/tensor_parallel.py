"""Tensor-parallel communication: the TP all-reduce / all-gather + reduce-scatter per layer.

Per layer, forward: 2 all-reduces without sequence parallelism, or 2 all-gathers + 2
reduce-scatters with it (megatron-facts §1.1); the same again in backward, once more with full
recompute. A MoE layer runs only attention (and shared experts) on the TP group; its routed
experts gather their top-k copies over the expert-TP group when etp > 1 (megatron-facts §3.1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.layouts import FloatArray
from planner.performance import overlap
from planner.performance.collectives import ring_time
from planner.performance.context import StepContext
from planner.space.comm_flags import tp_comm_overlap


@dataclass(frozen=True, slots=True, kw_only=True)
class TensorParallelComm:
    """TP traffic of one micro-batch on the busiest rank."""

    exposed_mb: FloatArray
    """Exposed seconds (plus the interference of the hidden part)."""
    hidden_mb: FloatArray
    """Seconds TE's userbuffers hide inside the compute (--tp-comm-overlap)."""


def tp_layer_comm_fwd(ctx: StepContext) -> FloatArray:
    """Forward TP all-reduce (no SP) or all-gather + reduce-scatter (SP) seconds of one layer."""
    batch = ctx.batch
    one = np.ones_like(batch.tp)
    # one message per collective: the full b s_l h tensor (mechanisms-facts §2.2 curves)
    ag = ring_time(ctx.links, batch.tp, one, ctx.activation_bytes, 1.0, op="all_gather")
    rs = ring_time(ctx.links, batch.tp, one, ctx.activation_bytes, 1.0, op="reduce_scatter")
    coll_ar = ring_time(ctx.links, batch.tp, one, ctx.activation_bytes, 2.0)
    return np.asarray(np.where(ctx.sp > 0, 2 * (ag + rs), 2 * coll_ar), np.float64)


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
    tp_hidden = np.where(
        tp_comm_overlap(ctx.cluster, batch.tp, ctx.sp > 0) & ctx.job.tp_comm_overlap,
        ctx.profile.tp_overlap,
        0.0,
    )
    tp_mb = (2 + full) * (stage_tp_fwd * (1 - tp_hidden) + stage_etp_fwd)
    one = np.ones_like(batch.tp)
    steal = overlap.interference(ctx, ctx.share(batch.tp, one))
    tp_mb = tp_mb + steal * (2 + full) * stage_tp_fwd * tp_hidden
    return TensorParallelComm(
        exposed_mb=np.asarray(tp_mb, np.float64),
        hidden_mb=np.asarray((2 + full) * stage_tp_fwd * tp_hidden, np.float64),
    )
