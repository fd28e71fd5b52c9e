"""Deleting a cluster never drops its measurements or calibrations by accident (rows of a
deleted cluster are kept detached, never inherited by a namesake: test_detached.py). A cluster
that has any is a 409 saying how many and how to proceed; ``?purge=true`` deletes all in one unit
of work; ``DELETE .../measurements`` deletes the rows and the calibrations fitted to them."""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "measurements.csv"
CLUSTER = {"slug": "my-dgx", "spec": {"gpu": "h100-sxm-80gb", "gpus_per_node": 8}}
URL = "/v1/clusters/my-dgx"


def _rows() -> list[dict[str, Any]]:
    with EXAMPLE.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))[:3]


def _measured_and_calibrated(client: TestClient) -> None:
    """my-dgx with 3 measurements and 1 calibration (the fit itself is test_api.py's)."""
    app: Any = client.app
    app.state.backend = replace(
        app.state.backend, calibrate=lambda rows, gpu: ({"gpu": gpu}, {"rows": len(rows)})
    )
    assert client.post("/v1/clusters", json=CLUSTER).status_code == 201
    assert client.post(f"{URL}/measurements", json=_rows()).status_code == 201
    assert client.post(f"{URL}/calibrations").status_code == 201


def _stored(client: TestClient) -> tuple[int, int]:
    measurements = client.get(f"{URL}/measurements").json()["items"]
    return len(measurements), len(client.get(f"{URL}/calibrations").json()["items"])


def test_a_cluster_with_measurements_is_a_409_that_says_how_to_proceed(client: TestClient) -> None:
    _measured_and_calibrated(client)
    r = client.delete(URL)
    assert r.status_code == 409, r.text
    detail = r.json()["detail"]
    assert "3 measurement(s) and 1 calibration(s)" in detail
    assert "?purge=true" in detail and "DELETE /v1/clusters/my-dgx/measurements" in detail
    assert client.get(URL).status_code == 200
    assert _stored(client) == (3, 1)  # nothing lost


def test_purge_deletes_the_cluster_and_its_rows_so_a_new_one_starts_empty(
    client: TestClient,
) -> None:
    _measured_and_calibrated(client)
    assert client.delete(f"{URL}?purge=true").status_code == 204
    assert client.get(URL).status_code == 404
    assert client.post("/v1/clusters", json=CLUSTER).status_code == 201
    assert _stored(client) == (0, 0)


def test_deleting_the_measurements_takes_the_calibrations_and_frees_the_cluster(
    client: TestClient,
) -> None:
    _measured_and_calibrated(client)
    assert client.delete(f"{URL}/measurements").status_code == 204
    assert _stored(client) == (0, 0)
    assert client.get(URL).status_code == 200  # the cluster itself stays
    assert client.delete(URL).status_code == 204


def test_deleting_measurements_leaves_other_clusters_alone(client: TestClient) -> None:
    _measured_and_calibrated(client)
    assert client.post("/v1/clusters/dgx-h100/measurements", json=_rows()).status_code == 201
    assert client.delete(f"{URL}/measurements").status_code == 204
    assert len(client.get("/v1/clusters/dgx-h100/measurements").json()["items"]) == 3


def test_measurements_of_an_unknown_cluster_are_a_404(client: TestClient) -> None:
    r = client.delete("/v1/clusters/nowhere/measurements")
    assert r.status_code == 404, r.text
    assert "nowhere" in r.json()["detail"]


def test_an_unknown_cluster_is_a_404_even_with_purge(client: TestClient) -> None:
    assert client.delete("/v1/clusters/nowhere?purge=true").status_code == 404


def test_purging_a_built_in_cluster_is_refused_and_keeps_its_rows(client: TestClient) -> None:
    assert client.post("/v1/clusters/dgx-h100/measurements", json=_rows()).status_code == 201
    r = client.delete("/v1/clusters/dgx-h100?purge=true")
    assert r.status_code == 409, r.text
    assert "built in" in r.json()["detail"]
    assert len(client.get("/v1/clusters/dgx-h100/measurements").json()["items"]) == 3


def test_the_sdk_deletes_measurements_and_purges_a_cluster(client: TestClient) -> None:
    from app.sdk import PlannerAPIError, PlannerClient

    _measured_and_calibrated(client)
    with PlannerClient("http://testserver", transport=client._transport) as sdk:
        try:
            sdk.delete_cluster("my-dgx")
        except PlannerAPIError as exc:
            assert exc.status == 409
        else:
            raise AssertionError("a cluster with measurements was deleted without purge")
        sdk.delete_measurements("my-dgx")
        assert _stored(client) == (0, 0)
        assert client.post(f"{URL}/measurements", json=_rows()).status_code == 201
        sdk.delete_cluster("my-dgx", purge=True)
    assert client.get(URL).status_code == 404
