"""Catalog repository: the only code that builds catalog SQL. It flushes, never commits."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.catalog.models import CatalogEntryRow, CatalogVersionRow
from app.core.database import rowcount, utcnow


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

    def delete(self, entry: CatalogEntryRow) -> bool:
        """Delete the entry and its versions; False when another request deleted it between
        this session's read and now (its DELETE matched no row: the caller answers 404)."""
        versions = delete(CatalogVersionRow).where(CatalogVersionRow.entry_id == entry.id)
        self.session.execute(versions)
        stmt = delete(CatalogEntryRow).where(CatalogEntryRow.id == entry.id)
        deleted = rowcount(self.session.execute(stmt)) == 1
        self.session.flush()
        return deleted
