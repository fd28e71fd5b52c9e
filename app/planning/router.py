"""Plan-job routes: submit (202 + Location, Idempotency-Key, ?wait=), read, plans, cancel, list."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Header, Path, Query, Response, status
from fastapi.responses import JSONResponse

from app.core.deps import FactoryDep, SessionDep, SettingsDep
from app.core.engine import unit_of_work
from app.core.schemas import problem_responses
from app.planning.deps import BackendDep, PoolDep
from app.planning.reports import PlanAnswer
from app.planning.schemas import PLAN_EXAMPLE, PlanJobCreate, PlanJobPage, PlanJobRead, Status
from app.planning.service import PlanJobService, to_read, wait_until_finished
from app.security.ownership import ViewerDep

router = APIRouter(prefix="/v1/plan-jobs", tags=["plan jobs"])
JobId = Annotated[str, Path(max_length=64)]
JOB_LINKS = {  # OpenAPI links: what a client (and the stateful API test) can do with a new job
    name: {"operationId": operation, "parameters": {"job_id": "$response.body#/id"}}
    for name, operation in (
        ("GetPlanJob", "get_plan_job"),
        ("GetPlanJobPlans", "get_plan_job_plans"),
        ("CancelPlanJob", "cancel_plan_job"),
    )
}


@router.post(
    "",
    response_model=PlanJobRead,
    status_code=status.HTTP_202_ACCEPTED,
    responses={
        200: {
            "model": PlanJobRead,
            "description": "The job finished within ?wait= seconds",
            "links": JOB_LINKS,
        },
        202: {"description": "The job is queued", "links": JOB_LINKS},
        **problem_responses(409, 422),
    },
    summary="Queue a search for the best layouts",
    operation_id="submit_plan_job",
)
def submit(
    body: Annotated[PlanJobCreate, Body(examples=[PLAN_EXAMPLE])],
    backend: BackendDep,
    viewer: ViewerDep,
    factory: FactoryDep,
    settings: SettingsDep,
    pool: PoolDep,
    idempotency_key: Annotated[
        str | None,
        Header(
            min_length=1,
            max_length=255,
            description="same key + same body = the same job; same key + another body = 409",
        ),
    ] = None,
    wait: Annotated[
        float,
        Query(
            ge=0,
            le=600,
            allow_inf_nan=False,  # ?wait=nan: "a finite number", not "at most 600"
            description="seconds to wait for the result (bounded)",
        ),
    ] = 0,
) -> JSONResponse:
    # its own unit of work: the job must be committed (visible to the workers) before the
    # route wakes them or waits on it
    with unit_of_work(factory) as session:
        job, _created = PlanJobService(session, backend, viewer).submit(
            body.model_dump(mode="json", exclude_none=True), idempotency_key
        )
    if pool is not None:
        pool.wake()
    location = f"/v1/plan-jobs/{job.id}"
    read = to_read(job)
    code = status.HTTP_202_ACCEPTED
    if wait > 0:
        finished = wait_until_finished(factory, job.id, min(wait, settings.max_wait_s))
        if finished is not None:
            read, code = to_read(finished), status.HTTP_200_OK
    elif read.status in ("succeeded", "failed", "cancelled"):
        code = status.HTTP_200_OK
    return JSONResponse(
        read.model_dump(mode="json"), status_code=code, headers={"Location": location}
    )


@router.get(
    "",
    response_model=PlanJobPage,
    responses=problem_responses(422),
    summary="List plan jobs, newest first",
    operation_id="list_plan_jobs",
)
def list_jobs(
    session: SessionDep,
    backend: BackendDep,
    viewer: ViewerDep,
    status_filter: Annotated[Status | None, Query(alias="status")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> PlanJobPage:
    return PlanJobService(session, backend, viewer).list(status_filter, limit, offset)


@router.get(
    "/{job_id}",
    response_model=PlanJobRead,
    responses=problem_responses(404, 422),
    summary="A plan job's status and progress",
    operation_id="get_plan_job",
)
def get_job(
    job_id: JobId, session: SessionDep, backend: BackendDep, viewer: ViewerDep
) -> PlanJobRead:
    return to_read(PlanJobService(session, backend, viewer).get(job_id))


@router.get(
    "/{job_id}/plans",
    response_model=PlanAnswer,
    response_model_exclude_unset=True,  # the planner's document as it is, no added nulls
    responses=problem_responses(404, 409, 422),
    summary="The ranked plans of a finished job (as `planner plan --json`)",
    operation_id="get_plan_job_plans",
)
def get_plans(
    job_id: JobId, session: SessionDep, backend: BackendDep, viewer: ViewerDep
) -> PlanAnswer:
    return PlanJobService(session, backend, viewer).plans(job_id)


@router.post(
    "/{job_id}/cancel",
    response_model=PlanJobRead,
    status_code=status.HTTP_202_ACCEPTED,
    responses={
        200: {"model": PlanJobRead, "description": "The job was queued and is now cancelled"},
        **problem_responses(404, 409, 422),
    },
    summary="Cancel a queued or running job",
    operation_id="cancel_plan_job",
)
def cancel(
    job_id: JobId,
    session: SessionDep,
    backend: BackendDep,
    viewer: ViewerDep,
    response: Response,
) -> PlanJobRead:
    job = PlanJobService(session, backend, viewer).cancel(job_id)
    if job.status == "cancelled":
        response.status_code = status.HTTP_200_OK
    return to_read(job)
