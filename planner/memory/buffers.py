"""Buffers and overheads per GPU: communication buffers, the CUDA/NCCL runtime, fragmentation.

Terms the textbook formulas leave out but a real run allocates (memory-estimator-fujii §7):
pipeline send/receive buffers, MoE all-to-all buffers, FSDP's gathered layers, the CUDA
context and library workspaces, NCCL's buffers per communicator, and the caching allocator's
unusable blocks.
"""

from __future__ import annotations

import numpy as np

from planner.layouts import SHARD_FULL, BoolArray, FloatArray, LayoutBatch
from planner.memory.activations import BF16, ActivationShape, routed_tokens
from planner.memory.options import MemoryOptions
from planner.model.params import ParamCounts
from planner.specs import ModelSpec


def comm_buffer_bytes(
    model: ModelSpec,
    batch: LayoutBatch,
    shape: ActivationShape,
    counts: ParamCounts,
    opts: MemoryOptions,
    *,
    imbalance: float,
    flex: BoolArray,
) -> FloatArray:
    """Pipeline p2p, DP bucket, MoE dispatch and FSDP gather buffers of one GPU (``flex``:
    layouts that dispatch with DeepEP/HybridEP, the planner's auto choice resolved)."""
    h = model.hidden_size
    tokens = shape.tokens
    # pipeline send/recv of s/(c t) x b x h activations and gradients, doubled when interleaved
    p2p = np.where(batch.pp > 1, 4 * BF16 * tokens * h / shape.sp_shard, 0.0)
    p2p = p2p * np.where(batch.vpp > 1, 2.0, 1.0)
    comm = p2p + opts.dp_bucket_bytes
    if model.is_moe:
        # one MoE layer's dispatch in flight: alltoall holds permute 1's K copies per token and
        # the all-to-all's received copies at once; flex fuses permute 1 into its kernel
        # ("no explicit top-k copy", mechanisms-facts §4.4) and receives into its own
        # registered buffers, so one received copy remains (the permuted FC1 input is saved)
        routed = routed_tokens(model, shape, imbalance)
        comm = comm + np.where(flex, 1.0, 2.0) * BF16 * routed * h
        comm = comm + np.where(flex, opts.deepep_buffer_bytes, 0.0)
    # FSDP: two layers' gathered bf16 weights (prefetch) and one layer's fp32 gradients
    layer = np.maximum(
        counts.dense_layer.tp_sharded / shape.t + counts.dense_layer.replicated,
        counts.moe_layer.tp_sharded / shape.t
        + counts.moe_layer.replicated
        + counts.moe_layer.routed_experts / (batch.etp * batch.ep),
    )
    comm = comm + np.where(batch.optimizer_sharding == SHARD_FULL, (2 * 2 + 4) * layer, 0.0)
    return np.asarray(comm, np.float64)


def communicators(model: ModelSpec, batch: LayoutBatch) -> FloatArray:
    """NCCL communicators of size > 1 one GPU belongs to (TP, CP, DP x CP, PP, EP, expert DP)."""
    count = (
        (batch.tp > 1).astype(np.float64)
        + (batch.cp > 1)
        + (batch.dp * batch.cp > 1)
        + ((batch.dp > 1) & (batch.cp > 1))
        + (batch.pp > 1)
    )
    if model.is_moe:
        count = count + (batch.ep > 1) + (batch.expert_dp > 1) + (batch.etp != batch.tp)
    result: FloatArray = count
    return result


def runtime_overhead_bytes(model: ModelSpec, batch: LayoutBatch, opts: MemoryOptions) -> FloatArray:
    """CUDA context, library workspaces and NCCL buffers (memory-estimator-fujii §7, S7)."""
    if not opts.include_runtime_overhead:
        return np.zeros(len(batch))
    return np.asarray(
        opts.cuda_context_bytes
        + opts.library_workspace_bytes
        + opts.nccl_bytes_per_communicator * communicators(model, batch),
        np.float64,
    )


def fragmentation_bytes(stage: dict[str, FloatArray], opts: MemoryOptions) -> FloatArray:
    """Caching-allocator blocks reserved but unusable: a fraction of the per-step memory."""
    dynamic = (
        stage["activations_bytes"]
        + stage["logits_bytes"]
        + stage["workspace_bytes"]
        + stage["comm_buffers_bytes"]
    )
    fraction = 0.0
    if opts.include_runtime_overhead:
        fraction = (
            opts.expandable_fragmentation_fraction
            if opts.expandable_segments
            else opts.fragmentation_fraction
        )
    return np.asarray(fraction * dynamic, np.float64)


def allocated_bytes(terms: dict[str, FloatArray], opts: MemoryOptions) -> FloatArray:
    """The part of an estimate PyTorch's ``max_memory_allocated`` counts: everything but the
    caching allocator's unusable blocks, the CUDA context and NCCL's own buffers, which
    PyTorch does not see (megatron-log-format §5.1: "max allocated" is what estimators
    approximate; add the context and NCCL buffers to compare with capacity). The library
    workspaces stay: cuBLAS and TE take theirs from the caching allocator [inferred]."""
    outside = terms["runtime_overhead_bytes"] - np.where(
        terms["runtime_overhead_bytes"] > 0, opts.library_workspace_bytes, 0.0
    )
    total = np.sum([terms[k] for k in terms], axis=0)
    result: FloatArray = total - terms["fragmentation_bytes"] - outside
    return result
