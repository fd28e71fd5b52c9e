"""``planner worker``: a process that runs plan jobs from the shared database queue.

Start any number of them, on any number of machines, against one PostgreSQL database
(``PLANNER_DATABASE_URL``): each claims jobs with ``SELECT ... FOR UPDATE SKIP LOCKED``,
heartbeats while it runs one, and re-queues the jobs of workers whose heartbeat stopped (a
machine that died). API replicas then run with ``PLANNER_WORKERS=0`` (no in-process workers) and
stay stateless. SIGTERM/SIGINT stop it gracefully: a running job is handed back to the queue.
"""

from __future__ import annotations

import logging
import signal
import threading
from typing import Annotated, Any

import typer

from app.cli.common import log_levels

Opt = typer.Option


def register(cli: typer.Typer) -> None:
    cli.command("worker")(worker)


def worker(
    threads: Annotated[
        int | None, Opt(help="Jobs run at once (default: PLANNER_WORKERS, at least 1).")
    ] = None,
    migrate: Annotated[
        bool, Opt(help="Migrate the database first (off: wait for the API to do it).")
    ] = False,
    log_level: Annotated[str, Opt(help="Logging level.", callback=log_levels())] = "info",
) -> None:
    """Run plan jobs from the database queue until stopped (SIGTERM / Ctrl-C)."""
    from app.core.settings import Settings

    logging.basicConfig(
        level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    run_worker(Settings(), threads=threads, migrate=migrate)


def run_worker(
    settings: Any, *, threads: int | None = None, migrate: bool = False, backend: Any = None
) -> None:
    """The worker loop; ``backend`` replaces the planner (a test's fake runner)."""
    import app.models  # noqa: F401  (every row: plan_job's foreign key needs the batch table)
    from app.core.engine import make_engine, make_session_factory
    from app.core.migrate import upgrade
    from app.planning.backend import default_backend
    from app.planning.worker import WorkerPool

    count = threads if threads is not None else settings.workers
    settings = settings.model_copy(update={"workers": max(1, count)})
    if migrate:
        upgrade(settings.database_url)
    engine = make_engine(settings.database_url)
    pool = WorkerPool(
        make_session_factory(engine),
        settings,
        skip_locked=not settings.is_sqlite,
        backend=backend or default_backend(),
    )
    stop = threading.Event()

    def _stop(signum: int, _frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    log = logging.getLogger(__name__)
    while not stop.is_set():  # the API replica may still be creating the schema
        try:
            pool.requeue_stale()
            break
        except Exception as exc:
            log.warning(
                "database not ready (%s); retrying every 2 s until `planner serve` (or "
                "`planner migrate`) creates the schema, or start this with --migrate",
                _first_line(exc),
            )
            stop.wait(2.0)
    if stop.is_set():
        engine.dispose()
        return
    pool.start()
    log.info(
        "worker %s: %d thread(s) on %s",
        pool.worker_prefix,
        settings.workers,
        engine.url.render_as_string(hide_password=True),
    )
    try:
        while not stop.wait(1.0):
            pass
    finally:
        pool.stop(timeout_s=30.0)
        engine.dispose()


def _first_line(exc: Exception) -> str:
    """The error's first line, passwords masked (a URL in it could carry one)."""
    from app.core.logging_config import mask_secrets

    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return f"{type(exc).__name__}: {mask_secrets(text[0])}" if text else type(exc).__name__


if __name__ == "__main__":  # ``python -m app.cli.worker`` works before the CLI wires it in
    typer.run(worker)
