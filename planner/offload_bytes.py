"""What fine-grained activation offload moves and how long the host link takes (mechanisms-facts
§6.1-§6.3, §6.5): shared by the memory model (:mod:`planner.memory.offload`) and the step time
(:mod:`planner.performance.offload_time`), which may not import each other.

Tensor sizes are those the modules save for backward: bf16, except that fp8 training saves the
inputs of QKV and the expert FC1 in fp8 (1 byte); tensors under 1 M elements stay on the GPU.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from planner.offload_modules import ATTENTION_MODULES, OFFLOAD_BITS

if TYPE_CHECKING:
    from planner.layouts import FloatArray, IntArray, LayoutBatch
    from planner.specs import ModelSpec

__all__ = ["MIN_OFFLOADED_ELEMENTS", "offload_transfer_seconds", "offloaded_bytes"]

BF16 = 2.0
MIN_OFFLOADED_ELEMENTS = 1 << 20
"""``--min-offloaded-tensor-size`` default: smaller tensors stay (mechanisms-facts §6.5)."""


def _sized(elements: FloatArray, width: float = BF16) -> FloatArray:
    """Bytes of a tensor of ``elements`` that Megatron offloads (0 under 1 M elements)."""
    result: FloatArray = np.where(elements >= MIN_OFFLOADED_ELEMENTS, width * elements, 0.0)
    return result


def _module_bytes(
    model: ModelSpec, seq_length: int, batch: LayoutBatch, moe: bool, imbalance: float, fp8: bool
) -> dict[str, FloatArray]:
    """Input bytes each module saves, one layer and one micro-batch (mechanisms-facts §6.1-§6.3)."""
    linear = 1.0 if fp8 else BF16
    t = batch.tp.astype(np.float64)
    tok = seq_length / batch.cp.astype(np.float64) * batch.micro_batch_size  # CP splits s
    shard = np.where(batch.sequence_parallel & (batch.tp > 1), t, 1.0)
    h = model.hidden_size
    hidden = tok * h / shard  # norm inputs and outputs are sequence-sharded with SP (§6.2)
    if model.multi_latent_attention:
        d_qk = (model.qk_head_dim or 0) + (model.qk_pos_emb_head_dim or 0)
        q = tok * model.num_attention_heads * d_qk / t
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
        # routed copies on one GPU: s/(c t) tokens per rank after SP, times top-k, gathered
        # over the expert-TP group (planner.memory.activations.routed_tokens)
        etp = batch.etp.astype(np.float64)
        copies = tok / shard * etp * model.moe_router_topk * imbalance
        out["expert_fc1"] = _sized(copies * h, linear)  # permuted hidden per routed copy (§6.3)
        # the activation's input is FC1's output: 2 F_e per copy with SwiGLU (§6.3)
        width = (2 if model.gated_linear_unit else 1) * model.expert_ffn_hidden_size / etp
        out["moe_act"] = _sized(copies * width)
    return out


def offloaded_bytes(
    model: ModelSpec,
    seq_length: int,
    batch: LayoutBatch,
    *,
    moe: bool,
    imbalance: float,
    fp8: bool,
) -> tuple[FloatArray, FloatArray]:
    """(attention-block, MLP-block) bytes one layer offloads per micro-batch."""
    mask: IntArray = batch.mem.activation_offload_modules
    sizes = _module_bytes(model, seq_length, batch, moe, imbalance, fp8)
    zero = np.zeros(len(batch), dtype=np.float64)
    attention, mlp = zero, zero
    for name, size in sizes.items():
        part = np.where((mask & OFFLOAD_BITS[name]) != 0, size, 0.0)
        if name in ATTENTION_MODULES:
            attention = attention + part
        else:
            mlp = mlp + part
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
    third of a layer's compute and the backward two thirds (megatron-facts §5: backward = 2 x
    forward). The link is full duplex (TE cpu_offloading.rst, mechanisms-facts §6.5).
    """
    exposed = np.zeros_like(layer_compute_s)
    for size, share in ((attention_bytes, attention_share), (mlp_bytes, 1.0 - attention_share)):
        transfer = size / link_bytes_per_s
        block = share * layer_compute_s
        exposed = exposed + np.maximum(transfer - block / 3.0, 0.0)
        exposed = exposed + np.maximum(transfer - 2.0 * block / 3.0, 0.0)
    result: FloatArray = exposed
    return result
