"""The answer of ``POST /v1/calibration-suggestions`` as the OpenAPI document describes it.

The route returns :func:`app.planning.suggest.suggest`'s JSON as it is; this model documents
its fields, above all what the uncertainty figures count: the profile's coefficients and the
cluster's level together (:mod:`planner.calibration.suggest_level`), not the coefficients
alone as before the level was counted.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class PlanUncertaintyParts(BaseModel):
    """The plan's prediction uncertainty (one sd of log tokens/s, in %) and its two parts."""

    total_pct: float = Field(
        description="both parts together (independent: their variances add), the figure "
        "plan_uncertainty_pct_* repeats"
    )
    coefficients_pct: float = Field(
        description="from the profile's coefficients: what the runs teach the throughput model"
    )
    cluster_level_pct: float = Field(
        description="from the cluster's own offset from the prediction: tau of the predictive "
        "band on a cluster never calibrated, the fitted level's error after "
        "cluster_level_rows of its runs"
    )
    cluster_level_rows: int = Field(description="runs of this cluster its level is fitted on")


class SuggestionAnswer(BaseModel):
    """The short runs to measure next, best first, and how much they would sharpen the plan."""

    plan: dict[str, Any] = Field(description="the plan measured around: model, gpu, layout")
    profile: str = Field(description="the kind of profile used: shipped priors or fitted")
    measured_rows: int = Field(description="rows of this cluster already measured (known)")
    runs: list[dict[str, Any]] = Field(
        description="each run with its launch command; variance_reduction is its share of the "
        "plan's variance before the runs, the coefficients' and the cluster level's"
    )
    note: str | None = Field(description="why no run was proposed, or what the runs stand for")
    plan_uncertainty_pct_before: float = Field(
        description="the plan's uncertainty now, in %: the coefficients' and the cluster "
        "level's together (uncertainty_before.total_pct; before the level was counted it was "
        "the coefficients' alone, now uncertainty_before.coefficients_pct)"
    )
    plan_uncertainty_pct_after: float = Field(
        description="the same once the runs are measured (uncertainty_after.total_pct)"
    )
    uncertainty_before: PlanUncertaintyParts
    uncertainty_after: PlanUncertaintyParts
    candidates_considered: int = Field(description="candidate runs the choice was made among")
    sensitive_to: list[str] = Field(description="coefficients the plan's prediction leans on most")
