"""``POST /v1/calibration-suggestions``: the short runs that would most reduce the uncertainty
of one plan's prediction, each with its Megatron-LM launch command (issue 12 item 10)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from app.calibration.repository import MeasurementRepository
from app.core.deps import SessionDep
from app.core.errors import InvalidInputError
from app.core.schemas import problem_responses
from app.planning.deps import BackendDep
from app.planning.service import resolve_references
from app.planning.suggest import SuggestionRequest, suggest
from planner import SpecError

router = APIRouter(prefix="/v1", tags=["calibration"])


@router.post(
    "/calibration-suggestions",
    responses=problem_responses(404, 422),
    summary="Which short runs to measure next to pin down one plan's prediction",
    operation_id="suggest_calibration_runs",
)
def suggest_runs(body: SuggestionRequest, session: SessionDep, backend: BackendDep) -> JSONResponse:
    # a plain `def` route: FastAPI runs it in the threadpool, never on the event loop
    key = "evaluation" if body.evaluation is not None else "plan"
    inner = getattr(body, key)
    request, resolved = resolve_references(session, inner.model_dump(exclude_none=True))
    rows: list[dict[str, Any]] = []
    slug = (resolved.get("cluster") or {}).get("slug")
    if slug:
        rows = [m.data for m in MeasurementRepository(session).list(slug)]
    try:
        result = suggest(
            {key: request, "k": body.k, "max_nodes": body.max_nodes},
            profile=backend.profile_for(resolved),
            measured_rows=rows,
        )
    except SpecError as exc:
        raise InvalidInputError.for_field(
            f"{key}.{exc.field}" if exc.field else key, exc.message
        ) from exc
    return JSONResponse(result)
