"""The FastAPI app factory. Nothing is built at import time: ``create_app(settings)`` does it."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI

from app.api import batches, calibration, evaluations, health, plan_jobs, scaling
from app.api import catalog as catalog_routes
from app.api.catalog_service import builtin_specs, seed_builtins
from app.api.deps import require_api_key
from app.db.engine import make_engine, make_session_factory, unit_of_work
from app.db.migrate import upgrade
from app.errors import install_error_handlers
from app.jobs.backend import PlanningBackend, default_backend
from app.jobs.worker import WorkerPool
from app.settings import Settings
from app.web import mount_static
from app.web import router as web_router

log = logging.getLogger(__name__)

DESCRIPTION = """\
Finds the Megatron-LM parallel layout (TP, PP, VPP, CP, EP, DP, micro-batch, recompute,
optimizer sharding) that trains an LLM fastest on a GPU cluster without running out of memory,
and returns the exact launch flags. Errors are `application/problem+json`.
"""


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


def create_app(
    settings: Settings | None = None,
    *,
    backend: PlanningBackend | None = None,
    catalog: CatalogSource = builtin_specs,
) -> FastAPI:
    """The service app. ``backend`` and ``catalog`` replace app.planning and models_db (tests)."""
    settings = settings or Settings()
    backend = backend or default_backend(settings.job_runner)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
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
            if pool is not None:
                pool.stop()
            app.state.engine.dispose()

    app = FastAPI(
        title="Parallel Planner",
        version="1.0.0",
        description=DESCRIPTION,
        lifespan=lifespan,
    )
    engine = make_engine(settings.database_url)
    app.state.settings = settings
    app.state.engine = engine
    app.state.session_factory = make_session_factory(engine)
    app.state.worker_pool = None
    app.state.backend = backend
    app.state.metrics = health.Metrics(app.state.session_factory)
    app.middleware("http")(app.state.metrics.middleware)
    install_error_handlers(app)

    auth = [Depends(require_api_key)]
    for kind in ("model", "gpu", "cluster"):
        app.include_router(catalog_routes.catalog_router(kind), dependencies=auth)
    app.include_router(evaluations.router, dependencies=auth)
    app.include_router(plan_jobs.router, dependencies=auth)
    app.include_router(batches.router, dependencies=auth)
    app.include_router(scaling.router, dependencies=auth)
    app.include_router(calibration.router, dependencies=auth)
    app.include_router(health.router)
    app.include_router(web_router)  # server-rendered pages; not under /v1
    mount_static(app)
    return app
