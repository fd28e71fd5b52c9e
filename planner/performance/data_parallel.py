"""Data-parallel communication: gradient reduce-scatter / all-reduce, parameter all-gather.

Gradients are reduced over dp x cp (experts over the expert-data-parallel group) once per step,
bucket by bucket under the backward pass; with a sharded optimizer the parameters are gathered
back under the next forward; ZeRO-3 (full sharding) gathers and scatters per micro-batch
(performance-facts §6.1, megatron-facts §1.8).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.layouts import SHARD_FULL, SHARD_NONE, FloatArray
from planner.performance import overlap
from planner.performance.collectives import ring_time
from planner.performance.context import BF16_BYTES, StepContext
from planner.performance.memory_settings import grad_reduce_bytes
from planner.space import comm_flags

DDP_BUCKET_PARAMS = 40e6  # performance-facts §6.1: bucket = max(40 M, 1 M x DP) parameters


@dataclass(frozen=True, slots=True, kw_only=True)
class StageParamCounts:
    """Parameters one GPU of the rank with the most of them holds, by the group that reduces
    them."""

    dense: FloatArray
    """Non-expert parameters (reduced over dp x cp)."""
    expert: FloatArray
    """Routed-expert parameters (reduced over the expert-data-parallel group)."""
    embedding: FloatArray
    """The word-embedding-sized matrices among ``dense`` (embedding, output layer, their
    copies): gathered in bf16 even with --fp8-param-gather."""


def stage_param_counts(ctx: StepContext) -> StageParamCounts:
    """Parameters per GPU of the rank that holds the most: the busiest rank (its layers and the
    embedding), the last rank (its layers, the output layer or the tied copy, and the MTP layers
    unless a layout places them elsewhere) or the rank of the layout's 'm' stage (its layers,
    the MTP layers and its own embedding copy). Every rank reduces its own gradients and steps
    its own optimizer, and the step waits for the slowest (megatron-facts §1.8)."""
    sh, moe_frac, h = ctx.shapes, ctx.moe_fraction, ctx.hidden
    dense_layer = (
        sh.attention_params
        + sh.norm_params
        + ((1 - moe_frac) * sh.dense_mlp_params + moe_frac * sh.shared_expert_params)
    ) / ctx.tp + moe_frac * sh.router_params
    expert_layer = moe_frac * sh.expert_params_per_layer / (ctx.ep * ctx.etp)
    # each MTP depth: a full layer of the last decoder layer's kind, its eh-projection 2h x h
    # and three norms (planner.model.params, megatron-facts §4.1)
    moe = sh.mtp_is_moe
    mtp_layer = (
        (
            sh.attention_params
            + sh.norm_params
            + (sh.shared_expert_params if moe else sh.dense_mlp_params)
            + 2 * h * h
        )
        / ctx.tp
        + (sh.router_params if moe else 0.0)
        + 1.5 * sh.norm_params
    )
    mtp_expert = sh.expert_params_per_layer / (ctx.ep * ctx.etp) if moe else 0.0
    depth = float(sh.mtp_layers)
    matrix = h * ctx.vocab / ctx.tp  # one word-embedding-sized matrix, vocabulary split over TP
    untied = float(ctx.model.untie_embeddings_and_output_weights)
    on_last = ctx.mtp_on_last
    # the last rank holds the output layer (untied) or the tied copy for the loss (megatron-facts
    # §4.2); untied it also holds the embedding itself when p = 1, or the MTP layers' own copy
    # (planner.memory.stage_loads._mtp_embedding_copy); the 'm' rank holds one matrix either
    # way: the embedding 'E' where it is rank 0, else its copy
    last_matrices = 1.0 + untied * np.where((ctx.pp == 1) | (depth * on_last > 0), 1.0, 0.0)
    ranks = (
        (ctx.layers_per_stage, 0.0, 1.0),
        (ctx.last_layers, depth * on_last, last_matrices),
        (ctx.mtp_rank_layers, depth * (1.0 - on_last), np.where(on_last > 0, 0.0, 1.0)),
    )
    dense = np.stack([n * dense_layer + d * mtp_layer + e * matrix for n, d, e in ranks])
    expert = np.stack(
        [np.broadcast_to(n * expert_layer + d * mtp_expert, ctx.tokens.shape) for n, d, _ in ranks]
    )
    embedding = np.stack([np.broadcast_to(e * matrix, ctx.tokens.shape) for _, _, e in ranks])
    pick = np.argmax(dense + expert, axis=0)[None, :]
    return StageParamCounts(
        dense=np.take_along_axis(dense, pick, axis=0)[0],
        expert=np.take_along_axis(expert, pick, axis=0)[0],
        embedding=np.take_along_axis(embedding, pick, axis=0)[0],
    )


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


def dp_comm_time(ctx: StepContext, compute_mb: FloatArray, params: StageParamCounts) -> FloatArray:
    """Exposed DP gradient reduce-scatter / all-reduce and parameter all-gather of one step."""
    batch, links, prof, m = ctx.batch, ctx.links, ctx.profile, ctx.microbatches
    p_dense, p_exp = params.dense, params.expert
    dgroup = batch.dp * batch.cp
    edp = np.maximum(batch.expert_dp, 1)
    eone = batch.etp * batch.ep
    shard = batch.optimizer_sharding
    grad_b = grad_reduce_bytes(batch, ctx.job.precision)  # fp32, or bf16 (memory_settings)
    # one collective per DDP bucket (§6.1), each paying its own S_half on the curves
    bucket = np.maximum(DDP_BUCKET_PARAMS, 1e6 * ctx.dp)
    nb_d = np.maximum(np.ceil(p_dense / bucket), 1.0)
    nb_e = np.maximum(np.ceil(p_exp / bucket), 1.0)
    rs = ring_time(
        links, dgroup, batch.tp, p_dense * grad_b, 1.0, messages=nb_d, op="reduce_scatter"
    ) + ring_time(links, edp, eone, p_exp * grad_b, 1.0, messages=nb_e, op="reduce_scatter")
    # --fp8-param-gather: linear weights are gathered in fp8 (1 byte), the embedding in bf16
    gather = comm_flags.fp8_gather(ctx.job, batch) & ctx.fp8
    gather_bytes = np.where(gather, 1.0, BF16_BYTES)
    p_embed = params.embedding
    ag = ring_time(
        links,
        dgroup,
        batch.tp,
        (p_dense - p_embed) * gather_bytes + p_embed * BF16_BYTES,
        1.0,
        messages=nb_d,
    ) + ring_time(links, edp, eone, p_exp * gather_bytes, 1.0, messages=nb_e)
    ar = ring_time(links, dgroup, batch.tp, p_dense * grad_b, 2.0, messages=nb_d) + ring_time(
        links, edp, eone, p_exp * grad_b, 2.0, messages=nb_e
    )
    bwd_mb, fwd_mb = 2 * compute_mb / 3, compute_mb / 3
    grad_t = np.where(shard == SHARD_NONE, ar, rs)
    param_t = np.where(shard == SHARD_NONE, 0.0, ag)
    exposed = exposed_dp_comm(grad_t, bwd_mb, ctx.pp, ctx.vpp, prof.dp_overlap) + exposed_dp_comm(
        param_t, fwd_mb, ctx.pp, ctx.vpp, prof.dp_overlap
    )
    tail_frac = np.minimum(
        1.0, np.maximum(DDP_BUCKET_PARAMS, 1e6 * ctx.dp) / np.maximum(p_dense + p_exp, 1.0)
    )
    dp_sync = np.maximum(exposed, tail_frac * (grad_t + param_t))
    fsdp_t = m * (2 * ag + rs)  # ZeRO-3: gather params fwd and bwd, scatter grads, per mb
    fsdp = np.maximum(fsdp_t - prof.dp_overlap * m * compute_mb, tail_frac * fsdp_t / m)
    dp_s = np.where(shard == SHARD_FULL, fsdp, dp_sync)
    # hidden DP traffic still steals SMs/HBM from the compute it overlaps
    dp_hidden = np.where(
        shard == SHARD_FULL,
        np.maximum(fsdp_t - fsdp, 0.0),
        np.maximum(grad_t + param_t - dp_sync, 0.0),
    )
    dp_s = dp_s + overlap.interference(ctx, ctx.share(dgroup, batch.tp)) * dp_hidden
    return np.asarray(dp_s, np.float64)
