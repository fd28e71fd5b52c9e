"""Rows of deleted clusters on the calibration page: each former name with its counts, its runs
as the JSON the upload form takes (the way to attach them to a cluster), and a delete that asks
first and says what it deleted."""

from __future__ import annotations

import html
import json
from typing import Any

from fastapi.testclient import TestClient

from app.catalog.service import CatalogService
from tests.app.calibration.test_cluster_delete import _measured_and_calibrated, _rows
from tests.app.web.test_web import client  # noqa: F401 (fixture)

DETACHED = "/v1/detached-measurements"


def _detach(client: TestClient, slug: str = "my-dgx") -> None:  # noqa: F811
    """my-dgx's 3 runs and 1 calibration, detached: its entry deleted behind the route's 409."""
    _measured_and_calibrated(client)
    app: Any = client.app
    with app.state.session_factory() as session:
        CatalogService(session).delete("cluster", slug)
        session.commit()


def _page(client: TestClient) -> str:  # noqa: F811
    return html.unescape(client.get("/calibration").text)


def test_the_page_lists_each_former_name_with_its_counts(client: TestClient) -> None:  # noqa: F811
    assert "No rows of deleted clusters are stored." in _page(client)
    _detach(client)
    page = _page(client)
    assert '<th scope="row"><code>my-dgx</code></th>' in page
    assert 'data-label="Measurements">3</td>' in page
    assert 'data-label="Calibrations">1</td>' in page
    assert 'Delete 4 rows<span class="sr-only"> of my-dgx</span>…' in page
    assert "The API has no route that attaches them to a cluster" in page


def test_the_first_press_asks_with_the_counts_and_deletes_nothing(
    client: TestClient,  # noqa: F811
) -> None:
    _detach(client)
    r = client.post("/calibration/detached/delete", data={"former": "my-dgx"})
    assert r.status_code == 200
    text = html.unescape(r.text)
    assert "The deleted cluster my-dgx left 3 measurements and 1 calibration" in text
    assert "Delete 3 measurements and 1 calibration of my-dgx</button>" in text
    assert client.get(DETACHED).json()["items"][0]["measurements"] == 3


def test_the_confirmed_press_deletes_that_name_only(client: TestClient) -> None:  # noqa: F811
    _detach(client)
    data = {"former": "my-dgx", "confirm": "my-dgx"}
    r = client.post("/calibration/detached/delete", data=data)
    assert r.status_code == 200
    text = html.unescape(r.text)
    assert "Deleted 3 detached measurements and 1 calibration of the deleted cluster my-dgx" in text
    assert client.get(DETACHED).json()["items"] == []
    assert "No rows of deleted clusters are stored." in text


def test_a_confirmation_for_another_name_deletes_nothing(client: TestClient) -> None:  # noqa: F811
    _detach(client)
    r = client.post("/calibration/detached/delete", data={"former": "my-dgx", "confirm": "x"})
    assert "Delete 3 measurements" in html.unescape(r.text)
    assert client.get(DETACHED).json()["items"][0]["measurements"] == 3


def test_an_unknown_name_is_a_404_in_the_page(client: TestClient) -> None:  # noqa: F811
    r = client.post("/calibration/detached/delete", data={"former": "nope", "confirm": "nope"})
    assert r.status_code == 404
    assert "No detached rows are stored under nope" in html.unescape(r.text)
    assert client.get("/calibration/detached/nope/runs.json").status_code == 404


def test_the_runs_download_is_the_upload_forms_json_and_attaches_them(
    client: TestClient,  # noqa: F811
) -> None:
    _detach(client)
    r = client.get("/calibration/detached/my-dgx/runs.json")
    assert r.status_code == 200
    assert "attachment" in r.headers["content-disposition"]
    rows = json.loads(r.text)
    assert [row["tp"] for row in rows] == [row["tp"] for row in _rows()]
    spec = {"gpu": "h100-sxm-80gb", "gpus_per_node": 8}
    assert client.post("/v1/clusters", json={"slug": "new-dgx", "spec": spec}).status_code == 201
    up = client.post(
        "/v1/clusters/new-dgx/measurements",
        content=r.content,
        headers={"content-type": "application/json"},
    )
    assert up.status_code == 201, up.text
    assert len(client.get("/v1/clusters/new-dgx/measurements").json()["items"]) == 3
