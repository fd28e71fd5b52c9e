"""In-process plan-job workers.

Each worker thread claims the oldest queued job (``FOR UPDATE SKIP LOCKED`` on PostgreSQL, a
conditional UPDATE on SQLite), runs it with a heartbeat thread beside it, and writes the result.
A job whose heartbeat stops (its server died) is put back in the queue by any worker, so nothing
submitted is ever lost; cancellation is a flag that the heartbeat reads and the progress
callback acts on.

A plan job over many (GPU count x batch size) combinations can fan out into parts that any
worker runs (``settings.fan_out_min_scenarios``; :mod:`app.planning.fanout`). The same pool runs in
the API process (``PLANNER_WORKERS`` threads) and in ``planner worker`` processes on any number
of machines sharing one PostgreSQL database.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import traceback
import uuid
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from app.core.database import utcnow
from app.core.engine import unit_of_work
from app.core.logging_config import job_context
from app.core.settings import Settings
from app.planning import fanout, optuna_store
from app.planning.backend import PlanningBackend
from app.planning.convert import error_text
from app.planning.repository import PlanJobRepository
from app.planning.schemas import FINISHED
from planner.specs import SpecError

log = logging.getLogger(__name__)


class JobInterrupted(Exception):
    """Raised inside a running search to stop it (cancelled, shut down, or lost)."""


class _RunState:
    def __init__(self) -> None:
        self.done = 0
        self.total: int | None = None
        self.cancel = threading.Event()
        self.lost = threading.Event()
        self.finished = threading.Event()

    @property
    def progress(self) -> float:
        if not self.total:
            return 0.0
        return min(1.0, self.done / self.total)


class WorkerPool:
    """``settings.workers`` threads that run plan jobs from the database queue."""

    def __init__(
        self,
        factory: sessionmaker[Session],
        settings: Settings,
        *,
        skip_locked: bool,
        backend: PlanningBackend,
    ) -> None:
        self.factory = factory
        self.settings = settings
        self.skip_locked = skip_locked
        self.backend = backend
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._threads: list[threading.Thread] = []
        self.worker_prefix = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._optuna: Any = None
        self._optuna_lock = threading.Lock()
        self._db_failed_at = 0.0  # when a database call last failed (epoch seconds)

    # --- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        self.requeue_stale()
        for i in range(self.settings.workers):
            thread = threading.Thread(
                target=self._loop,
                args=(f"{self.worker_prefix}:{i}",),
                daemon=True,
                name=f"plan-worker-{i}",
            )
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(timeout_s)
        self._threads.clear()

    def wake(self) -> None:
        """Tell idle workers that a job was queued."""
        self._wake.set()

    # --- the queue ---------------------------------------------------------------------------
    def requeue_stale(self) -> None:
        with unit_of_work(self.factory) as session:
            requeued, failed = PlanJobRepository(session).requeue_stale(
                self.settings.job_stale_after_s, self.settings.job_max_attempts
            )
        if requeued or failed:
            log.warning("re-queued %d orphaned plan job(s), failed %d", requeued, failed)

    def claim(self, worker_id: str, parent_id: str | None = None) -> str | None:
        with unit_of_work(self.factory) as session:
            return PlanJobRepository(session).claim_next(
                worker_id, skip_locked=self.skip_locked, parent_id=parent_id
            )

    def optuna_storage(self) -> Any:
        """The Optuna storage of fanned-out searches (opened on first use)."""
        with self._optuna_lock:
            if self._optuna is None:
                self._optuna = optuna_store.open_storage(optuna_store.storage_url(self.settings))
            return self._optuna

    def _loop(self, worker_id: str) -> None:
        reap_every = max(1.0, self.settings.job_stale_after_s / 2)
        last_reap = 0.0
        while not self._stop.is_set():
            try:
                now = utcnow().timestamp()
                # after an outage every heartbeat looks stale: wait a full stale period before
                # re-queuing, so that jobs still running here are not run a second time
                recovered = now - self._db_failed_at >= self.settings.job_stale_after_s
                if recovered and now - last_reap >= reap_every:
                    self.requeue_stale()
                    last_reap = now
                job_id = self.claim(worker_id)
            except Exception:
                self._db_failed_at = utcnow().timestamp()
                log.exception("plan worker %s could not reach the database", worker_id)
                self._stop.wait(self.settings.job_poll_s)
                continue
            if job_id is None:
                self._wake.wait(self.settings.job_poll_s)
                self._wake.clear()
                continue
            try:
                with job_context(job_id):  # every line logged while it runs carries job_id
                    self.run_job(job_id, worker_id)
            except Exception:  # never let one job (or an outage) end the worker thread
                self._db_failed_at = utcnow().timestamp()
                log.exception("plan worker %s: job %s did not finish cleanly", worker_id, job_id)

    # --- one job -----------------------------------------------------------------------------
    def _heartbeat(self, job_id: str, worker_id: str, state: _RunState) -> None:
        while not state.finished.wait(self.settings.job_heartbeat_s):
            try:
                with unit_of_work(self.factory) as session:
                    cancel = PlanJobRepository(session).heartbeat(
                        job_id, worker_id, state.progress, state.done, state.total
                    )
            except Exception:
                log.exception("heartbeat of plan job %s failed", job_id)
                continue
            if cancel is None:
                state.lost.set()
            elif cancel:
                state.cancel.set()

    def run_job(self, job_id: str, worker_id: str) -> None:
        with self.factory() as session:
            row = PlanJobRepository(session).get(job_id)
            if row is None:
                return
            resolved = dict(row.resolved)
            cancel_requested = row.cancel_requested
            parent_id = row.parent_id
        request = resolved.get("planner_request", {})
        parts = (
            None
            if parent_id is not None
            else fanout.split_request(request, self.settings.fan_out_min_scenarios)
        )
        state = _RunState()
        if cancel_requested:
            state.cancel.set()
        beat = threading.Thread(
            target=self._heartbeat,
            args=(job_id, worker_id, state),
            daemon=True,
            name=f"heartbeat-{job_id[:8]}",
        )
        beat.start()

        def progress(done: int, total: int) -> None:
            state.done, state.total = int(done), int(total)
            if state.cancel.is_set() or state.lost.is_set() or self._stop.is_set():
                raise JobInterrupted

        values: dict[str, Any]
        try:
            if state.cancel.is_set():
                raise JobInterrupted
            if parts is not None:
                result = self._run_parts(job_id, worker_id, parts, state, request)
            else:
                result = self.backend.plan(
                    request, profile=self.backend.profile_for(resolved), progress=progress
                )
            values = {"status": "succeeded", "result": result, "progress": 1.0}
            if state.total is None:
                values["layouts_evaluated"] = int(result.get("search", {}).get("evaluated", 0))
            else:
                values["layouts_evaluated"] = state.done
                values["layouts_total"] = state.total
        except JobInterrupted:
            if state.lost.is_set():
                log.warning("plan job %s was taken over elsewhere; dropping this run", job_id)
                state.finished.set()
                return
            if self._stop.is_set() and not state.cancel.is_set():
                values = {"status": "queued", "worker_id": None}  # runs again after restart
            else:
                values = {"status": "cancelled"}
        except SpecError as exc:
            values = {"status": "failed", "error": error_text(exc)}
        except Exception as exc:
            log.exception("plan job %s failed", job_id)
            values = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
            values["error"] += "\n" + traceback.format_exc(limit=5)[-2000:]
        try:  # the heartbeat goes on until the outcome is stored (an outage may delay it)
            self._finish(job_id, worker_id, parent_id, request, values, state)
        finally:
            state.finished.set()

    def _finish(
        self,
        job_id: str,
        worker_id: str,
        parent_id: str | None,
        request: dict[str, Any],
        values: dict[str, Any],
        state: _RunState,
    ) -> None:
        if values["status"] != "queued":
            values["finished_at"] = utcnow()
            if state.cancel.is_set() and values["status"] == "succeeded":
                values = {"status": "cancelled", "finished_at": values["finished_at"]}
        values["heartbeat_at"] = utcnow()
        if parent_id is not None and values["status"] == "succeeded":  # before the part is done
            self._record_part(parent_id, job_id, worker_id, request, values["result"])
        self._write_result(job_id, worker_id, values)

    def _write_result(self, job_id: str, worker_id: str, values: dict[str, Any]) -> None:
        """Store the outcome, retrying with backoff while the database is unreachable."""
        delay = self.settings.job_poll_s
        while True:
            try:
                with unit_of_work(self.factory) as session:
                    repo = PlanJobRepository(session)
                    current = repo.get(job_id)
                    if (
                        values["status"] == "succeeded"
                        and current is not None
                        and current.cancel_requested
                    ):
                        values = {"status": "cancelled", "finished_at": values["finished_at"]}
                    if not repo.finish(job_id, worker_id, **values):
                        log.warning("plan job %s changed hands before it finished here", job_id)
                return
            except Exception:
                self._db_failed_at = utcnow().timestamp()
                if self._stop.is_set():  # shutting down: the stale-job reaper will re-queue it
                    log.exception("could not store plan job %s before shutdown", job_id)
                    return
                log.exception("could not store plan job %s; retrying in %.1f s", job_id, delay)
                self._stop.wait(delay)
                delay = min(delay * 2, max(0.5, self.settings.job_stale_after_s / 4))

    # --- fan-out -------------------------------------------------------------------------------
    def _run_parts(
        self,
        job_id: str,
        worker_id: str,
        parts: list[dict[str, Any]],
        state: _RunState,
        request: dict[str, Any],
    ) -> dict[str, Any]:
        """Queue the parts of a job, run them here while other workers help, then merge."""
        with unit_of_work(self.factory) as session:
            parent = PlanJobRepository(session).get(job_id)
            assert parent is not None
            fanout.ensure_parts(session, parent, parts)
        while True:
            with self.factory() as session:
                children = PlanJobRepository(session).children(job_id)
            state.total = len(children)
            state.done = sum(c.status in FINISHED for c in children)
            if state.cancel.is_set():
                with unit_of_work(self.factory) as session:
                    PlanJobRepository(session).cancel_children(job_id)
                raise JobInterrupted
            if state.lost.is_set() or self._stop.is_set():
                raise JobInterrupted
            if fanout.all_finished(children):
                return fanout.merge_parts(children, int(request.get("top_k") or 10))
            part_id = self.claim(worker_id, parent_id=job_id)
            if part_id is not None:
                self.run_job(part_id, worker_id)
            else:
                self._stop.wait(self.settings.job_poll_s)

    def _record_part(
        self,
        parent_id: str,
        job_id: str,
        worker_id: str,
        part: dict[str, Any],
        result: dict[str, Any],
    ) -> None:
        """Add a finished part's layouts to the parent's shared Optuna study."""
        try:
            optuna_store.record_part(
                self.optuna_storage(), parent_id, job_id, worker_id, part, result
            )
        except Exception:
            log.exception("could not record part %s of plan job %s in Optuna", job_id, parent_id)
