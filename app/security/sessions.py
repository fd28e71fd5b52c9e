"""Server-side web sessions: a row per sign-in, bound to its API key.

The signed cookie (app/auth/session.py) names a ``web_session`` row; a session counts only while
its row is neither revoked nor expired and its key is not revoked. So signing out ends the
session everywhere (not just in this browser), and revoking a key ends every session signed in
with it (:meth:`WebSessionStore.revoke_for_key`, called by the key store).
"""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta

from sqlalchemy import ForeignKey, String, select, update
from sqlalchemy.orm import Mapped, Session, mapped_column

from app.auth.models import ApiKeyRow
from app.db.base import Base, utcnow


class WebSessionRow(Base):
    __tablename__ = "web_session"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    """Random (256 bits); the signed cookie carries it, never the key."""
    key_id: Mapped[str] = mapped_column(ForeignKey("api_key.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime] = mapped_column()
    revoked_at: Mapped[datetime | None] = mapped_column(default=None)
    """Set by sign-out, or by revoking the key."""


class WebSessionStore:
    """The repository of ``web_session`` rows (flushes, never commits)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def create(self, key_id: str, max_age_s: float) -> str:
        row = WebSessionRow(
            id=secrets.token_urlsafe(32),
            key_id=key_id,
            expires_at=utcnow() + timedelta(seconds=max_age_s),
        )
        self.session.add(row)
        self.session.flush()
        return row.id

    def is_active(self, session_id: str, key_id: str) -> bool:
        """Whether the session exists for this key, is live, and its key is not revoked."""
        stmt = (
            select(WebSessionRow.id)
            .join(ApiKeyRow, ApiKeyRow.id == WebSessionRow.key_id)
            .where(
                WebSessionRow.id == session_id,
                WebSessionRow.key_id == key_id,
                WebSessionRow.revoked_at.is_(None),
                WebSessionRow.expires_at > utcnow(),
                ApiKeyRow.revoked_at.is_(None),
            )
        )
        return self.session.scalar(stmt) is not None

    def revoke(self, session_id: str) -> None:
        self.session.execute(
            update(WebSessionRow)
            .where(WebSessionRow.id == session_id, WebSessionRow.revoked_at.is_(None))
            .values(revoked_at=utcnow())
        )

    def revoke_for_key(self, key_id: str) -> int:
        result = self.session.execute(
            update(WebSessionRow)
            .where(WebSessionRow.key_id == key_id, WebSessionRow.revoked_at.is_(None))
            .values(revoked_at=utcnow())
            .execution_options(synchronize_session=False)
        )
        return int(getattr(result, "rowcount", 0) or 0)
