"""Two writes of one catalog entry at the same time (QA: what a scheduler meets): two POSTs of one
slug are one 201 and one 409 with one version stored; a DELETE and a PUT racing end as one of
the two orders, never a 500 and never a version left behind without its entry.

Each request runs in its own thread and waits at a barrier after it has read the entry, so the
two writes are sent for a state both have seen (the race, made certain)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.app.catalog.test_concurrent_deletes import SMALL_MODEL, _both_read_first


def _versions(client: TestClient) -> list[tuple[int, int]]:
    from sqlalchemy import select

    from app.catalog.models import CatalogVersionRow

    factory = client.app.state.session_factory  # type: ignore[attr-defined]
    with factory() as session:
        rows = session.scalars(select(CatalogVersionRow)).all()
        return sorted((row.entry_id, row.version) for row in rows)


def test_two_creates_of_one_slug_are_one_201_and_one_409(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _versions(client)
    _both_read_first(monkeypatch)
    body = {"slug": "twin", "spec": SMALL_MODEL}
    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda _: client.post("/v1/models", json=body), range(2)))
    assert sorted(r.status_code for r in answers) == [201, 409], [r.text for r in answers]
    lost = next(r for r in answers if r.status_code == 409)
    assert "'twin' already exists" in lost.json()["detail"]
    entry = client.get("/v1/models/twin").json()
    assert entry["version"] == 1
    assert len(_versions(client)) == len(before) + 1  # one entry, one version: nothing half-stored


def test_a_put_racing_a_delete_is_never_a_500_nor_leaves_a_version(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both orders, each made certain: the PUT first (a new version, then both deleted), or the
    DELETE committed between the PUT's read and its write: a 404 saying so (a 500 before,
    SQLAlchemy's StaleDataError from the entry's version UPDATE matching no row)."""
    from app.catalog.repository import CatalogRepository
    from app.catalog.service import CatalogService

    assert client.post("/v1/models", json={"slug": "raced", "spec": SMALL_MODEL}).status_code == 201
    before = _versions(client)
    factory = client.app.state.session_factory  # type: ignore[attr-defined]
    original = CatalogRepository.add_version

    def deleted_meanwhile(self: CatalogRepository, entry: Any, spec: Any, meta: Any) -> Any:
        monkeypatch.setattr(CatalogRepository, "add_version", original)
        with factory() as other:  # another request deletes it after this one read it
            CatalogService(other).delete("model", "raced")
            other.commit()
        return original(self, entry, spec, meta)

    monkeypatch.setattr(CatalogRepository, "add_version", deleted_meanwhile)
    late = client.put("/v1/models/raced", json={"spec": {**SMALL_MODEL, "num_layers": 8}})
    assert late.status_code == 404, late.text
    assert "deleted by another request" in late.json()["detail"]
    assert client.get("/v1/models/raced").status_code == 404
    assert len(_versions(client)) == len(before) - 1  # its one version went with it


def test_a_delete_racing_a_put_ends_as_one_of_the_two_orders(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert client.post("/v1/models", json={"slug": "raced", "spec": SMALL_MODEL}).status_code == 201
    before = _versions(client)
    _both_read_first(monkeypatch)
    bigger = {"spec": {**SMALL_MODEL, "num_layers": 8}}
    with ThreadPoolExecutor(2) as pool:
        put = pool.submit(client.put, "/v1/models/raced", json=bigger)
        gone = pool.submit(client.delete, "/v1/models/raced")
        put_answer, delete_answer = put.result(), gone.result()
    assert delete_answer.status_code == 204, delete_answer.text
    assert put_answer.status_code in (200, 404), put_answer.text
    assert client.get("/v1/models/raced").status_code == 404
    assert len(_versions(client)) == len(before) - 1
