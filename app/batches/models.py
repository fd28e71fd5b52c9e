"""Batch rows: plan jobs submitted together."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.core.database import Base, JSONType, utcnow


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
