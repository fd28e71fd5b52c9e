"""``POST /v1/evaluations``: one layout, evaluated synchronously in the threadpool (one hand-off
per request)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Request
from fastapi.responses import JSONResponse, StreamingResponse
from sqlalchemy.orm import Session, sessionmaker
from starlette.concurrency import run_in_threadpool

from app.core.deps import SessionDep
from app.core.engine import unit_of_work
from app.core.schemas import problem_responses
from app.planning.backend import PlanningBackend
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
async def evaluate(
    body: Annotated[EvaluationRequest, Body(examples=[EVALUATION_EXAMPLE])],
    request: Request,
    backend: BackendDep,
) -> JSONResponse:
    # one hand-off to a worker thread for the unit of work, the catalog look-ups and the
    # evaluation together (CPU-bound work never runs on the event loop); as a plain `def` route
    # with a session dependency it took three hand-offs, a third of its time on a busy server
    factory = request.app.state.session_factory
    result = await run_in_threadpool(_evaluate, factory, backend, body)
    # JSON-safe already (the typed report's dump): skip FastAPI's jsonable_encoder walk
    return JSONResponse(result)


def _evaluate(
    factory: sessionmaker[Session], backend: PlanningBackend, body: EvaluationRequest
) -> dict[str, Any]:
    """The request's unit of work (catalog references resolved), then the evaluation."""
    with unit_of_work(factory) as session:
        request, resolved = resolve_references(session, body.model_dump(exclude_none=True))
    return backend.evaluate(request, profile=backend.profile_for(resolved))


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
    columns = layout_columns(body.layouts, body.num_gpus, body.cp_comm_type)
    result = backend.evaluate_bulk(request, columns, profile=backend.profile_for(resolved))
    return StreamingResponse(json_lines(result), media_type=JSONL)
