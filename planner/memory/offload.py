"""Fine-grained activation offload (``--fine-grained-activation-offloading --offload-modules``).

Megatron core >= 0.16 moves the *input* a chosen module saves for backward to host memory on a
D2H stream during the forward and brings it back on an H2D stream before the module's backward
(mechanisms-facts §6.5). This module prices it:

* memory: the offloaded module inputs of every layer and in-flight micro-batch leave the GPU,
  except tensors under 1 M elements (skipped by Megatron) and the last layer's groups, which
  stay on the GPU because their backward starts at once [inferred from "the last groups stay
  on GPU"]; layers that full recompute checkpoints save only their input, so nothing of theirs
  is offloaded;
* time: each direction of a layer's transfer overlaps with the compute of the block whose
  modules it belongs to (attention or MLP); only the part beyond that compute is exposed.

Tensor sizes follow mechanisms-facts §6.1-§6.3 (bf16; fp8 linear inputs are smaller, so the
bytes are capped by what the layer saves).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from planner.layouts import FloatArray, IntArray, LayoutBatch
from planner.memory.activations import BF16, ActivationShape, routed_tokens
from planner.offload_modules import ATTENTION_MODULES, OFFLOAD_BITS
from planner.specs import ModelSpec

__all__ = ["MIN_OFFLOADED_ELEMENTS", "offload_transfer_seconds", "offloaded_bytes"]

MIN_OFFLOADED_ELEMENTS = 1 << 20
"""``--min-offloaded-tensor-size`` default: smaller tensors stay (mechanisms-facts §6.5)."""



def _sized(elements: FloatArray, width: float = BF16) -> FloatArray:
    """Bytes of a tensor of ``elements`` that Megatron offloads (0 under 1 M elements)."""
    result: FloatArray = np.where(elements >= MIN_OFFLOADED_ELEMENTS, width * elements, 0.0)
    return result


def _module_bytes(
    model: ModelSpec, shape: ActivationShape, moe: bool, imbalance: float, fp8: bool
) -> dict[str, FloatArray]:
    """Input bytes each module saves, one layer and one micro-batch (mechanisms-facts §6.1-§6.3):
    bf16, except that fp8 training saves the inputs of QKV and expert FC1 in fp8 (1 byte)."""
    linear = 1.0 if fp8 else BF16
    tok, t, shard = shape.tokens, shape.t, shape.sp_shard
    h = model.hidden_size
    hidden = tok * h / shard  # norm inputs and outputs are sequence-sharded with SP (§6.2)
    if model.multi_latent_attention:
        q = tok * model.num_attention_heads * ((model.qk_head_dim or 0) + (model.qk_pos_emb_head_dim or 0)) / t  # fmt: skip
        k = q
        v = tok * model.num_attention_heads * (model.v_head_dim or 0) / t
        o = v
    else:
        q = tok * model.num_attention_heads * model.head_dim / t
        k = tok * model.head_dim * np.maximum(model.query_groups / t, 1.0)  # GQA, replicated
        v = k
        o = q
    zero = np.zeros_like(tok)
    out = {
        "attn_norm": _sized(hidden),
        "qkv_linear": _sized(hidden, linear),
        "core_attn": _sized(q) + _sized(k) + _sized(v),
        "attn_proj": _sized(o),
        "mlp_norm": _sized(hidden),
        "expert_fc1": zero,
        "moe_act": zero,
    }
    if moe:
        copies = routed_tokens(model, shape, imbalance)
        out["expert_fc1"] = _sized(copies * h, linear)  # permuted hidden per routed copy (§6.3)
        # the activation's input is FC1's output: 2 F_e per copy with SwiGLU (§6.3)
        width = (2 if model.swiglu else 1) * model.expert_ffn_hidden_size / shape.etp
        out["moe_act"] = _sized(copies * width)
    return out


def offloaded_bytes(
    model: ModelSpec,
    shape: ActivationShape,
    batch: LayoutBatch,
    *,
    moe: bool,
    imbalance: float,
    fp8: bool,
) -> tuple[FloatArray, FloatArray]:
    """(attention-block, MLP-block) bytes one layer offloads per micro-batch."""
    mask: IntArray = batch.mem.activation_offload_modules
    sizes = _module_bytes(model, shape, moe, imbalance, fp8)
    attention = np.zeros_like(shape.tokens)
    mlp = np.zeros_like(shape.tokens)
    for name, size in sizes.items():
        on = (mask & OFFLOAD_BITS[name]) != 0
        if name in ATTENTION_MODULES:
            attention = attention + np.where(on, size, 0.0)
        else:
            mlp = mlp + np.where(on, size, 0.0)
    return attention, mlp


def offload_transfer_seconds(
    attention_bytes: FloatArray,
    mlp_bytes: FloatArray,
    attention_share: FloatArray,
    layer_compute_s: FloatArray,
    link_bytes_per_s: float,
) -> FloatArray:
    """Exposed seconds of one layer's offload, forward and backward.

    Each block's inputs go out (D2H) during its forward and come back (H2D) during the backward
    of the later layers; each direction hides behind that block's compute, the forward being a
    third of a layer's compute and the backward two thirds (Narayanan et al. 2021 §3.4: the
    backward does twice the forward's FLOPs). The link is full duplex (TE cpu_offloading.rst).
    """
    exposed = np.zeros_like(layer_compute_s)
    for size, share in ((attention_bytes, attention_share), (mlp_bytes, 1.0 - attention_share)):
        transfer = size / link_bytes_per_s
        block = share * layer_compute_s
        exposed = exposed + np.maximum(transfer - block / 3.0, 0.0)
        exposed = exposed + np.maximum(transfer - 2.0 * block / 3.0, 0.0)
    return exposed


def layer_offload_bytes(
    model: ModelSpec,
    shape: ActivationShape,
    batch: LayoutBatch,
    *,
    moe: bool,
    imbalance: float,
    fp8: bool,
    recomputed_share: FloatArray,
) -> FloatArray:
    """Bytes one layer of one micro-batch moves to the host; layers that full recompute
    checkpoints keep only their input, which no offloaded module owns."""
    attention, mlp = offloaded_bytes(
        model, shape, batch, moe=moe, imbalance=imbalance, fp8=fp8
    )
    result: FloatArray = (attention + mlp) * (1.0 - recomputed_share)
    return result


def stage_offload_bytes(
    per_dense: FloatArray, per_moe: FloatArray, act_dense: FloatArray, act_moe: FloatArray
) -> FloatArray:
    """A rank's offloaded activation bytes: every saved layer's share, less the last layer's,
    whose groups stay on the GPU (mechanisms-facts §6.5)."""
    total = per_dense * act_dense + per_moe * act_moe
    kept = np.where(act_moe > 0, per_moe, per_dense)
    result: FloatArray = np.maximum(total - kept, 0.0)
    return result
