"""Finding the best layout: evaluation, screening, sampling (TPE), objectives, ranking."""

from planner.search.evaluate import evaluate_layouts
from planner.search.inverse import (
    InverseAnswer,
    fewest_gpus,
    largest_micro_batch,
    longest_sequence,
)
from planner.search.objectives import Objective
from planner.search.planning import Plan, PlanResult, SearchBudget, SearchStats, plan

__all__ = [
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
]
