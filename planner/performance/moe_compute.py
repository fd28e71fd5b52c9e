"""MoE layer compute: expert GEMM granularity, router and permutation (issue 12 item 6,
mechanisms-facts §4).

Transformer Engine's ``GroupedLinear`` on its default path runs **one cuBLAS GEMM per local
expert**, round-robin on 4 compute streams (§4.1); Hopper's CUTLASS grouped kernel
(``NVTE_USE_CUTLASS_GROUPED_GEMM=1``) and the cuBLASLt grouped path run **one kernel for all
experts**; ``SequentialMLP`` (no ``--moe-grouped-gemm``) loops over experts on one stream. The
three differ in what fills the SMs: a single expert GEMM of m x n x k is often too small (the
size factor of the dense GEMM curve, bench/results/gpu_kernels.md); four concurrent streams with
no barrier between their GEMMs pool all local experts' work as a grouped kernel does, plus one
kernel latency per GEMM on each stream; the sequential loop pays every GEMM's size factor.
Every path is also bounded by streaming each expert's weights from HBM (the roofline: small m
per expert is weight-bandwidth-bound, §4.2 reading).

Router: the gating GEMM (2 h E FLOP per token, excluded from Megatron's FLOP count, §4.3) and
its score / top-k / aux-loss kernels over O(E) fp32 values per token. Permutation: ~14 K h bytes
per token through HBM with the alltoall dispatcher, ~8 K h with flex (§4.4), at the permute
kernels' fraction of HBM bandwidth. Load imbalance is an input: the busiest rank's tokens per
expert are the mean times ``imbalance`` (1.0 = forced balance as in NVIDIA's benchmarks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from planner.layouts import FloatArray
from planner.specs import SpecError

ExpertGemmPath = Literal["multi_stream", "grouped", "sequential"]
EXPERT_GEMM_PATHS: tuple[ExpertGemmPath, ...] = ("multi_stream", "grouped", "sequential")
TE_COMPUTE_STREAMS = 4  # TE common/util/multi_stream.cpp num_compute_streams (§4.1)
KERNEL_LATENCY_S = 3e-6  # performance-facts §8: constant latency per kernel (AIC systems yaml)
PERMUTE_BYTES_PER_COPY = {"alltoall": 14.0, "flex": 8.0}  # x K x h per token, fwd (§4.4)
ROUTER_FP32_PASSES = 6.0  # logits write, softmax r/w, top-k read, aux statistics, probs [inferred]
ROUTE_MAP_BYTES_PER_EXPERT = 8.0  # fused permute row_id_map: (8E + 4) B per token (§4.4)


@dataclass(frozen=True, slots=True, kw_only=True)
class GemmRate:
    """The dense GEMM curve of one GPU and precision (planner.performance.compute.gemm_efficiency
    form: plateau x m / (m + m_half) x F / (F + F_half), F = 2 m n k of one call)."""

    peak_flop_per_s: float
    plateau: float
    half_tokens: float
    half_flop: float
    hbm_bytes_per_s: float
    """Achieved HBM bandwidth (the weight-streaming bound)."""
    weight_bytes: float = 2.0
    """Bytes per weight element: 2 in bf16, 1 in fp8."""
    grouped_kernel_efficiency: float = 1.0
    """A grouped kernel's rate / a dense GEMM's at the same pooled size (prior 1.0)."""

    def __post_init__(self) -> None:
        for name in (
            "peak_flop_per_s",
            "plateau",
            "hbm_bytes_per_s",
            "weight_bytes",
            "grouped_kernel_efficiency",
        ):
            if not getattr(self, name) > 0:
                raise SpecError(f"{name} must be positive", field=name)

    def call_time(self, m: FloatArray, n: float, k: float, calls: FloatArray) -> FloatArray:
        """Seconds of ``calls`` concurrent GEMMs of m x n x k pooled into one wave of work."""
        mm = np.maximum(np.asarray(m, dtype=np.float64), 1e-9)
        flop = 2.0 * mm * n * k * calls
        eff = self.plateau * mm / (mm + self.half_tokens) * flop / (flop + self.half_flop)
        compute = flop / (self.peak_flop_per_s * eff)
        # roofline: every weight once, activations in and out once (bf16)
        traffic = calls * (n * k * self.weight_bytes + 2.0 * mm * (n + k))
        return np.asarray(np.maximum(compute, traffic / self.hbm_bytes_per_s), np.float64)


def expert_gemm_time(
    rate: GemmRate,
    *,
    tokens_per_expert: FloatArray,
    local_experts: FloatArray,
    n: float,
    k: float,
    path: ExpertGemmPath,
    imbalance: float = 1.0,
) -> FloatArray:
    """Seconds of one expert GEMM (m x n x k per expert) over all local experts of a rank.

    ``imbalance`` scales the busiest rank's tokens per expert (§6.3: max/mean routed tokens).
    """
    if path not in EXPERT_GEMM_PATHS:
        raise SpecError(
            f"path={path!r} is not one of {', '.join(EXPERT_GEMM_PATHS)}", field="expert_gemm"
        )
    if imbalance < 1:
        raise SpecError(
            f"moe_imbalance={imbalance} must be >= 1 (1.0 = forced balance)", field="moe_imbalance"
        )
    m = np.asarray(tokens_per_expert, dtype=np.float64) * imbalance
    e = np.maximum(np.asarray(local_experts, dtype=np.float64), 1.0)
    if path == "grouped":
        return np.asarray(rate.call_time(m, n, k, e) / rate.grouped_kernel_efficiency)
    if path == "sequential":
        return np.asarray(e * rate.call_time(m, n, k, np.ones_like(e)))
    # the streams are joined by events only after the last expert (§4.1): no barrier between
    # rounds, so the SMs see all local experts' work as one pool (a stream's next GEMM fills
    # the tail of another's), and each stream pays one kernel latency per GEMM it runs
    # (performance-facts §8: ~3 us per kernel) on top
    per_stream = np.ceil(e / float(TE_COMPUTE_STREAMS))
    pooled = rate.call_time(m, n, k, e)
    return np.asarray(pooled + per_stream * KERNEL_LATENCY_S, np.float64)


def expert_mlp_time(
    rate: GemmRate,
    *,
    tokens_per_expert: FloatArray,
    local_experts: FloatArray,
    hidden: float,
    expert_ffn: float,
    gated: bool,
    path: ExpertGemmPath,
    imbalance: float = 1.0,
) -> tuple[FloatArray, FloatArray]:
    """(forward, backward) seconds of the routed experts' FC1 and FC2 on one rank.

    FC1 is h -> F_e (2 F_e with SwiGLU), FC2 F_e -> h; the backward runs a data-gradient and a
    weight-gradient GEMM of the same size per forward GEMM (3 per expert linear, §3.2).
    """
    fc1_n = expert_ffn * (2.0 if gated else 1.0)
    kw = {
        "tokens_per_expert": tokens_per_expert,
        "local_experts": local_experts,
        "path": path,
        "imbalance": imbalance,
    }
    fc1 = expert_gemm_time(rate, n=fc1_n, k=hidden, **kw)  # type: ignore[arg-type]
    fc2 = expert_gemm_time(rate, n=hidden, k=expert_ffn, **kw)  # type: ignore[arg-type]
    # dgrad of FC1 is m x h x F1 and wgrad F1 x h x m: the same FLOPs; the pooled size is
    # the same, so the forward time stands in for each
    fwd = fc1 + fc2
    return np.asarray(fwd, np.float64), np.asarray(2.0 * fwd, np.float64)


def router_time(
    rate: GemmRate,
    *,
    tokens: FloatArray,
    hidden: float,
    experts: float,
) -> tuple[FloatArray, FloatArray]:
    """(forward, backward) seconds of the router on ``tokens`` tokens (§4.3).

    The gating GEMM h x E (fp32 output; backward twice its FLOPs) and ~6 passes over the
    O(E) fp32 scores per token (softmax/sigmoid, top-k, aux-loss statistics, probs) plus the
    routing map; the backward passes the same bytes again [inferred].
    """
    t = np.asarray(tokens, dtype=np.float64)
    gemm = rate.call_time(t, experts, hidden, np.ones_like(t))
    score_bytes = t * experts * (ROUTER_FP32_PASSES * 4.0 + ROUTE_MAP_BYTES_PER_EXPERT)
    mem = score_bytes / rate.hbm_bytes_per_s
    return np.asarray(gemm + mem, np.float64), np.asarray(2.0 * gemm + mem, np.float64)


def permute_time(
    *,
    tokens: FloatArray,
    hidden: float,
    topk: int,
    dispatcher: Literal["alltoall", "flex"],
    hbm_bytes_per_s: float,
    permute_hbm_fraction: float,
) -> tuple[FloatArray, FloatArray]:
    """(forward, backward) seconds of permute / unpermute (mechanisms-facts §4.4).

    ``hbm_bytes_per_s`` is the spec bandwidth; ``permute_hbm_fraction`` the share the permute
    kernels reach (performance-facts §3.1, §5.3: ~0.5 on B200).
    """
    if dispatcher not in PERMUTE_BYTES_PER_COPY:
        raise SpecError(
            f"moe_dispatcher={dispatcher!r} is not one of alltoall, flex", field="moe_dispatcher"
        )
    t = np.asarray(tokens, dtype=np.float64)
    per_token = PERMUTE_BYTES_PER_COPY[dispatcher] * topk * hidden  # bf16, K copies
    seconds = t * per_token / (hbm_bytes_per_s * permute_hbm_fraction)
    return np.asarray(seconds, np.float64), np.asarray(seconds, np.float64)


def achieved_flop_per_s(
    seconds: FloatArray,
    *,
    tokens_per_expert: FloatArray,
    local_experts: FloatArray,
    n: float,
    k: float,
) -> FloatArray:
    """FLOP/s of an expert GEMM (for comparing with published TFLOP/s)."""
    flop = 2.0 * np.asarray(tokens_per_expert) * n * k * np.asarray(local_experts)
    return np.asarray(flop / np.asarray(seconds), np.float64)
