"""Model states per GPU: weights, gradients, optimizer state and fp8 weight copies.

What each rank holds follows its parameters (:mod:`planner.memory.stages`) and how the optimizer
shards them: nothing, the distributed optimizer over dp x cp (megatron-facts §3.1, §4.3), or
Torch-FSDP2 (weights and gradients sharded too); and the memory settings of issue 13: bf16
gradients, bf16 Adam moments, optimizer offload to the host, fp8 parameters.
"""

from __future__ import annotations

import numpy as np

from planner.layouts import SHARD_FULL, SHARD_NONE, FloatArray, LayoutBatch
from planner.memory.options import MemoryOptions
from planner.memory.stages import StageParams
from planner.space import comm_flags
from planner.specs import TrainingJob


def state_bytes_per_param(
    batch: LayoutBatch, job: TrainingJob, options: MemoryOptions
) -> tuple[FloatArray, FloatArray]:
    """(gradient, optimizer-state) bytes per parameter for every layout.

    bf16 (megatron-facts §4.3): fp32 main gradients (4) and fp32 master + Adam m + v (12);
    ``--grad-reduce-in-bf16``: 2-byte gradients; precision-aware optimizer with bf16 moments and
    the master weight kept as a 16-bit remainder: 2 + 2 + 2 = 6 (mechanisms-facts §6.6);
    fp16 (megatron-facts §4.3, doc row): fp16 gradients (2) and an fp32 gradient copy in the
    optimizer on top of master and moments (16).
    """
    mem = batch.mem
    if job.precision == "fp16":
        grad = np.full(len(batch), 2.0)
        optimizer = np.where(mem.optimizer_state_bf16, 6.0 + 4.0, 16.0)
    else:
        grad = np.where(mem.grad_reduce_bf16, 2.0, float(options.grad_dtype_bytes))
        optimizer = np.where(mem.optimizer_state_bf16, 6.0, float(options.optimizer_state_bytes))
    return grad, optimizer


def model_state_bytes(
    params: StageParams, batch: LayoutBatch, job: TrainingJob, options: MemoryOptions
) -> tuple[dict[str, FloatArray], FloatArray]:
    """Weights, gradients and optimizer state on the GPU (megatron-facts §4.3, Fujii §4), and
    the bytes ``--optimizer-offload-fraction`` puts in host memory."""
    grad_bytes, optimizer_bytes = state_bytes_per_param(batch, job, options)
    dense_shard = (batch.dp * batch.cp).astype(np.float64)  # dist-opt shards over d*c (§3.1)
    expert_shard = np.maximum(batch.expert_dp, 1).astype(np.float64)
    mode = batch.optimizer_sharding
    sharded = params.dense / dense_shard + params.expert / expert_shard
    whole = params.dense + params.expert
    full = mode == SHARD_FULL
    held = np.where(full, sharded, whole)  # Torch-FSDP2 shards weights and grads too
    # 18 B/param without sharding, 6 + 12/(d c) with the distributed optimizer (§4.3)
    state_params = np.where(mode == SHARD_NONE, whole, sharded)
    optimizer = optimizer_bytes * state_params
    # HybridDeviceOptimizer (§6.6): the host takes fraction f of the Adam moments off the GPU and
    # runs their step with its own fp32 master and gradient copies; the GPU keeps its master
    # shard [inferred: Qwen3-30B-A3B frees 3.8 GB per 25 % at about 1.9e9 local parameters,
    # i.e. 8 bytes per parameter = the fp32 moments]
    moments = np.where(batch.mem.optimizer_state_bf16, 4.0, 8.0)
    fraction = batch.mem.optimizer_offload_fraction
    host = fraction * (moments + 4.0 + 4.0) * state_params
    terms = {
        "weights_bytes": options.param_dtype_bytes * held,
        "gradients_bytes": grad_bytes * held,
        "optimizer_bytes": optimizer - fraction * moments * state_params,
    }
    return terms, host


def fp8_weight_bytes(
    states: dict[str, FloatArray],
    params: StageParams,
    job: TrainingJob,
    batch: LayoutBatch,
    options: MemoryOptions,
) -> dict[str, FloatArray]:
    """``states`` with the fp8 weight copies added (and the weights they replace taken off).

    TE keeps an fp8 copy and an fp8 transpose of every linear weight (1 + 1 bytes); with
    --fp8-param-gather the fp8 weight is the model weight (1 byte instead of bf16's 2) and only
    the transpose comes on top (FSDP's sharded weights are left as they are).
    """
    if job.precision != "fp8":
        return {**states, "fp8_bytes": np.zeros(len(batch))}
    gather = comm_flags.fp8_gather(job, batch)
    dist_opt = gather & (batch.optimizer_sharding != SHARD_FULL)
    weights = states["weights_bytes"] - np.where(
        dist_opt, (options.param_dtype_bytes - 1.0) * params.fp8_linear, 0.0
    )
    fp8 = np.where(gather, 1.0, 2.0) * params.fp8_linear
    return {**states, "weights_bytes": weights, "fp8_bytes": fp8}
