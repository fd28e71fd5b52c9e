"""Model FLOPs per iteration: Megatron's ``num_floating_point_operations`` (megatron-facts §5).

3x forward GEMM FLOPs (forward, wgrad, dgrad), 2 FLOPs per multiply-add, causal attention halved,
no recompute factor, router/norm/element-wise FLOPs not counted. The only layout dependence is
the padded vocabulary, which grows with tp (megatron-facts §3.4).

Sliding-window layers are counted as full causal layers: §5 states no window term (S2 · L_att
· core for every standard-attention layer), so the model TFLOP/s metric keeps Megatron's
convention, not the work done. The step time prices the pairs a window computes
(planner.model.attention_window, planner.performance.windowed_attention).
"""

from __future__ import annotations

import math
from typing import overload

import numpy as np

from planner.layouts import FloatArray, IntArray, LayoutBatch
from planner.specs import ModelSpec, TrainingJob

VOCAB_DIVISIBLE_BY = 128
"""``--make-vocab-size-divisible-by``: Megatron's default, assumed by the memory and FLOPs models
(megatron-facts §3.4)."""


@overload
def padded_vocab(model: ModelSpec, tp: int) -> int: ...
@overload
def padded_vocab(model: ModelSpec, tp: FloatArray | IntArray) -> FloatArray: ...
def padded_vocab(model: ModelSpec, tp: int | FloatArray | IntArray) -> int | FloatArray:
    """Megatron's padded vocabulary ceil(V / (128 t)) x 128 t (megatron-facts §3.4).

    An int tp gives an int (the launch flags); an array of tp gives one float per layout.
    """
    if isinstance(tp, int):
        unit = VOCAB_DIVISIBLE_BY * tp
        return math.ceil(model.vocab_size / unit) * unit
    units = float(VOCAB_DIVISIBLE_BY) * np.asarray(tp, np.float64)
    return np.asarray(np.ceil(model.vocab_size / units) * units, np.float64)


def _layer_counts(model: ModelSpec) -> tuple[int, int]:
    """(dense, MoE) layers, MTP depths added to the kind of the last layer (megatron-facts §5.2)."""
    pattern = model.moe_layer_pattern()
    n_moe = sum(pattern)
    n_dense = model.num_layers - n_moe
    if model.mtp_num_layers:
        if pattern[-1]:
            n_moe += model.mtp_num_layers
        else:
            n_dense += model.mtp_num_layers
    return n_dense, n_moe


def _token_linear_flops(model: ModelSpec) -> float:
    """FLOPs per token that do not depend on V or s: MLP, attention projections and MTP extras."""
    h = model.hidden_size
    a = model.num_attention_heads
    phi = 3 if model.gated_linear_unit else 2  # ffn multiplier (megatron-facts §5.3)
    n_dense, n_moe = _layer_counts(model)
    routed = model.expert_ffn_hidden_size * model.moe_router_topk * phi if model.is_moe else 0
    shared = model.shared_expert_ffn_hidden_size * phi if model.is_moe else 0
    # 6 h [F phi n_dense + R n_moe + F_s phi n_moe] (megatron-facts §5.3)
    mlp = 6.0 * h * (model.ffn_hidden_size * phi * n_dense + (routed + shared) * n_moe)
    if model.multi_latent_attention:
        d_qk = model.qk_head_dim or 0
        d_rope = model.qk_pos_emb_head_dim or 0
        d_v = model.v_head_dim or 0
        kv_lora = model.kv_lora_rank or 0
        if model.q_lora_rank is None:
            q_term = h * a * (d_qk + d_rope)
        else:
            q_term = model.q_lora_rank * (h + a * (d_qk + d_rope) + 1)
        # 6 [Qterm + kv_lora (h + a(d_qk + d_v) + 1) + h d_rope + a d_v h] (megatron-facts §5.3)
        attn = 6.0 * (q_term + kv_lora * (h + a * (d_qk + d_v) + 1) + h * d_rope + a * d_v * h)
    else:
        q = a * model.head_dim
        kv = model.query_groups * model.head_dim
        # 6 [h (q + 2 g d_k) + q h] per layer (megatron-facts §5.3)
        attn = 6.0 * (h * (q + 2 * kv) + q * h)
    num_attention_layers = model.num_layers + model.mtp_num_layers
    # MTP extras 6 D (3h + 2h^2): eh-projection and norms (megatron-facts §5.3)
    mtp = 6.0 * model.mtp_num_layers * (3 * h + 2 * h * h)
    return mlp + num_attention_layers * attn + mtp


def _core_attention_flops_per_token_pair(model: ModelSpec) -> float:
    """Per attention layer, multiplied by sum of s^2 (megatron-facts §5.4)."""
    a = model.num_attention_heads
    if model.multi_latent_attention:
        d_qk = model.qk_head_dim or 0
        d_rope = model.qk_pos_emb_head_dim or 0
        d_v = model.v_head_dim or 0
        # 6 [a (d_qk + d_rope)/2 + a d_v/2] (megatron-facts §5.4)
        return 6.0 * (a * (d_qk + d_rope) / 2 + a * d_v / 2)
    return 6.0 * a * model.head_dim  # 6 q (megatron-facts §5.4)


def flops_per_token(model: ModelSpec, vocab: int, seq_length: int) -> float:
    """Model FLOPs per trained token with a full-length causal sequence (megatron-facts §5.5)."""
    logits = 6.0 * model.hidden_size * vocab * (model.mtp_num_layers + 1)  # §5.3
    core = seq_length * (model.num_layers + model.mtp_num_layers)
    return _token_linear_flops(model) + logits + core * _core_attention_flops_per_token_pair(model)


def flops_per_iteration(model: ModelSpec, job: TrainingJob, batch: LayoutBatch) -> FloatArray:
    """FLOPs of one iteration (global batch) for every layout; V is padded by each layout's tp."""
    s = job.seq_length
    tokens = float(job.global_batch_size) * s  # T = B s (megatron-facts §5.1)
    seq_sq = float(job.global_batch_size) * s * s  # S2 = B s^2
    vocab = padded_vocab(model, batch.tp)
    linear = _token_linear_flops(model)
    logits = 6.0 * model.hidden_size * vocab * (model.mtp_num_layers + 1)
    core = (model.num_layers + model.mtp_num_layers) * _core_attention_flops_per_token_pair(model)
    # FLOPs(B) = T [MLP + attn + MTP + logits] + S2 L_att core (megatron-facts §5.5)
    result: FloatArray = tokens * (linear + logits) + seq_sq * core
    return result
