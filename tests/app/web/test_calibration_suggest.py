"""The web calibration page's "what to measure next" section (issue 12 item 10)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.app.web.test_web import build_app

LAYOUT = {
    "model": "llama3.1-8b",
    "gpu": "h100-sxm-80gb",
    "num_gpus": 16,
    "seq_length": 8192,
    "global_batch_size": 128,
    "tp": 2,
}


@pytest.fixture()
def client(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(build_app(tmp_path)) as c:
        yield c


def test_the_page_offers_the_suggestion_form(client: TestClient) -> None:
    page = client.get("/calibration").text
    assert 'id="suggest-form"' in page and "What to measure next" in page


def test_suggested_runs_are_listed_with_their_commands(client: TestClient) -> None:
    response = client.post("/calibration/suggest", data={"request": json.dumps(LAYOUT), "k": "2"})
    assert response.status_code == 200, response.text[:500]
    assert response.text.count("Launch run ") == 2
    assert "--train-iters 50" in response.text
    assert 'id="suggest-summary"' in response.text


def test_bad_json_is_a_field_error(client: TestClient) -> None:
    response = client.post("/calibration/suggest", data={"request": "{tp: 2", "k": "2"})
    assert response.status_code == 422
    assert 'id="suggest_request-error"' in response.text and "not JSON" in response.text
    response = client.post("/calibration/suggest", data={"request": json.dumps(LAYOUT), "k": "0"})
    assert response.status_code == 422 and 'id="suggest_k-error"' in response.text


def test_a_large_replica_gets_proxies_and_a_budget_note(client: TestClient) -> None:
    wide = {**LAYOUT, "model": "llama3.1-405b", "num_gpus": 576, "tp": 8, "cp": 4, "pp": 9}
    wide["seq_length"], wide["global_batch_size"] = 16384, 64
    response = client.post(
        "/calibration/suggest", data={"request": json.dumps(wide), "k": "2", "max_nodes": "4"}
    )
    assert response.status_code == 200, response.text[:500]
    assert 'id="suggest-note"' in response.text and "allow at least 8" in response.text
    response = client.post(
        "/calibration/suggest", data={"request": json.dumps(wide), "k": "2", "max_nodes": "x"}
    )
    assert response.status_code == 422 and 'id="suggest_max_nodes-error"' in response.text


def test_a_budget_past_the_limit_is_flagged_under_its_own_input(client: TestClient) -> None:
    """The request's bound (max_nodes <= 65536) was shown under the JSON textarea before."""
    data = {"request": json.dumps(LAYOUT), "k": "2", "max_nodes": "99999999"}
    response = client.post("/calibration/suggest", data=data)
    assert response.status_code == 422
    assert 'id="suggest_max_nodes-error"' in response.text
    assert 'id="suggest_request-error"' not in response.text


def test_a_budget_inside_the_json_applies_when_the_field_is_empty(client: TestClient) -> None:
    # the textarea takes the API's body ({"evaluation": ..., "max_nodes": 4}); an empty form
    # field must not erase its budget
    wide = {**LAYOUT, "model": "llama3.1-405b", "num_gpus": 576, "tp": 8, "cp": 4, "pp": 9}
    wide["seq_length"], wide["global_batch_size"] = 16384, 64
    body = json.dumps({"evaluation": wide, "max_nodes": 4})
    response = client.post(
        "/calibration/suggest", data={"request": body, "k": "2", "max_nodes": ""}
    )
    assert response.status_code == 200, response.text[:500]
    assert "allow at least 8" in response.text


def test_the_page_uses_the_clusters_calibration_and_rows_as_the_api_does(
    client: TestClient,
) -> None:
    """A request naming a stored cluster: the web answer is the API's (its newest calibration
    as the profile, its stored measurements as rows already known)."""
    from tests.app.calibration.test_api import _h100_rows

    rows = [r for r in _h100_rows(limit_sweeps=20) if r["precision"] == "bf16"][:8]
    assert client.post("/v1/clusters/dgx-h100/measurements", json=rows).status_code < 300
    assert client.post("/v1/clusters/dgx-h100/calibrations").status_code < 300
    req = {**{k: v for k, v in LAYOUT.items() if k != "gpu"}, "cluster": "dgx-h100"}
    api = client.post("/v1/calibration-suggestions", json={"evaluation": req, "k": 2}).json()
    assert api["profile"] == "fitted" and api["measured_rows"] == 8
    web = client.post("/calibration/suggest", data={"request": json.dumps(req), "k": "2"})
    assert web.status_code == 200, web.text[:500]
    before, after = api["plan_uncertainty_pct_before"], api["plan_uncertainty_pct_after"]
    assert f"±{before:.1f} % now and ±{after:.1f} % once" in web.text
    # the cluster's level: fitted on its 8 stored rows, then on those and the runs
    ub, ua = api["uncertainty_before"], api["uncertainty_after"]
    assert ub["cluster_level_rows"] == 8 and ua["cluster_level_rows"] == 8 + len(api["runs"])
    assert f"±{ub['cluster_level_pct']:.1f} % from 8 of its runs now" in web.text
