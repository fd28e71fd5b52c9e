"""The software stack of a training job: settings that change speed but are not the hardware.

Issue 12 item 1 ("the stack is an input, the profile is the hardware"): what used to be baked into
a GPU's fitted profile (NVIDIA's tuned recipes: TP communication overlap, fused attention and
cross-entropy, force-balanced MoE routing) is a field of :class:`planner.specs.TrainingJob`,
emitted as Megatron flags (:mod:`planner.megatron.flags`), read back from an argv
(:mod:`planner.megatron.args`) and recorded on every measurement row
(:mod:`planner.calibration.measurements`). The memory settings that are also stack settings
(``cuda_graphs``, ``grad_reduce_dtype``) live on :class:`planner.specs.Layout` (issue 13).

Called from ``TrainingJob.__post_init__``; kept here so that the domain-type module stays short.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal

from planner.fp8_recipes import check_recipe
from planner.specs import SpecError
from planner.stack_versions import normalize_versions, require

if TYPE_CHECKING:
    from planner.specs import TrainingJob

__all__ = [
    "ATTENTION_BACKEND_CHOICES",
    "CROSS_ENTROPY_FUSION_CHOICES",
    "DEFAULT_MOE_IMBALANCE",
    "MOE_GROUPED_GEMM_KERNEL_CHOICES",
    "STACK_FIELDS",
    "AttentionBackend",
    "CrossEntropyFusion",
    "MoeGroupedGemmKernel",
    "check_stack",
    "effective_kernel",
    "loss_kernel",
]

AttentionBackend = Literal["auto", "flash", "fused", "unfused"]
ATTENTION_BACKEND_CHOICES: tuple[AttentionBackend, ...] = ("auto", "flash", "fused", "unfused")
CrossEntropyFusion = Literal["unfused", "native", "te", "te_fp32_grad"]
CROSS_ENTROPY_FUSION_CHOICES: tuple[CrossEntropyFusion, ...] = (
    "unfused",
    "native",
    "te",
    "te_fp32_grad",
)
MoeGroupedGemmKernel = Literal["multi_stream", "grouped"]
MOE_GROUPED_GEMM_KERNEL_CHOICES: tuple[MoeGroupedGemmKernel, ...] = ("multi_stream", "grouped")
DEFAULT_MOE_IMBALANCE = 1.2
"""Busiest expert's routed tokens over the mean under auxiliary-loss routing: no public
measurement exists; performance-facts §5.3 gives 1.1-1.5 as plausible [U], and 1.2 is the
memory estimator's figure for aux-loss-balanced dropless routing once training is under way."""
STACK_FIELDS: tuple[str, ...] = (
    "tp_comm_overlap",
    "attention_backend",
    "cross_entropy_fusion",
    "moe_imbalance",
    "moe_grouped_gemm_kernel",
    "fp8_recipe",
    "megatron_core_version",
    "te_version",
)
"""TrainingJob fields that describe the software stack (measurement rows carry a column each)."""


def check_stack(job: TrainingJob) -> None:
    """Validate the stack fields of a job; each error names the field and how to fix it."""
    from planner.stack_defaults import fill_release_defaults  # it imports planner.specs

    fill_release_defaults(job)  # unstated settings at the job's release's default first
    if not isinstance(job.expandable_segments, bool):
        raise SpecError(
            f"expandable_segments={job.expandable_segments!r} must be true or false",
            field="expandable_segments",
        )
    if not isinstance(job.tp_comm_overlap, bool):
        raise SpecError(
            f"tp_comm_overlap={job.tp_comm_overlap!r} must be true or false",
            field="tp_comm_overlap",
        )
    if job.attention_backend not in ATTENTION_BACKEND_CHOICES:
        raise SpecError(
            f"attention_backend={job.attention_backend!r} is not supported; use "
            f"{', '.join(ATTENTION_BACKEND_CHOICES)} (Megatron's --attention-backend)",
            field="attention_backend",
        )
    if job.cross_entropy_fusion not in CROSS_ENTROPY_FUSION_CHOICES:
        raise SpecError(
            f"cross_entropy_fusion={job.cross_entropy_fusion!r} is not supported; use "
            f"{', '.join(CROSS_ENTROPY_FUSION_CHOICES)} (unfused = no --cross-entropy-loss-fusion)",
            field="cross_entropy_fusion",
        )
    kernel = job.moe_grouped_gemm_kernel
    if kernel is not None and kernel not in MOE_GROUPED_GEMM_KERNEL_CHOICES:
        raise SpecError(
            f"moe_grouped_gemm_kernel={job.moe_grouped_gemm_kernel!r} is not supported; use "
            "multi_stream (TE's default: a cuBLAS GEMM per expert on 4 streams) or grouped "
            "(one grouped kernel: TE >= 2.8 CUTLASS on Hopper, >= 2.13 cuBLASLt)",
            field="moe_grouped_gemm_kernel",
        )
    check_versioned(job)
    check_recipe(job)  # after the versions: it asks what the release has
    value = job.moe_imbalance
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SpecError(f"moe_imbalance={value!r} must be a number", field="moe_imbalance")
    if not 1.0 <= value <= 8.0:
        raise SpecError(
            f"moe_imbalance={value} must be in [1, 8]: 1.0 is force-balanced routing (as in "
            f"NVIDIA's benchmarks), {DEFAULT_MOE_IMBALANCE} a typical auxiliary-loss run",
            field="moe_imbalance",
        )
    object.__setattr__(job, "moe_imbalance", float(value))


def loss_kernel(job: TrainingJob) -> CrossEntropyFusion:
    """The job's cross-entropy kernel: set when the job is built (None there = the release's
    default, planner.stack_defaults), so never None on a constructed job."""
    if job.cross_entropy_fusion is None:  # only through object.__setattr__ after __post_init__
        raise SpecError("cross_entropy_fusion is unset", field="cross_entropy_fusion")
    return job.cross_entropy_fusion


def effective_kernel(job: TrainingJob) -> MoeGroupedGemmKernel:
    """The expert-GEMM kernel a job is priced with: TE's default where the planner's to choose."""
    return job.moe_grouped_gemm_kernel or "multi_stream"


def check_versioned(job: TrainingJob) -> None:
    """The job's versions, and the job-wide settings they must have (planner.stack_versions);
    the layout's and the GPU's are checked by ``planner.space.version_rules``."""
    normalize_versions(job)
    fusion = job.cross_entropy_fusion
    if fusion in CROSS_ENTROPY_FUSION_CHOICES:
        other = "native" if fusion != "native" else "unfused"
        require(job, "cross_entropy_fusion", fusion,
                fix=f"use cross_entropy_fusion='{other}', or name a stack that has it")  # fmt: skip
    if job.moe_grouped_gemm_kernel == "grouped":  # the earliest grouped kernel (Hopper CUTLASS)
        require(job, "moe_grouped_gemm_kernel", "grouped_cutlass", shown="grouped",
                fix="use moe_grouped_gemm_kernel='multi_stream' (or leave it unset for the "
                "planner's choice), or set te_version to one with a grouped kernel")  # fmt: skip
