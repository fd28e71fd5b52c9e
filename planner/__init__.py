"""Parallel Planner: the pure planning library (no web, no database).

Finds the Megatron-LM parallel layout that trains fastest within the memory budget.
"""

from planner.layouts import LayoutBatch
from planner.specs import ClusterSpec, GPUSpec, Layout, ModelSpec, SpecError, TrainingJob

__all__ = [
    "ClusterSpec",
    "GPUSpec",
    "Layout",
    "LayoutBatch",
    "ModelSpec",
    "SpecError",
    "TrainingJob",
]
