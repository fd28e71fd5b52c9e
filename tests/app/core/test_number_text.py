"""A number sent as text in a JSON body is read only as plain ASCII decimal: pydantic's lax
mode would read "1_6" as 16 and "٣" (an Arabic-Indic three) as 3, and "1e309" overflows to
infinity. Every body derives from ``RequestModel``, so each route answers 422 naming the field
and saying a number is expected; "16" stays 16 (web forms and batch rows send text)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from app.batches.schemas import BatchJobCreate
from app.planning.convert import parse_request
from app.planning.schemas import PlanJobCreate
from tests.app.catalog.test_api import SMALL
from tests.app.conftest import JOB_70B, LAYOUT_70B

TEXTS = ["1_6", "٣", "1e309", "inf", "NaN", "0x10", "²", "16 GPUs"]


def _only_error(response: Any) -> dict[str, str]:
    assert response.status_code == 422, response.text
    errors: list[dict[str, str]] = response.json()["errors"]
    assert len(errors) == 1, errors
    return errors[0]


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/plan-jobs", lambda t: {**JOB_70B, "num_gpus": t}, "num_gpus"),
        ("/v1/plan-jobs", lambda t: {**JOB_70B, "memory_threshold": t}, "memory_threshold"),
        ("/v1/evaluations", lambda t: {**LAYOUT_70B, "global_batch_size": t}, "global_batch_size"),
        ("/v1/evaluations", lambda t: {**LAYOUT_70B, "gpu_memory_gib": t}, "gpu_memory_gib"),
        ("/v1/evaluations/bulk", lambda t: {**JOB_70B, "layouts": [{"tp": t}]}, "layouts.0.tp"),
        ("/v1/clusters", lambda t: {"slug": "c", "spec": {"gpu": "h100-sxm-80gb",
                                                          "gpus_per_node": t}},
         "spec.gpus_per_node"),
    ],
)  # fmt: skip
def test_number_text_that_is_not_ascii_decimal_is_a_422_naming_the_field(
    client: TestClient, path: str, body: Any, field: str, text: str
) -> None:
    error = _only_error(client.post(path, json=body(text)))
    assert error["field"] == field
    assert "a number is expected" in error["message"], error
    assert repr(text) in error["message"]


def test_the_message_says_finite_for_an_overflow(client: TestClient) -> None:
    error = _only_error(client.post("/v1/plan-jobs", json={**JOB_70B, "token_budget": "1e309"}))
    assert error["field"] == "token_budget"
    assert error["message"] == (
        "token_budget: got the text '1e309', which is not a finite number: a number is "
        "expected (a number such as 0.8; a JSON number, or text in plain ASCII digits with an "
        "optional sign, '.' and exponent)"
    )


@pytest.mark.parametrize("text", ["1_6", "٣", "1e309"])
def test_a_model_spec_reads_number_text_as_the_plan_request_does(
    client: TestClient, text: str
) -> None:
    """A model entry's numbers follow the request's rule and wording (the planner's "must be an
    integer" before), and nothing of the refused entry is stored."""
    spec = {**SMALL, "num_layers": text}
    error = _only_error(client.post("/v1/models", json={"slug": "tiny", "spec": spec}))
    assert error["field"] == "spec.num_layers"
    assert error["message"].startswith(f"spec.num_layers: got the text {text!r}")
    assert "a number is expected (a whole number such as 8;" in error["message"]
    assert "tiny" not in [m["slug"] for m in client.get("/v1/models").json()["items"]]


def test_a_model_spec_with_plain_number_text_is_stored(client: TestClient) -> None:
    spec = {**SMALL, "num_layers": "16"}
    response = client.post("/v1/models", json={"slug": "tiny", "spec": spec})
    assert response.status_code == 201, response.text
    assert response.json()["spec"]["num_layers"] == 16


def test_a_cluster_with_plain_number_text_is_stored(client: TestClient) -> None:
    spec = {"gpu": "h100-sxm-80gb", "gpus_per_node": "8"}
    response = client.post("/v1/clusters", json={"slug": "plain", "spec": spec})
    assert response.status_code == 201, response.text
    assert response.json()["spec"]["gpus_per_node"] == 8


@pytest.mark.parametrize("text", ["1_6", "٣", "1e309"])
def test_a_batch_job_with_number_text_fails_naming_the_field(text: str) -> None:
    """Batch jobs are validated as BatchJobCreate (in the API's body too): the same rule."""
    with pytest.raises(ValidationError) as caught:
        BatchJobCreate.model_validate({**JOB_70B, "name": "a", "global_batch_size": text})
    (error,) = caught.value.errors()
    assert error["loc"] == ("global_batch_size",)
    assert "a number is expected" in error["msg"]


def test_plain_number_text_is_still_a_number() -> None:
    request = parse_request(
        PlanJobCreate, {**JOB_70B, "num_gpus": " 64", "memory_threshold": "0.9", "top_k": "+3"}
    )
    assert (request.num_gpus, request.memory_threshold, request.top_k) == (64, 0.9, 3)
