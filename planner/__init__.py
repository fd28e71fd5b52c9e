"""Parallel Planner: the pure planning library (no web, no database).

Finds the Megatron-LM parallel layout that trains fastest within the memory budget::

    from planner import plan, SearchConstraints, default_profile
    result = plan(model, cluster, job, profile=default_profile(cluster.gpu))
"""

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
