"""Validation cases of the MoE-compute and cross-entropy mechanisms (host costs and CUDA graphs:
:mod:`bench.mechanisms_host`).

Used by :mod:`bench.mechanisms`; each function returns rows of predicted versus the facts sheet.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from models_db import load_gpu
from planner.performance.cross_entropy import CROSS_ENTROPY_IMPLS, cross_entropy_time
from planner.performance.moe_compute import GemmRate, achieved_flop_per_s, expert_gemm_time
from planner.performance.profile import default_profile
from planner.specs import GPUSpec

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
