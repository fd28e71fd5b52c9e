"""Per-GPU memory of a Megatron-LM training step and the 80 % rule, vectorised over layouts.

Starts from Fujii et al.'s estimator (memory-estimator-fujii) and Megatron's theoretical memory
report (megatron-facts §4, §7) and goes past both: the first AND the last pipeline rank are
evaluated (embedding + p in-flight micro-batches versus output layer + fp32 logits), MoE expert
weights and routed-token activations, MLA, recompute none/selective/full, Torch-FSDP2-style full
sharding as well as the distributed optimizer, fp8 weight copies, and explicit terms for
communication buffers and the CUDA/NCCL runtime. A layout fits when the most loaded rank's total
is at most ``threshold`` x HBM (Fujii §6). With a ``pipeline_layout`` every rank is charged
(:mod:`planner.memory.stage_loads`); the memory settings of issue 13 act through
:mod:`planner.memory.recompute` (recompute modules, block recompute, fp8 activations) and
:mod:`planner.memory.states` (bf16 gradients and moments, optimizer offload, fp8 parameters).

Each term of :data:`TERM_NAMES` is one function: weights, gradients and optimizer state in
:func:`planner.memory.states.model_state_bytes`, fp8 copies in ``fp8_weight_bytes``; the embedding
input and the logits in :mod:`planner.memory.activations`; communication buffers, the runtime and
fragmentation in :mod:`planner.memory.buffers`; CUDA-graph buffers in :func:`graph_buffers`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from planner.fp8_recipes import effective_recipe
from planner.layout_settings import GRAPHS_FULL, GRAPHS_PARTIAL, full_recompute_share
from planner.layouts import RECOMPUTE_FULL, BoolArray, FloatArray, IntArray, LayoutBatch
from planner.memory.activations import (
    MEMORY_EFFICIENT_PERMUTATION,
    ActivationShape,
    LayerActivations,
    backward_workspace,
    embedding_input_bytes,
    layer_activations,
    logits_bytes,
)
from planner.memory.buffers import comm_buffer_bytes, fragmentation_bytes, runtime_overhead_bytes
from planner.memory.context_parallel import cp_attention_transient_bytes, cp_peak_workspace
from planner.memory.fp8_saved import scale_fraction
from planner.memory.offload import layer_offload_bytes, stage_offload_bytes
from planner.memory.options import GIB as GIB  # re-exported
from planner.memory.options import MemoryOptions as MemoryOptions  # re-exported
from planner.memory.recompute import fp8_saving, freeable, saved_per_layer
from planner.memory.stage_loads import (
    StageLoad,
    default_loads,
    layout_loads,
    load_params,
    merge,
)
from planner.memory.stages import StageParams, in_flight_microbatches, overlap_extra_layers
from planner.memory.states import fp8_weight_bytes, model_state_bytes
from planner.model.flops import padded_vocab
from planner.model.params import ParamCounts, param_counts
from planner.space import comm_flags
from planner.space.version_rules import split_lacking
from planner.specs import ClusterSpec, ModelSpec, TrainingJob
from planner.stack_versions import core_version, missing

NO_FLASH_ATTENTION = frozenset({"volta"})
"""Architectures without TE fused/flash attention (FlashAttention-2 and cuDNN fused attention
need sm80+ [U]): their attention saves the s^2 softmax tensors (Korthikanti §4.1)."""

TERM_NAMES: tuple[str, ...] = (
    "weights_bytes",
    "gradients_bytes",
    "optimizer_bytes",
    "fp8_bytes",
    "activations_bytes",
    "embedding_input_bytes",
    "logits_bytes",
    "workspace_bytes",
    "comm_buffers_bytes",
    "cuda_graphs_bytes",
    "fragmentation_bytes",
    "runtime_overhead_bytes",
)
"""Keys of :attr:`MemoryEstimate.terms`, in display order."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryEstimate:
    """Bytes per GPU for n layouts (arrays of length n)."""

    terms: dict[str, FloatArray]
    """Each term for the most loaded rank (see :data:`TERM_NAMES`)."""
    first_stage_terms: dict[str, FloatArray]
    """The terms of pipeline rank 0."""
    last_stage_terms: dict[str, FloatArray]
    """The terms of pipeline rank p-1."""
    first_stage_bytes: FloatArray
    last_stage_bytes: FloatArray
    total_bytes: FloatArray
    """The most loaded rank's total: max(first, last), or over every rank with a
    pipeline_layout."""
    worst_stage: IntArray
    """1 where the last rank is the most loaded, else 0: without a pipeline_layout 0 is the
    first rank, with one it is any other rank (:attr:`worst_rank` says which)."""
    capacity_bytes: float
    threshold: float
    fits: BoolArray
    """total_bytes <= threshold x capacity_bytes."""
    stage_params: dict[str, FloatArray] = field(default_factory=dict)
    """Parameters per GPU: first_dense, first_expert, last_dense, last_expert."""
    worst_rank: IntArray | None = None
    """Pipeline rank of the most loaded GPU (every rank is charged when a pipeline_layout is
    given; otherwise 0 or p-1)."""
    host_bytes: FloatArray | None = None
    """Host memory per GPU for offloaded optimizer state and activations."""
    host_fits: BoolArray | None = None
    """host_bytes within the cluster's host memory per GPU (True where nothing is offloaded)."""
    rank_bytes: FloatArray | None = None
    """Total bytes of every pipeline rank (ranks x n; rank r of layout i at [r, i], NaN past
    its pp) where a pipeline_layout is given (every rank is then charged); None otherwise."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Shared:
    """Per-layer and per-step quantities every rank's terms are built from."""

    saved_dense: FloatArray
    saved_moe: FloatArray
    saved_mtp: FloatArray
    layer_input: FloatArray
    regenerated: FloatArray
    shape: ActivationShape
    logits: FloatArray
    workspace: FloatArray
    comm: FloatArray
    runtime: FloatArray
    offload_layer_bytes: FloatArray
    """Activations of the layers whose activations go to the host (legacy CPU offload)."""
    module_offload_dense: FloatArray
    """Per dense layer and micro-batch: module inputs fine-grained offload moves to the host."""
    module_offload_moe: FloatArray


def _stage_terms(
    model: ModelSpec,
    counts: ParamCounts,
    batch: LayoutBatch,
    job: TrainingJob,
    load: StageLoad,
    shared: _Shared,
    opts: MemoryOptions,
) -> tuple[dict[str, FloatArray], FloatArray, StageParams]:
    """All terms of one pipeline rank, its host bytes and its parameters."""
    params = load_params(model, counts, batch, load)
    states, host = model_state_bytes(params, batch, job, opts)
    terms = fp8_weight_bytes(states, params, job, batch, opts)
    stage_output = shared.layer_input if opts.keep_stage_outputs else 0.0
    activations = (
        load.act_dense * shared.saved_dense
        + load.act_moe * shared.saved_moe
        + load.act_mtp * shared.saved_mtp
        + np.where(load.stage_output, load.inflight * stage_output, 0.0)
        + shared.regenerated
    )
    fine = stage_offload_bytes(
        shared.module_offload_dense, shared.module_offload_moe, load.act_dense, load.act_moe
    )
    offloaded = np.minimum(shared.offload_layer_bytes * load.inflight + fine, activations)
    terms["activations_bytes"] = activations - offloaded
    host = host + offloaded
    embedding = embedding_input_bytes(model, shared.shape, batch, load.inflight, opts)
    terms["embedding_input_bytes"] = np.where(load.embedding, embedding, 0.0)
    terms["logits_bytes"] = np.where(load.loss, shared.logits, 0.0)
    terms["workspace_bytes"] = shared.workspace
    terms["comm_buffers_bytes"] = shared.comm
    terms["cuda_graphs_bytes"] = graph_buffers(batch, load, shared.layer_input, shared.shape.tokens)
    terms["runtime_overhead_bytes"] = shared.runtime
    terms["fragmentation_bytes"] = fragmentation_bytes(terms, opts)
    return terms, host, params


def graph_buffers(
    batch: LayoutBatch, load: StageLoad, layer_input: FloatArray, tokens: FloatArray
) -> FloatArray:
    """CUDA-graph static buffers (mechanisms-facts §3.4): per-layer graphs keep a static input
    and output per captured layer and in-flight micro-batch [inferred; NVIDIA: 'a few GB, over
    10 GB with PP > 1']; a full-iteration graph keeps its static inputs (token ids, labels,
    position ids and loss mask: 32 bytes per token [inferred])."""
    graphs = batch.mem.cuda_graphs
    per_layer = 2.0 * layer_input * (load.act_dense + load.act_moe)
    whole = 32.0 * tokens * load.embedding
    result: FloatArray = np.where(
        graphs == GRAPHS_PARTIAL, per_layer, np.where(graphs == GRAPHS_FULL, whole, 0.0)
    )
    return result


def estimate_memory(
    model: ModelSpec,
    cluster: ClusterSpec,
    job: TrainingJob,
    batch: LayoutBatch,
    options: MemoryOptions | None = None,
) -> MemoryEstimate:
    """Per-GPU peak bytes of every pipeline rank that can be the most loaded, per layout.

    Without a pipeline_layout: the first rank (embedding, most micro-batches in flight) and the
    last (output layer, fp32 logits, MTP). With one: every rank, from the layout itself.
    """
    opts = options or MemoryOptions()
    if job.expandable_segments:  # the job's allocator setting (mechanisms-facts §6.7)
        opts = replace(opts, expandable_segments=True)
    if cluster.gpu.architecture in NO_FLASH_ATTENTION:
        opts = replace(opts, flash_attention=False)
    counts = param_counts(model, seq_length=job.seq_length)
    # routed tokens on the busiest EP rank: the job's routing unless the caller overrides it
    imbalance = job.moe_imbalance if opts.moe_token_imbalance is None else opts.moe_token_imbalance
    a2a = comm_flags.enabled(model, cluster, batch, tp_overlap_on=job.tp_comm_overlap)
    inflight_first, inflight_last = in_flight_microbatches(batch, job.global_batch_size)
    extra_layers = overlap_extra_layers(a2a)
    first_load, last_load = default_loads(
        model, batch, inflight_first, inflight_last, extra_layers, split_lacking(job)
    )  # the split the job's release builds (mechanisms-facts §7)
    layouts = batch.mem.pipeline_layout
    with_layout = batch.mem.has_layout
    loads = [first_load, last_load]
    if with_layout.any():
        m = np.maximum(batch.num_microbatches(job.global_batch_size), 1).astype(np.float64)
        slots = layout_loads(model, batch, layouts, with_layout, m, a2a)
        loads = [merge(first_load, slots[0], with_layout), merge(last_load, slots[1], with_layout)]
        loads += [merge(first_load, extra, with_layout) for extra in slots[2:]]
    flex = comm_flags.flex_dispatch(model, cluster, batch)
    # the block fp8 recipes' scales on every saved fp8 copy (planner.memory.fp8_saved)
    scales = scale_fraction(effective_recipe(job, cluster.gpu))
    shared = _shared(model, counts, job, batch, opts, loads, imbalance, flex, scales)

    results = [_stage_terms(model, counts, batch, job, load, shared, opts) for load in loads]
    stage_terms = [{k: np.asarray(r[0][k], dtype=np.float64) for k in TERM_NAMES} for r in results]
    totals = np.array([np.sum([t[k] for k in TERM_NAMES], axis=0) for t in stage_terms])
    worst_slot = np.argmax(totals, axis=0)
    total: FloatArray = totals.max(axis=0)
    pick = np.arange(len(batch))
    terms = {k: np.array([t[k] for t in stage_terms])[worst_slot, pick] for k in TERM_NAMES}
    host = np.array([r[1] for r in results])[worst_slot, pick]
    # slot 0 is rank 0, slot 1 rank p-1, slot k >= 2 rank k-1 (planner.memory.stage_loads)
    worst_rank = np.where(
        worst_slot == 0, 0, np.where(worst_slot == 1, batch.pp - 1, worst_slot - 1)
    )
    rank_bytes = _rank_bytes(totals, batch.pp, with_layout) if with_layout.any() else None
    host_capacity = cluster.host_memory_bytes_per_gpu
    host_fits = host <= 0 if host_capacity is None else host <= opts.threshold * host_capacity
    capacity = float(cluster.gpu.hbm_bytes)
    first_params, last_params = results[0][2], results[1][2]
    return MemoryEstimate(
        terms=terms,
        first_stage_terms=stage_terms[0],
        last_stage_terms=stage_terms[1],
        first_stage_bytes=totals[0],
        last_stage_bytes=totals[1],
        total_bytes=total,
        worst_stage=(worst_slot == 1).astype(np.int64),
        capacity_bytes=capacity,
        threshold=opts.threshold,
        fits=(total <= opts.threshold * capacity) & host_fits,
        stage_params={
            "first_dense": first_params.dense,
            "first_expert": first_params.expert,
            "last_dense": last_params.dense,
            "last_expert": last_params.expert,
        },
        worst_rank=worst_rank.astype(np.int64),
        host_bytes=host,
        host_fits=host_fits,
        rank_bytes=rank_bytes,
    )


def _rank_bytes(totals: FloatArray, pp: IntArray, with_layout: BoolArray) -> FloatArray:
    """Slot totals in pipeline-rank order: slot 0 is rank 0, slot 1 rank p-1, slot k >= 2 rank
    k-1 (planner.memory.stage_loads); NaN past each layout's pp and where it has no layout."""
    n = totals.shape[1]
    depth = int(pp[with_layout].max())
    out = np.full((depth, n), np.nan)
    for r in range(depth):
        slot = np.where(r == 0, 0, np.where(r == pp - 1, 1, r + 1))
        inside = with_layout & (r < pp) & (slot < totals.shape[0])
        out[r, inside] = totals[slot[inside], np.flatnonzero(inside)]
    return out


def _shared(
    model: ModelSpec,
    counts: ParamCounts,
    job: TrainingJob,
    batch: LayoutBatch,
    opts: MemoryOptions,
    loads: list[StageLoad],
    imbalance: float,
    flex: BoolArray,
    scales: float = 0.0,
) -> _Shared:
    shape = ActivationShape.of(job.seq_length, batch)

    def acts(moe: bool) -> LayerActivations:
        return layer_activations(
            model,
            shape,
            moe=moe,
            swiglu_fused=opts.swiglu_fused,
            flash_attention=opts.flash_attention,
            moe_imbalance=imbalance,
            expert_output_saved=core_version(job) < MEMORY_EFFICIENT_PERMUTATION,
            # the launch asks for --moe-permute-fusion exactly where the stack has it
            # (planner.megatron.stack_flags; core 0.11 and TE 1.11, mechanisms-facts §8)
            permute_fused=missing(job, "moe_permute_fusion", "true") is None,
        )

    def saved(layer: LayerActivations, moe: bool) -> FloatArray:
        free = freeable(
            model,
            shape,
            layer,
            moe=moe,
            swiglu_fused=opts.swiglu_fused,
            imbalance=imbalance,
        )
        kept = saved_per_layer(layer, free, batch, moe=moe, full_share=share)
        if job.precision != "fp8":
            return kept
        fp8 = fp8_saving(model, shape, batch, moe=moe, imbalance=imbalance, scales=scales)
        return np.maximum(kept - fp8, layer.layer_input)

    # block recompute: the first N layers of each model chunk (chunk = rank layers / v)
    chunk = (loads[0].dense + loads[0].moe) / batch.vpp
    share = full_recompute_share(batch.mem, chunk)
    dense_acts = acts(False)
    moe_acts = acts(True) if model.is_moe else dense_acts
    saved_dense = saved(dense_acts, False)
    saved_moe = saved(moe_acts, model.is_moe)
    mtp_moe = model.moe_layer_pattern()[-1]
    mtp_acts = moe_acts if mtp_moe else dense_acts
    # MTP depth: its layer plus enorm/hnorm/eh-projection inputs (3 x 2sbh)
    saved_mtp = saved(mtp_acts, mtp_moe and model.is_moe) + 3 * dense_acts.layer_input
    # full recompute regenerates one layer's complete activations at a time (Korthikanti §5)
    regenerated = np.where(
        batch.recompute == RECOMPUTE_FULL, np.maximum(dense_acts.full, moe_acts.full), 0.0
    )
    logits = logits_bytes(model, shape, padded_vocab(model, batch.tp))
    workspace = backward_workspace(model, shape, moe_imbalance=imbalance)
    # --cp-comm-type all_gather: the full-sequence K/V (and dK/dV) of one layer at a time
    workspace = workspace + cp_attention_transient_bytes(model, job.seq_length, batch)
    comm = comm_buffer_bytes(model, batch, shape, counts, opts, imbalance=imbalance, flex=flex)
    runtime = runtime_overhead_bytes(model, batch, opts)
    # legacy CPU offload of the first N layers (pp = 1 only, rule 50): their saved tensors
    pattern = model.moe_layer_pattern()
    n_off = np.minimum(batch.mem.activation_offload_layers, model.num_layers)
    moe_off = np.array([sum(pattern[:k]) for k in range(model.num_layers + 1)])[n_off]
    offload = (n_off - moe_off) * saved_dense + moe_off * saved_moe
    # fine-grained offload: the chosen modules' inputs of every layer (planner.memory.offload)
    recomputed = np.where(batch.recompute == RECOMPUTE_FULL, share, 0.0)

    def module_offload(moe: bool) -> FloatArray:
        return layer_offload_bytes(
            model, job.seq_length, batch, moe=moe, imbalance=imbalance,
            fp8=job.precision == "fp8", recomputed_share=recomputed,
        )  # fmt: skip

    return _Shared(
        saved_dense=saved_dense,
        saved_moe=saved_moe,
        saved_mtp=saved_mtp,
        layer_input=dense_acts.layer_input,
        regenerated=regenerated,
        shape=shape,
        logits=logits,
        workspace=cp_peak_workspace(workspace, model, job.seq_length, batch),
        comm=comm,
        runtime=runtime,
        offload_layer_bytes=offload,
        module_offload_dense=module_offload(False),
        module_offload_moe=module_offload(model.is_moe),
    )
