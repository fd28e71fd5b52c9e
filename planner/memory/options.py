"""Switches and physical constants of the memory estimator (defaults: Megatron-Core + TE, bf16)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from planner.specs import SpecError

GIB = float(2**30)


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryOptions:
    """Switches and physical constants of the estimator (defaults: Megatron-Core + TE, bf16)."""

    threshold: float = 0.8
    """A layout fits when total <= threshold x HBM (Fujii §6: no OOM below 80 %)."""
    param_dtype_bytes: int = 2
    """bf16 model weights."""
    grad_dtype_bytes: int = 4
    """fp32 main gradients (--accumulate-allreduce-grads-in-fp32, Megatron's bf16 default)."""
    optimizer_state_bytes: int = 12
    """fp32 master weights + Adam m + Adam v (megatron-facts §4.3)."""
    swiglu_fused: bool = True
    """Megatron's fused bias-SwiGLU keeps only FC1's output; False also counts the SiLU output,
    as Fujii's Eq. 12 does (4 x 2sbF instead of 3 x 2sbF)."""
    flash_attention: bool = True
    """TE flash/fused attention: no s^2 tensors are saved (Korthikanti's 5as^2b vanishes)."""
    embedding_input: Literal["token_ids", "fujii"] = "token_ids"
    """'token_ids': int64 input and position ids per in-flight micro-batch (16 s b bytes);
    'fujii': the paper's conservative 8 s b h p / (t c) (memory-estimator-fujii §5.3)."""
    moe_token_imbalance: float | None = None
    """Most loaded EP rank's routed tokens over the mean; None takes the job's
    ``moe_imbalance`` (1.0 where the run forces balance, 1.2 by default for aux-loss routing),
    the same routing the step time is priced with."""
    cuda_context_bytes: float = 0.5 * GIB
    """CUDA context and loaded kernels (memory-estimator-fujii §7, S7: 0.3-0.5 GB)."""
    library_workspace_bytes: float = 0.25 * GIB
    """cuBLAS/cuBLASLt and TE workspaces (32 MiB per stream on Hopper, a few streams)."""
    nccl_bytes_per_communicator: float = 0.5e9
    """NCCL buffers per communicator of size > 1 (memory-estimator-fujii §7, S7: about 0.5 GB)."""
    dp_bucket_bytes: float = 0.0
    """Gradient-reduction and parameter-gather buckets held outside the gradient buffer. 0 for
    Megatron-Core, whose buckets are views of the contiguous grad/param buffers (in place);
    DeepSpeed ZeRO-1 allocates reduce and all-gather buckets (2 x 5e8 elements by default)."""
    keep_stage_outputs: bool = False
    """False for Megatron, which frees each pipeline stage's output tensor once it is sent
    (deallocate_output_tensor); DeepSpeed's pipeline engine keeps it (2sbh per in-flight
    micro-batch) until the backward pass."""
    fragmentation_fraction: float = 0.1
    """Caching-allocator blocks reserved but unusable, as a fraction of the dynamic
    (per-step) memory: activations, logits, workspaces and buffers."""
    include_runtime_overhead: bool = True
    """False drops the CUDA/NCCL/library and fragmentation terms (Fujii's paper scope)."""
    expandable_segments: bool = False
    """``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``: the allocator grows segments in
    place instead of caching fixed blocks, so most fragmentation goes (mechanisms-facts §6.7:
    a Llama3-70B layout that ran out of memory from fragmentation at 58.8 GB passes with it)."""
    expandable_fragmentation_fraction: float = 0.02
    """Fragmentation left with expandable segments [inferred: page-granular growth]."""
    deepep_buffer_bytes: float = 2 * GIB
    """DeepEP's NVLink + RDMA buffers per GPU with the flex dispatcher [U: DeepEP sizes them by
    hidden size and group; about 1 GB each at DeepSeek-V3's size]."""

    def __post_init__(self) -> None:
        if not 0.0 < self.threshold <= 1.0:
            raise SpecError(
                f"threshold={self.threshold} must be in (0, 1]; 0.8 is the 80 % rule",
                field="threshold",
            )
        if self.embedding_input not in ("token_ids", "fujii"):
            raise SpecError(
                f"embedding_input={self.embedding_input!r}: use 'token_ids' or 'fujii'",
                field="embedding_input",
            )
        imbalance = self.moe_token_imbalance
        if (imbalance is not None and imbalance < 1.0) or self.fragmentation_fraction < 0.0:
            raise SpecError(
                "moe_token_imbalance must be >= 1 and fragmentation_fraction >= 0",
                field="moe_token_imbalance",
            )
