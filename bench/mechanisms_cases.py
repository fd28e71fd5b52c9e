"""Validation cases of the host-cost, MoE-compute and cross-entropy mechanisms.

Used by :mod:`bench.mechanisms`; each function returns rows of predicted versus the facts sheet.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from models_db import load_gpu, load_model
from planner.model.flops import flops_per_token, padded_vocab
from planner.performance.cross_entropy import CROSS_ENTROPY_IMPLS, cross_entropy_time
from planner.performance.host_overhead import (
    HostCosts,
    dense_layer_kernels,
    micro_batch_time,
    moe_layer_kernels,
)
from planner.performance.moe_compute import GemmRate, achieved_flop_per_s, expert_gemm_time
from planner.performance.profile import default_profile
from planner.specs import GPUSpec, ModelSpec

A = np.asarray


def gemm_rate(gpu: GPUSpec) -> GemmRate:
    """The bf16 dense GEMM curve of the GPU's architecture priors."""
    p = default_profile(gpu)
    return GemmRate(
        peak_flop_per_s=gpu.peak_bf16_flop_per_s,
        plateau=p.gemm_efficiency,
        half_tokens=p.gemm_half_tokens,
        half_flop=p.gemm_half_time_s * gpu.peak_bf16_flop_per_s,
        hbm_bytes_per_s=gpu.hbm_bandwidth_bytes_per_s * p.hbm_efficiency,
    )


def _tflops(rate: GemmRate, path: str, groups: int, m: int, n: int, k: int) -> float:
    t = expert_gemm_time(
        rate, tokens_per_expert=A(float(m)), local_experts=A(float(groups)), n=n, k=k, path=path
    )  # type: ignore[arg-type]
    return (
        float(
            achieved_flop_per_s(
                t, tokens_per_expert=A(float(m)), local_experts=A(float(groups)), n=n, k=k
            )
        )
        / 1e12
    )


def moe_gemm_rows() -> list[dict[str, Any]]:
    """mechanisms-facts §4.2 (H100) and performance-facts §5.2 (B200, SimuMax)."""
    h100 = gemm_rate(load_gpu("h100-sxm-80gb"))
    rows: list[dict[str, Any]] = []
    measured_h100 = (
        ("TE PR #2045 (NVIDIA)", 8, 4096, 768, 2048, "multi_stream", 627.9),
        ("TE PR #2045 (NVIDIA)", 8, 4096, 768, 2048, "grouped", 650.6),
        ("TE PR #2045 (NVIDIA)", 16, 2048, 768, 2048, "multi_stream", 553.9),
        ("TE PR #2045 (NVIDIA)", 16, 2048, 768, 2048, "grouped", 636.9),
        ("tgale96/grouped_gemm#37 (user)", 128, 512, 1536, 2048, "sequential", 129.5),
        ("tgale96/grouped_gemm#37 (user)", 128, 512, 1536, 2048, "grouped", 160.5),
    )
    for source, g, m, n, k, path, tf in measured_h100:
        pred = _tflops(h100, path, g, m, n, k)
        rows.append(
            {
                "gpu": "H100",
                "source": source,
                "groups": g,
                "rows_per_expert": m,
                "n": n,
                "k": k,
                "path": path,
                "measured_tflops": tf,
                "predicted_tflops": round(pred),
                "error": round(pred / tf - 1.0, 3),
            }
        )
    b200 = load_gpu("b200-sxm-180gb")
    rate = gemm_rate(b200)
    # SimuMax forward efficiencies (fraction of 2,250) and its dense-GEMM default 0.49
    simumax = (
        (256, 128, 4096, 7168, 0.20),
        (128, 256, 4096, 7168, 0.27),
        (64, 512, 4096, 7168, 0.36),
        (32, 1024, 4096, 7168, 0.46),
        (256, 128, 7168, 2048, 0.18),
        (128, 256, 7168, 2048, 0.31),
        (64, 512, 7168, 2048, 0.39),
        (32, 1024, 7168, 2048, 0.40),
        (160, 154, 3072, 5120, 0.20),
        (80, 308, 3072, 5120, 0.36),
        (40, 616, 3072, 5120, 0.47),
        (20, 1232, 3072, 5120, 0.45),
        (40, 2460, 3072, 5120, 0.49),
        (40, 9832, 3072, 5120, 0.47),
    )
    dense_ratio = 0.49 / rate.plateau  # SimuMax's dense factor / the planner's B200 plateau
    for g, m, n, k, eff in simumax:
        pred = _tflops(rate, "multi_stream", g, m, n, k) * 1e12 / b200.peak_bf16_flop_per_s
        rows.append(
            {
                "gpu": "B200",
                "source": "SimuMax (performance-facts §5.2)",
                "groups": g,
                "rows_per_expert": m,
                "n": n,
                "k": k,
                "path": "multi_stream",
                "measured_efficiency": eff,
                "predicted_efficiency": round(pred, 3),
                "predicted_on_simumax_dense_scale": round(pred * dense_ratio, 3),
                "error": round(pred * dense_ratio / eff - 1.0, 3),
            }
        )
    return rows


def _layer_flops_per_sequence(model: ModelSpec, seq: int) -> float:
    """Megatron's model FLOPs of one decoder layer for one sequence (fwd + bwd), output layer
    (6 h V per token) removed, averaged over the layers."""
    vocab = padded_vocab(model, 1)
    per_token = flops_per_token(model, vocab, seq) - 6.0 * model.hidden_size * vocab
    return per_token * seq / model.num_layers


def _graph_ratio(
    model: ModelSpec,
    *,
    seq: int,
    tp: int,
    ep: int,
    pp: int,
    graphed_tflops: float,
    dispatcher: str,
    fp8: bool,
    costs: HostCosts,
    shared_captured: bool,
) -> float:
    """Predicted eager / graphed time of one micro-batch of one stage: the GPU time per layer
    comes from the graphed run's measured TFLOP/s (an upper bound of pure GPU time)."""
    gpu_layer = _layer_flops_per_sequence(model, seq) / tp / (graphed_tflops * 1e12)
    layers = model.num_layers / pp
    moe_share = model.num_moe_layers / model.num_layers
    local = float((model.num_experts or 1) / ep)
    dense = dense_layer_kernels(tp=A([float(tp)]), cp=A([1.0]), fp8=fp8)
    moe = moe_layer_kernels(
        tp=A([float(tp)]),
        cp=A([1.0]),
        local_experts=A([local]),
        router_fusion=False,
        dispatcher=dispatcher,  # type: ignore[arg-type]
        shared_experts=bool(model.moe_shared_expert_intermediate_size),
        capture_shared_experts=shared_captured,
        fp8=fp8,
    )
    kw: dict[str, Any] = {
        "dense_layers": A([layers * (1 - moe_share)]),
        "moe_layers": A([layers * moe_share]),
        "dense_gpu_fwd_s": A([gpu_layer / 3]),
        "dense_gpu_bwd_s": A([2 * gpu_layer / 3]),
        "moe_gpu_fwd_s": A([gpu_layer / 3]),
        "moe_gpu_bwd_s": A([2 * gpu_layer / 3]),
        "dense_kernels": dense,
        "moe_kernels": moe,
        "dispatcher": dispatcher,
        "costs": costs,
    }
    eager = micro_batch_time(cuda_graphs="none", **kw)
    graphed = micro_batch_time(cuda_graphs="partial", **kw)
    return float(eager.total_s[0] / graphed.total_s[0])


HOST_CASES = (
    # (label, model, seq, tp, ep, pp, graphed TFLOP/s, dispatcher, fp8, measured eager/graphed)
    (
        "Qwen3-30B-A3B, H100, TP2 PP2 EP4 (MB cuda-graphs card)",
        "qwen3-30b-a3b",
        4096,
        2,
        4,
        2,
        274.0,
        "alltoall",
        False,
        623.0 / 484.0,
    ),
    (
        "DeepSeek-V3, GB200, TP1 PP8 EP32, MXFP8 (MLM-DSV3 §4)",
        "deepseek-v3",
        4096,
        1,
        32,
        8,
        663.3,
        "flex_deepep",
        True,
        663.3 / 610.7,
    ),
)


def host_rows(costs: HostCosts) -> list[dict[str, Any]]:
    """mechanisms-facts §3.5: CUDA-graph speed-ups, predicted with the host priors, and the
    host time per kernel that would reproduce each one."""
    rows: list[dict[str, Any]] = []
    for label, slug, seq, tp, ep, pp, tf, disp, fp8, measured in HOST_CASES:
        model = load_model(slug)
        kw: dict[str, Any] = {
            "seq": seq,
            "tp": tp,
            "ep": ep,
            "pp": pp,
            "graphed_tflops": tf,
            "dispatcher": disp,
            "fp8": fp8,
            "shared_captured": False,
        }
        pred = _graph_ratio(model, costs=costs, **kw)
        lo, hi = 0.0, 200e-6  # bisection on the host time per kernel
        for _ in range(40):
            mid = (lo + hi) / 2
            trial = HostCosts(
                per_kernel_s=mid,
                per_graph_launch_s=costs.per_graph_launch_s,
                per_sync_s=costs.per_sync_s,
                per_micro_batch_s=costs.per_micro_batch_s,
            )
            lo, hi = (mid, hi) if _graph_ratio(model, costs=trial, **kw) < measured else (lo, mid)
        rows.append(
            {
                "case": label,
                "measured_speedup": round(measured, 3),
                "predicted_speedup": round(pred, 3),
                "error": round(pred / measured - 1, 3),
                "implied_host_us_per_kernel": round(lo * 1e6, 1),
                "assumed": f"seq {seq}, micro-batch 1, GPU time per layer from the graphed "
                "run's TFLOP/s; router unfused; shared experts eager",
            }
        )
    return rows


def cross_entropy_rows() -> list[dict[str, Any]]:
    """mechanisms-facts §5.2-5.5: Llama-3 8B last stage (s 8192, b 1) on one H100."""
    gpu = load_gpu("h100-sxm-80gb")
    hbm = gpu.hbm_bandwidth_bytes_per_s * default_profile(gpu).hbm_efficiency
    rows: list[dict[str, Any]] = []
    for impl in CROSS_ENTROPY_IMPLS:
        for tp in (1, 8):
            r = cross_entropy_time(
                impl,
                tokens=8192,
                vocab_padded=128256,
                tp=tp,
                hbm_bytes_per_s=hbm,
                collective_s=20e-6,
            )
            rows.append(
                {
                    "impl": impl,
                    "tp": tp,
                    "fwd_ms": round(float(r.fwd_s) * 1e3, 3),
                    "bwd_ms": round(float(r.bwd_s) * 1e3, 3),
                    "held_gb": round(float(r.held_bytes) / 1e9, 2),
                    "peak_gb": round(float(r.peak_bytes) / 1e9, 2),
                }
            )
    return rows
