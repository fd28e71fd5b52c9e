"""Rate limits that a client cannot spoof: cost-weighted token buckets in two places.

* Before authentication, :class:`AddressRateLimitMiddleware` limits each client address (the
  TCP peer as the ASGI server reports it; behind a proxy, uvicorn's ``--proxy-headers`` with
  ``--forwarded-allow-ips`` makes that the real client). Nothing the client writes in a header
  chooses its bucket, so a made-up key prefix per request dodges nothing, and naming someone
  else's key prefix drains nobody's bucket but the sender's own address.
* After authentication, :func:`charge` limits the *verified* key (``require_scope`` and the web
  guard call it with the principal they verified). Without a key (``PLANNER_AUTH=none``) the
  address is the identity.

Each request costs what it asks of the service (:func:`request_cost`): a read costs 1, a plan
job 10, a batch 20. The cost is taken up front (the limit must hold before any work); a request
answered 422 did no more work than a read, so all but :data:`REJECTED_COST` is given back
(:func:`refund_rejected`): a client correcting its input is not locked out, and a flood of bad
requests is still limited at the rate of reads.

The buckets live in the process: with N API replicas a key may spend up to N times its rate in
total (the README says so; a shared limit is the proxy's job).
"""

from __future__ import annotations

import math
import time
from collections.abc import MutableMapping
from typing import Any

from fastapi import Request

from app.core.errors import AppError
from app.core.middleware import OPEN_PATHS, ASGIApp, Receive, Scope, Send, send_problem

READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
WRITE_COSTS: tuple[tuple[str, float], ...] = (  # (path prefix, cost of a non-read request)
    ("/v1/batches", 20.0),
    ("/v1/plan-jobs", 10.0),
    ("/v1/scaling-curves", 10.0),
    ("/v1/evaluations/bulk", 5.0),
    ("/v1/evaluations", 1.0),
    ("/plans", 10.0),  # the web form's plan job
    ("/login", 5.0),  # a guess at a key
)
DEFAULT_WRITE_COST = 2.0
REJECTED_COST = 1.0
"""What a request answered 422 finally costs: it was parsed and refused, like a read."""
CHARGE_STATE = "rate_charges"
"""``scope["state"]`` key: the (buckets, identity, cost) a request was charged to."""
SEARCH_PAGES = ("/scaling",)
"""Web pages whose GET runs a search when it has a query (as costly as a plan job)."""


def request_cost(method: str, path: str, has_query: bool = False) -> float:
    """Tokens a request takes: what it asks of the service, relative to one read."""
    if method in READ_METHODS:
        return 10.0 if has_query and path in SEARCH_PAGES else 1.0
    if "/calibrations" in path:
        return 10.0  # a least-squares fit over the cluster's measurements
    for prefix, cost in WRITE_COSTS:
        if path == prefix or path.startswith(prefix + "/"):
            return cost
    return DEFAULT_WRITE_COST


class WeightedBuckets:
    """Token buckets by identity: ``rate`` tokens a second, up to ``burst`` saved up; a request
    takes ``cost`` tokens (a bucket smaller than the cost still lets one through when full)."""

    def __init__(self, rate_per_s: float, burst: float, max_identities: int = 100_000) -> None:
        self.rate = rate_per_s
        self.burst = float(burst)
        self.max_identities = max_identities
        self._buckets: dict[str, tuple[float, float]] = {}

    def take(self, identity: str, cost: float = 1.0, now: float | None = None) -> float:
        """0 if the request may go now (its tokens are taken), else the seconds until it may."""
        now = time.monotonic() if now is None else now
        tokens, last = self._buckets.get(identity, (self.burst, now))
        tokens = min(self.burst, tokens + (now - last) * self.rate)
        need = min(cost, self.burst)
        if tokens >= need:
            self._remember(identity, tokens - need, now)
            return 0.0
        self._remember(identity, tokens, now)
        return (need - tokens) / self.rate

    def refund(self, identity: str, tokens: float) -> None:
        """Give back ``tokens`` taken from ``identity`` (never past the burst)."""
        if identity in self._buckets:
            held, last = self._buckets[identity]
            self._buckets[identity] = (min(self.burst, held + tokens), last)

    def _remember(self, identity: str, tokens: float, now: float) -> None:
        if identity not in self._buckets and len(self._buckets) >= self.max_identities:
            full_after = self.burst / self.rate
            self._buckets = {k: v for k, v in self._buckets.items() if now - v[1] < full_after}
            if len(self._buckets) >= self.max_identities:
                self._buckets.clear()
        self._buckets[identity] = (tokens, now)


def _limited(buckets: WeightedBuckets, wait_s: float, who: str) -> tuple[str, dict[str, str]]:
    retry = max(1, math.ceil(wait_s))
    detail = (
        f"rate limit of {buckets.rate:g} units/s (burst {buckets.burst:g}) per {who} exceeded; "
        f"a read costs 1 unit, a plan job 10, a batch 20; retry in {retry} s"
    )
    return detail, {"Retry-After": str(retry)}


def _record(scope: Scope, buckets: WeightedBuckets, identity: str, cost: float) -> None:
    scope.setdefault("state", {}).setdefault(CHARGE_STATE, []).append((buckets, identity, cost))


def refund_rejected(scope: Scope, send: Send) -> Send:
    """``send``, giving back all but :data:`REJECTED_COST` of each charge when the answer is
    422 (the address's and the key's alike: both are recorded in the request's state)."""

    async def sending(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start" and message.get("status") == 422:
            for buckets, identity, cost in scope.get("state", {}).get(CHARGE_STATE, []):
                buckets.refund(identity, max(0.0, cost - REJECTED_COST))
        await send(message)

    return sending


def client_address(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


class AddressRateLimitMiddleware:
    """The limit before authentication: per client address, cost-weighted."""

    def __init__(self, app: ASGIApp, *, rate_per_s: float, burst: float) -> None:
        self.app = app
        self.buckets = WeightedBuckets(rate_per_s, burst) if rate_per_s > 0 else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        if scope["type"] != "http" or path.startswith(OPEN_PATHS):
            await self.app(scope, receive, send)
            return
        if self.buckets is not None:
            cost = request_cost(str(scope.get("method", "")), path, bool(scope.get("query_string")))
            identity = f"ip:{client_address(scope)}"
            wait_s = self.buckets.take(identity, cost)
            if wait_s > 0:
                detail, headers = _limited(self.buckets, wait_s, "client address")
                await send_problem(send, 429, detail, headers)
                return
            _record(scope, self.buckets, identity, cost)
        await self.app(scope, receive, refund_rejected(scope, send))  # the key's charge too


class KeyRateLimiter:
    """The limit after authentication: per verified key (per address without auth)."""

    def __init__(self, rate_per_s: float, burst: float) -> None:
        self.buckets = WeightedBuckets(rate_per_s, burst) if rate_per_s > 0 else None

    def charge(self, request: Request, key_id: str | None) -> None:
        if self.buckets is None:
            return
        scope = request.scope
        identity = f"key:{key_id}" if key_id else f"ip:{client_address(scope)}"
        cost = request_cost(request.method, request.url.path, bool(scope.get("query_string")))
        wait_s = self.buckets.take(identity, cost)
        if wait_s > 0:
            detail, headers = _limited(self.buckets, wait_s, "API key" if key_id else "client")
            raise AppError(detail, status_code=429, headers=headers)
        _record(scope, self.buckets, identity, cost)


def charge(request: Request, key_id: str | None) -> None:
    """Charge the request to the verified key (a no-op for apps built without a limiter)."""
    limiter: KeyRateLimiter | None = getattr(request.app.state, "key_limiter", None)
    if limiter is not None:
        limiter.charge(request, key_id)
