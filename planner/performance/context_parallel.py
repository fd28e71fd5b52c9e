"""Context-parallel communication: the ring exchange of K/V, hidden behind attention.

Each of the cp - 1 ring steps sends one K/V chunk to the next rank while the core attention of
the current chunk runs; only what attention cannot cover is exposed (performance-facts §6.3).
Forward, backward (twice the traffic) and, with full recompute, the forward again.
"""

from __future__ import annotations

import numpy as np

from planner.layouts import FloatArray
from planner.performance import overlap
from planner.performance.collectives import crosses_nodes, p2p_share, p2p_time
from planner.performance.context import BF16_BYTES, StepContext


def kv_width(ctx: StepContext) -> FloatArray:
    """K and V values per token on one GPU (MLA: the per-head q/k rope and v widths)."""
    model, tp = ctx.model, ctx.tp
    if model.multi_latent_attention:
        return np.asarray(
            model.num_attention_heads
            / tp
            * (
                (model.qk_head_dim or 0)
                + (model.qk_pos_emb_head_dim or 0)
                + (model.v_head_dim or 0)
            ),
            np.float64,
        )
    return np.asarray(2 * np.maximum(model.query_groups / tp, 1.0) * model.head_dim, np.float64)


def cp_comm_time(ctx: StepContext, core: FloatArray) -> FloatArray:
    """Exposed CP ring exchange of one micro-batch; ``core`` is one layer's core attention."""
    batch, links, cp, full = ctx.batch, ctx.links, ctx.cp, ctx.full
    kv_step = p2p_time(
        links, crosses_nodes(links, batch.cp, batch.tp), ctx.tokens * kv_width(ctx) * BF16_BYTES
    )
    cp_layer_fwd = np.where(batch.cp > 1, np.maximum((cp - 1) * kv_step - core, 0.0), 0.0)
    cp_mb = (3 + full) * ctx.layers_per_stage * cp_layer_fwd
    cp_hidden = np.where(batch.cp > 1, np.minimum((cp - 1) * kv_step, core), 0.0)
    cp_cross = crosses_nodes(links, batch.cp, batch.tp)
    steal = overlap.interference(ctx, p2p_share(links, cp_cross))
    cp_mb = cp_mb + steal * (3 + full) * ctx.layers_per_stage * cp_hidden
    return np.asarray(cp_mb, np.float64)
