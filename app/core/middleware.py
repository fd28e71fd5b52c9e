"""Pure ASGI middleware of the service, and the plan-job time budget.

* :class:`RequestContextMiddleware` - a request id (``X-Request-ID`` in and out) in every log
  line of the request, one structured access-log line per request (path, never the query), and
  the request's metrics (``observe``: count and latency by route template, the /metrics ones);
* rate limits live in :mod:`app.security.ratelimit` (per address here, per verified key after
  authentication); the body's size limit, read deadline and input policy in
  :class:`app.input_policy.BodyGuardMiddleware`;
* :func:`with_time_budget` - a planning backend whose plan jobs fail once they run too long.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

from app.core.errors import PROBLEM_MEDIA_TYPE, problem
from app.core.logging_config import REQUEST_ID
from planner.specs import SpecError

if TYPE_CHECKING:  # core never imports a domain at run time
    from app.planning.backend import PlanningBackend

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

access_log = logging.getLogger("app.access")
_REQUEST_ID_OK = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
OPEN_PATHS = ("/healthz", "/readyz", "/metrics", "/static/")
"""Paths no rate limit applies to (probes, scrapes, static files)."""
UPLOAD_PATH = re.compile(
    r"^/v1/clusters/[^/]+/measurements$|^/v1/evaluations/bulk$|^/batches$|^/calibration$"
)
"""Routes whose bodies get the upload limit (measurement files, bulk evaluations, the batch
page's jobs file: it says itself when a file is over the API's batch limit; the calibration
page's measurements file, which the API takes up to this limit too)."""


async def send_problem(
    send: Send, status: int, detail: str, headers: dict[str, str] | None = None
) -> None:
    """A problem-JSON response sent straight from ASGI middleware: the same body, bytes for
    bytes, as the error handlers' (:func:`app.core.errors.problem`)."""
    body = bytes(problem(status, detail).body)
    raw = [
        (b"content-type", PROBLEM_MEDIA_TYPE.encode()),
        (b"content-length", str(len(body)).encode()),
    ]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


# --- request id and access log ---------------------------------------------------------------
Observe = Callable[[str, str, int, float], None]
"""(method, route template, status, seconds) of one finished request."""


class RequestContextMiddleware:
    def __init__(self, app: ASGIApp, *, observe: Observe | None = None) -> None:
        self.app = app
        self.observe = observe

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = _header(scope, b"x-request-id")
        request_id = given if given and _REQUEST_ID_OK.match(given) else uuid.uuid4().hex
        token = REQUEST_ID.set(request_id)
        status = 500
        start = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", request_id.encode()))
                message["headers"] = headers
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            seconds = time.perf_counter() - start
            if self.observe is not None:  # the router set the matched route on the scope
                route = getattr(scope.get("route"), "path", "unmatched")
                self.observe(str(scope.get("method", "?")), str(route), status, seconds)
            access_log.info(
                "%s %s %d",
                scope.get("method", "?"),
                scope.get("path", "?"),
                status,
                extra={
                    "method": scope.get("method"),
                    "path": scope.get("path"),
                    "status": status,
                    "duration_ms": round(seconds * 1000, 2),
                },
            )
            REQUEST_ID.reset(token)


# --- plan-job time budget --------------------------------------------------------------------
class JobTimeBudgetExceeded(SpecError):
    """A plan job ran longer than ``PLANNER_JOB_TIME_BUDGET_S``."""


def with_time_budget(backend: PlanningBackend, budget_s: float) -> PlanningBackend:
    """``backend`` whose plan runs raise :class:`JobTimeBudgetExceeded` (the job fails with its
    message) at the first progress report after ``budget_s`` seconds."""
    inner = backend.plan

    def plan(request: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        deadline = time.monotonic() + budget_s
        outer = kwargs.get("progress")

        def progress(done: int, total: int) -> None:
            if outer is not None:
                outer(done, total)
            if time.monotonic() > deadline:
                raise JobTimeBudgetExceeded(
                    f"the plan job ran out of its time budget of {budget_s:g} s "
                    f"(PLANNER_JOB_TIME_BUDGET_S) after {done} of {total} layouts; narrow the "
                    "search (fix some axes, lower max_trials) or raise the budget",
                    field="max_trials",
                )

        kwargs["progress"] = progress
        return inner(request, **kwargs)

    return dataclasses.replace(backend, plan=plan)
