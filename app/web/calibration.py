"""The calibration page: upload measured runs (CSV, JSON rows or a Megatron-LM log), fit the
performance profile to them, and compare predicted against measured tokens/s before and after.

The fit (least squares, about a second) runs in a worker thread, never on the event loop. With
"save" ticked the rows and a calibration are stored for the cluster through the service, so
later plans on that cluster use the fitted profile.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from app.core.errors import AppError
from app.core.schemas import SLUG_PATTERN
from app.web import numbers
from app.web.backend import Backend
from app.web.calibration_result import result_url
from app.web.form_checks import is_whole
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


def page_context(backend: Backend, **extra: Any) -> dict[str, Any]:
    return {
        "clusters": backend.list_clusters(),
        "nav": "calibration",
        "error": None,
        "preview": None,
        "cluster": "",
        "saved": None,
        "suggestions": None,
        "suggest_error": None,
        "suggest_text": SUGGEST_EXAMPLE,
        "suggest_k": "3",
        "suggest_max_nodes": "",
        "stored": None,
        "detached": backend.detached_groups(),  # rows of deleted clusters (app/web/detached.py)
        "detached_step": None,
    } | extra


@router.get("/calibration", response_class=HTMLResponse)
def calibration_page(request: Request, backend: Backend) -> Response:
    ctx = page_context(backend, **done_steps(request.query_params))
    return templates(request.app).TemplateResponse(request, "calibration.html", ctx)


def done_steps(query: Mapping[str, str]) -> dict[str, Any]:
    """What a delete that redirected here (POST/redirect/GET) did, from its query: the page
    says it, and a reload reads it again instead of posting the delete a second time."""
    counts = [numbers.read_whole(query.get(key, "")) for key in ("measured", "fitted")]
    measured, fitted = (n or 0 for n in counts)
    steps: dict[str, Any] = {}
    for key, name in (("rows_deleted", "cluster"), ("detached_deleted", "former")):
        slug = query.get(key, "")
        if re.fullmatch(SLUG_PATTERN, slug):
            step = {name: slug, "step": "deleted", "measured": measured, "fitted": fitted}
            steps["stored" if name == "cluster" else "detached_step"] = step
    return steps


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
        _check_has_rows(upload.filename, body)
        result = await run_in_threadpool(
            backend.calibration_preview, cluster, body, media_type(upload.filename), save
        )
    except SpecError as exc:
        ctx = page_context(
            backend, error={"field": exc.field or "file", "message": exc.message}, cluster=cluster
        )
        return templates(request.app).TemplateResponse(
            request, "calibration.html", ctx, status_code=422
        )
    if result.get("saved"):  # stored: its page reads it back, so a reload stores nothing again
        return RedirectResponse(result_url(cluster, result["saved"]), status_code=303)
    ctx = page_context(backend, preview=result, cluster=cluster, saved=None)
    return templates(request.app).TemplateResponse(request, "calibration.html", ctx)


@router.post("/calibration/measurements/delete", response_class=HTMLResponse)
async def delete_measurements(request: Request, backend: Backend) -> Response:
    """A cluster's stored runs and calibrations, deleted after the page said how many (as
    ``DELETE /v1/clusters/{slug}/measurements``): its plans go back to the shipped profile."""
    form = await request.form()
    cluster = str(form.get("cluster", ""))
    try:
        counts = await run_in_threadpool(backend.stored_rows, cluster)
        confirmed = form.get("confirm") == cluster and any(counts)  # the cluster it asked about
        if confirmed:
            await run_in_threadpool(backend.delete_measurements, cluster)
    except AppError as exc:
        ctx = page_context(backend, stored={"cluster": cluster, "error": exc.message})
        return templates(request.app).TemplateResponse(
            request, "calibration.html", ctx, status_code=exc.status_code
        )
    if confirmed:  # POST/redirect/GET: a reload must not delete rows stored since
        query = urlencode({"rows_deleted": cluster, "measured": counts[0], "fitted": counts[1]})
        return RedirectResponse(f"/calibration?{query}#stored-title", status_code=303)
    stored = {"cluster": cluster, "step": "confirm", "measured": counts[0], "fitted": counts[1]}
    ctx = page_context(backend, cluster=cluster, stored=stored)
    return templates(request.app).TemplateResponse(request, "calibration.html", ctx)


def _check_has_rows(filename: str, body: bytes) -> None:
    """An empty file or a CSV with only its header, said about the file and what a row needs
    (the request's "no measurement rows" names no file)."""
    try:  # said about the file here: the request's "the body is not UTF-8" names no file
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(
            f"{filename} is not UTF-8 text (byte {exc.start}): upload the CSV, JSON or "
            "Megatron-LM log as text saved in UTF-8, not a spreadsheet or an archive",
            field="file",
        ) from exc
    lines = [line for line in body.splitlines() if line.strip()]
    media = media_type(filename)
    if media == "text/csv" and len(lines) < 2:
        how = "a header line with the columns of measured-throughput.csv, then one line"
    elif media == "application/json" and body.strip() in (b"", b"[]", b'{"rows": []}'):
        how = "a JSON list with one object"
    elif not lines:
        how = "a Megatron-LM training log, or a CSV with one line"
    else:
        return
    raise SpecError(
        f"{filename} has no measurement rows: give {how} per measured run, each with at least "
        "the model (model_name), num_gpus, tp, pp, micro_batch_size, global_batch_size, "
        "seq_length and tokens_per_sec_per_gpu (or step_time_s)",
        field="file",
    )


SUGGEST_EXAMPLE = (
    '{"model": "llama3.1-8b", "gpu": "h100-sxm-80gb", "num_gpus": 16, "seq_length": 8192,\n'
    ' "global_batch_size": 128, "tp": 2}'
)


@router.post("/calibration/suggest", response_class=HTMLResponse)
async def suggest_runs(request: Request, backend: Backend) -> Response:
    """What to measure next (issue 12 item 10): runs that pin down one layout's prediction."""
    import json

    form = await request.form()
    text = str(form.get("request", ""))
    k_text = str(form.get("k", "3"))
    nodes_text = str(form.get("max_nodes", "")).strip()
    try:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise SpecError(f"not JSON: {exc}", field="suggest_request") from exc
        if not isinstance(data, dict):
            raise SpecError("give one JSON object", field="suggest_request")
        if not is_whole(k_text) or not 1 <= int(k_text) <= 20:
            raise SpecError("k must be a whole number from 1 to 20", field="suggest_k")
        if nodes_text and not (is_whole(nodes_text) and int(nodes_text) >= 1):
            raise SpecError(
                "nodes per run must be a whole number of at least 1, or empty for the cluster's",
                field="suggest_max_nodes",
            )
        body = data if ("evaluation" in data or "plan" in data) else {"evaluation": data}
        body = {**body, "k": int(k_text)}
        if nodes_text:  # else the JSON's own max_nodes, if it gives one
            body["max_nodes"] = int(nodes_text)
        result = await run_in_threadpool(backend.suggest_runs, body)
    except SpecError as exc:
        own = {"suggest_k": "suggest_k", "k": "suggest_k"}
        own |= {"suggest_max_nodes": "suggest_max_nodes", "max_nodes": "suggest_max_nodes"}
        field = own.get(exc.field or "", "suggest_request")  # the request's fields: their inputs
        ctx = page_context(
            backend,
            suggest_error={"field": field, "message": exc.message},
            suggest_text=text,
            suggest_k=k_text,
            suggest_max_nodes=nodes_text,
        )
        return templates(request.app).TemplateResponse(
            request, "calibration.html", ctx, status_code=422
        )
    ctx = page_context(
        backend,
        suggestions=result,
        suggest_text=text,
        suggest_k=k_text,
        suggest_max_nodes=nodes_text,
    )
    return templates(request.app).TemplateResponse(request, "calibration.html", ctx)
