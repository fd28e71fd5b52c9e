"""The scaling page: best plan, tokens/s and efficiency at each GPU count, as a table and a chart.

A GET form (bookmarkable URL); the planning runs in a worker thread, never on the event loop.
Wire it with ``router.include_router(app.web.scaling.router)``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from starlette.concurrency import run_in_threadpool

from app.planning.reports import ScalingCurve
from app.web import scaling_form
from app.web.backend import Backend
from app.web.templating import templates
from planner.specs import SpecError

router = APIRouter(include_in_schema=False)


def chart_data(curve: ScalingCurve) -> dict[str, Any]:
    """Chart.js-ready series: tokens/s and scaling efficiency by GPU count."""
    points = [p for p in curve.points if p.feasible]
    return {
        "labels": [p.num_gpus for p in points],
        "tokens_per_s": [round(p.tokens_per_s or 0) for p in points],
        "efficiency": [round(100 * (p.scaling_efficiency or 0), 1) for p in points],
    }


def point_layouts(curve: ScalingCurve) -> dict[int, str]:
    """Each feasible point's layout in the plan table's words (no EP/ETP for a dense model)."""
    from app.web.views import layout_text

    return {
        p.num_gpus: layout_text(
            p.layout.model_dump() if p.layout else {},
            moe="--num-experts" in (p.megatron_command or ""),
        )
        for p in curve.points
        if p.feasible
    }


@router.get("/scaling", response_class=HTMLResponse)
async def scaling_page(request: Request, backend: Backend) -> Response:
    from app.planning.scaling import scaling_curve

    query = dict(request.query_params)
    shown = scaling_form.shown_values(query)
    # the menus' choices: catalog and stored models/GPUs (a database read: off the event loop)
    models, gpus = await run_in_threadpool(lambda: (backend.list_models(), backend.list_gpus()))
    ctx: dict[str, Any] = {"nav": "scaling", "curve": None, "errors": {}, "message": None}
    ctx |= {"form": shown, "fields": scaling_form.FIELDS, "models": models, "gpus": gpus}
    if "run" in query:
        req, ctx["errors"] = scaling_form.check(shown, models, gpus)
        if not ctx["errors"]:
            try:
                curve = await run_in_threadpool(
                    scaling_curve, req, plan=request.app.state.backend.plan
                )
            except SpecError as exc:
                ctx["errors"], ctx["message"] = scaling_form.request_errors(exc)
            else:
                ctx["curve"], ctx["chart"] = curve, chart_data(curve)
                ctx["layouts"] = point_layouts(curve)
    code = 422 if ctx["errors"] or ctx["message"] else 200
    return templates(request.app).TemplateResponse(request, "scaling.html", ctx, status_code=code)
