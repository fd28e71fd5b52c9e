"""Adding or changing a cluster of one's own on the clusters page (as POST and PUT
``/v1/clusters`` do): a name, the GPU type, GPUs per node and the network.

Rates are typed in GB/s (the table shows them so) and stored in bytes/s; the checks and their
messages are the catalog service's (:meth:`CatalogService.validate`), each shown beside its
input. A change adds a version of the entry, as PUT does; built-in presets stay read-only.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from app.catalog.network import TOPOLOGY_LABELS
from app.catalog.service import CatalogService
from app.core.engine import unit_of_work
from app.core.errors import AppError
from app.core.schemas import SLUG_PATTERN
from app.web import numbers
from app.web.backend import Backend
from app.web.catalog import page

router = APIRouter(include_in_schema=False)

GB = 1e9
"""The form's rates are GB/s (10^9 bytes/s), as the clusters table shows them."""
FIELDS = {
    "slug": "Name",
    "gpu": "GPU type",
    "gpus_per_node": "GPUs per node",
    "inter_node_bandwidth_gb_s": "Inter-node bandwidth per GPU (GB/s)",
    "nics_per_node": "NICs per node",
    "nic_bandwidth_gb_s": "NIC rate (GB/s)",
    "topology": "Inside a node",
}
SPEC_FIELDS = {
    "gpu": "gpu",
    "gpus_per_node": "gpus_per_node",
    "inter_node_bandwidth_bytes_per_s": "inter_node_bandwidth_gb_s",
    "nics_per_node": "nics_per_node",
    "nic_bandwidth_bytes_per_s": "nic_bandwidth_gb_s",
    "intra_node_topology": "topology",
}
"""The spec's field (in the service's ``spec.X`` errors) -> the form's input."""


def context(backend: Backend, values: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    """The form's part of the clusters page."""
    return {
        "cluster_form": {
            "typed": values or {"gpus_per_node": "8", "topology": "switch"},
            "gpus": backend.list_gpus(),
            "errors": {},
            "labels": FIELDS,
            "topologies": TOPOLOGY_LABELS,
            "editing": None,
        }
        | extra
    }


def edit_context(backend: Backend, slug: str) -> dict[str, Any]:
    """The form filled with a user cluster's stored spec (``?edit=SLUG``); {} for another."""
    row = next(
        (r for r in backend.catalog_rows("clusters") if r["slug"] == slug and not r["builtin"]),
        None,
    )
    if row is None:
        return {}
    values = {"slug": slug, "gpu": str(row["gpu"]), "gpus_per_node": str(row["gpus_per_node"])}
    values["topology"] = str(row.get("intra_node_topology") or "switch")
    for key, name in (("inter_node_bandwidth_bytes_per_s", "inter_node_bandwidth_gb_s"),
                      ("nic_bandwidth_bytes_per_s", "nic_bandwidth_gb_s")):  # fmt: skip
        if row.get(key):
            values[name] = f"{row[key] / GB:g}"
    if row.get("nics_per_node"):
        values["nics_per_node"] = str(row["nics_per_node"])
    return context(backend, values, editing=slug)


def _number(values: dict[str, str], name: str, errors: dict[str, str], *, whole: bool) -> Any:
    text = values.get(name, "")
    if not text:
        return None
    value = numbers.read_decimal(text)  # ASCII decimal only: not '٣' or '1_000'
    if value is None or value <= 0 or (whole and value != int(value)):
        kind = "a whole number, 1 or more" if whole else "a number above 0"
        form = numbers.WHOLE_FORM if whole else numbers.DECIMAL_FORM
        errors[name] = f"{FIELDS[name]} must be {kind} ({form}); you typed {text!r}."
        return None
    return int(value) if whole else value * GB


def to_spec(values: dict[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """(the cluster spec, an error per input) from the typed values."""
    errors: dict[str, str] = {}
    if not re.fullmatch(SLUG_PATTERN, values.get("slug", "")):
        errors["slug"] = (
            "Name must be lower-case letters, digits, '.', '_' or '-' (a slug such as my-dgx)."
        )
    spec: dict[str, Any] = {"gpu": values.get("gpu", "")}
    spec["intra_node_topology"] = values.get("topology") or "switch"
    numbers = (("gpus_per_node", True), ("inter_node_bandwidth_gb_s", False),
               ("nics_per_node", True), ("nic_bandwidth_gb_s", False))  # fmt: skip
    for name, whole in numbers:
        value = _number(values, name, errors, whole=whole)
        key = next(k for k, v in SPEC_FIELDS.items() if v == name)
        if value is not None:
            spec[key] = value
    if "gpus_per_node" not in spec and "gpus_per_node" not in errors:
        errors["gpus_per_node"] = "GPUs per node is needed (8 on a DGX or HGX node)."
    return spec, errors


def _errors_of(exc: AppError) -> dict[str, str]:
    """The service's ``spec.X`` errors under the form's inputs."""
    found: dict[str, str] = {}
    for error in getattr(exc, "errors", None) or []:
        field = str(error.get("field") or "").removeprefix("spec.")
        found[SPEC_FIELDS.get(field, "slug")] = str(error.get("message"))
    return found or {"slug": exc.message}


@router.post("/catalog/clusters", response_class=HTMLResponse)
async def save_cluster(request: Request, backend: Backend) -> Response:
    form = await request.form()
    values = {k: str(form.get(k, "")).strip() for k in FIELDS}
    editing = str(form.get("editing", "")) or None
    if editing:
        values["slug"] = editing  # a change keeps the name it was opened with
    spec, errors = to_spec(values)
    if not errors:
        try:
            await run_in_threadpool(_store, request, values["slug"], spec, editing is not None)
        except AppError as exc:
            errors = _errors_of(exc)
            if exc.status_code == 409 and not editing:  # the API's text points at PUT
                errors = {"slug": f"A cluster named {values['slug']} exists: change it with "
                          "its Edit link in the table, or pick another name."}  # fmt: skip
    if errors:
        ctx = context(backend, values, errors=errors, editing=editing)
        return page(request, backend, "clusters", ctx, status_code=422)
    return RedirectResponse(f"/catalog/clusters?saved={values['slug']}", status_code=303)


def _store(request: Request, slug: str, spec: dict[str, Any], change: bool) -> None:
    with unit_of_work(request.app.state.session_factory) as session:
        service = CatalogService(session)
        if change:  # what the form does not show (latencies set through the API) is kept
            stored = service.get("cluster", slug).spec
            kept = {k: v for k, v in stored.items() if k not in SPEC_FIELDS and k != "sources"}
            service.update("cluster", slug, kept | spec, {"via": "web"})
        else:
            service.create("cluster", slug, spec, {"via": "web"})
