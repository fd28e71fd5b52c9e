"""The ``api_key`` table: a key's public prefix (for lookup), its SHA-256, scopes, revocation.

The key itself is never stored: it is shown once, when it is created.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String
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


# Server-side web sessions: a row per sign-in, bound to its API key. The signed cookie
# (app/core/session.py) names a row; it counts only while neither revoked nor expired and its
# key is not revoked, so signing out or revoking the key ends the session everywhere.
class WebSessionRow(Base):
    __tablename__ = "web_session"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    """Random (256 bits); the signed cookie carries it, never the key."""
    key_id: Mapped[str] = mapped_column(ForeignKey("api_key.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime] = mapped_column()
    revoked_at: Mapped[datetime | None] = mapped_column(default=None)
    """Set by sign-out, or by revoking the key."""
