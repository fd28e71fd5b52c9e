"""``POST /v1/evaluations``: one layout, evaluated synchronously in the threadpool."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body

from app.core.deps import SessionDep
from app.core.schemas import problem_responses
from app.planning.deps import BackendDep
from app.planning.reports import LayoutReport
from app.planning.schemas import EVALUATION_EXAMPLE, EvaluationRequest
from app.planning.service import resolve_references

router = APIRouter(prefix="/v1", tags=["evaluations"])


@router.post(
    "/evaluations",
    response_model=LayoutReport,
    response_model_exclude_unset=True,  # the planner's document as it is, no added nulls
    responses=problem_responses(422),
    summary="Evaluate one layout: Megatron's rules, memory, throughput and launch flags",
    operation_id="evaluate_layout",
)
def evaluate(
    body: Annotated[EvaluationRequest, Body(examples=[EVALUATION_EXAMPLE])],
    session: SessionDep,
    backend: BackendDep,
) -> dict[str, Any]:
    # a plain `def` route: FastAPI runs it in the threadpool, never on the event loop
    request, resolved = resolve_references(session, body.model_dump(exclude_none=True))
    return backend.evaluate(request, profile=backend.profile_for(resolved))
