"""POST of a built-in entry's slug: the 409 must not send the user to a PUT that is refused too
(it said "PUT /v1/models/llama3.1-70b adds a version"; that PUT is a 409 "read-only")."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.app.catalog.test_api import SMALL


def test_posting_a_builtin_slug_says_it_is_read_only_not_to_put(client: TestClient) -> None:
    r = client.post("/v1/models", json={"slug": "llama3.1-70b", "spec": SMALL})
    assert r.status_code == 409
    detail = r.json()["detail"]
    assert "built in and read-only" in detail and "another slug" in detail
    assert "PUT" not in detail
    # the hint is right: the PUT it used to suggest is refused
    assert client.put("/v1/models/llama3.1-70b", json={"spec": SMALL}).status_code == 409


def test_posting_a_user_slug_twice_still_points_at_put(client: TestClient) -> None:
    assert client.post("/v1/models", json={"slug": "tiny", "spec": SMALL}).status_code == 201
    r = client.post("/v1/models", json={"slug": "tiny", "spec": SMALL})
    assert r.status_code == 409 and "PUT /v1/models/tiny adds a version" in r.json()["detail"]
    assert client.put("/v1/models/tiny", json={"spec": SMALL}).status_code == 200
