"""Adding or changing a GPU type of one's own on the GPU page (as POST and PUT ``/v1/gpus`` do).

Figures are typed in the units the table shows them in (GiB, GB/s, TFLOP/s) and stored in the
catalog's SI fields; only the spelling of a number is checked here (plain ASCII decimal,
:mod:`app.web.numbers`). Everything else is the API's own check, on its one path: the request
schema (:class:`CatalogEntryCreate`) and then the catalog service, whose ``spec.X`` errors are
shown beside the input of X in the form's words. A change adds a version, as PUT does, keeping
what the form does not show (sources, CUDA-visible bytes); built-in GPUs stay read-only: their
figures are sourced in ``models_db/gpus``, and "Copy" opens the form on a copy under a new name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from app.catalog.schemas import CatalogEntryCreate
from app.catalog.service import CatalogService
from app.core.engine import unit_of_work
from app.core.errors import AppError
from app.web import numbers
from app.web.backend import Backend
from app.web.catalog import page

router = APIRouter(include_in_schema=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Figure:
    """One number input of the form and the spec field it fills."""

    name: str
    """The input's name."""
    label: str
    field: str
    """The GPUSpec field (``models_db/gpus``), in SI units."""
    scale: float
    """SI units per unit typed: 2**30 for GiB, 1e9 for GB/s, 1e12 for TFLOP/s."""
    required: bool = True
    whole: bool = False
    """Stored as an integer (bytes, SM count)."""
    hint: str = ""


FIGURES = (
    Figure(name="hbm_gib", label="Memory (GiB)", field="hbm_bytes", scale=2**30, whole=True,
           hint="as nvidia-smi reports it: 79.6 on an H100 SXM 80GB"),
    Figure(name="hbm_bandwidth_gb_s", label="HBM bandwidth (GB/s)",
           field="hbm_bandwidth_bytes_per_s", scale=1e9, hint="3350 on an H100 SXM"),
    Figure(name="peak_bf16_tflop_s", label="Peak BF16, dense (TFLOP/s)",
           field="peak_bf16_flop_per_s", scale=1e12, hint="not the 2:4 sparse figure: 989"),
    Figure(name="peak_fp8_tflop_s", label="Peak FP8, dense (TFLOP/s)",
           field="peak_fp8_flop_per_s", scale=1e12, required=False,
           hint="empty where the GPU has no FP8 tensor cores"),
    Figure(name="intra_node_gb_s", label="Link inside a node per GPU (GB/s)",
           field="intra_node_bandwidth_bytes_per_s", scale=1e9,
           hint="one direction: 450 for NVLink 4"),
    Figure(name="host_link_gb_s", label="Host link (GB/s)",
           field="host_link_bandwidth_bytes_per_s", scale=1e9, required=False,
           hint="one direction, prices CPU offload: 64 for PCIe Gen5 x16"),
    Figure(name="sm_count", label="SMs (compute units)", field="sm_count", scale=1, whole=True,
           required=False, hint="132 on an H100 SXM; empty if unknown"),
)  # fmt: skip
CHOICES = {"architecture": "Architecture", "vendor": "Vendor"}
"""The selects, filled with the values the catalog's GPUs carry."""
BY_FIELD = {f.field: f for f in FIGURES}
BY_FIELD_NAMES = tuple(f.name for f in FIGURES)
WEB = {"via": "web"}
"""The metadata of an entry stored from a page."""


def _choices(backend: Backend) -> dict[str, list[str]]:
    rows = backend.catalog_rows("gpus")
    return {key: sorted({str(r[key]) for r in rows if r.get(key)}) for key in CHOICES}


def context(backend: Backend, values: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    """The form's part of the GPU page."""
    return {
        "gpu_form": {
            "typed": values or {"architecture": "hopper", "vendor": "nvidia"},
            "figures": FIGURES,
            "choices": _choices(backend),
            "choice_labels": CHOICES,
            "errors": {},
            "editing": None,
            "copied": None,
        }
        | extra
    }


def _typed(row: dict[str, Any]) -> dict[str, str]:
    """A stored spec as the form shows it (enough digits that an untouched value stays)."""
    values = {key: str(row.get(key) or "") for key in CHOICES}
    for f in FIGURES:
        if row.get(f.field) is not None:
            values[f.name] = f"{row[f.field] / f.scale:.12g}"
    return values


def edit_context(backend: Backend, slug: str, *, copy: bool) -> dict[str, Any]:
    """The form filled with a GPU's spec: a user GPU to change (``?edit=``), or any GPU to add
    under a new name (``?copy=``, the way to start from a built-in); {} for an unknown one."""
    row = next((r for r in backend.catalog_rows("gpus") if r["slug"] == slug), None)
    if row is None or (row["builtin"] and not copy):
        return {}
    values = _typed(row)
    if copy:
        return context(backend, values | {"slug": f"{slug}-copy"}, copied=slug)
    return context(backend, values | {"slug": slug}, editing=slug)


def to_spec(values: dict[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """(the GPU spec in SI units, an error per input) from the typed values."""
    errors: dict[str, str] = {}
    spec: dict[str, Any] = {key: values[key] for key in CHOICES if values.get(key)}
    for f in FIGURES:
        text = values.get(f.name, "")
        if not text:
            if f.required:
                errors[f.name] = f"{f.label} is needed ({f.hint})."
            elif f.field == "peak_fp8_flop_per_s":
                spec[f.field] = None  # no FP8 tensor cores, as the A100's file says
            continue
        value = numbers.read_decimal(text)
        if value is None:
            errors[f.name] = numbers.refusal(f.label, text, whole=False)
        elif f.whole and f.scale == 1 and value != int(value):
            errors[f.name] = numbers.refusal(f.label, text, whole=True)
        else:
            spec[f.field] = round(value * f.scale) if f.whole else value * f.scale
    return spec, errors


def _in_form_words(message: str) -> str:
    """A service message about ``hbm_bytes`` said about the input the user typed into."""
    for f in FIGURES:
        message = re.sub(rf"\b(spec\.)?{f.field}\b", f.label, message)
    return message


def errors_of(exc: AppError | ValidationError) -> dict[str, str]:
    """The API's errors (``spec.X`` or ``slug``) under the form's inputs."""
    if isinstance(exc, ValidationError):
        listed = [{"field": ".".join(str(p) for p in e["loc"]), "message": e["msg"]}
                  for e in exc.errors()]  # fmt: skip
    else:
        listed = list(getattr(exc, "errors", None) or []) or [{"field": "", "message": exc.message}]
    found: dict[str, str] = {}
    for error in listed:
        field = str(error.get("field") or "").removeprefix("body.").removeprefix("spec.")
        figure = BY_FIELD.get(field)
        name = figure.name if figure else field if field in CHOICES else "slug"
        message = _in_form_words(str(error.get("message")))
        if field == "slug":  # the schema's pattern (a regex), said as the other forms say it
            message = SLUG_RULE
        found.setdefault(name, message)
    return found


SLUG_RULE = (
    "Name must be lower-case letters, digits, '.', '_' or '-', at most 128 characters "
    "(a slug such as my-h100)."
)


def _slug_error(slug: str) -> dict[str, str]:
    """The request schema's verdict on the name alone, so it is said with the figures' errors
    at once rather than after they are mended."""
    try:
        CatalogEntryCreate.model_validate({"slug": slug, "spec": {}})
    except ValidationError as exc:
        return errors_of(exc)
    return {}


@router.post("/catalog/gpus", response_class=HTMLResponse)
async def save_gpu(request: Request, backend: Backend) -> Response:
    form = await request.form()
    values = {k: str(form.get(k, "")).strip() for k in ("slug", *CHOICES, *BY_FIELD_NAMES)}
    editing = str(form.get("editing", "")) or None
    if editing:
        values["slug"] = editing  # a change keeps the name it was opened with
    spec, errors = to_spec(values)
    if errors:
        errors = _slug_error(values["slug"]) | errors
    else:
        try:
            await run_in_threadpool(_store, request, values["slug"], spec, editing is not None)
        except (AppError, ValidationError) as exc:
            errors = errors_of(exc)
            status = getattr(exc, "status_code", 422)
            if status == 409 and not editing and "built in" not in str(exc):
                errors = {"slug": f"A GPU type named {values['slug']} exists: change it with "
                          "its Edit link in the table, or pick another name."}  # fmt: skip
    if errors:
        ctx = context(backend, values, errors=errors, editing=editing)
        return page(request, backend, "gpus", ctx, status_code=422)
    return RedirectResponse(f"/catalog/gpus?saved={values['slug']}", status_code=303)


def _store(request: Request, slug: str, spec: dict[str, Any], change: bool) -> None:
    """Through the API's path: its request schema, then the service (which checks the spec)."""
    body = CatalogEntryCreate.model_validate({"slug": slug, "spec": spec, "metadata": WEB})
    with unit_of_work(request.app.state.session_factory) as session:
        service = CatalogService(session)
        if change:  # what the form does not show (sources, CUDA-visible bytes) is kept
            stored = service.get("gpu", slug).spec
            shown = set(BY_FIELD) | set(CHOICES)
            kept = {k: v for k, v in stored.items() if k not in shown and k != "name"}
            service.update("gpu", slug, kept | body.spec, body.metadata)
        else:
            service.create("gpu", slug, body.spec, body.metadata)
