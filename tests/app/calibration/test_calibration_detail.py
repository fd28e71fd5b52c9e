"""GET /v1/clusters/{slug}/calibrations/{id}: a calibration with the comparison its web page
shows, stored with the fit (SQLite and PostgreSQL)."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.app.calibration.test_api import _h100_rows


def test_a_calibration_carries_its_stored_comparison(client: TestClient) -> None:
    rows = [r for r in _h100_rows(limit_sweeps=20) if r["precision"] == "bf16"][:6]
    assert client.post("/v1/clusters/dgx-h100/measurements", json=rows).status_code == 201
    made = client.post("/v1/clusters/dgx-h100/calibrations")
    assert made.status_code == 201, made.text
    assert "comparison" not in made.json()["report"]  # stored apart, not in the report
    got = client.get(f"/v1/clusters/dgx-h100/calibrations/{made.json()['id']}")
    assert got.status_code == 200, got.text
    body = got.json()
    assert body["profile"] == made.json()["profile"]
    comparison = body["comparison"]
    assert comparison["n_rows"] == len(comparison["chart"]["before"]) == 6
    assert {p["x"] for p in comparison["chart"]["after"]} == {
        p["x"] for p in comparison["chart"]["before"]
    }
    again = client.get(f"/v1/clusters/dgx-h100/calibrations/{made.json()['id']}").json()
    assert again["comparison"] == comparison
