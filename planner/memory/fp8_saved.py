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
keeps only the bf16 layer input.

The recipe (``TrainingJob.fp8_recipe``): per-tensor recipes (delayed, tensorwise) keep one 1-byte
copy per saved input, column-wise (transposed), or the row-wise shard with SP; blockwise (Hopper)
and MXFP8 (Blackwell) keep column-wise data only (mechanisms-facts §6.1). Either way one byte per
element, as above; the block recipes add their scales, about 3 % of each fp8 copy (§6.1
[inferred]: MXFP8 one E8M0 byte per 32 elements, blockwise one fp32 per 128): ``scale_fraction``.
"""

from __future__ import annotations

import numpy as np

from planner.layout_settings import MODULE_BITS, effective_modules
from planner.layouts import RECOMPUTE_FULL, BoolArray, FloatArray, LayoutBatch
from planner.memory.activations import ActivationShape, routed_tokens
from planner.specs import ModelSpec

__all__ = ["BLOCK_SCALE_FRACTION", "attention_fp8_saving", "fp8_saving", "scale_fraction"]

BLOCK_SCALE_FRACTION = 0.03
"""Scale bytes per fp8 byte of the block recipes (mechanisms-facts §6.1: "scales add ≈ 3 %")."""


def scale_fraction(recipe: str | None) -> float:
    """Scale bytes per saved fp8 byte of a recipe: the block recipes' 3 %, per-tensor ones' 0."""
    return BLOCK_SCALE_FRACTION if recipe in ("blockwise", "mxfp8") else 0.0


def attention_fp8_saving(
    model: ModelSpec, shape: ActivationShape, scales: float = 0.0
) -> FloatArray:
    """Bytes per micro-batch fp8 saves (negative: costs) in one layer's attention block;
    ``scales`` is the recipe's scale bytes per fp8 byte (:func:`scale_fraction`)."""
    tok, t, shard = shape.tokens, shape.t, shape.sp_shard
    a = model.num_attention_heads
    if model.multi_latent_attention:
        # the up-projections' fused norms quantize the latents; the input norm is separate and
        # its bf16 output is replaced by one fp8 copy per down-projection (net 0)
        latents = (model.q_lora_rank or 0) + (model.kv_lora_rank or 0)
        saved = tok * latents / shard
        copies = saved + 2 * tok * model.hidden_size / shard
        d_out = model.v_head_dim or 0
    else:
        saved = tok * model.hidden_size / shard  # QKV's fused-norm output: 2h -> h
        copies = saved
        d_out = model.head_dim
    # proj keeps an fp8 copy of O beside the bf16 O attention keeps (MLM-DSV3 §2.2.2)
    proj = tok * a * d_out / t
    result: FloatArray = saved - proj - scales * (copies + proj)
    return result


def fp8_saving(
    model: ModelSpec,
    shape: ActivationShape,
    batch: LayoutBatch,
    *,
    moe: bool,
    imbalance: float,
    scales: float = 0.0,
) -> FloatArray:
    """Bytes per layer and micro-batch fp8 training saves on what the layer still keeps (the
    module docstring's table; negative where fp8 copies cost more than they save). ``scales``:
    the recipe's scale bytes per fp8 byte, on every fp8 copy kept (:func:`scale_fraction`)."""
    mask = effective_modules(batch)

    def on(name: str) -> BoolArray:
        result: BoolArray = (mask & MODULE_BITS[name]) != 0
        return result

    tok, t, shard = shape.tokens, shape.t, shape.sp_shard
    h = model.hidden_size
    attention = attention_fp8_saving(model, shape, scales)
    # each "saves X" is a bf16 2X kept as an fp8 X, each "costs X" an fp8 X: copies of X bytes
    if moe:
        block = on("moe")
        ffn = model.expert_ffn_hidden_size / shape.etp
        per_copy = h + np.where(on("moe_act"), 0.0, ffn)
        block_saving = routed_tokens(model, shape, imbalance) * per_copy * (1.0 - scales)
        if model.shared_expert_ffn_hidden_size:
            shared_fc2 = tok * model.shared_expert_ffn_hidden_size / t
            shared_fc1 = np.where(on("layernorm"), 0.0, tok * h / shard)
            shared = shared_fc2 - shared_fc1 - scales * (shared_fc2 + shared_fc1)
            block_saving = block_saving + np.where(on("shared_experts"), 0.0, shared)
    else:
        block = on("mlp")
        # FC1 norm out, FC2 in
        block_saving = tok * (h / shard + model.ffn_hidden_size / t) * (1.0 - scales)
    result: FloatArray = np.where(
        batch.recompute == RECOMPUTE_FULL,
        0.0,
        attention + np.where(block, 0.0, block_saving),
    )
    return result
