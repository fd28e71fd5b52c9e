"""What each pipeline rank holds: layers, in-flight micro-batches, embedding, loss and MTP.

Without an explicit layout the planner charges two ranks (:func:`default_loads`): the first
(embedding, the most micro-batches in flight, the busiest of ranks 0..p-2) and the last (output
layer, loss, MTP). With ``--pipeline-model-parallel-layout`` every rank is charged from the layout
itself: rank r holds virtual stages r, r + p, ... (megatron-facts §1.2) and, at the end of the
interleaved warm-up, W_r = 2(p-r-1) + (v-1)p + 1 forward micro-chunks, taken p at a time per
chunk in chunk order (mechanisms-facts §7; megatron-facts §3.3), so a heavy first chunk weighs
more than a light last one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.layouts import BoolArray, FloatArray, LayoutBatch
from planner.memory.stages import StageParams
from planner.model.flops import padded_vocab
from planner.model.params import ParamCounts
from planner.model.pipeline import NOTHING_LACKING, stage_layers
from planner.model.pipeline_layout import PipelineLayout, parse_pipeline_layout
from planner.specs import ModelSpec

__all__ = [
    "StageLoad",
    "default_loads",
    "layout_loads",
    "load_params",
    "merge",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class StageLoad:
    """One pipeline rank of every layout (arrays over layouts)."""

    dense: FloatArray
    """Dense decoder layers held (parameters)."""
    moe: FloatArray
    """MoE decoder layers held."""
    act_dense: FloatArray
    """Sum over the rank's chunks of in-flight micro-batches x dense layers in the chunk."""
    act_moe: FloatArray
    mtp: FloatArray
    """MTP layers held."""
    act_mtp: FloatArray
    inflight: FloatArray
    """Micro-batches in flight on the chunk that holds the embedding (token ids), else the
    rank's largest chunk count."""
    embedding: BoolArray
    loss: BoolArray
    stage_output: BoolArray
    """Ranks that send an output tensor downstream (every rank but the last)."""


def _chunk_inflight(p: int, v: int, rank: int, microbatches: int) -> list[float]:
    """In-flight micro-batches per chunk of one rank at the peak (end of warm-up)."""
    if v == 1:
        return [float(min(p - rank, microbatches))]
    warmup = min(2 * (p - rank - 1) + (v - 1) * p + 1, microbatches * v)
    counts = [0.0] * v
    for k in range(warmup):
        counts[(k // p) % v] += 1.0
    return counts


def _rank_load(
    layout: PipelineLayout, pattern: list[bool], p: int, v: int, rank: int, m: int, extra: int
) -> tuple[float, ...]:
    ranges = layout.decoder_ranges()
    inflight = _chunk_inflight(p, v, rank, m)
    dense = moe = act_dense = act_moe = mtp = act_mtp = 0.0
    embedding = loss = False
    emb_inflight = max(inflight)
    for j, stage in enumerate(layout.chunk_stages(p, rank)):
        n_moe = float(sum(pattern[i] for i in ranges[stage]))
        n_dense = len(ranges[stage]) - n_moe
        n_mtp = float(layout.stages[stage].count("m"))
        dense, moe, mtp = dense + n_dense, moe + n_moe, mtp + n_mtp
        act_dense += inflight[j] * n_dense
        act_moe += inflight[j] * n_moe
        act_mtp += inflight[j] * n_mtp
        if "E" in layout.stages[stage]:
            embedding, emb_inflight = True, inflight[j]
        loss = loss or "L" in layout.stages[stage]
    # the A2A overlap's extra layer (planner.memory.stages.overlap_extra_layers), an MoE one
    # where the rank has any
    act_moe += extra if moe > 0 else 0.0
    act_dense += extra if moe == 0 and dense > 0 else 0.0
    return (dense, moe, act_dense, act_moe, mtp, act_mtp, emb_inflight,
            float(embedding), float(loss), float(rank < p - 1))  # fmt: skip


def layout_loads(
    model: ModelSpec,
    batch: LayoutBatch,
    layouts: np.ndarray,
    with_layout: BoolArray,
    microbatches: FloatArray,
    extra: BoolArray,
) -> list[StageLoad]:
    """Loads of every rank for the rows that have a layout string (``layouts[i] != ''``).

    Returns max(pp) slots: slot 0 is rank 0, slot 1 rank p-1, slot k >= 2 rank k-1 (ranks past
    p-2 repeat rank 0). Rows without a layout get zeros (the caller keeps its own loads there).
    """
    n = len(batch)
    rows = np.flatnonzero(with_layout)
    slots = max(2, int(batch.pp[rows].max())) if rows.size else 2
    table = np.zeros((slots, n, 10))
    if not rows.size:
        return _loads(table)
    pattern = model.moe_layer_pattern()
    # one evaluation per distinct (layout, pp, vpp, micro-batches, overlap), broadcast back
    texts, text_code = np.unique(layouts[rows].astype(str), return_inverse=True)
    keys = np.stack(
        [
            text_code.reshape(-1),
            batch.pp[rows],
            batch.vpp[rows],
            np.maximum(microbatches[rows], 1).astype(np.int64),
            extra[rows].astype(np.int64),
        ],
        axis=1,
    )
    unique, inverse = np.unique(keys, axis=0, return_inverse=True)
    values = np.zeros((unique.shape[0], slots, 10))
    for k, (code, p, v, m, more) in enumerate(unique.tolist()):
        parsed = parse_pipeline_layout(str(texts[code]))
        order = [0, p - 1, *range(1, p - 1)]
        ranks = [_rank_load(parsed, pattern, p, v, r, m, more) for r in order]
        ranks += [ranks[0]] * (slots - len(ranks))
        values[k] = np.array(ranks[:slots])
    table[:, rows, :] = values[inverse.reshape(-1)].transpose(1, 0, 2)
    return _loads(table)


def _loads(table: np.ndarray) -> list[StageLoad]:
    return [
        StageLoad(
            dense=t[:, 0],
            moe=t[:, 1],
            act_dense=t[:, 2],
            act_moe=t[:, 3],
            mtp=t[:, 4],
            act_mtp=t[:, 5],
            inflight=t[:, 6],
            embedding=t[:, 7] > 0,
            loss=t[:, 8] > 0,
            stage_output=t[:, 9] > 0,
        )
        for t in table
    ]


def load_params(
    model: ModelSpec, counts: ParamCounts, batch: LayoutBatch, load: StageLoad
) -> StageParams:
    """Parameters per GPU of one rank from its load: layers' TP-sharded part over tp, routed
    experts over etp x ep, the embedding where it sits, the output layer with the loss."""
    t = batch.tp.astype(np.float64)
    expert_shard = (batch.etp * batch.ep).astype(np.float64)
    dense_l, moe_l = counts.dense_layer, counts.moe_layer
    word_embedding = padded_vocab(model, batch.tp) * model.hidden_size
    tp_part = (load.dense * dense_l.tp_sharded + load.moe * moe_l.tp_sharded) / t
    replicated = load.dense * dense_l.replicated + load.moe * moe_l.replicated
    experts = load.moe * moe_l.routed_experts / expert_shard
    mtp_l = counts.mtp_layer
    mtp_tp = load.mtp * (mtp_l.tp_sharded + counts.mtp_extra - counts.mtp_extra_replicated) / t
    mtp_rep = load.mtp * (mtp_l.replicated + counts.mtp_extra_replicated)
    mtp_exp = load.mtp * mtp_l.routed_experts / expert_shard
    # untied output layer, or with tied weights the loss rank's copy of the embedding when the
    # embedding lives on another rank (megatron-facts §4.2)
    untied = model.untie_embeddings_and_output_weights
    output = word_embedding if untied else np.where(load.embedding, 0.0, word_embedding)
    head = np.where(load.loss, output / t + counts.final_norm, 0.0)
    embedding = np.where(load.embedding, word_embedding / t + counts.position_embedding, 0.0)
    mtp_embedding = np.where(_mtp_embedding_copy(load, untied=untied), word_embedding / t, 0.0)
    return StageParams(
        dense=tp_part + replicated + head + mtp_tp + mtp_rep + embedding + mtp_embedding,
        expert=experts + mtp_exp,
        fp8_linear=tp_part + experts + mtp_tp + mtp_exp,
    )


def _mtp_embedding_copy(load: StageLoad, *, untied: bool) -> BoolArray:
    """Ranks that keep their own copy of the word embedding for the MTP layers.

    Each MTP depth embeds the input tokens shifted by its depth with the main model's embedding
    (catalog-facts §1.5: "the embedding and output head are shared with the main model"), and a
    pipeline rank receives only hidden states from its neighbour (mechanisms-facts §7, P2P
    tensors), so the rank that runs the 'm' stage holds the embedding weight too, as the loss
    rank holds the tied output copy (megatron-facts §4.2). None is needed where the rank holds
    'E', or, with tied weights, the loss rank's copy."""
    has_mtp = load.mtp > 0
    covered = load.embedding if untied else load.embedding | load.loss
    result: BoolArray = has_mtp & ~covered
    return result


def default_loads(
    model: ModelSpec,
    batch: LayoutBatch,
    inflight_first: FloatArray,
    inflight_last: FloatArray,
    extra_layers: FloatArray,
    lacking: frozenset[str] = NOTHING_LACKING,
) -> tuple[StageLoad, StageLoad]:
    """(first, last) loads of the two-rank charge used without a layout: the first rank holds
    the most layers of ranks 0..p-2, the last the loss and the MTP block; ``inflight_*`` come
    from :func:`planner.memory.stages.in_flight_microbatches` and ``extra_layers`` (the A2A
    overlap's) are charged as MoE layers where the rank has any. ``lacking``: the split kinds
    the job's release lacks (planner.model.pipeline.stage_layers)."""
    layers = stage_layers(model, batch, lacking)
    extra_first = np.where(layers.first_moe > 0, extra_layers, 0.0)
    extra_last = np.where(layers.last_moe > 0, extra_layers, 0.0)
    single = batch.pp == 1
    depth = float(model.mtp_num_layers)
    yes, no = np.ones(len(batch), np.bool_), np.zeros(len(batch), np.bool_)
    first = StageLoad(
        dense=layers.first_dense, moe=layers.first_moe,
        act_dense=inflight_first * layers.first_dense,
        act_moe=inflight_first * layers.first_moe + extra_first,
        mtp=np.where(single, depth, 0.0), act_mtp=np.zeros(len(batch)),
        inflight=inflight_first, embedding=yes, loss=single, stage_output=yes,
    )  # fmt: skip
    last = StageLoad(
        dense=layers.last_dense, moe=layers.last_moe,
        act_dense=inflight_last * layers.last_dense,
        act_moe=inflight_last * layers.last_moe + extra_last,
        # the MTP layers sit in the rank's last chunk, which holds one micro-batch at the peak
        # (warm-up (v-1)p + 1 chunks, p per earlier chunk; megatron-facts §3.3)
        mtp=np.full(len(batch), depth), act_mtp=np.minimum(inflight_last, 1.0) * depth,
        inflight=inflight_first, embedding=single, loss=yes, stage_output=no,
    )  # fmt: skip
    return first, last


def merge(default: StageLoad, from_layout: StageLoad, use: BoolArray) -> StageLoad:
    """Row-wise choice between two loads."""
    return StageLoad(
        **{
            name: np.where(use, getattr(from_layout, name), getattr(default, name))
            for name in StageLoad.__dataclass_fields__
        }
    )
