"""A saved calibration's page: where "Fit and compare" with "Save" ticked lands (303), so that
reloading it reads the stored result instead of posting the upload again (which stored the
rows and a calibration a second time).

The page shows what the calibration stored with its fit (``CalibrationRow.comparison``: the
rows it was fitted on, predicted before and after, the errors and the coefficients), so a view
is a read; a calibration stored before that column existed gets it computed once, on its first
view, from its stored profile and report (:func:`app.calibration.fit.stored_comparison`, the
form :func:`app.calibration.fit.fit_preview` gives the upload's page), and stored
(:meth:`app.calibration.service.CalibrationService.comparison`, which the API's
``GET /v1/clusters/{slug}/calibrations/{id}`` reads too). An upload without "Save" stores
nothing, so its page is the POST's answer: a reload fits the same file again and changes nothing.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from fastapi.responses import HTMLResponse, Response
from starlette.concurrency import run_in_threadpool

from app.calibration.service import CalibrationService
from app.core.engine import unit_of_work
from app.core.errors import AppError
from app.web.backend import Backend
from app.web.templating import templates

router = APIRouter(include_in_schema=False)


def result_url(cluster: str, calibration_id: int) -> str:
    """Where a saved upload's answer is read back."""
    return f"/calibration/{cluster}/calibrations/{calibration_id}"


def stored_preview(request: Request, cluster: str, calibration_id: int) -> dict[str, Any]:
    """What the page of a stored calibration shows: stored with its fit (a read), through the
    service that ``GET /v1/clusters/{slug}/calibrations/{id}`` answers with too."""
    state = request.app.state
    with unit_of_work(state.session_factory) as session:
        found = CalibrationService(session, state.backend).comparison(cluster, calibration_id)
    return found.comparison


@router.get("/calibration/{cluster}/calibrations/{calibration_id}", response_class=HTMLResponse)
async def calibration_result(
    request: Request,
    backend: Backend,
    cluster: Annotated[str, Path(max_length=128)],
    calibration_id: int,
) -> Response:
    from app.web.calibration import page_context  # that module links here: imported late

    try:
        preview = await run_in_threadpool(stored_preview, request, cluster, calibration_id)
    except AppError as exc:
        ctx = page_context(backend, error={"field": "cluster", "message": exc.message})
        return templates(request.app).TemplateResponse(
            request, "calibration.html", ctx | {"cluster": cluster}, status_code=exc.status_code
        )
    ctx = page_context(backend, preview=preview, cluster=cluster, saved=calibration_id)
    return templates(request.app).TemplateResponse(request, "calibration.html", ctx)
