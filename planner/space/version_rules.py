"""Rules of the job's Megatron-Core / Transformer Engine versions (issue 12 item 1: "the stack a
run used is an input"), and the GPU-dependent availability of the grouped expert-GEMM kernel.

A layout that uses a setting its stack lacks (``cp_comm_type='a2a'`` before core 0.10 / TE 1.11,
full-iteration CUDA graphs before core 0.14, DeepEP before 0.12 ...) is rejected with the minimum
version, as Megatron's argument parser would reject the flag. What the planner turns on by itself
(the MoE all-to-all overlap, DeepEP, fp8 parameter gather) it turns on only where the stack has
it: :func:`pin_unavailable` sets those to off before anything is priced. The versions of each
setting are data (``planner/data/stack_features.csv``, read by :mod:`planner.stack_versions`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from planner.fp8_recipes import effective_recipe, recipe_gpu_problem
from planner.layout_settings import (
    FP8_GATHER_AUTO,
    FP8_GATHER_OFF,
    GRAPHS_FULL,
    GRAPHS_PARTIAL,
    MODULE_BITS,
)
from planner.layouts import (
    A2A_AUTO,
    A2A_OFF,
    DISPATCH_ALLTOALL,
    DISPATCH_AUTO,
    BoolArray,
    LayoutBatch,
)
from planner.model.pipeline import split_layers
from planner.space import comm_flags
from planner.space.rule_context import RuleContext
from planner.specs import CP_COMM_TYPES, GPUSpec, Layout, ModelSpec, TrainingJob
from planner.stack_versions import (
    Feature,
    core_version,
    feature,
    features,
    missing,
    stack_name,
    te_version,
)

__all__ = [
    "VERSION_RULES",
    "grouped_kernel_missing",
    "lacks",
    "pin_layout",
    "pin_unavailable",
    "split_exists",
    "split_lacking",
    "split_release_note",
    "usage",
]

Ctx = RuleContext
CUTLASS_PRECISIONS = frozenset({"bf16", "fp16"})
GROUPED_ARCHITECTURES = frozenset({"hopper", "blackwell", "rubin"})
"""The GPUs the facts name for TE's grouped kernels (mechanisms-facts §4.1: CUTLASS on SM90,
cuBLASLt grouped GEMM with Hopper and Blackwell cuBLASLt minimums); ROCm's TE is not covered."""


def grouped_kernel_missing(job: TrainingJob, gpu: GPUSpec) -> str | None:
    """Why no grouped expert-GEMM kernel runs this job on this GPU (None: one does).

    Hopper with bf16/fp16 has TE's CUTLASS kernel from TE 2.8; Hopper and Blackwell have the
    cuBLASLt grouped GEMM from TE 2.13 for bf16/fp16 and every fp8 recipe but delayed scaling
    (mechanisms-facts §4.1); the job's recipe is its ``fp8_recipe`` or the planner's default
    (planner.fp8_recipes: delayed only where the release has nothing newer)."""
    if gpu.vendor != "nvidia":
        return (
            f"{gpu.name} is a {gpu.vendor} GPU: the grouped kernels and their NVTE_* switches "
            "are NVIDIA Transformer Engine's (ROCm's TE is not in the facts)"
        )
    if gpu.architecture not in GROUPED_ARCHITECTURES:
        return f"{gpu.name} ({gpu.architecture}) has no TE grouped expert-GEMM kernel (Hopper+)"
    if effective_recipe(job, gpu) == "delayed":
        return (
            f"the job runs fp8 on {gpu.name} with --fp8-recipe delayed, which TE's grouped "
            "GEMMs do not support (fp8 runs one cuBLAS GEMM per expert; fp8_recipe="
            "'tensorwise' or 'blockwise' on Hopper, 'mxfp8' on Blackwell, have one)"
        )
    core, te = core_version(job), te_version(job)
    cutlass = feature("moe_grouped_gemm_kernel", "grouped_cutlass")
    cublaslt = feature("moe_grouped_gemm_kernel", "grouped_cublaslt")
    assert cutlass is not None and cublaslt is not None  # rows of stack_features.csv
    hopper_16bit = gpu.architecture == "hopper" and job.precision in CUTLASS_PRECISIONS
    if hopper_16bit and cutlass.missing(core, te) is None:
        return None
    lack = cublaslt.missing(core, te)
    if lack is None:
        return None
    return f"the grouped kernel for {job.precision} on {gpu.name} needs {lack} ({cublaslt.source})"


def usage(
    model: ModelSpec, cluster: Any, job: TrainingJob, batch: LayoutBatch
) -> dict[tuple[str, str], BoolArray]:
    """Per (setting, value) of the availability table: which layouts of ``batch`` use it."""
    n, mem = len(batch), batch.mem
    everywhere = np.ones(n, dtype=np.bool_)
    cp_codes = batch.cp_comm_codes
    graphs = "partial_moe" if model.is_moe else "partial"
    modules = mem.recompute_modules
    default_modules = (modules == 0) | (modules == MODULE_BITS["core_attn"])
    out: dict[tuple[str, str], BoolArray] = {
        ("context_parallel", "p2p"): batch.cp > 1,
        **{
            ("cp_comm_type", t): (batch.cp > 1) & (cp_codes == i)
            for i, t in enumerate(CP_COMM_TYPES)
        },
        ("cuda_graphs", graphs): mem.cuda_graphs == GRAPHS_PARTIAL,
        ("cuda_graphs", "full_iteration"): mem.cuda_graphs == GRAPHS_FULL,
        ("activation_offload_layers", "on"): mem.activation_offload_layers > 0,
        ("activation_offload_modules", "on"): mem.activation_offload_modules != 0,
        ("optimizer_offload_fraction", "on"): mem.optimizer_offload_fraction > 0,
        ("optimizer_state_dtype", "bf16"): np.asarray(mem.optimizer_state_bf16, np.bool_),
        ("recompute_modules", "on"): ~default_modules,
        ("recompute_modules", "shared_experts"): (modules & MODULE_BITS["shared_experts"]) != 0,
        ("pipeline_layout", "on"): np.asarray(mem.has_layout, np.bool_),
        ("fp8_param_gather", "true"): comm_flags.fp8_gather(job, batch),
    }
    recipe = effective_recipe(job, cluster.gpu)
    if recipe is not None:
        out[("fp8_recipe", recipe)] = everywhere
    if model.is_moe:
        flex = np.asarray(comm_flags.flex_dispatch(model, cluster, batch), np.bool_)
        out[("moe_dispatcher", "flex")] = flex
        out[("moe_dispatcher", "alltoall")] = (batch.ep > 1) & ~flex
        out[("moe_a2a_overlap", "true")] = np.asarray(
            comm_flags.enabled(model, cluster, batch, tp_overlap_on=job.tp_comm_overlap), np.bool_
        )
    return {k: np.asarray(v, np.bool_) for k, v in out.items()}


_JOB_WIDE = frozenset({"tp_comm_overlap", "cross_entropy_fusion", "moe_grouped_gemm_kernel"})
"""Settings of the whole job: TrainingJob refuses them itself (planner.stack_settings).
``fp8_recipe`` is job-wide too but stays checked here: a named recipe the release lacks never
gets this far (TrainingJob refuses it) and the planner's default is one the release has, so
the rule cannot fire on it; it is kept as a guard."""
_SHOWN = {"partial_moe": "partial (an MoE model's router scopes)"}
_FIXES = {
    ("moe_dispatcher", "alltoall"): (
        "the planner prices MoE layers with the alltoall (or flex) dispatcher only; the older "
        "allgather dispatcher (mechanisms-facts §3.3) is not modelled: set "
        "megatron_core_version to a release that has alltoall"
    ),
}
"""How to fix a setting that has no 'off' (the default is the planner's only value)."""


def _lacking(job: TrainingJob) -> list[Feature]:
    """The table's layout rows the job's releases lack (none on the newest, the default)."""
    core, te = core_version(job), te_version(job)
    return [f for f in features() if f.setting not in _JOB_WIDE and f.missing(core, te) is not None]


def _version_check(ctx: Ctx) -> BoolArray:
    lacking = {(f.setting, f.value) for f in _lacking(ctx.job)}
    bad = np.zeros(len(ctx.batch), dtype=np.bool_)
    if not lacking:  # the newest stack has everything (the default)
        return bad
    for key, used in usage(ctx.model, ctx.cluster, ctx.job, ctx.batch).items():
        if key in lacking:
            bad |= used
    return bad


def _version_explain(ctx: Ctx, i: int) -> str:
    core, te = core_version(ctx.job), te_version(ctx.job)
    used = usage(ctx.model, ctx.cluster, ctx.job, ctx.batch.take(np.array([i])))
    for f in _lacking(ctx.job):
        if (f.setting, f.value) in used and used[(f.setting, f.value)][0]:
            fix = _FIXES.get((f.setting, f.value), "turn it off, or set megatron_core_version "
                             "/ te_version to a release that has it")  # fmt: skip
            return (
                f"{f.setting}={_SHOWN.get(f.value, f.value)} needs {f.missing(core, te)} "
                f"({f.source}); the job's stack is {stack_name(ctx.job)}: {fix}"
            )
    return "a setting of this layout is newer than the job's Megatron-Core / TE"


def _kernel_check(ctx: Ctx) -> BoolArray:
    bad = (
        ctx.model.is_moe
        and ctx.job.moe_grouped_gemm_kernel == "grouped"
        and grouped_kernel_missing(ctx.job, ctx.cluster.gpu) is not None
    )
    return np.full(len(ctx.batch), bad, dtype=np.bool_)


def _kernel_explain(ctx: Ctx, i: int) -> str:
    reason = grouped_kernel_missing(ctx.job, ctx.cluster.gpu)
    fp8 = ctx.job.precision == "fp8"
    alt = " or precision='bf16'" if fp8 else " (or leave it unset: the planner's choice)"
    return (
        f"moe_grouped_gemm_kernel='grouped' has no kernel here: {reason}; use "
        f"moe_grouped_gemm_kernel='multi_stream'{alt}"
    )


def _recipe_check(ctx: Ctx) -> BoolArray:
    bad = recipe_gpu_problem(ctx.job.fp8_recipe, ctx.cluster.gpu, ctx.job) is not None
    return np.full(len(ctx.batch), bad and ctx.job.precision == "fp8", dtype=np.bool_)


def _recipe_explain(ctx: Ctx, i: int) -> str:
    return (
        recipe_gpu_problem(ctx.job.fp8_recipe, ctx.cluster.gpu, ctx.job)
        or "fp8_recipe is not valid here"
    )


def lacks(job: TrainingJob, setting: str, value: str) -> bool:
    """Whether the job's Megatron-Core / TE lack ``setting=value`` (a row of the table)."""
    row = feature(setting, value)
    return row is not None and row.missing(core_version(job), te_version(job)) is not None


SPLIT_KINDS = ("account", "uneven", "uneven_interleaved")


def split_lacking(job: TrainingJob) -> frozenset[str]:
    """The pipeline split kinds (planner.model.pipeline) the job's Megatron-Core lacks."""
    return frozenset(k for k in SPLIT_KINDS if lacks(job, "pipeline_split", k))


def split_exists(model: ModelSpec, job: TrainingJob, pp: int, vpp: int) -> bool:
    """Whether the job's release can split the model's layers over pp x vpp stages."""
    return split_layers(model.num_layers, pp, vpp, split_lacking(job)) is not None


_SPLIT_FLAGS = {  # in the order the releases added them (stack_features.csv)
    "uneven": ("uneven first/last stages", frozenset({"uneven"})),
    "account": ("--account-for-embedding/loss-in-pipeline-split", frozenset({"account"})),
    "uneven_interleaved": (
        "uneven stages with --num-virtual-stages-per-pipeline-rank",
        frozenset({"uneven", "uneven_interleaved"}),
    ),
}


def split_release_note(model: ModelSpec, job: TrainingJob, pp: int, vpp: int) -> str:
    """Where a newer Megatron-Core could split the layers: the oldest split that would, and the
    release it needs (for the rules' messages; empty where none would)."""
    lacking = split_lacking(job)
    for kind, (flags, needs) in _SPLIT_FLAGS.items():
        if kind in lacking and split_layers(model.num_layers, pp, vpp, lacking - needs):
            return (
                f" ({flags} would, but they need {missing(job, 'pipeline_split', kind)} and "
                f"the job's stack is {stack_name(job)}: set megatron_core_version to a "
                "release that has them, or choose a valid value)"
            )
    return ""


def pin_unavailable(job: TrainingJob, batch: LayoutBatch) -> LayoutBatch:
    """``batch`` with the planner's own switches (None = on where allowed) set to off where the
    job's stack lacks them: the MoE all-to-all overlap, DeepEP, the fp8 parameter gather."""
    changes: dict[str, Any] = {}
    if lacks(job, "moe_a2a_overlap", "true"):
        a2a = batch.moe_a2a_overlap
        changes["moe_a2a_overlap"] = np.where(a2a == A2A_AUTO, A2A_OFF, a2a)
    if lacks(job, "moe_dispatcher", "flex"):
        d = batch.moe_dispatcher
        changes["moe_dispatcher"] = np.where(d == DISPATCH_AUTO, DISPATCH_ALLTOALL, d)
    # only an fp8 job gathers fp8 weights: a bf16 layout keeps "auto" (what its flags say)
    gather_missing = job.precision == "fp8" and lacks(job, "fp8_param_gather", "true")
    if gather_missing and batch.settings is not None:
        g = batch.settings.fp8_param_gather
        gather = np.where(g == FP8_GATHER_AUTO, FP8_GATHER_OFF, g)
        changes["settings"] = replace(batch.settings, fp8_param_gather=gather)
    elif gather_missing and job.precision == "fp8":
        off = np.full(len(batch), FP8_GATHER_OFF)
        changes["settings"] = replace(batch.mem, fp8_param_gather=off)
    return replace(batch, **changes) if changes else batch


def pin_layout(job: TrainingJob, layout: Layout) -> Layout:
    """One layout with :func:`pin_unavailable`'s switches off where the stack lacks them."""
    changes: dict[str, Any] = {}
    if layout.moe_a2a_overlap is None and lacks(job, "moe_a2a_overlap", "true"):
        changes["moe_a2a_overlap"] = False
    if layout.moe_dispatcher is None and lacks(job, "moe_dispatcher", "flex"):
        changes["moe_dispatcher"] = "alltoall"
    if (
        layout.fp8_param_gather is None
        and job.precision == "fp8"
        and lacks(job, "fp8_param_gather", "true")
    ):
        changes["fp8_param_gather"] = False
    return replace(layout, **changes) if changes else layout


_S = "megatron-facts §1.0 (flags by version); mechanisms-facts §8 (data/stack_features.csv)"
VERSION_RULES: tuple[tuple[str, str, str, Any, Any], ...] = (
    ("stack_version_has_setting",
     "a setting of the layout needs a newer (or older) Megatron-Core / Transformer Engine "
     "than the job's", _S, _version_check, _version_explain),
    ("moe_grouped_gemm_kernel_supported",
     "moe_grouped_gemm_kernel='grouped' needs an NVIDIA Hopper/Blackwell GPU, a TE with a grouped "
     "kernel for the precision (bf16/fp16, or fp8 with a recipe other than delayed)",
     "megatron-facts §1.5, §1.8; mechanisms-facts §4.1, §8", _kernel_check, _kernel_explain),
    ("fp8_recipe_supported_on_gpu",
     "fp8_recipe='mxfp8' needs a Blackwell GPU, 'blockwise' a Hopper GPU",
     "megatron-facts §1.8; mechanisms-facts §4.1, §6.1", _recipe_check, _recipe_explain),
)  # fmt: skip
