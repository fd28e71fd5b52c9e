"""Calibration rows: measured runs of a user's cluster and the profiles fitted to them.

A row belongs to the catalog entry it was stored under (``cluster_id``), not to a name: a
cluster deleted and created again under the same slug is a new entry and starts empty. When an
entry goes by any path the database sets ``cluster_id`` to NULL and the row is *detached*: kept,
read by no cluster's fit, level or listing, and shown (by its ``cluster_slug``, the name it was
stored under) and deleted only through ``/v1/detached-measurements``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.core.database import Base, JSONType, utcnow


class MeasurementRow(Base):
    """One measured training run on a user's cluster (the throughput CSV's columns)."""

    __tablename__ = "measurement"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    cluster_id: Mapped[int | None] = mapped_column(
        ForeignKey("catalog_entry.id", ondelete="SET NULL"), index=True
    )
    """The cluster's catalog entry; NULL once that entry is gone (a detached row)."""
    cluster_slug: Mapped[str] = mapped_column(String(128), index=True)
    """The cluster's name when the row was stored."""
    source: Mapped[str] = mapped_column(String(16))
    """json | csv | log."""
    data: Mapped[dict[str, Any]] = mapped_column(JSONType)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class CalibrationRow(Base):
    """A performance profile fitted to one cluster's measurements."""

    __tablename__ = "calibration"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    cluster_id: Mapped[int | None] = mapped_column(
        ForeignKey("catalog_entry.id", ondelete="SET NULL"), index=True
    )
    """The cluster's catalog entry; NULL once that entry is gone (a detached row)."""
    cluster_slug: Mapped[str] = mapped_column(String(128), index=True)
    """The cluster's name when the row was stored."""
    num_measurements: Mapped[int] = mapped_column(Integer)
    profile: Mapped[dict[str, Any]] = mapped_column(JSONType)
    report: Mapped[dict[str, Any]] = mapped_column(JSONType)
    comparison: Mapped[dict[str, Any] | None] = mapped_column(JSONType, nullable=True)
    """What its page shows (the rows predicted before and after, the errors, the coefficients),
    stored with the fit so that a view is a read; NULL for a calibration stored before it
    existed, filled on its first view (app.calibration.service.CalibrationService.comparison)."""
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
