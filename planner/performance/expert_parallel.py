"""Routed-expert work of one MoE layer: grouped expert GEMMs and the per-rank load imbalance.

Helpers for :mod:`planner.performance.step_time`. Megatron runs the routed experts of a rank as
ONE grouped
GEMM over all its local experts (``--moe-grouped-gemm``, megatron-facts §1), so the two things that
set its speed are (performance-facts §5.2, §1.4):

* the size of the whole grouped call (local experts x tokens per expert x n x k), which fills the
  SMs; pricing each expert as a separate small GEMM under-counts large fine-grained MoE badly;
* the tokens per expert m: every expert's weight matrix is streamed from HBM once per call, so at
  small m the GEMM is weight-bandwidth-bound. The roofline knee is m* = plateau x peak x
  bytes-per-weight / (2 x achieved HBM bandwidth) and the efficiency m / sqrt(m^2 + m*^2) blends
  the two limits. With H100 priors (m* ~ 260 bf16, ~ 240 fp8) this reproduces the measured
  expert GEMMs: H100 bf16 (4096, 7168) at m = 128 / 256 / 512: 0.31 / 0.50 / 0.63 of peak
  (§1.4: 0.29 / 0.50 / 0.72), Mixtral experts at 64 / 256 / 1k: 0.17 / 0.50 / 0.69 (gpu_kernels.md:
  0.15 / 0.49 / 0.75), DeepGEMM fp8 at m = 64 / 128: 0.17 / 0.31 (§1.6: 0.15 / 0.27).

Imbalance: ``moe_imbalance`` (busiest expert / mean) multiplies the grouped GEMM and the
all-to-all of every rank as in round 1. A per-rank factor 1 + (x - 1) / sqrt(local experts) was
tried and dropped: the Grok-1 sweeps (2 / 4 / 1 local experts at EP 2 / 4 / 8) got worse with it
(over-prediction grew with local experts), so the data does not support the reduction.
"""

from __future__ import annotations

import numpy as np

from planner.layouts import FloatArray
from planner.performance.compute import Gemm, sharded_width
from planner.specs import GPUSpec

PERMUTE_HBM_FRACTION = 0.5  # performance-facts §3.1/§5.3: permute/unpermute at 0.5 of HBM spec


def weight_bound_efficiency(tokens_per_expert: FloatArray, knee_tokens: float) -> FloatArray:
    """m / sqrt(m^2 + m*^2): 1 when compute-bound, m / m* when weight-bandwidth-bound."""
    m = np.asarray(tokens_per_expert, np.float64)
    return np.asarray(m / np.sqrt(m * m + knee_tokens * knee_tokens), np.float64)


def grouped_expert_time(
    gemms: tuple[Gemm, ...],
    tokens: FloatArray,
    etp: FloatArray,
    tokens_per_expert: FloatArray,
    local_experts: FloatArray,
    gpu: GPUSpec,
    *,
    plateau: float,
    half_time_s: float,
    fp8: bool,
    hbm_bytes_per_s: float,
) -> FloatArray:
    """Forward seconds of the routed experts' grouped GEMMs on one GPU for ``tokens`` tokens
    (each Gemm's FLOPs per token already count top-k copies; widths sharded by etp)."""
    peak = gpu.peak_fp8_flop_per_s if fp8 and gpu.peak_fp8_flop_per_s else gpu.peak_bf16_flop_per_s
    weight_bytes = 1.0 if fp8 and gpu.peak_fp8_flop_per_s else 2.0
    knee = plateau * peak * weight_bytes / (2.0 * hbm_bytes_per_s)  # roofline knee (docstring)
    m_eff = weight_bound_efficiency(tokens_per_expert, knee)
    total = np.zeros_like(tokens)
    for g in gemms:
        n, k = sharded_width(g, etp.astype(np.int64))
        flop = g.fwd_flop_per_token * tokens / etp
        call = 2.0 * tokens_per_expert * n * k * np.maximum(local_experts, 1.0)
        size = call / (call + half_time_s * peak)
        total = total + flop / (peak * np.maximum(plateau * m_eff * size, 1e-9))
    return np.asarray(total, np.float64)
