"""Calibration rows: measured runs of a user's cluster and the profiles fitted to them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.core.database import Base, JSONType, utcnow


class MeasurementRow(Base):
    """One measured training run on a user's cluster (the throughput CSV's columns)."""

    __tablename__ = "measurement"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    cluster_slug: Mapped[str] = mapped_column(String(128), index=True)
    source: Mapped[str] = mapped_column(String(16))
    """json | csv | log."""
    data: Mapped[dict[str, Any]] = mapped_column(JSONType)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class CalibrationRow(Base):
    """A performance profile fitted to one cluster's measurements."""

    __tablename__ = "calibration"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    cluster_slug: Mapped[str] = mapped_column(String(128), index=True)
    num_measurements: Mapped[int] = mapped_column(Integer)
    profile: Mapped[dict[str, Any]] = mapped_column(JSONType)
    report: Mapped[dict[str, Any]] = mapped_column(JSONType)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
