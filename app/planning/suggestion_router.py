"""``POST /v1/calibration-suggestions``: the short runs that would most reduce the uncertainty
of one plan's prediction, each with its Megatron-LM launch command (issue 12 item 10)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from app.core.deps import SessionDep
from app.core.errors import InvalidInputError
from app.core.schemas import problem_responses
from app.planning.deps import BackendDep
from app.planning.suggest import SuggestionRequest, suggest_stored
from app.planning.suggestion_schemas import SuggestionAnswer
from planner import SpecError

router = APIRouter(prefix="/v1", tags=["calibration"])


@router.post(
    "/calibration-suggestions",
    response_model=SuggestionAnswer,  # documents the answer; the JSON is returned as it is
    responses=problem_responses(404, 422),
    summary="Which short runs to measure next to pin down one plan's prediction",
    operation_id="suggest_calibration_runs",
)
def suggest_runs(body: SuggestionRequest, session: SessionDep, backend: BackendDep) -> JSONResponse:
    # a plain `def` route: FastAPI runs it in the threadpool, never on the event loop
    try:
        result = suggest_stored(session, backend, body)
    except SpecError as exc:
        raise InvalidInputError.for_field(exc.field or "body", exc.message) from exc
    return JSONResponse(result)
