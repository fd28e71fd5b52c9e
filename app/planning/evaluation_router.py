"""``POST /v1/evaluations``: one layout, evaluated synchronously in the threadpool."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body
from fastapi.responses import JSONResponse, StreamingResponse

from app.core.deps import SessionDep
from app.core.schemas import problem_responses
from app.planning.bulk import JSONL, BulkEvaluationRequest, json_lines, layout_columns
from app.planning.deps import BackendDep
from app.planning.reports import LayoutReport
from app.planning.schemas import EVALUATION_EXAMPLE, EvaluationRequest
from app.planning.service import resolve_references

router = APIRouter(prefix="/v1", tags=["evaluations"])


@router.post(
    "/evaluations",
    response_model=LayoutReport,  # documents the report; the route returns the JSON as it is
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


@router.post(
    "/evaluations/bulk",
    responses={
        200: {
            "description": "One JSON object per layout and line, in request order",
            "content": {JSONL: {"schema": {"type": "string"}}},
        },
        **problem_responses(422),
    },
    response_class=StreamingResponse,
    summary="Evaluate many layouts of one job in one vectorised batch (JSON lines back)",
    operation_id="evaluate_layouts_bulk",
)
def evaluate_many(
    body: Annotated[BulkEvaluationRequest, Body()],
    session: SessionDep,
    backend: BackendDep,
) -> StreamingResponse:
    # a plain `def` route: the batch runs in the threadpool, never on the event loop
    common = body.model_dump(exclude_none=True, exclude={"layouts"})
    request, resolved = resolve_references(session, common)
    columns = layout_columns(body.layouts, body.num_gpus)
    result = backend.evaluate_bulk(request, columns, profile=backend.profile_for(resolved))
    return StreamingResponse(json_lines(result), media_type=JSONL)
