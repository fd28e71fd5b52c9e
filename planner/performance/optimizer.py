"""The optimizer step: memory-bound Adam over the local shard of the parameters.

Fused Adam reads and writes the fp32 master weights, both moments and the gradient of every
local parameter, and the gradient-norm pass reads the gradients again (performance-facts §3.3).
"""

from __future__ import annotations

import numpy as np

from planner.layouts import SHARD_NONE, FloatArray
from planner.performance.context import StepContext
from planner.performance.data_parallel import StageParamCounts
from planner.performance.memory_settings import adam_bytes_per_param, optimizer_offload_seconds


def optimizer_step_time(ctx: StepContext, params: StageParamCounts) -> FloatArray:
    """Seconds of one optimizer step on one GPU of the busiest rank: fused Adam on the GPU's
    share (fewer bytes with bf16 moments), and the host's share with ``--optimizer-cpu-offload``
    (planner.performance.memory_settings)."""
    batch = ctx.batch
    sharded = batch.optimizer_sharding != SHARD_NONE
    edp = np.maximum(batch.expert_dp, 1)
    p_local = np.where(sharded, params.dense / (ctx.dp * ctx.cp), params.dense) + np.where(
        sharded, params.expert / edp, params.expert
    )
    on_gpu = (1 - batch.mem.optimizer_offload_fraction) * adam_bytes_per_param(batch)
    host = optimizer_offload_seconds(
        ctx.cluster, batch, p_local, ctx.profile.host_optimizer_params_per_s
    )
    return np.asarray(on_gpu * p_local / ctx.hbm_bytes_per_s + host, np.float64)
