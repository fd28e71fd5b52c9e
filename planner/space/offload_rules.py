"""Rules of fine-grained activation offload (megatron-facts §2.7 rule 51; mechanisms-facts §6.5).

``attn_proj`` without ``core_attn`` is refused by :class:`planner.specs.Layout` itself; the
Transformer Engine requirement always holds (the planner's flags never select the local
implementation), and ``NVTE_CPU_OFFLOAD_V1=1`` is exported by the launch script.
"""

from __future__ import annotations

from typing import Any

from planner.layout_settings import MODULE_BITS, effective_modules
from planner.layouts import BoolArray
from planner.offload_modules import MOE_INTERNAL_MODULES, offload_mask, offload_modules_of
from planner.space.rule_context import RuleContext

__all__ = ["OFFLOAD_RULES"]

Ctx = RuleContext
_MOE_INTERNAL = offload_mask(MOE_INTERNAL_MODULES)


def _legacy_check(ctx: Ctx) -> BoolArray:
    mem = ctx.batch.mem
    bad: BoolArray = (mem.activation_offload_modules > 0) & (mem.activation_offload_layers > 0)
    return bad


def _legacy_explain(ctx: Ctx, i: int) -> str:
    lay = ctx.batch.layout(i)
    return (
        f"activation_offload_modules={list(lay.activation_offload_modules or ())} cannot be "
        f"combined with activation_offload_layers={lay.activation_offload_layers} (the legacy "
        "--cpu-offloading-num-layers; megatron-facts rule 51); set activation_offload_layers=0"
    )


def _moe_check(ctx: Ctx) -> BoolArray:
    b = ctx.batch
    internal = (b.mem.activation_offload_modules & _MOE_INTERNAL) != 0
    if not ctx.model.is_moe:
        result: BoolArray = internal
        return result
    moe_recomputed = (effective_modules(b) & MODULE_BITS["moe"]) != 0
    bad: BoolArray = internal & moe_recomputed
    return bad


def _moe_explain(ctx: Ctx, i: int) -> str:
    mask = int(ctx.batch.mem.activation_offload_modules[i]) & _MOE_INTERNAL
    names = ", ".join(offload_modules_of(mask) or ())
    if not ctx.model.is_moe:
        return (
            f"activation_offload_modules: {names} offload MoE expert inputs and "
            f"{ctx.model.name} has no MoE layers; drop them"
        )
    return (
        f"activation_offload_modules: {names} cannot be offloaded while the 'moe' module is "
        "recomputed (megatron-facts rule 51); drop them or 'moe' from recompute_modules"
    )


OFFLOAD_RULES: tuple[tuple[str, str, str, Any, Any], ...] = (
    ("fine_offload_not_with_legacy",
     "fine-grained activation offload excludes --cpu-offloading-num-layers",
     "megatron-facts §2.7 rule 51", _legacy_check, _legacy_explain),
    ("fine_offload_moe_modules",
     "expert_fc1/moe_act offload needs MoE layers and no 'moe' recompute",
     "megatron-facts §2.7 rule 51", _moe_check, _moe_explain),
)  # fmt: skip
"""(id, summary, source, check, explain), appended to planner.space.memory_rules.MEMORY_RULES."""
