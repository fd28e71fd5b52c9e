"""The throughput model: step time of Megatron-LM training for a batch of layouts.

Shape from physics, a few dimensionless coefficients from measurements (ARCHITECTURE.md
"Performance model", performance-facts §9). One step of the slowest (last) pipeline stage is

    m x (compute + recompute + exposed TP/CP/EP comm + exposed PP p2p + per-micro-batch overhead)
    + bubble ((p-1)/v of one micro-batch's stage time, megatron-facts §6)
    + exposed DP gradient reduce-scatter / parameter all-gather (+ the last bucket)
    + optimizer step (memory-bound Adam over the local shard) + per-step overhead,

and every term is returned in ``breakdown`` so that the parts sum to ``step_time_s``.

Conventions: ``model_tflops_per_gpu`` uses Megatron's model-FLOPs formula (megatron-facts §5,
vocabulary padded by each layout's tp, no recompute factor). ``mfu`` divides that by the GPU's
dense **bf16** peak even for fp8 jobs, so that MFUs of bf16 and fp8 runs compare (NVIDIA's
dgxc tables divide fp8 runs by the fp8 peak instead, see ``shared/data/README.md``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

import numpy as np

from planner.flops import flops_per_iteration
from planner.layouts import SHARD_FULL, SHARD_NONE, FloatArray, LayoutBatch
from planner.perf_comm import Links, all_to_all_time, crosses_nodes, p2p_time, ring_time
from planner.perf_compute import (
    BF16_BYTES,
    Gemm,
    elementwise_bytes_per_token,
    gemm_efficiency,
    layer_shapes,
    padded_vocab,
    sharded_width,
    stage_layers,
)
from planner.perf_compute import (
    model_flops_per_iteration as model_flops_per_iteration,  # re-exported
)
from planner.specs import ClusterSpec, GPUSpec, ModelSpec, SpecError, TrainingJob

ADAM_BYTES_PER_PARAM = 34.0  # performance-facts §3.3: fused Adam 30 B + grad-norm 4 B
GRAD_REDUCE_BYTES = 4.0  # megatron-facts §1.8: bf16 runs reduce gradients in fp32 by default
DDP_BUCKET_PARAMS = 40e6  # performance-facts §6.1: bucket = max(40 M, 1 M x DP) parameters

BREAKDOWN_KEYS = (
    "compute_s",
    "recompute_s",
    "tp_comm_s",
    "cp_comm_s",
    "ep_comm_s",
    "pp_comm_s",
    "dp_comm_s",
    "bubble_s",
    "optimizer_s",
    "overhead_s",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class PerformanceProfile:
    """Coefficients of the throughput model for one GPU type (all but the latencies and the
    overheads are dimensionless fractions of a datasheet number)."""

    gpu: str
    """GPU slug the profile belongs to."""
    gemm_efficiency: float = 0.71
    """bf16 GEMM plateau, fraction of the dense bf16 peak (measured H100/H200 fwd+dgrad+wgrad of
    Llama TP shapes: 0.71; bench/results/gpu_kernels.md; performance-facts §1.1: 0.75-0.87)."""
    gemm_half_tokens: float = 45.0
    """Token count m at which a GEMM's m-factor is one half (gpu_kernels: 36-54 on H100/H200)."""
    gemm_half_width: float = 0.0
    """Smaller per-GPU width min(n, k) at which the width factor is one half (0: off; the size
    factor below carries the shape effect, gpu_kernels.md)."""
    gemm_half_time_s: float = 18e-6
    """GEMM size factor: a GEMM of half_time x peak FLOPs runs at half the plateau (gpu_kernels:
    H100 24e9, H200 12e9 FLOP; A100 §1.2 ~6e9 = 19 us x 312 TFLOP/s)."""
    fp8_gemm_efficiency: float = 0.66
    """fp8 GEMM plateau, fraction of the dense fp8 peak (gpu_kernels: 0.65-0.67 per-tensor)."""
    fp8_half_tokens: float = 20.0
    fp8_half_width: float = 0.0
    fp8_half_time_s: float = 20e-6
    """fp8 is strongly size-sensitive: 33 % of peak at h/t = 512 on H100 (§1.3; gpu_kernels
    fitted 31-49e9 FLOP at the fp8 peak)."""
    attention_efficiency: float = 0.50
    """Core-attention fwd+bwd rate on Megatron's FLOP count, fraction of bf16 peak (gpu_kernels
    SDPA-flash causal GQA: 0.48-0.51 at 32k; §2)."""
    attention_half_seq: float = 1000.0
    """Per-GPU sequence chunk at which attention reaches half its plateau (gpu_kernels: 0.32-0.35
    at 2k, 0.40-0.42 at 4k, 0.45-0.48 at 8k on H100/H200)."""
    attention_score_bytes: float = 0.0
    """HBM bytes per attention score (query x key x head), fwd+bwd: 0 with flash attention;
    ~10-20 for Megatron's unfused softmax + dropout path of 2021-22 (Korthikanti §4: scores,
    softmax output, dropout mask and output are all written; backward reads them again)."""
    hbm_efficiency: float = 0.8
    """Memory-bound ops and the optimizer step: fraction of HBM bandwidth (§3.1; a plain 4 GiB
    copy reaches 0.88-0.89 on H100/H200, gpu_kernels.md; fused elementwise ops less)."""
    nvlink_efficiency: float = 0.75
    """Achieved intra-node bus bandwidth / per-direction link spec at mid sizes (§4.2-4.3)."""
    network_efficiency: float = 0.75
    """Achieved per-NIC bus bandwidth / per-GPU network spec at mid sizes (§4.4)."""
    intra_latency_s: float = 7e-6
    """Collective latency per log2(n) step inside a node (§4.3 fitted alpha)."""
    inter_latency_s: float = 15e-6
    """Collective latency per log2(n) step across nodes (§4.4: 20-50 us)."""
    tp_overlap: float = 0.5
    """Hidden fraction of TP collectives (tp-comm-overlap with SP; §6.2 prior 0.6-0.9, 0 off)."""
    dp_overlap: float = 0.9
    """Fraction of one micro-batch's backward (forward) that hides grad RS (param AG) (§6.1)."""
    pp_overlap: float = 0.5
    """Hidden fraction of pipeline p2p with the interleaved schedule (§6.5)."""
    ep_overlap: float = 0.0
    """Hidden fraction of EP all-to-all (0 without 1F1B A2A overlap, §6.4)."""
    layer_overhead_s: float = 20e-6
    """Host/launch gaps per layer per micro-batch, forward + backward (§8)."""
    step_overhead_s: float = 0.05
    """Per-iteration fixed time: data loading, grad-norm, logging (§8)."""
    moe_imbalance: float = 1.2
    """Busiest expert's tokens / mean, applied to expert GEMMs and all-to-all (§5.3)."""
    provenance: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    """Where the numbers come from: priors or fit (rows, date, errors)."""

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name in ("gpu", "provenance"):
                continue
            value = getattr(self, f.name)
            if not np.isfinite(value) or value < 0:
                raise SpecError(
                    f"{f.name}={value} must be a finite non-negative number", field=f.name
                )
        for name in ("tp_overlap", "dp_overlap", "pp_overlap", "ep_overlap"):
            if getattr(self, name) > 1:
                raise SpecError(f"{name}={getattr(self, name)} must be in [0, 1]", field=name)
        if self.moe_imbalance < 1:
            raise SpecError("moe_imbalance must be >= 1", field="moe_imbalance")

    @staticmethod
    def coefficient_names() -> tuple[str, ...]:
        return tuple(
            f.name for f in fields(PerformanceProfile) if f.name not in ("gpu", "provenance")
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PerformanceProfile:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SpecError(f"unknown profile field(s): {', '.join(unknown)}", field=unknown[0])
        return cls(**data)

    def with_coefficients(self, **values: Any) -> PerformanceProfile:
        """A copy with some coefficients (or the provenance) replaced."""
        return replace(self, **values)


# Architecture priors (performance-facts §9 unless noted). Keys are GPUSpec.architecture.
_PRIORS: dict[str, dict[str, float]] = {
    "ampere": {  # §1.1 A100 255-290 TFLOP/s; §2.1 FA2 ~0.6 FA-count; §4.2 230/300 GB/s
        "gemm_efficiency": 0.86,
        "gemm_half_time_s": 19e-6,  # §1.2 A100 N=K=512..1024 at M=8192: 0.46-0.72 of plateau
        "fp8_gemm_efficiency": 0.86,
        "attention_efficiency": 0.5,
        "attention_half_seq": 512.0,
        "nvlink_efficiency": 0.72,
        "tp_overlap": 0.0,
    },
    "hopper": {},  # the dataclass defaults are the H100/H200 priors
    "blackwell": {  # §1.5 B200 GEMM 0.5-0.7; §3.1 HBM 0.67; §4.2 ring 700/900
        "gemm_efficiency": 0.72,
        "gemm_half_time_s": 5e-6,  # §1.2 B200 N=K=512..1024 at M=8192: 0.45-0.8 of plateau [C]
        "fp8_gemm_efficiency": 0.62,
        "fp8_half_time_s": 8e-6,
        "attention_efficiency": 0.45,
        "hbm_efficiency": 0.67,
        "nvlink_efficiency": 0.72,
    },
    "cdna3": {  # MI300X: no measured GEMM/attention sheet; conservative [U]; §4 xGMI ~48/64
        "gemm_efficiency": 0.55,
        "fp8_gemm_efficiency": 0.45,
        "attention_efficiency": 0.35,
        "hbm_efficiency": 0.7,
        "nvlink_efficiency": 0.6,
        "tp_overlap": 0.0,
    },
}


def default_profile(gpu: GPUSpec) -> PerformanceProfile:
    """Physics priors for a GPU with no fitted profile (performance-facts §9 per architecture)."""
    priors = _PRIORS.get(gpu.architecture, {})
    return PerformanceProfile(
        gpu=gpu.name,
        provenance={
            "kind": "priors",
            "architecture": gpu.architecture,
            "source": "shared/reference/performance-facts.md §9",
        },
        **priors,
    )


@dataclass(frozen=True, slots=True)
class PerformanceEstimate:
    """Per-layout step time and throughput, with the exposed seconds of each part."""

    step_time_s: FloatArray
    tokens_per_s_per_gpu: FloatArray
    model_tflops_per_gpu: FloatArray
    mfu: FloatArray
    """Model FLOPs / (step time x GPUs x dense bf16 peak), whatever the job's precision."""
    breakdown: dict[str, FloatArray]


def _gemm_fwd_time(
    g: Gemm,
    tokens: FloatArray,
    shard_tp: FloatArray,
    gpu: GPUSpec,
    prof: PerformanceProfile,
    fp8: bool,
    efficiency_tokens: FloatArray | None = None,
) -> FloatArray:
    """Forward seconds of one GEMM for ``tokens`` tokens on one GPU (megatron-facts §5 FLOPs)."""
    tp_int = shard_tp.astype(np.int64)
    n, k = sharded_width(g, tp_int)
    width = np.minimum(n, k)
    flop = g.fwd_flop_per_token * tokens / (shard_tp if g.shard else 1.0)
    m = tokens if efficiency_tokens is None else efficiency_tokens
    call_flop = 2.0 * m * n * k  # one GEMM call's size (the size factor of gemm_efficiency)
    if fp8 and gpu.peak_fp8_flop_per_s is not None:
        eff = gemm_efficiency(
            m,
            width,
            prof.fp8_gemm_efficiency,
            prof.fp8_half_tokens,
            prof.fp8_half_width,
            call_flop,
            prof.fp8_half_time_s * gpu.peak_fp8_flop_per_s,
        )
        rate = gpu.peak_fp8_flop_per_s * eff
    else:
        eff = gemm_efficiency(
            m,
            width,
            prof.gemm_efficiency,
            prof.gemm_half_tokens,
            prof.gemm_half_width,
            call_flop,
            prof.gemm_half_time_s * gpu.peak_bf16_flop_per_s,
        )
        rate = gpu.peak_bf16_flop_per_s * eff
    return np.asarray(flop / np.maximum(rate, 1.0), np.float64)


def estimate_performance(
    model: ModelSpec,
    cluster: ClusterSpec,
    job: TrainingJob,
    batch: LayoutBatch,
    profile: PerformanceProfile,
) -> PerformanceEstimate:
    """Step time, tokens/s per GPU, model TFLOP/s per GPU, MFU and the breakdown per layout."""
    gpu = cluster.gpu
    prof = profile
    sh = layer_shapes(model)
    fp8 = job.precision == "fp8" and gpu.peak_fp8_flop_per_s is not None
    f = np.float64
    tp, pp, vpp, cp = (
        batch.tp.astype(f),
        batch.pp.astype(f),
        batch.vpp.astype(f),
        batch.cp.astype(f),
    )
    ep, etp, dp = batch.ep.astype(f), batch.etp.astype(f), batch.dp.astype(f)
    b = batch.micro_batch_size.astype(f)
    sp = batch.sequence_parallel.astype(f)
    s = float(job.seq_length)
    h = float(model.hidden_size)
    m = np.maximum(job.global_batch_size / np.maximum(b * dp, 1.0), 1.0)
    tokens = b * s / cp  # tokens of one micro-batch on one GPU (the GEMMs' m after SP gather)
    links = Links(
        gpus_per_node=cluster.gpus_per_node,
        nvlink_busbw_bytes_per_s=gpu.intra_node_bandwidth_bytes_per_s * prof.nvlink_efficiency,
        nic_busbw_bytes_per_s=cluster.inter_node_bandwidth_bytes_per_s * prof.network_efficiency,
        intra_latency_s=prof.intra_latency_s,
        inter_latency_s=prof.inter_latency_s,
    )
    hbm = gpu.hbm_bandwidth_bytes_per_s * prof.hbm_efficiency

    def gemms(
        gs: tuple[Gemm, ...], tok: FloatArray, shard: FloatArray, eff_tok: FloatArray | None = None
    ) -> FloatArray:
        total = np.zeros_like(tok)
        for g in gs:
            total = total + _gemm_fwd_time(g, tok, shard, gpu, prof, fp8, eff_tok)
        return total

    # --- forward seconds per layer per micro-batch -------------------------------------------
    attn_gemm = gemms(sh.attention_gemms, tokens, tp)
    chunk = s / cp
    attn_eff = prof.attention_efficiency * chunk / (chunk + prof.attention_half_seq)
    core_flop = sh.core_attention_fwd_flop_per_token_per_seq * s * tokens / tp
    core = core_flop / (gpu.peak_bf16_flop_per_s * np.maximum(attn_eff, 1e-6))
    # unfused attention: a/t heads x s keys per token through HBM (0 with flash attention)
    scores = prof.attention_score_bytes * model.num_attention_heads / tp * s * tokens / hbm
    core = core + scores / 3.0
    dense_bytes, moe_bytes, ce_bytes = elementwise_bytes_per_token(model, batch.tp, sp, fp8)
    dense_fwd = (
        attn_gemm + core + gemms(sh.dense_mlp_gemms, tokens, tp) + dense_bytes * tokens / hbm
    )
    moe_fwd = np.zeros_like(tokens)
    if model.is_moe:
        e = float(model.num_experts or 1)
        tok_moe = tokens / tp  # MoE with tp > 1 needs SP (megatron-facts rule 33)
        per_expert = tok_moe * etp * ep * model.moe_router_topk / e
        expert = gemms(sh.expert_gemms, tok_moe * etp, etp, per_expert)
        moe_fwd = (
            attn_gemm
            + core
            + gemms(sh.shared_expert_gemms, tokens, tp)
            + expert * prof.moe_imbalance
            + moe_bytes * tokens / hbm
        )
    n_layers = float(model.num_layers)
    # the busiest pipeline rank sets the pace; the last rank also runs the loss (pipeline.py)
    layers_per_stage, last_layers = stage_layers(model.num_layers, batch)
    moe_frac = sh.num_moe_layers / n_layers
    layer_fwd = (1 - moe_frac) * dense_fwd + moe_frac * moe_fwd
    stage_fwd = layers_per_stage * layer_fwd
    vocab = padded_vocab(model, tp)
    logit_eff = gemm_efficiency(
        tokens,
        np.minimum(vocab / tp, h),
        prof.gemm_efficiency,
        prof.gemm_half_tokens,
        prof.gemm_half_width,
        2.0 * tokens * vocab / tp * h,
        prof.gemm_half_time_s * gpu.peak_bf16_flop_per_s,
    )
    logits_fwd = 2 * h * vocab / tp * tokens / (gpu.peak_bf16_flop_per_s * logit_eff)
    heads = 1 + sh.mtp_layers
    mtp_fwd = sh.mtp_layers * (moe_fwd if sh.mtp_is_moe else dense_fwd)
    last_extra = 3 * (heads * logits_fwd + mtp_fwd) + heads * ce_bytes * vocab / tp * tokens / hbm
    compute_mb = np.maximum(3 * stage_fwd, 3 * last_layers * layer_fwd + last_extra)

    # --- recompute (megatron-facts §1.6): selective = core attention, full = whole forward ----
    layers_fwd = stage_fwd + mtp_fwd
    recompute_mb = np.where(
        batch.recompute == 1,
        layers_per_stage * core,
        np.where(batch.recompute == 2, layers_fwd, 0.0),
    )
    full = (batch.recompute == 2).astype(f)

    # --- tensor parallel: per layer 4 AG/RS (SP) or 2 AR (no SP) fwd, the same bwd -------------
    act_bytes = tokens * h * BF16_BYTES
    one = np.ones_like(batch.tp)
    coll_sp = ring_time(links, batch.tp, one, act_bytes, 1.0)
    coll_ar = ring_time(links, batch.tp, one, act_bytes, 2.0)
    tp_layer_fwd = np.where(sp > 0, 4 * coll_sp, 2 * coll_ar)
    mlp_tp = (batch.etp > 1) | bool(sh.shared_expert_gemms)  # routed experts: a2a, not AG/RS
    moe_tp_fwd = tp_layer_fwd * (0.5 + 0.5 * mlp_tp)
    stage_tp_fwd = layers_per_stage * ((1 - moe_frac) * tp_layer_fwd + moe_frac * moe_tp_fwd)
    tp_hidden = np.where(sp > 0, prof.tp_overlap, 0.0)
    tp_mb = (2 + full) * stage_tp_fwd * (1 - tp_hidden)

    # --- context parallel: ring exchange of K/V hidden behind attention (§6.3) ---------------
    if model.multi_latent_attention:
        kv_width = (
            model.num_attention_heads
            / tp
            * (
                (model.qk_head_dim or 0)
                + (model.qk_pos_emb_head_dim or 0)
                + (model.v_head_dim or 0)
            )
        )
    else:
        kv_width = 2 * np.maximum(model.query_groups / tp, 1.0) * model.head_dim
    kv_step = p2p_time(
        links, crosses_nodes(links, batch.cp, batch.tp), tokens * kv_width * BF16_BYTES
    )
    cp_layer_fwd = np.where(batch.cp > 1, np.maximum((cp - 1) * kv_step - core, 0.0), 0.0)
    cp_mb = (3 + full) * layers_per_stage * cp_layer_fwd

    # --- expert parallel: dispatch + combine all-to-all per MoE layer, fwd and bwd (§5) ------
    ep_mb = np.zeros_like(tokens)
    if model.is_moe:
        a2a_bytes = tokens / tp * model.moe_router_topk * h * BF16_BYTES
        a2a = all_to_all_time(links, batch.ep, batch.etp, a2a_bytes) * prof.moe_imbalance
        ep_mb = (4 + 2 * full) * layers_per_stage * moe_frac * a2a * (1 - prof.ep_overlap)

    # --- pipeline p2p: send activations and gradients per micro-batch, x v interleaved -------
    p2p_bytes = act_bytes / np.where(sp > 0, tp, 1.0)
    p2p_cross = crosses_nodes(links, batch.pp, batch.tp * batch.cp * batch.dp)
    p2p = p2p_time(links, p2p_cross, p2p_bytes)
    p2p_exposed = np.where(vpp > 1, 1 - prof.pp_overlap, 1.0)
    pp_mb = np.where(batch.pp > 1, 2 * vpp * p2p * p2p_exposed, 0.0)

    overhead_mb = (layers_per_stage + sh.mtp_layers) * prof.layer_overhead_s
    stage_mb = compute_mb + recompute_mb + tp_mb + cp_mb + ep_mb + pp_mb + overhead_mb
    bubble = (pp - 1) / vpp * stage_mb  # megatron-facts §6 / performance-facts §9.6

    # --- data parallel: grads over dp x cp, experts over expert-dp (§6.1) --------------------
    dense_layer_params = (
        sh.attention_params
        + sh.norm_params
        + ((1 - moe_frac) * sh.dense_mlp_params + moe_frac * sh.shared_expert_params)
    )
    p_dense = (layers_per_stage * dense_layer_params + h * vocab) / tp
    p_dense = p_dense + layers_per_stage * moe_frac * sh.router_params
    p_exp = layers_per_stage * moe_frac * sh.expert_params_per_layer / (ep * etp)
    dgroup = batch.dp * batch.cp
    edp = np.maximum(batch.expert_dp, 1)
    eone = batch.etp * batch.ep
    shard = batch.optimizer_sharding
    rs = ring_time(links, dgroup, batch.tp, p_dense * GRAD_REDUCE_BYTES, 1.0) + ring_time(
        links, edp, eone, p_exp * GRAD_REDUCE_BYTES, 1.0
    )
    ag = ring_time(links, dgroup, batch.tp, p_dense * BF16_BYTES, 1.0) + ring_time(
        links, edp, eone, p_exp * BF16_BYTES, 1.0
    )
    ar = ring_time(links, dgroup, batch.tp, p_dense * GRAD_REDUCE_BYTES, 2.0) + ring_time(
        links, edp, eone, p_exp * GRAD_REDUCE_BYTES, 2.0
    )
    bwd_mb, fwd_mb = 2 * compute_mb / 3, compute_mb / 3
    grad_t = np.where(shard == SHARD_NONE, ar, rs)
    param_t = np.where(shard == SHARD_NONE, 0.0, ag)
    exposed = np.maximum(grad_t - prof.dp_overlap * bwd_mb, 0.0) + np.maximum(
        param_t - prof.dp_overlap * fwd_mb, 0.0
    )
    tail_frac = np.minimum(
        1.0, np.maximum(DDP_BUCKET_PARAMS, 1e6 * dp) / np.maximum(p_dense + p_exp, 1.0)
    )
    dp_sync = np.maximum(exposed, tail_frac * (grad_t + param_t))
    fsdp_t = m * (2 * ag + rs)  # ZeRO-3: gather params fwd and bwd, scatter grads, per mb
    fsdp = np.maximum(fsdp_t - prof.dp_overlap * m * compute_mb, tail_frac * fsdp_t / m)
    dp_s = np.where(shard == SHARD_FULL, fsdp, dp_sync)

    # --- optimizer step over the local shard (§3.3) ------------------------------------------
    sharded = shard != SHARD_NONE
    p_local = np.where(sharded, p_dense / (dp * cp), p_dense) + np.where(
        sharded, p_exp / edp, p_exp
    )
    optimizer = ADAM_BYTES_PER_PARAM * p_local / hbm

    breakdown = {
        "compute_s": m * compute_mb,
        "recompute_s": m * recompute_mb,
        "tp_comm_s": m * tp_mb,
        "cp_comm_s": m * cp_mb,
        "ep_comm_s": m * ep_mb,
        "pp_comm_s": m * pp_mb,
        "dp_comm_s": dp_s,
        "bubble_s": bubble,
        "optimizer_s": optimizer,
        "overhead_s": m * overhead_mb + prof.step_overhead_s,
    }
    breakdown = {k: np.asarray(v, f) for k, v in breakdown.items()}
    step = np.zeros_like(tokens)
    for value in breakdown.values():
        step = step + value
    gpus = tp * pp * cp * dp
    tokens_per_s = job.global_batch_size * s / (step * gpus)
    flops = flops_per_iteration(model, job, batch)  # the memory engineer's §5 implementation
    tflops = flops / (step * gpus) / 1e12
    return PerformanceEstimate(
        step_time_s=step,
        tokens_per_s_per_gpu=np.asarray(tokens_per_s, f),
        model_tflops_per_gpu=np.asarray(tflops, f),
        mfu=np.asarray(tflops * 1e12 / gpu.peak_bf16_flop_per_s, f),
        breakdown=breakdown,
    )
