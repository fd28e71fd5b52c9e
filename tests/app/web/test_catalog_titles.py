"""The clusters catalog page is titled for what it lists: the built-in presets and the user's own
clusters (QA fix8 item 4: it said "Cluster presets")."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.app.web.test_web import client  # noqa: F401 (fixture)

CLUSTER = {"gpu": "h100-sxm-80gb", "gpus_per_node": 8, "inter_node_bandwidth_bytes_per_s": 5e10}


def test_the_clusters_page_title_covers_user_clusters(client: TestClient) -> None:  # noqa: F811
    assert client.post("/v1/clusters", json={"slug": "mine", "spec": CLUSTER}).status_code == 201
    page = client.get("/catalog/clusters").text
    assert "<h1>Clusters: built-in presets and your own</h1>" in page
    assert "<title>Clusters: built-in presets and your own · Parallel Planner</title>" in page
    assert "Cluster presets" not in page
    assert "<code>mine</code>" in page and "<code>dgx-h100</code>" in page
