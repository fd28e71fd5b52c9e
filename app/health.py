"""``/healthz`` (the process is up), ``/readyz`` (the database answers), ``/metrics``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import text

from app.core.errors import problem
from app.core.schemas import problem_responses
from app.keys.auth import ForbiddenError, get_authenticator
from app.planning.models import JOB_STATUSES
from app.planning.repository import PlanJobRepository

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Liveness", operation_id="healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/readyz",
    summary="Readiness: the database answers",
    operation_id="readyz",
    responses=problem_responses(503),
)
def readyz(request: Request) -> Response:
    try:
        with request.app.state.session_factory() as session:
            session.execute(text("SELECT 1"))
    except Exception as exc:
        return problem(503, f"the database is not reachable: {type(exc).__name__}")
    return JSONResponse({"status": "ready"})


def metrics_guard(request: Request) -> None:
    """With auth on, a scrape needs a key with the read scope (Prometheus sends it as
    ``Authorization: Bearer pp_...``), unless ``PLANNER_METRICS_PUBLIC=true`` says the port is
    reachable only by the scraper."""
    auth = get_authenticator(request)
    if request.app.state.settings.metrics_public or not auth.enabled:
        return
    principal = auth.authenticate(request)  # scrapes are not charged to the key's rate limit
    if not principal.allows("read"):
        raise ForbiddenError("scraping /metrics needs a key with the 'read' scope")


@router.get(
    "/metrics",
    summary="Prometheus metrics (read scope when auth is on)",
    operation_id="metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {}}}, **problem_responses(401, 403)},
    dependencies=[Depends(metrics_guard)],
)
def metrics(request: Request) -> Response:
    registry: CollectorRegistry = request.app.state.metrics.registry
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)


class _JobsCollector(Collector):
    """Plan jobs by status, read from the database at scrape time."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self.factory = factory

    def collect(self) -> Iterator[GaugeMetricFamily]:
        gauge = GaugeMetricFamily("planner_plan_jobs", "Plan jobs by status", labels=["status"])
        try:
            with self.factory() as session:
                counts = PlanJobRepository(session).count_by_status()
        except Exception:
            counts = {}
        for status in JOB_STATUSES:
            gauge.add_metric([status], counts.get(status, 0))
        yield gauge


class Metrics:
    """The app's own registry (no global state): request counts, latency, jobs by status."""

    def __init__(self, session_factory: Callable[[], Any]) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "planner_http_requests",
            "HTTP requests",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "planner_http_request_duration_seconds",
            "HTTP request latency",
            ["method", "route"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
            registry=self.registry,
        )
        self.registry.register(_JobsCollector(session_factory))

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        """One finished request (RequestContextMiddleware calls this for every request)."""
        self.requests.labels(method, route, str(status)).inc()
        self.latency.labels(method, route).observe(seconds)
