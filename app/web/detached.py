"""Rows of deleted clusters on the calibration page: listed, downloaded, deleted after a count.

A cluster's catalog entry that goes by a path other than the page's confirmed delete (an older
release, a script) leaves its measurements and calibrations *detached* (``cluster_id`` NULL,
migration 0005): no fit or plan reads them, and only ``/v1/detached-measurements`` showed them.
The page lists each former name with its counts, offers the runs as the JSON list the upload form
takes (the API has no route that attaches them to a cluster; uploading them there with "Save"
does), and deletes a group on a second press that names what goes, as the other deletes do.
"""

from __future__ import annotations

import json
from typing import Annotated, Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Path, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from app.core.errors import AppError
from app.web.backend import Backend
from app.web.calibration import page_context
from app.web.templating import templates

router = APIRouter(include_in_schema=False)
Former = Annotated[str, Path(max_length=128)]


def _page(
    request: Request, backend: Backend, detached_step: dict[str, Any], status_code: int = 200
) -> Response:
    """The calibration page with the detached section at ``detached_step``."""
    ctx = page_context(backend, detached_step=detached_step)
    return templates(request.app).TemplateResponse(
        request, "calibration.html", ctx, status_code=status_code
    )


@router.post("/calibration/detached/delete", response_class=HTMLResponse)
async def delete_detached(request: Request, backend: Backend) -> Response:
    """First press: say what the former name holds; second (``confirm`` = the name): delete."""
    form = await request.form()
    former = str(form.get("former", ""))
    groups = await run_in_threadpool(backend.detached_groups)
    group = next((g for g in groups if g["cluster"] == former), None)
    if group is None:  # deleted meanwhile (another tab), or a hand-made post
        step: dict[str, Any] = {"former": former, "step": "missing"}
        return _page(request, backend, step, status_code=404)
    if form.get("confirm") != former:
        step = {"former": former, "step": "confirm", "measured": group["measurements"],
                "fitted": group["calibrations"]}  # fmt: skip
        return _page(request, backend, step)
    try:
        measured, fitted = await run_in_threadpool(backend.delete_detached, former)
    except AppError as exc:  # gone between the two reads: the same answer as above
        step = {"former": former, "step": "missing"}
        return _page(request, backend, step, status_code=exc.status_code)
    query = urlencode({"detached_deleted": former, "measured": measured, "fitted": fitted})
    # no #fragment: a page opened at one skips autofocus, and the status takes the focus
    return RedirectResponse(f"/calibration?{query}", status_code=303)  # a reload: a GET


@router.get("/calibration/detached/{former}/runs.json")
def detached_runs(request: Request, former: Former, backend: Backend) -> Response:
    """The former cluster's runs as a JSON list of rows: the file the upload form takes."""
    try:
        rows = backend.detached_measurements(former)
    except AppError as exc:
        return _page(request, backend, {"former": former, "step": "missing"}, exc.status_code)
    name = quote(f"detached-{former}.json")
    return Response(
        json.dumps(rows, indent=1),
        media_type="application/json",
        headers={"Content-Disposition": f"attachment; filename*=UTF-8''{name}"},
    )
