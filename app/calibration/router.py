"""Measurement and calibration routes of a cluster preset."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response, status
from starlette.concurrency import run_in_threadpool

from app.calibration.deps import CalibrationBackendDep as BackendDep
from app.calibration.detached import ROUTE as DETACHED_ROUTE
from app.calibration.detached import DetachedService
from app.calibration.schemas import (
    CalibrationDetail,
    CalibrationList,
    CalibrationRead,
    DetachedDeleted,
    DetachedList,
    DetachedRows,
    MeasurementList,
    MeasurementsCreated,
)
from app.calibration.service import CalibrationService
from app.core.deps import SessionDep
from app.core.errors import AppError
from app.core.schemas import problem_responses

# one tag per route: DELETE "" below is a catalog operation (a router tag would add a second)
router = APIRouter(prefix="/v1/clusters/{slug}")
TAGS: list[str | Enum] = ["calibration"]
Slug = Annotated[str, Path(max_length=128)]
MAX_BODY_BYTES = 8 * 2**20

ROW_EXAMPLE = {
    "model_name": "llama3.1-70b",
    "num_layers": "80",
    "hidden_size": "8192",
    "ffn_hidden_size": "28672",
    "num_attention_heads": "64",
    "num_query_groups": "8",
    "vocab_size": "128256",
    "seq_length": "8192",
    "num_gpus": "64",
    "tp": "4",
    "pp": "4",
    "cp": "1",
    "micro_batch_size": "1",
    "global_batch_size": "128",
    "precision": "bf16",
    "tokens_per_sec_per_gpu": "1200",
}
CELL_SCHEMA = {"type": ["string", "number", "boolean", "null"]}
MEASUREMENT_BODY: dict[str, Any] = {
    "required": True,
    "content": {
        "application/json": {
            "schema": {
                "type": "array",
                "maxItems": 10000,
                "items": {
                    "type": "object",
                    "additionalProperties": {"type": ["string", "number", "boolean", "null"]},
                },
            },
            "example": [ROW_EXAMPLE],
        },
        "text/csv": {"schema": {"type": "string"}},
        "text/plain": {"schema": {"type": "string", "description": "a Megatron-LM training log"}},
    },
}


@router.post(
    "/measurements",
    response_model=MeasurementsCreated,
    status_code=status.HTTP_201_CREATED,
    responses=problem_responses(404, 413, 415, 422),
    openapi_extra={"requestBody": MEASUREMENT_BODY},
    summary="Upload measured runs: JSON rows, CSV (text/csv) or a Megatron-LM log (text/plain)",
    operation_id="add_measurements",
    tags=TAGS,
)
async def add_measurements(
    slug: Slug, request: Request, session: SessionDep, backend: BackendDep
) -> MeasurementsCreated:
    body = await request.body()
    if len(body) > MAX_BODY_BYTES:
        raise AppError(f"the body is over {MAX_BODY_BYTES} bytes; upload in parts", status_code=413)
    content_type = request.headers.get("content-type", "application/json")
    service = CalibrationService(session, backend)
    added, total = await run_in_threadpool(service.add_measurements, slug, body, content_type)
    return MeasurementsCreated(cluster=slug, added=added, total=total)


@router.get(
    "/measurements",
    response_model=MeasurementList,
    responses=problem_responses(404, 422),
    summary="A cluster's measurements",
    operation_id="list_measurements",
    tags=TAGS,
)
def list_measurements(slug: Slug, session: SessionDep, backend: BackendDep) -> MeasurementList:
    return MeasurementList(
        cluster=slug, items=CalibrationService(session, backend).list_measurements(slug)
    )


@router.post(
    "/calibrations",
    response_model=CalibrationRead,
    status_code=status.HTTP_201_CREATED,
    responses=problem_responses(404, 409, 422),
    summary="Fit a performance profile to the cluster's measurements",
    operation_id="calibrate_cluster",
    tags=TAGS,
)
def calibrate(slug: Slug, session: SessionDep, backend: BackendDep) -> CalibrationRead:
    return CalibrationService(session, backend).calibrate(slug)


@router.get(
    "/calibrations",
    response_model=CalibrationList,
    responses=problem_responses(404, 422),
    summary="A cluster's calibrations, newest first",
    operation_id="list_calibrations",
    tags=TAGS,
)
def list_calibrations(slug: Slug, session: SessionDep, backend: BackendDep) -> CalibrationList:
    return CalibrationList(items=CalibrationService(session, backend).list_calibrations(slug))


@router.get(
    "/calibrations/{calibration_id}",
    response_model=CalibrationDetail,
    responses=problem_responses(404, 422),
    summary="One calibration with its comparison of the rows before and after (as its page)",
    operation_id="get_calibration",
    tags=TAGS,
)
def get_calibration(
    slug: Slug, calibration_id: int, session: SessionDep, backend: BackendDep
) -> CalibrationDetail:
    return CalibrationService(session, backend).comparison(slug, calibration_id)


@router.delete(
    "/measurements",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=problem_responses(404, 422),
    summary="Delete a cluster's measurements and, with them, its calibrations",
    description="Deletes the collection: 204 also when it is already empty (404: no cluster).",
    operation_id="delete_measurements",
    tags=TAGS,
)
def delete_measurements(slug: Slug, session: SessionDep, backend: BackendDep) -> Response:
    CalibrationService(session, backend).delete_measurements(slug)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.delete(
    "",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=problem_responses(404, 409, 422),
    tags=["catalog"],
    summary="Delete a user-defined cluster (409 while it has measurements, unless purge=true)",
    description="404 once it is gone: a second DELETE, or the later of two at once.",
    operation_id="delete_cluster",
)
def delete_cluster(
    slug: Slug,
    session: SessionDep,
    backend: BackendDep,
    purge: Annotated[
        bool, Query(description="also delete the cluster's measurements and calibrations")
    ] = False,
) -> Response:
    CalibrationService(session, backend).delete_cluster(slug, purge=purge)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


detached_router = APIRouter(prefix=DETACHED_ROUTE, tags=["calibration"])
Former = Annotated[str, Path(max_length=128, description="the deleted cluster's name")]


@detached_router.get(
    "",
    response_model=DetachedList,
    summary="Measurements and calibrations of deleted clusters, counted per former name",
    operation_id="list_detached_measurements",
)
def list_detached(session: SessionDep) -> DetachedList:
    return DetachedService(session).list()


@detached_router.get(
    "/{cluster}",
    response_model=DetachedRows,
    responses=problem_responses(404, 422),
    summary="The detached measurements and calibrations stored under one former cluster name",
    operation_id="get_detached_measurements",
)
def get_detached(cluster: Former, session: SessionDep) -> DetachedRows:
    return DetachedService(session).get(cluster)


@detached_router.delete(
    "/{cluster}",
    response_model=DetachedDeleted,
    responses=problem_responses(404, 422),
    summary="Delete the detached rows stored under one former cluster name",
    operation_id="delete_detached_measurements_of",
)
def delete_detached_of(cluster: Former, session: SessionDep) -> DetachedDeleted:
    return DetachedService(session).delete(cluster)


@detached_router.delete(
    "",
    response_model=DetachedDeleted,
    summary="Delete every detached measurement and calibration",
    operation_id="delete_detached_measurements",
)
def delete_detached(session: SessionDep) -> DetachedDeleted:
    return DetachedService(session).delete(None)
