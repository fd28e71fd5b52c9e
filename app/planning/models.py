"""Plan job rows. Rows never leave the service layer: schemas do."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.core.database import Base, JSONType, utcnow

JOB_STATUSES = ("queued", "running", "succeeded", "failed", "cancelled")


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
    """The plan job this one is a fanned-out part of (one GPU count x batch size), if any."""
    owner_key_id: Mapped[str | None] = mapped_column(String(36), default=None, index=True)
    """The API key that submitted the job (None without auth): only it, or admin, may see it."""
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(default=None)
    heartbeat_at: Mapped[datetime | None] = mapped_column(default=None)
    finished_at: Mapped[datetime | None] = mapped_column(default=None)
