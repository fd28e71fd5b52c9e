"""The up-front check of a request against its Megatron-Core / Transformer Engine (issue 12 item
1): a setting the request fixes and the job's stack lacks is refused before any search, naming
the field, the minimum version and the fix, instead of ending as "no feasible layout". The
search itself keeps to what the stack has (``planner.space.version_rules``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from planner.fp8_recipes import recipe_gpu_problem
from planner.space.version_rules import grouped_kernel_missing
from planner.specs import ClusterSpec, ModelSpec, SpecError, TrainingJob
from planner.stack_versions import feature, require

__all__ = ["check_settings"]

_ON = "on"
_SETS = frozenset({"recompute_modules", "activation_offload_modules"})
"""Fields whose tuple is one value (a set of modules), not alternatives for the search."""
_FIX = "leave it unset (or off) for a stack that lacks it, or name a newer release"


def _key(model: ModelSpec, name: str, value: Any) -> str | None:
    """The availability table's value for ``name=value`` (None: not a versioned value)."""
    if value is None or value is False or value == 0 or value == () or value == []:
        return None
    if name == "cuda_graphs":
        return "partial_moe" if value == "partial" and model.is_moe else str(value)
    if name in ("moe_dispatcher", "moe_a2a_overlap") and not model.is_moe:
        return None
    if name == "recompute_modules":
        return "shared_experts" if "shared_experts" in value else _ON
    if name in ("activation_offload_layers", "activation_offload_modules",
                "optimizer_offload_fraction", "pipeline_layout"):  # fmt: skip
        return _ON
    return str(value).lower() if isinstance(value, bool) else str(value)


def check_settings(
    model: ModelSpec,
    cluster: ClusterSpec,
    job: TrainingJob,
    settings: Mapping[str, Any],
) -> None:
    """SpecError for the first setting the job's stack lacks. ``settings`` maps a request field
    to its fixed value, or to a tuple of the values the search may try (refused only when the
    stack has none of them)."""
    for name, given in settings.items():
        alternatives = isinstance(given, tuple) and name not in _SETS
        options = given if alternatives else (given,)
        keys = [_key(model, name, v) for v in options]
        if any(k is None or feature(name, k) is None for k in keys):
            continue  # an option every release has (off, the default, ...)
        errors: list[SpecError] = []
        for value, key in zip(options, keys, strict=True):
            try:
                require(job, name, key, shown=value, fix=_FIX)
            except SpecError as exc:
                errors.append(exc)
        if len(errors) == len(options):
            raise errors[0]
    if model.is_moe and job.moe_grouped_gemm_kernel == "grouped":
        reason = grouped_kernel_missing(job, cluster.gpu)
        if reason is not None:
            fix = " or precision='bf16'" if job.precision == "fp8" else ""
            raise SpecError(
                f"moe_grouped_gemm_kernel='grouped' has no kernel here: {reason}; use "
                f"moe_grouped_gemm_kernel='multi_stream'{fix}, or leave it unset (the planner "
                "then uses a grouped kernel only where one exists)",
                field="moe_grouped_gemm_kernel",
            )
    problem = recipe_gpu_problem(job.fp8_recipe, cluster.gpu, job)
    if job.precision == "fp8" and problem is not None:
        raise SpecError(problem, field="fp8_recipe")
