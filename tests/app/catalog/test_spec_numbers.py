"""Numbers in a user model, GPU or cluster spec follow the plan request's rule and wording: plain
decimal text is the number ("32" is stored as 32), other text, a boolean or null for a count is
a 422 naming ``spec.FIELD`` with the fix ("a number is expected"), and a huge number is a 422,
never a 500. The planner's own "num_layers='32' must be an integer" no longer reaches the API."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.catalog.schemas import LLAMA_70B_SPEC
from tests.app.conftest import DGX


def _gpu(client: TestClient) -> dict[str, Any]:
    spec = dict(client.get("/v1/gpus/h100-sxm-80gb").json()["spec"])
    spec.pop("name", None)
    return spec


def _one_error(response: Any) -> dict[str, str]:
    assert response.status_code == 422, response.text
    [error] = response.json()["errors"]
    return dict(error)


def test_model_number_text_is_read_as_the_number(client: TestClient) -> None:
    spec = {**LLAMA_70B_SPEC, "num_layers": "32", "hidden_dropout": "0.1"}
    response = client.post("/v1/models", json={"slug": "my-llama", "spec": spec})
    assert response.status_code == 201, response.text
    stored = client.get("/v1/models/my-llama").json()["spec"]
    assert stored["num_layers"] == 32 and stored["hidden_dropout"] == 0.1


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("1_6", "spec.num_layers: got the text '1_6': a number is expected (a whole number"),
        ("inf", "which is not a finite number: a number is expected"),
        (True, "spec.num_layers: got true: true/false is not a number; send a whole number"),
        (None, "spec.num_layers: Input should be a valid integer"),
        (32.5, "spec.num_layers: Input should be a valid integer, got a number with a fraction"),
        ("5000", "spec.num_layers=5000 is above the limit of 2048"),
        (2**63, "spec.num_layers=9.22337e+18 is above the limit of 2048"),
        (10**400, "spec.num_layers is above the limit of 2048 (got a huge number)"),
    ],
)
def test_a_bad_model_number_is_the_apis_422(client: TestClient, value: Any, says: str) -> None:
    spec = {**LLAMA_70B_SPEC, "num_layers": value}
    error = _one_error(client.post("/v1/models", json={"slug": "my-llama", "spec": spec}))
    assert error["field"] == "spec.num_layers"
    assert says in error["message"] and "must be an integer" not in error["message"]
    assert client.get("/v1/models/my-llama").status_code == 404


def test_a_new_version_with_bad_number_text_keeps_the_old_one(client: TestClient) -> None:
    assert client.post("/v1/models", json={"slug": "m", "spec": LLAMA_70B_SPEC}).status_code == 201
    spec = {**LLAMA_70B_SPEC, "num_query_groups": "٨"}  # an Arabic-Indic eight
    error = _one_error(client.put("/v1/models/m", json={"spec": spec}))
    assert error["field"] == "spec.num_query_groups" and "a number is expected" in error["message"]
    entry = client.get("/v1/models/m").json()
    assert entry["version"] == 1 and entry["spec"]["num_query_groups"] == 8


def test_gpu_number_text_is_read_and_a_huge_one_refused(client: TestClient) -> None:
    spec = _gpu(client) | {"hbm_bytes": "80000000000", "peak_fp8_flop_per_s": "1.979e15"}
    assert client.post("/v1/gpus", json={"slug": "g", "spec": spec}).status_code == 201
    stored = client.get("/v1/gpus/g").json()["spec"]
    assert stored["hbm_bytes"] == 80_000_000_000 and stored["peak_fp8_flop_per_s"] == 1.979e15
    huge = _gpu(client) | {"hbm_bytes": 10**400}
    error = _one_error(client.post("/v1/gpus", json={"slug": "g2", "spec": huge}))
    assert error["field"] == "spec.hbm_bytes" and "above the limit" in error["message"]
    text = _gpu(client) | {"hbm_bandwidth_bytes_per_s": "3,35e12"}
    error = _one_error(client.post("/v1/gpus", json={"slug": "g3", "spec": text}))
    assert error["field"] == "spec.hbm_bandwidth_bytes_per_s"
    assert error["message"].startswith("spec.hbm_bandwidth_bytes_per_s: got the text '3,35e12'")


def test_cluster_numbers_have_the_same_wording_under_spec(client: TestClient) -> None:
    ok = {**DGX, "gpus_per_node": "8"}
    assert client.post("/v1/clusters", json={"slug": "c", "spec": ok}).status_code == 201
    bad = {**DGX, "gpus_per_node": "1_6"}
    error = _one_error(client.post("/v1/clusters", json={"slug": "c2", "spec": bad}))
    assert error["field"] == "spec.gpus_per_node"
    assert error["message"].startswith("spec.gpus_per_node: got the text '1_6': a number is")
    huge = {**DGX, "inter_node_bandwidth_bytes_per_s": 10**400}
    error = _one_error(client.post("/v1/clusters", json={"slug": "c3", "spec": huge}))
    assert error["message"].endswith("too large (got a number of about 401 digits); see its limit")


def test_a_huge_number_in_a_hugging_face_config_is_a_422(client: TestClient) -> None:
    """The limit's message formatted 10**400 with :g, an OverflowError: a 500 before."""
    config = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 10**400}
    response = client.post("/v1/models/import-hf", json={"slug": "h", "config": config})
    assert response.status_code == 422, response.text
    assert response.json()["detail"] == (
        "config.num_hidden_layers is above the limit of 2048 (got a huge number)"
    )
