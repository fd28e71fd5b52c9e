"""Finding the best layout: evaluation, screening, sampling (TPE), objectives, ranking."""

from planner.search.evaluate import evaluate_layouts
from planner.search.explain import WinnerExplanation, explain_winner
from planner.search.funnel import Funnel
from planner.search.infeasible import InfeasibleAnswer, explain_infeasible
from planner.search.inverse import (
    InverseAnswer,
    fewest_gpus,
    largest_micro_batch,
    longest_sequence,
)
from planner.search.objectives import Objective
from planner.search.planning import Plan, PlanResult, SearchBudget, SearchStats, plan

__all__ = [
    "Funnel",
    "InfeasibleAnswer",
    "InverseAnswer",
    "Objective",
    "Plan",
    "PlanResult",
    "SearchBudget",
    "SearchStats",
    "WinnerExplanation",
    "evaluate_layouts",
    "explain_infeasible",
    "explain_winner",
    "fewest_gpus",
    "largest_micro_batch",
    "longest_sequence",
    "plan",
]
