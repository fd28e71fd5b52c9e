"""``POST /v1/scaling-curves``: the best plan at each GPU count of a range (synchronous, bounded).

The bound: at most ``MAX_POINTS`` GPU counts and ``MAX_TRIALS`` sampled trials per count, so one
request is a few seconds of CPU; bigger sweeps go through ``POST /v1/batches``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body
from pydantic import Field

from app.core.deps import BackendDep, SessionDep
from app.core.schemas import problem_responses
from app.planning.scaling import MAX_POINTS, scaling_curve
from app.planning.schemas import PLAN_EXAMPLE, PlanJobCreate
from app.planning.service import resolve_references

router = APIRouter(prefix="/v1/scaling-curves", tags=["scaling"])
MAX_TRIALS = 5000
SCALING_EXAMPLE: dict[str, Any] = {
    **{k: v for k, v in PLAN_EXAMPLE.items() if k not in ("num_gpus", "top_k")},
    "num_gpus_options": [64, 128, 256, 512],
    "global_batch_size": 512,
    "token_budget": 1e12,
    "usd_per_gpu_hour": 2.5,
}


class ScalingCurveCreate(PlanJobCreate):
    """A plan request over a range of GPU counts (``num_gpus_options``), plus the run's size."""

    num_gpus_options: list[Annotated[int, Field(ge=1, le=65_536)]] | None = Field(
        default=None, min_length=1, max_length=MAX_POINTS
    )
    max_trials: int = Field(default=500, ge=1, le=MAX_TRIALS)


@router.post(
    "",
    responses=problem_responses(404, 422),
    summary="Best plan, tokens/s, efficiency, time and cost at each GPU count",
    operation_id="create_scaling_curve",
)
def create(
    body: Annotated[ScalingCurveCreate, Body(examples=[SCALING_EXAMPLE])],
    session: SessionDep,
    backend: BackendDep,
) -> dict[str, Any]:
    request, resolved = resolve_references(session, body.model_dump(mode="json", exclude_none=True))
    return scaling_curve(request, plan=backend.plan, profile=backend.profile_for(resolved))
