"""Measurement and calibration repositories. They flush, never commit.

A cluster's rows are those linked to its catalog entry (``cluster_id``), found through the
entry of the slug asked for: rows left by an earlier cluster of the same name are detached
(``cluster_id`` NULL) and never match (app/calibration/models.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, ScalarSelect, delete, func, select
from sqlalchemy.orm import Session

from app.calibration.models import CalibrationRow, MeasurementRow
from app.catalog.models import CatalogEntryRow
from app.core.database import rowcount, utcnow

Row = type[MeasurementRow] | type[CalibrationRow]


def _entry_id(slug: str) -> ScalarSelect[int]:
    """The id of the cluster entry now named ``slug`` (NULL when there is none)."""
    return (
        select(CatalogEntryRow.id)
        .where(CatalogEntryRow.kind == "cluster", CatalogEntryRow.slug == slug)
        .scalar_subquery()
    )


def _of(row: Row, cluster_slug: str) -> ColumnElement[bool]:
    return row.cluster_id == _entry_id(cluster_slug)


def _entry_id_of(session: Session, cluster_slug: str) -> int:
    found = session.scalar(select(_entry_id(cluster_slug)))
    if found is None:  # the services look the cluster up first (a 404 naming it)
        raise LookupError(f"no cluster entry named {cluster_slug!r}")
    return int(found)


def _count(session: Session, row: Row, cluster_slug: str) -> int:
    return session.scalar(select(func.count(row.id)).where(_of(row, cluster_slug))) or 0


def _delete_all(session: Session, row: Row, cluster_slug: str) -> None:
    session.execute(delete(row).where(_of(row, cluster_slug)))
    session.flush()


class MeasurementRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def add_many(self, cluster_slug: str, source: str, rows: list[dict[str, Any]]) -> int:
        now = utcnow()
        entry_id = _entry_id_of(self.session, cluster_slug)
        self.session.add_all(
            MeasurementRow(
                cluster_id=entry_id,
                cluster_slug=cluster_slug,
                source=source,
                data=row,
                created_at=now,
            )
            for row in rows
        )
        self.session.flush()
        return len(rows)

    def list(self, cluster_slug: str) -> list[MeasurementRow]:
        stmt = select(MeasurementRow).where(_of(MeasurementRow, cluster_slug))
        return list(self.session.scalars(stmt.order_by(MeasurementRow.id)))

    def count(self, cluster_slug: str) -> int:
        return _count(self.session, MeasurementRow, cluster_slug)

    def delete_all(self, cluster_slug: str) -> None:
        _delete_all(self.session, MeasurementRow, cluster_slug)


class CalibrationRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def add(self, row: CalibrationRow) -> CalibrationRow:
        if row.cluster_id is None:  # stored under the entry its slug names now
            row.cluster_id = _entry_id_of(self.session, row.cluster_slug)
        self.session.add(row)
        self.session.flush()
        return row

    def list(self, cluster_slug: str) -> list[CalibrationRow]:
        stmt = select(CalibrationRow).where(_of(CalibrationRow, cluster_slug))
        return list(self.session.scalars(stmt.order_by(CalibrationRow.id.desc())))

    def get(self, cluster_slug: str, calibration_id: int) -> CalibrationRow | None:
        stmt = select(CalibrationRow).where(
            _of(CalibrationRow, cluster_slug), CalibrationRow.id == calibration_id
        )
        return self.session.scalars(stmt).one_or_none()

    def store_comparison(self, row: CalibrationRow, comparison: dict[str, Any]) -> None:
        row.comparison = comparison
        self.session.flush()

    def count(self, cluster_slug: str) -> int:
        return _count(self.session, CalibrationRow, cluster_slug)

    def delete_all(self, cluster_slug: str) -> None:
        _delete_all(self.session, CalibrationRow, cluster_slug)


class DetachedRepository:
    """Rows whose cluster entry is gone (``cluster_id`` NULL), by the name they were stored
    under. Only an operator's explicit request deletes them."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def summary(self, row: Row) -> dict[str, tuple[int, datetime, datetime]]:
        """Per former cluster name: how many rows, the oldest and the newest stored."""
        stmt = (
            select(row.cluster_slug, func.count(row.id), func.min(row.created_at))
            .add_columns(func.max(row.created_at))
            .where(row.cluster_id.is_(None))
            .group_by(row.cluster_slug)
        )
        return {name: (n, first, last) for name, n, first, last in self.session.execute(stmt)}

    def rows(self, row: Row, cluster_slug: str) -> list[Any]:
        stmt = select(row).where(row.cluster_id.is_(None), row.cluster_slug == cluster_slug)
        return list(self.session.scalars(stmt.order_by(row.id)))

    def delete(self, row: Row, cluster_slug: str | None) -> int:
        """Delete detached rows (of one former name, or all); how many went."""
        stmt = delete(row).where(row.cluster_id.is_(None))
        if cluster_slug is not None:
            stmt = stmt.where(row.cluster_slug == cluster_slug)
        deleted = rowcount(self.session.execute(stmt))
        self.session.flush()
        return deleted
