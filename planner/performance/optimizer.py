"""The optimizer step: memory-bound Adam over the local shard of the parameters.

Fused Adam reads and writes the fp32 master weights, both moments and the gradient of every
local parameter, and the gradient-norm pass reads the gradients again (performance-facts §3.3).
"""

from __future__ import annotations

import numpy as np

from planner.layouts import SHARD_NONE, FloatArray
from planner.performance.context import StepContext
from planner.performance.data_parallel import StageParamCounts

ADAM_BYTES_PER_PARAM = 34.0  # performance-facts §3.3: fused Adam 30 B + grad-norm 4 B


def optimizer_step_time(ctx: StepContext, params: StageParamCounts) -> FloatArray:
    """Seconds of one optimizer step on one GPU of the busiest rank."""
    batch = ctx.batch
    sharded = batch.optimizer_sharding != SHARD_NONE
    edp = np.maximum(batch.expert_dp, 1)
    p_local = np.where(sharded, params.dense / (ctx.dp * ctx.cp), params.dense) + np.where(
        sharded, params.expert / edp, params.expert
    )
    return np.asarray(ADAM_BYTES_PER_PARAM * p_local / ctx.hbm_bytes_per_s, np.float64)
