"""Model states per GPU: weights, gradients, optimizer state and fp8 weight copies.

What each rank holds follows its parameters (:mod:`planner.memory.stages`) and how the optimizer
shards them: nothing, the distributed optimizer over dp x cp (megatron-facts §3.1, §4.3), or
Torch-FSDP2 (weights and gradients sharded too).
"""

from __future__ import annotations

import numpy as np

from planner.layouts import SHARD_FULL, SHARD_NONE, FloatArray, LayoutBatch
from planner.memory.options import MemoryOptions
from planner.memory.stages import StageParams
from planner.space import comm_flags
from planner.specs import TrainingJob


def model_state_bytes(
    params: StageParams, batch: LayoutBatch, options: MemoryOptions
) -> dict[str, FloatArray]:
    """Weights, gradients and optimizer state (megatron-facts §4.3, Fujii §4)."""
    dense_shard = (batch.dp * batch.cp).astype(np.float64)  # dist-opt shards over d*c (§3.1)
    expert_shard = np.maximum(batch.expert_dp, 1).astype(np.float64)
    mode = batch.optimizer_sharding
    sharded = params.dense / dense_shard + params.expert / expert_shard
    whole = params.dense + params.expert
    full = mode == SHARD_FULL
    held = np.where(full, sharded, whole)  # Torch-FSDP2 shards weights and grads too
    return {
        "weights_bytes": options.param_dtype_bytes * held,
        "gradients_bytes": options.grad_dtype_bytes * held,
        # 18 B/param without sharding, 6 + 12/(d c) with the distributed optimizer (§4.3)
        "optimizer_bytes": options.optimizer_state_bytes
        * np.where(mode == SHARD_NONE, whole, sharded),
    }


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
    gather = comm_flags.fp8_param_gather(job.precision, batch.optimizer_sharding)
    dist_opt = gather & (batch.optimizer_sharding != SHARD_FULL)
    weights = states["weights_bytes"] - np.where(
        dist_opt, (options.param_dtype_bytes - 1.0) * params.fp8_linear, 0.0
    )
    fp8 = np.where(gather, 1.0, 2.0) * params.fp8_linear
    return {**states, "weights_bytes": weights, "fp8_bytes": fp8}
