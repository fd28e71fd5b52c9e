"""Rules of the memory settings (issue 13), in the form of :mod:`planner.space.rules`.

Each check takes the rules' context and returns True where a layout breaks the rule; each explain
names the values and a fix. Megatron's own rules are cited by number (megatron-facts §2); the
others are marked as the planner's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from planner.layout_settings import FP8_GATHER_ON, GRAPHS_PARTIAL, MODULE_BITS, effective_modules
from planner.layouts import RECOMPUTE_FULL, RECOMPUTE_NONE, SHARD_NONE, BoolArray
from planner.model.pipeline_layout import parse_pipeline_layout
from planner.space.offload_rules import OFFLOAD_RULES
from planner.space.rule_context import RuleContext
from planner.specs import SpecError

__all__ = ["MEMORY_RULES", "has_layout"]

Ctx = RuleContext


def has_layout(ctx: Ctx) -> BoolArray:
    result: BoolArray = ctx.batch.mem.has_layout
    return result


def _layout_error(ctx: Ctx, i: int) -> str | None:
    text = str(ctx.batch.mem.pipeline_layout[i])
    if not text:
        return None
    try:
        parse_pipeline_layout(text).validate(
            pp=int(ctx.batch.pp[i]),
            vpp=int(ctx.batch.vpp[i]),
            num_layers=ctx.model.num_layers,
            mtp_num_layers=ctx.model.mtp_num_layers,
        )
    except SpecError as exc:
        return exc.message
    return None


def _layout_check(ctx: Ctx) -> BoolArray:
    bad = np.zeros(len(ctx.batch), dtype=np.bool_)
    rows = np.flatnonzero(has_layout(ctx))
    if not rows.size:
        return bad
    b = ctx.batch
    _, code = np.unique(b.mem.pipeline_layout[rows].astype(str), return_inverse=True)
    keys = np.stack([code.reshape(-1), b.pp[rows], b.vpp[rows]], axis=1)
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    broken = np.array([_layout_error(ctx, int(rows[i])) is not None for i in first])
    bad[rows] = broken[inverse.reshape(-1)]  # one check per distinct (layout, pp, vpp)
    return bad


def _layout_explain(ctx: Ctx, i: int) -> str:
    return _layout_error(ctx, i) or "pipeline_layout is valid"


# --- recompute modules (megatron-facts §1.6; mechanisms-facts §6.4) ----------------------------
def _module_problems(ctx: Ctx, mask: int) -> list[str]:
    model = ctx.model
    out = []
    if mask & MODULE_BITS["mla_up_proj"] and not model.multi_latent_attention:
        out.append("'mla_up_proj' needs multi-latent attention (an MLA model)")
    for name in ("moe_act", "moe", "shared_experts"):
        if mask & MODULE_BITS[name] and not model.is_moe:
            out.append(f"'{name}' needs a mixture-of-experts model")
    if mask & MODULE_BITS["shared_experts"] and not model.shared_expert_ffn_hidden_size:
        out.append("'shared_experts' needs a model with shared experts")
    # 'moe' with moe_a2a_overlap on: rule moe_a2a_overlap_allowed (planner.space.comm_flags)
    return out


def _modules_check(ctx: Ctx) -> BoolArray:
    unique, inverse = np.unique(effective_modules(ctx.batch), return_inverse=True)
    broken = np.array([bool(_module_problems(ctx, k)) for k in unique.tolist()])
    result: BoolArray = broken[inverse.reshape(-1)]  # one check per distinct module set
    return result


def _modules_explain(ctx: Ctx, i: int) -> str:
    mask = int(effective_modules(ctx.batch)[i])
    problems = _module_problems(ctx, mask)
    return "recompute_modules: " + "; ".join(problems) + "; drop those modules"


# --- fp8 parameters (rule 53) ------------------------------------------------------------------
def _fp8_gather_check(ctx: Ctx) -> BoolArray:
    on = ctx.batch.mem.fp8_param_gather == FP8_GATHER_ON
    bad: BoolArray = on & (
        (ctx.job.precision != "fp8") | (ctx.batch.optimizer_sharding == SHARD_NONE)
    )
    return bad


def _fp8_gather_explain(ctx: Ctx, i: int) -> str:
    return (
        "fp8_param_gather=true needs precision='fp8' and the distributed optimizer or FSDP "
        f"(megatron-facts rule 53); here precision={ctx.job.precision!r}, optimizer_sharding="
        f"{ctx.batch.layout(i).optimizer_sharding!r}; leave fp8_param_gather unset"
    )


# --- legacy activation offload (rule 50) -------------------------------------------------------
def _act_offload_check(ctx: Ctx) -> BoolArray:
    b = ctx.batch
    n = b.mem.activation_offload_layers
    bad: BoolArray = (n > 0) & (
        (n >= ctx.model.num_layers)
        | (b.pp > 1)
        | (b.recompute != RECOMPUTE_NONE)
        | (b.mem.cuda_graphs == GRAPHS_PARTIAL)
    )
    return bad


def _act_offload_explain(ctx: Ctx, i: int) -> str:
    lay = ctx.batch.layout(i)
    return (
        f"activation_offload_layers={lay.activation_offload_layers} (--cpu-offloading-num-"
        f"layers) needs 0 <= N < num_layers={ctx.model.num_layers}, pp=1 (got {lay.pp}), "
        f"recompute='none' (got {lay.recompute!r}) and no per-layer CUDA graphs (got "
        f"{lay.cuda_graphs!r}) (megatron-facts rule 50)"
    )


# --- host link and host memory for any offload (planner) ---------------------------------------
def _host_check(ctx: Ctx) -> BoolArray:
    mem = ctx.batch.mem
    offload = (mem.activation_offload_layers > 0) | (mem.optimizer_offload_fraction > 0)
    offload = offload | (mem.activation_offload_modules > 0)
    unknown = (
        ctx.cluster.gpu.host_link_bandwidth_bytes_per_s is None
        or ctx.cluster.host_memory_bytes_per_gpu is None
    )
    bad: BoolArray = offload & unknown
    return bad


def _host_explain(ctx: Ctx, i: int) -> str:
    return (
        f"offloading to the host needs the host link of {ctx.cluster.gpu.name} "
        "(host_link_bandwidth_bytes_per_s) and the cluster's host_memory_bytes_per_gpu; set "
        "them, or use a catalog cluster that has them"
    )


# --- optimizer offload needs a sharded or replicated Adam on the distributed optimizer ---------
def _opt_offload_check(ctx: Ctx) -> BoolArray:
    bad: BoolArray = (ctx.batch.mem.optimizer_offload_fraction > 0) & (
        ctx.batch.optimizer_sharding == SHARD_NONE
    )
    return bad


def _opt_offload_explain(ctx: Ctx, i: int) -> str:
    return (
        "optimizer_offload_fraction > 0 (--optimizer-cpu-offload) runs through the distributed "
        "optimizer or FSDP (Megatron's HybridDeviceOptimizer wraps the sharded optimizer); set "
        "optimizer_sharding='optimizer' or 'full'"
    )


# --- CUDA graphs (mechanisms-facts §3.4) -------------------------------------------------------
def _graphs_check(ctx: Ctx) -> BoolArray:
    b = ctx.batch
    partial = b.mem.cuda_graphs == GRAPHS_PARTIAL
    moe_rec = (effective_modules(b) & MODULE_BITS["moe"]) != 0
    bad: BoolArray = partial & ((b.recompute == RECOMPUTE_FULL) | (moe_rec & ctx.model.is_moe))
    return bad


def _graphs_explain(ctx: Ctx, i: int) -> str:
    return (
        "cuda_graphs='partial' (per-layer graphs) cannot be combined with full recompute or "
        "with recomputing the 'moe' module (mechanisms-facts §3.4); use 'full_iteration' or "
        "another recompute"
    )


# --- precision on the GPU ----------------------------------------------------------------------
def _bf16_check(ctx: Ctx) -> BoolArray:
    unsupported = ctx.job.precision in ("bf16", "fp8") and not ctx.cluster.gpu.bf16_supported
    result: BoolArray = np.full(len(ctx.batch), unsupported, dtype=np.bool_)
    return result


def _bf16_explain(ctx: Ctx, i: int) -> str:
    return (
        f"precision={ctx.job.precision!r} needs bf16 tensor cores and {ctx.cluster.gpu.name} "
        "has none; use precision='fp16' (loss scaling)"
    )


_F = "megatron-facts §2."
MEMORY_RULES: tuple[tuple[str, str, str, Any, Any], ...] = (
    ("bf16_needs_gpu_support", "bf16 (and fp8) training needs a GPU with bf16 tensor cores",
     "megatron-facts §1.8; catalog", _bf16_check, _bf16_explain),
    ("pipeline_layout_valid",
     "pipeline_layout must have pp*vpp stages, num_layers 't', mtp_num_layers 'm', E first, "
     "L last", _F + "2 rule 14", _layout_check, _layout_explain),
    ("recompute_modules_apply", "each recompute module must exist in the model",
     "megatron-facts §1.6; mechanisms-facts §6.4", _modules_check, _modules_explain),
    ("fp8_param_gather_needs_sharding",
     "fp8_param_gather needs fp8 and the distributed optimizer or FSDP",
     _F + "8 rule 53", _fp8_gather_check, _fp8_gather_explain),
    ("activation_offload_allowed",
     "activation_offload_layers needs N < num_layers, pp=1, no recompute, no per-layer graphs",
     _F + "7 rule 50", _act_offload_check, _act_offload_explain),
    ("offload_needs_host_spec", "offloading needs the host link and host memory in the specs",
     "megatron-facts §1.7; planner policy", _host_check, _host_explain),
    ("optimizer_offload_needs_sharding",
     "optimizer_offload_fraction needs the distributed optimizer or FSDP",
     _F + "8 rule 59; planner", _opt_offload_check, _opt_offload_explain),
    ("cuda_graphs_compatible",
     "per-layer CUDA graphs exclude full recompute and 'moe' recompute",
     "megatron-facts §2.7 rule 50; mechanisms-facts §3.4", _graphs_check, _graphs_explain),
    *OFFLOAD_RULES,
)  # fmt: skip
"""(id, summary, source, check, explain) of each rule, appended to planner.space.rules.RULES."""
