"""The FastAPI app factory. Nothing is built at import time: ``create_app(settings)`` does it."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from sqlalchemy.orm import Session, sessionmaker

from app import health
from app.batches import router as batches
from app.calibration import router as calibration
from app.catalog import router as catalog_routes
from app.catalog.cache import INFO_KEY, CatalogCache
from app.catalog.service import builtin_specs, seed_builtins
from app.core.engine import make_engine, make_session_factory, unit_of_work
from app.core.errors import install_error_handlers
from app.core.logging_config import configure_logging
from app.core.middleware import RequestContextMiddleware, with_time_budget
from app.core.migrate import upgrade
from app.core.schemas import problem_responses
from app.core.settings import Settings
from app.input_policy import BodyGuardMiddleware
from app.keys import Authenticator, require_scope
from app.keys import router as key_routes
from app.planning import evaluation_router as evaluations
from app.planning import router as plan_jobs
from app.planning import scaling_router as scaling
from app.planning import suggestion_router as calibration_suggestions
from app.planning.backend import PlanningBackend, default_backend
from app.planning.repository import PlanJobRepository
from app.planning.worker import WorkerPool
from app.security.headers import SecurityHeadersMiddleware, csp_allowing_inline_scripts_of
from app.security.ratelimit import AddressRateLimitMiddleware, KeyRateLimiter
from app.web import mount_static
from app.web import router as web_router
from app.web.errors import install_html_error_pages
from app.web.login import router as login_router
from app.web.login import web_guard
from app.web.templating import static_url

log = logging.getLogger(__name__)

DESCRIPTION = """\
Finds the Megatron-LM parallel layout (TP, PP, VPP, CP, EP, DP, micro-batch, recompute,
optimizer sharding) that trains an LLM fastest on a GPU cluster without running out of memory,
and returns the exact launch flags. Errors are `application/problem+json`.
"""


# Swagger UI and ReDoc are vendored (app/web/static/vendor/README.md), not loaded from a CDN,
# so that /docs and /redoc work on machines without internet access
SWAGGER_JS = static_url("vendor/swagger-ui-bundle-5.35.0.js")
SWAGGER_CSS = static_url("vendor/swagger-ui-5.35.0.css")
SWAGGER_FAVICON = static_url("vendor/swagger-ui-favicon-32x32.png")
REDOC_JS = static_url("vendor/redoc-2.5.4.standalone.js")


def add_docs_routes(app: FastAPI) -> None:
    """``/docs`` (Swagger UI) and ``/redoc`` from the vendored files; open without an API key."""
    openapi_url = app.openapi_url or "/openapi.json"
    title = app.title

    @app.get("/docs", include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        return _with_own_csp(
            get_swagger_ui_html(
                openapi_url=openapi_url,
                title=f"{title} - Swagger UI",
                swagger_js_url=SWAGGER_JS,
                swagger_css_url=SWAGGER_CSS,
                swagger_favicon_url=SWAGGER_FAVICON,
            )
        )

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> HTMLResponse:
        return _with_own_csp(
            get_redoc_html(
                openapi_url=openapi_url,
                title=f"{title} - ReDoc",
                redoc_js_url=REDOC_JS,
                redoc_favicon_url=SWAGGER_FAVICON,
                with_google_fonts=False,
            )
        )


def _with_own_csp(page: HTMLResponse) -> HTMLResponse:
    """The docs pages boot from inline scripts: allow exactly those (by hash), and the blob:
    web worker ReDoc searches in; every other page gets the strict policy."""
    html = bytes(page.body).decode()
    policy = csp_allowing_inline_scripts_of(html) + "; worker-src 'self' blob:"
    page.headers["content-security-policy"] = policy
    return page


CatalogSource = Callable[[], dict[str, dict[str, dict[str, Any]]]]


def prepare_database(settings: Settings, catalog: CatalogSource = builtin_specs) -> None:
    """Migrate to the latest schema and seed the built-in catalog (both idempotent)."""
    if settings.migrate_on_start:
        upgrade(settings.database_url)
    if settings.seed_catalog:
        engine = make_engine(settings.database_url)
        try:
            with unit_of_work(make_session_factory(engine)) as session:
                added = seed_builtins(session, catalog())
            if added:
                log.info("seeded %d built-in catalog entries", added)
        finally:
            engine.dispose()


def requeue_unfinished(factory: sessionmaker[Session], worker_prefix: str) -> int:
    """Put the jobs this process's workers still hold back in the queue (shutdown)."""
    with unit_of_work(factory) as session:
        return PlanJobRepository(session).requeue_held_by(worker_prefix)


Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]


def _lifespan(settings: Settings, catalog: CatalogSource, backend: PlanningBackend) -> Lifespan:
    """Start-up (logging, migrations and seeding, the worker pool) and shutdown (stop the pool,
    put the jobs it still holds back in the queue, close the engine) of the app."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        configure_logging(settings.log_level, settings.log_format)
        prepare_database(settings, catalog)
        pool = None
        if settings.workers > 0:
            pool = WorkerPool(
                app.state.session_factory,
                settings,
                skip_locked=not settings.is_sqlite,
                backend=backend,
            )
            pool.start()
        app.state.worker_pool = pool
        try:
            yield
        finally:
            if pool is not None:  # stop claiming; running jobs stop at their next progress
                pool.stop(settings.shutdown_grace_s)
                try:
                    requeued = requeue_unfinished(app.state.session_factory, pool.worker_prefix)
                    if requeued:
                        log.warning("shutdown: re-queued %d unfinished plan job(s)", requeued)
                except Exception:
                    log.exception("shutdown: could not re-queue unfinished plan jobs")
            app.state.engine.dispose()

    return lifespan


def create_app(
    settings: Settings | None = None,
    *,
    backend: PlanningBackend | None = None,
    catalog: CatalogSource = builtin_specs,
) -> FastAPI:
    """The service app. ``backend`` and ``catalog`` replace planning and models_db (tests)."""
    settings = settings or Settings()
    backend = with_time_budget(backend or default_backend(), settings.job_time_budget_s)
    app = FastAPI(
        title="Parallel Planner",
        version="1.0.0",
        description=DESCRIPTION,
        lifespan=_lifespan(settings, catalog, backend),
        docs_url=None,  # add_docs_routes serves them from /static instead of a CDN
        redoc_url=None,
    )
    engine = make_engine(settings.database_url)
    app.state.settings = settings
    app.state.engine = engine
    app.state.session_factory = make_session_factory(engine)
    app.state.session_factory.configure(info={INFO_KEY: CatalogCache()})  # catalog look-ups
    app.state.worker_pool = None
    app.state.backend = backend
    app.state.authenticator = Authenticator(settings, app.state.session_factory)
    app.state.metrics = health.Metrics(app.state.session_factory)
    # four ASGI layers, outermost last: request id, access log and metrics; browser headers;
    # the per-address rate limit; the body guard (size, read deadline, input policy)
    app.add_middleware(
        BodyGuardMiddleware,
        max_body_bytes=settings.max_body_bytes,
        max_upload_bytes=settings.max_upload_bytes,
        body_timeout_s=settings.body_timeout_s,
    )
    app.state.key_limiter = KeyRateLimiter(settings.rate_limit_per_s, settings.rate_limit_burst)
    app.add_middleware(
        AddressRateLimitMiddleware,
        rate_per_s=settings.rate_limit_ip_per_s,
        burst=settings.rate_limit_ip_burst,
    )
    app.add_middleware(SecurityHeadersMiddleware, hsts=settings.hsts)  # on every response
    # outermost: every log line has the request id; every response is counted in /metrics
    app.add_middleware(RequestContextMiddleware, observe=app.state.metrics.observe)
    install_error_handlers(app)
    install_html_error_pages(app)  # browsers on web pages get HTML; the API keeps problem JSON

    # scopes (app/keys/auth.py): GETs need read; planning writes (evaluations, plan jobs,
    # batches, scaling) need plan; writes that change what everyone plans with (catalog,
    # measurements, calibrations) and key management need admin
    auth: dict[str, Any] = {
        "dependencies": [Depends(require_scope("plan"))],
        "responses": problem_responses(401, 403, 413, 429, 503),
    }
    admin = {**auth, "dependencies": [Depends(require_scope("admin"))]}
    for kind in ("model", "gpu", "cluster"):
        app.include_router(catalog_routes.catalog_router(kind), **admin)
    app.include_router(evaluations.router, **auth)
    app.include_router(plan_jobs.router, **auth)
    app.include_router(batches.router, **auth)
    app.include_router(scaling.router, **auth)
    app.include_router(calibration.router, **admin)
    app.include_router(calibration.detached_router, **admin)
    app.include_router(calibration_suggestions.router, **auth)
    app.include_router(
        key_routes.router, **{**admin, "dependencies": [Depends(require_scope("admin", True))]}
    )
    app.include_router(health.router)
    add_docs_routes(app)
    app.include_router(login_router)  # /login, /logout (the web UI's sign-in)
    app.include_router(web_router, dependencies=[Depends(web_guard)])  # pages; not under /v1
    mount_static(app)
    return app
