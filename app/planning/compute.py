"""The planning entry points shared by the CLI, the API, the web UI and the job workers.

Each takes the one typed request of its question (``EvaluationRequest``, ``PlanJobCreate``) or
its JSON, converts it once into planner domain objects (:mod:`app.planning.convert`), runs the
planner and returns the typed reports of :mod:`app.planning.reports` (built by
:mod:`app.planning.report_build`). Bad input raises :class:`planner.specs.SpecError` whose
``field`` names the request field to fix.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from app.planning.convert import Label, parse_request, resolve_model, to_evaluation
from app.planning.report_build import layout_reports
from app.planning.reports import EvaluationFailure, LayoutReport, PlanAnswer
from app.planning.schemas import EvaluationRequest, PlanJobCreate
from models_db.profiles import load_profile
from planner import (
    ClusterSpec,
    GPUSpec,
    ModelSpec,
    PerformanceProfile,
    SpecError,
    TrainingJob,
)

Progress = Callable[[int, int], None]


def profile_for(gpu: GPUSpec, profile: PerformanceProfile | None) -> PerformanceProfile:
    return profile if profile is not None else _shipped_profile(gpu)


@functools.lru_cache(maxsize=64)
def _shipped_profile(gpu: GPUSpec) -> PerformanceProfile:
    """models_db's profile of a GPU, parsed once (a file read and parse per request before)."""
    return load_profile(gpu)


# --- entry points ----------------------------------------------------------------------------
def evaluate_request(
    request: EvaluationRequest | dict[str, Any], *, profile: PerformanceProfile | None = None
) -> LayoutReport:
    """Evaluate one layout request (``planner evaluate --json`` prints its JSON)."""
    report = evaluate_requests([request], profile=profile)[0]
    assert isinstance(report, LayoutReport)  # without errors_inline a bad request raises
    return report


def evaluate_requests(
    requests: list[EvaluationRequest | dict[str, Any]],
    *,
    profile: PerformanceProfile | None = None,
    errors_inline: bool = False,
    label: Label | None = None,
) -> list[LayoutReport | EvaluationFailure]:
    """Evaluate many layout requests; those sharing model, cluster and job run as one batch.

    With ``errors_inline`` a bad request yields an :class:`EvaluationFailure` in its place
    instead of raising, so one bad line never sinks the others.
    """
    groups: dict[tuple[Any, ...], list[int]] = {}
    resolved: dict[tuple[Any, ...], tuple[ModelSpec, ClusterSpec, TrainingJob, float]] = {}
    layouts: list[Any] = [None] * len(requests)
    out: list[LayoutReport | EvaluationFailure | None] = [None] * len(requests)
    model_cache: dict[str, ModelSpec] = {}
    for i, raw in enumerate(requests):
        try:
            req = parse_request(EvaluationRequest, raw, label=label)
            key_model = req.model if isinstance(req.model, str) else repr(req.model)
            if key_model not in model_cache:
                model_cache[key_model] = resolve_model(req.model)
            inputs = to_evaluation(req, model_cache[key_model])
        except SpecError as exc:
            if not errors_inline:
                raise
            out[i] = EvaluationFailure.of(exc)
            continue
        layouts[i] = inputs.layout
        key = (key_model, inputs.cluster, inputs.job, inputs.threshold)
        groups.setdefault(key, []).append(i)
        resolved[key] = (inputs.model, inputs.cluster, inputs.job, inputs.threshold)
    for key, indexes in groups.items():
        model, cluster, job, threshold = resolved[key]
        batch_layouts = [layouts[i] for i in indexes]
        used = profile_for(cluster.gpu, profile)
        results = layout_reports(
            model,
            cluster,
            job,
            [lay for lay in batch_layouts if lay is not None],
            used,
            threshold=threshold,
        )
        for i, result in zip(indexes, results, strict=True):
            out[i] = result
    return [r if r is not None else EvaluationFailure.of(SpecError("not evaluated")) for r in out]


def plan_request(
    request: PlanJobCreate | dict[str, Any],
    *,
    profile: PerformanceProfile | None = None,
    progress: Progress | None = None,
) -> PlanAnswer:
    """Search for the best layouts (``planner plan --json`` prints its JSON)."""
    from app.planning.plan_request import run_plan  # the search stack loads optuna: lazily

    return run_plan(parse_request(PlanJobCreate, request), profile=profile, progress=progress)


def validate_plan_request(request: PlanJobCreate | dict[str, Any]) -> tuple[ModelSpec, GPUSpec]:
    """Everything ``plan_request`` would reject, checked without searching."""
    from app.planning.plan_request import to_plan

    prepared = to_plan(parse_request(PlanJobCreate, request))
    return prepared.model, prepared.clusters[0].gpu
