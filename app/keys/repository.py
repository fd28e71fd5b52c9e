"""API key repository: the only code that builds API-key SQL. It flushes, never commits."""

from __future__ import annotations

import builtins
import secrets
from datetime import timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.keys.models import ApiKeyRow, WebSessionRow


class ApiKeyRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def add(self, row: ApiKeyRow) -> ApiKeyRow:
        self.session.add(row)
        self.session.flush()
        return row

    def list(self, include_revoked: bool = True) -> builtins.list[ApiKeyRow]:
        stmt = select(ApiKeyRow).order_by(ApiKeyRow.created_at)
        if not include_revoked:
            stmt = stmt.where(ApiKeyRow.revoked_at.is_(None))
        return builtins.list(self.session.scalars(stmt))

    def by_prefix(self, prefix: str) -> ApiKeyRow | None:
        return self.session.scalar(select(ApiKeyRow).where(ApiKeyRow.prefix == prefix))

    def by_id_or_prefix(self, key_id_or_prefix: str) -> ApiKeyRow | None:
        return self.session.get(ApiKeyRow, key_id_or_prefix) or self.by_prefix(key_id_or_prefix)

    def mark_revoked(self, row: ApiKeyRow) -> bool:
        """Revoke the key unless it already is; False when another request revoked it first
        (its time is kept). ``row`` is re-read either way."""
        result = self.session.execute(
            update(ApiKeyRow)
            .where(ApiKeyRow.id == row.id, ApiKeyRow.revoked_at.is_(None))
            .values(revoked_at=utcnow())
            .execution_options(synchronize_session=False)
        )
        self.session.refresh(row)
        return int(getattr(result, "rowcount", 0) or 0) == 1

    def flush(self) -> None:
        self.session.flush()


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
