"""The SDK quotes every name it puts in a path: ``delete_detached_measurements("../clusters/c1")``
sent ``DELETE /v1/clusters/c1`` (httpx resolves dot segments) and deleted a live cluster
(QA round 9). Now the name stays one segment of its own route and gets that route's 404."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.sdk import PlannerAPIError, PlannerClient

CLUSTER = {"gpu": "h100-sxm-80gb", "gpus_per_node": 8, "inter_node_bandwidth_bytes_per_s": 5e10}


def test_a_name_with_dot_segments_stays_in_its_route(client: TestClient) -> None:
    assert client.post("/v1/clusters", json={"slug": "c1", "spec": CLUSTER}).status_code == 201
    with PlannerClient("http://testserver", transport=client._transport) as sdk:
        with pytest.raises(PlannerAPIError) as info:
            sdk.delete_detached_measurements("../clusters/c1")
        assert info.value.status in (404, 422)
        with pytest.raises(PlannerAPIError):
            sdk.get_job("../clusters/c1")
        with pytest.raises(PlannerAPIError) as info:
            sdk.delete_cluster("../models/x")  # was DELETE /v1/models/x
        assert info.value.status == 404
    assert client.get("/v1/clusters/c1").status_code == 200  # still there
