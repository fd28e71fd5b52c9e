"""The ``--offload-modules`` sets of fine-grained activation offload: validation, the bit mask
the layout columns store, and the set a search tries (megatron-facts §1.7 and rule 51;
priced by :mod:`planner.memory.offload`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from planner.layout_types import OFFLOAD_MODULE_CHOICES, OffloadModule
from planner.specs import SpecError

if TYPE_CHECKING:
    from planner.specs import ModelSpec

__all__ = [
    "ATTENTION_MODULES",
    "MOE_INTERNAL_MODULES",
    "OFFLOAD_BITS",
    "check_offload_modules",
    "offload_mask",
    "offload_modules_of",
    "recommended_offload_modules",
]

OFFLOAD_BITS: dict[str, int] = {m: 1 << i for i, m in enumerate(OFFLOAD_MODULE_CHOICES)}
"""Bit of each ``--offload-modules`` value in ``SettingsColumns.activation_offload_modules``."""
ATTENTION_MODULES: tuple[OffloadModule, ...] = ("attn_norm", "qkv_linear", "core_attn", "attn_proj")
MOE_INTERNAL_MODULES: tuple[OffloadModule, ...] = ("expert_fc1", "moe_act")
"""Offloaded inside the MoE layer: not while 'moe' is recomputed (megatron-facts rule 51)."""


def offload_mask(modules: Sequence[str] | None) -> int:
    total = 0
    for m in modules or ():
        total |= OFFLOAD_BITS[m]
    return total


def offload_modules_of(mask: int) -> tuple[OffloadModule, ...] | None:
    found = tuple(m for m in OFFLOAD_MODULE_CHOICES if mask & OFFLOAD_BITS[m])
    return found or None


def check_offload_modules(modules: object) -> tuple[OffloadModule, ...] | None:
    """The validated set in Megatron's order (one spelling per set); SpecError naming
    ``activation_offload_modules`` and the fix otherwise."""
    field = "activation_offload_modules"
    if modules is None:
        return None
    if isinstance(modules, str) or not isinstance(modules, tuple | list):
        raise SpecError(
            f"activation_offload_modules={modules!r} must be a list such as "
            "['attn_norm', 'mlp_norm']",
            field=field,
        )
    unknown = [m for m in modules if m not in OFFLOAD_MODULE_CHOICES]
    if unknown:
        raise SpecError(
            f"activation_offload_modules: {', '.join(map(repr, unknown))} not supported; use "
            f"{', '.join(OFFLOAD_MODULE_CHOICES)}",
            field=field,
        )
    if not modules:
        raise SpecError(
            "activation_offload_modules=[] offloads nothing; leave it unset (null) instead",
            field=field,
        )
    if "attn_proj" in modules and "core_attn" not in modules:
        # the projection's input is core attention's output, offloaded with it (rule 51)
        raise SpecError(
            "activation_offload_modules: 'attn_proj' needs 'core_attn' as well "
            "(megatron-facts rule 51); add 'core_attn' or drop 'attn_proj'",
            field=field,
        )
    return tuple(m for m in OFFLOAD_MODULE_CHOICES if m in modules)


def recommended_offload_modules(model: ModelSpec) -> tuple[OffloadModule, ...]:
    """The set a search tries when the user allows offload without naming modules: every
    module the model has (the largest saving; each costs only exposed transfer time)."""
    dense: tuple[OffloadModule, ...] = (*ATTENTION_MODULES, "mlp_norm")
    return (*dense, *MOE_INTERNAL_MODULES) if model.is_moe else dense
