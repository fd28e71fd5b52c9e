"""Core attention of a model with sliding-window layers: the per-layer mean over its full and
windowed layers (catalog-facts §1.6: GPT-OSS alternates a 128-token window and full attention).

A windowed layer computes the pairs of :func:`planner.model.attention_window.window_pair_ratio`
at the rate of the attention curve read at the effective causal length (a windowed kernel is a
short-key-length kernel: its mean keys per query is about w, so it runs at the rate of a causal
call of length ~2w). With cp > 1 a windowed layer runs ``all_gather`` (the rule of
:mod:`planner.space.cp_comm_rules`), each rank's s / c queries over the gathered keys, priced by
the same curve at min(s / c, effective length); the ring model's factor applies to the full
layers only, since its kernel calls are full causal ones (mechanisms-facts §1.2-1.3).
"""

from __future__ import annotations

import numpy as np

from planner.layouts import FloatArray
from planner.model.attention_window import (
    effective_causal_length,
    window_keys,
    window_pair_ratio,
    windowed_fraction,
)
from planner.performance.context import StepContext

__all__ = ["mix_windowed_core"]


def mix_windowed_core(ctx: StepContext, full_core: FloatArray, core_flop: FloatArray) -> FloatArray:
    """Forward seconds of one layer's core attention averaged over the model's layer kinds:
    ``full_core`` is a full layer's time, ``core_flop`` its full-causal forward FLOPs
    (megatron-facts §5.4). Returns ``full_core`` unchanged for a model without windows."""
    keys = window_keys(ctx.model)
    frac = windowed_fraction(ctx.model)
    if keys is None or frac == 0.0:
        return full_core
    prof, s = ctx.profile, ctx.seq
    length = np.minimum(effective_causal_length(s, keys), s / ctx.cp)
    # the fitted attention curve (performance-facts §4), read at the windowed call's length
    eff = prof.attention_efficiency * length / (length + prof.attention_half_seq)
    windowed = (
        core_flop
        * window_pair_ratio(s, keys)
        / (ctx.gpu.peak_bf16_flop_per_s * np.maximum(eff, 1e-6))
    )
    return np.asarray((1.0 - frac) * full_core + frac * windowed, np.float64)
