"""The one place that turns the planner's results into the typed reports of
:mod:`app.planning.reports`: evaluated layouts (:class:`LayoutReport`) and searches
(:class:`PlanResult`). The API, the CLI, batch rows, the web pages and the SDK all read what this
builds; each dumps it (``model_dump(mode="json")``) only where it writes JSON out.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.planning.reports import LaunchRead, LayoutReport, PlanResult, RankedPlan
from planner import ClusterSpec, Layout, ModelSpec, PerformanceProfile, TrainingJob
from planner.megatron.flags import launch_spec
from planner.search.evaluate import evaluate_layouts
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
    return [
        LayoutReport.model_validate(
            {**result, "model": model.name, "gpu": cluster.gpu.name, "num_gpus": cluster.num_gpus}
        )
        for result in results
    ]


def ranked_plan(found: Plan) -> RankedPlan:
    """One plan of a search, with its launch flags."""
    return RankedPlan.model_validate(
        {
            **found.to_dict(),
            "megatron": launch_report(found.model, found.cluster, found.job, found.layout),
        }
    )


def plan_report(result: SearchResult, *, model: ModelSpec, cluster: ClusterSpec) -> PlanResult:
    """A search's ranked plans (and Pareto front), what it searched and why layouts were
    rejected. Pareto plans carry their launch flags too."""
    return PlanResult.model_validate(
        {
            "plans": [ranked_plan(p) for p in result.plans],
            "search": result.search.to_dict(),
            "rejections": dict(result.rejections),
            "pareto": [ranked_plan(p) for p in result.pareto],
            "model": model.name,
            "gpu": cluster.gpu.name,
        }
    )
