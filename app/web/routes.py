"""The plan pages: the form, the job's progress and results, one plan's detail, launch.sh.

Every page works without JavaScript (POST, 303, a refreshing progress page); with htmx the
form posts in place and the results replace the progress fragment, polled every 500 ms.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.templating import Jinja2Templates

from app.planning.reports import RankedPlan
from app.security.ownership import NotYoursError, Viewer, viewer_of
from app.web import (
    compare,
    form_checks,
    forms,
    insight,
    job_summary,
    memory_form,
    present,
    stack_form,
    views,
)
from app.web.backend import Backend, JobView, WebBackend
from app.web.templating import templates as make_templates
from planner.specs import SpecError

router = APIRouter(include_in_schema=False)
PREFILL_FIELDS = frozenset(
    ("model", "gpu", "num_gpus", "seq_length", "global_batch_size", "token_budget")
) | {"usd_per_gpu_hour"}
"""Form fields a link may prefill (``/?model=...&num_gpus=...``, from the scaling rows)."""


def _templates(request: Request) -> Jinja2Templates:
    return make_templates(request.app)


def _is_htmx(request: Request) -> bool:
    return request.headers.get("HX-Request") == "true"


SUBMISSION = re.compile(r"[A-Za-z0-9_-]{16,64}")
"""The plan form's hidden ``submission`` token: one per page, kept by the page it returns."""


def _submission(values: dict[str, Any]) -> str:
    token = str(values.get("submission") or "")
    return token if SUBMISSION.fullmatch(token) else secrets.token_urlsafe(16)


def _form_context(backend: WebBackend, state: forms.FormState) -> dict[str, Any]:
    return {
        "form": state,
        "submission": _submission(state.values),
        "models": backend.list_models(),
        "gpus": backend.list_gpus(),
        "precisions": forms.PRECISIONS,
        "axis_fields": forms.AXIS_FIELDS,
        "max_fields": forms.MAX_FIELDS,
        "recompute_options": forms.RECOMPUTE_OPTIONS,
        "sharding_options": forms.SHARDING_OPTIONS,
        "objectives": forms.OBJECTIVES,
        "clusters": _cluster_choices(backend),
        "input_rules": form_checks.all_input_rules(),
        "advanced_groups": forms.ADVANCED_GROUPS,
        "memory": {
            "questions": memory_form.QUESTIONS,
            "dtypes": memory_form.DTYPE_OPTIONS,
            "fp8_gather": tuple(memory_form.FP8_GATHER_OPTIONS),
            "cuda_graphs": memory_form.CUDA_GRAPH_OPTIONS,
            "modules": memory_form.RECOMPUTE_MODULE_OPTIONS,
            "offload_modules": memory_form.OFFLOAD_MODULE_OPTIONS,
        },
        "stack": stack_form.context(),
        "nav": "plan",
    }


def _cluster_choices(backend: WebBackend) -> list[tuple[str, list[dict[str, Any]]]]:
    """The cluster select's groups: the user's stored clusters first, then the presets."""
    rows = backend.catalog_rows("clusters")
    return [
        ("Your clusters", [r for r in rows if not r.get("builtin", True)]),
        ("Presets", [r for r in rows if r.get("builtin", True)]),
    ]


def _job_context(job: JobView) -> dict[str, Any]:
    ctx: dict[str, Any] = {
        "job": job,
        "asked": job_summary.summary(job.request),
        "page_title": job_summary.page_title(job.request, finished=job.finished, status=job.status),
    }
    if job.status == "succeeded" and job.result is not None:
        plans = job.result.plans
        rows = [views.plan_row(i + 1, p) for i, p in enumerate(plans)]
        ctx["rows"] = present.group_variants(rows, plans)  # near-duplicates under their best
        ctx["objective_columns"] = present.objective_columns(plans)
        ctx["scatter"] = insight.add_infeasible_points(views.scatter_chart(job.result), job.result)
        ctx["rejections"] = insight.rejection_rows(job.result, job.request)
        ctx["funnel"] = insight.funnel_steps(job.result)
        ctx["infeasible"] = insight.infeasible_view(job.result)
        ctx["head"] = views.result_head(job.result)
        # how sure: plan 1's predictive band, said beside the pick on the results page
        ctx["best_band"] = insight.prediction(plans[0])["tokens"] if plans else None
    return ctx


def _get_job(backend: WebBackend, job_id: str, viewer: Viewer) -> JobView:
    job = backend.get_plan(job_id)
    if job is None:
        raise _NotFound(f"no plan {job_id!r}; it may have been made before a restart")
    try:  # the same rule as GET /v1/plan-jobs/{id}: the key that made it, or admin
        viewer.check(job.owner_key_id, f"plan {job_id}")
    except NotYoursError as exc:
        raise _NotFound(exc.message) from None
    return job


class _NotFound(Exception):
    pass


class _FormErrors(Exception):
    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(errors.values()))
        self.errors = errors


@router.get("/", response_class=HTMLResponse)
def home(request: Request, backend: Backend) -> Response:
    state = forms.default_state(backend.list_models(), backend.list_gpus())
    # links from other pages (a scaling row) prefill the form; the user still submits it
    state.values.update({k: v for k, v in request.query_params.items() if k in PREFILL_FIELDS})
    return _templates(request).TemplateResponse(request, "home.html", _form_context(backend, state))


@router.post("/plans", response_class=HTMLResponse)
async def submit_plan(request: Request, backend: Backend) -> Response:
    form = await request.form()
    groups = ("recompute", "optimizer_sharding", *memory_form.MULTI)  # checkbox groups
    multi = {k: [str(v) for v in form.getlist(k)] for k in groups}
    values = forms.form_values({k: v for k, v in form.items()}, multi)
    try:
        if values.get("cluster"):  # its own GPUs per node (a node count means whole nodes)
            rows = {r["slug"]: r for r in backend.catalog_rows("clusters")}
            chosen = rows.get(str(values["cluster"])) or {}
            values["gpus_per_node"] = str(chosen.get("gpus_per_node") or "")
        errors = form_checks.check_values(values)  # every empty or out-of-range field at once
        if errors:
            raise _FormErrors(errors)
        req = forms.to_request(values)
        req = await _run_sync(backend.check_request, req)
        token = str(values.get("submission") or "")
        submission = token if SUBMISSION.fullmatch(token) else None
        job_id = await _run_sync(backend.submit_plan, req, viewer_of(request).key_id, submission)
    except (SpecError, _FormErrors) as exc:
        errors = exc.errors if isinstance(exc, _FormErrors) else {}
        errors = errors or form_checks.request_errors(exc, values)
        state = forms.FormState(
            values=values,
            errors=errors,
            message=None if errors else str(getattr(exc, "message", exc)),
        )
        template = "_workspace.html" if _is_htmx(request) else "home.html"
        return _templates(request).TemplateResponse(
            request, template, _form_context(backend, state), status_code=422
        )
    if not _is_htmx(request):
        return RedirectResponse(f"/plans/{job_id}", status_code=303)
    job = _get_job(backend, job_id, viewer_of(request))
    ctx = _form_context(backend, forms.FormState(values=values)) | _job_context(job)
    ctx |= compare.context(backend, job, viewer_of(request))
    # a fragment with its own <title>: htmx renames the tab and the history entry it pushes
    ctx["partial"] = "_workspace.html"
    response = _templates(request).TemplateResponse(request, "_partial.html", ctx)
    response.headers["HX-Push-Url"] = f"/plans/{job_id}"
    return response


async def _run_sync(fn: Any, *args: Any) -> Any:
    from starlette.concurrency import run_in_threadpool

    return await run_in_threadpool(fn, *args)


@router.get("/plans/{job_id}", response_class=HTMLResponse)
def plan_page(request: Request, job_id: str, backend: Backend) -> Response:
    try:
        job = _get_job(backend, job_id, viewer_of(request))
    except _NotFound as exc:
        return _not_found(request, str(exc))
    state = forms.FormState(values=forms.values_from_request(job.request))
    ctx = _form_context(backend, state) | _job_context(job)
    ctx |= compare.context(backend, job, viewer_of(request))
    return _templates(request).TemplateResponse(request, "home.html", ctx)


@router.get("/plans/{job_id}/status", response_class=HTMLResponse)
def plan_status(request: Request, job_id: str, backend: Backend) -> Response:
    try:
        job = _get_job(backend, job_id, viewer_of(request))
    except _NotFound as exc:
        return _not_found(request, str(exc))
    ctx = _job_context(job) | compare.context(backend, job, viewer_of(request))
    ctx["partial"] = "_job.html"
    return _templates(request).TemplateResponse(request, "_partial.html", ctx)


@router.post("/plans/{job_id}/try/{index}", response_class=HTMLResponse)
def try_change(request: Request, job_id: str, index: int, backend: Backend) -> Response:
    """Plan one of an infeasible result's checked changes: the stored request with it applied."""
    try:
        job = _get_job(backend, job_id, viewer_of(request))
        changes = (insight.infeasible_block(job.result) or {}).get("changes") or []
        if not 0 <= index < len(changes):
            raise _NotFound(f"plan {job_id!r} suggests no change {index}")
    except _NotFound as exc:
        return _not_found(request, str(exc))
    try:
        req = backend.check_request(insight.change_request(job.request, changes[index]))
        new_id = backend.submit_plan(req, viewer_of(request).key_id)
    except SpecError as exc:
        return _templates(request).TemplateResponse(
            request, "error.html",
            {"status": 422, "title": "That change does not plan", "message": exc.message,
             "errors": []},
            status_code=422,
        )  # fmt: skip
    return RedirectResponse(f"/plans/{new_id}", status_code=303)


def _plan_at(
    backend: WebBackend, job_id: str, rank: int, viewer: Viewer
) -> tuple[JobView, RankedPlan]:
    job = _get_job(backend, job_id, viewer)
    plans: Sequence[RankedPlan] = job.result.plans if job.result is not None else []
    if not 1 <= rank <= len(plans):
        raise _NotFound(f"plan {job_id!r} has no rank {rank} (it has {len(plans)} plans)")
    return job, plans[rank - 1]


@router.get("/plans/{job_id}/{rank}", response_class=HTMLResponse)
def plan_detail(request: Request, job_id: str, rank: int, backend: Backend) -> Response:
    try:
        job, plan = _plan_at(backend, job_id, rank, viewer_of(request))
    except _NotFound as exc:
        return _not_found(request, str(exc))
    ctx = {
        "job": job,
        "asked": job_summary.summary(job.request),
        "rank": rank,
        "plan": plan,
        "row": views.plan_row(rank, plan),
        "memory_chart": views.memory_chart(plan),
        "time_chart": views.time_chart(plan),
        **views.component_tables(plan),
        "stages": insight.stage_rows(plan),
        "worst_stage": insight.worst_stage_title(plan),
        "prediction": insight.prediction(plan),
        "command": views.launch_command(plan),
        "nav": "plan",
    }
    return _templates(request).TemplateResponse(request, "plan_detail.html", ctx)


@router.get("/plans/{job_id}/{rank}/launch.sh")
def launch_sh(request: Request, job_id: str, rank: int, backend: Backend) -> Response:
    try:
        _job, plan = _plan_at(backend, job_id, rank, viewer_of(request))
    except _NotFound as exc:
        return PlainTextResponse(str(exc), status_code=404)
    return PlainTextResponse(
        views.launch_script(plan),
        media_type="text/x-shellscript",
        headers={"Content-Disposition": f'attachment; filename="launch-{rank}.sh"'},
    )


def _not_found(request: Request, message: str) -> Response:
    return _templates(request).TemplateResponse(
        request,
        "error.html",
        {"status": 404, "title": "Not found", "message": message, "errors": []},
        status_code=404,
    )
