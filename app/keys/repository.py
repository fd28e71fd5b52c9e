"""API key repository: the only code that builds API-key SQL. It flushes, never commits."""

from __future__ import annotations

import builtins

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.keys.models import ApiKeyRow


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

    def flush(self) -> None:
        self.session.flush()
