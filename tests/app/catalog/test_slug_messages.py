"""Catalog messages that named the wrong rule (QA round 8): 200 valid letters refused with the
character rule alone, which they meet; "NaN" as text refused as over the bandwidth limit."""

from __future__ import annotations

from fastapi.testclient import TestClient

CLUSTER = {"gpu": "h100-sxm-80gb", "gpus_per_node": 8, "inter_node_bandwidth_bytes_per_s": 5e10}


def test_a_too_long_slug_names_the_length_limit(client: TestClient) -> None:
    r = client.post("/v1/clusters", json={"slug": "a" * 200, "spec": CLUSTER})
    assert r.status_code == 422
    [error] = r.json()["errors"]
    assert error["field"] == "slug" and "at most 128 characters" in error["message"]
    assert client.post("/v1/clusters", json={"slug": "a" * 128, "spec": CLUSTER}).status_code == 201


def test_nan_as_text_in_a_cluster_spec_is_not_a_finite_number(client: TestClient) -> None:
    """It was "less than or equal to 10000000000000" (pydantic read "NaN" as a float)."""
    spec = CLUSTER | {"inter_node_bandwidth_bytes_per_s": "NaN"}
    r = client.post("/v1/clusters", json={"slug": "nan-net", "spec": spec})
    assert r.status_code == 422
    [error] = r.json()["errors"]
    assert error["field"] == "spec.inter_node_bandwidth_bytes_per_s"
    assert "finite number" in error["message"]
