"""Measurement and calibration repositories. They flush, never commit."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from app.calibration.models import CalibrationRow, MeasurementRow
from app.core.database import utcnow

Row = type[MeasurementRow] | type[CalibrationRow]


def _count(session: Session, row: Row, cluster_slug: str) -> int:
    return session.scalar(select(func.count(row.id)).where(row.cluster_slug == cluster_slug)) or 0


def _delete_all(session: Session, row: Row, cluster_slug: str) -> None:
    session.execute(delete(row).where(row.cluster_slug == cluster_slug))
    session.flush()


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

    def count(self, cluster_slug: str) -> int:
        return _count(self.session, MeasurementRow, cluster_slug)

    def delete_all(self, cluster_slug: str) -> None:
        _delete_all(self.session, MeasurementRow, cluster_slug)


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

    def count(self, cluster_slug: str) -> int:
        return _count(self.session, CalibrationRow, cluster_slug)

    def delete_all(self, cluster_slug: str) -> None:
        _delete_all(self.session, CalibrationRow, cluster_slug)
