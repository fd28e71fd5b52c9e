"""Revoking a key is idempotent, unlike deleting a catalog entry (404 once it is gone): the key
stays, listed as revoked, so a second ``DELETE /v1/keys/{id}`` (or one racing the first)
answers 200 with the key as the first revocation left it, its time not moved."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.core.engine import unit_of_work
from app.keys.repository import ApiKeyRepository
from app.keys.service import ApiKeyStore
from tests.app.keys.test_auth import new_key
from tests.app.keys.test_auth import secured as secured  # the fixture


def test_a_revoke_racing_another_keeps_the_first_time(
    secured: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    admin = new_key(secured, "admin")
    prefix = new_key(secured, "read").split("_")[1]
    factory = secured.app.state.session_factory  # type: ignore[attr-defined]
    original = ApiKeyRepository.by_id_or_prefix
    first: dict[str, Any] = {}

    def other_request_wins(self: ApiKeyRepository, key: str) -> Any:
        found = original(self, key)  # read before the other request revokes it
        monkeypatch.setattr(ApiKeyRepository, "by_id_or_prefix", original)
        with unit_of_work(factory) as other:
            first["revoked_at"] = ApiKeyStore(other).revoke(prefix).revoked_at
        return found

    monkeypatch.setattr(ApiKeyRepository, "by_id_or_prefix", other_request_wins)
    late = secured.delete(f"/v1/keys/{prefix}", headers={"X-API-Key": admin})
    assert late.status_code == 200, late.text
    assert late.json()["revoked_at"] == first["revoked_at"]


def test_a_second_revoke_answers_the_key_unchanged(secured: TestClient) -> None:
    admin = new_key(secured, "admin")
    prefix = new_key(secured, "read").split("_")[1]
    once = secured.delete(f"/v1/keys/{prefix}", headers={"X-API-Key": admin})
    twice = secured.delete(f"/v1/keys/{prefix}", headers={"X-API-Key": admin})
    assert once.status_code == twice.status_code == 200
    assert once.json() == twice.json()
    unknown = secured.delete("/v1/keys/nope", headers={"X-API-Key": admin})
    assert unknown.status_code == 404
