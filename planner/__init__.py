"""Parallel Planner: the pure planning library (no web, no database).

Finds the Megatron-LM parallel layout that trains fastest within the memory budget::

    from planner import plan, SearchConstraints, default_profile
    result = plan(model, cluster, job, profile=default_profile(cluster.gpu))

The names below load on first use (PEP 562): ``import planner.specs`` or ``planner --help``
then pay for numpy, scipy and optuna only when a name that needs them is touched.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what mypy and editors see; at run time __getattr__ below loads these
    from planner.layouts import LayoutBatch
    from planner.megatron import LaunchSpec, launch_spec, megatron_args, parse_megatron_args
    from planner.memory import MemoryEstimate, MemoryOptions, estimate_memory
    from planner.model import (
        ParamCounts,
        PipelineLayout,
        PipelineSplit,
        flops_per_iteration,
        param_counts,
        parse_pipeline_layout,
        split_layers,
    )
    from planner.performance import (
        PerformanceEstimate,
        PerformanceProfile,
        default_profile,
        estimate_performance,
    )
    from planner.search import (
        InverseAnswer,
        Objective,
        Plan,
        PlanResult,
        SearchBudget,
        SearchStats,
        evaluate_layouts,
        fewest_gpus,
        largest_micro_batch,
        longest_sequence,
        plan,
    )
    from planner.space import (
        RULES,
        MemoryChoices,
        Rule,
        SearchConstraints,
        check_rules,
        enumerate_layouts,
        violations,
    )
    from planner.specs import ClusterSpec, GPUSpec, Layout, ModelSpec, SpecError, TrainingJob

# public name -> the module that exports it (the same modules the TYPE_CHECKING block names)
_SOURCES: dict[str, tuple[str, ...]] = {
    "planner.layouts": ("LayoutBatch",),
    "planner.megatron": ("LaunchSpec", "launch_spec", "megatron_args", "parse_megatron_args"),
    "planner.memory": ("MemoryEstimate", "MemoryOptions", "estimate_memory"),
    "planner.model": (
        "ParamCounts",
        "PipelineLayout",
        "PipelineSplit",
        "flops_per_iteration",
        "param_counts",
        "parse_pipeline_layout",
        "split_layers",
    ),
    "planner.performance": (
        "PerformanceEstimate",
        "PerformanceProfile",
        "default_profile",
        "estimate_performance",
    ),
    "planner.search": (
        "InverseAnswer",
        "Objective",
        "Plan",
        "PlanResult",
        "SearchBudget",
        "SearchStats",
        "evaluate_layouts",
        "fewest_gpus",
        "largest_micro_batch",
        "longest_sequence",
        "plan",
    ),
    "planner.space": (
        "RULES",
        "MemoryChoices",
        "Rule",
        "SearchConstraints",
        "check_rules",
        "enumerate_layouts",
        "violations",
    ),
    "planner.specs": ("ClusterSpec", "GPUSpec", "Layout", "ModelSpec", "SpecError", "TrainingJob"),
}
_MODULE_OF = {name: module for module, names in _SOURCES.items() for name in names}

__all__ = [
    "RULES",
    "ClusterSpec",
    "GPUSpec",
    "InverseAnswer",
    "LaunchSpec",
    "Layout",
    "LayoutBatch",
    "MemoryChoices",
    "MemoryEstimate",
    "MemoryOptions",
    "ModelSpec",
    "Objective",
    "ParamCounts",
    "PerformanceEstimate",
    "PerformanceProfile",
    "PipelineLayout",
    "PipelineSplit",
    "Plan",
    "PlanResult",
    "Rule",
    "SearchBudget",
    "SearchConstraints",
    "SearchStats",
    "SpecError",
    "TrainingJob",
    "check_rules",
    "default_profile",
    "enumerate_layouts",
    "estimate_memory",
    "estimate_performance",
    "evaluate_layouts",
    "fewest_gpus",
    "flops_per_iteration",
    "largest_micro_batch",
    "launch_spec",
    "longest_sequence",
    "megatron_args",
    "param_counts",
    "parse_megatron_args",
    "parse_pipeline_layout",
    "plan",
    "split_layers",
    "violations",
]


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first use, then keep it as a module global."""
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'planner' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
