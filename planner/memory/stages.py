"""Which parameters and micro-batches sit on the first and the last pipeline rank.

Megatron splits L layers over p x v virtual stages (evenly, or with the embedding and loss
counted as layers, or with uneven first/last stages); rank 0 holds virtual stages 0, p, 2p, ...
and rank p-1 holds p-1, 2p-1, ... (megatron-facts §1.2). The layer counts of both ranks, dense
and MoE, come from :func:`planner.model.pipeline.stage_layers`; this module turns them into
parameters per GPU and micro-batches in flight."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.layouts import BoolArray, FloatArray, LayoutBatch
from planner.model.flops import padded_vocab
from planner.model.params import ParamCounts
from planner.model.pipeline import StageLayers
from planner.specs import ModelSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class StageParams:
    """Parameters held by one GPU of a pipeline rank, by how they are sharded (arrays)."""

    dense: FloatArray
    """Non-expert parameters (already divided by t where TP shards them)."""
    expert: FloatArray
    """Routed-expert parameters (already divided by expert-TP x EP)."""
    fp8_linear: FloatArray
    """Linear-layer weights TE casts to fp8 (decoder and MTP layers, not the embeddings)."""


def stage_params(
    model: ModelSpec, counts: ParamCounts, batch: LayoutBatch, layers: StageLayers
) -> tuple[StageParams, StageParams]:
    """(first rank, last rank) parameters per GPU; with p = 1 both are the whole model."""
    h = model.hidden_size
    t = batch.tp.astype(np.float64)
    expert_shard = (batch.etp * batch.ep).astype(np.float64)
    dense_l, moe_l = counts.dense_layer, counts.moe_layer
    word_embedding = padded_vocab(model, batch.tp) * h
    single = batch.pp == 1

    def layer_params(n_dense: FloatArray, n_moe: FloatArray) -> tuple[FloatArray, FloatArray]:
        tp_part = (n_dense * dense_l.tp_sharded + n_moe * moe_l.tp_sharded) / t
        replicated = n_dense * dense_l.replicated + n_moe * moe_l.replicated
        return tp_part, replicated

    first_tp, first_rep = layer_params(layers.first_dense, layers.first_moe)
    last_tp, last_rep = layer_params(layers.last_dense, layers.last_moe)
    first_exp = layers.first_moe * moe_l.routed_experts / expert_shard
    last_exp = layers.last_moe * moe_l.routed_experts / expert_shard
    # MTP block sits with the loss on the last stage (megatron-facts §4.1 charges it once)
    d_mtp = counts.mtp_num_layers
    mtp_l = counts.mtp_layer
    mtp_tp = d_mtp * (mtp_l.tp_sharded + counts.mtp_extra - counts.mtp_extra_replicated) / t
    mtp_rep = d_mtp * (mtp_l.replicated + counts.mtp_extra_replicated)
    mtp_exp = d_mtp * mtp_l.routed_experts / expert_shard
    # untied output layer, or with tied weights and p > 1 the last stage's embedding copy
    untied = model.untie_embeddings_and_output_weights
    output = word_embedding if untied else np.where(single, 0.0, word_embedding)
    embedding = word_embedding / t + counts.position_embedding  # position table not TP-split
    last_dense = last_tp + last_rep + output / t + counts.final_norm + mtp_tp + mtp_rep
    last = StageParams(
        dense=last_dense + np.where(single, embedding, 0.0),
        expert=last_exp + mtp_exp,
        fp8_linear=last_tp + last_exp + mtp_tp + mtp_exp,
    )
    first = StageParams(  # with p = 1 the first stage is the whole model, as the last is
        dense=np.where(single, last.dense, first_tp + first_rep + embedding),
        expert=np.where(single, last.expert, first_exp),
        fp8_linear=np.where(single, last.fp8_linear, first_tp + first_exp),
    )
    return first, last


def in_flight_microbatches(
    batch: LayoutBatch, global_batch_size: int
) -> tuple[FloatArray, FloatArray]:
    """(first rank, last rank) micro-batches whose activations are held at the peak.

    1F1B: rank r holds min(m, p - r); interleaved: (2(p-r-1) + (v-1)p + 1)/v whole-stage
    micro-batches, i.e. p(1 + (p-1)/(pv)) on rank 0 (megatron-facts §3.3, §7.3). The MoE A2A
    overlap adds one layer, not a micro-batch (:func:`overlap_extra_layers`).
    """
    p = batch.pp.astype(np.float64)
    v = batch.vpp.astype(np.float64)
    m = np.maximum(global_batch_size / (batch.micro_batch_size * batch.dp), 1.0)
    interleaved = batch.vpp > 1
    first = np.where(interleaved, p + (p - 1) / v, p)
    last = np.where(interleaved, ((v - 1) * p + 1) / v, 1.0)
    return np.minimum(first, m), np.minimum(last, m)


def overlap_extra_layers(a2a_overlap: BoolArray) -> FloatArray:
    """Layers of one micro-batch the MoE A2A overlap holds beyond the plain schedule.

    ``--overlap-moe-expert-parallel-comm`` warms up one virtual micro-batch more (megatron-facts
    §3.3) and then merges each forward with the backward of an earlier micro-batch
    (performance-facts §6.4), pairing forward layer i with backward layer n-1-i, so every
    forward layer is matched by a freed backward layer [inferred from the pairing]: the extra
    warm-up chunk stands in for the plain schedule's steady-state forward, and what remains is
    the one layer whose forward runs before its partner's backward has freed anything (with
    pp = 1 likewise: one micro-batch plus one layer, not two micro-batches).
    """
    result: FloatArray = a2a_overlap.astype(np.float64)
    return result
