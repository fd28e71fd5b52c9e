"""The batch page: upload (or paste) a jobs file, follow its jobs, download the results as CSV.

The file is read by the one reader of ``planner batch`` (:mod:`app.batches.jobs_file`) and each
row becomes the API's batch job the same way; the batch is created by the service behind
``POST /v1/batches`` (:class:`app.batches.service.BatchService`). Unlike the API, where a bad
job fails on its own, the page takes a file whole or not at all: any bad row (a bad cell, an
unknown model) is named with its row and column beside the upload field, and nothing is stored.
The job table polls its fragment with htmx while jobs run (a refreshing page without script).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from app.batches.jobs_file import (
    JobsFile,
    JobsFileError,
    batch_job,
    file_format,
    guess_format,
    parse_jobs,
)
from app.batches.rows import to_csv
from app.batches.schemas import MAX_BATCH_JOBS
from app.batches.service import BatchService
from app.core.engine import unit_of_work
from app.core.errors import AppError
from app.planning.convert import RequestError
from app.security.ownership import NotYoursError, viewer_of
from app.web import numbers
from app.web.batch_view import BatchView, BestCache, batch_view
from app.web.templating import templates
from planner import SpecError

router = APIRouter(include_in_schema=False)
PASTED = "the pasted rows"
MIB = 2**20
EXAMPLE = (
    "name,model,gpu,num_gpus,gpus_per_node,seq_length,global_batch_size,precision\n"
    "llama8b-16,llama3.1-8b,h100-sxm-80gb,16,8,8192,128,bf16\n"
    "llama70b-256,llama3.1-70b,h100-sxm-80gb,256,8,8192,512,bf16"
)


_RowError = tuple[int, str]
"""(the row's index, what is wrong with it)."""


class _Rejected(Exception):
    """A jobs file that is not taken: one message for the file, or one per bad row."""

    def __init__(self, message: str | None = None, rows: list[str] | None = None) -> None:
        super().__init__(message or "; ".join(rows or []))
        self.message = message
        self.rows = rows or []


def _page(request: Request, name: str, ctx: dict[str, Any], status_code: int = 200) -> Response:
    ctx = {"nav": "batch", "example": EXAMPLE, "max_jobs": MAX_BATCH_JOBS} | ctx
    return templates(request.app).TemplateResponse(request, name, ctx, status_code=status_code)


RECENT = 20
"""Past batches the form's page lists, newest first."""


def _recent(request: Request) -> dict[str, Any]:
    """The caller's newest batches (everyone's for an admin or without auth): stored rows, so
    a batch submitted before navigating away, or before a restart, is found here."""
    state, viewer = request.app.state, viewer_of(request)
    with unit_of_work(state.session_factory) as session:
        items, total = BatchService(session, state.backend, viewer).recent(RECENT)
    return {"recent": items, "recent_total": total, "recent_all": viewer.admin}


@router.get("/batches", response_class=HTMLResponse)
def batch_form(request: Request) -> Response:
    ctx = {"text": "", "error": None, "row_errors": []} | _recent(request)
    return _page(request, "batch.html", ctx)


@router.get("/batches/recent", response_class=HTMLResponse)
def recent_batches(request: Request) -> Response:
    """The recent-batches section alone: the page polls it while one of them runs."""
    return _page(request, "_batch_recent.html", _recent(request))


@router.post("/batches", response_class=HTMLResponse)
async def submit_batch(request: Request) -> Response:
    form = await request.form()
    upload, pasted = form.get("jobs_file"), str(form.get("jobs_text") or "")
    text = pasted
    try:
        if isinstance(upload, UploadFile) and upload.filename:
            source, fmt, text = await _read_upload(request, upload)
        else:
            source, fmt = PASTED, guess_format(pasted)
            if not pasted.strip():
                raise _Rejected("choose a jobs file (.csv, .yaml, .yml or .json) or paste its rows")
        found = parse_jobs(text, fmt, source=source)
        if len(found.jobs) > MAX_BATCH_JOBS:
            raise _Rejected(
                f"{source} has {len(found.jobs):,} jobs; a batch takes at most "
                f"{MAX_BATCH_JOBS:,} (the API's limit): split it into several batches"
            )
        jobs, errors = _batch_jobs(found)
        batch_id = await run_in_threadpool(_submit, request, jobs, found, errors)
    except (JobsFileError, _Rejected) as exc:
        rejected = exc if isinstance(exc, _Rejected) else _Rejected(exc.message)
        ctx = {"text": text, "error": rejected.message, "row_errors": rejected.rows}
        ctx |= await run_in_threadpool(_recent, request)
        return _page(request, "batch.html", ctx, status_code=422)
    return RedirectResponse(f"/batches/{batch_id}", status_code=303)


async def _read_upload(request: Request, upload: UploadFile) -> tuple[str, str, str]:
    """(name, format, text) of an uploaded jobs file, refused when it is no CSV/YAML/JSON text
    or larger than the API takes a batch."""
    name = upload.filename or "the file"
    fmt = file_format(name)
    if fmt is None:
        raise _Rejected(
            f"{name} is not a CSV or YAML file: save the jobs as .csv (a spreadsheet's "
            "'CSV UTF-8'), or write them as .yaml, .yml or .json"
        )
    body = await upload.read()
    limit = request.app.state.settings.max_body_bytes  # what POST /v1/batches accepts
    if len(body) > limit:
        raise _Rejected(
            f"{name} is {len(body) / MIB:.1f} MiB; a batch may be at most "
            f"{limit / MIB:.0f} MiB (the API's limit): split it into several batches"
        )
    try:
        return name, fmt, body.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise _Rejected(
            f"{name} is not text: save the jobs as CSV (UTF-8) or YAML, not as a workbook"
        ) from None


def _where(found: JobsFile, index: int) -> str:
    """'row 2 (llama70b-256, line 3)': a job as the user finds it in the file."""
    name = found.jobs[index].get("name")
    parts = [str(name)] if name else []
    line = found.lines[index] if index < len(found.lines) else None
    if line is not None:
        parts.append(f"line {line}")
    return f"row {index + 1}" + (f" ({', '.join(parts)})" if parts else "")


def _number_columns() -> dict[str, set[str]]:
    """The batch job's number columns by JSON type ("integer", "number"), read from the API's
    own schema."""
    from app.batches.schemas import BatchJobCreate

    found: dict[str, set[str]] = {"integer": set(), "number": set()}

    def walk(name: str, node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") in found:
                found[node["type"]].add(name)
            for part in (node.get("anyOf") or []) + [node.get("items")]:
                walk(name, part)

    for name, prop in BatchJobCreate.model_json_schema()["properties"].items():
        walk(name, prop)
    return found


def _batch_jobs(found: JobsFile) -> tuple[list[tuple[int, dict[str, Any]]], list[_RowError]]:
    """(index, the API's batch job) of every row that checks, and an error per bad cell."""
    jobs: list[tuple[int, dict[str, Any]]] = []
    errors: list[_RowError] = []
    columns = _number_columns()
    numeric = columns["integer"] | columns["number"]
    for index, row in enumerate(found.jobs):
        odd = [(k, v) for k, v in row.items() if k in numeric and isinstance(v, str)]
        odd = [(k, piece) for k, v in odd if (piece := numbers.misspelled(v)) is not None]
        if odd:  # the request's lax parsing would read '1_000' as 1000: said here instead
            errors += [(index, f"{_where(found, index)}, column {k}: " + numbers.refusal(k, v,
                       whole=k in columns["integer"])) for k, v in odd]  # fmt: skip
            continue
        try:
            jobs.append((index, batch_job(row)))
        except RequestError as exc:  # every bad cell of the row, each with its column
            errors += [(index, f"{_where(found, index)}, column {e['field']}: {e['message']}")
                       for e in exc.errors]  # fmt: skip
        except SpecError as exc:
            column = f", column {exc.field}" if exc.field else ""
            errors.append((index, f"{_where(found, index)}{column}: {exc.message}"))
    return jobs, errors


def _submit(
    request: Request,
    jobs: list[tuple[int, dict[str, Any]]],
    found: JobsFile,
    errors: list[_RowError],
) -> str:
    """Create the batch as the API does, and keep it only when every row checked and every job
    could be queued; else roll it all back and name each bad row (an unknown model, a layout
    Megatron would refuse: found with the cell errors, so one round of fixes is enough)."""
    state = request.app.state
    with unit_of_work(state.session_factory) as session:
        service = BatchService(session, state.backend, viewer_of(request))
        batch = service.submit([job for _, job in jobs]) if jobs else None
        failed = [j for j in service.jobs(batch.id) if j.status == "failed"] if batch else []
        for job in failed:
            index = jobs[job.batch_index or 0][0]
            errors = [*errors, (index, f"{_where(found, index)}: {job.error}")]
        if errors or batch is None:  # raising rolls the unit of work back: no batch, no jobs
            raise _Rejected(rows=[message for _, message in sorted(errors)])
        batch_id = batch.id
    pool = getattr(state, "worker_pool", None)
    if pool is not None:
        pool.wake()
    return batch_id


def _cache(request: Request) -> BestCache:
    cache: BestCache | None = getattr(request.app.state, "batch_best_cache", None)
    if cache is None:
        cache = request.app.state.batch_best_cache = BestCache()
    return cache


def _view(request: Request, batch_id: str) -> BatchView:
    state = request.app.state
    with unit_of_work(state.session_factory) as session:
        service = BatchService(session, state.backend, viewer_of(request))
        try:
            read = service.read(batch_id)
        except NotYoursError:  # as the plan pages do: another key's batch is not found
            raise AppError(f"no batch {batch_id!r}", status_code=404) from None
        return batch_view(read, service.jobs(batch_id), _cache(request))


@router.get("/batches/{batch_id}", response_class=HTMLResponse)
def batch_page(request: Request, batch_id: str) -> Response:
    return _page(request, "batch_detail.html", {"batch": _view(request, batch_id)})


@router.get("/batches/{batch_id}/status", response_class=HTMLResponse)
def batch_status(request: Request, batch_id: str) -> Response:
    return _page(request, "_batch_jobs.html", {"batch": _view(request, batch_id)})


@router.get("/batches/{batch_id}/results.csv")
def batch_csv(request: Request, batch_id: str, partial: bool = False) -> Response:
    """The results with the columns of ``planner batch``; while jobs run, 409 unless
    ``partial`` (then the finished jobs' rows, and one "still running" row per other job)."""
    state = request.app.state
    with unit_of_work(state.session_factory) as session:
        service = BatchService(session, state.backend, viewer_of(request))
        try:
            rows = service.results(batch_id, partial=partial)
        except NotYoursError:
            raise AppError(f"no batch {batch_id!r}", status_code=404) from None
    name = f"batch-{batch_id[:8]}{'-so-far' if partial else ''}.csv"
    return PlainTextResponse(
        to_csv(rows),
        media_type="text/csv",
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )
