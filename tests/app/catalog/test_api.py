"""Catalog routes: built-in entries are seeded and read-only, user entries are versioned."""

from __future__ import annotations

from fastapi.testclient import TestClient

PROBLEM = "application/problem+json"
SMALL = {
    "num_layers": 4,
    "hidden_size": 512,
    "ffn_hidden_size": 2048,
    "num_attention_heads": 8,
    "vocab_size": 32000,
}


def test_builtin_models_are_seeded(client: TestClient) -> None:
    items = client.get("/v1/models").json()["items"]
    assert [(m["slug"], m["builtin"], m["version"]) for m in items] == [("llama3.1-70b", True, 1)]
    assert items[0]["spec"]["hidden_size"] == 8192


def test_seeding_twice_adds_nothing(make_client) -> None:
    make_client()
    second = make_client()
    assert len(second.get("/v1/gpus").json()["items"]) == 1


def test_create_model_returns_201_with_location(client: TestClient) -> None:
    r = client.post("/v1/models", json={"slug": "tiny", "spec": SMALL})
    assert r.status_code == 201
    assert r.headers["location"] == "/v1/models/tiny"
    assert r.json()["spec"]["name"] == "tiny"
    assert r.json()["version"] == 1 and r.json()["builtin"] is False


def test_put_adds_a_version_and_get_returns_latest(client: TestClient) -> None:
    client.post("/v1/models", json={"slug": "tiny", "spec": SMALL})
    r = client.put("/v1/models/tiny", json={"spec": {**SMALL, "num_layers": 8}})
    assert r.status_code == 200
    got = client.get("/v1/models/tiny").json()
    assert (got["version"], got["spec"]["num_layers"]) == (2, 8)


def test_create_twice_is_409(client: TestClient) -> None:
    client.post("/v1/models", json={"slug": "tiny", "spec": SMALL})
    r = client.post("/v1/models", json={"slug": "tiny", "spec": SMALL})
    assert r.status_code == 409
    assert r.headers["content-type"] == PROBLEM
    assert "already exists" in r.json()["detail"]


def test_builtin_entries_are_read_only(client: TestClient) -> None:
    put = client.put("/v1/models/llama3.1-70b", json={"spec": SMALL})
    delete = client.delete("/v1/gpus/h100-sxm-80gb")
    assert (put.status_code, delete.status_code) == (409, 409)
    assert "built in and read-only" in put.json()["detail"]


def test_unknown_slug_is_404_problem(client: TestClient) -> None:
    r = client.get("/v1/models/nope")
    assert r.status_code == 404
    body = r.json()
    assert body["status"] == 404 and body["title"] == "Not found"
    assert "nope" in body["detail"]


def test_invalid_spec_is_422_naming_the_field(client: TestClient) -> None:
    r = client.post("/v1/models", json={"slug": "bad", "spec": {**SMALL, "hidden_size": -1}})
    assert r.status_code == 422
    assert r.json()["errors"][0]["field"] == "spec.hidden_size"


def test_unknown_spec_field_is_422(client: TestClient) -> None:
    r = client.post("/v1/models", json={"slug": "bad", "spec": {**SMALL, "hiden_size": 5}})
    assert r.status_code == 422
    assert r.json()["errors"][0]["field"] == "spec.hiden_size"


def test_bad_slug_is_422_naming_slug(client: TestClient) -> None:
    r = client.post("/v1/models", json={"slug": "Not A Slug", "spec": SMALL})
    assert r.status_code == 422
    assert r.json()["errors"][0]["field"] == "slug"


def test_delete_user_model(client: TestClient) -> None:
    client.post("/v1/models", json={"slug": "tiny", "spec": SMALL})
    assert client.delete("/v1/models/tiny").status_code == 204
    assert client.get("/v1/models/tiny").status_code == 404


def test_cluster_needs_a_known_gpu(client: TestClient) -> None:
    r = client.post("/v1/clusters", json={"slug": "mine", "spec": {"gpu": "tpu-v9"}})
    assert r.status_code == 422
    assert r.json()["errors"][0]["field"] == "spec.gpu"


def test_cluster_preset_created_with_defaults(client: TestClient) -> None:
    r = client.post("/v1/clusters", json={"slug": "mine", "spec": {"gpu": "h100-sxm-80gb"}})
    assert r.status_code == 201
    assert r.json()["spec"]["gpus_per_node"] == 8


def test_gpu_create_validates_numbers(client: TestClient) -> None:
    spec = {
        "hbm_bytes": 0,
        "hbm_bandwidth_bytes_per_s": 1e12,
        "peak_bf16_flop_per_s": 1e15,
        "peak_fp8_flop_per_s": None,
        "intra_node_bandwidth_bytes_per_s": 1e11,
    }
    r = client.post("/v1/gpus", json={"slug": "g", "spec": spec})
    assert r.status_code == 422
    assert r.json()["errors"][0]["field"] == "spec.hbm_bytes"
