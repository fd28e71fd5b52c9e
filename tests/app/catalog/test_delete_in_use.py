"""A user GPU that a user cluster names cannot be deleted (409 naming the clusters): the
cluster would be left pointing at nothing and every plan on it would fail. Once the cluster
is gone (or names another GPU), the GPU deletes."""

from __future__ import annotations

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
