"""Activation bytes one decoder layer saves for backward, per micro-batch, vectorised.

The per-layer formula is Fujii et al.'s Eq. 12 itemisation (memory-estimator-fujii §5.1),
generalised: head dimension from ``kv_channels``, GQA K/V (replicated when g < t), SwiGLU's
doubled FC1 output, dropout masks, sequence parallel versus not (Fujii §5.1 no-SP form,
Korthikanti Table 2), context parallel (s -> s/c), flash attention versus the s^2 terms
(Korthikanti §4.1), MLA latents, and MoE routed-token activations (each token's expert
activations K times, spread over the expert-TP group). All sizes are bf16 (2 bytes) unless noted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.layouts import FloatArray, LayoutBatch
from planner.memory.options import MemoryOptions
from planner.specs import ModelSpec
from planner.stack_versions import Version

MEMORY_EFFICIENT_PERMUTATION: Version = (0, 13)
"""Core release from which the unpermute no longer saves the expert output for its backward
(probs applied in the activation instead): mechanisms-facts §6.3, "memory efficient token
permutation", 26 GB/GPU on DSv3."""

BF16 = 2.0
FP32 = 4.0


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerActivations:
    """Bytes per GPU for one layer and one micro-batch (arrays over layouts)."""

    attention: FloatArray
    """Saved by the attention block (norm input, QKV input, Q/K/V, output-projection input)."""
    core_attention: FloatArray
    """The part of ``attention`` that selective recompute (core_attn) drops: flash-attention
    softmax statistics, or the s^2 score/softmax/dropout tensors without flash attention."""
    mlp: FloatArray
    """Saved by the dense MLP, or by the MoE block (router, routed tokens, shared experts)."""
    layer_input: FloatArray
    """The layer input, the only tensor full recompute keeps (Korthikanti Table 2: 2sbh)."""

    @property
    def full(self) -> FloatArray:
        """Everything saved without recompute."""
        result: FloatArray = self.attention + self.mlp
        return result


@dataclass(frozen=True, slots=True, kw_only=True)
class ActivationShape:
    """Per-layout tensor sizes shared by the formulas (arrays over layouts)."""

    tokens: FloatArray
    """s/c * b: tokens of one micro-batch on one CP rank."""
    seq: FloatArray
    """s/c."""
    t: FloatArray
    sp_shard: FloatArray
    """t with sequence parallel (norm/dropout/linear inputs sharded), 1 without."""
    etp: FloatArray
    b: FloatArray

    @classmethod
    def of(cls, seq_length: int, batch: LayoutBatch) -> ActivationShape:
        t = batch.tp.astype(np.float64)
        seq = seq_length / batch.cp.astype(np.float64)  # CP splits the sequence (Fujii §5.1)
        b = batch.micro_batch_size.astype(np.float64)
        return cls(
            tokens=seq * b,
            seq=seq,
            t=t,
            sp_shard=np.where(batch.sequence_parallel & (batch.tp > 1), t, 1.0),
            etp=batch.etp.astype(np.float64),
            b=b,
        )


def _mlp_saved_per_token(model: ModelSpec, ffn: int, *, swiglu_fused: bool) -> float:
    """Bytes per token (before TP) for FC1 output, activation output and FC2 input."""
    if model.gated_linear_unit:
        # quick-GeGLU is priced as SwiGLU: no sheet states what its kernel saves [inferred]
        # FC1 output is gate+up (2F); the fused bias-SwiGLU keeps only it and the FC2 input,
        # the unfused form also keeps the SiLU output (Fujii §5.1 counts 4 x 2sbF)
        return BF16 * ffn * (2 + 1 + (0 if swiglu_fused else 1))
    return BF16 * ffn * 2  # GeLU input and FC2 input, 8sbh + 8sbh at F = 4h (Korthikanti §4.1)


def _attention(
    model: ModelSpec, shape: ActivationShape, *, flash_attention: bool
) -> tuple[FloatArray, FloatArray]:
    """(attention bytes including core, core-attention bytes) for one layer and micro-batch."""
    h = model.hidden_size
    a = model.num_attention_heads
    tok, t, shard = shape.tokens, shape.t, shape.sp_shard
    # norm input + QKV (or down-projection) input, sharded only with SP (Fujii §5.1: 2sbh + 2sbh)
    saved = 2 * BF16 * tok * h / shard
    if model.hidden_dropout > 0:
        saved = saved + tok * h / shard  # 1-byte dropout mask after attention (Korthikanti §4.1)
    if model.multi_latent_attention:
        d_qk = model.qk_head_dim or 0
        d_rope = model.qk_pos_emb_head_dim or 0
        d_v = model.v_head_dim or 0
        kv_lora = model.kv_lora_rank or 0
        latent = (kv_lora + d_rope) + kv_lora  # kv down-proj output and its norm output
        if model.q_lora_rank is not None:
            latent += 2 * model.q_lora_rank  # q down-proj output and its norm output
        saved = saved + BF16 * tok * latent / shard
        # Q, K (d_qk + d_rope per head), V and the output-projection input (a d_v)
        saved = saved + BF16 * tok * a * (2 * (d_qk + d_rope) + 2 * d_v) / t
    else:
        d_k = model.head_dim
        kv_per_rank = d_k * np.maximum(model.query_groups / t, 1.0)  # KV replicated if g < t
        q_per_rank = a * d_k / t
        # Q, K, V and the output-projection input (Fujii §5.1: 2sbh (2 + 2k/a) per TP rank)
        saved = saved + BF16 * tok * (2 * q_per_rank + 2 * kv_per_rank)
        if model.qk_layernorm:
            saved = saved + BF16 * tok * (q_per_rank + kv_per_rank)  # pre-norm Q and K
    # sliding windows change neither: flash keeps O(s) either way, and the unfused path masks a
    # full s x s score matrix (planner.performance.compute.unfused_scores_time) [inferred]
    if flash_attention:
        core = FP32 * tok * a / t  # softmax log-sum-exp per head and query
    else:
        # softmax output 2as^2b, plus dropout mask as^2b and output 2as^2b when dropout is on
        coefficient = 5.0 if model.attention_dropout > 0 else 2.0
        core = coefficient * a * shape.seq * shape.seq * shape.b / t  # Korthikanti §4.1
    return saved + core, core


def _dense_mlp(model: ModelSpec, shape: ActivationShape, *, swiglu_fused: bool) -> FloatArray:
    h = model.hidden_size
    tok, t, shard = shape.tokens, shape.t, shape.sp_shard
    # pre-MLP norm input + FC1 input (Fujii §5.1: 2sbh + 2sbh), sharded only with SP
    saved = 2 * BF16 * tok * h / shard
    if model.hidden_dropout > 0:
        saved = saved + tok * h / shard  # 1-byte dropout mask after the MLP
    per_token = _mlp_saved_per_token(model, model.ffn_hidden_size, swiglu_fused=swiglu_fused)
    result: FloatArray = saved + tok * per_token / t
    return result


def routed_tokens(model: ModelSpec, shape: ActivationShape, imbalance: float) -> FloatArray:
    """Token copies one GPU's experts process per micro-batch.

    With SP the MoE block sees s/(c t) tokens per rank; the all-to-all over EP keeps that count
    on average (times top-k), and the expert-TP group all-gathers its etp ranks' tokens.
    """
    tokens = shape.tokens / shape.sp_shard * shape.etp * model.moe_router_topk
    result: FloatArray = tokens * imbalance
    return result


def _moe_mlp(
    model: ModelSpec,
    shape: ActivationShape,
    *,
    swiglu_fused: bool,
    imbalance: float,
    expert_output_saved: bool = False,
    permute_fused: bool = True,
) -> FloatArray:
    h = model.hidden_size
    tok, t, shard = shape.tokens, shape.t, shape.sp_shard
    experts = model.num_experts or 1
    # pre-MLP norm input + router/expert input, and fp32 router logits and probabilities
    saved = 2 * BF16 * tok * h / shard + 2 * FP32 * tok * experts / shard
    if model.hidden_dropout > 0:
        saved = saved + tok * h / shard
    per_expert_token = _mlp_saved_per_token(
        model, model.expert_ffn_hidden_size, swiglu_fused=swiglu_fused
    )
    # each routed copy keeps its permuted FC1 input (2h), its fp32 routing prob (4 B, applied in
    # the activation from core 0.13) and its share of FC1/FC2 activations over the expert-TP
    # group; from core 0.13 the expert output is not kept ("memory efficient token permutation",
    # mechanisms-facts §6.3)
    per_copy = BF16 * h + FP32 + per_expert_token / shape.etp
    if expert_output_saved:  # before core 0.13 unpermute saved it: K h 2 B per token (§6.3)
        per_copy = per_copy + BF16 * h
    routed = routed_tokens(model, shape, imbalance) * per_copy
    saved = saved + routed
    if permute_fused:
        # the fused permute keeps an int32 row_id_map of T x (2E + 1) for unpermute's backward
        # (mechanisms-facts §4.4, TE permutation.py); permute 2's map over local experts is smaller
        saved = saved + (8 * experts + 4) * tok / shard
    # else the unfused permute runs, which keeps no row_id_map; the facts sheets state nothing of
    # what it keeps instead (§4.4, §6.3 and §8 describe the fused kernel only), so nothing is priced
    if model.shared_expert_ffn_hidden_size:
        shared = _mlp_saved_per_token(
            model, model.shared_expert_ffn_hidden_size, swiglu_fused=swiglu_fused
        )
        saved = saved + tok * shared / t
    return saved


def layer_activations(
    model: ModelSpec,
    shape: ActivationShape,
    *,
    moe: bool,
    swiglu_fused: bool,
    flash_attention: bool,
    moe_imbalance: float,
    expert_output_saved: bool = False,
    permute_fused: bool = True,
) -> LayerActivations:
    """Saved bytes of one dense (``moe=False``) or MoE layer for one micro-batch;
    ``expert_output_saved``: the job's core predates memory-efficient token permutation
    (:data:`MEMORY_EFFICIENT_PERMUTATION`), so unpermute keeps each routed copy's output;
    ``permute_fused``: the stack has ``--moe-permute-fusion`` (the fused permute's row_id_map is
    kept)."""
    attention, core = _attention(model, shape, flash_attention=flash_attention)
    if moe:
        mlp = _moe_mlp(model, shape, swiglu_fused=swiglu_fused, imbalance=moe_imbalance,
                       expert_output_saved=expert_output_saved,
                       permute_fused=permute_fused)  # fmt: skip
    else:
        mlp = _dense_mlp(model, shape, swiglu_fused=swiglu_fused)
    return LayerActivations(
        attention=attention,
        core_attention=core,
        mlp=mlp,
        layer_input=BF16 * shape.tokens * model.hidden_size / shape.sp_shard,
    )


def backward_workspace(
    model: ModelSpec, shape: ActivationShape, *, moe_imbalance: float
) -> FloatArray:
    """Transient bytes while one layer runs backward (not saved across layers).

    The gradients of the widest intermediates (FC1 output and FC2 input of the dense MLP, or of
    the routed experts) exist at once, plus with SP the all-gathered full-sequence input and its
    gradient (2 x 2sbh); the larger of the dense and MoE cases counts.
    """
    tok, t = shape.tokens, shape.t
    phi = 3.0 if model.gated_linear_unit else 2.0  # FC1 output (1 or 2 F) plus FC2 input (F)
    dense = BF16 * tok * phi * model.ffn_hidden_size / t
    if model.is_moe:
        routed = routed_tokens(model, shape, moe_imbalance)
        per_copy = BF16 * (phi * model.expert_ffn_hidden_size / shape.etp + 2 * model.hidden_size)
        dense = np.maximum(dense, routed * per_copy)
    gathered = np.where(shape.sp_shard > 1, 2 * BF16 * tok * model.hidden_size, 0.0)
    result: FloatArray = dense + gathered
    return result


def embedding_input_bytes(
    model: ModelSpec,
    shape: ActivationShape,
    batch: LayoutBatch,
    inflight: FloatArray,
    opts: MemoryOptions,
) -> FloatArray:
    """The embedding's saved input on its rank (token ids of ``inflight`` micro-batches, or
    Fujii's conservative form)."""
    h = model.hidden_size
    tokens = shape.tokens
    if opts.embedding_input == "fujii":
        # 8 s b h p / (t c) (memory-estimator-fujii §5.3)
        return np.asarray(8.0 * tokens * h * batch.pp / shape.t, np.float64)
    # int64 token and position ids, plus the embedding dropout mask when dropout is on
    per_mb = 16.0 * tokens + (tokens * h / shape.sp_shard if model.hidden_dropout > 0 else 0)
    return np.asarray(inflight * per_mb, np.float64)


def logits_bytes(model: ModelSpec, shape: ActivationShape, vocab: FloatArray) -> FloatArray:
    """Logits on the last rank: fp32 per output head (main + D MTP heads), the transient bf16
    logits, and the fp32 output-layer input: 4sbh + 4sbV (Fujii §5.3)."""
    tokens, h = shape.tokens, model.hidden_size
    return np.asarray(
        FP32 * tokens * vocab / shape.t * (1 + model.mtp_num_layers)
        + BF16 * tokens * vocab / shape.t
        + FP32 * tokens * h / shape.sp_shard,
        np.float64,
    )
