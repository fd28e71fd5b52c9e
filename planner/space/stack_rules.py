"""Rules of the software stack (issue 12: the stack is an input): ``cp_comm_type``'s
(:mod:`planner.space.cp_comm_rules`), and those of the job's Megatron-Core / Transformer Engine
versions and the expert-GEMM kernel, which depends on the GPU (:mod:`planner.space.version_rules`).

* ``moe_grouped_gemm_kernel='grouped'`` with fp8 under delayed scaling has no grouped kernel:
  TE's cuBLASLt grouped-tensor path (``NVTE_GROUPED_LINEAR_USE_FUSED_GROUPED_GEMM=1``) supports
  BF16/FP16, FP8 current scaling, MXFP8, NVFP4 and blockwise, "not delayed scaling", and the
  Hopper CUTLASS kernel takes BF16/FP16 inputs only, FP8 always runs the per-expert cuBLAS loop
  on the default path (mechanisms-facts §4.1). A job whose recipe is delayed (its
  ``fp8_recipe``, or the planner's default on a release without a newer one:
  ``planner.fp8_recipes``) would be priced with a kernel it cannot run. The kernels are NVIDIA
  TE's, from TE 2.8 (CUTLASS, Hopper) / 2.13.
"""

from __future__ import annotations

from typing import Any

from planner.space.cp_comm_rules import CP_COMM_RULES
from planner.space.version_rules import VERSION_RULES

__all__ = ["STACK_RULES"]

STACK_RULES: tuple[tuple[str, str, str, Any, Any], ...] = (*CP_COMM_RULES, *VERSION_RULES)
