"""A short-lived, per-app cache of catalog look-ups (``CatalogService.find_spec``).

Every evaluation and plan job resolves its model and GPU slugs against the catalog; without a
cache that is a database round trip or two per request for data that changes a few times a day.
Entries live :data:`TTL_S` seconds; a catalog write in this process clears the cache at once,
and other API processes see it within the TTL (as with API keys: app/keys/auth.py). The cache
rides on the session factory (``sessionmaker(info=...)``), so whoever holds a session of this
app shares it, and a session without one (scripts, tests) reads the database every time.
"""

from __future__ import annotations

import copy
import threading
import time
from typing import Any

from sqlalchemy.orm import Session

TTL_S = 5.0
INFO_KEY = "catalog_cache"
Found = tuple[dict[str, Any], bool] | None


class CatalogCache:
    def __init__(self, ttl_s: float = TTL_S, max_entries: int = 4096) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._entries: dict[tuple[str, str], tuple[float, Found]] = {}
        self._lock = threading.Lock()

    def get(self, kind: str, slug: str) -> tuple[bool, Found]:
        """(hit, value); the value is a copy, so a caller may change it."""
        with self._lock:
            entry = self._entries.get((kind, slug))
        if entry is None or entry[0] < time.monotonic():
            return False, None
        return True, copy.deepcopy(entry[1])

    def put(self, kind: str, slug: str, value: Found) -> None:
        with self._lock:
            if len(self._entries) >= self.max_entries:
                self._entries.clear()
            self._entries[(kind, slug)] = (time.monotonic() + self.ttl_s, copy.deepcopy(value))

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


def cache_of(session: Session) -> CatalogCache | None:
    cache = session.info.get(INFO_KEY)
    return cache if isinstance(cache, CatalogCache) else None
