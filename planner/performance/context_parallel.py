"""Context-parallel communication: ring attention step by step (issue 12 item 4).

Where the GPU has collective curves and an attention-kernel prior, a layer with cp > 1 runs
TE's ``p2p`` ring (mechanisms-facts §1.2, :mod:`planner.performance.ring_attention`): c kernel
calls of b s_l^2 / 2 pairs forward and backward, the K/V hop of step i+1 under the attention of
step i (KV + dKV backward, the last dKV exposed), the output/LSE correction after the loop, and
each hop on the link the rank order gives it (CP right after TP, §1.6). It replaces

* the CP term: exposed hops + correction, forward and backward, again with full recompute and
  with the ``core_attn`` selective replay ("attention forward (and CP communication)", §6.4);
* the core-attention share of compute: :func:`cp_core_factor` rescales the compute term's
  attention (fitted plateau, rate of an s / c chunk) to the ring's c calls of 2c blocks.

Elsewhere (no curves, no kernel prior, MLA): each of the cp - 1 ring steps sends one K/V chunk
while the core attention of the current chunk runs; only what attention cannot cover is exposed
(performance-facts §6.3).
"""

from __future__ import annotations

import numpy as np

from planner.layout_settings import MODULE_BITS, effective_modules
from planner.layouts import CP_COMM_AUTO, FloatArray, IntArray
from planner.performance import overlap
from planner.performance.attention_kernel import attention_call_time, attention_kernel_prior
from planner.performance.collectives import crosses_nodes, p2p_share, p2p_time
from planner.performance.context import BF16_BYTES, StepContext
from planner.performance.ring_attention import AttentionShape, CpAttentionTime, cp_attention_time
from planner.specs import CP_COMM_TYPES


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


def ring_model(ctx: StepContext) -> CpAttentionTime | None:
    """The p2p ring of one layer per micro-batch, or None where it cannot be priced (no cp > 1,
    no curves, no attention-kernel prior, MLA)."""
    model, gpu, table = ctx.model, ctx.gpu, ctx.links.table
    kernel = attention_kernel_prior(gpu)
    if table is None or kernel is None or model.multi_latent_attention or not np.any(ctx.cp > 1):
        return None
    c = ctx.cp
    shape = AttentionShape(
        batch=ctx.batch.micro_batch_size.astype(np.float64),
        seq_length=np.full_like(c, ctx.seq),
        cp=c,
        heads=model.num_attention_heads / ctx.tp,
        kv_heads=np.maximum(model.query_groups / ctx.tp, 1.0),
        head_dim=float(model.head_dim),
    )
    # --cp-comm-type per layout; None is Megatron's default, p2p (megatron-facts: default p2p)
    codes = np.where(ctx.batch.cp_comm_codes == CP_COMM_AUTO, 0, ctx.batch.cp_comm_codes)
    variants = {
        int(k): cp_attention_time(
            CP_COMM_TYPES[int(k)],
            kernel,
            shape,
            table=table,
            tp=ctx.tp,
            gpus_per_node=ctx.cluster.gpus_per_node,
            nic_bytes_per_s=ctx.links.single_nic_bytes_per_s,
            hbm_bytes_per_s=ctx.hbm_bytes_per_s,
        )
        for k in np.unique(codes[c > 1] if np.any(c > 1) else codes[:1])
    }
    return _pick(variants, codes)


UNRUNNABLE_S = 1e6
"""Seconds given to a CP type the heads cannot run (a2a, a2a+p2p: planner.space.cp_comm_rules
rejects the layout): never the fastest, and no inf * 0 = NaN downstream."""


def _pick(variants: dict[int, CpAttentionTime], codes: IntArray) -> CpAttentionTime:
    """Per layout, the times of its own variant (rows of other codes read p2p's or any)."""
    first = next(iter(variants.values()))
    out = {}
    for f in CpAttentionTime.__dataclass_fields__:
        col = np.array(getattr(first, f), dtype=np.float64, copy=True)
        for k, v in variants.items():
            col = np.where(codes == k, getattr(v, f), col)
        out[f] = np.asarray(np.where(np.isfinite(col), col, UNRUNNABLE_S), np.float64)
    return CpAttentionTime(**out)


def cp_core_factor(
    ctx: StepContext,
    chunk_eff: FloatArray,
    full_eff: FloatArray | float,
    ring: CpAttentionTime | None,
) -> FloatArray:
    """Factor on the compute term's core attention of a cp > 1 layout: the ring's kernel time
    over 1/c of the unsplit attention (the same kernel model, one causal call on s), times
    full_eff / chunk_eff to undo the compute term's s / c chunk rate. 1 where cp = 1 or no ring
    model applies (``ring`` is :func:`ring_model`'s)."""
    kernel = attention_kernel_prior(ctx.gpu)
    if ring is None or kernel is None or not np.any(ctx.cp > 1):
        return np.ones_like(ctx.tokens)
    s = np.full_like(ctx.tokens, ctx.seq)
    bh = ctx.batch.micro_batch_size * ctx.model.num_attention_heads / ctx.tp
    d = float(ctx.model.head_dim)
    plain = np.zeros_like(s)
    for bwd in (False, True):
        plain = plain + attention_call_time(
            kernel, batch_heads=bh, query_rows=s, pairs=s * s / 2.0, head_dim=d, backward=bwd
        )
    ratio = (ring.fwd_attention_s + ring.bwd_attention_s) * ctx.cp / np.maximum(plain, 1e-30)
    factor = ratio * chunk_eff / np.maximum(full_eff, 1e-9)
    return np.asarray(np.where(ctx.cp > 1, factor, 1.0), np.float64)


def cp_comm_time(ctx: StepContext, core: FloatArray, ring: CpAttentionTime | None) -> FloatArray:
    """Exposed CP time of one micro-batch; ``core`` is one layer's core attention (fallback),
    ``ring`` the p2p ring where it applies (:func:`ring_model`)."""
    batch, links, cp, full = ctx.batch, ctx.links, ctx.cp, ctx.full
    layers = ctx.layers_per_stage
    cp_cross = crosses_nodes(links, batch.cp, batch.tp)
    steal = overlap.interference(ctx, p2p_share(links, cp_cross))
    if ring is not None:
        on = cp > 1
        fwd = np.where(on, ring.fwd_exposed_s + ring.correction_s, 0.0)
        bwd = np.where(on, ring.bwd_exposed_s, 0.0)
        # full recompute and the core_attn replay run the forward again, transfers included
        replay = (effective_modules(batch) & MODULE_BITS["core_attn"]) != 0
        again = np.maximum(full, replay.astype(np.float64))
        hidden = np.where(
            on,
            np.maximum(ring.fwd_comm_s - ring.fwd_exposed_s, 0.0) * (1.0 + again)
            + np.maximum(ring.bwd_comm_s - ring.bwd_exposed_s, 0.0),
            0.0,
        )
        return np.asarray(layers * (fwd * (1.0 + again) + bwd + steal * hidden), np.float64)
    kv_step = p2p_time(links, cp_cross, ctx.tokens * kv_width(ctx) * BF16_BYTES)
    cp_layer_fwd = np.where(batch.cp > 1, np.maximum((cp - 1) * kv_step - core, 0.0), 0.0)
    cp_mb = (3 + full) * layers * cp_layer_fwd
    cp_hidden = np.where(batch.cp > 1, np.minimum((cp - 1) * kv_step, core), 0.0)
    cp_mb = cp_mb + steal * (3 + full) * layers * cp_hidden
    return np.asarray(cp_mb, np.float64)
