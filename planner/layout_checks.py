"""Validation of the memory-setting fields of :class:`planner.specs.Layout` (issue 13).

Called from ``Layout.__post_init__``; kept here so that the domain-type module stays short. Each
error names the field and says how to fix it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.layout_types import (
    CUDA_GRAPHS_CHOICES,
    GRAD_REDUCE_DTYPE_CHOICES,
    OPTIMIZER_STATE_DTYPE_CHOICES,
    RECOMPUTE_MODULE_CHOICES,
)
from planner.offload_modules import check_offload_modules
from planner.specs import SpecError, _positive

if TYPE_CHECKING:
    from planner.specs import Layout

__all__ = ["check_memory_settings"]


def check_memory_settings(lay: Layout) -> None:
    """Validate the memory-setting fields of a layout (issue 13); normalises list inputs."""
    for name, value, choices in (
        ("grad_reduce_dtype", lay.grad_reduce_dtype, GRAD_REDUCE_DTYPE_CHOICES),
        ("optimizer_state_dtype", lay.optimizer_state_dtype, OPTIMIZER_STATE_DTYPE_CHOICES),
        ("cuda_graphs", lay.cuda_graphs, CUDA_GRAPHS_CHOICES),
    ):
        if value not in choices:
            raise SpecError(f"{name}={value!r} is not one of {', '.join(choices)}", field=name)
    if lay.fp8_param_gather is not None and not isinstance(lay.fp8_param_gather, bool):
        raise SpecError(
            f"fp8_param_gather={lay.fp8_param_gather!r} must be true, false or null (auto)",
            field="fp8_param_gather",
        )
    modules = lay.recompute_modules
    if modules is not None:
        if isinstance(modules, str) or not isinstance(modules, list | tuple):
            raise SpecError(
                f"recompute_modules={modules!r} must be a list such as ['core_attn', 'mlp']",
                field="recompute_modules",
            )
        unknown = [m for m in modules if m not in RECOMPUTE_MODULE_CHOICES]
        if unknown:
            raise SpecError(
                f"recompute_modules: {', '.join(map(repr, unknown))} not supported; use "
                f"{', '.join(RECOMPUTE_MODULE_CHOICES)}",
                field="recompute_modules",
            )
        if not modules:
            raise SpecError(
                "recompute_modules=[] recomputes nothing; use recompute='none' instead",
                field="recompute_modules",
            )
        if lay.recompute != "selective":
            raise SpecError(
                f"recompute_modules needs recompute='selective' (got {lay.recompute!r}; "
                "megatron-facts rule 47)",
                field="recompute_modules",
            )
        ordered = tuple(m for m in RECOMPUTE_MODULE_CHOICES if m in modules)
        # one spelling per set; Megatron's default ('core_attn',) is spelled None
        object.__setattr__(lay, "recompute_modules", None if ordered == ("core_attn",) else ordered)
    if lay.recompute_num_layers is not None:
        _positive(lay, "recompute_num_layers")
        if lay.recompute != "full":
            raise SpecError(
                f"recompute_num_layers needs recompute='full' (got {lay.recompute!r}; "
                "megatron-facts rules 47-48)",
                field="recompute_num_layers",
            )
    offload = lay.activation_offload_layers
    if isinstance(offload, bool) or not isinstance(offload, int) or offload < 0:
        raise SpecError(
            f"activation_offload_layers={offload!r} must be an integer >= 0",
            field="activation_offload_layers",
        )
    fraction = lay.optimizer_offload_fraction
    if isinstance(fraction, bool) or not isinstance(fraction, int | float):
        raise SpecError(
            f"optimizer_offload_fraction={fraction!r} must be a number in [0, 1]",
            field="optimizer_offload_fraction",
        )
    if not 0.0 <= fraction <= 1.0:
        raise SpecError(
            f"optimizer_offload_fraction={fraction} must be in [0, 1] (0 keeps the optimizer "
            "on the GPU, 1 moves all of it to the host)",
            field="optimizer_offload_fraction",
        )
    object.__setattr__(lay, "optimizer_offload_fraction", float(fraction))
    layout = lay.pipeline_layout
    if layout is not None and (not isinstance(layout, str) or not layout.strip()):
        raise SpecError(
            f"pipeline_layout={layout!r} must be a non-empty string such as 'Et|(tt|)*30mL' "
            "(its grammar and stage count are checked against the model by the rules)",
            field="pipeline_layout",
        )
    offloaded = check_offload_modules(lay.activation_offload_modules)
    object.__setattr__(lay, "activation_offload_modules", offloaded)
