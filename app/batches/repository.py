"""Batch repository: the only code that builds batch SQL. It flushes, never commits."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.batches.models import BatchRow
from app.planning.models import PlanJobRow


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

    def recent(
        self, limit: int, owner: tuple[bool, str | None], offset: int = 0
    ) -> tuple[list[BatchRow], int]:
        """The newest batches first (at most ``limit``, after skipping ``offset``) and how many
        there are in all; with ``owner`` = (True, key id) only that key's (a non-admin's)."""
        stmt = select(BatchRow)
        count = select(func.count()).select_from(BatchRow)
        if owner[0]:
            stmt = stmt.where(BatchRow.owner_key_id == owner[1])
            count = count.where(BatchRow.owner_key_id == owner[1])
        stmt = stmt.order_by(BatchRow.created_at.desc(), BatchRow.id).limit(limit).offset(offset)
        return list(self.session.scalars(stmt)), int(self.session.scalar(count) or 0)

    def status_counts_of(self, batch_ids: list[str]) -> dict[str, dict[str, int]]:
        """Per batch: how many of its jobs are in each status (one query for a listing)."""
        stmt = (
            select(PlanJobRow.batch_id, PlanJobRow.status, func.count())
            .where(PlanJobRow.batch_id.in_(batch_ids))
            .group_by(PlanJobRow.batch_id, PlanJobRow.status)
        )
        found: dict[str, dict[str, int]] = {batch_id: {} for batch_id in batch_ids}
        for batch_id, status, n in self.session.execute(stmt):
            found[str(batch_id)][status] = int(n)
        return found
