"""``POST /v1/evaluations``: one layout, evaluated synchronously in the threadpool."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body
from fastapi.responses import JSONResponse

from app.api.deps import BackendDep, SessionDep
from app.jobs.service import resolve_references
from app.schemas import EvaluationRequest
from app.schemas.common import problem_responses
from app.schemas.jobs import EVALUATION_EXAMPLE

router = APIRouter(prefix="/v1", tags=["evaluations"])


@router.post(
    "/evaluations",
    response_model=dict[str, Any],
    responses=problem_responses(422),
    summary="Evaluate one layout: Megatron's rules, memory, throughput and launch flags",
    operation_id="evaluate_layout",
)
def evaluate(
    body: Annotated[EvaluationRequest, Body(examples=[EVALUATION_EXAMPLE])],
    session: SessionDep,
    backend: BackendDep,
) -> JSONResponse:
    # a plain `def` route: FastAPI runs it in the threadpool, never on the event loop
    request, resolved = resolve_references(session, body.model_dump(exclude_none=True))
    result = backend.evaluate(request, profile=backend.profile_for(resolved))
    # JSON-safe already (the planner writes numbers, strings and lists): skip FastAPI's
    # jsonable_encoder walk, a tenth of the request's time
    return JSONResponse(result)
