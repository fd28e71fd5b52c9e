"""A saved calibration's page: where "Fit and compare" with "Save" ticked lands (303), so that
reloading it reads the stored result instead of posting the upload again (which stored the
rows and a calibration a second time).

The page is rebuilt from what was stored: the calibration row and the cluster's measurements it
was fitted on (the first ``num_measurements`` stored rows, in the order they were stored; the
service fits a calibration on every stored row of its cluster), compared before and after by
the same :func:`fit_preview` the upload's page uses. An upload without "Save" stores nothing,
so its page is the POST's answer: a reload fits the same file again and changes nothing.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from fastapi.responses import HTMLResponse, Response
from starlette.concurrency import run_in_threadpool

from app.calibration.fit import fit_preview
from app.calibration.service import CalibrationService
from app.core.engine import unit_of_work
from app.core.errors import AppError, NotFoundError
from app.web.backend import Backend
from app.web.templating import templates

router = APIRouter(include_in_schema=False)


def result_url(cluster: str, calibration_id: int) -> str:
    """Where a saved upload's answer is read back."""
    return f"/calibration/{cluster}/calibrations/{calibration_id}"


def stored_preview(request: Request, cluster: str, calibration_id: int) -> dict[str, Any]:
    """The fit of a stored calibration, before and after, as the upload's page shows it."""
    state = request.app.state
    with unit_of_work(state.session_factory) as session:
        service = CalibrationService(session, state.backend)
        gpu = service.cluster(cluster)["gpu"]  # 404 for a cluster that is gone
        found = next((c for c in service.list_calibrations(cluster) if c.id == calibration_id),
                     None)  # fmt: skip
        if found is None:
            raise NotFoundError(
                f"cluster {cluster!r} has no calibration {calibration_id} (its stored runs may "
                "have been deleted since): upload the runs again on the calibration page"
            )
        rows = [m.data for m in service.list_measurements(cluster)][: found.num_measurements]
    return fit_preview(rows, gpu)


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
