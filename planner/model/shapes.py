"""Layer shapes: the GEMMs, attention work and parameters of each layer type, per token.

One linear layer is a :class:`Gemm` (forward FLOPs per token and its widths); a layer type is a
tuple of them (megatron-facts §4.1, §5.3). The throughput model prices them
(:mod:`planner.performance.compute`); the FLOP formula (:mod:`planner.model.flops`) counts them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.layouts import FloatArray, IntArray
from planner.specs import ModelSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class Gemm:
    """One linear layer as seen by one GPU: forward FLOPs per token and its (n, k) widths.

    ``n`` and ``k`` are the full (unsharded) output and reduction widths; ``shard`` says which
    of them the tensor-parallel split divides: 'n' (column-parallel), 'k' (row-parallel) or ''.
    """

    fwd_flop_per_token: float
    n: float
    k: float
    shard: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerShapes:
    """The GEMMs and attention work of the model's layer types (one token, forward only)."""

    attention_gemms: tuple[Gemm, ...]
    dense_mlp_gemms: tuple[Gemm, ...]
    shared_expert_gemms: tuple[Gemm, ...]
    expert_gemms: tuple[Gemm, ...]
    """Routed-expert GEMMs counted for top-k copies of a token (n/k: one expert's widths)."""
    core_attention_fwd_flop_per_token_per_seq: float
    """Forward core-attention FLOPs per token per unit of sequence length (x s gives per token)."""
    mtp_extra_gemms: tuple[Gemm, ...]
    """Per MTP depth, besides its transformer layer: the eh-projection (2h -> h)."""
    num_dense_layers: int
    num_moe_layers: int
    mtp_layers: int
    mtp_is_moe: bool
    attention_params: float
    dense_mlp_params: float
    shared_expert_params: float
    expert_params_per_layer: float
    norm_params: float
    router_params: float


def _mla_attention(model: ModelSpec) -> tuple[list[Gemm], float, float]:
    """Multi-latent attention (DeepSeek): its GEMMs, core FLOPs per token per unit of sequence
    and its parameters (megatron-facts §5.3 MLA terms)."""
    h = float(model.hidden_size)
    a = float(model.num_attention_heads)
    dqk = float(model.qk_head_dim or 0)
    drope = float(model.qk_pos_emb_head_dim or 0)
    dv = float(model.v_head_dim or 0)
    kvl = float(model.kv_lora_rank or 0)
    attn: list[Gemm] = []
    if model.q_lora_rank is None:  # megatron-facts §5.3 MLA Qterm without q compression
        attn.append(
            Gemm(
                fwd_flop_per_token=2 * h * a * (dqk + drope),
                n=a * (dqk + drope),
                k=h,
                shard="n",
            )
        )
    else:
        ql = float(model.q_lora_rank)
        attn.append(Gemm(fwd_flop_per_token=2 * ql * h, n=ql, k=h, shard=""))
        attn.append(
            Gemm(
                fwd_flop_per_token=2 * ql * a * (dqk + drope),
                n=a * (dqk + drope),
                k=ql,
                shard="n",
            )
        )
    attn.append(Gemm(fwd_flop_per_token=2 * (kvl + drope) * h, n=kvl + drope, k=h, shard=""))
    attn.append(
        Gemm(fwd_flop_per_token=2 * kvl * a * (dqk + dv), n=a * (dqk + dv), k=kvl, shard="n")
    )
    attn.append(Gemm(fwd_flop_per_token=2 * a * dv * h, n=h, k=a * dv, shard="k"))
    core = 2.0 * (a * (dqk + drope) / 2 + a * dv / 2)  # §5.4 MLA core term / 3 (fwd only)
    params = (
        (
            h * a * (dqk + drope)
            if model.q_lora_rank is None
            else float(model.q_lora_rank) * (h + a * (dqk + drope))
        )
        + kvl * (h + a * (dqk + dv))
        + h * drope
        + a * dv * h
    )
    return attn, core, params


def _gqa_attention(model: ModelSpec) -> tuple[list[Gemm], float, float]:
    """Multi-head / grouped-query attention: the fused QKV and the output projection, core
    FLOPs per token per unit of sequence and parameters (megatron-facts §5.3, §5.4)."""
    h = float(model.hidden_size)
    d = float(model.head_dim)
    q = float(model.num_attention_heads) * d
    kv = 2.0 * model.query_groups * d
    attn = [
        Gemm(fwd_flop_per_token=2 * h * (q + kv), n=q + kv, k=h, shard="n"),
        Gemm(fwd_flop_per_token=2 * q * h, n=h, k=q, shard="k"),
    ]
    core = 2.0 * q  # §5.4: 6q per token pair, causal-halved, fwd = 1/3
    return attn, core, h * (q + kv) + q * h


def layer_shapes(model: ModelSpec) -> LayerShapes:
    """GEMM list and parameter counts of each layer type (megatron-facts §4.1 and §5.3)."""
    h = float(model.hidden_size)
    phi = 3.0 if model.gated_linear_unit else 2.0  # megatron-facts §5.3: SwiGLU FC1 is 2F wide
    fc1_mult = phi - 1.0
    attention = _mla_attention if model.multi_latent_attention else _gqa_attention
    attn, core, attention_params = attention(model)
    f = float(model.ffn_hidden_size)
    dense = (
        Gemm(fwd_flop_per_token=2 * h * f * fc1_mult, n=f * fc1_mult, k=h, shard="n"),
        Gemm(fwd_flop_per_token=2 * f * h, n=h, k=f, shard="k"),
    )
    fs = float(model.shared_expert_ffn_hidden_size)
    shared: tuple[Gemm, ...] = ()
    if model.is_moe and fs > 0:
        shared = (
            Gemm(fwd_flop_per_token=2 * h * fs * fc1_mult, n=fs * fc1_mult, k=h, shard="n"),
            Gemm(fwd_flop_per_token=2 * fs * h, n=h, k=fs, shard="k"),
        )
    experts: tuple[Gemm, ...] = ()
    fe = float(model.expert_ffn_hidden_size)
    kk = float(model.moe_router_topk)
    if model.is_moe:
        experts = (
            Gemm(fwd_flop_per_token=2 * h * fe * fc1_mult * kk, n=fe * fc1_mult, k=h, shard="n"),
            Gemm(fwd_flop_per_token=2 * fe * h * kk, n=h, k=fe, shard="k"),
        )
    pattern = model.moe_layer_pattern()
    n_moe = sum(pattern)
    nu = 1.0 if model.normalization == "RMSNorm" else 2.0
    return LayerShapes(
        attention_gemms=tuple(attn),
        dense_mlp_gemms=dense,
        shared_expert_gemms=shared,
        expert_gemms=experts,
        core_attention_fwd_flop_per_token_per_seq=core,
        # megatron-facts §5.3 MTP extras 6(3h + 2h^2): the eh-projection's 2h^2 (column-parallel
        # as its parameters, planner.model.params); the 3h of its norms is elementwise, negligible
        mtp_extra_gemms=(Gemm(fwd_flop_per_token=2 * 2 * h * h, n=h, k=2 * h, shard="n"),)
        if model.mtp_num_layers
        else (),
        num_dense_layers=model.num_layers - n_moe,
        num_moe_layers=n_moe,
        mtp_layers=model.mtp_num_layers,
        mtp_is_moe=bool(pattern[-1]) if pattern else False,
        attention_params=attention_params,
        dense_mlp_params=phi * h * f,
        shared_expert_params=phi * h * fs,
        expert_params_per_layer=phi * h * fe * float(model.num_experts or 0),
        norm_params=2 * h * nu,
        router_params=h * float(model.num_experts or 0) if model.is_moe else 0.0,
    )


def sharded_width(g: Gemm, tp: IntArray) -> tuple[FloatArray, FloatArray]:
    """Per-GPU (n, k) of a GEMM under tensor parallelism of size tp."""
    t = tp.astype(np.float64)
    n = g.n / t if g.shard == "n" else np.full_like(t, g.n)
    k = g.k / t if g.shard == "k" else np.full_like(t, g.k)
    return n, k
