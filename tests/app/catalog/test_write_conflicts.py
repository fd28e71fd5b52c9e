"""Writes that conflict with what is stored are 409s, never 500s or silent loss: a user GPU
that a user cluster names cannot be deleted (the cluster would point at nothing and every plan
on it would fail), and of two PUTs racing for one version the later is told to retry."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

GPU = {
    "hbm_bytes": 80 * 2**30,
    "hbm_bandwidth_bytes_per_s": 3.35e12,
    "peak_bf16_flop_per_s": 989e12,
    "peak_fp8_flop_per_s": 1979e12,
    "intra_node_bandwidth_bytes_per_s": 450e9,
}


def test_a_gpu_in_use_by_a_cluster_is_a_409(client: TestClient) -> None:
    assert client.post("/v1/gpus", json={"slug": "my-gpu", "spec": GPU}).status_code == 201
    cluster = {"slug": "my-cluster", "spec": {"gpu": "my-gpu"}}
    assert client.post("/v1/clusters", json=cluster).status_code == 201
    refused = client.delete("/v1/gpus/my-gpu")
    assert refused.status_code == 409, refused.text
    assert "my-cluster" in refused.json()["detail"]
    assert client.get("/v1/gpus/my-gpu").status_code == 200  # nothing lost
    assert client.delete("/v1/clusters/my-cluster").status_code == 204
    assert client.delete("/v1/gpus/my-gpu").status_code == 204


def test_a_gpu_no_cluster_names_deletes(client: TestClient) -> None:
    assert client.post("/v1/gpus", json={"slug": "spare", "spec": GPU}).status_code == 201
    assert client.delete("/v1/gpus/spare").status_code == 204


def test_two_puts_of_one_entry_at_once_are_one_version_and_a_409(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two requests read version 1 and both write version 2: the later one is a 409 saying to
    retry (it was a 500 from the unique (entry, version) constraint), and the first is kept."""
    from app.catalog.repository import CatalogRepository
    from app.catalog.service import CatalogService

    small = {"num_layers": 4, "hidden_size": 512, "ffn_hidden_size": 2048,
             "num_attention_heads": 8, "vocab_size": 32000}  # fmt: skip
    assert client.post("/v1/models", json={"slug": "raced", "spec": small}).status_code == 201
    factory = client.app.state.session_factory  # type: ignore[attr-defined]
    original = CatalogRepository.add_version

    def other_request_wins(self: CatalogRepository, entry: Any, spec: Any, meta: Any) -> Any:
        monkeypatch.setattr(CatalogRepository, "add_version", original)
        with factory() as other:  # commits version 2 after this request read version 1
            CatalogService(other).update("model", "raced", {**small, "num_layers": 8}, {})
            other.commit()
        return original(self, entry, spec, meta)

    monkeypatch.setattr(CatalogRepository, "add_version", other_request_wins)
    late = client.put("/v1/models/raced", json={"spec": {**small, "num_layers": 6}})
    assert late.status_code == 409, late.text
    assert "send the PUT again" in late.json()["detail"]
    kept = client.get("/v1/models/raced").json()
    assert (kept["version"], kept["spec"]["num_layers"]) == (2, 8)
