"""Batch routes: submit N plan jobs at once (202 + id), follow them, fetch results as CSV/JSON."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Path, Query, status
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from pydantic import BaseModel

from app.batches.rows import to_csv
from app.batches.schemas import BatchCounts, BatchCreate, BatchPage
from app.batches.service import BatchService
from app.core.deps import FactoryDep, SessionDep
from app.core.engine import unit_of_work
from app.core.schemas import problem_responses
from app.planning.deps import BackendDep, PoolDep
from app.security.ownership import ViewerDep

router = APIRouter(prefix="/v1/batches", tags=["batches"])
BatchId = Annotated[str, Path(max_length=64)]


class BatchJob(BaseModel):
    name: str
    id: str
    status: str
    error: str | None = None


class BatchRead(BatchCounts):
    progress: float
    created_at: str
    jobs: list[BatchJob]
    links: dict[str, str]


@router.post(
    "",
    response_model=BatchRead,
    status_code=status.HTTP_202_ACCEPTED,
    responses={
        202: {
            "description": "The batch is queued",
            "links": {
                name: {"operationId": operation, "parameters": {"batch_id": "$response.body#/id"}}
                for name, operation in (
                    ("GetBatch", "get_batch"),
                    ("GetBatchResults", "get_batch_results"),
                )
            },
        },
        **problem_responses(422),
    },
    summary="Queue a batch of plan jobs (a job that cannot be planned: 422, nothing stored)",
    operation_id="submit_batch",
)
def submit(
    body: Annotated[BatchCreate, Body()],
    factory: FactoryDep,
    backend: BackendDep,
    viewer: ViewerDep,
    pool: PoolDep,
) -> JSONResponse:
    with unit_of_work(factory) as session:  # the jobs must be visible to the workers
        jobs = [job.model_dump(mode="json", exclude_none=True) for job in body.jobs]
        batch = BatchService(session, backend, viewer).submit(jobs, all_or_nothing=True)
    if pool is not None:
        pool.wake()
    with unit_of_work(factory) as session:
        read = BatchService(session, backend).read(batch.id)
    return JSONResponse(
        read, status_code=status.HTTP_202_ACCEPTED, headers={"Location": read["links"]["self"]}
    )


@router.get(
    "",
    response_model=BatchPage,
    responses=problem_responses(422),
    summary="List batches, newest first (a key sees its own; an admin key, every one)",
    operation_id="list_batches",
)
def list_batches(
    session: SessionDep,
    backend: BackendDep,
    viewer: ViewerDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> BatchPage:
    items, total = BatchService(session, backend, viewer).recent(limit, offset)
    return BatchPage.model_validate(
        {"items": items, "total": total, "limit": limit, "offset": offset}
    )


@router.get(
    "/{batch_id}",
    response_model=BatchRead,
    responses=problem_responses(404, 422),
    summary="A batch's status, progress and jobs",
    operation_id="get_batch",
)
def get_batch(
    batch_id: BatchId, session: SessionDep, backend: BackendDep, viewer: ViewerDep
) -> dict[str, Any]:
    return BatchService(session, backend, viewer).read(batch_id)


@router.get(
    "/{batch_id}/results",
    responses={
        200: {
            "description": "One row per job and rank (the columns of `planner batch`)",
            "content": {"text/csv": {}, "application/json": {}},
        },
        **problem_responses(404, 409, 422),
    },
    summary="The results of a finished batch as CSV or JSON",
    operation_id="get_batch_results",
)
def get_results(
    batch_id: BatchId,
    session: SessionDep,
    backend: BackendDep,
    viewer: ViewerDep,
    format: Annotated[Literal["csv", "json"], Query()] = "json",
    partial: Annotated[bool, Query(description="rows of the jobs finished so far")] = False,
) -> Response:
    rows = BatchService(session, backend, viewer).results(batch_id, partial=partial)
    if format == "csv":
        return PlainTextResponse(to_csv(rows), media_type="text/csv")
    return JSONResponse(rows)
