"""Pipeline parallelism: the p2p sends between stages and the pipeline bubble.

Each micro-batch sends its activations forward and its gradients backward once per model chunk
(x v interleaved); with interleaving part of it hides behind compute (performance-facts §6.5).
The bubble is (p - 1) / v of one micro-batch's stage time (megatron-facts §6, performance-facts
§9.6).
"""

from __future__ import annotations

import numpy as np

from planner.layouts import FloatArray
from planner.performance import overlap
from planner.performance.collectives import crosses_nodes, p2p_share, p2p_time
from planner.performance.context import StepContext


def pp_p2p_time(ctx: StepContext) -> FloatArray:
    """Exposed pipeline p2p seconds of one micro-batch (send activations, receive gradients)."""
    batch, links, vpp, prof = ctx.batch, ctx.links, ctx.vpp, ctx.profile
    p2p_bytes = ctx.activation_bytes / np.where(ctx.sp > 0, ctx.tp, 1.0)
    p2p_cross = crosses_nodes(links, batch.pp, batch.tp * batch.cp * batch.dp)
    p2p = p2p_time(links, p2p_cross, p2p_bytes)
    p2p_exposed = np.where(vpp > 1, 1 - prof.pp_overlap, 1.0)
    pp_mb = np.where(batch.pp > 1, 2 * vpp * p2p * p2p_exposed, 0.0)
    pp_hidden = np.where(batch.pp > 1, 2 * vpp * p2p * (1 - p2p_exposed), 0.0)
    pp_mb = pp_mb + overlap.interference(ctx, p2p_share(links, p2p_cross)) * pp_hidden
    return np.asarray(pp_mb, np.float64)


def pipeline_bubble(ctx: StepContext, stage_mb: FloatArray, unhidden_mb: FloatArray) -> FloatArray:
    """Pipeline bubble: (p - 1) / v micro-batch stage times (megatron-facts §6).

    ``unhidden_mb`` is traffic the steady state hides but warm-up and cool-down run exposed
    (the MoE all-to-all overlap has no partner micro-batch there).
    """
    return np.asarray((ctx.pp - 1) / ctx.vpp * (stage_mb + unhidden_mb), np.float64)
