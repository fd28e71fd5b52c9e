"""The calibration page: upload measured runs (CSV, JSON rows or a Megatron-LM log), fit the
performance profile to them, and compare predicted against measured tokens/s before and after.

The fit (least squares, about a second) runs in a worker thread, never on the event loop. With
"save" ticked the rows and a calibration are stored for the cluster through the service, so
later plans on that cluster use the fitted profile.
"""

from __future__ import annotations

import math
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from starlette.concurrency import run_in_threadpool

from app.web.backend import Backend
from app.web.templating import templates
from planner.specs import SpecError

router = APIRouter(include_in_schema=False)

MEDIA_BY_SUFFIX = {
    ".csv": "text/csv",
    ".json": "application/json",
    ".log": "text/plain",
    ".txt": "text/plain",
    ".out": "text/plain",
}


def media_type(filename: str) -> str:
    for suffix, media in MEDIA_BY_SUFFIX.items():
        if filename.lower().endswith(suffix):
            return media
    return "text/plain"


def fit_preview(rows: list[dict[str, str]], gpu_slug: str) -> dict[str, Any]:
    """Fit the profile of ``gpu_slug`` to ``rows``; the points and errors before and after."""
    from app.planning.compute import gpu_from_type_string, profile_for
    from models_db.catalog import network_bytes_per_s
    from models_db.measurement_models import model_for_measurement
    from planner.calibration import fit_profile, predict_tokens_per_s, usable
    from planner.measurements import parse_rows

    gpu = gpu_from_type_string(gpu_slug)
    parsed, skipped = parse_rows(
        rows,
        gpu_from_type_string,
        network_bytes_per_s=network_bytes_per_s,
        model_lookup=model_for_measurement,
    )
    measurements = [m for m in parsed if m.cluster.gpu.name == gpu.name]
    others = len(parsed) - len(measurements)
    rows_used = usable(measurements)
    if not rows_used:
        reasons = "; ".join(f"{s.row_id or '?'}: {s.reason}" for s in skipped[:3])
        raise SpecError(
            f"no usable measurement rows ({reasons})" if reasons else "no usable measurement rows",
            field="file",
        )
    base = profile_for(gpu, None)
    fitted, report = fit_profile(rows_used, base)
    before = predict_tokens_per_s(rows_used, base)
    after = predict_tokens_per_s(rows_used, fitted)
    points_before, points_after = [], []
    for m, b, a in zip(rows_used, before, after, strict=True):
        measured = float(m.tokens_per_s_per_gpu or 0.0)
        label = f"{m.row_id} {m.model.name} {m.cluster.num_gpus} GPUs"
        points_before.append({"x": round(measured, 1), "y": round(float(b), 1), "label": label})
        points_after.append({"x": round(measured, 1), "y": round(float(a), 1), "label": label})
    return {
        "chart": {"kind": "calibration", "before": points_before, "after": points_after},
        "n_rows": report.n_rows,
        "before": _stats(report.before),
        "after": _stats(report.after),
        "coefficients": [
            (name, report.values_before[name], report.values_after[name])
            for name in report.coefficients
        ],
        "skipped": [(s.row_id, s.reason) for s in skipped],
        "other_gpus": others,
        "gpu": gpu.name,
        "message": report.message,
    }


def _stats(stats: Any) -> dict[str, str]:
    def pct(v: float) -> str:
        return "–" if math.isnan(v) else f"{100 * v:.1f} %"

    return {"median": pct(stats.median_ape), "p90": pct(stats.p90_ape)}


def _context(backend: Backend, **extra: Any) -> dict[str, Any]:
    return {
        "clusters": backend.list_clusters(),
        "nav": "calibration",
        "error": None,
        "preview": None,
        "cluster": "",
        "saved": None,
    } | extra


@router.get("/calibration", response_class=HTMLResponse)
def calibration_page(request: Request, backend: Backend) -> Response:
    return templates(request.app).TemplateResponse(request, "calibration.html", _context(backend))


@router.post("/calibration", response_class=HTMLResponse)
async def calibrate(request: Request, backend: Backend) -> Response:
    form = await request.form()
    cluster = str(form.get("cluster", ""))
    upload = form.get("file")
    save = bool(form.get("save"))
    try:
        if upload is None or isinstance(upload, str) or not upload.filename:
            raise SpecError("choose a CSV, JSON or Megatron-LM log file", field="file")
        body = await upload.read()
        result = await run_in_threadpool(
            backend.calibration_preview, cluster, body, media_type(upload.filename), save
        )
    except SpecError as exc:
        ctx = _context(
            backend, error={"field": exc.field or "file", "message": exc.message}, cluster=cluster
        )
        return templates(request.app).TemplateResponse(
            request, "calibration.html", ctx, status_code=422
        )
    ctx = _context(backend, preview=result, cluster=cluster, saved=result.get("saved"))
    return templates(request.app).TemplateResponse(request, "calibration.html", ctx)
