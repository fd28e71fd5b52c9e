"""Two DELETEs of one entry at the same time: one deletes it (204), the other is told it is gone
(404), as a DELETE after it would be. Before, both read the row, both sent their DELETE, the
later one matched no row and still answered 204 (SQLAlchemy only warned).

The requests run in two threads; each waits at a barrier after reading the entry, so both
DELETE statements are sent for a row both have seen (the race, made certain)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.app.catalog.test_write_conflicts import GPU

SMALL_MODEL = {"num_layers": 4, "hidden_size": 512, "ffn_hidden_size": 2048,
               "num_attention_heads": 8, "vocab_size": 32000}  # fmt: skip


def _both_read_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first read of each of the two DELETEs waits until the other has read too (a
    cluster's DELETE then writes its measurements first: the barrier must come before)."""
    from app.catalog.repository import CatalogRepository

    barrier = threading.Barrier(2, timeout=10)
    waiting = [2]
    lock = threading.Lock()
    original: Callable[..., Any] = CatalogRepository.get

    def get_then_wait(self: CatalogRepository, kind: str, slug: str) -> Any:
        found = original(self, kind, slug)
        with lock:
            wait, waiting[0] = waiting[0] > 0, waiting[0] - 1
        if wait:
            barrier.wait()
        return found

    monkeypatch.setattr(CatalogRepository, "get", get_then_wait)


def _two_deletes(client: TestClient, url: str) -> list[int]:
    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(client.delete, [url, url]))
    return sorted(r.status_code for r in answers)


@pytest.mark.parametrize(
    ("collection", "spec"),
    [("models", SMALL_MODEL), ("gpus", GPU), ("clusters", {"gpu": "h100-sxm-80gb"})],
)
def test_two_deletes_at_once_are_one_204_and_one_404(
    client: TestClient, monkeypatch: pytest.MonkeyPatch, collection: str, spec: dict[str, Any]
) -> None:
    created = client.post(f"/v1/{collection}", json={"slug": "raced", "spec": spec})
    assert created.status_code == 201, created.text
    _both_read_first(monkeypatch)
    assert _two_deletes(client, f"/v1/{collection}/raced") == [204, 404]
    assert client.get(f"/v1/{collection}/raced").status_code == 404


def test_the_loser_is_told_another_request_deleted_it(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert client.post("/v1/models", json={"slug": "raced", "spec": SMALL_MODEL}).status_code == 201
    _both_read_first(monkeypatch)
    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(client.delete, ["/v1/models/raced"] * 2))
    lost = next(r for r in answers if r.status_code == 404)
    assert "deleted by another request" in lost.json()["detail"]


def test_a_delete_after_a_delete_is_a_404(client: TestClient) -> None:
    """The documented answer without a race: the entry is gone."""
    assert client.post("/v1/models", json={"slug": "gone", "spec": SMALL_MODEL}).status_code == 201
    assert client.delete("/v1/models/gone").status_code == 204
    again = client.delete("/v1/models/gone")
    assert again.status_code == 404 and "no model named 'gone'" in again.json()["detail"]
