"""A typed Python client of the planner service.

    from app.sdk import PlannerClient
    with PlannerClient("http://localhost:8000") as planner:
        job = planner.submit_plan({"model": "llama3.1-70b", "gpu": "h100-sxm-80gb",
                                   "num_gpus": 64, "seq_length": 8192, "global_batch_size": 128})
        job = planner.wait_for_job(job["id"], timeout=600)
        plans = planner.get_plans(job["id"])  # typed: plans.plans[0].performance.mfu
        plans.raw  # the JSON, as `planner plan --json` prints it

Every error comes back as :class:`PlannerAPIError` with the problem document.
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from app.catalog.schemas import ClusterPresetSpec
from app.planning.reports import (
    InverseResult,
    LayoutReport,
    PlanAnswer,
    PlanResult,
    ScalingCurve,
    plan_answer,
)
from app.planning.schemas import (
    FINISHED,
    EvaluationRequest,
    PlanJobCreate,
    ScalingCurveCreate,
)

__all__ = [
    "ClusterPresetSpec",
    "EvaluationRequest",
    "InverseResult",
    "LayoutReport",
    "PlanJobCreate",
    "PlanResult",
    "PlannerAPIError",
    "PlannerClient",
    "ScalingCurve",
    "ScalingCurveCreate",
]

JSON = dict[str, Any]


def _body(request: BaseModel | JSON) -> JSON:
    """A typed request (the API's own schema, checked here) or its JSON, as the body to send."""
    if isinstance(request, BaseModel):
        return request.model_dump(mode="json", exclude_unset=True)
    return request


class PlannerAPIError(Exception):
    """A non-2xx answer; ``problem`` is the server's problem JSON (type, title, detail, errors)."""

    def __init__(self, status: int, problem: JSON) -> None:
        self.status = status
        self.problem = problem
        detail = problem.get("detail") or problem.get("title") or "error"
        super().__init__(f"HTTP {status}: {detail}")

    @property
    def errors(self) -> list[JSON]:
        errors: list[JSON] = self.problem.get("errors", [])
        return errors


def _seg(value: object) -> str:
    """One path segment, quoted: a name like ``../keys`` stays inside its route instead of
    reaching another one (httpx resolves dot segments)."""
    return quote(str(value), safe="")


class PlannerClient:
    """Client of the ``/v1`` API. ``timeout`` is per HTTP request, in seconds."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        timeout: float = 30.0,
        *,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"X-API-Key": api_key} if api_key else {}
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"), headers=headers, timeout=timeout, transport=transport
        )

    # --- plumbing ----------------------------------------------------------------------------
    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> PlannerClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._http.request(method, path, **kwargs)
        if response.status_code >= 400:
            try:
                problem = response.json()
            except ValueError:
                problem = {"detail": response.text[:500]}
            if not isinstance(problem, dict):
                problem = {"detail": str(problem)}
            raise PlannerAPIError(response.status_code, problem)
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    # --- catalog -------------------------------------------------------------------------------
    def list_models(self) -> list[JSON]:
        items: list[JSON] = self._request("GET", "/v1/models")["items"]
        return items

    def get_model(self, slug: str) -> JSON:
        entry: JSON = self._request("GET", f"/v1/models/{_seg(slug)}")
        return entry

    def create_model(self, slug: str, spec: JSON) -> JSON:
        entry: JSON = self._request("POST", "/v1/models", json={"slug": slug, "spec": spec})
        return entry

    def import_hf_model(self, slug: str, config: JSON) -> JSON:
        entry: JSON = self._request(
            "POST", "/v1/models/import-hf", json={"slug": slug, "config": config}
        )
        return entry

    def list_gpus(self) -> list[JSON]:
        items: list[JSON] = self._request("GET", "/v1/gpus")["items"]
        return items

    def list_clusters(self) -> list[JSON]:
        items: list[JSON] = self._request("GET", "/v1/clusters")["items"]
        return items

    def create_cluster(self, slug: str, spec: ClusterPresetSpec | JSON) -> JSON:
        """A user cluster: GPU, GPUs per node and its network (per GPU, or NICs x rate)."""
        entry: JSON = self._request(
            "POST", "/v1/clusters", json={"slug": slug, "spec": _body(spec)}
        )
        return entry

    def delete_cluster(self, slug: str, *, purge: bool = False) -> None:
        """A user cluster; one with measurements or calibrations is a 409 (PlannerAPIError)
        unless ``purge`` deletes them with it."""
        self._request(
            "DELETE", f"/v1/clusters/{_seg(slug)}", params={"purge": purge} if purge else None
        )

    # --- evaluation and plan jobs ----------------------------------------------------------------
    def evaluate(self, request: EvaluationRequest | JSON) -> LayoutReport:
        """Evaluate one layout (``POST /v1/evaluations``); ``.raw`` is the JSON."""
        body = _body(request)
        return LayoutReport.model_validate(self._request("POST", "/v1/evaluations", json=body))

    def submit_plan(
        self,
        request: PlanJobCreate | JSON,
        *,
        idempotency_key: str | None = None,
        wait_s: float = 0,
    ) -> JSON:
        """Queue a plan job; with ``wait_s`` the server holds the answer until it finishes."""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        params = {"wait": wait_s} if wait_s else {}
        job: JSON = self._request(
            "POST",
            "/v1/plan-jobs",
            json=_body(request),
            headers=headers,
            params=params,
            timeout=max(self._http.timeout.read or 30.0, wait_s + 30.0),
        )
        return job

    def get_job(self, job_id: str) -> JSON:
        job: JSON = self._request("GET", f"/v1/plan-jobs/{_seg(job_id)}")
        return job

    def list_jobs(self, status: str | None = None, limit: int = 50, offset: int = 0) -> JSON:
        params: dict[str, Any] = {"limit": limit, "offset": offset}
        if status:
            params["status"] = status
        page: JSON = self._request("GET", "/v1/plan-jobs", params=params)
        return page

    def cancel_job(self, job_id: str) -> JSON:
        job: JSON = self._request("POST", f"/v1/plan-jobs/{_seg(job_id)}/cancel")
        return job

    def wait_for_job(self, job_id: str, timeout: float = 600.0, poll_s: float = 0.5) -> JSON:
        """Poll until the job has finished; raises TimeoutError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            job = self.get_job(job_id)
            if job["status"] in FINISHED:
                return job
            if time.monotonic() >= deadline:
                raise TimeoutError(f"plan job {job_id} is still {job['status']} after {timeout} s")
            time.sleep(min(poll_s, max(0.01, deadline - time.monotonic())))

    def get_plans(self, job_id: str) -> PlanAnswer:
        """The ranked plans of a finished job (or its inverse question's answer, an
        ``InverseResult``); ``.raw`` is the JSON."""
        return plan_answer(self._request("GET", f"/v1/plan-jobs/{_seg(job_id)}/plans"))

    # --- measurements and calibration -------------------------------------------------------------
    def add_measurements(self, cluster: str, rows: list[JSON]) -> JSON:
        out: JSON = self._request("POST", f"/v1/clusters/{_seg(cluster)}/measurements", json=rows)
        return out

    def add_measurements_csv(self, cluster: str, csv_text: str) -> JSON:
        out: JSON = self._request(
            "POST",
            f"/v1/clusters/{_seg(cluster)}/measurements",
            content=csv_text.encode(),
            headers={"Content-Type": "text/csv"},
        )
        return out

    def add_megatron_log(self, cluster: str, log_text: str) -> JSON:
        out: JSON = self._request(
            "POST",
            f"/v1/clusters/{_seg(cluster)}/measurements",
            content=log_text.encode(),
            headers={"Content-Type": "text/plain"},
        )
        return out

    def delete_measurements(self, cluster: str) -> None:
        """The cluster's measurements and the calibrations fitted to them."""
        self._request("DELETE", f"/v1/clusters/{_seg(cluster)}/measurements")

    def detached_measurements(self, cluster: str | None = None) -> JSON:
        """Rows of deleted clusters: counts per former name, or (``cluster``) those rows."""
        path = "/v1/detached-measurements" + (f"/{_seg(cluster)}" if cluster else "")
        out: JSON = self._request("GET", path)
        return out

    def delete_detached_measurements(self, cluster: str | None = None) -> JSON:
        """Delete the detached rows of one former cluster name, or all; how many went."""
        path = "/v1/detached-measurements" + (f"/{_seg(cluster)}" if cluster else "")
        out: JSON = self._request("DELETE", path)
        return out

    def calibrate(self, cluster: str) -> JSON:
        out: JSON = self._request("POST", f"/v1/clusters/{_seg(cluster)}/calibrations")
        return out

    def suggest_runs(
        self,
        *,
        evaluation: EvaluationRequest | JSON | None = None,
        plan: JSON | None = None,
        k: int = 3,
        max_nodes: int | None = None,
    ) -> JSON:
        """The ``k`` short runs that would most reduce one plan's uncertainty, each with its
        launch command (``POST /v1/calibration-suggestions``); give one of ``evaluation`` (a
        layout) or ``plan`` (a search), and ``max_nodes`` as the budget per run.
        ``plan_uncertainty_pct_before`` / ``_after`` count the profile's coefficients and the
        cluster's level together; ``uncertainty_before`` / ``_after`` give each part
        (app.planning.suggestion_schemas)."""
        body: JSON = {"k": k}
        if evaluation is not None:
            body["evaluation"] = _body(evaluation)
        if plan is not None:
            body["plan"] = plan
        if max_nodes is not None:
            body["max_nodes"] = max_nodes
        out: JSON = self._request("POST", "/v1/calibration-suggestions", json=body)
        return out

    # --- batches and scaling curves -------------------------------------------------------------
    def submit_batch(self, jobs: list[JSON]) -> JSON:
        """Queue plan jobs (each may carry a ``name``); ``POST /v1/batches`` -> the batch.

        A job the single-plan request refuses makes the whole batch a :class:`PlannerAPIError`
        (422, nothing queued) whose ``errors`` name each field as ``jobs.N.field``."""
        batch: JSON = self._request("POST", "/v1/batches", json={"jobs": jobs})
        return batch

    def get_batch(self, batch_id: str) -> JSON:
        batch: JSON = self._request("GET", f"/v1/batches/{_seg(batch_id)}")
        return batch

    def list_batches(self, limit: int = 50, offset: int = 0) -> JSON:
        """``GET /v1/batches``: ``{"items": [...], "total", "limit", "offset"}``, newest first."""
        page: JSON = self._request("GET", "/v1/batches", params={"limit": limit, "offset": offset})
        return page

    def wait_for_batch(
        self, batch_id: str, timeout: float = 3600.0, poll_s: float = 0.5, on_progress: Any = None
    ) -> JSON:
        """Poll until every job of the batch has finished; ``on_progress(batch)`` per poll."""
        deadline = time.monotonic() + timeout
        while True:
            batch = self.get_batch(batch_id)
            if on_progress is not None:
                on_progress(batch)
            if batch["status"] == "finished":
                return batch
            if time.monotonic() >= deadline:
                raise TimeoutError(f"batch {batch_id} is still {batch['status']} after {timeout} s")
            time.sleep(min(poll_s, max(0.01, deadline - time.monotonic())))

    def get_batch_results(self, batch_id: str, format: str = "json") -> Any:
        """Rows of a finished batch: a list of dicts (json) or the CSV text (csv)."""
        if format == "csv":
            response = self._http.get(
                f"/v1/batches/{_seg(batch_id)}/results", params={"format": "csv"}
            )
            if response.status_code >= 400:
                self._request("GET", f"/v1/batches/{_seg(batch_id)}/results")  # raises the problem
            return response.text
        return self._request(
            "GET", f"/v1/batches/{_seg(batch_id)}/results", params={"format": "json"}
        )

    def scaling_curve(
        self, request: ScalingCurveCreate | JSON, timeout: float = 300.0
    ) -> ScalingCurve:
        """The best plan at each GPU count of ``request['num_gpus_options']``; ``.raw``: JSON."""
        curve = self._request("POST", "/v1/scaling-curves", json=_body(request), timeout=timeout)
        return ScalingCurve.model_validate(curve)
