"""Rules of the software stack (issue 12: the stack is an input): ``cp_comm_type``'s
(:mod:`planner.space.cp_comm_rules`) and the expert-GEMM kernel's, which depends on the GPU.

* ``moe_grouped_gemm_kernel='grouped'`` with fp8 under delayed scaling has no grouped kernel:
  TE's cuBLASLt grouped-tensor path (``NVTE_GROUPED_LINEAR_USE_FUSED_GROUPED_GEMM=1``) supports
  BF16/FP16, FP8 current scaling, MXFP8, NVFP4 and blockwise, "not delayed scaling", and the
  Hopper CUTLASS kernel takes BF16/FP16 inputs only, FP8 always runs the per-expert cuBLAS loop
  on the default path (mechanisms-facts §4.1). The planner emits ``--fp8-recipe delayed`` on
  every GPU but Blackwell (``planner.megatron.flags``), so such a job would be priced with a
  kernel it cannot run.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from planner.layouts import BoolArray
from planner.space.comm_flags import BLACKWELL_OR_NEWER
from planner.space.cp_comm_rules import CP_COMM_RULES

__all__ = ["STACK_RULES", "grouped_kernel_unavailable"]

Ctx = Any  # planner.space.rules._Context (imported there; a protocol would only repeat it)


def grouped_kernel_unavailable(precision: str, architecture: str) -> bool:
    """True where fp8 runs under delayed scaling (every GPU but Blackwell's mxfp8, as the
    planner's flags set it), which no grouped expert-GEMM kernel supports (§4.1)."""
    return precision == "fp8" and architecture not in BLACKWELL_OR_NEWER


def _grouped_check(ctx: Ctx) -> BoolArray:
    job, gpu = ctx.job, ctx.cluster.gpu
    bad = (
        ctx.model.is_moe
        and job.moe_grouped_gemm_kernel == "grouped"
        and grouped_kernel_unavailable(job.precision, gpu.architecture)
    )
    return np.full(len(ctx.batch), bad, dtype=np.bool_)


def _grouped_explain(ctx: Ctx, i: int) -> str:
    gpu = ctx.cluster.gpu
    return (
        f"moe_grouped_gemm_kernel='grouped' has no kernel for precision='fp8' on {gpu.name} "
        f"({gpu.architecture}): the planner runs fp8 there with --fp8-recipe delayed, which TE's "
        "grouped GEMMs do not support (FP8 runs one cuBLAS GEMM per expert); use "
        "moe_grouped_gemm_kernel='multi_stream' or precision='bf16'"
    )


STACK_RULES: tuple[tuple[str, str, str, Any, Any], ...] = (
    *CP_COMM_RULES,
    ("moe_grouped_gemm_kernel_supported",
     "moe_grouped_gemm_kernel='grouped' needs bf16/fp16, or fp8 with Blackwell's mxfp8 recipe",
     "megatron-facts §1.5, §1.8; mechanisms-facts §4.1", _grouped_check, _grouped_explain),
)  # fmt: skip
