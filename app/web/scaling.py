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
from app.web.templating import templates
from planner.specs import SpecError

router = APIRouter(include_in_schema=False)

FIELDS = {
    "model": ("llama3.1-70b", str),
    "gpu": ("h100-sxm-80gb", str),
    "num_gpus": ("64-1024", str),
    "seq_length": ("8192", int),
    "global_batch_size": ("1024", int),
    "token_budget": ("", float),
    "usd_per_gpu_hour": ("", float),
}


def _form(query: dict[str, str]) -> tuple[dict[str, str], dict[str, Any]]:
    """(the values to show, the request to run); SpecError naming a bad field."""
    shown = {name: query.get(name, default).strip() for name, (default, _) in FIELDS.items()}
    request: dict[str, Any] = {}
    for name, (_, kind) in FIELDS.items():
        text = shown[name]
        if not text:
            continue
        try:
            request[name] = kind(text)
        except ValueError:
            message = f"{name.replace('_', ' ')}: {text!r} is not a number"
            raise SpecError(message, field=name) from None
    request["num_gpus_options"] = request.pop("num_gpus", None)
    return shown, request


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
async def scaling_page(request: Request) -> Response:
    from app.planning.scaling import scaling_curve

    query = dict(request.query_params)
    ctx: dict[str, Any] = {"nav": "scaling", "curve": None, "error": None}
    try:
        shown, req = _form(query)
    except SpecError as exc:
        shown, req = {k: query.get(k, d) for k, (d, _) in FIELDS.items()}, None
        ctx["error"] = {"field": exc.field, "message": exc.message}
    ctx["form"] = shown
    if req is not None and "run" in query:
        backend = request.app.state.backend
        try:
            curve = await run_in_threadpool(scaling_curve, req, plan=backend.plan)
        except SpecError as exc:
            ctx["error"] = {"field": exc.field, "message": exc.message}
        else:
            ctx["curve"], ctx["chart"] = curve, chart_data(curve)
            ctx["layouts"] = point_layouts(curve)
    code = 422 if ctx["error"] else 200
    return templates(request.app).TemplateResponse(request, "scaling.html", ctx, status_code=code)
