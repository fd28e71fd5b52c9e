"""One input policy on SQLite and PostgreSQL (``database_url`` runs both): NUL and non-finite
numbers are refused at the edge with a 422 that names the field, never a ``DataError`` 500 on
PostgreSQL nor a NaN that SQLite reads back as null."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.app.conftest import JOB_70B, LAYOUT_70B

SMALL = {
    "num_layers": 2,
    "hidden_size": 256,
    "ffn_hidden_size": 1024,
    "num_attention_heads": 4,
    "num_query_groups": 4,
    "vocab_size": 1000,
}


def assert_rejected(response: Any, field: str, words: str) -> None:
    assert response.status_code == 422, response.text
    body = response.json()
    assert [e["field"] for e in body["errors"]] == [field], body
    assert words in body["detail"]


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/batches", {"jobs": [{**JOB_70B, "gpu": "h100\x00"}]}, "jobs.0.gpu"),
        ("/v1/evaluations", {**LAYOUT_70B, "model": {**SMALL, "name": "m\x00"}}, "model.name"),
        ("/v1/models", {"slug": "tiny", "spec": SMALL, "metadata": {"a": "\x00"}}, "metadata.a"),
        ("/v1/keys", {"scopes": ["read"], "name": "ci\x00"}, "name"),
    ],
)
def test_nul_in_json_is_422_naming_the_field(
    client: TestClient, path: str, body: dict[str, Any], field: str
) -> None:
    assert_rejected(client.post(path, json=body), field, "NUL")


def test_nul_in_a_json_key_is_422(client: TestClient) -> None:
    body = {"slug": "tiny", "spec": SMALL, "metadata": {"a\x00b": 1}}
    assert_rejected(client.post("/v1/models", json=body), "metadata.a\\u0000b", "NUL")


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_numbers_are_422_naming_the_field(client: TestClient, token: str) -> None:
    raw = '{"slug": "tiny", "spec": {"num_layers": 2}, "metadata": {"x": [1, TOKEN]}}'
    raw = raw.replace("TOKEN", token)
    response = client.post("/v1/models", content=raw, headers={"content-type": "application/json"})
    assert_rejected(response, "metadata.x.1", "finite")


def test_nothing_rejected_is_stored(client: TestClient) -> None:
    client.post("/v1/models", json={"slug": "tiny", "spec": SMALL, "metadata": {"a": "\x00"}})
    assert client.get("/v1/models/tiny").status_code == 404


def test_deep_json_is_422_not_a_recursion_error(client: TestClient) -> None:
    deep = "[" * 10_000 + "]" * 10_000
    for path in ("/v1/clusters/dgx-h100/measurements", "/v1/evaluations", "/v1/models"):
        response = client.post(path, content=deep, headers={"content-type": "application/json"})
        assert_rejected(response, "body", "nested too deeply")


def test_invalid_utf8_json_is_422(client: TestClient) -> None:
    response = client.post(
        "/v1/evaluations",
        content=b'{"model": "\xff\xfe"}',
        headers={"content-type": "application/json"},
    )
    assert_rejected(response, "body", "UTF-8")


def test_nul_in_csv_upload_is_422_naming_the_line(client: TestClient) -> None:
    csv = "model_name,tp\nllama,4\nx\x00,2\n"
    response = client.post(
        "/v1/clusters/dgx-h100/measurements", content=csv, headers={"content-type": "text/csv"}
    )
    assert_rejected(response, "body", "line 3")


def test_nul_in_a_query_parameter_is_422(client: TestClient) -> None:
    assert_rejected(client.get("/v1/models?cursor=%00"), "query.cursor", "NUL")


def test_nul_in_the_path_is_422(client: TestClient) -> None:
    assert_rejected(client.get("/v1/models/ab%00c"), "path", "NUL")


def test_nul_in_a_form_field_is_422(client: TestClient) -> None:
    assert_rejected(client.post("/login", data={"api_key": "pp_\x00"}), "api_key", "NUL")


def test_ordinary_requests_pass_unchanged(client: TestClient) -> None:
    assert client.post("/v1/evaluations", json=LAYOUT_70B).status_code == 200
    created = client.post(
        "/v1/models", json={"slug": "tiny", "spec": SMALL, "metadata": {"note": "a\\u0000 b"}}
    )
    assert created.status_code == 201, created.text
    assert client.get("/v1/models/tiny").json()["metadata"] == {"note": "a\\u0000 b"}


def test_a_recursion_error_anywhere_is_a_422(client: TestClient) -> None:
    def too_deep(*_: Any, **__: Any) -> Any:
        raise RecursionError("maximum recursion depth exceeded")

    state = client.app.state  # type: ignore[attr-defined]
    state.backend = dataclasses.replace(state.backend, evaluate=too_deep)
    response = client.post("/v1/evaluations", json=LAYOUT_70B)
    assert_rejected(response, "body", "nested too deeply")
