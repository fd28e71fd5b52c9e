"""Catalog rows: an entry (model, GPU or cluster preset) and its spec versions."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.core.database import Base, JSONType, utcnow

CATALOG_KINDS = ("model", "gpu", "cluster")


class CatalogEntryRow(Base):
    """One catalog entry (model, GPU or cluster preset); its specs live in versions."""

    __tablename__ = "catalog_entry"
    __table_args__ = (UniqueConstraint("kind", "slug"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    slug: Mapped[str] = mapped_column(String(128))
    builtin: Mapped[bool] = mapped_column(Boolean, default=False)
    version: Mapped[int] = mapped_column(Integer, default=1)
    """Latest version number."""
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)

    versions: Mapped[list[CatalogVersionRow]] = relationship(
        back_populates="entry", cascade="all, delete-orphan", order_by="CatalogVersionRow.version"
    )


class CatalogVersionRow(Base):
    """One version of a catalog entry's spec (a new one on every PUT)."""

    __tablename__ = "catalog_version"
    __table_args__ = (UniqueConstraint("entry_id", "version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    entry_id: Mapped[int] = mapped_column(ForeignKey("catalog_entry.id", ondelete="CASCADE"))
    version: Mapped[int] = mapped_column(Integer)
    spec: Mapped[dict[str, Any]] = mapped_column(JSONType)
    meta: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    entry: Mapped[CatalogEntryRow] = relationship(back_populates="versions")
