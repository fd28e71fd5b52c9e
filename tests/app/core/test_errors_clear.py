"""422 problems name fields as the client wrote them (no pydantic union-member tags such as
``constrained-str``), give one error per field saying what is accepted, report malformed JSON
as such, and slugs are case-insensitive."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.core.errors import problem_fields
from tests.app.conftest import JOB_70B, LAYOUT_70B

EVALUATION = dict(LAYOUT_70B)
PLAN = dict(JOB_70B)
INTERNALS = ("constrained-", "[", "function-", "dict", "json decode")


def errors_of(response: Any) -> list[dict[str, str]]:
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    errors: list[dict[str, str]] = body["errors"]
    fields = [e["field"] for e in errors]
    assert len(fields) == len(set(fields)), errors  # one error per field
    for text in [body["detail"], *fields]:
        for internal in INTERNALS:
            assert internal not in text.lower(), (internal, text)
    return errors


@pytest.mark.parametrize("model", [5, "not a slug!", True, ["llama3.1-70b"]])
def test_bad_model_is_one_error_listing_what_is_accepted(client: TestClient, model: Any) -> None:
    errors = errors_of(client.post("/v1/evaluations", json={**EVALUATION, "model": model}))
    assert errors == [
        {
            "field": "model",
            "message": errors[0]["message"],
        }
    ]
    message = errors[0]["message"]
    assert message.startswith(
        "model must be a catalog slug such as llama3.1-70b (lowercase letters, digits, "
        "'.', '_', '-') or an object of model fields"
    )


@pytest.mark.parametrize(
    ("tp", "detail"),
    [
        ("x", 'got "x"'),
        ([0], "tp.0: Input should be greater than or equal to 1"),
        (4096, "less than or equal to 1024"),
    ],
)
def test_axis_or_list_is_one_error_with_a_clean_field(
    client: TestClient, tp: Any, detail: str
) -> None:
    errors = errors_of(client.post("/v1/plan-jobs", json={**PLAN, "tp": tp}))
    assert [e["field"] for e in errors] == ["tp"]
    assert errors[0]["message"].startswith("tp must be an integer or a list of integers")
    assert detail in errors[0]["message"]


def test_several_bad_fields_give_one_error_each(client: TestClient) -> None:
    body = {**PLAN, "model": 5, "tp": "x", "pp": [0], "gpu": "no such gpu!"}
    errors = errors_of(client.post("/v1/plan-jobs", json=body))
    assert sorted(e["field"] for e in errors) == ["gpu", "model", "pp", "tp"]
    gpu = next(e for e in errors if e["field"] == "gpu")
    assert "lowercase letters, digits" in gpu["message"]


def test_invalid_json_is_reported_on_the_body(client: TestClient) -> None:
    response = client.post(
        "/v1/evaluations",
        content=b'{"model": "llama3.1-70b", 23}',
        headers={"content-type": "application/json"},
    )
    errors = errors_of(response)
    assert len(errors) == 1 and errors[0]["field"] == "body"
    assert errors[0]["message"].startswith("the body is not valid JSON: ")
    assert "at position 26" in errors[0]["message"]
    assert response.json()["detail"] == errors[0]["message"]


def test_missing_body_is_reported_on_the_body(client: TestClient) -> None:
    response = client.post("/v1/evaluations", headers={"content-type": "application/json"})
    assert errors_of(response) == [{"field": "body", "message": "a JSON request body is required"}]


@pytest.mark.parametrize("path", ["/v1/evaluations", "/v1/plan-jobs"])
def test_slugs_are_case_insensitive(client: TestClient, path: str) -> None:
    body = {**EVALUATION, "model": " Llama3.1-70B", "gpu": "H100-SXM-80GB"}
    if path == "/v1/plan-jobs":
        body = {**PLAN, "model": "Llama3.1-70B", "gpu": "H100-SXM-80GB", "cluster": "DGX-H100"}
        body.pop("gpu")
    response = client.post(path, json=body)
    assert response.status_code in (200, 201, 202), response.text
    if path == "/v1/evaluations":
        assert response.json()["model"] == "llama3.1-70b"
        assert response.json()["gpu"] == "h100-sxm-80gb"
    else:
        assert response.json()["request"]["model"] == "llama3.1-70b"
        assert response.json()["request"]["cluster"] == "dgx-h100"


def test_unknown_slug_in_capitals_reaches_the_catalog_check(client: TestClient) -> None:
    errors = errors_of(client.post("/v1/evaluations", json={**EVALUATION, "model": "GPT-9"}))
    assert errors[0]["field"] == "model"
    assert "'gpt-9'" in errors[0]["message"]  # the planning layer's message (fake: "unknown")


def test_cluster_preset_gpu_is_case_insensitive(client: TestClient) -> None:
    response = client.post("/v1/clusters", json={"slug": "mine", "spec": {"gpu": "H100-SXM-80GB"}})
    assert response.status_code == 201, response.text
    assert response.json()["spec"]["gpu"] == "h100-sxm-80gb"


def test_problem_fields_merges_union_members_and_duplicates() -> None:
    errors = problem_fields(
        [
            {
                "type": "string_type",
                "loc": ("body", "model", "function-before[normalize_slug(), constrained-str]"),
                "msg": "Input should be a valid string",
                "input": 5,
            },
            {
                "type": "dict_type",
                "loc": ("body", "model", "dict[str,any]"),
                "msg": "Input should be a valid dictionary",
                "input": 5,
            },
            {
                "type": "int_type",
                "loc": ("body", "tp", "constrained-int"),
                "msg": "Input should be a valid integer",
                "input": [0],
            },
            {
                "type": "greater_than_equal",
                "loc": ("body", "tp", "list[constrained-int]", 0),
                "msg": "Input should be greater than or equal to 1",
                "input": 0,
                "ctx": {"ge": 1},
            },
            {
                "type": "missing",
                "loc": ("body", "seq_length"),
                "msg": "Field required",
                "input": {},
            },
            {
                "type": "missing",
                "loc": ("body", "seq_length"),
                "msg": "Field required",
                "input": {},
            },
        ]
    )
    assert [e["field"] for e in errors] == ["model", "tp", "seq_length"]
    assert errors[1]["message"] == (
        "tp must be an integer or a list of integers; "
        "tp.0: Input should be greater than or equal to 1"
    )
    assert errors[2]["message"] == "seq_length is required"


def test_problem_fields_keeps_nested_field_paths() -> None:
    errors = problem_fields(
        [
            {
                "type": "literal_error",
                "loc": ("body", "recompute", 1),
                "msg": "Input should be 'none', 'selective' or 'full'",
                "input": "x",
            },
            {
                "type": "extra_forbidden",
                "loc": ("body", "spec", "hiden_size"),
                "msg": "Extra inputs are not permitted",
                "input": 5,
            },
        ]
    )
    assert [e["field"] for e in errors] == ["recompute.1", "spec.hiden_size"]


@pytest.mark.parametrize(
    ("headers", "body", "said"),
    [
        ({}, b'{"model": "llama3.1-70b"}', "Content-Type: application/json"),
        ({"content-type": "text/plain"}, b'{"model": "llama3.1-70b"}', "Content-Type"),
        ({"content-type": "application/json"}, b"[1, 2]", "JSON object of its fields (got a list)"),
    ],
)
def test_a_body_that_is_not_a_json_object_says_how_to_send_it(
    client: TestClient, headers: dict[str, str], body: bytes, said: str
) -> None:
    """``curl -d '{...}'`` without a Content-Type read "Input should be a valid dictionary or
    object to extract fields from" before."""
    errors = errors_of(client.post("/v1/plan-jobs", content=body, headers=headers))
    assert errors[0]["field"] == "body" and said in errors[0]["message"]


def test_a_huge_number_for_an_integer_says_too_large(client: TestClient) -> None:
    """1e30 read "Unable to parse input string as an integer, exceeded maximum size" before."""
    errors = errors_of(client.post("/v1/plan-jobs", json={**PLAN, "num_gpus": 1e30}))
    assert errors == [
        {
            "field": "num_gpus",
            "message": "num_gpus is too large (got 1e+30); see its limit in the schema",
        }
    ]
