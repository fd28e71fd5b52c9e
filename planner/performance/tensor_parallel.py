"""Tensor-parallel communication: the TP all-reduce / all-gather + reduce-scatter per layer.

Per layer, forward: 2 all-reduces without sequence parallelism, or 2 all-gathers + 2
reduce-scatters with it (megatron-facts §1.1); the same again in backward, once more with full
recompute. A MoE layer runs only attention (and shared experts) on the TP group; its routed
experts gather their top-k copies over the expert-TP group when etp > 1 (megatron-facts §3.1).

The MTP block adds, per depth, one full transformer layer (megatron-facts §4.1) and the
eh-projection's collectives (:func:`mtp_eh_comm`) on the rank that runs it (the last rank, or the
layout's 'm' stage); the loss rank adds its heads' output-layer collectives
(:mod:`planner.performance.output_layer`, mechanisms-facts §5.1); the micro-batch pays the TP
traffic of whichever rank has more of it, as the compute term takes the slower rank.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.layouts import FloatArray
from planner.performance import overlap
from planner.performance.collectives import ring_time
from planner.performance.context import StepContext
from planner.performance.output_layer import heads, output_layer_comm
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


def mtp_eh_comm(ctx: StepContext) -> tuple[FloatArray, FloatArray]:
    """(forward, backward) TP seconds of one MTP depth's eh-projection, a column-parallel 2h -> h
    linear (planner.model.params), for one micro-batch.

    With SP a column-parallel linear all-gathers its sequence-sharded input first
    (mechanisms-facts §5.1, the output layer): here [enorm(embedding), hnorm(hidden)], 2h wide,
    twice a layer's message; its output is split over h and is gathered to the full width the
    MTP layer reads, then re-split over the sequence [inferred: a column-parallel output holds
    h/t]. Backward: the input gather's reduce-scatter (2h) and the sequence split's gather (h).
    Without SP: the output gather forward, the input gradient's all-reduce (2h) backward.
    Nothing to overlap them with (each feeds the next op directly): priced exposed.
    """
    links, tp, act = ctx.links, ctx.batch.tp, ctx.activation_bytes
    one = np.ones_like(tp)
    gather_h = ring_time(links, tp, one, act, 1.0, op="all_gather")
    fwd = np.where(ctx.sp > 0, ring_time(links, tp, one, 2 * act, 1.0, op="all_gather"), 0.0)
    rs_2h = ring_time(links, tp, one, 2 * act, 1.0, op="reduce_scatter")
    bwd = np.where(ctx.sp > 0, rs_2h + gather_h, ring_time(links, tp, one, 2 * act, 2.0))
    return np.asarray(fwd + gather_h, np.float64), np.asarray(bwd, np.float64)


def tp_comm_time(ctx: StepContext) -> TensorParallelComm:
    """TP all-reduce / all-gather time of one micro-batch, exposed and hidden: the busiest
    rank's, or the MTP rank's where its MTP layers give it more."""
    batch, full, moe_frac = ctx.batch, ctx.full, ctx.moe_fraction
    tp_layer_fwd = tp_layer_comm_fwd(ctx)
    shared_half = 0.5 if ctx.shapes.shared_expert_gemms else 0.0
    moe_tp_fwd = tp_layer_fwd * (0.5 + shared_half)
    etp_fwd = expert_tp_comm_fwd(ctx)
    layer_tp_fwd = (1 - moe_frac) * tp_layer_fwd + moe_frac * moe_tp_fwd
    stage_tp_fwd = ctx.layers_per_stage * layer_tp_fwd
    stage_etp_fwd = ctx.layers_per_stage * moe_frac * etp_fwd  # grouped GEMMs: not overlapped
    # TE userbuffers hide TP collectives only where --tp-comm-overlap is emitted
    tp_hidden = np.where(
        tp_comm_overlap(ctx.cluster, batch.tp, ctx.sp > 0) & ctx.job.tp_comm_overlap,
        ctx.profile.tp_overlap,
        0.0,
    )
    one = np.ones_like(batch.tp)
    steal = overlap.interference(ctx, ctx.share(batch.tp, one))

    def exposed(tp_fwd: FloatArray, etp: FloatArray, extra: FloatArray | float) -> FloatArray:
        hidden = (2 + full) * tp_fwd * tp_hidden
        return np.asarray(
            (2 + full) * (tp_fwd * (1 - tp_hidden) + etp) + steal * hidden + extra, np.float64
        )

    tp_mb = exposed(stage_tp_fwd, stage_etp_fwd, 0.0)
    hidden_mb = (2 + full) * stage_tp_fwd * tp_hidden
    # the loss rank: its layers plus the heads' output-layer collectives (output_layer)
    head_mb = heads(ctx) * output_layer_comm(ctx).exposed_s
    last_tp_fwd = ctx.last_layers * layer_tp_fwd
    last_etp_fwd = ctx.last_layers * moe_frac * etp_fwd
    last_extra: FloatArray | float = head_mb
    candidates = []
    depth = float(ctx.shapes.mtp_layers)
    if depth:
        # each depth: a full layer of the last decoder layer's kind (megatron-facts §4.1) plus
        # its eh-projection, on the rank that runs the MTP layers (forward again on recompute):
        # the last rank, or the layout's 'm' rank
        moe = ctx.shapes.mtp_is_moe
        mtp_tp_fwd = depth * (moe_tp_fwd if moe else tp_layer_fwd)
        mtp_etp_fwd = depth * etp_fwd if moe else 0.0
        eh_fwd, eh_bwd = mtp_eh_comm(ctx)
        mtp_extra = depth * ((1 + full) * eh_fwd + eh_bwd)
        on_last = ctx.mtp_on_last
        last_tp_fwd = last_tp_fwd + on_last * mtp_tp_fwd
        last_etp_fwd = last_etp_fwd + on_last * mtp_etp_fwd
        last_extra = head_mb + on_last * mtp_extra
        elsewhere_fwd = ctx.mtp_rank_layers * layer_tp_fwd + mtp_tp_fwd
        elsewhere_etp = ctx.mtp_rank_layers * moe_frac * etp_fwd + mtp_etp_fwd
        elsewhere = exposed(elsewhere_fwd, elsewhere_etp, mtp_extra)
        candidates.append((np.where(on_last > 0, 0.0, elsewhere), elsewhere_fwd))
    candidates.append((exposed(last_tp_fwd, last_etp_fwd, last_extra), last_tp_fwd))
    # the micro-batch pays the TP traffic of the rank that has the most of it, as the compute
    # term takes the slowest rank
    for rank_mb, rank_fwd in candidates:
        use = rank_mb > tp_mb
        tp_mb = np.where(use, rank_mb, tp_mb)
        hidden_mb = np.where(use, (2 + full) * rank_fwd * tp_hidden, hidden_mb)
    return TensorParallelComm(
        exposed_mb=np.asarray(tp_mb, np.float64),
        hidden_mb=np.asarray(hidden_mb, np.float64),
    )
