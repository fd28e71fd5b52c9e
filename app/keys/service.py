"""API keys: generation, hashing, scopes, and the store (create, list, revoke, verify).

A key looks like ``pp_<prefix>_<secret>``: the 12-hex-digit prefix is public (it names the key
in listings and finds its row), the secret is 32 random bytes. Only the SHA-256 of the whole key
is stored; a fast hash is right here because the key has 256 bits of entropy (nothing to guess).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy.orm import Session

from app.core.database import utcnow
from app.core.errors import InvalidInputError, NotFoundError
from app.keys.models import ApiKeyRow
from app.keys.repository import ApiKeyRepository, WebSessionStore

SCOPES = ("read", "plan", "admin")
"""Each scope includes the ones before it: admin can plan, plan can read."""
KEY_PATTERN = re.compile(r"^pp_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$")
KEY_TEXT = re.compile(r"pp_[0-9a-f]{12}_[A-Za-z0-9_-]{10,}")
"""Anything in a text that looks like a key (the log filter masks it)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Principal:
    """Who sent a request: a key's id and prefix, and what it may do."""

    key_id: str | None
    prefix: str | None
    scopes: frozenset[str]

    def allows(self, scope: str) -> bool:
        return scope in self.scopes


ANONYMOUS_ADMIN = Principal(key_id=None, prefix=None, scopes=frozenset(SCOPES))
"""Everyone, when ``PLANNER_AUTH=none``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiKeyInfo:
    id: str
    prefix: str
    name: str
    scopes: tuple[str, ...]
    created_at: str
    revoked_at: str | None

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "prefix": self.prefix,
            "name": self.name,
            "scopes": list(self.scopes),
            "created_at": self.created_at,
            "revoked_at": self.revoked_at,
        }


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def normalise_scopes(scopes: Iterable[str]) -> tuple[str, ...]:
    """The given scopes, checked, in canonical order."""
    wanted = {s.strip().lower() for s in scopes if s.strip()}
    unknown = sorted(wanted - set(SCOPES))
    if unknown or not wanted:
        raise InvalidInputError.for_field(
            "scopes",
            f"scopes must be a non-empty subset of {', '.join(SCOPES)}"
            + (f" (unknown: {', '.join(unknown)})" if unknown else ""),
        )
    return tuple(s for s in SCOPES if s in wanted)


def effective_scopes(scopes: Iterable[str]) -> frozenset[str]:
    """A key's scopes and the ones they include (admin > plan > read)."""
    granted = set(scopes)
    rank = max((SCOPES.index(s) for s in granted if s in SCOPES), default=-1)
    return frozenset(SCOPES[: rank + 1])


def _info(row: ApiKeyRow) -> ApiKeyInfo:
    return ApiKeyInfo(
        id=row.id,
        prefix=row.prefix,
        name=row.name,
        scopes=tuple(row.scopes.split()),
        created_at=row.created_at.isoformat(),
        revoked_at=row.revoked_at.isoformat() if row.revoked_at else None,
    )


class ApiKeyStore:
    """Keys in the database. Flushes, never commits (the caller's unit of work does)."""

    def __init__(self, session: Session) -> None:
        self.repo = ApiKeyRepository(session)

    def create(self, scopes: Iterable[str], name: str = "") -> tuple[str, ApiKeyInfo]:
        """A new key: (the key, shown only now; its stored description)."""
        checked = normalise_scopes(scopes)
        prefix = secrets.token_hex(6)
        key = f"pp_{prefix}_{secrets.token_urlsafe(32)}"
        row = ApiKeyRow(
            id=str(uuid.uuid4()),
            prefix=prefix,
            key_hash=hash_key(key),
            name=name[:128],
            scopes=" ".join(checked),
            created_at=utcnow(),
        )
        self.repo.add(row)
        return key, _info(row)

    def list(self, include_revoked: bool = True) -> list[ApiKeyInfo]:
        return [_info(r) for r in self.repo.list(include_revoked)]

    def revoke(self, key_id_or_prefix: str) -> ApiKeyInfo:
        row = self.repo.by_id_or_prefix(key_id_or_prefix)
        if row is None:
            raise NotFoundError(f"no API key {key_id_or_prefix!r}; `planner keys list` shows them")
        # idempotent (the key stays, listed as revoked): a second revoke, also one racing this
        # one, answers the key with the first revocation's time
        if row.revoked_at is None and self.repo.mark_revoked(row):
            WebSessionStore(self.repo.session).revoke_for_key(row.id)  # its sign-ins end with it
            self.repo.flush()
        return _info(row)

    def verify(self, key: str) -> Principal | None:
        """The key's principal if it exists and is not revoked, else None."""
        match = KEY_PATTERN.match(key)
        if match is None:
            return None
        row = self.repo.by_prefix(match.group(1))
        if row is None or row.revoked_at is not None:
            return None
        if not hmac.compare_digest(row.key_hash, hash_key(key)):
            return None
        return Principal(
            key_id=row.id, prefix=row.prefix, scopes=effective_scopes(row.scopes.split())
        )
