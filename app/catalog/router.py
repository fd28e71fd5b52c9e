"""Catalog routes: ``/v1/models``, ``/v1/gpus``, ``/v1/clusters`` (thin: parse, call, return)."""

from typing import Annotated

from fastapi import APIRouter, Body, Path, Response, status

from app.catalog.schemas import (
    CatalogEntryCreate,
    CatalogEntryRead,
    CatalogEntryUpdate,
    CatalogList,
    HFImport,
)
from app.catalog.service import CatalogService
from app.core.deps import SessionDep
from app.core.schemas import problem_responses

Slug = Annotated[str, Path(max_length=128, description="catalog slug")]

GPU_EXAMPLE = {
    "slug": "my-h100",
    "spec": {
        "hbm_bytes": 85_520_809_984,
        "hbm_bandwidth_bytes_per_s": 3.35e12,
        "peak_bf16_flop_per_s": 989e12,
        "peak_fp8_flop_per_s": 1979e12,
        "intra_node_bandwidth_bytes_per_s": 450e9,
    },
}
CLUSTER_EXAMPLE = {
    "slug": "my-h100-cluster",
    "spec": {"gpu": "h100-sxm-80gb", "gpus_per_node": 8, "inter_node_bandwidth_bytes_per_s": 50e9},
}


def catalog_router(kind: str) -> APIRouter:
    """The five routes of one catalog kind."""
    plural = f"{kind}s"
    router = APIRouter(prefix=f"/v1/{plural}", tags=["catalog"])
    example = {"gpu": GPU_EXAMPLE, "cluster": CLUSTER_EXAMPLE}.get(kind)
    create_body = (
        Annotated[CatalogEntryCreate, Body(examples=[example])] if example else CatalogEntryCreate
    )
    update_body = (
        Annotated[CatalogEntryUpdate, Body(examples=[{"spec": example["spec"]}])]
        if example
        else CatalogEntryUpdate
    )

    @router.get(
        "", response_model=CatalogList, summary=f"List {plural}", operation_id=f"list_{plural}"
    )
    def list_entries(session: SessionDep) -> CatalogList:
        return CatalogList(items=CatalogService(session).list(kind))

    @router.post(
        "",
        response_model=CatalogEntryRead,
        status_code=status.HTTP_201_CREATED,
        responses=problem_responses(409, 422),
        summary=f"Create a user-defined {kind}",
        operation_id=f"create_{kind}",
    )
    def create_entry(
        body: create_body,  # type: ignore[valid-type]
        session: SessionDep,
        response: Response,
    ) -> CatalogEntryRead:
        created: CatalogEntryCreate = body
        entry = CatalogService(session).create(kind, created.slug, created.spec, created.metadata)
        response.headers["Location"] = f"/v1/{plural}/{entry.slug}"
        return entry

    @router.get(
        "/{slug}",
        response_model=CatalogEntryRead,
        responses=problem_responses(404, 422),
        summary=f"Get the latest version of a {kind}",
        operation_id=f"get_{kind}",
    )
    def get_entry(slug: Slug, session: SessionDep) -> CatalogEntryRead:
        return CatalogService(session).get(kind, slug)

    @router.put(
        "/{slug}",
        response_model=CatalogEntryRead,
        responses=problem_responses(404, 409, 422),
        summary=f"Store a new version of a user-defined {kind}",
        operation_id=f"update_{kind}",
    )
    def update_entry(
        slug: Slug,
        body: update_body,  # type: ignore[valid-type]
        session: SessionDep,
    ) -> CatalogEntryRead:
        changed: CatalogEntryUpdate = body
        return CatalogService(session).update(kind, slug, changed.spec, changed.metadata)

    if kind != "cluster":  # a cluster's DELETE is app/calibration/router.py's: it has rows

        @router.delete(
            "/{slug}",
            status_code=status.HTTP_204_NO_CONTENT,
            responses=problem_responses(404, 409, 422),
            summary=f"Delete a user-defined {kind}",
            description="404 once it is gone: a second DELETE, or the later of two at once.",
            operation_id=f"delete_{kind}",
        )
        def delete_entry(slug: Slug, session: SessionDep) -> Response:
            CatalogService(session).delete(kind, slug)
            return Response(status_code=status.HTTP_204_NO_CONTENT)

    if kind == "model":

        @router.post(
            "/import-hf",
            response_model=CatalogEntryRead,
            status_code=status.HTTP_201_CREATED,
            responses=problem_responses(409, 422),
            summary="Create a model from a Hugging Face config.json",
            operation_id="import_hf_model",
        )
        def import_hf(body: HFImport, session: SessionDep, response: Response) -> CatalogEntryRead:
            entry = CatalogService(session).import_hf(body.slug, body.config)
            response.headers["Location"] = f"/v1/models/{entry.slug}"
            return entry

    return router
