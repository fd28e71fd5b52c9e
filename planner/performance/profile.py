"""Coefficients of the throughput model per GPU type, and the architecture priors.

Split out of :mod:`planner.performance.step_time` (which re-exports both names). Every coefficient
but the
latencies and overheads is a dimensionless fraction of a datasheet number; the priors cite
performance-facts.md and bench/results/gpu_kernels.md.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

import numpy as np

from planner.specs import GPUSpec, SpecError

LEGACY_FIELDS = frozenset({"moe_imbalance"})
"""Fields older profiles carry that are no longer profile coefficients (ignored on load)."""


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
    """Extra HBM bytes per attention score (query x key x head), fwd+bwd, beyond the 22 (32 with
    attention dropout) that jobs with ``attention_backend="unfused"`` always pay
    (planner.performance.unfused_attention, from the tensors of megatron-facts §7.1). A fitted
    correction: 0 in every prior and every shipped profile; never used with flash/fused
    attention."""
    hbm_efficiency: float = 0.8
    """Memory-bound ops and the optimizer step: fraction of HBM bandwidth (§3.1; a plain 4 GiB
    copy reaches 0.88-0.89 on H100/H200, gpu_kernels.md; fused elementwise ops less)."""
    nvlink_efficiency: float = 0.75
    """Achieved intra-node bus bandwidth / per-direction link spec at mid sizes (§4.2-4.3)."""
    network_efficiency: float = 0.75
    """Achieved per-NIC bus bandwidth / per-GPU network spec at mid sizes (§4.4)."""
    host_optimizer_params_per_s: float = 6.3e8
    """Parameters per second one GPU's share of the host runs Adam on with
    ``--optimizer-cpu-offload`` [inferred from mechanisms-facts §6.6: Qwen3-30B-A3B TP2 PP2 EP4
    on 16 H100, f = 1 adds 3.19 s for about 1.9e9 local parameters, 0.18 s of it on PCIe]."""
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
    ep_overlap: float = 0.6
    """With the MoE A2A overlap on (``--overlap-moe-expert-parallel-comm``,
    planner.space.comm_flags): the
    hidden fraction of the all-to-all that the other micro-batch's compute could cover (at most
    that compute). No published exposed fraction exists (§6.4) [U]: 0.6 sits between nothing and
    DeepSeek's "fully hidden" claim for the schedule it copies; 0 hides nothing. Off: 0."""
    overlap_interference: float = 0.15
    """Compute slowdown while overlapped communication runs, as a fraction of the hidden
    communication time on NVLink (NCCL/DeepEP take 8-32 of 132 SMs and HBM bandwidth; Calculon
    charges 15 % on NVLink, 2 % on IB, performance-facts §6.2, §9.5: 5-15 %). Scaled by the link's
    bandwidth / NVLink's, since the SM and HBM cost follows the bytes moved (15 % x 47/370 ~ 2 %).
    Charged to the communication's own breakdown entry."""
    layer_overhead_s: float = 0.0
    """Extra host/launch gap per layer per micro-batch beyond the host model below (0: the
    host_* costs carry it; kept for profiles that fitted one before the host model)."""
    host_kernel_s: float = 10e-6
    """Host time of one eager kernel launch with the calls around it: Python, PyTorch dispatch,
    allocations, TE bookkeeping, launch ("a few microseconds" per call, mechanisms-facts §3.1;
    2-3 calls per kernel) [U]. The assumption and its sensitivity: models_db/host_costs.json.
    Not fitted."""
    host_graph_launch_s: float = 10e-6
    """One cudaGraphLaunch of a captured region (mechanisms-facts §3.4) [U]. Not fitted."""
    host_sync_s: float = 20e-6
    """Round trip of one device-to-host sync of MoE token dispatch: copy, event wait, the first
    launch after it (mechanisms-facts §3.3) [U]. Not fitted."""
    host_micro_batch_s: float = 100e-6
    """Schedule bookkeeping per micro-batch without CUDA graphs (performance-facts §8: budget
    50-200 us for dense models) [U]. Not fitted."""
    step_overhead_s: float = 0.05
    """Per-iteration fixed time: data loading, grad-norm, logging (§8)."""
    straggler_spread: float = 0.0175
    """Relative spread (one standard deviation) of per-GPU speed: every step synchronises all
    GPUs, so the job runs at its slowest GPU, expected z(N) x spread slower than the median one
    for N GPUs (z: expected maximum of N standard normals). performance-facts §8: 5 %+ MAMF spread
    between the 8 GPUs of one node, i.e. a range of ~2.85 sigma -> sigma ~1.75 %."""
    cluster_step_scale: float = 1.0
    """The cluster's level: one multiplier on the whole step time for what this cluster does that
    the mechanisms do not describe (clocks and power caps, thermals, OS/host jitter, fabric
    congestion). 1.0 in every shipped profile (a fit over many clusters has no level of its own);
    a user calibration sets it to the posterior mean of the cluster's shared offset under the
    noise model (planner.calibration.level). Never a fitted coefficient of the ridge."""
    provenance: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    """Where the numbers come from: priors or fit (rows, date, errors)."""

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name in ("gpu", "provenance"):
                continue
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise SpecError(f"{f.name}={value!r} must be a number", field=f.name)
            if f.name == "cluster_step_scale":
                continue  # its own range, below
            if not math.isfinite(value) or value < 0:
                raise SpecError(
                    f"{f.name}={value} must be a finite non-negative number", field=f.name
                )
        if not (np.isfinite(self.cluster_step_scale) and self.cluster_step_scale > 0):
            raise SpecError(
                f"cluster_step_scale={self.cluster_step_scale} must be > 0 and finite (1.0: the "
                "cluster runs as the mechanisms predict)",
                field="cluster_step_scale",
            )
        for name in (
            "tp_overlap",
            "dp_overlap",
            "pp_overlap",
            "ep_overlap",
            "overlap_interference",
        ):
            if getattr(self, name) > 1:
                raise SpecError(f"{name}={getattr(self, name)} must be in [0, 1]", field=name)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PerformanceProfile:
        known = {f.name for f in fields(cls)}
        # moe_imbalance moved to TrainingJob (it is the run's routing, not the hardware): stored
        # profiles that still carry it stay readable
        data = {k: v for k, v in data.items() if k not in LEGACY_FIELDS}
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
    "volta": {  # V100 fp16: no flash attention (sm80+), Megatron's unfused softmax path [U]
        "gemm_efficiency": 0.75,  # [U] no measured V100 row in the shared data
        "attention_efficiency": 0.3,
        "nvlink_efficiency": 0.7,
        "tp_overlap": 0.0,
    },
    "hopper": {},  # the dataclass defaults are the H100/H200 priors
    "blackwell": {  # §1.5 B200 GEMM 0.5-0.7, §9 prior 0.65; §3.1 HBM 0.67; §4.2 ring 700/900
        "gemm_efficiency": 0.68,  # between §9's 0.65 and AIC's 0.58-0.76 on Megatron shapes
        "gemm_half_time_s": 5e-6,  # §1.2 B200 N=K=512..1024 at M=8192: 0.45-0.8 of plateau [C]
        "fp8_gemm_efficiency": 0.58,  # bf16 x 0.85, §9's B200 fp8/bf16 ratio (0.55 / 0.65)
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


# Per-GPU corrections to the architecture priors, keyed by catalog slug. GB200 reaches a smaller
# fraction of its higher (2,500 TFLOP/s) peak than B200 does of its 2,250: best measured GEMM
# 72.9 % vs 77.6 % of peak (performance-facts §1.1, MLE MAMF), so its plateaus are scaled by
# 0.729 / 0.776 = 0.94. GB300 has the same peak and no measurement of its own: the same scale.
_MAMF_SCALE_GB200 = 0.729 / 0.776
_GPU_PRIORS: dict[str, dict[str, float]] = {
    slug: {
        "gemm_efficiency": round(0.68 * _MAMF_SCALE_GB200, 3),
        "fp8_gemm_efficiency": round(0.58 * _MAMF_SCALE_GB200, 3),
    }
    for slug in ("gb200-186gb", "gb300-288gb")
}


def default_profile(gpu: GPUSpec) -> PerformanceProfile:
    """Physics priors for a GPU with no fitted profile (performance-facts §9 per architecture,
    with the per-GPU corrections of ``_GPU_PRIORS``)."""
    priors = {**_PRIORS.get(gpu.architecture, {}), **_GPU_PRIORS.get(gpu.name, {})}
    return PerformanceProfile(
        gpu=gpu.name,
        provenance={
            "kind": "priors",
            "architecture": gpu.architecture,
            "source": "shared/reference/performance-facts.md §9",
        },
        **priors,
    )
