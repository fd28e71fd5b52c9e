"""Parallel Planner: the pure planning library (no web, no database).

Finds the Megatron-LM parallel layout that trains fastest within the memory budget::

    from planner import plan, SearchConstraints, default_profile
    result = plan(model, cluster, job, profile=default_profile(cluster.gpu))
"""

from planner.layouts import LayoutBatch
from planner.megatron.flags import LaunchSpec, launch_spec, megatron_args, parse_megatron_args
from planner.memory.estimate import MemoryEstimate, MemoryOptions, estimate_memory
from planner.model.flops import flops_per_iteration
from planner.model.params import ParamCounts, param_counts
from planner.model.pipeline import PipelineSplit, split_layers
from planner.model.pipeline_layout import PipelineLayout, parse_pipeline_layout
from planner.performance.step_time import (
    PerformanceEstimate,
    PerformanceProfile,
    default_profile,
    estimate_performance,
)
from planner.search.evaluate import evaluate_layouts
from planner.search.inverse import (
    InverseAnswer,
    fewest_gpus,
    largest_micro_batch,
    longest_sequence,
)
from planner.search.objectives import Objective
from planner.search.planning import Plan, PlanResult, SearchBudget, SearchStats, plan
from planner.space.enumeration import SearchConstraints, enumerate_layouts
from planner.space.memory_axes import MemoryChoices
from planner.space.rules import RULES, Rule, check_rules, violations
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
