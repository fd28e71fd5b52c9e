"""Repositories: the only code that builds SQL. They flush, never commit."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from app.db.base import utcnow
from app.db.models import (
    BatchRow,
    CalibrationRow,
    CatalogEntryRow,
    CatalogVersionRow,
    MeasurementRow,
    PlanJobRow,
)

FINISHED = ("succeeded", "failed", "cancelled")


def _rowcount(result: Any) -> int:
    """Rows an UPDATE matched (``CursorResult.rowcount``)."""
    return int(result.rowcount)


class CatalogRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def list(self, kind: str) -> list[CatalogEntryRow]:
        stmt = select(CatalogEntryRow).where(CatalogEntryRow.kind == kind)
        return list(self.session.scalars(stmt.order_by(CatalogEntryRow.slug)))

    def get(self, kind: str, slug: str) -> CatalogEntryRow | None:
        stmt = select(CatalogEntryRow).where(
            CatalogEntryRow.kind == kind, CatalogEntryRow.slug == slug
        )
        return self.session.scalars(stmt).one_or_none()

    def latest(self, entry: CatalogEntryRow) -> CatalogVersionRow:
        stmt = select(CatalogVersionRow).where(
            CatalogVersionRow.entry_id == entry.id, CatalogVersionRow.version == entry.version
        )
        return self.session.scalars(stmt).one()

    def latest_many(self, entries: Sequence[CatalogEntryRow]) -> dict[int, CatalogVersionRow]:
        if not entries:
            return {}
        pairs = {(e.id, e.version) for e in entries}
        stmt = select(CatalogVersionRow).where(
            CatalogVersionRow.entry_id.in_([e.id for e in entries])
        )
        return {
            v.entry_id: v for v in self.session.scalars(stmt) if (v.entry_id, v.version) in pairs
        }

    def create(
        self, kind: str, slug: str, spec: dict[str, Any], meta: dict[str, Any], *, builtin: bool
    ) -> CatalogEntryRow:
        now = utcnow()
        entry = CatalogEntryRow(
            kind=kind, slug=slug, builtin=builtin, version=1, created_at=now, updated_at=now
        )
        self.session.add(entry)
        self.session.flush()
        self.session.add(
            CatalogVersionRow(entry_id=entry.id, version=1, spec=spec, meta=meta, created_at=now)
        )
        self.session.flush()
        return entry

    def add_version(
        self, entry: CatalogEntryRow, spec: dict[str, Any], meta: dict[str, Any]
    ) -> CatalogVersionRow:
        now = utcnow()
        entry.version += 1
        entry.updated_at = now
        version = CatalogVersionRow(
            entry_id=entry.id, version=entry.version, spec=spec, meta=meta, created_at=now
        )
        self.session.add(version)
        self.session.flush()
        return version

    def delete(self, entry: CatalogEntryRow) -> None:
        self.session.delete(entry)
        self.session.flush()


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
        return job_id if _rowcount(claimed) == 1 else None

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
        if _rowcount(result) != 1:
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
        return _rowcount(result) == 1

    def cancel_queued(self, job_id: str) -> bool:
        result = self.session.execute(
            update(PlanJobRow)
            .where(PlanJobRow.id == job_id, PlanJobRow.status == "queued")
            .values(status="cancelled", cancel_requested=True, finished_at=utcnow())
            .execution_options(synchronize_session=False)
        )
        return _rowcount(result) == 1

    def request_cancel(self, job_id: str) -> bool:
        result = self.session.execute(
            update(PlanJobRow)
            .where(PlanJobRow.id == job_id, PlanJobRow.status == "running")
            .values(cancel_requested=True)
            .execution_options(synchronize_session=False)
        )
        return _rowcount(result) == 1

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
        return _rowcount(requeued), _rowcount(failed)


class BatchRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def add(self, batch: BatchRow) -> BatchRow:
        self.session.add(batch)
        self.session.flush()
        return batch

    def get(self, batch_id: str) -> BatchRow | None:
        return self.session.get(BatchRow, batch_id, populate_existing=True)

    def jobs(self, batch_id: str) -> list[PlanJobRow]:
        """The batch's plan jobs in submission order."""
        stmt = select(PlanJobRow).where(PlanJobRow.batch_id == batch_id)
        stmt = stmt.order_by(PlanJobRow.batch_index).execution_options(populate_existing=True)
        return list(self.session.scalars(stmt))

    def status_counts(self, batch_id: str) -> dict[str, int]:
        stmt = (
            select(PlanJobRow.status, func.count())
            .where(PlanJobRow.batch_id == batch_id)
            .group_by(PlanJobRow.status)
        )
        return {status: int(n) for status, n in self.session.execute(stmt)}


class MeasurementRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def add_many(self, cluster_slug: str, source: str, rows: list[dict[str, Any]]) -> int:
        now = utcnow()
        self.session.add_all(
            MeasurementRow(cluster_slug=cluster_slug, source=source, data=row, created_at=now)
            for row in rows
        )
        self.session.flush()
        return len(rows)

    def list(self, cluster_slug: str) -> list[MeasurementRow]:
        stmt = select(MeasurementRow).where(MeasurementRow.cluster_slug == cluster_slug)
        return list(self.session.scalars(stmt.order_by(MeasurementRow.id)))


class CalibrationRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def add(self, row: CalibrationRow) -> CalibrationRow:
        self.session.add(row)
        self.session.flush()
        return row

    def list(self, cluster_slug: str) -> list[CalibrationRow]:
        stmt = select(CalibrationRow).where(CalibrationRow.cluster_slug == cluster_slug)
        return list(self.session.scalars(stmt.order_by(CalibrationRow.id.desc())))

    def latest(self, cluster_slug: str) -> CalibrationRow | None:
        rows = self.list(cluster_slug)
        return rows[0] if rows else None
