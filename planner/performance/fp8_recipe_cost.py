"""What the fp8 recipe (``TrainingJob.fp8_recipe``, :mod:`planner.fp8_recipes`) changes in the
step time: only what a facts sheet states as a mechanism, as stated factors, never fitted.

* **GEMM rate.** Blockwise fp8 on Hopper (1x128 activation, 128x128 weight scales) runs the GEMMs
  about 15 % slower than per-tensor fp8 (performance-facts pitfall 6, from §1.1: 1,271 vs 1,507
  TFLOP/s on H100, AIC). Its fp8 GEMM rate is the per-tensor rate the profile was fitted with
  times :data:`BLOCKWISE_GEMM_RATE`. MXFP8 on Blackwell has no stated rate against per-tensor
  fp8: unchanged.
* **Quantize traffic.** Current per-tensor scaling ('tensorwise') needs the tensor's amax before
  it can cast, a separate pass over the bf16 input (performance-facts §3.2: "≈ 3 B per element
  quantized ... plus an amax pass"; mechanisms-facts §3.2: "one quantize (+ amax for current
  scaling) per GEMM input and per output gradient"); delayed scaling takes its scale from the
  amax history of earlier steps (megatron-facts §1.8's delayed-scaling knobs) and pays no such
  pass. The fp8 cast bytes of :func:`planner.performance.compute.elementwise_bytes_per_token`
  are those the fp8 coefficients were fitted with on the shared fp8 rows, which ran delayed
  scaling (``models_db/measurement_stacks.csv``); tensorwise adds one read of the bf16 element
  (:data:`AMAX_PASS_BYTES`) per quantized element, and one amax kernel launch before each
  quantize (mechanisms-facts §3.2; :func:`planner.performance.host_overhead.dense_layer_kernels`).
  The block recipes compute each block's scale inside the cast kernel from the block itself (no
  separate pass is stated): unchanged.
* **CP traffic.** The CP ring sends K/V in fp8 only with fp8 attention (``fp8_dpa``, delayed or
  current scaling); with MXFP8 the CP path communicates bf16 (mechanisms-facts §1). The planner
  never turns fp8 attention on, so every recipe's CP exchange is priced in bf16 already
  (:mod:`planner.performance.ring_attention`, ``kv_bytes_per_element`` 2).
"""

from __future__ import annotations

__all__ = [
    "AMAX_PASS_BYTES",
    "BLOCKWISE_GEMM_RATE",
    "FITTED_CAST_BYTES",
    "cast_bytes_factor",
    "gemm_rate_factor",
]

BLOCKWISE_GEMM_RATE = 0.85
"""Blockwise / per-tensor fp8 GEMM rate on Hopper: "≈ 15 % slower" (performance-facts pitfall
6; §1.1's AIC pair gives 1,271 / 1,507 = 0.84)."""
FITTED_CAST_BYTES = 6.0
"""HBM bytes per quantized element the fp8 coefficients were fitted with (compute.py's cast)."""
AMAX_PASS_BYTES = 2.0
"""Current scaling's amax pass: one more read of the bf16 element (performance-facts §3.2)."""


def gemm_rate_factor(recipe: str | None) -> float:
    """The recipe's fp8 GEMM rate over the fitted per-tensor rate (1.0 where none is stated)."""
    return BLOCKWISE_GEMM_RATE if recipe == "blockwise" else 1.0


def cast_bytes_factor(recipe: str | None) -> float:
    """The recipe's quantize traffic over the fitted (delayed-scaling) traffic."""
    if recipe == "tensorwise":
        return (FITTED_CAST_BYTES + AMAX_PASS_BYTES) / FITTED_CAST_BYTES
    return 1.0
