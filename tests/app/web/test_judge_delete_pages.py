"""Deleting from the pages (QA round 8): a user's model, GPU or cluster from its catalog page,
after a confirmation that says what goes with it; a cluster's stored runs from the calibration
page. The API's 409 for a cluster with stored rows is shown in the page with the way out."""

from __future__ import annotations

import html
from pathlib import Path

from fastapi.testclient import TestClient
from httpx import Response

from tests.app.web.test_web import client  # noqa: F401 (fixture)

EXAMPLE_ROWS = Path(__file__).parents[3] / "examples" / "measurements.csv"
CLUSTER = {"gpu": "h100-sxm-80gb", "gpus_per_node": 8, "inter_node_bandwidth_bytes_per_s": 5e10}


def _cluster_with_rows(client: TestClient, slug: str = "my-h100") -> int:  # noqa: F811
    assert client.post("/v1/clusters", json={"slug": slug, "spec": CLUSTER}).status_code == 201
    r = client.post(
        f"/v1/clusters/{slug}/measurements",
        content=EXAMPLE_ROWS.read_bytes(),
        headers={"content-type": "text/csv"},
    )
    assert r.status_code == 201, r.text
    return int(r.json()["total"])


def _stored(client: TestClient) -> int:  # noqa: F811
    return len(client.get("/v1/clusters/my-h100/measurements").json()["items"])


def _text(response: Response) -> str:
    return html.unescape(response.text)  # the page writes ' as &#39;


def test_only_user_clusters_have_a_delete_button(client: TestClient) -> None:  # noqa: F811
    client.post("/v1/clusters", json={"slug": "mine", "spec": CLUSTER})
    html = client.get("/catalog/clusters").text
    assert 'action="/catalog/clusters/mine/delete"' in html
    assert 'action="/catalog/clusters/dgx-h100/delete"' not in html
    assert "POST /v1/clusters" in html  # how to add or change one


def test_deleting_a_cluster_with_rows_says_what_goes_and_purges_on_confirm(
    client: TestClient,  # noqa: F811
) -> None:
    n = _cluster_with_rows(client)
    ask = client.post("/catalog/clusters/my-h100/delete", data={})
    assert ask.status_code == 200
    assert f"has {n} stored measurements and 0 calibrations" in _text(ask)
    assert 'name="purge" value="1"' in _text(ask)
    assert client.get("/v1/clusters/my-h100").status_code == 200  # nothing deleted yet
    done = client.post(
        "/catalog/clusters/my-h100/delete",
        data={"confirm": "1", "purge": "1"},
        follow_redirects=False,
    )
    assert done.status_code == 303
    assert done.headers["location"] == "/catalog/clusters?deleted=my-h100"
    assert client.get("/v1/clusters/my-h100").status_code == 404
    assert "Deleted <code>my-h100</code>" in client.get(done.headers["location"]).text


def test_the_api_409_is_shown_in_the_page_with_the_purge_button(
    client: TestClient,  # noqa: F811
) -> None:
    """A confirmation without purge (rows stored after the page asked) is refused, readably."""
    n = _cluster_with_rows(client)
    refused = client.post("/catalog/clusters/my-h100/delete", data={"confirm": "1"})
    assert refused.status_code == 409
    assert f"Not deleted: Cluster 'my-h100' has {n} stored measurements" in _text(refused)
    assert 'name="purge" value="1"' in _text(refused)
    assert _stored(client) == n


def test_a_gpu_in_use_is_not_deleted_and_the_page_says_by_whom(
    client: TestClient,  # noqa: F811
) -> None:
    spec = client.get("/v1/gpus/h100-sxm-80gb").json()["spec"]
    assert client.post("/v1/gpus", json={"slug": "my-gpu", "spec": spec}).status_code == 201
    cluster = CLUSTER | {"gpu": "my-gpu"}
    assert client.post("/v1/clusters", json={"slug": "on-mine", "spec": cluster}).status_code == 201
    r = client.post("/catalog/gpus/my-gpu/delete", data={"confirm": "1"})
    assert r.status_code == 409
    assert "Not deleted: GPU 'my-gpu' is used by cluster(s) on-mine" in _text(r)
    assert client.get("/v1/gpus/my-gpu").status_code == 200


def test_an_unknown_entry_is_a_404_in_the_page(client: TestClient) -> None:  # noqa: F811
    r = client.post("/catalog/models/nope/delete", data={"confirm": "1"})
    assert r.status_code == 404 and "Not deleted: " in _text(r)


def test_calibration_page_deletes_stored_runs_after_saying_how_many(
    client: TestClient,  # noqa: F811
) -> None:
    n = _cluster_with_rows(client)
    ask = client.post("/calibration/measurements/delete", data={"cluster": "my-h100"})
    assert f"my-h100 has {n} stored measurements and 0 calibrations" in _text(ask)
    assert _stored(client) == n
    other = client.post(  # a confirmation for another cluster than the one asked about
        "/calibration/measurements/delete", data={"cluster": "my-h100", "confirm": "dgx-h100"}
    )
    assert "Deleted" not in other.text
    assert _stored(client) == n
    done = client.post(
        "/calibration/measurements/delete", data={"cluster": "my-h100", "confirm": "my-h100"}
    )
    assert f"Deleted {n} stored measurements and 0 calibrations of my-h100" in _text(done)
    assert _stored(client) == 0
    assert client.get("/v1/clusters/my-h100").status_code == 200  # the cluster stays


def test_calibration_page_names_an_unknown_cluster_beside_its_select(
    client: TestClient,  # noqa: F811
) -> None:
    r = client.post("/calibration/measurements/delete", data={"cluster": "nope"})
    assert r.status_code == 404
    assert 'id="delete_cluster-error"' in _text(r) and "no cluster named 'nope'" in _text(r)
