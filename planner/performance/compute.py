"""Per-GPU compute work of one micro-batch: FLOPs by GEMM shape, attention, memory-bound bytes.

Helpers for :mod:`planner.performance.step_time`. Everything here is per layer and per token (or per
micro-batch) so that the caller can assemble stage times for a whole :class:`LayoutBatch` in a few
numpy expressions. FLOP counts follow Megatron's own formula (megatron-facts §5: 2 FLOPs per
multiply-add, backward = 2 x forward, causal attention halved), so that the sum of the parts is
Megatron's model-FLOPs number and the achieved-FLOP/s efficiencies are on Megatron's basis.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.layouts import FloatArray, IntArray, LayoutBatch
from planner.model.pipeline import split_layers
from planner.specs import ModelSpec, TrainingJob

BF16_BYTES = 2.0


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
    mtp_extra_fwd_flop_per_token: float
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


def layer_shapes(model: ModelSpec) -> LayerShapes:
    """GEMM list and parameter counts of each layer type (megatron-facts §4.1 and §5.3)."""
    h = float(model.hidden_size)
    a = float(model.num_attention_heads)
    phi = 3.0 if model.swiglu else 2.0  # megatron-facts §5.3: SwiGLU FC1 is 2F wide
    fc1_mult = phi - 1.0
    if model.multi_latent_attention:
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
        attention_params = (
            (
                h * a * (dqk + drope)
                if model.q_lora_rank is None
                else float(model.q_lora_rank) * (h + a * (dqk + drope))
            )
            + kvl * (h + a * (dqk + dv))
            + h * drope
            + a * dv * h
        )
    else:
        d = float(model.head_dim)
        q = a * d
        kv = 2.0 * model.query_groups * d
        attn = [
            Gemm(fwd_flop_per_token=2 * h * (q + kv), n=q + kv, k=h, shard="n"),
            Gemm(fwd_flop_per_token=2 * q * h, n=h, k=q, shard="k"),
        ]
        core = 2.0 * q  # §5.4: 6q per token pair, causal-halved, fwd = 1/3
        attention_params = h * (q + kv) + q * h
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
        mtp_extra_fwd_flop_per_token=2.0 * (3 * h + 2 * h * h),  # §5.3 MTP extras / 3
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


def gemm_efficiency(
    tokens: FloatArray | float,
    width: FloatArray | float,
    plateau: float,
    half_tokens: float,
    half_width: float,
    flop: FloatArray | float | None = None,
    half_flop: float = 0.0,
) -> FloatArray:
    """Achieved fraction of peak of one GEMM: a plateau times saturating size factors.

    performance-facts §1.2-1.4 and §9.1: efficiency rises with the token dimension m (weight-
    bandwidth-bound at small m), with the smaller per-GPU width min(n, k) and, above all, with
    the GEMM's size: too few output tiles leave SMs idle and fixed launch/epilogue time weighs
    more. Each factor is x / (x + x_half). ``flop`` (2 m n k of the call) with ``half_flop``
    is the size factor; bench/results/gpu_kernels.md (H100/H200, Llama TP shapes, m 1k-16k)
    found it fits the measured rates to 3-4 % median where m and width alone leave 7-10 %.
    """
    m = np.asarray(tokens, dtype=np.float64)
    w = np.asarray(width, dtype=np.float64)
    eff = plateau * (m / (m + half_tokens)) * (w / (w + half_width))
    if flop is not None and half_flop > 0:
        f = np.asarray(flop, dtype=np.float64)
        eff = eff * f / (f + half_flop)
    return np.asarray(eff, np.float64)


def sharded_width(g: Gemm, tp: IntArray) -> tuple[FloatArray, FloatArray]:
    """Per-GPU (n, k) of a GEMM under tensor parallelism of size tp."""
    t = tp.astype(np.float64)
    n = g.n / t if g.shard == "n" else np.full_like(t, g.n)
    k = g.k / t if g.shard == "k" else np.full_like(t, g.k)
    return n, k


def elementwise_bytes_per_token(
    model: ModelSpec,
    tp: IntArray,
    sp: FloatArray,
    fp8: bool,
    *,
    permute_slowdown: float = 2.0,
) -> tuple[FloatArray, FloatArray, float]:
    """Forward HBM bytes per token of the memory-bound ops of one dense and one MoE layer.

    performance-facts §3.2: norms 4h each, residual adds 6h each (both in the sequence-parallel
    region: divided by t with SP), SwiGLU 6F/t (GeLU 4F/t), rotary 4(a_q + a_kv)d/t, dropout
    about 5h per site, MoE permute/unpermute 2(2h)K each way, times ``permute_slowdown`` (it
    runs at 0.5 of HBM spec where other ops reach the profile's hbm_efficiency). FP8 (current
    scaling, §3.2): every GEMM input X (forward) and output gradient dY (backward) is read for
    its amax, read again and written as row- and column-wise (transposed) fp8 copies: 6 B per
    element each, over fwd + bwd = 2 B per element of (inputs + outputs) in these forward-
    equivalent units (the caller multiplies by 3); MoE expert inputs and outputs count every
    top-k copy. Widths h on the sequence-parallel side are cast before the all-gather (/t with
    SP); the others are TP-sharded (/t). The third value is the
    loss-side bytes per token per (V/t): fp32 logits through softmax and cross-entropy,
    forward and backward (an estimate [U]: read bf16, write/read/write fp32 ~ 16 B).
    """
    t = tp.astype(np.float64)
    h = float(model.hidden_size)
    sp_div = np.where(sp > 0, t, 1.0)
    shared = 2 * 4 * h / sp_div + 2 * 6 * h / sp_div
    if model.hidden_dropout > 0:
        shared = shared + 2 * 5 * h / sp_div
    if model.position_embedding_type in ("rope", "yarn") and not model.multi_latent_attention:
        shared = shared + 4 * (model.num_attention_heads + model.query_groups) * model.head_dim / t
    act = 6.0 if model.swiglu else 4.0
    dense = shared + act * model.ffn_hidden_size / t
    moe = shared.copy()
    if model.is_moe:
        k = float(model.moe_router_topk)
        moe = moe + act * model.expert_ffn_hidden_size * k / t
        moe = moe + act * model.shared_expert_ffn_hidden_size / t
        moe = moe + 2 * (2 * 2 * h * k) * permute_slowdown / t  # permute + unpermute
    if fp8:
        q = model.num_attention_heads * model.head_dim
        qkv_out = q + 2 * model.query_groups * model.head_dim
        fc1 = (2.0 if model.swiglu else 1.0) + 1.0  # FC1 output (2F with SwiGLU) + FC2 input F
        # attention: QKV in h + out qkv/t, proj in q/t + out h; MLP: FC1 in h, FC2 out h
        attn_casts = 2.0 * (2 * h / sp_div + (qkv_out + q) / t)
        mlp_h = 2.0 * 2 * h / sp_div
        dense = dense + attn_casts + mlp_h + 2.0 * fc1 * model.ffn_hidden_size / t
        moe = moe + attn_casts
        if model.is_moe:
            k = float(model.moe_router_topk)
            fe, fs = model.expert_ffn_hidden_size, model.shared_expert_ffn_hidden_size
            moe = moe + 2.0 * (2 * h * k + fc1 * fe * k) / t  # each routed copy, in + out
            if fs > 0:
                moe = moe + mlp_h + 2.0 * fc1 * fs / t
    return dense, moe, 16.0


def stage_layers(num_layers: int, batch: LayoutBatch) -> tuple[FloatArray, FloatArray]:
    """Decoder layers on the busiest pipeline rank and on the last rank, per layout, for the
    split Megatron builds (planner/model/pipeline.py: even, embedding/loss-as-layers, uneven first/
    last); ceil(L / p) where no split exists."""
    busiest = np.ceil(num_layers / batch.pp.astype(np.float64))
    last = busiest.copy()
    keys = batch.pp * 65536 + batch.vpp
    for key in np.unique(keys).tolist():
        pp, vpp = divmod(int(key), 65536)
        split = split_layers(num_layers, pp, vpp)
        if split is None:
            continue
        sel = keys == key
        busiest[sel] = split.max_rank_layers()
        last[sel] = len(split.rank_layers(pp - 1))
    return busiest, last


def padded_vocab(model: ModelSpec, tp: FloatArray) -> FloatArray:
    """ceil(V / (128 t)) x 128 t per layout (megatron-facts §3.4)."""
    unit = 128.0 * tp
    return np.asarray(np.ceil(model.vocab_size / unit) * unit, np.float64)


def model_flops_per_iteration(model: ModelSpec, job: TrainingJob, batch: LayoutBatch) -> FloatArray:
    """Megatron's model FLOPs per iteration (megatron-facts §5.5), vocabulary padded by tp."""
    sh = layer_shapes(model)
    s = float(job.seq_length)

    def fwd(gs: tuple[Gemm, ...]) -> float:
        return sum(g.fwd_flop_per_token for g in gs)

    attn = fwd(sh.attention_gemms) + sh.core_attention_fwd_flop_per_token_per_seq * s
    dense = attn + fwd(sh.dense_mlp_gemms)
    moe = attn + fwd(sh.shared_expert_gemms) + fwd(sh.expert_gemms)
    mtp = sh.mtp_layers * ((moe if sh.mtp_is_moe else dense) + sh.mtp_extra_fwd_flop_per_token)
    vocab = padded_vocab(model, batch.tp.astype(np.float64))
    per_token = (
        sh.num_dense_layers * dense
        + sh.num_moe_layers * moe
        + mtp
        + 2.0 * model.hidden_size * vocab * (1 + sh.mtp_layers)
    )
    return np.asarray(3.0 * per_token * job.global_batch_size * s, np.float64)
