"""The one place that turns the planner's results into the typed reports of
:mod:`app.planning.reports`: evaluated layouts (:class:`LayoutReport`) and searches
(:class:`PlanResult`). The API, the CLI, batch rows, the web pages and the SDK all read what this
builds; each dumps it (``model_dump(mode="json")``) only where it writes JSON out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.planning.reports import (
    InversePlan,
    InverseResult,
    InverseSearchRead,
    LaunchRead,
    LayoutReport,
    PlanResult,
    RankedPlan,
)
from app.planning.run_read import run_read
from app.planning.uncertainty import add_uncertainty
from planner import ClusterSpec, Layout, ModelSpec, PerformanceProfile, TrainingJob
from planner.megatron.flags import launch_spec
from planner.search.evaluate import evaluate_layouts
from planner.search.inverse import InverseAnswer
from planner.search.planning import Plan
from planner.search.planning import PlanResult as SearchResult


def launch_report(
    model: ModelSpec, cluster: ClusterSpec, job: TrainingJob, layout: Layout
) -> LaunchRead:
    """The Megatron-LM launch of one layout: argv, torchrun command, environment, notes."""
    launch = launch_spec(model, cluster, job, layout)
    return LaunchRead(
        args=list(launch.args),
        command=launch.command,
        env=dict(launch.env),
        notes=list(launch.notes),
    )


def layout_reports(
    model: ModelSpec,
    cluster: ClusterSpec,
    job: TrainingJob,
    layouts: Sequence[Layout],
    profile: PerformanceProfile,
    *,
    threshold: float,
) -> list[LayoutReport]:
    """Evaluate layouts of one model, cluster and job (one vectorised pass) as typed reports."""
    results = evaluate_layouts(model, cluster, job, layouts, profile, threshold=threshold)
    for layout, result in zip(layouts, results, strict=True):  # each prediction's interval
        add_uncertainty(result["performance"], model, cluster, job, layout, profile)
    return [
        LayoutReport.model_validate(
            {**result, "model": model.name, "gpu": cluster.gpu.name, "num_gpus": cluster.num_gpus}
        )
        for result in results
    ]


def ranked_plan(found: Plan, profile: PerformanceProfile) -> RankedPlan:
    """One plan of a search, with its prediction interval and its launch flags."""
    doc = found.to_dict()
    add_uncertainty(doc.get("performance"), found.model, found.cluster, found.job,
                    found.layout, profile)  # fmt: skip
    launch = launch_report(found.model, found.cluster, found.job, found.layout)
    run = run_read(found.model, found.cluster, found.job)
    return RankedPlan.model_validate({**doc, "megatron": launch, "run": run})


def plan_report(
    result: SearchResult,
    *,
    model: ModelSpec,
    cluster: ClusterSpec,
    profile: PerformanceProfile,
    infeasible: dict[str, Any] | None = None,
) -> PlanResult:
    """A search's ranked plans (and Pareto front, each with launch flags), what it searched (the
    funnel, why #1 wins), why layouts were rejected and, when nothing fits, what would."""
    doc = result.to_dict()
    doc["plans"] = [ranked_plan(p, profile) for p in result.plans]
    doc["pareto"] = [ranked_plan(p, profile) for p in result.pareto]
    if infeasible is not None:
        doc["infeasible"] = infeasible
    return PlanResult.model_validate({**doc, "model": model.name, "gpu": cluster.gpu.name})


def inverse_report(
    answer: InverseAnswer,
    *,
    model: ModelSpec,
    cluster: ClusterSpec,
    profile: PerformanceProfile,
    nothing_fits: str | None,
    alternative: InverseAnswer | None = None,
) -> InverseResult:
    """An inverse question's answer: the value reached, the values tried, and the best plans
    there (each with its launch flags and the value under the question's name).
    ``nothing_fits`` is the reason given when no value fits."""
    value = answer.value
    other = None
    if alternative is not None and alternative.plans:  # app.planning.no_fit
        best = alternative.plans[0]
        other = InversePlan.model_validate(
            {**ranked_plan(best, profile).model_dump(exclude_unset=True),
             "num_gpus": best.cluster.num_gpus, "seq_length": best.job.seq_length}
        )  # fmt: skip
    return InverseResult(
        question=answer.question,
        value=value,
        probes=[(v, n) for v, n in answer.probes],
        plans=[
            InversePlan.model_validate(
                {**ranked_plan(p, profile).model_dump(exclude_unset=True), answer.question: value}
            )
            for p in answer.plans
        ],
        search=InverseSearchRead(
            inverse=answer.question,
            probes=len(answer.probes),
            feasible=dict(answer.probes).get(answer.value, 0) if answer.value else 0,
        ),
        rejections={nothing_fits: 1} if nothing_fits and not answer.plans else {},
        model=model.name,
        gpu=cluster.gpu.name,
        alternative=other,
    )
