"""``"num_gpus": [64, 128]`` (or the CLI's text ``"64-512"``) says where several values go
(``num_gpus_options``) instead of the bare "Input should be a valid integer" (QA round 9)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

JOB = {"model": "llama3.1-70b", "gpu": "h100-sxm-80gb", "seq_length": 8192}


@pytest.mark.parametrize(
    ("field", "route", "value"),
    [
        ("num_gpus", "/v1/plan-jobs", [64, 128]),
        ("num_gpus", "/v1/plan-jobs", "64-512"),  # the CLI's range, sent as text
        ("global_batch_size", "/v1/plan-jobs", "128,256"),
        ("global_batch_size", "/v1/plan-jobs", [128, 256]),
        ("num_gpus", "/v1/evaluations", [64, 128]),
    ],
)
def test_a_list_for_one_number_names_the_options_field(
    client: TestClient, field: str, route: str, value: object
) -> None:
    body = {**JOB, "num_gpus": 64, "global_batch_size": 128, field: value}
    r = client.post(route, json=body)
    assert r.status_code == 422
    [error] = r.json()["errors"]
    assert error["field"] == field
    assert f"takes several as {field}_options" in error["message"]


def test_the_options_field_takes_the_list(client: TestClient) -> None:
    body = {**JOB, "num_gpus_options": [64, 128], "global_batch_size": 128}
    assert client.post("/v1/plan-jobs", json=body).status_code == 202
