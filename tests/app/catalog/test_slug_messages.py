"""A slug that breaks only the length rule is told so (QA round 8): 200 valid letters were
refused with the character rule alone, which they meet."""

from __future__ import annotations

from fastapi.testclient import TestClient

CLUSTER = {"gpu": "h100-sxm-80gb", "gpus_per_node": 8, "inter_node_bandwidth_bytes_per_s": 5e10}


def test_a_too_long_slug_names_the_length_limit(client: TestClient) -> None:
    r = client.post("/v1/clusters", json={"slug": "a" * 200, "spec": CLUSTER})
    assert r.status_code == 422
    [error] = r.json()["errors"]
    assert error["field"] == "slug" and "at most 128 characters" in error["message"]
    assert client.post("/v1/clusters", json={"slug": "a" * 128, "spec": CLUSTER}).status_code == 201
