"""``POST /v1/scaling-curves``: the best plan at each GPU count of a range (synchronous, bounded).

The bound: at most ``MAX_SCALING_POINTS`` GPU counts and ``MAX_SCALING_TRIALS`` trials per
count, so one request is a few seconds of CPU; bigger sweeps go through ``POST /v1/batches``.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body

from app.core.deps import SessionDep
from app.core.schemas import problem_responses
from app.planning.deps import BackendDep
from app.planning.reports import ScalingCurve
from app.planning.scaling import scaling_curve
from app.planning.schemas import SCALING_EXAMPLE, ScalingCurveCreate
from app.planning.service import resolve_references

router = APIRouter(prefix="/v1/scaling-curves", tags=["scaling"])


@router.post(
    "",
    response_model=ScalingCurve,
    response_model_exclude_unset=True,  # the planner's document as it is, no added nulls
    responses=problem_responses(404, 422),
    summary="Best plan, tokens/s, efficiency, time and cost at each GPU count",
    operation_id="create_scaling_curve",
)
def create(
    body: Annotated[ScalingCurveCreate, Body(examples=[SCALING_EXAMPLE])],
    session: SessionDep,
    backend: BackendDep,
) -> ScalingCurve:
    request, resolved = resolve_references(session, body.model_dump(mode="json", exclude_none=True))
    return scaling_curve(request, plan=backend.plan, profile=backend.profile_for(resolved))
