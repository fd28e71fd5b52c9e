"""The ``api_key`` table: a key's public prefix (for lookup), its SHA-256, scopes, revocation.

The key itself is never stored: it is shown once, when it is created.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from app.core.database import Base, utcnow


class ApiKeyRow(Base):
    __tablename__ = "api_key"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    prefix: Mapped[str] = mapped_column(String(32), unique=True)
    """The key's public part (``pp_<prefix>_...``): finds the row without the secret."""
    key_hash: Mapped[str] = mapped_column(String(64))
    """SHA-256 (hex) of the whole key."""
    name: Mapped[str] = mapped_column(String(128), default="")
    scopes: Mapped[str] = mapped_column(String(64))
    """Space-separated: read, plan, admin."""
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(default=None)
