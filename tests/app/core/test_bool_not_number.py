"""A boolean is never a count or a size: ``true`` in an integer or float request field is a 422
naming the field on every route (pydantic's lax mode would read it as 1), while numeric text
("8") is still taken, because the web form, CLI flags and CSV/YAML batch rows build the same
request models from text. Every request body derives from ``RequestModel``, so no route can
forget."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.core.schemas import RequestModel
from app.planning.convert import RequestError, parse_request
from app.planning.schemas import PlanJobCreate
from tests.app.conftest import JOB_70B, LAYOUT_70B


def _only_error(response: Any) -> dict[str, str]:
    assert response.status_code == 422, response.text
    errors: list[dict[str, str]] = response.json()["errors"]
    assert len(errors) == 1, errors
    return errors[0]


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/plan-jobs", {**JOB_70B, "num_gpus": True}, "num_gpus"),
        ("/v1/calibration-suggestions", {"plan": JOB_70B, "max_nodes": True}, "max_nodes"),
        ("/v1/calibration-suggestions", {"plan": JOB_70B, "k": True}, "k"),
        ("/v1/plan-jobs", {**JOB_70B, "top_k": False}, "top_k"),
        ("/v1/plan-jobs", {**JOB_70B, "memory_threshold": True}, "memory_threshold"),
        ("/v1/plan-jobs", {**JOB_70B, "num_gpus_options": [8, True]}, "num_gpus_options.1"),
        ("/v1/evaluations", {**LAYOUT_70B, "global_batch_size": True}, "global_batch_size"),
        ("/v1/evaluations", {**LAYOUT_70B, "gpu_memory_gib": True}, "gpu_memory_gib"),
        ("/v1/evaluations", {**LAYOUT_70B, "nics_per_node": True}, "nics_per_node"),
        ("/v1/evaluations/bulk", {**JOB_70B, "layouts": [{"tp": True}]}, "layouts.0.tp"),
        ("/v1/scaling-curves", {**JOB_70B, "usd_per_gpu_hour": True}, "usd_per_gpu_hour"),
    ],
)
def test_a_boolean_in_a_number_field_is_a_422_naming_it(
    client: TestClient, path: str, body: dict[str, Any], field: str
) -> None:
    error = _only_error(client.post(path, json=body))
    assert error["field"] == field
    assert "true/false is not a number" in error["message"]


def test_a_boolean_axis_says_what_is_accepted(client: TestClient) -> None:
    error = _only_error(client.post("/v1/plan-jobs", json={**JOB_70B, "tp": True}))
    assert error == {
        "field": "tp",
        "message": "tp must be an integer or a list of integers (got true)",
    }


def test_the_message_says_how_to_fix_it(client: TestClient) -> None:
    error = _only_error(client.post("/v1/plan-jobs", json={**JOB_70B, "num_gpus": True}))
    assert error["message"] == (
        "num_gpus: got true: true/false is not a number; send a whole number such as 8"
    )
    error = _only_error(client.post("/v1/plan-jobs", json={**JOB_70B, "token_budget": False}))
    assert error["message"].endswith("send a number such as 0.8")


def test_a_boolean_cluster_field_is_refused(client: TestClient) -> None:
    spec = {"gpu": "h100-sxm-80gb", "gpus_per_node": True}
    response = client.post("/v1/clusters", json={"slug": "boolean-node", "spec": spec})
    assert response.status_code == 422, response.text
    assert "gpus_per_node" in response.text


def test_numeric_text_is_still_a_number() -> None:
    """The web form and CSV rows send text: "64" stays 64 (the chosen policy)."""
    request = parse_request(PlanJobCreate, {**JOB_70B, "num_gpus": "64", "top_k": "3"})
    assert (request.num_gpus, request.top_k) == (64, 3)
    with pytest.raises(RequestError, match="num_gpus"):
        parse_request(PlanJobCreate, {**JOB_70B, "num_gpus": True})


def test_booleans_still_validate_as_booleans(client: TestClient) -> None:
    response = client.post("/v1/plan-jobs", json={**JOB_70B, "exhaustive": True, "pareto": False})
    assert response.status_code == 202, response.text


def test_every_request_body_is_a_request_model(client: TestClient) -> None:
    """A new route whose body model forgets the base would take true as 1 again."""
    bodies = set()
    routes = list(client.app.routes)  # type: ignore[attr-defined]
    for route in routes:  # included routers keep their routes on the original router
        routes.extend(getattr(getattr(route, "original_router", None), "routes", []))
        field = getattr(route, "body_field", None)
        annotation = getattr(getattr(field, "field_info", None), "annotation", None)
        if isinstance(annotation, type) and annotation.__module__.startswith("app."):
            bodies.add(annotation)
    assert len(bodies) >= 8, bodies
    assert [b.__name__ for b in bodies if not issubclass(b, RequestModel)] == []
