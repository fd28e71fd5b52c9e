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
