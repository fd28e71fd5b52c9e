"""Step time of fine-grained activation offload (``--offload-modules``; mechanisms-facts §6.5).

The module inputs :mod:`planner.offload_bytes` counts leave on a D2H stream during the forward
and return on an H2D stream before the backward, overlapped with compute; only transfer time
beyond the compute of the block the modules sit in (attention or MLP) is charged. NVIDIA
publishes 1.6-2 % of throughput for 10-18 % of memory on DeepSeek-V3 (mechanisms-facts §6.5);
tests/planner/memory/test_offload.py checks this model against it.
"""

from __future__ import annotations

import numpy as np

from planner.layouts import RECOMPUTE_FULL, FloatArray
from planner.offload_bytes import offload_transfer_seconds, offloaded_bytes
from planner.performance.compute import ComputeTimes, gemms_time
from planner.performance.context import StepContext

__all__ = ["module_offload_time"]


def module_offload_time(ctx: StepContext, compute: ComputeTimes) -> FloatArray:
    """Exposed seconds per micro-batch of the busiest rank's fine-grained offload."""
    link = ctx.cluster.gpu.host_link_bandwidth_bytes_per_s
    batch = ctx.batch
    if not link or not np.any(batch.mem.activation_offload_modules):
        return np.zeros_like(ctx.tokens)
    layers = np.maximum(ctx.layers_per_stage, 1.0)
    layer_fwd = compute.stage_fwd / layers
    # the attention block's share of a layer's forward: its GEMMs and core attention
    attention = gemms_time(ctx, ctx.shapes.attention_gemms, ctx.tokens, ctx.tp) + compute.core
    share = np.clip(attention / np.maximum(layer_fwd, 1e-30), 0.0, 1.0)
    imbalance = ctx.job.moe_imbalance
    exposed = np.zeros_like(ctx.tokens)
    for moe, weight in ((False, 1.0 - ctx.moe_fraction), (True, ctx.moe_fraction)):
        if weight == 0.0:
            continue
        attn_b, mlp_b = offloaded_bytes(
            ctx.model,
            ctx.job.seq_length,
            batch,
            moe=moe and ctx.model.is_moe,
            imbalance=imbalance,
            fp8=ctx.fp8,
        )
        per_layer = offload_transfer_seconds(attn_b, mlp_b, share, 3.0 * layer_fwd, link)
        exposed = exposed + weight * per_layer
    # fully recomputed layers save only their input: nothing of theirs moves
    moved = np.where(batch.recompute == RECOMPUTE_FULL, 0.0, 1.0)
    result: FloatArray = exposed * layers * moved
    return result
