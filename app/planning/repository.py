"""Plan job repository: the only code that builds plan job SQL. It flushes, never commits."""

from __future__ import annotations

import builtins
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from app.core.database import rowcount, utcnow
from app.planning.models import PlanJobRow


class PlanJobRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def add(self, job: PlanJobRow) -> PlanJobRow:
        self.session.add(job)
        self.session.flush()
        return job

    def get(self, job_id: str) -> PlanJobRow | None:
        return self.session.get(PlanJobRow, job_id, populate_existing=True)

    def get_by_idempotency_key(self, key: str) -> PlanJobRow | None:
        stmt = select(PlanJobRow).where(PlanJobRow.idempotency_key == key)
        return self.session.scalars(stmt).one_or_none()

    def list(
        self,
        status: str | None,
        limit: int,
        offset: int,
        *,
        only_owner: bool = False,
        owner: str | None = None,
    ) -> tuple[list[PlanJobRow], int]:
        """A page of jobs, newest first; ``only_owner``: just those of key ``owner``."""
        stmt = select(PlanJobRow)
        count = select(func.count()).select_from(PlanJobRow)
        if only_owner:
            stmt = stmt.where(PlanJobRow.owner_key_id == owner)
            count = count.where(PlanJobRow.owner_key_id == owner)
        if status is not None:
            stmt = stmt.where(PlanJobRow.status == status)
            count = count.where(PlanJobRow.status == status)
        stmt = stmt.order_by(PlanJobRow.created_at.desc(), PlanJobRow.id).limit(limit)
        rows = list(self.session.scalars(stmt.offset(offset)))
        return rows, int(self.session.scalar(count) or 0)

    def count_by_status(self) -> dict[str, int]:
        stmt = select(PlanJobRow.status, func.count()).group_by(PlanJobRow.status)
        return {status: int(n) for status, n in self.session.execute(stmt)}

    def claim_next(
        self, worker_id: str, *, skip_locked: bool, parent_id: str | None = None
    ) -> str | None:
        """Take the oldest queued job for ``worker_id``; None when there is none.

        PostgreSQL: ``SELECT ... FOR UPDATE SKIP LOCKED`` so that concurrent workers never wait
        on each other. SQLite: a conditional ``UPDATE ... WHERE status='queued'`` that only one
        claimant can win. ``parent_id`` limits the claim to that job's fanned-out parts.
        """
        stmt = select(PlanJobRow.id).where(PlanJobRow.status == "queued")
        if parent_id is not None:
            stmt = stmt.where(PlanJobRow.parent_id == parent_id)
        stmt = stmt.order_by(PlanJobRow.created_at, PlanJobRow.id).limit(1)
        if skip_locked:
            stmt = stmt.with_for_update(skip_locked=True)
        job_id = self.session.scalar(stmt)
        if job_id is None:
            return None
        now = utcnow()
        claimed = self.session.execute(
            update(PlanJobRow)
            .where(PlanJobRow.id == job_id, PlanJobRow.status == "queued")
            .values(
                status="running",
                worker_id=worker_id,
                attempts=PlanJobRow.attempts + 1,
                started_at=now,
                heartbeat_at=now,
            )
            .execution_options(synchronize_session=False)
        )
        return job_id if rowcount(claimed) == 1 else None

    def heartbeat(
        self, job_id: str, worker_id: str, progress: float, done: int, total: int | None
    ) -> bool | None:
        """Write the heartbeat; returns the cancel flag, or None if the job is no longer ours."""
        result = self.session.execute(
            update(PlanJobRow)
            .where(
                PlanJobRow.id == job_id,
                PlanJobRow.worker_id == worker_id,
                PlanJobRow.status == "running",
            )
            .values(
                heartbeat_at=utcnow(),
                progress=progress,
                layouts_evaluated=done,
                layouts_total=total,
            )
            .execution_options(synchronize_session=False)
        )
        if rowcount(result) != 1:
            return None
        return bool(
            self.session.scalar(select(PlanJobRow.cancel_requested).where(PlanJobRow.id == job_id))
        )

    def children(self, parent_id: str) -> builtins.list[PlanJobRow]:
        """The fanned-out parts of a job, in creation order."""
        stmt = select(PlanJobRow).where(PlanJobRow.parent_id == parent_id)
        stmt = stmt.order_by(PlanJobRow.created_at, PlanJobRow.id)
        return list(self.session.scalars(stmt.execution_options(populate_existing=True)))

    def cancel_children(self, parent_id: str) -> None:
        """Cancel the queued parts of a job and ask its running parts to stop."""
        self.session.execute(
            update(PlanJobRow)
            .where(PlanJobRow.parent_id == parent_id, PlanJobRow.status == "queued")
            .values(status="cancelled", cancel_requested=True, finished_at=utcnow())
            .execution_options(synchronize_session=False)
        )
        self.session.execute(
            update(PlanJobRow)
            .where(PlanJobRow.parent_id == parent_id, PlanJobRow.status == "running")
            .values(cancel_requested=True)
            .execution_options(synchronize_session=False)
        )

    def finish(self, job_id: str, owner: str, /, **values: Any) -> bool:
        """Record the end of a run, if this worker still owns it."""
        result = self.session.execute(
            update(PlanJobRow)
            .where(
                PlanJobRow.id == job_id,
                PlanJobRow.worker_id == owner,
                PlanJobRow.status == "running",
            )
            .values(**values)
            .execution_options(synchronize_session=False)
        )
        return rowcount(result) == 1

    def cancel_queued(self, job_id: str) -> bool:
        result = self.session.execute(
            update(PlanJobRow)
            .where(PlanJobRow.id == job_id, PlanJobRow.status == "queued")
            .values(status="cancelled", cancel_requested=True, finished_at=utcnow())
            .execution_options(synchronize_session=False)
        )
        return rowcount(result) == 1

    def request_cancel(self, job_id: str) -> bool:
        result = self.session.execute(
            update(PlanJobRow)
            .where(PlanJobRow.id == job_id, PlanJobRow.status == "running")
            .values(cancel_requested=True)
            .execution_options(synchronize_session=False)
        )
        return rowcount(result) == 1

    def requeue_held_by(self, worker_prefix: str) -> int:
        """Put the running jobs of workers whose id starts with ``worker_prefix`` back in the
        queue (their process is shutting down)."""
        result = self.session.execute(
            update(PlanJobRow)
            .where(PlanJobRow.status == "running", PlanJobRow.worker_id.startswith(worker_prefix))
            .values(status="queued", worker_id=None)
            .execution_options(synchronize_session=False)
        )
        return rowcount(result)

    def requeue_stale(self, stale_after_s: float, max_attempts: int) -> tuple[int, int]:
        """Running jobs whose heartbeat stopped go back to the queue (or fail after too many
        attempts). Returns (requeued, failed)."""
        cutoff: datetime = utcnow() - timedelta(seconds=stale_after_s)
        stale = (
            PlanJobRow.status == "running",
            PlanJobRow.heartbeat_at < cutoff,
        )
        failed = self.session.execute(
            update(PlanJobRow)
            .where(*stale, PlanJobRow.attempts >= max_attempts)
            .values(
                status="failed",
                finished_at=utcnow(),
                error=f"the job was interrupted {max_attempts} times; giving up",
            )
            .execution_options(synchronize_session=False)
        )
        requeued = self.session.execute(
            update(PlanJobRow)
            .where(*stale)
            .values(status="queued", worker_id=None)
            .execution_options(synchronize_session=False)
        )
        return rowcount(requeued), rowcount(failed)
