"""The pipeline-schedule rules of the memory estimate: micro-batches in flight on the first and
the last pipeline rank, the MoE A2A overlap's extra layer, and the per-GPU parameter type.

Megatron splits L layers over p x v virtual stages (evenly, or with the embedding and loss
counted as layers, or with uneven first/last stages); rank 0 holds virtual stages 0, p, 2p, ...
and rank p-1 holds p-1, 2p-1, ... (megatron-facts §1.2). What each rank holds (layers,
embedding, loss, MTP) and its parameters per GPU (:class:`StageParams`) are computed in
:mod:`planner.memory.stage_loads`, from these rules."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.layouts import BoolArray, FloatArray, LayoutBatch


@dataclass(frozen=True, slots=True, kw_only=True)
class StageParams:
    """Parameters held by one GPU of a pipeline rank, by how they are sharded (arrays)."""

    dense: FloatArray
    """Non-expert parameters (already divided by t where TP shards them)."""
    expert: FloatArray
    """Routed-expert parameters (already divided by expert-TP x EP)."""
    fp8_linear: FloatArray
    """Linear-layer weights TE casts to fp8 (decoder and MTP layers, not the embeddings)."""


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
