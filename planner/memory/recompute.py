"""What each recompute setting keeps of a layer's activations (mechanisms-facts §6.4).

* ``selective`` with ``--recompute-modules``: each module frees its own tensors (table below) and
  replays its forward in backward; ``core_attn`` alone is Megatron's default and the planner's
  selective recompute before issue 13.
* ``full``: a recomputed layer keeps only its input (Korthikanti Table 2: 2sbh); with
  ``--recompute-method block --recompute-num-layers N`` only the first N layers of every model
  chunk are recomputed (megatron-facts §1.6), the others keep everything.

| module | frees (per layer, per micro-batch) |
| --- | --- |
| core_attn | flash-attention statistics, or the s^2 tensors without flash attention |
| mlp | dense layers: the MLP's internals (norm output, FC1 output, FC2 input) |
| moe | MoE layers: router scores, routed copies, shared experts (all but the block's input) |
| moe_act | FC2 input of every routed copy |
| shared_experts | the shared experts' internals |
| layernorm | outputs of separate norm modules: MoE pre-MLP norm, MLA input norm |
| mla_up_proj | MLA's expanded Q, K and V (up-projections and RoPE) |
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.layout_settings import MODULE_BITS, effective_modules
from planner.layouts import RECOMPUTE_FULL, RECOMPUTE_SELECTIVE, FloatArray, LayoutBatch
from planner.memory.activations import (
    BF16,
    ActivationShape,
    LayerActivations,
    _mlp_saved_per_token,
    routed_tokens,
)
from planner.memory.fp8_saved import fp8_saving  # re-exported: per-module fp8 savings
from planner.specs import ModelSpec

__all__ = ["Freeable", "fp8_saving", "freeable", "saved_per_layer"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Freeable:
    """Bytes each recompute module frees in one layer for one micro-batch (arrays)."""

    core_attn: FloatArray
    block: FloatArray
    """``mlp`` on a dense layer or ``moe`` on a MoE layer: the block's internals."""
    moe_act: FloatArray
    shared_experts: FloatArray
    layernorm: FloatArray
    mla_up_proj: FloatArray


def freeable(
    model: ModelSpec,
    shape: ActivationShape,
    acts: LayerActivations,
    *,
    moe: bool,
    swiglu_fused: bool,
    imbalance: float,
) -> Freeable:
    """The table of the module docstring for a dense (``moe=False``) or MoE layer."""
    h = model.hidden_size
    tok, t, shard = shape.tokens, shape.t, shape.sp_shard
    zero = np.zeros_like(tok)
    norm_out = BF16 * tok * h / shard
    dropout = tok * h / shard if model.hidden_dropout > 0 else zero
    # a checkpointed block keeps its input: the residual for the dense MLP (pre-MLP norm fused
    # into FC1), the pre-MLP norm output for the MoE block (the norm is a separate module)
    kept = norm_out + dropout + (norm_out if moe else zero)
    block = np.maximum(acts.mlp - kept, 0.0)
    moe_act = shared = zero
    if moe:
        # FC2 input per routed copy (mechanisms-facts §6.3: 2F_e BF16, split over expert TP)
        ffn = model.expert_ffn_hidden_size
        moe_act = routed_tokens(model, shape, imbalance) * BF16 * ffn / shape.etp
        if model.shared_expert_ffn_hidden_size:
            per_token = _mlp_saved_per_token(
                model, model.shared_expert_ffn_hidden_size, swiglu_fused=swiglu_fused
            )
            shared = tok * per_token / t
    layernorm = (norm_out if moe else zero) + (norm_out if model.multi_latent_attention else zero)
    mla_up = zero
    if model.multi_latent_attention:
        d_qk = (model.qk_head_dim or 0) + (model.qk_pos_emb_head_dim or 0)
        # expanded Q, K (d_qk + d_rope per head) and V (d_v) (mechanisms-facts §6.4)
        mla_up = BF16 * tok * model.num_attention_heads * (2 * d_qk + (model.v_head_dim or 0)) / t
    return Freeable(
        core_attn=acts.core_attention,
        block=block,
        moe_act=moe_act,
        shared_experts=shared,
        layernorm=layernorm,
        mla_up_proj=mla_up,
    )


def saved_per_layer(
    acts: LayerActivations,
    free: Freeable,
    batch: LayoutBatch,
    *,
    moe: bool,
    full_share: FloatArray,
) -> FloatArray:
    """Bytes one layer keeps for one micro-batch under each layout's recompute setting."""
    mask = effective_modules(batch)
    full = acts.full

    def on(name: str) -> FloatArray:
        result: FloatArray = ((mask & MODULE_BITS[name]) != 0).astype(np.float64)
        return result

    block_bit = on("moe") if moe else on("mlp")
    freed = on("core_attn") * free.core_attn + on("layernorm") * free.layernorm
    freed = freed + on("mla_up_proj") * free.mla_up_proj + block_bit * free.block
    # moe_act and shared_experts free parts of the block: nothing more once it is recomputed
    freed = freed + (1 - block_bit) * (on("moe_act") * free.moe_act)
    freed = freed + (1 - block_bit) * (on("shared_experts") * free.shared_experts)
    selective = np.maximum(full - freed, acts.layer_input)
    recomputed = full_share * acts.layer_input + (1 - full_share) * full
    result: FloatArray = np.where(
        batch.recompute == RECOMPUTE_FULL,
        recomputed,
        np.where(batch.recompute == RECOMPUTE_SELECTIVE, selective, full),
    )
    return result
