"""Who is calling, and may they? FastAPI dependencies over the key store and the web session.

``PLANNER_AUTH=none`` (development): everyone holds every scope. ``api-key``: a request carries
``X-API-Key: pp_...`` (``Authorization: Bearer pp_...`` is accepted too) or, in the browser, the
signed session cookie of ``/login``. Scopes, each including the ones before it:

* ``read``  - every GET;
* ``plan``  - evaluations, plan jobs, batches (the writes of planning);
* ``admin`` - catalog writes, measurements, calibrations (they change what everyone plans
  with), and key management over HTTP.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Awaitable, Callable

from fastapi import Request
from sqlalchemy.orm import Session, sessionmaker
from starlette.concurrency import run_in_threadpool

from app.core.engine import unit_of_work
from app.core.errors import AppError
from app.core.session import SESSION_COOKIE, SessionSigner, WebSession, csrf_ok
from app.core.settings import Settings
from app.keys.repository import WebSessionStore
from app.keys.service import ANONYMOUS_ADMIN, ApiKeyStore, Principal, hash_key
from app.security.ratelimit import charge

READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
CACHE_TTL_S = 5.0
"""How long a verified key is trusted without a database look-up (a revoked key stops working
within this time in other processes; at once in the process that revoked it)."""


class UnauthorizedError(AppError):
    status_code = 401


class ForbiddenError(AppError):
    status_code = 403


class Authenticator:
    """Per-app: verifies keys (with a short cache) and web sessions."""

    def __init__(self, settings: Settings, factory: sessionmaker[Session]) -> None:
        self.enabled = settings.auth == "api-key"
        self.factory = factory
        secret = settings.secret_key.get_secret_value() or secrets.token_urlsafe(48)
        self.signer = SessionSigner(secret)
        self._cache: dict[str, tuple[float, Principal | None]] = {}
        self._lock = threading.Lock()

    def forget(self) -> None:
        """Drop cached verifications (after a revocation)."""
        with self._lock:
            self._cache.clear()

    def verify_key(self, key: str) -> Principal | None:
        digest = hash_key(key)
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(digest)
        if hit is not None and hit[0] > now:
            return hit[1]
        with self.factory() as session:
            principal = ApiKeyStore(session).verify(key)
        with self._lock:
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[digest] = (now + CACHE_TTL_S, principal)
        return principal

    def verify_session(self, web: WebSession) -> Principal | None:
        """A web session's principal, if its server-side row is live and its key not revoked."""
        now = time.monotonic()
        cache_key = f"session:{web.session_id}:{web.key_id}"
        with self._lock:
            hit = self._cache.get(cache_key)
        if hit is not None and hit[0] > now:
            return hit[1]
        with self.factory() as session:
            active = WebSessionStore(session).is_active(web.session_id, web.key_id)
        principal = (
            Principal(key_id=web.key_id, prefix=web.prefix, scopes=frozenset(web.scopes))
            if active
            else None
        )
        with self._lock:
            self._cache[cache_key] = (now + CACHE_TTL_S, principal)
        return principal

    def start_session(self, principal: Principal) -> str:
        """A new server-side session of ``principal``'s key: the signed cookie's value."""
        if principal.key_id is None or principal.prefix is None:
            raise ValueError("only a stored API key can sign in to the web UI")
        with unit_of_work(self.factory) as session:
            session_id = WebSessionStore(session).create(principal.key_id, self.signer.max_age_s)
        scopes = tuple(sorted(principal.scopes))
        cookie, _ = self.signer.issue(principal.key_id, principal.prefix, scopes, session_id)
        return cookie

    def end_session(self, web: WebSession) -> None:
        """Sign-out: the session row is revoked, so the cookie is dead wherever it is kept."""
        with unit_of_work(self.factory) as session:
            WebSessionStore(session).revoke(web.session_id)
        with self._lock:
            self._cache.pop(f"session:{web.session_id}:{web.key_id}", None)

    def web_session(self, request: Request) -> WebSession | None:
        return self.signer.read(request.cookies.get(SESSION_COOKIE))

    def authenticate(self, request: Request) -> Principal:
        """The caller, or 401."""
        if not self.enabled:
            return ANONYMOUS_ADMIN
        key = request.headers.get("x-api-key")
        if key is None:
            auth = request.headers.get("authorization", "")
            if auth[:7].lower() == "bearer ":
                key = auth[7:]
        if key is not None:
            principal = self.verify_key(key.strip())
            if principal is None:
                raise UnauthorizedError(
                    "the API key is not valid (unknown, malformed or revoked); "
                    "create one with `planner keys create`",
                    headers={"WWW-Authenticate": 'ApiKey header="X-API-Key"'},
                )
            return principal
        web = self.web_session(request)
        if web is not None:
            # a cookie rides along on any request the browser makes, a same-site page's too:
            # /v1 takes it only with the session's CSRF token, which such a page cannot read
            if not csrf_ok(web, request.headers.get("x-csrf-token")):
                raise ForbiddenError(
                    "a browser session may call /v1 only with its X-CSRF-Token header; "
                    "scripts and other clients send their key in X-API-Key"
                )
            principal = self.verify_session(web)
            if principal is not None:
                return principal
        raise UnauthorizedError(
            "an API key is required: send it in the X-API-Key header",
            headers={"WWW-Authenticate": 'ApiKey header="X-API-Key"'},
        )


def get_authenticator(request: Request) -> Authenticator:
    auth: Authenticator = request.app.state.authenticator
    return auth


def require_scope(
    write_scope: str, reads_too: bool = False
) -> Callable[[Request], Awaitable[Principal]]:
    """A dependency: GET/HEAD need ``read``, other methods ``write_scope`` (all of them with
    ``reads_too``). Sets ``request.state.principal``."""

    async def dependency(request: Request) -> Principal:
        authenticator = get_authenticator(request)
        if authenticator.enabled:  # a key's first check reads the database: a worker thread
            principal = await run_in_threadpool(authenticator.authenticate, request)
        else:  # no auth: nothing to look up, no thread hand-off
            principal = authenticator.authenticate(request)
        needed = write_scope if reads_too or request.method not in READ_METHODS else "read"
        if not principal.allows(needed):
            raise ForbiddenError(
                f"this API key lacks the {needed!r} scope needed for {request.method} "
                f"{request.url.path}; its scopes: {', '.join(sorted(principal.scopes)) or 'none'}"
            )
        charge(request, principal.key_id)  # the verified key's rate limit
        request.state.principal = principal
        return principal

    dependency.__name__ = f"require_{write_scope}_scope"
    return dependency
