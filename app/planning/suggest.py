"""What to measure next (issue 12 item 10): the one orchestration behind
``planner calibrate --suggest K``, ``POST /v1/calibration-suggestions`` and the web calibration
page. The plan is either one layout (an evaluation request) or a search's best plan (a plan
request); the runs come from :func:`planner.calibration.suggest.suggest_runs`."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field, model_validator

from app.calibration.fit import parse_measurement_rows
from app.core.schemas import RequestModel
from app.planning.compute import profile_for
from app.planning.convert import parse_request, resolve_model, to_evaluation
from app.planning.schemas import MAX_GPUS, EvaluationRequest, PlanJobCreate
from models_db.intervals import cluster_level_noise
from planner import PerformanceProfile, SpecError
from planner.calibration.suggest import suggest_runs

MAX_SUGGESTIONS = 20
OPTIONS = ("k", "max_nodes")
"""The request's own fields, beside the layout or the search."""


def wrap_bare_layout(data: Any) -> Any:
    """A bare layout object (the body of ``POST /v1/evaluations``, perhaps with ``k`` and
    ``max_nodes``) as ``{"evaluation": {...}, "k": ..., "max_nodes": ...}``, the form
    docs/file-formats.md promises to the CLI's ``--request`` file and the API alike; anything
    else unchanged."""
    if not isinstance(data, dict) or "evaluation" in data or "plan" in data:
        return data
    layout = {key: value for key, value in data.items() if key not in OPTIONS}
    if not layout:  # only options: "give exactly one of evaluation or plan" says what is missing
        return data
    return {**{key: data[key] for key in OPTIONS if key in data}, "evaluation": layout}


class SuggestionRequest(RequestModel):
    """The plan whose prediction the runs should pin down, and how many runs to propose.

    A bare layout (the body of ``POST /v1/evaluations``) beside ``k`` and ``max_nodes`` is read
    as ``{"evaluation": {...}}``."""

    model_config = ConfigDict(extra="forbid")

    evaluation: EvaluationRequest | None = Field(
        default=None, description="one layout (the body of POST /v1/evaluations)"
    )
    plan: PlanJobCreate | None = Field(
        default=None, description="a search (the body of POST /v1/plan-jobs): its best plan"
    )
    k: int = Field(default=3, ge=1, le=MAX_SUGGESTIONS, description="runs to propose")
    max_nodes: int | None = Field(
        default=None,
        ge=1,
        le=MAX_GPUS,  # a node has at least one GPU
        description="the most nodes one run may use (your budget per run); default: the "
        "cluster's. Where the plan's smallest proxy needs more, the answer's `note` says how "
        "many to allow",
    )

    @model_validator(mode="before")
    @classmethod
    def _bare_layout(cls, data: Any) -> Any:
        return wrap_bare_layout(data)

    @model_validator(mode="after")
    def _one_plan(self) -> SuggestionRequest:
        if (self.evaluation is None) == (self.plan is None):
            raise ValueError("give exactly one of evaluation (a layout) or plan (a search)")
        return self


def suggest(
    request: SuggestionRequest | dict[str, Any],
    *,
    profile: PerformanceProfile | None = None,
    measured_rows: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """Propose ``k`` short runs; the rows already measured count as known information."""
    req = parse_request(SuggestionRequest, request)
    if req.evaluation is not None:
        inputs = to_evaluation(req.evaluation, resolve_model(req.evaluation.model))
        model, cluster, job, layout = inputs.model, inputs.cluster, inputs.job, inputs.layout
        threshold = inputs.threshold
    else:
        assert req.plan is not None  # the validator guarantees one of the two
        model, cluster, job, layout, threshold = _best_plan(req.plan, profile)
    used = profile_for(cluster.gpu, profile)
    measured = []
    if measured_rows:
        parsed, _ = parse_measurement_rows(measured_rows)
        measured = [m for m in parsed if m.cluster.gpu.name == cluster.gpu.name]
    result = suggest_runs(
        model,
        cluster,
        job,
        layout,
        used,
        k=req.k,
        measured=measured,
        threshold=threshold,
        max_nodes=req.max_nodes,
        # the prior sd of the cluster's offset is the level's (the band's tau)
        noise=cluster_level_noise(),
    )
    return {
        "plan": {
            "model": model.name,
            "gpu": cluster.gpu.name,
            "num_gpus": cluster.num_gpus,
            "layout": layout.to_dict(),
        },
        "profile": used.provenance.get("kind", "unknown"),
        "measured_rows": len(measured),
        **result.to_dict(),
    }


def _best_plan(req: PlanJobCreate, profile: PerformanceProfile | None) -> tuple[Any, ...]:
    from app.planning.plan_request import search, to_plan

    p = to_plan(req)
    result = search(p, profile_for(p.clusters[0].gpu, profile), top_k=1)
    if not result.plans:
        raise SpecError("the search found no feasible plan to measure around", field="plan")
    best = result.plans[0]
    return best.model, best.cluster, best.job, best.layout, p.threshold


def suggest_stored(session: Any, backend: Any, body: SuggestionRequest) -> dict[str, Any]:
    """:func:`suggest` for a request that may name the service's clusters and models: the
    references resolved in ``session``, the cluster's newest calibration as the profile and its
    stored measurements as rows already known. The API route and the web page both call it.
    A SpecError's field is prefixed with ``evaluation.`` or ``plan.``."""
    from app.calibration.repository import MeasurementRepository
    from app.planning.service import resolve_references

    key = "evaluation" if body.evaluation is not None else "plan"
    inner = getattr(body, key)
    request, resolved = resolve_references(session, inner.model_dump(exclude_none=True))
    rows: list[dict[str, Any]] = []
    slug = (resolved.get("cluster") or {}).get("slug")
    if slug:
        rows = [m.data for m in MeasurementRepository(session).list(slug)]
    try:
        return suggest(
            {key: request, "k": body.k, "max_nodes": body.max_nodes},
            profile=backend.profile_for(resolved),
            measured_rows=rows,
        )
    except SpecError as exc:
        raise SpecError(exc.message, field=f"{key}.{exc.field}" if exc.field else key) from exc
