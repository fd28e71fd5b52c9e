"""Achieved rate of one fused attention kernel call (FlashAttention / cuDNN), with the wave
efficiency of its thread blocks on the GPU's SMs.

rate = peak x plateau x keys / (keys + half_keys) x wave efficiency, where keys is the mean
number of keys a query row visits in the call and the wave efficiency is ctas / (waves x SMs)
(performance-facts §2.5: too few CTAs for the SMs is what collapses attention at few heads per
GPU). FLOPs follow FlashAttention's convention (performance-facts §2). Used by
:mod:`planner.performance.ring_attention` for each step of context-parallel attention.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.layouts import FloatArray
from planner.specs import GPUSpec, SpecError

FWD_FLOP_PER_PAIR_PER_DIM = 4.0  # performance-facts §2: forward = 4 x b x s^2 x heads x d
BWD_FLOP_RATIO = 2.5  # performance-facts §2: FlashAttention counts backward as 2.5 x forward


@dataclass(frozen=True, slots=True, kw_only=True)
class AttentionKernel:
    """Achieved rate of one fused attention kernel call (FlashAttention / cuDNN).

    rate = peak x plateau x keys / (keys + half_keys) x wave efficiency, where keys is the
    mean number of keys a query row visits in the call.
    """

    peak_flop_per_s: float
    """Dense bf16 peak of the GPU (the attention matmuls run in bf16 unless fp8_dpa)."""
    fwd_plateau: float
    """Forward rate at long key ranges, fraction of peak."""
    bwd_plateau: float
    """Backward rate (on FlashAttention's 2.5 x forward FLOPs), fraction of peak."""
    fwd_half_keys: float
    """Mean keys per query row at which the forward reaches half its plateau."""
    bwd_half_keys: float
    block_rows: int = 128
    """Query rows per CTA (FlashAttention 2/3 and cuDNN use 128 at head dim 128)."""
    sm_count: int | None = None
    """SMs of the GPU; None leaves wave quantisation out."""

    def __post_init__(self) -> None:
        for name in ("peak_flop_per_s", "fwd_plateau", "bwd_plateau"):
            if not getattr(self, name) > 0:
                raise SpecError(f"{name} must be positive", field=name)
        for name in ("fwd_half_keys", "bwd_half_keys"):
            if not getattr(self, name) >= 0:
                raise SpecError(f"{name} must be >= 0", field=name)
        if self.block_rows < 1:
            raise SpecError("block_rows must be >= 1", field="block_rows")
        if self.sm_count is not None and self.sm_count < 1:
            raise SpecError("sm_count must be a positive integer or null", field="sm_count")


def hopper_attention_prior(peak_flop_per_s: float, sm_count: int | None) -> AttentionKernel:
    """FlashAttention-3 on H100, bf16, head dim 128 (performance-facts §2.3, §2.4).

    Fitted to the FA figures (b x s = 16k tokens, 16 heads, so ~2,000 CTAs fill the SMs): causal
    forward 521 / 579 / 602 / 616 TFLOP/s at s = 2k / 4k / 8k / 16k (mean keys s / 2) gives a
    plateau of 633 TFLOP/s = 0.64 of 989.4 and half_keys ~220; the backward 501 / 542 / 559 /
    561 at 2k..16k (non-causal, keys s) gives 565 = 0.57 and half_keys ~400.
    """
    return AttentionKernel(
        peak_flop_per_s=peak_flop_per_s,
        fwd_plateau=0.64,
        bwd_plateau=0.57,
        fwd_half_keys=220.0,
        bwd_half_keys=400.0,
        sm_count=sm_count,
    )


def attention_kernel_prior(gpu: GPUSpec) -> AttentionKernel | None:
    """The attention kernel prior of a GPU's architecture, or None where no sweep exists.

    * hopper: FlashAttention-3 (:func:`hopper_attention_prior`);
    * ampere: FlashAttention-2 on A100, causal d = 128 forward + backward 155 / 173 / 182 / 189
      TFLOP/s at s = 2k / 4k / 8k / 16k (performance-facts §2.1) fit 195 TFLOP/s = 0.625 of 312
      with half_keys ~265 (the sweep is of forward + backward together, so both use it);
    * blackwell: FlashAttention-4 forward up to 1,613 TFLOP/s, ~0.71 of 2,250 (performance-facts
      §2.5) [Q]; backward at Hopper's backward / forward ratio (0.57 / 0.64) and Hopper's
      half_keys [inferred: no Blackwell sweep].
    """
    if gpu.architecture == "hopper":
        return hopper_attention_prior(gpu.peak_bf16_flop_per_s, gpu.sm_count)
    if gpu.architecture == "ampere":
        return AttentionKernel(
            peak_flop_per_s=gpu.peak_bf16_flop_per_s,
            fwd_plateau=0.625,
            bwd_plateau=0.625,
            fwd_half_keys=265.0,
            bwd_half_keys=265.0,
            sm_count=gpu.sm_count,
        )
    if gpu.architecture == "blackwell":
        return AttentionKernel(
            peak_flop_per_s=gpu.peak_bf16_flop_per_s,
            fwd_plateau=0.71,
            bwd_plateau=round(0.71 * 0.57 / 0.64, 3),
            fwd_half_keys=220.0,
            bwd_half_keys=400.0,
            sm_count=gpu.sm_count,
        )
    return None


def wave_efficiency(ctas: FloatArray, sm_count: int | None) -> FloatArray:
    """ctas / (waves x SMs): the share of SM slots the last wave leaves busy (1 without SMs)."""
    c = np.maximum(np.asarray(ctas, dtype=np.float64), 1.0)
    if sm_count is None:
        return np.ones_like(c)
    return np.asarray(c / (np.ceil(c / sm_count) * sm_count), np.float64)


def attention_call_time(
    kernel: AttentionKernel,
    *,
    batch_heads: FloatArray,
    query_rows: FloatArray,
    pairs: FloatArray,
    head_dim: float,
    backward: bool = False,
    concurrent_calls: FloatArray | float = 1.0,
) -> FloatArray:
    """Seconds of one attention kernel call over ``pairs`` query-key pairs per (batch x head).

    ``concurrent_calls`` pools the CTAs of calls that run side by side (TE alternates ring
    steps over two streams "to resolve wave quantization", mechanisms-facts §1.2).
    """
    rows = np.maximum(np.asarray(query_rows, dtype=np.float64), 1.0)
    p = np.asarray(pairs, dtype=np.float64)
    bh = np.asarray(batch_heads, dtype=np.float64)
    flop = FWD_FLOP_PER_PAIR_PER_DIM * bh * p * head_dim  # performance-facts §2 convention
    keys = p / rows  # mean keys visited per query row
    if backward:
        flop = flop * BWD_FLOP_RATIO
        plateau, half = kernel.bwd_plateau, kernel.bwd_half_keys
    else:
        plateau, half = kernel.fwd_plateau, kernel.fwd_half_keys
    ctas = bh * np.ceil(rows / kernel.block_rows) * concurrent_calls
    eff = plateau * keys / (keys + half) * wave_efficiency(ctas, kernel.sm_count)
    t = flop / (kernel.peak_flop_per_s * np.maximum(eff, 1e-9))
    return np.asarray(np.where(p > 0, t, 0.0), np.float64)
