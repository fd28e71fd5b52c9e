"""Rows of a deleted cluster are detached, never adopted: measurements and calibrations belong
to the cluster's catalog entry, so a cluster created again under a deleted one's name starts
empty (no fit, no level), whatever path deleted the old one. An operator lists the detached
rows per former name (``GET /v1/detached-measurements``), reads them, and deletes them."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from app.calibration.repository import MeasurementRepository
from app.catalog.service import CatalogService
from app.planning.service import resolve_references
from tests.app.calibration.test_cluster_delete import CLUSTER, URL, _measured_and_calibrated, _rows

DETACHED = "/v1/detached-measurements"


def _session(client: TestClient) -> Any:
    return client.app.state.session_factory()  # type: ignore[attr-defined]


def _delete_entry_behind_the_route(client: TestClient, slug: str = "my-dgx") -> None:
    """Delete the catalog entry without the route's 409 (an older release's DELETE, a script)."""
    with _session(client) as session:
        CatalogService(session).delete("cluster", slug)
        session.commit()


def _left_behind(client: TestClient) -> None:
    _measured_and_calibrated(client)  # my-dgx: 3 measurements, 1 calibration
    _delete_entry_behind_the_route(client)
    assert client.post("/v1/clusters", json=CLUSTER).status_code == 201


def test_a_cluster_created_again_does_not_adopt_its_namesakes_rows(client: TestClient) -> None:
    _left_behind(client)
    assert client.get(f"{URL}/measurements").json()["items"] == []
    assert client.get(f"{URL}/calibrations").json()["items"] == []
    with _session(client) as session:  # the plan's profile: no calibration of the old cluster
        _, resolved = resolve_references(session, {"model": "llama3.1-70b", "cluster": "my-dgx"})
        assert MeasurementRepository(session).count("my-dgx") == 0
    assert "profile" not in resolved
    assert client.post(f"{URL}/calibrations").status_code == 409  # nothing to fit
    assert client.delete(URL).status_code == 204  # no rows of its own: no purge needed


def test_the_new_clusters_rows_are_its_own(client: TestClient) -> None:
    _left_behind(client)
    assert client.post(f"{URL}/measurements", json=_rows()[:2]).status_code == 201
    assert len(client.get(f"{URL}/measurements").json()["items"]) == 2
    assert client.get(DETACHED).json()["items"][0]["measurements"] == 3  # the old ones apart


def test_detached_rows_are_counted_per_former_name(client: TestClient) -> None:
    _left_behind(client)
    items = client.get(DETACHED).json()["items"]
    assert [(i["cluster"], i["measurements"], i["calibrations"]) for i in items] == [
        ("my-dgx", 3, 1)
    ]
    assert items[0]["first_stored_at"] <= items[0]["last_stored_at"]


def test_detached_rows_can_be_read_before_deleting_them(client: TestClient) -> None:
    _left_behind(client)
    rows = client.get(f"{DETACHED}/my-dgx").json()
    assert len(rows["measurements"]) == 3 and len(rows["calibrations"]) == 1
    assert rows["measurements"][0]["data"]["tp"] == _rows()[0]["tp"]
    assert rows["calibrations"][0]["cluster"] == "my-dgx"


def test_deleting_one_former_name_leaves_the_others(client: TestClient) -> None:
    _left_behind(client)
    other = {"slug": "other", "spec": CLUSTER["spec"]}
    assert client.post("/v1/clusters", json=other).status_code == 201
    assert client.post("/v1/clusters/other/measurements", json=_rows()).status_code == 201
    _delete_entry_behind_the_route(client, "other")
    r = client.delete(f"{DETACHED}/my-dgx")
    assert r.status_code == 200, r.text
    assert r.json() == {"measurements": 3, "calibrations": 1}
    assert [i["cluster"] for i in client.get(DETACHED).json()["items"]] == ["other"]
    assert client.delete(DETACHED).json() == {"measurements": 3, "calibrations": 0}
    assert client.get(DETACHED).json()["items"] == []


def test_an_unknown_former_name_is_a_404_that_says_where_to_look(client: TestClient) -> None:
    for response in (client.get(f"{DETACHED}/nowhere"), client.delete(f"{DETACHED}/nowhere")):
        assert response.status_code == 404, response.text
        assert f"GET {DETACHED}" in response.json()["detail"]


def test_a_live_clusters_rows_are_not_detached(client: TestClient) -> None:
    """Presets (models_db) take measurements too; their entries cannot be deleted (409), so
    their rows stay theirs: never listed or deleted as detached."""
    assert client.post("/v1/clusters/dgx-h100/measurements", json=_rows()).status_code == 201
    assert client.delete("/v1/clusters/dgx-h100?purge=true").status_code == 409
    assert client.get(DETACHED).json()["items"] == []
    assert client.delete(DETACHED).json() == {"measurements": 0, "calibrations": 0}
    assert len(client.get("/v1/clusters/dgx-h100/measurements").json()["items"]) == 3


def test_the_sdk_lists_reads_and_deletes_detached_rows(client: TestClient) -> None:
    from app.sdk import PlannerClient

    _left_behind(client)
    with PlannerClient("http://testserver", transport=client._transport) as sdk:
        assert sdk.detached_measurements()["items"][0]["cluster"] == "my-dgx"
        assert len(sdk.detached_measurements("my-dgx")["measurements"]) == 3
        assert sdk.delete_detached_measurements("my-dgx") == {"measurements": 3, "calibrations": 1}
        assert sdk.delete_detached_measurements() == {"measurements": 0, "calibrations": 0}


def test_a_preset_seeded_under_a_deleted_clusters_name_starts_empty(client: TestClient) -> None:
    """A later models_db release may ship a preset under the name of a user's deleted cluster:
    the seeded entry is new, so the old rows stay detached."""
    from app.catalog.service import seed_builtins

    _measured_and_calibrated(client)
    _delete_entry_behind_the_route(client)
    with _session(client) as session:
        assert seed_builtins(session, {"cluster": {"my-dgx": dict(CLUSTER["spec"])}}) == 1
        session.commit()
    assert client.get(URL).json()["builtin"] is True
    assert client.get(f"{URL}/measurements").json()["items"] == []
    assert client.get(DETACHED).json()["items"][0]["cluster"] == "my-dgx"
