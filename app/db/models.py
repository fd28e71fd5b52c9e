"""Storage rows (SQLAlchemy 2, typed). Rows never leave the service layer: schemas do."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.db.base import Base, JSONType, utcnow

CATALOG_KINDS = ("model", "gpu", "cluster")
JOB_STATUSES = ("queued", "running", "succeeded", "failed", "cancelled")


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


class PlanJobRow(Base):
    """A plan search: queued, claimed by a worker, heartbeating while it runs, then finished."""

    __tablename__ = "plan_job"
    __table_args__ = (Index("ix_plan_job_status_created_at", "status", "created_at"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    status: Mapped[str] = mapped_column(String(16), default="queued")
    progress: Mapped[float] = mapped_column(default=0.0)
    layouts_evaluated: Mapped[int] = mapped_column(Integer, default=0)
    layouts_total: Mapped[int | None] = mapped_column(Integer, default=None)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    idempotency_key: Mapped[str | None] = mapped_column(String(255), unique=True, default=None)
    request_hash: Mapped[str] = mapped_column(String(64))
    request: Mapped[dict[str, Any]] = mapped_column(JSONType)
    """The request as submitted."""
    resolved: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    """What the request was run with: specs resolved from the catalog, the profile used."""
    result: Mapped[dict[str, Any] | None] = mapped_column(JSONType, default=None)
    error: Mapped[str | None] = mapped_column(Text, default=None)
    worker_id: Mapped[str | None] = mapped_column(String(128), default=None)
    batch_id: Mapped[str | None] = mapped_column(
        ForeignKey("batch.id", ondelete="CASCADE"), default=None, index=True
    )
    """The batch this job belongs to (``POST /v1/batches``), if any."""
    batch_index: Mapped[int | None] = mapped_column(Integer, default=None)
    """Its position in the batch's job list."""
    parent_id: Mapped[str | None] = mapped_column(String(36), default=None, index=True)
    owner_key_id: Mapped[str | None] = mapped_column(String(36), default=None, index=True)
    """The API key that submitted the job (None without auth): only it, or admin, may see it."""
    """The plan job this one is a fanned-out part of (one GPU count x batch size), if any."""
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(default=None)
    heartbeat_at: Mapped[datetime | None] = mapped_column(default=None)
    finished_at: Mapped[datetime | None] = mapped_column(default=None)


class BatchRow(Base):
    """A batch of plan jobs submitted together; its status is derived from its jobs."""

    __tablename__ = "batch"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    names: Mapped[dict[str, Any]] = mapped_column(JSONType)
    """``{"names": [...]}``: the job names, in submission order."""
    total: Mapped[int] = mapped_column(Integer)
    owner_key_id: Mapped[str | None] = mapped_column(String(36), default=None, index=True)
    """The API key that submitted the batch (None without auth)."""
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


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
