"""How much attention a sliding-window layer computes, against a full causal layer.

A causal query at position p sees p + 1 keys; with ``--window-size L,R`` it sees min(p + 1, L + 1)
(catalog-facts §1.6: GPT-OSS's (127, 0) is "itself and the 127 previous tokens"; the right side
adds nothing under the causal mask). Megatron's FLOP convention counts a causal layer as s^2 / 2
pairs per sequence (megatron-facts §5.4, the causal halving), so the windowed count here uses
the same continuous form: s^2 / 2 while s <= w (w = L + 1 keys), else w^2 / 2 + (s - w) w. The
two agree at s = w, so a window at least as long as the sequence costs exactly a full layer.

The model TFLOP/s metric keeps Megatron's full-causal count (planner.model.flops); the step time
uses these pairs.
"""

from __future__ import annotations

import numpy as np

from planner.layouts import FloatArray
from planner.specs import ModelSpec

__all__ = [
    "effective_causal_length",
    "window_keys",
    "window_pair_ratio",
    "windowed_fraction",
    "windowed_layer_pattern",
]


def windowed_layer_pattern(model: ModelSpec) -> list[bool]:
    """True for each decoder layer with sliding-window attention: Megatron's skip freq N makes
    1-based layer n full where n % N == 0 (catalog-facts §1.6: GPT-OSS's layer 0 is windowed)."""
    if model.window_size is None:
        return [False] * model.num_layers
    freq = model.window_attn_skip_freq
    return [freq is None or (i + 1) % freq != 0 for i in range(model.num_layers)]


def window_keys(model: ModelSpec) -> int | None:
    """Keys a windowed query sees at most (left + 1), or None for a model without windows."""
    return None if model.window_size is None else model.window_size[0] + 1


def windowed_fraction(model: ModelSpec) -> float:
    """Share of the decoder layers with windowed attention. Like the MoE share
    (``StepContext.moe_fraction``) it is the model's, applied to every pipeline stage."""
    return sum(windowed_layer_pattern(model)) / float(model.num_layers)


def window_pair_ratio(seq: FloatArray | float, keys: int) -> FloatArray:
    """Query-key pairs of a windowed causal layer over a full causal layer's s^2 / 2:
    1 while s <= w, else (s w - w^2 / 2) / (s^2 / 2) = 2 w / s - (w / s)^2."""
    s = np.maximum(np.asarray(seq, dtype=np.float64), 1.0)
    r = np.minimum(keys / s, 1.0)
    return np.asarray(np.where(s <= keys, 1.0, 2.0 * r - r * r), np.float64)


def effective_causal_length(seq: FloatArray | float, keys: int) -> FloatArray:
    """Length of the full causal call whose mean keys per query (length / 2) equals the windowed
    layer's mean (pairs / s): s while s <= w, else 2 w - w^2 / s, between w and 2 w. This is the
    input of the attention-kernel efficiency curves, which are fitted on causal calls of length
    s (performance-facts §2: a windowed kernel is a short-key-length kernel) [inferred]."""
    s = np.maximum(np.asarray(seq, dtype=np.float64), 1.0)
    return np.asarray(s * window_pair_ratio(s, keys), np.float64)
