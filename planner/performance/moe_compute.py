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
its score / top-k / aux-loss kernels over O(E) fp32 values per token, plus each of the router
region's kernels' fixed GPU time (performance-facts §8: ~3 us per memory-bound kernel) at the
counts the host term launches (:mod:`planner.performance.moe_kernels`: 78 unfused with the
alltoall preprocessing, 17 with DeepEP's fused layout). Permutation: ~14 K h bytes per token
through HBM with the alltoall dispatcher, ~8 K h with flex (§4.4), at the permute kernels'
fraction of HBM bandwidth, plus the fused permute's row_id_map where ``--moe-permute-fusion`` is
on, and each permute kernel's fixed time. Load imbalance is an input: the busiest rank's tokens
per expert are the mean times ``imbalance`` (1.0 = forced balance as in NVIDIA's benchmarks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from planner.layouts import FloatArray
from planner.performance.moe_kernels import permute_kernels
from planner.specs import SpecError


@dataclass(frozen=True, slots=True, kw_only=True)
class SideBytes:
    """HBM bytes per routed copy of a token (x K x h), before and after the experts."""

    dispatch: float
    combine: float


ExpertGemmPath = Literal["multi_stream", "grouped", "sequential"]
EXPERT_GEMM_PATHS: tuple[ExpertGemmPath, ...] = ("multi_stream", "grouped", "sequential")
TE_COMPUTE_STREAMS = 4  # TE common/util/multi_stream.cpp num_compute_streams (§4.1)
KERNEL_LATENCY_S = 3e-6  # performance-facts §8: constant latency per kernel (AIC systems yaml)
# x K x h per token, fwd (mechanisms-facts §4.4 "HBM traffic per token"): before the experts
# permute 1 and permute 2 read and write K h 2 B each (flex: permute 2 only); after them
# unpermute 2 reads and writes K h 2 B and unpermute 1 reads K h 2 B (flex: unpermute 2 only)
PERMUTE_BYTES_PER_COPY = {"alltoall": SideBytes(dispatch=8.0, combine=6.0),
                          "flex": SideBytes(dispatch=4.0, combine=4.0)}  # fmt: skip
ROUTER_FP32_PASSES = 6.0  # logits write, softmax r/w, top-k read, aux statistics, probs [inferred]
ROUTING_MAP_BYTES_PER_EXPERT = 1.0  # the router's boolean routing map, T x E (§4.3)
# the fused mask-map permute's int32 row_id_map, T x (2E + 1): (8E + 4) B per token (§4.4, TE
# permutation.py); the unfused path builds none (§4.4 states the fused kernel's map only)
ROW_ID_MAP_BYTES = (8.0, 4.0)  # per expert, per token


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
    kernels_fwd: FloatArray | float,
    kernels_bwd: FloatArray | float,
) -> tuple[FloatArray, FloatArray]:
    """(forward, backward) seconds of the router on ``tokens`` tokens (§4.3).

    The gating GEMM h x E (fp32 output; backward twice its FLOPs) and ~6 passes over the
    O(E) fp32 scores per token (softmax/sigmoid, top-k, aux-loss statistics, probs) plus the
    boolean routing map; the backward passes the same bytes again [inferred]. Each of the
    region's ``kernels_fwd`` / ``kernels_bwd`` kernels (:func:`moe_kernels.router_region_kernels`)
    adds its fixed GPU time (performance-facts §8).
    """
    t = np.asarray(tokens, dtype=np.float64)
    gemm = rate.call_time(t, experts, hidden, np.ones_like(t))
    score_bytes = t * experts * (ROUTER_FP32_PASSES * 4.0 + ROUTING_MAP_BYTES_PER_EXPERT)
    mem = score_bytes / rate.hbm_bytes_per_s
    fixed_fwd = np.asarray(kernels_fwd, np.float64) * KERNEL_LATENCY_S
    fixed_bwd = np.asarray(kernels_bwd, np.float64) * KERNEL_LATENCY_S
    return (
        np.asarray(gemm + mem + fixed_fwd, np.float64),
        np.asarray(2.0 * gemm + mem + fixed_bwd, np.float64),
    )


def permute_sides(
    *,
    tokens: FloatArray,
    hidden: float,
    topk: int,
    experts: float,
    dispatcher: Literal["alltoall", "flex"],
    permute_fusion: bool,
    hbm_bytes_per_s: float,
    permute_hbm_fraction: float,
) -> tuple[FloatArray, FloatArray]:
    """(dispatch side, combine side) seconds of the permutes of one pass, forward or backward
    (mechanisms-facts §4.4: "about the same in backward"): the token copies, the fused permute's
    row_id_map (written by the permute that builds it, read by the unpermute that undoes it
    [inferred]; none on the unfused path), and each permute kernel's fixed GPU time
    (:func:`moe_kernels.permute_kernels`, performance-facts §8).

    ``hbm_bytes_per_s`` is the spec bandwidth; ``permute_hbm_fraction`` the share the permute
    kernels reach (performance-facts §3.1, §5.3: ~0.5 on B200).
    """
    if dispatcher not in PERMUTE_BYTES_PER_COPY:
        raise SpecError(
            f"moe_dispatcher={dispatcher!r} is not one of alltoall, flex", field="moe_dispatcher"
        )
    t = np.asarray(tokens, dtype=np.float64)
    copies = PERMUTE_BYTES_PER_COPY[dispatcher]
    per_expert, per_token = ROW_ID_MAP_BYTES
    row_id_map = (per_expert * experts + per_token) if permute_fusion else 0.0
    kernels = permute_kernels(flex=dispatcher == "flex", permute_fusion=permute_fusion)
    bw = hbm_bytes_per_s * permute_hbm_fraction
    sides = []
    for side_bytes, side_kernels in (
        (copies.dispatch, kernels.dispatch),
        (copies.combine, kernels.combine),
    ):
        per_tok = side_bytes * topk * hidden + row_id_map  # bf16, K copies (§4.4)
        sides.append(np.asarray(t * per_tok / bw + side_kernels * KERNEL_LATENCY_S, np.float64))
    return sides[0], sides[1]


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
