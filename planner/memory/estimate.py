"""Per-GPU memory of a Megatron-LM training step and the 80 % rule, vectorised over layouts.

Starts from Fujii et al.'s estimator (memory-estimator-fujii) and Megatron's theoretical memory
report (megatron-facts §4, §7) and goes past both: the first AND the last pipeline rank are
evaluated (embedding + p in-flight micro-batches versus output layer + fp32 logits), MoE expert
weights and routed-token activations, MLA, recompute none/selective/full, Torch-FSDP2-style full
sharding as well as the distributed optimizer, fp8 weight copies, and explicit terms for
communication buffers and the CUDA/NCCL runtime. A layout fits when the most loaded rank's total
is at most ``threshold`` x HBM (Fujii §6).

Each term of :data:`TERM_NAMES` is one function: weights, gradients and optimizer state in
:func:`planner.memory.states.model_state_bytes`, fp8 copies in ``fp8_weight_bytes``; activations,
the embedding input and the logits in :mod:`planner.memory.activations` (``activation_bytes``,
``embedding_input_bytes``, ``logits_bytes``, ``backward_workspace``); communication buffers, the
runtime and fragmentation in :mod:`planner.memory.buffers`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from planner.layouts import BoolArray, FloatArray, IntArray, LayoutBatch
from planner.memory.activations import (
    ActivationShape,
    activation_bytes,
    backward_workspace,
    embedding_input_bytes,
    logits_bytes,
)
from planner.memory.buffers import comm_buffer_bytes, fragmentation_bytes, runtime_overhead_bytes
from planner.memory.options import GIB as GIB  # re-exported
from planner.memory.options import MemoryOptions as MemoryOptions  # re-exported
from planner.memory.stages import in_flight_microbatches, stage_params
from planner.memory.states import fp8_weight_bytes, model_state_bytes
from planner.model.flops import padded_vocab
from planner.model.params import param_counts
from planner.model.pipeline import stage_layers
from planner.space import comm_flags
from planner.specs import ClusterSpec, ModelSpec, TrainingJob

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
    last_stage_terms: dict[str, FloatArray]
    first_stage_bytes: FloatArray
    last_stage_bytes: FloatArray
    total_bytes: FloatArray
    """max(first, last)."""
    worst_stage: IntArray
    """0 = first rank, 1 = last rank."""
    capacity_bytes: float
    threshold: float
    fits: BoolArray
    """total_bytes <= threshold x capacity_bytes."""
    stage_params: dict[str, FloatArray] = field(default_factory=dict)
    """Parameters per GPU: first_dense, first_expert, last_dense, last_expert."""


def estimate_memory(
    model: ModelSpec,
    cluster: ClusterSpec,
    job: TrainingJob,
    batch: LayoutBatch,
    options: MemoryOptions | None = None,
) -> MemoryEstimate:
    """Per-GPU peak bytes of the first and last pipeline rank for every layout in ``batch``."""
    opts = options or MemoryOptions()
    counts = param_counts(model, seq_length=job.seq_length)
    layers = stage_layers(model, batch)
    first_params, last_params = stage_params(model, counts, batch, layers)
    first = fp8_weight_bytes(
        model_state_bytes(first_params, batch, opts), first_params, job, batch, opts
    )
    last = fp8_weight_bytes(
        model_state_bytes(last_params, batch, opts), last_params, job, batch, opts
    )

    shape = ActivationShape.of(job.seq_length, batch)
    inflight_first, inflight_last = in_flight_microbatches(
        batch, job.global_batch_size, comm_flags.enabled(model, cluster, batch)
    )
    first["activations_bytes"], last["activations_bytes"] = activation_bytes(
        model, batch, shape, layers, (inflight_first, inflight_last), opts
    )
    single = batch.pp == 1
    embedding_input = embedding_input_bytes(model, shape, batch, inflight_first, opts)
    first["embedding_input_bytes"] = embedding_input
    last["embedding_input_bytes"] = np.where(single, embedding_input, 0.0)
    logits = logits_bytes(model, shape, padded_vocab(model, batch.tp))
    last["logits_bytes"] = logits
    first["logits_bytes"] = np.where(single, logits, 0.0)
    workspace = backward_workspace(model, shape, moe_imbalance=opts.moe_token_imbalance)
    first["workspace_bytes"] = last["workspace_bytes"] = workspace
    comm = comm_buffer_bytes(model, batch, shape, counts, opts)
    first["comm_buffers_bytes"] = last["comm_buffers_bytes"] = comm
    runtime = runtime_overhead_bytes(model, batch, opts)
    first["runtime_overhead_bytes"] = last["runtime_overhead_bytes"] = runtime
    for stage in (first, last):
        stage["fragmentation_bytes"] = fragmentation_bytes(stage, opts)

    first_terms = {name: np.asarray(first[name], dtype=np.float64) for name in TERM_NAMES}
    last_terms = {name: np.asarray(last[name], dtype=np.float64) for name in TERM_NAMES}
    first_total: FloatArray = np.sum([first_terms[k] for k in TERM_NAMES], axis=0)
    last_total: FloatArray = np.sum([last_terms[k] for k in TERM_NAMES], axis=0)
    worst: IntArray = (last_total > first_total).astype(np.int64)
    total: FloatArray = np.maximum(first_total, last_total)
    terms = {k: np.where(worst == 1, last_terms[k], first_terms[k]) for k in TERM_NAMES}
    capacity = float(cluster.gpu.hbm_bytes)
    return MemoryEstimate(
        terms=terms,
        first_stage_terms=first_terms,
        last_stage_terms=last_terms,
        first_stage_bytes=first_total,
        last_stage_bytes=last_total,
        total_bytes=total,
        worst_stage=worst,
        capacity_bytes=capacity,
        threshold=opts.threshold,
        fits=total <= opts.threshold * capacity,
        stage_params={
            "first_dense": first_params.dense,
            "first_expert": first_params.expert,
            "last_dense": last_params.dense,
            "last_expert": last_params.expert,
        },
    )
