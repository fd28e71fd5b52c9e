"""What fp8 training changes in the activations a layer keeps, module by module.

Transformer Engine quantizes the input of every fp8 linear and saves that 1-byte copy for
backward instead of the bf16 tensor (mechanisms-facts §6.1). Whether this saves memory depends
on who else holds the bf16 tensor:

Per token, bf16 -> fp8 (mechanisms-facts §6.1-§6.3; MLA rows [inferred] from the same modules):

* norm output fused into QKV or FC1 (``TELayerNormColumnParallelLinear``): 2h -> h, saves h;
* attention output O, the proj input: attention keeps the bf16 O and proj adds its own fp8
  copy (MLM-DSV3 §2.2.2: "saves 1.5 times the size"), costs a d_v;
* dense FC2 input (SwiGLU output): 2F -> F, saves F;
* MLA latents into the fused-norm up-projections: saves q_lora + kv_lora; the separate input
  norm's bf16 output (2h, shared) becomes one fp8 copy per down-projection (h + h): no change;
* MoE pre-MLP norm (separate): the router keeps its bf16 output (§4.3), the shared-expert FC1
  adds an fp8 copy: costs h; shared-expert FC2 input 2F_s -> F_s, saves F_s;
* each routed copy: FC1 input 2h -> h and FC2 input 2F_e -> F_e, saves h + F_e (§6.3).

A recomputed module keeps nothing to quantize: the block (``mlp``/``moe``), ``moe_act`` (FC2
inputs), ``shared_experts`` and ``layernorm`` (with fp8 the linears after a recomputed norm save
their bf16 input, which the checkpoint discards: §6.4) each remove their rows; full recompute
keeps only the bf16 layer input. Quantization scales (about 3 % for blockwise/MXFP8, §6.1) are
not counted.
"""

from __future__ import annotations

import numpy as np

from planner.layout_settings import MODULE_BITS, effective_modules
from planner.layouts import RECOMPUTE_FULL, BoolArray, FloatArray, LayoutBatch
from planner.memory.activations import ActivationShape, routed_tokens
from planner.specs import ModelSpec

__all__ = ["attention_fp8_saving", "fp8_saving"]


def attention_fp8_saving(model: ModelSpec, shape: ActivationShape) -> FloatArray:
    """Bytes per micro-batch fp8 saves (negative: costs) in one layer's attention block."""
    tok, t, shard = shape.tokens, shape.t, shape.sp_shard
    a = model.num_attention_heads
    if model.multi_latent_attention:
        # the up-projections' fused norms quantize the latents; the input norm is separate and
        # its bf16 output is replaced by one fp8 copy per down-projection (net 0)
        latents = (model.q_lora_rank or 0) + (model.kv_lora_rank or 0)
        saved = tok * latents / shard
        d_out = model.v_head_dim or 0
    else:
        saved = tok * model.hidden_size / shard  # QKV's fused-norm output: 2h -> h
        d_out = model.head_dim
    # proj keeps an fp8 copy of O beside the bf16 O attention keeps (MLM-DSV3 §2.2.2)
    result: FloatArray = saved - tok * a * d_out / t
    return result


def fp8_saving(
    model: ModelSpec,
    shape: ActivationShape,
    batch: LayoutBatch,
    *,
    moe: bool,
    imbalance: float,
) -> FloatArray:
    """Bytes per layer and micro-batch fp8 training saves on what the layer still keeps (the
    module docstring's table; negative where fp8 copies cost more than they save)."""
    mask = effective_modules(batch)

    def on(name: str) -> BoolArray:
        result: BoolArray = (mask & MODULE_BITS[name]) != 0
        return result

    tok, t, shard = shape.tokens, shape.t, shape.sp_shard
    h = model.hidden_size
    attention = attention_fp8_saving(model, shape)
    if moe:
        block = on("moe")
        ffn = model.expert_ffn_hidden_size / shape.etp
        per_copy = h + np.where(on("moe_act"), 0.0, ffn)
        block_saving = routed_tokens(model, shape, imbalance) * per_copy
        if model.shared_expert_ffn_hidden_size:
            shared_fc2 = tok * model.shared_expert_ffn_hidden_size / t
            shared_fc1 = np.where(on("layernorm"), 0.0, tok * h / shard)
            block_saving = block_saving + np.where(
                on("shared_experts"), 0.0, shared_fc2 - shared_fc1
            )
    else:
        block = on("mlp")
        block_saving = tok * (h / shard + model.ffn_hidden_size / t)  # FC1 norm out, FC2 in
    result: FloatArray = np.where(
        batch.recompute == RECOMPUTE_FULL,
        0.0,
        attention + np.where(block, 0.0, block_saving),
    )
    return result
