"""Transfer of fitted throughput coefficients to GPU types that have no measurements.

A profile for an unmeasured GPU is its own datasheet (peak FLOP/s, HBM and link bandwidths in the
catalog's :class:`GPUSpec`, used by the model directly) plus its architecture's priors
(:func:`planner.performance.profile.default_profile`) plus the *dimensionless* coefficients fitted
on the
nearest measured GPU that describe the same thing on both:

* software coefficients (how Megatron, NCCL and the host behave: overlap fractions, per-layer and
  per-step overheads, achieved fraction of the NIC rate) go to every GPU, except the TP overlap
  to another vendor (userbuffers tp-comm-overlap is CUDA-only, performance-facts §6.2);
* chip efficiencies (GEMM plateaus, attention, NVLink fraction, the GPU-to-GPU speed spread of
  clocks and cooling) go only to a GPU of the same architecture (same die: H100 -> H200,
  A100-80GB -> A100-40GB), never across architectures.

The same rule serves the shipped profiles (``bench/fit_default_profiles.py``) and the
leave-one-GPU-type-out cross-validation (``planner.calibration.fit.cross_validate``), so the CV
figure measures the procedure that the unmeasured GPUs actually get.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import replace

from planner.performance.profile import PerformanceProfile, default_profile
from planner.specs import GPUSpec

SOFTWARE_COEFFICIENTS = (
    "tp_overlap",
    "dp_overlap",
    "pp_overlap",
    "layer_overhead_s",
    "step_overhead_s",
    "network_efficiency",
)
CHIP_COEFFICIENTS = (
    "gemm_efficiency",
    "fp8_gemm_efficiency",
    "attention_efficiency",
    "nvlink_efficiency",
    "straggler_spread",  # clocks and cooling (performance-facts §1.1, §8), not software
)
CUDA_ONLY = ("tp_overlap",)
"""Software features with no ROCm counterpart (userbuffers tp-comm-overlap)."""


def transferable(source: GPUSpec, target: GPUSpec) -> tuple[str, ...]:
    """Coefficients of ``source``'s fitted profile that carry over to ``target``."""
    names = list(SOFTWARE_COEFFICIENTS)
    if source.vendor != target.vendor:
        names = [n for n in names if n not in CUDA_ONLY]
    if source.architecture == target.architecture:
        names += list(CHIP_COEFFICIENTS)
    return tuple(names)


def transfer_profile(
    fitted: PerformanceProfile,
    source: GPUSpec,
    target: GPUSpec,
    *,
    base_for: Callable[[GPUSpec], PerformanceProfile] = default_profile,
    only: Collection[str] | None = None,
) -> PerformanceProfile:
    """``target``'s architecture priors with the transferable coefficients of ``fitted``.

    ``only``: the coefficients the source's rows identified (the regularised fit's); the others
    were never learned from data, so the target keeps its own prior for them rather than the
    source's prior (issue 12: an A100 prior must not overwrite an H100 one).
    """
    names = transferable(source, target)
    if only is not None:
        names = tuple(n for n in names if n in set(only))
    base = base_for(target)
    values = {n: getattr(fitted, n) for n in names}
    return replace(
        base,
        **values,
        provenance={
            "kind": "priors+transfer",
            "architecture": target.architecture,
            "priors": "shared/reference/performance-facts.md §9",
            "transferred_from": source.name,
            "transferred": sorted(names),
        },
    )


_FAMILIES = (
    ("grok", "grok-moe"),
    ("mixtral", "mixtral-moe"),
    ("deepseek", "deepseek-moe"),
    ("qwen", "qwen"),
    ("nemotron", "nemotron"),
    ("llama", "llama"),
    ("bloom", "bloom"),
    ("mt-nlg", "gpt"),
    ("gpt", "gpt"),
)


def model_family(name: str) -> str:
    """Model family of a measured model's name (for leave-one-family-out validation)."""
    low = name.lower()
    for key, family in _FAMILIES:
        if key in low:
            return family
    return low.split()[0] if low.split() else "unknown"
